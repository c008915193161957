"""The consume service (llog/service/consume.py), the produce service and the batching producer
on a real Oxia server and moto S3.

Storage work is counted with the stores' own ``OperationCounters``: a reader
gets a ``BlobStore``/``OxiaStore`` of its own so its calls are the only ones
counted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import NamedTuple, NoReturn

import pytest

from llog.config import OxiaConfig, S3Config, WriterConfig
from llog.errors import OxiaUnavailable, UnknownTopic
from llog.format.codec import Record, decode_batch, encode_batch
from llog.format.kv.control import AppendProtocol
from llog.protocol import faults
from llog.protocol.append import AppendResult, LogWriter, SharedAppendGroup
from llog.protocol.read import LogReader
from llog.protocol.topics import TopicConfig, TopicRegistry, reclaim_topic
from llog.service import consume
from llog.service.consume import ConsumeRequest, ConsumeService, FetchPartition, PartitionFetch
from llog.service.produce import ProduceService
from llog.service.tail_cache import TailCache
from llog.store.changes import Wakeup
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from server.batching import BatchingConfig, BatchingProducer
from tests.conftest import BUCKET
from tests.faults import SimulatedCrash
from tests.protocols import CAS, CAS_S3_ONLY

pytestmark = pytest.mark.oxia

MB = 1024 * 1024
# One round of a consume of one partition: its control record, and the index page proving a sequential end.
MAX_ROUND_READS = 2


def request(
    *parts: FetchPartition, max_wait_ms: int = 0, min_bytes: int = 1, max_bytes: int = 4 * MB
) -> ConsumeRequest:
    return ConsumeRequest(list(parts), max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes)


def part(topic: str, partition: int = 0, offset: int = 1, max_bytes: int = MB) -> FetchPartition:
    return FetchPartition(topic, partition, offset, max_bytes)


def values(result: PartitionFetch) -> list[bytes]:
    return [r.value for r in result.records]


@pytest.fixture
def reader_storage(oxia_config: OxiaConfig, s3_config: S3Config, root: str) -> Iterator[Storage]:
    """Stores used only by the consume service under test: their counters count its calls alone."""
    with OxiaStore(oxia_config) as oxia:
        yield Storage(oxia, BlobStore(s3_config), BUCKET, root)


@pytest.fixture
def service(reader_storage: Storage) -> ConsumeService:
    return ConsumeService(LogReader(reader_storage))


def await_notifications(oxia: OxiaStore, timeout_s: float = 30) -> None:
    """Start ``oxia``'s change feed and return once its streams are up.

    The first long-poll of a process re-reads Oxia once when the streams come
    up (a change may have gone unnotified before); tests that count a waiter's
    Oxia calls start from a live feed. Makes one Oxia call.
    """
    feed = oxia.changes()
    oxia.get("any-key", partition_key="any")  # the feed uses the client the store's calls open
    with feed.watching(Wakeup(), {}):
        deadline = time.monotonic() + timeout_s
        while not feed.live:
            assert time.monotonic() < deadline, "Oxia's notification streams did not come up"
            time.sleep(0.01)


class TailCached(NamedTuple):
    """A writer feeding a tail cache and a consume service reading through it, as ``llog serve`` wires them."""

    cache: TailCache
    writer: LogWriter
    service: ConsumeService


@pytest.fixture
def tail_cached(storage: Storage, reader_storage: Storage, topic: str) -> TailCached:
    """``topic``'s partition 0 initialized by a writer that feeds the consume service's tail cache."""
    cache = TailCache(MB)
    writer = LogWriter(storage, commit_listener=cache.on_commit)
    writer.initialize_partition(topic, 0)
    return TailCached(cache, writer, ConsumeService(LogReader(reader_storage), tail_cache=cache))


def test_partitions_sharing_one_wal_blob_fetch_it_once(
    storage: Storage, service: ConsumeService, reader_storage: Storage, topic: str
) -> None:
    writer = LogWriter(storage, config=CAS_S3_ONLY)
    for p in range(3):
        writer.initialize_partition(topic, p)
    groups = [SharedAppendGroup(topic, p, [f"{p}-a".encode(), f"{p}-b".encode()]) for p in range(3)]
    results = writer.append_shared(groups)
    assert len({r.wal_uri for r in results}) == 1

    fetched = service.consume(request(*(part(topic, p) for p in range(3))))

    assert [values(r) for r in fetched] == [[f"{p}-a".encode(), f"{p}-b".encode()] for p in range(3)]
    ops = reader_storage.blobs.counters.snapshot()
    assert ops["range_get"].calls == 1, "three slices of one blob: one merged range GET"
    assert "get" not in ops


@pytest.mark.parametrize("protocol", ["sequential", "cas"])
def test_the_control_records_of_a_request_are_one_oxia_read(
    storage: Storage, reader_storage: Storage, topic: str, protocol: str
) -> None:
    """Four partitions: their meta/control in one read (one shard), then each its index page (sequential)."""
    writer = LogWriter(storage, config=WriterConfig(append_protocol=AppendProtocol(protocol)))
    for p in range(4):
        writer.initialize_partition(topic, p)
        writer.append(topic, p, [f"{p}-{i}".encode() for i in range(3)])
    service = ConsumeService(LogReader(reader_storage))
    service.reader.layouts.topic_id(topic)  # the topic's record (its folders), read once per TOPIC_CACHE_TTL_MS
    before = reader_storage.oxia.counters.snapshot()

    fetched = service.consume(request(*(part(topic, p, offset=3) for p in range(4))))

    assert [values(r) for r in fetched] == [[f"{p}-2".encode()] for p in range(4)]
    reads = {op: s.calls - (before[op].calls if op in before else 0)
             for op, s in reader_storage.oxia.counters.snapshot().items()}  # fmt: skip
    assert reads.get("get") == 1
    assert sum(reads.values()) == 5  # were 8: a control read and an index read a partition
    service.close()


def test_a_failed_read_of_the_control_records_is_each_partitions_error_without_reading_again(
    writer: LogWriter, reader_storage: Storage, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for p in range(3):
        writer.initialize_partition(topic, p)
        writer.append(topic, p, [b"x"])
    service = ConsumeService(LogReader(reader_storage))

    def unavailable(keys: object) -> NoReturn:
        raise OxiaUnavailable("get failed: Oxia is out of reach")

    monkeypatch.setattr(reader_storage.oxia, "get_many", unavailable)
    service.reader.layouts.topic_id(topic)  # the topic's record, read before Oxia went out of reach
    before = reader_storage.oxia.counters.snapshot()

    fetched = service.consume(request(*(part(topic, p) for p in range(3))))

    assert [type(r.error) for r in fetched] == [OxiaUnavailable] * 3
    assert reader_storage.oxia.counters.snapshot() == before  # no partition read its own


def test_partition_max_bytes_cuts_records(writer: LogWriter, service: ConsumeService, topic: str) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [bytes([i]) * 100 for i in range(10)])

    (result,) = service.consume(request(part(topic, max_bytes=250)))

    assert values(result) == [bytes([0]) * 100, bytes([1]) * 100]
    assert result.next_fetch_offset == 3
    assert result.high_watermark == 10


def test_partition_max_bytes_counts_keys_and_headers_and_goes_on_into_the_next_batch(
    writer: LogWriter, service: ConsumeService, topic: str
) -> None:
    writer.initialize_partition(topic, 0)
    keyed = Record(b"v" * 50, b"k" * 10, (("h", b"x" * 39),))  # 100 bytes: value 50, key 10, header 1 + 39
    writer.append(topic, 0, [keyed, keyed])
    writer.append(topic, 0, [b"w" * 100] * 3)

    (result,) = service.consume(request(part(topic, max_bytes=350)))

    assert values(result) == [b"v" * 50, b"v" * 50, b"w" * 100]  # a fourth would make 400
    assert [r.key for r in result.records] == [b"k" * 10, b"k" * 10, None]
    assert result.next_fetch_offset == 4
    assert result.nbytes == 300


def test_max_bytes_is_shared_by_the_partitions_of_a_request(
    writer: LogWriter, service: ConsumeService, topic: str
) -> None:
    for p in (0, 1):
        writer.initialize_partition(topic, p)
        writer.append(topic, p, [b"x" * 100] * 3)

    first, second = service.consume(request(part(topic, 0), part(topic, 1), max_bytes=250))

    assert len(first.records) == 2
    assert second.records == []
    assert second.next_fetch_offset == 1
    assert second.error is None


def test_the_first_record_always_goes_out_however_large(writer: LogWriter, service: ConsumeService, topic: str) -> None:
    for p in (0, 1):
        writer.initialize_partition(topic, p)
        writer.append(topic, p, [b"y" * 1000, b"z"])

    first, second = service.consume(request(part(topic, 0, max_bytes=10), part(topic, 1, max_bytes=10)))

    assert values(first) == [b"y" * 1000]  # over partition_max_bytes, but a consumer must progress
    assert second.records == []  # the rule holds for the first non-empty partition only


def test_record_fields_round_trip(writer: LogWriter, service: ConsumeService, topic: str) -> None:
    writer.initialize_partition(topic, 0)
    sent = [Record(b"\x00\xff", b"k", (("h", b"\x01"), ("h2", b"")), 123), Record("é".encode())]
    writer.append(topic, 0, sent)

    (result,) = service.consume(request(part(topic)))

    assert [(r.offset, r.value, r.key, r.headers) for r in result.records] == [
        (1, b"\x00\xff", b"k", (("h", b"\x01"), ("h2", b""))),
        (2, "é".encode(), None, ()),
    ]
    assert result.records[0].timestamp_ms == 123


def test_long_poll_returns_as_soon_as_data_arrives(writer: LogWriter, service: ConsumeService, topic: str) -> None:
    writer.initialize_partition(topic, 0)
    timer = threading.Timer(0.3, writer.append, args=(topic, 0, [b"late"]))
    start = time.monotonic()
    timer.start()
    (result,) = service.consume(request(part(topic), max_wait_ms=10_000))
    elapsed = time.monotonic() - start
    timer.join()

    assert values(result) == [b"late"]
    assert 0.25 < elapsed < 3, "returned when the record arrived, well before max_wait_ms"


def test_long_poll_with_a_tail_cache_wakes_on_the_local_append(
    tail_cached: TailCached, topic: str, reader_storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consume, "RECHECK_S", 3_600.0)  # a slow append must not meet a re-check's Oxia read
    tail_cached.writer.append(topic, 0, [b"first"])
    await_notifications(reader_storage.oxia)
    tail_cached.service.reader.layouts.topic_id(topic)  # the topic's record, read once per TOPIC_CACHE_TTL_MS
    calls = reader_storage.oxia.counters.total_calls()

    timer = threading.Timer(0.3, tail_cached.writer.append, args=(topic, 0, [b"second"]))
    start = time.monotonic()
    timer.start()
    (result,) = tail_cached.service.consume(request(part(topic, offset=2), max_wait_ms=10_000))
    elapsed = time.monotonic() - start
    timer.join()

    assert values(result) == [b"second"]
    assert elapsed < 2
    # The first round reads the partition's end; woken by the append, the waiter answers from the cache, or,
    # when Oxia's notification of the append came first, after one more round of reads.
    assert reader_storage.oxia.counters.total_calls() - calls <= 2 * MAX_ROUND_READS
    assert reader_storage.blobs.counters.total_calls() == 0


def test_long_poll_times_out_empty_at_max_wait(writer: LogWriter, service: ConsumeService, topic: str) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a"])
    start = time.monotonic()
    (result,) = service.consume(request(part(topic, offset=2), max_wait_ms=400))
    elapsed = time.monotonic() - start

    assert result.records == []
    assert result.error is None
    assert (result.high_watermark, result.next_fetch_offset) == (1, 2)
    assert 0.4 <= elapsed < 3


def test_offsets_out_of_range_are_reported_per_partition(
    writer: LogWriter, service: ConsumeService, topic: str
) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a", b"b", b"c"])

    # The HTTP contract names a partition once per request: one request per offset of partition 0.
    (below,) = service.consume(request(part(topic, offset=0)))
    (beyond,) = service.consume(request(part(topic, offset=5)))
    tail, first = service.consume(request(part(topic, offset=4), part(topic, 1, offset=1)))

    assert below.error is not None
    assert below.error.error_type == "OffsetOutOfRange"
    assert "[1, 3]" in str(below.error)
    assert first.error is not None
    assert first.error.error_type == "PartitionNotInitialized"
    assert tail.error is None
    assert tail.records == []
    assert (tail.high_watermark, tail.next_fetch_offset) == (3, 4)
    assert beyond.error is not None
    assert beyond.error.error_type == "OffsetOutOfRange"


def test_tail_cache_hits_avoid_oxia_and_s3(tail_cached: TailCached, topic: str, reader_storage: Storage) -> None:
    await_notifications(reader_storage.oxia)
    tail_cached.service.consume(request(part(topic)))  # the partition's end read: the cache follows it from here
    calls = reader_storage.oxia.counters.total_calls()
    tail_cached.writer.append(topic, 0, [b"a", b"b"])
    tail_cached.writer.append(topic, 0, [b"c"])

    (result,) = tail_cached.service.consume(request(part(topic)))

    assert values(result) == [b"a", b"b", b"c"]
    assert result.high_watermark == 3
    assert tail_cached.cache.hits >= 2
    assert reader_storage.blobs.counters.total_calls() == 0
    # The appends confirmed the end they committed; a notification of them that reached the consumer's
    # feed after the writer reported them costs one round of reads (control, and the index page proving
    # the sequential partition's end).
    assert reader_storage.oxia.counters.total_calls() - calls <= MAX_ROUND_READS

    # Known empty at the cached tail: the long-poll waits for a notification or a local
    # append, and reads Oxia once, at the end.
    await_notifications(reader_storage.oxia)
    gets = reader_storage.oxia.counters.snapshot()["get"].calls
    (empty,) = tail_cached.service.consume(request(part(topic, offset=4), max_wait_ms=300))
    assert empty.records == []
    assert reader_storage.oxia.counters.snapshot()["get"].calls - gets <= 2


def test_a_cache_miss_falls_back_to_oxia_and_fills_the_cache(
    writer: LogWriter, topic: str, reader_storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a", b"b"])
    cache = TailCache(MB)
    service = ConsumeService(LogReader(reader_storage), tail_cache=cache)
    await_notifications(reader_storage.oxia)  # the end the first read finds is trusted while nothing is notified

    (first,) = service.consume(request(part(topic)))
    calls = reader_storage.oxia.counters.total_calls()
    (again,) = service.consume(request(part(topic)))

    assert values(first) == values(again) == [b"a", b"b"]
    assert calls > 0
    assert reader_storage.oxia.counters.total_calls() == calls, "the second read is a cache hit"


def test_a_reader_catching_up_through_the_cache_does_not_wait_at_what_it_read(
    writer: LogWriter, topic: str, reader_storage: Storage
) -> None:
    """Batches read from S3 are cached, but their end is not the partition's: no long-poll wait there."""
    writer.initialize_partition(topic, 0)
    for value in (b"a", b"b", b"c"):
        writer.append(topic, 0, [value])
    service = ConsumeService(LogReader(reader_storage), tail_cache=TailCache(MB))

    (first,) = service.consume(request(part(topic, max_bytes=1)))  # one record: the first batch only
    start = time.monotonic()
    (second,) = service.consume(request(part(topic, offset=2), max_wait_ms=5_000))

    assert values(first) == [b"a"]
    assert values(second) == [b"b", b"c"]
    assert second.high_watermark == 3
    assert time.monotonic() - start < 3, "answered from Oxia at once, not after max_wait_ms"


def test_cached_batches_of_an_earlier_life_of_the_partition_are_not_served(
    writer: LogWriter, topic: str, reader_storage: Storage
) -> None:
    """A topic deleted, reclaimed and created again starts over at offset 1: batches the cache still holds
    from before are past the high watermark Oxia reports, and neither served nor kept."""
    cache = TailCache(MB)
    cache.add(topic, 0, 1, decode_batch(encode_batch([b"old-1", b"old-2", b"old-3"], now_ms=1)), at_end=False)
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"new-1"])
    service = ConsumeService(LogReader(reader_storage), tail_cache=cache)

    (result,) = service.consume(request(part(topic)))

    assert values(result) == [b"new-1"]
    assert result.high_watermark == 1
    hit = cache.lookup(topic, 0, 1)
    assert hit is not None
    assert hit[1].value(0) == b"new-1"  # what the read just cached, not the old batch


def test_batching_producer_on_a_real_writer(writer: LogWriter, reader: LogReader, topic: str) -> None:
    writer.initialize_partition(topic, 0)
    writer.initialize_partition(topic, 1)
    batcher = BatchingProducer(writer, BatchingConfig(max_bytes=MB, max_delay_ms=200))
    barrier = threading.Barrier(8)
    out: dict[int, list[AppendResult]] = {}

    def call(i: int) -> None:
        barrier.wait()
        out[i] = batcher.append_shared([SharedAppendGroup(topic, i % 2, [f"m{i}-{j}".encode() for j in range(3)])])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    batcher.close()

    assert batcher.flushes < 8
    for i, (result,) in out.items():
        assert result.start_offset is not None
        assert result.end_offset is not None
        got = [r.value for r in reader.read_range(topic, i % 2, result.start_offset, result.end_offset)]
        assert got == [f"m{i}-{j}".encode() for j in range(3)]
    assert reader.high_watermark(topic, 0) == reader.high_watermark(topic, 1) == 12


def test_produce_service_initializes_partitions_once(
    oxia_store: OxiaStore, reader: LogReader, topic: str, storage: Storage
) -> None:
    produce = ProduceService(LogWriter(storage, config=CAS))
    first = produce.produce([SharedAppendGroup(topic, 0, [b"a"]), SharedAppendGroup(topic, 3, [b"b"])])
    creates = oxia_store.counters.snapshot()["put"].calls
    second = produce.produce([SharedAppendGroup(topic, 0, [b"c"])])

    assert [(r.ok, r.start_offset) for r in first] == [(True, 1), (True, 1)]
    assert (second[0].ok, second[0].start_offset) == (True, 2)
    # The second produce only appends: 1 CAS reserve + 1 index create + 1 CAS clear, no initialization.
    assert oxia_store.counters.snapshot()["put"].calls - creates == 3
    assert [r.value for r in reader.iter_from(topic, 0, 1)] == [b"a", b"c"]


def test_a_partition_a_reclaim_already_removed_is_of_an_unknown_topic_while_the_record_stays(
    storage: Storage, writer: LogWriter, topic: str
) -> None:
    """Reclaim deletes each partition's keys, then the topic's record (llog/protocol/topics.py). In between (a
    run under way, or one that died, until the next one ends), a consume of a partition already removed is of
    the deleted topic, refused ``UnknownTopic`` as its other partitions, still fenced, are (docs/HTTP_API.md:
    from the delete on, consume answers 404 ``UnknownTopic``), not ``PartitionNotInitialized``, as if nothing
    had ever been written there."""
    registry = TopicRegistry(storage.oxia, root=storage.root)
    registry.create(topic, 2, TopicConfig(AppendProtocol.CAS))
    for partition in (0, 1):
        writer.append(topic, partition, [b"before the delete"])
    registry.delete(topic)
    checks: list[str] = []

    def dies_before_the_second_partition(point: str) -> None:
        if point == faults.RECLAIM_AFTER_LEASE_CHECK:
            checks.append(point)
            if len(checks) == 2:
                raise SimulatedCrash(point)

    deleted = registry.get(topic)
    assert deleted is not None
    with pytest.raises(SimulatedCrash):
        reclaim_topic(storage, deleted, fault_hook=dies_before_the_second_partition)
    record = registry.get(topic)
    assert record is not None
    assert record.deleted  # partition 0's keys are gone, partition 1's are not
    service = ConsumeService(LogReader(storage))
    for partition in (1, 0):
        with pytest.raises(UnknownTopic):
            service.consume(request(part(topic, partition)))
