"""Failure behaviour that needs no Oxia server: an unreachable Oxia, S3 failures, rejected input.

The Oxia address here is a loopback port nobody listens on, so the real
client meets a real refused connection.
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from devserver.devstack import free_port
from llog.config import GcConfig, OxiaConfig
from llog.errors import ConfigurationError, InvalidArgument, InvalidPartition, InvalidTopicName, OxiaUnavailable
from llog.format.codec import Record, decode_batch, encode_batch
from llog.format.keys import PartitionKeys, S3Location, new_object_id, shared_wal_prefix
from llog.protocol.append import LogWriter, SharedAppendGroup
from llog.protocol.gc import MAX_WARNINGS, WAL_CHUNK, GarbageCollector, GcReport
from llog.protocol.read import LogReader
from llog.service.consume import RECHECK_S, ConsumeRequest, ConsumeService, FetchPartition
from llog.service.tail_cache import TailCache
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from tests.conftest import BUCKET

CONNECT_TIMEOUT_MS = 1_000


@pytest.fixture
def dead_oxia() -> OxiaStore:
    return OxiaStore(
        OxiaConfig(
            f"127.0.0.1:{free_port()}",
            connect_timeout_ms=CONNECT_TIMEOUT_MS,
            request_timeout_ms=1_000,
            close_timeout_ms=1_000,
        )
    )


@pytest.fixture
def dead_storage(dead_oxia: OxiaStore, blob_store: BlobStore, root: str) -> Storage:
    """A working S3 and an Oxia nothing answers for."""
    return Storage(dead_oxia, blob_store, BUCKET, root)


def test_unreachable_oxia_gives_a_prompt_typed_retriable_error(dead_oxia: OxiaStore) -> None:
    start = time.monotonic()
    with pytest.raises(OxiaUnavailable, match="no shard assignments") as excinfo:
        dead_oxia.get("k", partition_key="p")
    elapsed = time.monotonic() - start

    assert excinfo.value.retriable
    assert elapsed < CONNECT_TIMEOUT_MS / 1000 + 2
    assert dead_oxia.counters.snapshot()["get"].errors == 1


def test_close_returns_promptly_even_after_failed_calls(dead_oxia: OxiaStore) -> None:
    with pytest.raises(OxiaUnavailable):
        dead_oxia.get("k", partition_key="p")
    start = time.monotonic()
    dead_oxia.close()
    assert time.monotonic() - start < 2
    with pytest.raises(OxiaUnavailable, match="closed"):
        dead_oxia.get("k", partition_key="p")


def test_creating_a_store_touches_no_network() -> None:
    # Lambda handlers build their stores at import time; that must be free.
    start = time.monotonic()
    store = OxiaStore(OxiaConfig("203.0.113.1:6648"))
    store.close()
    assert time.monotonic() - start < 0.5


def test_append_with_oxia_down_reports_each_group_failed(dead_storage: Storage) -> None:
    writer = LogWriter(dead_storage)
    results = writer.append_shared([SharedAppendGroup("orders", 0, [b"a"]), SharedAppendGroup("orders", 1, [b"b"])])

    assert [r.ok for r in results] == [False, False]
    assert {r.error_type for r in results} == {"OxiaUnavailable"}
    assert all(r.start_offset is None and r.wal_uri is None for r in results)


def test_reader_with_oxia_down_raises_oxia_unavailable(dead_storage: Storage) -> None:
    with pytest.raises(OxiaUnavailable):
        LogReader(dead_storage).read_offset("orders", 0, 1)


def test_s3_failure_fails_every_group_and_touches_no_oxia(dead_oxia: OxiaStore, dead_storage: Storage) -> None:
    missing_bucket = "llog-no-such-bucket"
    writer = LogWriter(dataclasses.replace(dead_storage, bucket=missing_bucket))

    results = writer.append_shared([SharedAppendGroup("orders", 0, [b"a"]), SharedAppendGroup("audit", 3, [b"b"])])

    assert [(r.topic, r.partition, r.ok, r.error_type) for r in results] == [
        ("orders", 0, False, "ConfigurationError"),
        ("audit", 3, False, "ConfigurationError"),
    ]
    assert isinstance(results[0].error, ConfigurationError)
    assert dead_oxia.counters.total_calls() == 0


@pytest.mark.parametrize(
    ("groups", "error"),
    [
        ([SharedAppendGroup("bad/topic", 0, [b"a"])], InvalidTopicName),
        ([SharedAppendGroup("", 0, [b"a"])], InvalidTopicName),
        ([SharedAppendGroup("orders", -1, [b"a"])], InvalidPartition),
        ([SharedAppendGroup("orders", True, [b"a"])], InvalidPartition),
        ([SharedAppendGroup("orders", 0, [])], InvalidArgument),
        ([SharedAppendGroup("orders", 0, ["text"])], InvalidArgument),  # type: ignore[list-item]
        ([SharedAppendGroup("orders", 0, [Record(b"x", timestamp_ms=2**64)])], InvalidArgument),
        # one bad group rejects the whole call: the good one is not written either
        ([SharedAppendGroup("orders", 0, [b"a"]), SharedAppendGroup("..", 0, [b"b"])], InvalidTopicName),
        ([], InvalidArgument),
    ],
)
def test_rejected_input_writes_nothing(
    dead_oxia: OxiaStore,
    blob_store: BlobStore,
    groups: list[SharedAppendGroup],
    error: type[Exception],
    dead_storage: Storage,
) -> None:
    writer = LogWriter(dead_storage)
    with pytest.raises(error):
        writer.append_shared(groups)
    assert blob_store.counters.total_calls() == 0
    assert dead_oxia.counters.total_calls() == 0


def judge_by_headers(collector: GarbageCollector, report: GcReport) -> None:
    """GC's WAL step with Oxia out of reach and no partition registered, on blobs written before the
    namespace's identity: each judged by its header, which cannot be read here."""
    now_ms = int(collector.storage.clock() * 1000)
    collector.collect_wal(report, [], cutoff=now_ms - collector.config.grace_ms, registered_since_ms=now_ms)


def test_gc_keeps_and_reports_a_wal_object_it_cannot_read(
    blob_store: BlobStore, root: str, dead_storage: Storage
) -> None:
    blob_store.put(S3Location(BUCKET, f"{shared_wal_prefix(root)}{new_object_id()}"), b"")
    collector = GarbageCollector(dataclasses.replace(dead_storage, clock=lambda: time.time() + 60),
                                 config=GcConfig(grace_ms=1))  # fmt: skip
    report = GcReport()

    judge_by_headers(collector, report)

    assert report.wal_blobs_deleted == 0
    assert report.errors == []  # a warning: it would recur every run, and the run did its work
    assert report.wal_unreadable_kept == 1
    assert len(report.warnings) == 1
    assert "too short for an LLS1 blob" in report.warnings[0]
    assert len(list(blob_store.list(BUCKET, shared_wal_prefix(root)))) == 1


def test_gc_reads_headers_concurrently_across_listing_pages(
    blob_store: BlobStore, root: str, dead_storage: Storage
) -> None:
    """More old blobs than one round (WAL_CHUNK) through the reader pool: every one judged, none deleted.

    Each is 4 bytes, too short for an LLS1 blob: counted, and the report names the first MAX_WARNINGS.
    """
    keys = [f"{shared_wal_prefix(root)}{new_object_id()}" for _ in range(WAL_CHUNK + 150)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda key: blob_store.put(S3Location(BUCKET, key), b"LLS1"), keys))
    collector = GarbageCollector(dataclasses.replace(dead_storage, clock=lambda: time.time() + 60),
                                 config=GcConfig(grace_ms=1, read_concurrency=4))  # fmt: skip
    report = GcReport()

    judge_by_headers(collector, report)

    assert (report.wal_blobs_seen, report.wal_blobs_deleted, report.wal_unreadable_kept) == (len(keys), 0, len(keys))
    assert report.errors == []
    assert [w.split(":")[0] for w in report.warnings] == sorted(keys)[:MAX_WARNINGS]


class Clock:
    """A clock that moves only when the test moves it."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _catching_up_service(dead_storage: Storage, clock: Clock) -> ConsumeService:
    """``llog serve``'s consume service whose cache holds offsets 1-2, read by a reader that had not reached the
    end: its read of Oxia (before Oxia went out of reach) found the high watermark 5, the log start 1. The
    cache's ``clock`` moves only when the test moves it (each call to the dead Oxia takes its connect timeout)."""
    cache = TailCache(1 << 20, clock=clock)
    mark = cache.mark(
        "orders", 0, dead_storage.oxia.changes(), {PartitionKeys("orders", 0, dead_storage.root).control: None}
    )
    cache.add("orders", 0, 1, decode_batch(encode_batch([b"a", b"b"], now_ms=1)), at_end=False)
    cache.note_high_watermark("orders", 0, 5, log_start=1, mark=mark)
    return ConsumeService(LogReader(dead_storage), tail_cache=cache)


def test_a_catching_up_reader_is_served_from_the_cache_when_oxia_is_out_of_reach(dead_storage: Storage) -> None:
    service = _catching_up_service(dead_storage, Clock())
    (result,) = service.consume(ConsumeRequest([FetchPartition("orders", 0, 1, 1 << 20)], 0, 1, 1 << 20))
    assert result.error is None
    assert [r.value for r in result.records] == [b"a", b"b"]
    assert (result.high_watermark, result.log_start_offset) == (5, 1)  # as the last read of Oxia found them


def test_a_catching_up_reader_whose_last_read_of_oxia_is_recheck_old_gets_oxias_error(dead_storage: Storage) -> None:
    """The cache stands in for Oxia out of reach only as long as it would trust a read: RECHECK_S."""
    clock = Clock()
    service = _catching_up_service(dead_storage, clock)
    clock.now += RECHECK_S
    (result,) = service.consume(ConsumeRequest([FetchPartition("orders", 0, 1, 1 << 20)], 0, 1, 1 << 20))
    assert isinstance(result.error, OxiaUnavailable)
    assert result.records == []


def test_a_catching_up_reader_does_not_wait_at_the_end_of_what_it_read(dead_storage: Storage) -> None:
    """The cache's end is only where this reader stopped, not the partition's: ask Oxia at once.

    Before the fix the request trusted the cached end as the tail, waited the whole
    ``max_wait_ms`` and only then asked Oxia (here: an error, after 5 s).
    """
    service = _catching_up_service(dead_storage, Clock())
    start = time.monotonic()
    (result,) = service.consume(ConsumeRequest([FetchPartition("orders", 0, 3, 1 << 20)], 5_000, 1, 1 << 20))
    assert isinstance(result.error, OxiaUnavailable)
    assert time.monotonic() - start < 4
