"""Topics (llog.protocol.topics) and keyed produce (llog.service.produce) on a real Oxia server and moto S3.

Create, describe, grow, delete and reclaim; keyed routing by Kafka's partitioner; keyless records
sticky per request and round-robin across requests; a partition past an explicit topic's count
refused with nothing written; implicit topics working as before. GC's clock runs ahead past the
grace and the reclaim delay where a test needs a deleted topic reclaimed.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable

import pytest

from llog.config import GcConfig, WriterConfig
from llog.errors import (
    ConditionalAppendUnsupported,
    InvalidArgument,
    InvalidPartition,
    InvalidPartitionCount,
    LogFenced,
    OxiaUnavailable,
    PartitionNotInitialized,
    TopicDeleted,
    TopicExists,
    UnknownTopic,
)
from llog.format.codec import Record
from llog.format.keys import PartitionKeys, RegistryKeys, shared_wal_prefix
from llog.format.kv.control import AppendProtocol, LogState
from llog.protocol import fence
from llog.protocol import topics as topics_module
from llog.protocol.append import LogWriter, SharedAppendGroup
from llog.protocol.append_sequential import SequentialAppender
from llog.protocol.backup import back_up_topics
from llog.protocol.catalog import LogCatalog
from llog.protocol.compaction import Compactor
from llog.protocol.faults import RECLAIM_AFTER_LEASE_CHECK, WRITER_AFTER_FENCE_MARKER
from llog.protocol.gc import GarbageCollector
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.read import LogReader
from llog.protocol.topics import (
    RECLAIM_DELAY_MS,
    RECLAIM_LEASE_MS,
    STALE_TOPIC_MS,
    TOPIC_CACHE_TTL_MS,
    TopicConfig,
    TopicRecord,
    TopicRegistry,
    new_topic_id,
    reclaim_topic,
)
from llog.protocol.verify import Verifier
from llog.service.admin import AdminService
from llog.service.consume import ConsumeRequest, ConsumeService, FetchPartition
from llog.service.produce import ProduceEntry, ProduceService
from llog.store.oxia import CREATE_ONLY
from llog.store.storage import Storage
from llog_client.partitioner import partition_for_key
from tests.conftest import BUCKET
from tests.faults import SimulatedCrash
from tests.protocols import CAS

pytestmark = pytest.mark.oxia

SEQUENTIAL = AppendProtocol.SEQUENTIAL
GRACE_MS = 60 * 60 * 1000


class Clock:
    """A clock a test moves forward."""

    def __init__(self) -> None:
        self.offset_s = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset_s


def topics(storage: Storage) -> TopicRegistry:
    return TopicRegistry(storage.oxia, root=storage.root, writer_config=CAS)


def config(protocol: AppendProtocol = SEQUENTIAL, **limits: int | None) -> TopicConfig:
    return TopicConfig(protocol, limits.get("retention_ms"), limits.get("retention_bytes"))


def values(reader: LogReader, topic: str, partition: int) -> list[bytes]:
    return [r.value for r in reader.iter_from(topic, partition, 1)]


def objects(storage: Storage, prefix: str) -> list[str]:
    return [o.key for o in storage.blobs.list(BUCKET, prefix)]


def collector_ahead(storage: Storage) -> GarbageCollector:
    """A collector whose clock is past the grace and the reclaim delay of everything written so far."""
    ahead_s = (GRACE_MS + RECLAIM_DELAY_MS + 60_000) / 1000
    clock: Callable[[], float] = lambda: time.time() + ahead_s  # noqa: E731
    return GarbageCollector(dataclasses.replace(storage, clock=clock), config=GcConfig(grace_ms=GRACE_MS))


# --- create, describe, grow ---------------------------------------------------------------------------


def test_create_initializes_every_partition_with_the_topics_protocol(storage: Storage, topic: str) -> None:
    record, created = topics(storage).create(topic, 3, config(AppendProtocol.CAS, retention_ms=60_000))
    assert created
    assert (record.partitions, record.config.retention_ms) == (3, 60_000)

    described = LogCatalog(storage.oxia, root=storage.root).describe(topic)
    assert described["explicit"] is True
    assert described["partitions"] == 3
    assert described["config"] == {"append_protocol": "cas", "retention_ms": 60_000, "retention_bytes": None}
    assert described["created_at_ms"] == record.created_at_ms
    assert described["partition_status"] == [
        {"partition": p, "high_watermark": 0, "log_start": 1, "next_offset": 1, "log_state": "OPEN"} for p in range(3)
    ]
    for p in range(3):
        control = PartitionMetadata(storage.oxia, record.partition_keys(p, storage.root)).control().record
        assert control.protocol is AppendProtocol.CAS


def test_create_again_is_idempotent_and_other_settings_conflict(storage: Storage, topic: str) -> None:
    registry = topics(storage)
    first, _ = registry.create(topic, 2, config())

    again, created = registry.create(topic, 2, config())
    assert not created
    assert again.created_at_ms == first.created_at_ms

    with pytest.raises(TopicExists, match="partitions 2"):
        registry.create(topic, 3, config())
    with pytest.raises(TopicExists):
        registry.create(topic, 2, config(retention_bytes=10))
    with pytest.raises(InvalidPartitionCount):
        registry.create(f"{topic}-x", 0, config())


def test_a_create_that_crashed_after_its_record_is_completed_by_the_next_create(storage: Storage, topic: str) -> None:
    registry = topics(storage)
    record = TopicRecord(topic, 2, config(AppendProtocol.CAS), 1_000)
    storage.oxia.put(registry.keys.topic(topic), record.encode(), partition_key=registry.keys.partition_key,
                     expected_version_id=CREATE_ONLY)  # fmt: skip
    catalog = LogCatalog(storage.oxia, root=storage.root)
    assert [s["log_state"] for s in catalog.describe(topic)["partition_status"]] == ["NOT_INITIALIZED"] * 2

    _, created = registry.create(topic, 2, config(AppendProtocol.CAS))

    assert not created
    assert [s["log_state"] for s in catalog.describe(topic)["partition_status"]] == ["OPEN", "OPEN"]


def test_a_produce_completes_a_crashed_create_with_the_topics_protocol(storage: Storage, topic: str) -> None:
    registry = topics(storage)
    record = TopicRecord(topic, 2, config(AppendProtocol.CAS), 1_000)
    storage.oxia.put(registry.keys.topic(topic), record.encode(), partition_key=registry.keys.partition_key,
                     expected_version_id=CREATE_ONLY)  # fmt: skip
    service = ProduceService(LogWriter(storage))  # this process creates sequential partitions by default

    (result,) = service.produce([ProduceEntry(topic, 1, [b"x"])])

    assert result.ok, result.error
    control = PartitionMetadata(storage.oxia, PartitionKeys(topic, 1, storage.root)).control().record
    assert control.protocol is AppendProtocol.CAS


def test_grow_only_grows(storage: Storage, topic: str) -> None:
    registry = topics(storage)
    registry.create(topic, 2, config())

    assert registry.grow(topic, 5).partitions == 5
    assert registry.grow(topic, 5).partitions == 5  # the same count: a no-op
    with pytest.raises(InvalidPartitionCount, match="only grow"):
        registry.grow(topic, 4)
    with pytest.raises(UnknownTopic):
        registry.grow(f"{topic}-none", 3)
    described = LogCatalog(storage.oxia, root=storage.root).describe(topic)
    assert [s["log_state"] for s in described["partition_status"]] == ["OPEN"] * 5


def test_config_rejects_unknown_keys_and_bad_values() -> None:
    with pytest.raises(InvalidArgument, match="unknown keys: colour"):
        TopicConfig.parse({"colour": "red"}, default_protocol=SEQUENTIAL)
    with pytest.raises(InvalidArgument, match="append_protocol"):
        TopicConfig.parse({"append_protocol": "fast"}, default_protocol=SEQUENTIAL)
    with pytest.raises(InvalidArgument, match="retention_ms"):
        TopicConfig.parse({"retention_ms": -5}, default_protocol=SEQUENTIAL)
    assert TopicConfig.parse(None, default_protocol=AppendProtocol.CAS) == TopicConfig(AppendProtocol.CAS)


# --- implicit topics ----------------------------------------------------------------------------------------


def test_implicit_topics_work_as_before_and_describe_as_not_explicit(storage: Storage, topic: str) -> None:
    service = ProduceService(LogWriter(storage))
    results = service.produce([ProduceEntry(topic, 0, [b"a"]), ProduceEntry(topic, 4, [b"b"])])
    assert all(r.ok for r in results)
    catalog = LogCatalog(storage.oxia, root=storage.root)

    described = catalog.describe(topic)

    record = topics(storage).get(topic)  # written by the first produce (llog.protocol.topics)
    assert record is not None
    assert (record.implicit, record.partition_numbers) == (True, [0, 4])
    assert (described["explicit"], described["partitions"], described["config"]["append_protocol"]) == (False, 2, None)
    assert (described["created_at_ms"], described["topic_id"]) == (record.created_at_ms, record.topic_id)
    assert [(s["partition"], s["high_watermark"]) for s in described["partition_status"]] == [(0, 1), (4, 1)]
    assert [(t.topic, t.partitions, t.explicit) for t in catalog.topics()] == [(topic, [0, 4], False)]
    with pytest.raises(UnknownTopic, match="was not created"):
        service.produce([ProduceEntry(topic, None, [b"keyed?"])])
    with pytest.raises(UnknownTopic):
        catalog.describe(f"{topic}-none")
    # A create must cover the partitions produce made: then it adopts them.
    with pytest.raises(InvalidPartitionCount, match="at least 5"):
        topics(storage).create(topic, 4, config())
    topics(storage).create(topic, 5, config())
    adopted = catalog.describe(topic)
    assert (adopted["explicit"], adopted["topic_id"]) == (True, record.topic_id)  # the same topic, its data kept


# --- keyed produce ------------------------------------------------------------------------------------------


def test_keyed_records_land_on_kafkas_partition_for_their_key(storage: Storage, topic: str) -> None:
    topics(storage).create(topic, 4, config())
    service = ProduceService(LogWriter(storage))
    keys = [f"key-{i}".encode() for i in range(24)]

    results = service.produce([ProduceEntry(topic, None, [Record(b"v-" + k, key=k) for k in keys])])

    assert all(r.ok for r in results)
    expected: dict[int, list[bytes]] = {}
    for k in keys:
        expected.setdefault(partition_for_key(k, 4), []).append(b"v-" + k)
    assert [r.partition for r in results] == list(expected)  # one result per partition, first appearance first
    assert len(expected) > 1
    reader = LogReader(storage)
    for p in range(4):
        assert values(reader, topic, p) == expected.get(p, [])


def test_keyless_records_stick_to_one_partition_per_request_round_robin(storage: Storage, topic: str) -> None:
    topics(storage).create(topic, 3, config())
    service = ProduceService(LogWriter(storage))

    chosen = []
    for i in range(4):
        results = service.produce([ProduceEntry(topic, None, [f"r{i}-a".encode(), f"r{i}-b".encode()])])
        (result,) = results
        assert (result.ok, result.count) == (True, 2)
        chosen.append(result.partition)

    assert [(p - chosen[0]) % 3 for p in chosen] == [0, 1, 2, 0]
    reader = LogReader(storage)
    assert values(reader, topic, chosen[0]) == [b"r0-a", b"r0-b", b"r3-a", b"r3-b"]


def test_a_partition_past_the_count_is_refused_and_nothing_is_written(storage: Storage, topic: str) -> None:
    topics(storage).create(topic, 2, config())
    service = ProduceService(LogWriter(storage))
    assert service.produce([ProduceEntry(topic, 1, [b"ok"])])[0].ok
    before = objects(storage, f"{storage.root}/")

    with pytest.raises(InvalidPartition, match="has 2 partitions"):
        service.produce([ProduceEntry(topic, 0, [b"fine"]), ProduceEntry(topic, 2, [b"past"])])

    assert objects(storage, f"{storage.root}/") == before
    assert LogReader(storage).high_watermark(topic, 0) == 0
    with pytest.raises(PartitionNotInitialized):
        LogReader(storage).high_watermark(topic, 2)


def oxia_writes(storage: Storage) -> int:
    """Every Oxia write call so far (puts and deletes, whatever their outcome)."""
    return sum(s.calls for op, s in storage.oxia.counters.snapshot().items() if op.startswith(("put", "delete")))


def assert_nothing_of(storage: Storage, topic: str) -> None:
    assert topics(storage).get(topic) is None
    assert topics(storage).registry.partitions(topic) == {}


def test_a_request_refused_for_a_conditional_batch_writes_nothing(storage: Storage, topic: str) -> None:
    topics(storage).create(topic, 1, config(SEQUENTIAL))
    service = ProduceService(LogWriter(storage))
    new = f"{topic}-new"
    writes, blobs = oxia_writes(storage), objects(storage, f"{storage.root}/")

    with pytest.raises(ConditionalAppendUnsupported):  # a sequential partition cannot check expected_offset
        service.produce([ProduceEntry(new, 3, [b"x"]), SharedAppendGroup(topic, 0, [Record(b"y")], expected_offset=1)])
    with pytest.raises(ConditionalAppendUnsupported):  # nor can the sequential partition produce would create
        service.produce([SharedAppendGroup(new, 0, [Record(b"z")], expected_offset=1)])

    assert (oxia_writes(storage), objects(storage, f"{storage.root}/")) == (writes, blobs)
    assert_nothing_of(storage, new)


def test_a_topic_cached_as_implicit_but_created_since_refuses_a_partition_past_its_count_for_the_whole_request(
    storage: Storage, topic: str
) -> None:
    """As a process that never cached it does: nothing of the request is written."""
    service = ProduceService(LogWriter(storage))
    assert service.produce([ProduceEntry(topic, 0, [b"implicit"])])[0].ok  # caches the implicit record
    topics(storage).create(topic, 2, config())  # another process adopts it: POST /topics
    other = f"{topic}-other"
    writes = oxia_writes(storage)

    for producer in (service, ProduceService(LogWriter(storage))):
        with pytest.raises(InvalidPartition, match="has 2 partitions"):
            producer.produce([ProduceEntry(other, 0, [b"x"]), ProduceEntry(topic, 5, [b"y"])])

    assert oxia_writes(storage) == writes
    assert_nothing_of(storage, other)


def test_a_grow_elsewhere_is_seen_before_a_new_partition_is_refused(storage: Storage, topic: str) -> None:
    topics(storage).create(topic, 1, config())
    service = ProduceService(LogWriter(storage))
    assert service.produce([ProduceEntry(topic, 0, [b"a"])])[0].ok  # caches the count, 1

    topics(storage).grow(topic, 3)  # another process

    (result,) = service.produce([ProduceEntry(topic, 2, [b"c"])])
    assert result.ok, result.error


def test_a_cached_topic_costs_the_produce_no_oxia_operation(storage: Storage, topic: str) -> None:
    topics(storage).create(topic, 2, config())
    service = ProduceService(LogWriter(storage))
    service.produce([ProduceEntry(topic, 0, [b"first"])])  # reads the record, initializes, caches the generation

    before = storage.oxia.counters.snapshot()
    service.produce([ProduceEntry(topic, 0, [b"second"])])
    after = storage.oxia.counters.snapshot()

    calls = {op: stats.calls - (before[op].calls if op in before else 0) for op, stats in after.items()}
    assert {op: n for op, n in calls.items() if n} == {"put_sequential": 1}  # what an implicit topic costs


def test_prepare_on_the_cache_alone_reads_nothing_and_says_when_it_would_have_to(storage: Storage, topic: str) -> None:
    """``prepare(cached_only=True)``, what llog serve runs on its event loop: None wherever Oxia would be read."""
    topics(storage).create(topic, 2, config())
    service = ProduceService(LogWriter(storage))
    plain = [ProduceEntry(topic, 0, [b"a"])]
    before = storage.oxia.counters.snapshot()
    assert service.prepare(plain, cached_only=True) is None  # the topic's record is not cached
    service.produce(plain)  # caches it and initializes partition 0
    assert service.prepare([ProduceEntry(topic, 1, [b"b"])], cached_only=True) is None  # 1 is not initialized
    assert service.prepare([SharedAppendGroup(topic, 0, [b"c"], expected_offset=2)], cached_only=True) is None
    assert service.prepare([ProduceEntry(topic, 5, [b"d"])], cached_only=True) is None  # grown since? a read says
    with pytest.raises(InvalidArgument):  # bad input is refused whatever the cache holds
        service.prepare([ProduceEntry(topic, 0, [])], cached_only=True)
    with pytest.raises(InvalidPartition):
        service.prepare([ProduceEntry(topic, -1, [b"x"])], cached_only=True)

    reads = storage.oxia.counters.snapshot()
    assert reads != before  # the produce did read
    prepared = service.prepare([ProduceEntry(topic, 0, [b"e"]), ProduceEntry(topic, 0, [b"f"])], cached_only=True)
    assert storage.oxia.counters.snapshot() == reads  # nothing read
    assert prepared is not None
    assert prepared.results == {}
    assert [(g.partition, list(g.records)) for g in prepared.ready_groups] == [(0, [b"e"]), (0, [b"f"])]
    finished = service.finish(prepared, service.writer.append_shared(prepared.ready_groups), cached_only=True)
    assert finished is not None
    assert [(r.start_offset, r.end_offset) for r in finished[1]] == [(2, 2), (3, 3)]


def test_past_the_ttl_one_caller_reads_the_topic_again_while_the_others_keep_to_the_cache(
    storage: Storage, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llog serve's event loop sends a request that must read Oxia to a pool thread: past the TTL, only one."""
    topics(storage).create(topic, 2, config())
    clock = Clock()
    service = ProduceService(LogWriter(storage), clock=clock)
    entries = [ProduceEntry(topic, 0, [b"a"])]
    service.produce(entries)  # caches the record, initializes partition 0
    clock.offset_s = TOPIC_CACHE_TTL_MS / 1000
    reads = storage.oxia.counters.snapshot()
    assert service.prepare(entries, cached_only=True) is None  # this one goes to read it
    for _ in range(3):  # meanwhile the others keep to the cached record
        assert service.prepare(entries, cached_only=True) is not None
    assert storage.oxia.counters.snapshot() == reads

    def unavailable(name: str) -> TopicRecord | None:
        raise OxiaUnavailable("Oxia is out of reach")

    with monkeypatch.context() as patch:  # the reader fails: the next caller past the TTL tries again
        patch.setattr(service.topics, "get", unavailable)
        (failed,) = service.produce(entries)
    assert failed.error_type == "OxiaUnavailable"
    assert service.prepare(entries, cached_only=True) is None
    assert service.prepare(entries, cached_only=True) is not None

    clock.offset_s = 2 * TOPIC_CACHE_TTL_MS / 1000  # a reader that never read: after one more TTL, another goes
    assert service.prepare(entries, cached_only=True) is None
    (result,) = service.produce(entries)  # the pool thread's read
    assert result.ok
    assert service.prepare(entries, cached_only=True) is not None
    assert service.prepare(entries, cached_only=True) is not None


def test_a_keyless_request_that_falls_back_from_the_cache_keeps_its_round_robin_turn(
    storage: Storage, topic: str
) -> None:
    topics(storage).create(topic, 2, config())
    service = ProduceService(LogWriter(storage))
    service.produce([ProduceEntry(topic, 0, [b"x"])])  # caches the topic and initializes partition 0 only
    keyless = [ProduceEntry(topic, None, [b"k"])]
    first = service.prepare(keyless, cached_only=True)
    assert first is not None
    assert [g.partition for g in first.ready_groups] == [0]
    assert service.prepare(keyless, cached_only=True) is None  # partition 1's turn, and it is not initialized
    (result,) = service.produce(keyless)  # what llog serve's pool thread does next: the same turn
    assert (result.partition, result.ok) == (1, True)
    third = service.prepare(keyless, cached_only=True)
    assert third is not None
    assert [g.partition for g in third.ready_groups] == [0]


# --- delete and reclaim -------------------------------------------------------------------------------------


def test_delete_refuses_produce_consume_describe_and_a_new_create(storage: Storage, topic: str) -> None:
    registry = topics(storage)
    registry.create(topic, 2, config())
    other = f"{topic}-live"
    cached = ProduceService(LogWriter(storage))  # a process that knew the topic before the delete
    assert all(r.ok for r in cached.produce([ProduceEntry(topic, 0, [b"before"]), ProduceEntry(other, 0, [b"o"])]))

    registry.delete(topic)

    # Its cached record still says active: the append meets the fence, and the record read again says deleted.
    raced, live = cached.produce([ProduceEntry(topic, 0, [b"after"]), ProduceEntry(other, 0, [b"o"])])
    assert isinstance(raced.error, UnknownTopic)
    assert live.ok
    with pytest.raises(UnknownTopic):  # now known deleted: refused before anything is written
        cached.produce([ProduceEntry(topic, 1, [b"after"])])
    with pytest.raises(UnknownTopic):
        ProduceService(LogWriter(storage)).produce([ProduceEntry(topic, None, [b"keyed"])])
    consume = ConsumeService(LogReader(storage))
    with pytest.raises(UnknownTopic):
        consume.consume(ConsumeRequest([FetchPartition(topic, 0, 1, 1 << 20)], max_wait_ms=0, min_bytes=1,
                                       max_bytes=1 << 20))  # fmt: skip
    catalog = LogCatalog(storage.oxia, root=storage.root)
    with pytest.raises(UnknownTopic):
        catalog.describe(topic)
    assert [t.topic for t in catalog.topics()] == [other]
    assert list(catalog.partitions()) == [other]  # the compaction planner leaves the deleted one alone
    with pytest.raises(TopicDeleted):
        registry.create(topic, 2, config())
    assert registry.delete(topic).deleted  # again: re-fences, still 200
    with pytest.raises(UnknownTopic):
        registry.delete(f"{topic}-none")


def test_a_delete_fences_so_an_append_racing_it_fails(storage: Storage, topic: str) -> None:
    topics(storage).create(topic, 1, config())
    writer = LogWriter(storage)
    writer.append(topic, 0, [b"a"])  # the writer caches the open generation: no read before its next put

    topics(storage).delete(topic)

    with pytest.raises(LogFenced):
        writer.append(topic, 0, [b"b"])


def test_a_produce_whose_every_batch_meets_a_delete_is_refused_as_unknown_topic(storage: Storage, topic: str) -> None:
    topics(storage).create(topic, 2, config())
    cached = ProduceService(LogWriter(storage))
    assert cached.produce([ProduceEntry(topic, 0, [b"before"])])[0].ok

    topics(storage).delete(topic)

    with pytest.raises(UnknownTopic, match="was deleted"):
        cached.produce([ProduceEntry(topic, 0, [b"after"]), ProduceEntry(topic, 1, [b"after"])])
    assert LogReader(storage).high_watermark(topic, 0) == 1


def test_deleting_an_implicit_topic_works_too(storage: Storage, topic: str) -> None:
    ProduceService(LogWriter(storage)).produce([ProduceEntry(topic, 3, [b"x"])])

    record = topics(storage).delete(topic)

    assert (record.deleted, record.implicit, record.partition_numbers) == (True, True, [3])
    with pytest.raises(UnknownTopic):
        ProduceService(LogWriter(storage)).produce([ProduceEntry(topic, 3, [b"y"])])


def test_a_process_that_cached_no_record_cannot_open_a_new_partition_after_an_implicit_delete(
    storage: Storage, topic: str
) -> None:
    cached = ProduceService(LogWriter(storage))  # caches the implicit topic for TOPIC_CACHE_TTL_MS
    assert cached.produce([ProduceEntry(topic, 0, [b"before"])])[0].ok

    topics(storage).delete(topic)  # another process

    with pytest.raises(UnknownTopic):
        cached.produce([ProduceEntry(topic, 5, [b"after"])])
    # Nothing is open: the partition is not there, or fenced with nothing in it.
    try:
        info = LogReader(storage).partition_info(topic, 5)
    except PartitionNotInitialized:
        return
    assert (info.control.log_state.value, LogReader(storage).high_watermark(topic, 5)) == ("FENCED", 0)


def test_implicit_partition_numbers_up_to_the_largest_are_kept_as_a_set(storage: Storage, topic: str) -> None:
    service = ProduceService(LogWriter(storage))
    largest = 2**31 - 1
    assert all(r.ok for r in service.produce([ProduceEntry(topic, 1, [b"a"]), ProduceEntry(topic, largest, [b"b"])]))

    record = topics(storage).delete(topic)

    assert (record.implicit, record.partition_numbers) == (True, [1, largest])
    assert topics(storage).get(topic) == record  # stored and read back
    report = collector_ahead(storage).collect()
    assert (report.topics_reclaimed, report.reclaim_partitions, report.errors) == (1, 2, [])


def test_implicit_data_written_before_topic_records_keeps_working_and_is_adopted(storage: Storage, topic: str) -> None:
    legacy = LogWriter(storage)  # partitions created the old way: registered, no topic record
    for partition in (0, 7):
        legacy.initialize_partition(topic, partition)
        legacy.append(topic, partition, [b"old"])
    registry = topics(storage)
    assert registry.get(topic) is None
    catalog = LogCatalog(storage.oxia, root=storage.root)
    assert catalog.describe(topic)["partitions"] == 2

    service = ProduceService(LogWriter(storage))
    assert service.produce([ProduceEntry(topic, 7, [b"new"]), ProduceEntry(topic, 9, [b"new"])])[0].ok

    record = registry.get(topic)  # the first produce since wrote the record, with every registered partition
    assert record is not None
    assert (record.implicit, record.partition_numbers) == (True, [0, 7, 9])
    assert [s["partition"] for s in catalog.describe(topic)["partition_status"]] == [0, 7, 9]
    assert values(LogReader(storage), topic, 7) == [b"old", b"new"]
    registry.delete(topic)
    for partition in (0, 7, 9):
        assert LogReader(storage).partition_info(topic, partition).control.log_state.value == "FENCED"


def test_a_produce_that_saw_no_record_meets_the_deleted_record_of_a_topic_from_before_records(
    storage: Storage, topic: str
) -> None:
    LogWriter(storage).initialize_partition(topic, 0)  # registered, no record: from before topic records
    registry = topics(storage)

    registry.delete(topic)  # writes its deleted record, create-only

    with pytest.raises(UnknownTopic, match="was deleted"):  # the produce's create-only put loses: nothing opened
        registry.add_implicit_partition(topic, 5, None)
    with pytest.raises(PartitionNotInitialized):
        LogReader(storage).partition_info(topic, 5)
    assert LogReader(storage).partition_info(topic, 0).control.log_state.value == "FENCED"


def test_gc_reclaims_a_deleted_topic_and_the_name_can_be_created_again(storage: Storage, topic: str) -> None:
    registry = topics(storage)
    other = f"{topic}-live"
    registry.create(topic, 2, config())
    registry.create(other, 1, config())
    clock = Clock()
    service = ProduceService(LogWriter(storage), clock=clock)
    for i in range(3):
        results = service.produce([ProduceEntry(topic, 0, [f"a{i}".encode()]), ProduceEntry(topic, 1, [b"b"]),
                                   ProduceEntry(other, 0, [f"o{i}".encode()])])  # fmt: skip
        assert all(r.ok for r in results)
    compactor = Compactor(storage)
    for partition in (0, 1):
        compactor.compact_once(topic, partition)
    compactor.compact_once(other, 0)
    topic_prefix = f"{storage.root}/{topic}/"
    assert objects(storage, topic_prefix), "compacted objects and manifests exist"

    deleted = registry.delete(topic)
    early = GarbageCollector(storage, config=GcConfig(grace_ms=GRACE_MS)).collect()
    assert early.topics_reclaimed == 0  # not before the grace and the reclaim delay
    report = collector_ahead(storage).collect()

    assert (report.topics_reclaimed, report.reclaim_partitions, report.errors) == (1, 2, [])
    assert report.reclaim_objects_deleted >= 4
    assert objects(storage, topic_prefix) == []
    keys = RegistryKeys(storage.root)
    assert storage.oxia.get(keys.topic(topic), partition_key=keys.partition_key) is None
    for partition in (0, 1):
        partition_keys = deleted.partition_keys(partition, storage.root)
        for start, end in partition_keys.oxia_ranges:
            assert storage.oxia.list_keys(start, end, partition_key=partition_keys.partition_key) == []
    assert registry.registry.partitions(topic) == {}
    # Every WAL blob held slices of both topics: the live one's compaction freed them, and the reclaim the rest.
    assert objects(storage, shared_wal_prefix(storage.root)) == []
    reader = LogReader(storage)
    assert values(reader, other, 0) == [b"o0", b"o1", b"o2"]

    _, created = registry.create(topic, 1, config())
    assert created
    clock.offset_s = (GRACE_MS + RECLAIM_DELAY_MS) / 1000  # as long as reclaim waited after the delete
    assert service.produce([ProduceEntry(topic, 0, [b"new"])])[0].start_offset == 1
    assert values(reader, topic, 0) == [b"new"]


def test_a_process_that_missed_a_delete_and_reclaim_writes_to_the_new_topic_correctly(
    storage: Storage, topic: str
) -> None:
    registry = topics(storage)
    registry.create(topic, 1, config())
    clock = Clock()
    stale = ProduceService(LogWriter(storage), clock=clock)
    for value in (b"a", b"b", b"c"):
        assert stale.produce([ProduceEntry(topic, 0, [value])])[0].ok
    # Fenced and unfenced: the writer's cached generation is no longer the first one.
    LogWriter(storage).fence(topic, 0)
    LogWriter(storage).unfence(topic, 0)
    assert stale.produce([ProduceEntry(topic, 0, [b"d"])])[0].start_offset == 4

    registry.delete(topic)
    assert collector_ahead(storage).collect().topics_reclaimed == 1
    registry.create(topic, 1, config())
    clock.offset_s = STALE_TOPIC_MS / 1000  # the process comes back after a long pause

    (result,) = stale.produce([ProduceEntry(topic, 0, [b"new"])])

    assert (result.ok, result.start_offset) == (True, 1)
    assert values(LogReader(storage), topic, 0) == [b"new"]


def test_a_reclaim_run_that_read_the_record_before_another_finished_leaves_the_recreated_topic_alone(
    storage: Storage, topic: str
) -> None:
    registry = topics(storage)
    registry.create(topic, 2, config())
    service = ProduceService(LogWriter(storage))
    assert service.produce([ProduceEntry(topic, 1, [b"old"])])[0].ok
    registry.delete(topic)
    read_by_b = registry.get(topic)  # run B reads the deleted record, then stalls
    assert read_by_b is not None
    assert reclaim_topic(storage, read_by_b).finished  # run A reclaims; the name is free
    registry.create(topic, 2, config())
    fresh = ProduceService(LogWriter(storage))
    assert all(r.ok for r in fresh.produce([ProduceEntry(topic, 1, [b"new-1"]), ProduceEntry(topic, 1, [b"new-2"])]))

    late = reclaim_topic(storage, read_by_b)  # run B goes on with what it read

    assert (late.finished, late.partitions_reclaimed) == (False, 0)
    assert values(LogReader(storage), topic, 1) == [b"new-1", b"new-2"]


def test_a_reclaim_run_paused_mid_loop_keeps_the_name_until_it_ends_so_nothing_new_is_deleted(
    storage: Storage, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = topics(storage)
    registry.create(topic, 2, config())
    service = ProduceService(LogWriter(storage))
    assert all(r.ok for r in service.produce([ProduceEntry(topic, 0, [b"old"]), ProduceEntry(topic, 1, [b"old"])]))
    registry.delete(topic)
    acknowledged: list[bytes] = []
    meanwhile: list[str] = []
    delete_objects = storage.blobs.delete

    def run_a_then_recreate_and_produce() -> None:
        """While run B is between its partitions: run A, a create of the name, a produce to it."""
        record = registry.get(topic)
        assert record is not None
        meanwhile.append(f"run A finished: {reclaim_topic(storage, record).finished}")
        try:
            registry.create(topic, 2, config())
        except TopicDeleted:
            meanwhile.append("create refused")
            return
        for result in ProduceService(LogWriter(storage)).produce([ProduceEntry(topic, 1, [b"new"])]):
            if result.ok:
                acknowledged.append(b"new")

    def paused_after_the_first_partition(bucket: str, keys: list[str]) -> None:
        delete_objects(bucket, keys)
        if not meanwhile:
            meanwhile.append("run B paused")
            run_a_then_recreate_and_produce()

    monkeypatch.setattr(storage.blobs, "delete", paused_after_the_first_partition)
    record_b = registry.get(topic)
    assert record_b is not None
    reclaim_topic(storage, record_b)  # run B
    monkeypatch.undo()

    reader = LogReader(storage)
    if acknowledged:  # whatever was acknowledged meanwhile must still be there
        assert values(reader, topic, 1) == acknowledged
    # Run A deferred to run B, which held the reclaim, so the name stayed taken until run B ended.
    assert meanwhile == ["run B paused", "run A finished: False", "create refused"]
    assert registry.get(topic) is None
    for partition in (0, 1):
        with pytest.raises(PartitionNotInitialized):
            reader.high_watermark(topic, partition)


def test_a_crashed_reclaim_runs_claim_holds_the_topic_only_until_it_expires(
    storage: Storage, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = topics(storage)
    registry.create(topic, 2, config())
    registry.delete(topic)

    def crash(bucket: str, keys: list[str]) -> None:
        raise SimulatedCrash("reclaim between partitions")

    monkeypatch.setattr(storage.blobs, "delete", crash)
    record = registry.get(topic)
    assert record is not None
    with pytest.raises(SimulatedCrash):
        reclaim_topic(storage, record)
    monkeypatch.undo()
    claimed = registry.get(topic)
    assert claimed is not None
    assert claimed.reclaim is not None

    within = reclaim_topic(dataclasses.replace(storage, clock=lambda: time.time() + 60), claimed)
    assert (within.finished, within.partitions_reclaimed) == (False, 0)
    assert within.deferred == [f"{topic}: reclaim run {claimed.reclaim.run_id} works on it"]
    expired = reclaim_topic(dataclasses.replace(storage, clock=lambda: time.time() + RECLAIM_LEASE_MS / 1000), claimed)
    assert (expired.finished, expired.partitions_reclaimed) == (True, 2)
    assert registry.get(topic) is None


def test_a_reclaim_run_starts_no_partition_once_its_claim_is_half_expired(storage: Storage, topic: str) -> None:
    registry = topics(storage)
    registry.create(topic, 3, config())
    registry.delete(topic)
    started = time.time()
    reads = iter([started] + [started + RECLAIM_LEASE_MS / 2000] * 10)  # the claim, then a long stall
    record = registry.get(topic)
    assert record is not None

    result = reclaim_topic(dataclasses.replace(storage, clock=lambda: next(reads)), record)

    assert (result.finished, result.partitions_reclaimed) == (False, 0)
    released = registry.get(topic)
    assert released is not None
    assert released.reclaim is None  # the next run need not wait for the claim
    assert collector_ahead(storage).collect().topics_reclaimed == 1


def test_a_deleted_topic_keeps_its_data_until_reclaimed_and_retention_leaves_it(storage: Storage, topic: str) -> None:
    registry = topics(storage)
    registry.create(topic, 1, config(retention_bytes=1))
    writer = LogWriter(storage, config=WriterConfig())
    writer.append_shared([SharedAppendGroup(topic, 0, [b"x"])])
    registry.delete(topic)

    report = GarbageCollector(storage, config=GcConfig(grace_ms=GRACE_MS)).collect()

    assert (report.topics_reclaimed, report.retention_partitions_truncated) == (0, 0)
    assert LogReader(storage).read_offset(topic, 0, 1).value == b"x"


def test_a_topics_retention_config_applies_to_its_partitions(storage: Storage, topic: str) -> None:
    registry = topics(storage)
    registry.create(topic, 1, config(retention_bytes=1))
    writer = LogWriter(storage)
    compactor = Compactor(storage)
    for value in (b"one", b"two", b"three"):
        writer.append(topic, 0, [value])
        compactor.compact_once(topic, 0)

    report = collector_ahead(storage).collect()

    assert report.retention_partitions_truncated == 1
    assert LogCatalog(storage.oxia, root=storage.root).describe(topic)["partition_status"][0]["log_start"] == 3


def test_keyed_records_of_a_cas_topic_are_routed_the_same(storage: Storage, topic: str) -> None:
    topics(storage).create(topic, 2, config(AppendProtocol.CAS))
    service = ProduceService(LogWriter(storage, config=CAS))
    results = service.produce([ProduceEntry(topic, None, [Record(b"v", key=b"k")])])
    assert [r.partition for r in results] == [partition_for_key(b"k", 2)]
    assert results[0].ok


def test_a_deleted_topics_partitions_cannot_be_unfenced(storage: Storage, topic: str) -> None:
    admin = AdminService(storage.oxia, root=storage.root, writer=LogWriter(storage))
    admin.create_topic(topic, 1, None)
    admin.delete_topic(topic)

    with pytest.raises(UnknownTopic):
        admin.unfence(topic, 0)
    assert LogReader(storage).partition_info(topic, 0).control.log_state.value == "FENCED"


@pytest.mark.parametrize("protocol", [AppendProtocol.CAS, SEQUENTIAL])
def test_an_unfence_that_checked_the_topic_before_a_delete_cannot_reopen_it(
    storage: Storage, topic: str, protocol: AppendProtocol, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = AdminService(storage.oxia, root=storage.root, writer=LogWriter(storage))
    admin.create_topic(topic, 1, {"append_protocol": protocol.value})
    producer = ProduceService(LogWriter(storage))  # another process, caching the active record
    assert producer.produce([ProduceEntry(topic, 0, [b"before"])])[0].ok
    read_record = admin.topic_records.get

    def read_then_delete(name: str) -> TopicRecord | None:
        record = read_record(name)  # the unfence's check: active
        topics(storage).delete(name)  # another process's DELETE runs and returns before the unfence writes
        return record

    monkeypatch.setattr(admin.topic_records, "get", read_then_delete)
    with pytest.raises(UnknownTopic, match="was deleted"):
        admin.unfence(topic, 0)
    monkeypatch.undo()

    assert LogReader(storage).partition_info(topic, 0).control.log_state is LogState.FENCED
    with pytest.raises(UnknownTopic):
        producer.produce([ProduceEntry(topic, 0, [b"after the delete"])])
    with pytest.raises(LogFenced):
        LogWriter(storage).append(topic, 0, [b"after the delete"])
    assert values(LogReader(storage), topic, 0) == [b"before"]


@pytest.mark.parametrize("protocol", [AppendProtocol.CAS, SEQUENTIAL])
def test_no_unfence_reopens_a_deleted_topics_partition_and_rewrites_of_its_control_keep_that(
    storage: Storage, topic: str, protocol: AppendProtocol
) -> None:
    record, _ = topics(storage).create(topic, 1, config(protocol))
    writer = LogWriter(storage)
    writer.append(topic, 0, [b"a"])
    topics(storage).delete(topic)
    meta = PartitionMetadata(storage.oxia, record.partition_keys(0, storage.root))
    sequential = SequentialAppender(WriterConfig(), fault=lambda point: None)

    with pytest.raises(UnknownTopic):
        writer.unfence(topic, 0)  # a direct one, no topic record read
    # A takeover's voiding (CAS onto itself, or a roll) and the migration rewrite meta/control: the mark stays.
    fence.void_late_commits(meta, config=WriterConfig(), sequential=sequential)
    writer.migrate_to_sequential(topic, 0)
    fence.void_late_commits(meta, config=WriterConfig(), sequential=sequential)

    control = meta.control().record
    assert (control.log_state, control.topic_deleted, control.sequential) == (LogState.FENCED, True, True)
    with pytest.raises(UnknownTopic):
        writer.unfence(topic, 0)
    with pytest.raises(LogFenced):
        writer.append(topic, 0, [b"b"])


@pytest.mark.parametrize("finisher", ["unfence", "append"])
def test_a_deletes_fence_holds_when_another_party_finishes_its_seal_first(
    storage: Storage, topic: str, finisher: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The delete's fence marker is in, its seal not yet: an unfence finishes the seal and opens a new generation,
    or a writer that landed past the marker finishes it; either way the delete leaves the partition fenced for
    good."""
    topics(storage).create(topic, 1, config(SEQUENTIAL))
    writer = LogWriter(storage)
    writer.append(topic, 0, [b"a"])  # the writer caches the open generation
    met: list[object] = []

    def after_marker(point: str) -> None:
        if point != WRITER_AFTER_FENCE_MARKER or met:
            return
        if finisher == "unfence":
            met.append(writer.unfence(topic, 0).log_state)
        else:
            with pytest.raises(LogFenced):
                writer.append(topic, 0, [b"past the marker"])
            met.append(LogState.FENCED)

    def appender(config: WriterConfig, fault: Callable[[str], None], clock: Callable[[], float]) -> SequentialAppender:
        return SequentialAppender(config, fault=after_marker, clock=clock)

    monkeypatch.setattr(topics_module, "SequentialAppender", appender)
    topics(storage).delete(topic)
    monkeypatch.undo()

    assert met == [LogState.OPEN if finisher == "unfence" else LogState.FENCED]
    assert LogReader(storage).partition_info(topic, 0).control.log_state is LogState.FENCED
    with pytest.raises(UnknownTopic):
        writer.unfence(topic, 0)
    with pytest.raises(LogFenced):
        writer.append(topic, 0, [b"after the delete"])
    assert values(LogReader(storage), topic, 0) == [b"a"]


def create_from_before_topic_ids(storage: Storage, topic: str, partitions: int, settings: TopicConfig) -> TopicRecord:
    """A topic as the version before ``keys_include_id`` created it: its partitions in the legacy folders."""
    registry = topics(storage)
    doc = json.loads(TopicRecord(topic, partitions, settings, 1_000, topic_id=new_topic_id()).encode())
    del doc["keys_include_id"]
    storage.oxia.put(registry.keys.topic(topic), json.dumps(doc).encode(), partition_key=registry.keys.partition_key,
                     expected_version_id=CREATE_ONLY)  # fmt: skip
    record = registry.get(topic)
    assert record is not None
    assert (record.keys_include_id, record.keys_id) == (False, None)
    registry.initialize(record, range(partitions))
    return record


@pytest.mark.parametrize("before_ids", [False, True], ids=["with-id", "legacy-folders"])
def test_a_reclaim_run_paused_past_its_lease_deletes_nothing_of_the_topic_created_again(
    storage: Storage, topic: str, before_ids: bool
) -> None:
    """Run B claims the deleted topic and pauses right after its lease check; its claim expires, run A takes
    over and finishes, the name is created again and produced to; then B goes on deleting. The new
    incarnation's keys, objects and registry entries are not the old one's, so B deletes none of them
    (also when the deleted topic's partitions are in the legacy folders)."""
    registry = topics(storage)
    if before_ids:
        create_from_before_topic_ids(storage, topic, 2, config())
    else:
        registry.create(topic, 2, config())
    service = ProduceService(LogWriter(storage))
    assert all(r.ok for r in service.produce([ProduceEntry(topic, 0, [b"old"]), ProduceEntry(topic, 1, [b"old"])]))
    registry.delete(topic)
    acknowledged: dict[int, list[bytes]] = {0: [], 1: []}
    paused: list[str] = []

    def paused_after_its_check(point: str) -> None:
        """Run B's pause, at its first partition after the lease check (``reclaim.after_lease_check``)."""
        if point != RECLAIM_AFTER_LEASE_CHECK or paused:
            return
        paused.append(point)
        after_lease = dataclasses.replace(storage, clock=lambda: time.time() + RECLAIM_LEASE_MS / 1000)
        record = registry.get(topic)
        assert record is not None
        assert record.reclaim is not None  # B's claim, expired for run A
        assert reclaim_topic(after_lease, record).finished  # run A takes over and finishes
        registry.create(topic, 2, config())
        fresh = ProduceService(LogWriter(storage))
        for value in (b"new-1", b"new-2"):
            for result in fresh.produce([ProduceEntry(topic, 0, [value]), ProduceEntry(topic, 1, [value])]):
                assert result.ok
                acknowledged[result.partition].append(value)
        Compactor(storage).compact_once(topic, 0)  # S3 objects and manifests of the new incarnation too

    record_b = registry.get(topic)
    assert record_b is not None
    late = reclaim_topic(storage, record_b, fault_hook=paused_after_its_check)  # run B

    assert paused
    assert not late.finished
    reader = LogReader(storage)
    for partition in (0, 1):
        assert values(reader, topic, partition) == acknowledged[partition] == [b"new-1", b"new-2"]
    assert registry.registry.partitions(topic) == {topic: [0, 1]}
    assert [listing.topic for listing in LogCatalog(storage.oxia, root=storage.root).topics()].count(topic) == 1
    report = Verifier(storage).verify([topic])  # index, manifests and compacted objects all there
    assert (report.ok, len(report.partitions)) == (True, 2)


def test_a_topic_from_before_topic_ids_keeps_its_legacy_folders_through_produce_compaction_retention_and_reclaim(
    storage: Storage, topic: str
) -> None:
    """A record written before ``keys_include_id`` existed: its partitions stay in the legacy folders for every
    component; once reclaimed, the name's next topic gets folders named by its id."""
    registry = topics(storage)
    create_from_before_topic_ids(storage, topic, 2, config(retention_bytes=1))
    service = ProduceService(LogWriter(storage))
    compactor = Compactor(storage)
    for value in (b"one", b"two", b"three"):
        assert all(r.ok for r in service.produce([ProduceEntry(topic, 0, [value]), ProduceEntry(topic, 1, [value])]))
        compactor.compact_once(topic, 0)
    folder = f"{storage.root}/{topic}/partitions"
    assert LogReader(storage).high_watermark(topic, 1) == 3
    assert PartitionMetadata(storage.oxia, PartitionKeys(topic, 1, storage.root)).control()  # in the legacy folder
    assert objects(storage, f"{folder}/0/manifests/")  # compaction's objects in the legacy folder
    assert values(LogReader(storage), topic, 1) == [b"one", b"two", b"three"]
    consumed = ConsumeService(LogReader(storage)).consume(
        ConsumeRequest([FetchPartition(topic, 1, 2, 1 << 20)], max_wait_ms=0, min_bytes=1, max_bytes=1 << 20)
    )
    assert [r.value for r in consumed[0].records] == [b"two", b"three"]

    assert collector_ahead(storage).collect().retention_partitions_truncated == 1
    assert LogCatalog(storage.oxia, root=storage.root).describe(topic)["partition_status"][0]["log_start"] == 3

    registry.delete(topic)
    report = collector_ahead(storage).collect()
    assert (report.topics_reclaimed, report.reclaim_partitions, report.errors) == (1, 2, [])
    assert objects(storage, f"{folder}/") == []
    assert registry.registry.partitions(topic) == {}

    record, _ = registry.create(topic, 1, config())
    assert record.keys_include_id
    assert ProduceService(LogWriter(storage)).produce([ProduceEntry(topic, 0, [b"new"])])[0].start_offset == 1
    assert values(LogReader(storage), topic, 0) == [b"new"]
    assert objects(storage, f"{folder}/") == []
    with pytest.raises(PartitionNotInitialized):
        PartitionMetadata(storage.oxia, PartitionKeys(topic, 0, storage.root)).control()


def test_a_delete_repeated_while_reclaim_finishes_leaves_nothing_of_the_reclaimed_topic(
    storage: Storage, topic: str
) -> None:
    registry = TopicRegistry(storage.oxia, root=storage.root, writer_config=CAS)
    record, _ = registry.create(topic, 2, TopicConfig(AppendProtocol.SEQUENTIAL))
    registry.delete(topic)
    retry = TopicRegistry(storage.oxia, root=storage.root, writer_config=CAS)
    read_record = retry.get

    def read_then_reclaim(name: str) -> TopicRecord | None:  # a client's retry reads the record; GC reclaims
        found = read_record(name)
        collector_ahead(storage).collect()
        return found

    retry.get = read_then_reclaim  # type: ignore[method-assign, assignment]
    with pytest.raises(UnknownTopic):  # its claim finds the record gone, and then no topic of the name
        retry.delete(topic)
    assert registry.get(topic) is None
    assert registry.registry.entries(topic, current={}) == {}
    assert PartitionMetadata(storage.oxia, record.partition_keys(0, storage.root)).snapshot().control is None


def test_registry_entries_of_a_reclaimed_incarnation_neither_make_the_next_legacy_nor_mislead_discovery(
    storage: Storage, topic: str
) -> None:
    registry = TopicRegistry(storage.oxia, root=storage.root, writer_config=CAS)
    dead_id = new_topic_id()  # entries a reclaimed incarnation left (a fence racing its reclaim, docs/GC.md)
    for p in (0, 1):
        registry.registry.register(PartitionKeys(topic, p, storage.root, dead_id))
    assert LogCatalog(storage.oxia, root=storage.root).partitions().get(topic) is None  # no record: not current
    created, _ = registry.create(topic, 2, TopicConfig(AppendProtocol.SEQUENTIAL))
    assert created.keys_include_id
    entries = registry.registry.entries(topic, current={topic: created.keys_id})[topic]
    assert [(e.partition, e.topic_id) for e in entries] == [(0, created.topic_id), (1, created.topic_id)]
    svc = ProduceService(LogWriter(storage))
    for value in (b"1", b"2"):
        assert all(r.ok for r in svc.produce([ProduceEntry(topic, 0, [value]), ProduceEntry(topic, 1, [value])]))
    assert LogCatalog(storage.oxia, root=storage.root).partitions()[topic] == [
        created.partition_keys(p, storage.root) for p in (0, 1)
    ]
    assert back_up_topics(storage, [topic], keep=3).topics[topic][0].high_watermark == 2
    assert {(p.topic_id, p.high_watermark) for p in Verifier(storage).verify([topic]).partitions} == {
        (created.topic_id, 2)
    }
    registry.delete(topic)
    assert collector_ahead(storage).collect().topics_reclaimed == 1
    assert registry.registry.entries(topic, current={}) == {}
    again, _ = registry.create(topic, 1, TopicConfig(AppendProtocol.SEQUENTIAL))
    assert again.keys_include_id
    assert again.topic_id != created.topic_id


def test_a_partition_opened_without_topic_records_over_a_reclaimed_incarnations_entry_is_found_and_kept(
    storage: Storage, topic: str
) -> None:
    """With no record, the legacy folder is the one in force: a library writer's partition replaces an entry a
    reclaimed incarnation left, so discovery finds it and a later produce keeps its folder (and its records)."""
    registry = TopicRegistry(storage.oxia, root=storage.root, writer_config=CAS)
    registry.registry.register(PartitionKeys(topic, 0, storage.root, new_topic_id()))  # left by a dead incarnation
    writer = LogWriter(storage)  # the library, without topic records: the legacy folder
    assert writer.initialize_partition(topic, 0)
    assert writer.append(topic, 0, [b"library"]).start_offset == 1
    assert LogCatalog(storage.oxia, root=storage.root).partitions()[topic] == [PartitionKeys(topic, 0, storage.root)]
    assert [(p.topic_id, p.high_watermark) for p in Verifier(storage).verify([topic]).partitions] == [(None, 1)]
    assert all(r.ok for r in ProduceService(LogWriter(storage)).produce([ProduceEntry(topic, 0, [b"service"])]))
    record = registry.get(topic)
    assert record is not None
    assert not record.keys_include_id  # over the library's partition: its folder
    assert [r.value for r in LogReader(storage).iter_from(topic, 0, 1)] == [b"library", b"service"]


def test_an_implicit_topic_over_a_reclaimed_incarnations_entries_gets_its_own_folder(
    storage: Storage, topic: str
) -> None:
    registry = TopicRegistry(storage.oxia, root=storage.root, writer_config=CAS)
    registry.registry.register(PartitionKeys(topic, 0, storage.root, new_topic_id()))
    assert ProduceService(LogWriter(storage)).produce([ProduceEntry(topic, 0, [b"v"])])[0].ok
    record = registry.get(topic)
    assert record is not None
    assert record.keys_include_id
    assert record.implicit_partitions == frozenset({0})
    assert LogCatalog(storage.oxia, root=storage.root).partitions()[topic] == [record.partition_keys(0, storage.root)]


def test_a_late_registration_of_another_incarnation_never_replaces_the_current_ones_entry(
    storage: Storage, topic: str
) -> None:
    registry = TopicRegistry(storage.oxia, root=storage.root, writer_config=CAS)
    current, _ = registry.create(topic, 1, TopicConfig(AppendProtocol.SEQUENTIAL))
    late = PartitionKeys(topic, 0, storage.root, new_topic_id())  # a paused process of a reclaimed incarnation
    assert not registry.registry.register(late)
    assert not registry.registry.register(PartitionKeys(topic, 0, storage.root))  # nor one of the legacy folder
    entries = registry.registry.entries(topic, current={topic: current.keys_id})[topic]
    assert [e.topic_id for e in entries] == [current.topic_id]


def registry_a_day_later(storage: Storage) -> TopicRegistry:
    """A topic registry whose clock is the collector's (``collector_ahead``): a client repeating a DELETE once GC
    may reclaim the topic."""
    ahead_s = (GRACE_MS + RECLAIM_DELAY_MS + 60_000) / 1000
    return TopicRegistry(storage.oxia, root=storage.root, writer_config=CAS, clock=lambda: time.time() + ahead_s)


@pytest.mark.parametrize("before_ids", [False, True], ids=["with-id", "legacy-folders"])
def test_a_reclaim_starting_while_a_repeated_delete_fences_leaves_nothing_that_passes_for_the_topic(
    storage: Storage, topic: str, before_ids: bool
) -> None:
    """A client repeats a DELETE; a GC run starts reclaiming the topic after the repeat read the record and before
    it fences (while it looks up the registered partitions). The repeat's fence creates nothing of the reclaimed
    topic again: no registry entry, no ``meta/`` key, nothing listed; the name's next topic has an id (also for
    a topic whose partitions are in the legacy folders, whose entries name no id)."""
    registry = topics(storage)
    if before_ids:
        record = create_from_before_topic_ids(storage, topic, 2, config())
    else:
        record, _ = registry.create(topic, 2, config())
    registry.delete(topic)
    retry = registry_a_day_later(storage)
    look_up = retry.registered
    runs: list[int] = []

    def reclaim_then_look_up(name: str, found: TopicRecord | None) -> list[int]:
        runs.append(collector_ahead(storage).collect().topics_reclaimed)
        return look_up(name, found)

    retry.registered = reclaim_then_look_up  # type: ignore[method-assign, assignment]
    retry.delete(topic)
    runs.append(collector_ahead(storage).collect().topics_reclaimed)  # the next scheduled run
    assert sum(runs) == 1
    assert registry.get(topic) is None
    assert registry.registry.partitions(topic) == {}
    assert [p for p in (0, 1) if PartitionMetadata(storage.oxia, record.partition_keys(p, storage.root))
            .snapshot().control is not None] == []  # fmt: skip
    assert topic not in {t.topic for t in LogCatalog(storage.oxia, root=storage.root).topics()}
    again, _ = registry.create(topic, 1, config())
    assert again.keys_include_id


def test_a_delete_repeated_over_an_expired_reclaim_claim_fences_every_partition(storage: Storage, topic: str) -> None:
    """The first delete stopped after its record (partition 1 never fenced) and a reclaim run claimed the topic
    and died: its claim has expired. A repeated delete fences every partition all the same (T2)."""
    registry = topics(storage)
    record, _ = registry.create(topic, 2, config(AppendProtocol.CAS))
    crashed = TopicRegistry(storage.oxia, root=storage.root, writer_config=CAS)
    fence_one = crashed._fence

    def fence_partition_0_only(deleted: TopicRecord) -> Callable[[PartitionMetadata], object]:
        run = fence_one(deleted)
        return lambda meta: run(meta) if meta.keys.partition == 0 else None

    crashed._fence = fence_partition_0_only  # type: ignore[method-assign, assignment]
    crashed.delete(topic)
    deleted = registry.get(topic)
    assert deleted is not None
    assert deleted.deleted
    dead_run = dataclasses.replace(deleted, reclaim=topics_module.ReclaimClaim("a-dead-run", 1_000))
    storage.oxia.put(registry.keys.topic(topic), dead_run.encode(), partition_key=registry.keys.partition_key,
                     expected_version_id=deleted.version_id)  # fmt: skip
    assert PartitionMetadata(storage.oxia, record.partition_keys(1, storage.root)).control().record.log_state \
        is LogState.OPEN  # fmt: skip

    registry_a_day_later(storage).delete(topic)
    for p in (0, 1):
        control = PartitionMetadata(storage.oxia, record.partition_keys(p, storage.root)).control().record
        assert (control.log_state, control.topic_deleted) == (LogState.FENCED, True)
    with pytest.raises(LogFenced):
        LogWriter(storage).append(topic, 1, [b"late"])
    assert collector_ahead(storage).collect().topics_reclaimed == 1
