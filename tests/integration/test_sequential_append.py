"""The sequential append protocol (docs/SEQUENTIAL_APPEND.md) on a real Oxia server and moto S3.

Append and read, one Oxia write per partition-append, unique contiguous
offsets under concurrent threads and processes, fencing (acknowledged before
the fence stays readable, later appends are rejected, appends racing a
fence), unfencing into a new generation, a crash at every named point,
compaction, garbage collection and retention on sequential partitions, and
the one-way migration of a CAS partition.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

from llog.config import CompactorConfig, GcConfig, OxiaConfig, RetentionConfig, RetentionPolicy, S3Config, WriterConfig
from llog.errors import AppendOutcomeUnknown, ConditionalAppendUnsupported, LogFenced, OffsetOutOfRange
from llog.format.keys import PartitionKeys, S3Location, shared_wal_prefix
from llog.format.kv.control import AppendProtocol, ControlRecord, Generation, LogState
from llog.format.kv.document import DataRef
from llog.format.kv.index import EntryType, FenceMarker, IndexEntry
from llog.protocol.append import LogWriter, SharedAppendGroup
from llog.protocol.append_sequential import SequentialAppender
from llog.protocol.catalog import LogCatalog
from llog.protocol.commit import BatchCommit
from llog.protocol.compaction import Compactor, compact_until_caught_up
from llog.protocol.faults import COMPACTOR_AFTER_BLOB_PUT, FaultHook
from llog.protocol.faults import COMPACTOR_AFTER_CURSOR as AFTER_CURSOR
from llog.protocol.faults import COMPACTOR_AFTER_DELETE as AFTER_DELETE
from llog.protocol.faults import COMPACTOR_AFTER_END_KEY as AFTER_END_KEY
from llog.protocol.faults import COMPACTOR_AFTER_MANIFEST as AFTER_MANIFEST
from llog.protocol.faults import COMPACTOR_AFTER_RECORD as AFTER_RECORD
from llog.protocol.faults import WRITER_AFTER_BLOB_PUT as AFTER_BLOB_PUT
from llog.protocol.faults import WRITER_AFTER_FENCE_MARKER as AFTER_FENCE_MARKER
from llog.protocol.faults import WRITER_AFTER_RESERVE as AFTER_RESERVE
from llog.protocol.faults import WRITER_AFTER_SEQUENCE_PUT as AFTER_SEQUENCE_PUT
from llog.protocol.gc import GarbageCollector
from llog.protocol.index import PartitionIndex
from llog.protocol.metadata import PartitionMetadata, SequenceRecord, VersionedControl
from llog.protocol.read import LogReader
from llog.protocol.retention import Retention
from llog.service.consume import ConsumeRequest, ConsumeService, FetchPartition
from llog.store import oxia_client
from llog.store.metrics import OperationCounters
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from tests.conftest import BUCKET
from tests.faults import SimulatedCrash, crash_at
from tests.integration.test_append_and_read import control_of
from tests.integration.test_concurrent_appends import append_many, assert_unique_and_contiguous
from tests.protocols import CAS

pytestmark = pytest.mark.oxia

SEQUENTIAL = WriterConfig(append_protocol=AppendProtocol.SEQUENTIAL)
GRACE_MS = 60 * 60 * 1000


def seq_writer(storage: Storage, hook: FaultHook | None = None) -> LogWriter:
    return LogWriter(storage, config=SEQUENTIAL, fault_hook=hook)


@pytest.fixture
def writer(storage: Storage) -> LogWriter:
    """A writer that creates sequential partitions (overrides the CAS one of conftest)."""
    return seq_writer(storage)


def meta_of(oxia: OxiaStore, root: str, topic: str, partition: int = 0) -> PartitionMetadata:
    return PartitionMetadata(oxia, PartitionKeys(topic, partition, root))


def sequence(oxia: OxiaStore, root: str, topic: str, generation: int = 1, partition: int = 0
             ) -> list[SequenceRecord]:
    return meta_of(oxia, root, topic, partition).scan_sequence(generation, 0)


def positions(oxia: OxiaStore, root: str, topic: str, generation: int = 1) -> list[tuple[int, int]]:
    return [(r.key.position, r.key.fences) for r in sequence(oxia, root, topic, generation)]


def cas_index_keys(oxia: OxiaStore, root: str, topic: str) -> list[str]:
    keys = PartitionKeys(topic, 0, root)
    return [r.key for r in oxia.range_scan(keys.index_prefix, keys.index_scan_end, partition_key=keys.partition_key)]


def values(reader: LogReader, topic: str, partition: int = 0) -> list[bytes]:
    info = reader.partition_info(topic, partition)
    return [r.value for r in reader.iter_from(topic, partition, info.log_start)]


def wal_keys(blobs: BlobStore, root: str) -> set[str]:
    return {o.key for o in blobs.list(BUCKET, shared_wal_prefix(root))}


def collector(storage: Storage, retention: RetentionConfig | None = None) -> GarbageCollector:
    ahead = GRACE_MS / 1000 + 60
    config = GcConfig(grace_ms=GRACE_MS, retention=retention or RetentionConfig())
    return GarbageCollector(dataclasses.replace(storage, clock=lambda: time.time() + ahead), config=config)


# --- append and read --------------------------------------------------------------------------


def test_initialize_creates_a_sequential_partition_whoever_comes_first_decides(
    writer: LogWriter, oxia_store: OxiaStore, topic: str, root: str, storage: Storage
) -> None:
    assert writer.initialize_partition(topic, 0) is True
    assert writer.initialize_partition(topic, 0) is False
    control = control_of(oxia_store, root, topic, 0)
    assert control.sequential
    assert control.generations == (Generation(1, 0),)
    # A CAS-configured writer neither changes it nor appends the CAS way.
    cas = LogWriter(storage, config=CAS)
    assert cas.initialize_partition(topic, 0) is False
    cas.append(topic, 0, [b"x"])
    assert cas_index_keys(oxia_store, root, topic) == []
    assert positions(oxia_store, root, topic) == [(1, 0)]


def test_offsets_are_contiguous_and_every_record_reads_back(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, topic: str, root: str
) -> None:
    writer.initialize_partition(topic, 0)
    assert reader.high_watermark(topic, 0) == 0
    results = [writer.append(topic, 0, [f"{n}-{i}".encode() for i in range(n)]) for n in (1, 3, 2, 5)]

    assert [(r.start_offset, r.end_offset) for r in results] == [(1, 1), (2, 4), (5, 6), (7, 11)]
    keys = PartitionKeys(topic, 0, root)
    assert [r.index_key for r in results] == [keys.sequence_key(1, e) for e in (1, 4, 6, 11)]
    assert positions(oxia_store, root, topic) == [(1, 0), (4, 0), (6, 0), (11, 0)]
    assert cas_index_keys(oxia_store, root, topic) == []
    assert reader.high_watermark(topic, 0) == 11
    assert values(reader, topic) == [f"{n}-{i}".encode() for n in (1, 3, 2, 5) for i in range(n)]
    assert reader.read_offset(topic, 0, 5).value == b"2-0"
    assert [r.value for r in reader.read_range(topic, 0, 3, 8)] == [b"3-1", b"3-2", b"2-0", b"2-1", b"5-0", b"5-1"]
    with pytest.raises(OffsetOutOfRange, match=r"\[1, 11\]"):
        reader.read_offset(topic, 0, 12)
    assert list(reader.iter_from(topic, 0, 12)) == []


def test_an_append_is_one_oxia_write_and_no_read_and_control_is_never_written(
    oxia_config: OxiaConfig, topic: str, root: str, storage: Storage
) -> None:
    counters = OperationCounters()
    with OxiaStore(oxia_config, counters=counters) as oxia:
        writer = seq_writer(dataclasses.replace(storage, oxia=oxia))
        writer.initialize_partition(topic, 0)
        writer.append(topic, 0, [b"warm"])  # the first append reads meta/control once
        version = oxia.get(PartitionKeys(topic, 0, root).control, partition_key=f"{topic}:0")
        before = counters.snapshot()
        for i in range(10):
            writer.append_shared([SharedAppendGroup(topic, 0, [b"r%d" % i])])
        after = counters.snapshot()
        ops = {op: after[op].calls - (before[op].calls if op in before else 0) for op in after}
        assert {op: n for op, n in ops.items() if n} == {"put_sequential": 10}
        assert after["put_sequential"].conflicts == 0
        assert oxia.get(PartitionKeys(topic, 0, root).control, partition_key=f"{topic}:0") == version


def test_shared_appends_touch_each_partition_once(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, topic: str
) -> None:
    for p in (0, 1):
        writer.initialize_partition(topic, p)
    results = writer.append_shared([SharedAppendGroup(topic, 0, [b"a", b"b"]), SharedAppendGroup(topic, 1, [b"c"])])
    assert [(r.partition, r.start_offset, r.end_offset) for r in results] == [(0, 1, 2), (1, 1, 1)]
    assert results[0].wal_uri == results[1].wal_uri
    assert values(reader, topic, 1) == [b"c"]


def test_a_shared_append_to_known_sequential_partitions_is_one_oxia_write_per_shard(
    oxia_config: OxiaConfig, topic: str, storage: Storage
) -> None:
    counters = OperationCounters()
    with OxiaStore(oxia_config, counters=counters) as oxia:
        writer = seq_writer(dataclasses.replace(storage, oxia=oxia))
        partitions = range(16)
        for p in partitions:
            writer.initialize_partition(topic, p)
            writer.append(topic, p, [b"warm"])  # the writer learns each partition's open generation
        shards = {oxia._get_client().shards.leader("", f"{topic}:{p}")[0] for p in partitions}
        before = counters.snapshot()
        results = writer.append_shared([SharedAppendGroup(topic, p, [b"%d-a" % p, b"%d-b" % p]) for p in partitions])
        after = counters.snapshot()
    ops = {op: after[op].calls - (before[op].calls if op in before else 0) for op in after}
    assert {op: n for op, n in ops.items() if n} == {"put_sequential": len(shards)}
    assert [(r.partition, r.start_offset, r.end_offset, r.ok) for r in results] == [(p, 2, 3, True) for p in partitions]
    reader = LogReader(storage)
    for p in partitions:
        assert [r.value for r in reader.iter_from(topic, p, 1)] == [b"warm", b"%d-a" % p, b"%d-b" % p]
        assert results[p].index_key == PartitionKeys(topic, p, storage.root).sequence_key(1, 3)


def test_a_fenced_partition_in_a_batched_append_fails_alone(
    writer: LogWriter, reader: LogReader, storage: Storage, topic: str
) -> None:
    for p in range(4):
        writer.initialize_partition(topic, p)
        writer.append(topic, p, [b"before"])
    seq_writer(storage).fence(topic, 2)  # another writer: this one still has generation 1 cached as open

    results = writer.append_shared([SharedAppendGroup(topic, p, [b"after"]) for p in range(4)])

    assert [(r.partition, r.error_type) for r in results] == [(0, None), (1, None), (2, "LogFenced"), (3, None)]
    for p in range(4):
        expected = [b"before"] if p == 2 else [b"before", b"after"]
        assert [r.value for r in reader.iter_from(topic, p, 1)] == expected
    writer.unfence(topic, 2)
    (again,) = writer.append_shared([SharedAppendGroup(topic, 2, [b"reopened"])])
    assert (again.ok, again.start_offset) == (True, 2)


def test_a_batched_commit_past_its_deadline_sends_nothing(writer: LogWriter, storage: Storage, topic: str) -> None:
    for p in range(3):
        writer.initialize_partition(topic, p)
        writer.append(topic, p, [b"first"])
    metas = [meta_of(storage.oxia, storage.root, topic, p) for p in range(3)]
    tails = [m.sequence_tail(1) for m in metas]
    ref = DataRef("s3://bucket/key", "bytes-batch-v1", 0, 1)
    commits = [BatchCommit(m, ref, 1, 0, deadline=time.monotonic() - 1) for m in metas]

    outcomes = writer._sequential.commit_many(commits)

    assert [type(o).__name__ for o in outcomes] == ["CommitDeadlineExceeded"] * 3
    assert [m.sequence_tail(1) for m in metas] == tails


def test_a_batched_conditional_commit_is_refused_and_sends_nothing(
    writer: LogWriter, storage: Storage, topic: str
) -> None:
    """commit_many, like commit, cannot check a start offset atomically: a conditional batch is refused."""
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"first"])
    meta = meta_of(storage.oxia, storage.root, topic, 0)
    tail = meta.sequence_tail(1)
    ref = DataRef("s3://bucket/key", "bytes-batch-v1", 0, 1)

    conditional = BatchCommit(meta, ref, 1, 0, time.monotonic() + 60, expected_offset=2)

    (outcome,) = writer._sequential.commit_many([conditional])

    assert isinstance(outcome, ConditionalAppendUnsupported)
    assert meta.sequence_tail(1) == tail


def test_groups_of_one_partition_in_one_request_commit_in_request_order(
    storage: Storage, reader: LogReader, topic: str
) -> None:
    cas = LogWriter(storage, config=CAS)  # CAS partitions commit on the writer's threads, not batched
    for p in range(4):
        cas.initialize_partition(topic, p)
    for i in range(10):
        groups = [SharedAppendGroup(topic, p, [b"%d-%d-%d" % (i, p, j)]) for j in range(3) for p in range(4)]
        results = cas.append_shared(groups)
        for p in range(4):
            mine = [r.start_offset or 0 for r in results if r.partition == p]
            assert mine == sorted(mine), f"partition {p}: {mine}"
    for p in range(4):
        expected = [b"%d-%d-%d" % (i, p, j) for i in range(10) for j in range(3)]
        assert [r.value for r in reader.iter_from(topic, p, 1)] == expected


def test_a_crash_after_a_batched_put_leaves_every_partition_appendable(
    storage: Storage, reader: LogReader, topic: str
) -> None:
    armed = threading.Event()

    def crash_when_armed(point: str) -> None:
        if armed.is_set() and point == AFTER_SEQUENCE_PUT:
            raise SimulatedCrash(point)

    doomed = seq_writer(storage, crash_when_armed)
    for p in range(3):
        doomed.initialize_partition(topic, p)
        doomed.append(topic, p, [b"first"])
    armed.set()
    with pytest.raises(SimulatedCrash):
        doomed.append_shared([SharedAppendGroup(topic, p, [b"maybe"]) for p in range(3)])

    survivor = seq_writer(storage)
    results = survivor.append_shared([SharedAppendGroup(topic, p, [b"next"]) for p in range(3)])
    assert all(r.ok for r in results)
    for p in range(3):
        # The batched put was the commit point of each partition: it landed, so the records are there.
        assert [r.value for r in reader.iter_from(topic, p, 1)] == [b"first", b"maybe", b"next"]


# --- fencing ---------------------------------------------------------------------------------


def test_fence_keeps_what_was_acknowledged_and_rejects_everything_after(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, topic: str, root: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a", b"b"])
    writer.append(topic, 0, [b"c"])

    fenced = seq_writer(storage).fence(topic, 0)
    assert fenced.log_state is LogState.FENCED
    assert fenced.generations == (Generation(1, 0, 3),)
    assert control_of(oxia_store, root, topic, 0) == fenced
    marker = sequence(oxia_store, root, topic)[-1]
    assert (marker.key.position, marker.key.fences, type(marker.value)) == (4, 1, FenceMarker)

    # The writer that cached the open generation puts its entry, sees the fence count in its key: rejected.
    with pytest.raises(LogFenced):
        writer.append(topic, 0, [b"late"])
    assert positions(oxia_store, root, topic)[-1] == (5, 1)  # a void entry: never read
    # A writer without the cache reads meta/control and writes nothing.
    with pytest.raises(LogFenced):
        seq_writer(storage).append(topic, 0, [b"later"])
    with pytest.raises(LogFenced):
        writer.append(topic, 0, [b"again"])  # the rejected writer now re-reads control first
    assert len(sequence(oxia_store, root, topic)) == 4

    assert reader.high_watermark(topic, 0) == 3
    assert values(reader, topic) == [b"a", b"b", b"c"]
    with pytest.raises(OffsetOutOfRange):
        reader.read_offset(topic, 0, 4)
    # Idempotent: a second fence adds no marker.
    assert writer.fence(topic, 0) == fenced
    assert len(sequence(oxia_store, root, topic)) == 4


def test_unfence_opens_a_new_generation_and_offsets_continue(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, topic: str, root: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    stale = seq_writer(storage)
    stale.append(topic, 0, [b"a"])  # caches generation 1
    admin = seq_writer(storage)
    admin.fence(topic, 0)
    reopened = admin.unfence(topic, 0)
    assert reopened.log_state is LogState.OPEN
    assert reopened.generations == (Generation(1, 0, 1), Generation(2, 1))
    assert admin.unfence(topic, 0).generations == reopened.generations  # idempotent

    # The stale writer lands past generation 1's marker, learns of generation 2 and puts its entry there.
    result = stale.append(topic, 0, [b"b", b"c"])
    assert (result.start_offset, result.end_offset) == (2, 3)
    assert result.index_key == PartitionKeys(topic, 0, root).sequence_key(2, 2)
    assert writer.append(topic, 0, [b"d"]).start_offset == 4
    assert positions(oxia_store, root, topic, 2) == [(2, 0), (3, 0)]
    assert reader.high_watermark(topic, 0) == 4
    assert values(reader, topic) == [b"a", b"b", b"c", b"d"]
    assert [reader.read_offset(topic, 0, o).value for o in (1, 2, 4)] == [b"a", b"b", b"d"]


def test_appends_racing_a_fence_are_either_kept_or_rejected_never_both(
    writer: LogWriter, reader: LogReader, oxia_config: OxiaConfig, s3_config: S3Config, topic: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    acked: list[tuple[int, int, bytes]] = []
    rejected: list[bytes] = []
    lock = threading.Lock()
    started = threading.Barrier(5)

    def hammer(i: int) -> None:
        with seq_writer(dataclasses.replace(storage, oxia=OxiaStore(oxia_config), blobs=BlobStore(s3_config))) as w:
            started.wait()
            for n in range(10_000):
                payload = f"w{i}-{n}".encode()
                try:
                    r = w.append(topic, 0, [payload, payload + b"+"])
                except LogFenced:
                    with lock:
                        rejected.append(payload)
                    return
                assert r.start_offset is not None
                assert r.end_offset is not None
                with lock:
                    acked.append((r.start_offset, r.end_offset, payload))

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    started.wait()
    deadline = time.monotonic() + 60
    while len(acked) < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    fenced = writer.fence(topic, 0)
    for t in threads:
        t.join(60)
    end = fenced.current_generation.end
    assert end is not None
    assert len(rejected) == 4  # every hammer stopped on LogFenced
    assert_unique_and_contiguous(acked, reader, topic)  # every acknowledged record, nothing else, up to the end
    assert reader.high_watermark(topic, 0) == end == max(e for _, e, _ in acked)
    readable = set(values(reader, topic))
    assert not readable & set(rejected)


# --- crashes at every named point --------------------------------------------------------------


def test_crash_after_the_blob_put_commits_nothing(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, topic: str, root: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    with pytest.raises(SimulatedCrash):
        seq_writer(storage, crash_at(AFTER_BLOB_PUT)).append(topic, 0, [b"lost"])
    assert reader.high_watermark(topic, 0) == 0
    assert sequence(oxia_store, root, topic) == []
    assert writer.append(topic, 0, [b"kept"]).start_offset == 1


def test_crash_after_the_sequential_put_leaves_a_committed_readable_append(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, topic: str, root: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a"])
    with pytest.raises(SimulatedCrash):
        seq_writer(storage, crash_at(AFTER_SEQUENCE_PUT)).append(topic, 0, [b"b", b"c"])
    # No pending state and nothing to recover: the put was the whole commit.
    assert reader.high_watermark(topic, 0) == 3
    assert values(reader, topic) == [b"a", b"b", b"c"]
    assert writer.append(topic, 0, [b"d"]).start_offset == 4
    assert control_of(oxia_store, root, topic, 0).pending is None


def test_crash_after_the_fence_marker_is_finished_by_whoever_meets_the_marker(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, topic: str, root: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a", b"b"])
    with pytest.raises(SimulatedCrash):
        seq_writer(storage, crash_at(AFTER_FENCE_MARKER)).fence(topic, 0)
    assert control_of(oxia_store, root, topic, 0).log_state is LogState.OPEN  # the seal never happened
    assert reader.high_watermark(topic, 0) == 2  # readers find the last entry before the marker

    # A writer that cached the open generation lands past the marker, finishes the fence and is rejected.
    with pytest.raises(LogFenced):
        writer.append(topic, 0, [b"late"])
    control = control_of(oxia_store, root, topic, 0)
    assert control.log_state is LogState.FENCED
    assert control.generations == (Generation(1, 0, 2),)
    assert values(reader, topic) == [b"a", b"b"]
    assert positions(oxia_store, root, topic) == [(2, 0), (3, 1), (4, 1)]


def test_unfence_after_a_crashed_fence_finishes_the_fence_then_reopens(
    writer: LogWriter, reader: LogReader, topic: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a"])
    with pytest.raises(SimulatedCrash):
        seq_writer(storage, crash_at(AFTER_FENCE_MARKER)).fence(topic, 0)
    reopened = seq_writer(storage).unfence(topic, 0)
    assert reopened.generations == (Generation(1, 0, 1), Generation(2, 1))
    assert writer.append(topic, 0, [b"b"]).start_offset == 2
    assert values(reader, topic) == [b"a", b"b"]


def _unfence_first(monkeypatch: pytest.MonkeyPatch, finisher: LogWriter, unfencer: LogWriter, topic: str) -> None:
    """The next fence ``finisher`` runs (to finish one it met) loses the race: ``unfencer`` first finishes that
    fence and opens a new generation, between ``finisher``'s read of meta/control and its seal."""
    finish = SequentialAppender.fence
    done: list[bool] = []

    def unfence_first(self: SequentialAppender, meta: PartitionMetadata, current: VersionedControl) -> ControlRecord:
        if self is finisher._sequential and not done:
            done.append(True)
            unfencer.unfence(topic, 0)
        return finish(self, meta, current)

    monkeypatch.setattr(SequentialAppender, "fence", unfence_first)


def test_a_writer_finishing_a_fence_never_fences_the_generation_an_unfence_opened(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, topic: str, monkeypatch: pytest.MonkeyPatch, root: str,
    storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    stale = seq_writer(storage)
    stale.append(topic, 0, [b"a"])  # caches generation 1
    with pytest.raises(SimulatedCrash):
        seq_writer(storage, crash_at(AFTER_FENCE_MARKER)).fence(topic, 0)
    _unfence_first(monkeypatch, stale, seq_writer(storage), topic)

    # The stale writer lands past the marker and sets out to finish that fence; the unfence gets there first.
    with pytest.raises(LogFenced):
        stale.append(topic, 0, [b"late"])
    control = control_of(oxia_store, root, topic, 0)
    assert control.log_state is LogState.OPEN  # an append never fences the generation the unfence opened
    assert control.generations == (Generation(1, 0, 1), Generation(2, 1))
    assert positions(oxia_store, root, topic, 2) == []
    assert writer.append(topic, 0, [b"b"]).start_offset == 2
    assert values(reader, topic) == [b"a", b"b"]


def test_a_writer_meeting_a_rolls_marker_without_its_seal_finishes_the_roll_and_appends_in_the_next_generation(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, topic: str, root: str, storage: Storage
) -> None:
    """A takeover's roll (docs/SEQUENTIAL_APPEND.md, "Roll") whose author died after its marker: the writer whose put
    lands past it finishes the roll, not a fence; nobody sees LogFenced."""
    writer.initialize_partition(topic, 0)
    stale = seq_writer(storage)
    stale.append(topic, 0, [b"a"])  # caches generation 1
    meta = PartitionMetadata(oxia_store, PartitionKeys(topic, 0, root))
    with pytest.raises(SimulatedCrash):
        seq_writer(storage, crash_at(AFTER_FENCE_MARKER))._sequential.roll(meta, meta.control())
    assert stale.append(topic, 0, [b"b"]).start_offset == 2
    control = control_of(oxia_store, root, topic, 0)
    assert control.log_state is LogState.OPEN
    assert control.generations == (Generation(1, 0, 1, rolled=True), Generation(2, 1))
    assert positions(oxia_store, root, topic, 1) == [(1, 0), (2, 1), (3, 1)]  # a, the roll's marker, b void
    assert writer.append(topic, 0, [b"c"]).start_offset == 3
    assert values(reader, topic) == [b"a", b"b", b"c"]


def test_a_fence_whose_generation_a_roll_sealed_fences_the_generation_the_roll_opened(
    writer: LogWriter, oxia_store: OxiaStore, topic: str, monkeypatch: pytest.MonkeyPatch, root: str, storage: Storage
) -> None:
    """A roll never fenced the log: a fence that read the generation before the roll sealed it goes on with the
    next one (an unfence's seal, by contrast, ends it: test_a_fence_whose_seal_loses_to_an_unfence_is_done)."""
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a"])
    fencer, roller = seq_writer(storage), seq_writer(storage)
    fence = SequentialAppender.fence
    rolled: list[ControlRecord] = []

    def roll_first(
        self: SequentialAppender, meta: PartitionMetadata, current: VersionedControl, **options: bool
    ) -> ControlRecord:
        if self is fencer._sequential and not rolled:
            rolled.append(roller._sequential.roll(meta, meta.control()))
        return fence(self, meta, current, **options)

    monkeypatch.setattr(SequentialAppender, "fence", roll_first)
    fenced = fencer.fence(topic, 0)
    assert rolled[0].log_state is LogState.OPEN
    assert fenced.log_state is LogState.FENCED
    assert control_of(oxia_store, root, topic, 0).generations == (
        Generation(1, 0, 1, rolled=True), Generation(2, 1, 1)
    )  # fmt: skip
    with pytest.raises(LogFenced):
        writer.append(topic, 0, [b"late"])


def test_concurrent_unfences_finishing_a_dead_fence_open_one_generation(
    writer: LogWriter, oxia_store: OxiaStore, topic: str, monkeypatch: pytest.MonkeyPatch, root: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a"])
    with pytest.raises(SimulatedCrash):
        seq_writer(storage, crash_at(AFTER_FENCE_MARKER)).fence(topic, 0)
    first = seq_writer(storage)
    _unfence_first(monkeypatch, first, seq_writer(storage), topic)

    reopened = first.unfence(topic, 0)
    assert reopened.log_state is LogState.OPEN
    assert reopened.generations == (Generation(1, 0, 1), Generation(2, 1))
    assert control_of(oxia_store, root, topic, 0).generations == reopened.generations
    assert positions(oxia_store, root, topic, 2) == []  # no transient fence of generation 2
    assert writer.append(topic, 0, [b"b"]).start_offset == 2


def test_a_fence_whose_seal_loses_to_an_unfence_is_done(
    writer: LogWriter, oxia_store: OxiaStore, topic: str, root: str, storage: Storage
) -> None:
    """The unfence finishes the fence (its marker is in force) and reopens: the fence took effect before the
    unfence and does not fence the new generation after it."""
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a"])
    admin = seq_writer(storage)

    def unfence_after_the_marker(point: str) -> None:
        if point == AFTER_FENCE_MARKER:
            admin.unfence(topic, 0)

    result = seq_writer(storage, unfence_after_the_marker).fence(topic, 0)
    assert result.log_state is LogState.OPEN
    assert control_of(oxia_store, root, topic, 0).generations == (Generation(1, 0, 1), Generation(2, 1))
    assert positions(oxia_store, root, topic, 2) == []
    assert writer.append(topic, 0, [b"b"]).start_offset == 2


# --- compaction ---------------------------------------------------------------------------------


def test_compaction_rewrites_the_end_key_in_place_and_the_counter_never_rewinds(
    writer: LogWriter, reader: LogReader, compactor: Compactor, oxia_store: OxiaStore, topic: str, root: str
) -> None:
    writer.initialize_partition(topic, 0)
    for n in (1, 2, 3):
        writer.append(topic, 0, [f"{n}-{i}".encode() for i in range(n)])
    before = values(reader, topic)

    result = compactor.compact_once(topic, 0)
    assert (result.outcome, result.start_offset, result.end_offset) == ("compacted", 1, 6)
    # Only the end key is left, rewritten as COMPACTED: it is still the sequence's highest key.
    (only,) = sequence(oxia_store, root, topic)
    assert (only.key.position, only.key.fences) == (6, 0)
    batch = only.batch(0)
    assert batch is not None
    assert (batch.entry.type, batch.entry.msg_count) == (EntryType.COMPACTED, 6)
    assert values(reader, topic) == before
    assert meta_of(oxia_store, root, topic).cursor().offset == 7

    # The next put continues from the rewritten tail: offset 7, not 1.
    assert writer.append(topic, 0, [b"next"]).start_offset == 7
    assert compactor.compact_once(topic, 0).end_offset == 7
    assert values(reader, topic) == [*before, b"next"]
    assert [r.key.position for r in sequence(oxia_store, root, topic)] == [6, 7]


@pytest.mark.parametrize(
    "point", [COMPACTOR_AFTER_BLOB_PUT, AFTER_RECORD, AFTER_END_KEY, AFTER_MANIFEST, AFTER_DELETE, AFTER_CURSOR]
)
def test_a_crashed_compaction_of_a_sequential_partition_is_finished_by_another(
    writer: LogWriter, reader: LogReader, compactor: Compactor, oxia_store: OxiaStore, topic: str, point: str,
    root: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    for i in range(4):
        writer.append(topic, 0, [b"r%d" % i, b"s%d" % i])
    before = values(reader, topic)
    with pytest.raises(SimulatedCrash):
        Compactor(storage, fault_hook=crash_at(point)).compact_once(topic, 0)
    assert values(reader, topic) == before
    writer.append(topic, 0, [b"during"])  # appends go on meanwhile
    compact_until_caught_up(compactor, topic, 0, budget_s=30)
    assert values(reader, topic) == [*before, b"during"]
    assert meta_of(oxia_store, root, topic).compaction() is None
    assert meta_of(oxia_store, root, topic).cursor().offset == 10
    assert writer.append(topic, 0, [b"after"]).start_offset == 10


def test_compaction_runs_never_cross_a_generation(
    writer: LogWriter, reader: LogReader, compactor: Compactor, oxia_store: OxiaStore, topic: str, root: str
) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a", b"b"])
    writer.fence(topic, 0)
    writer.unfence(topic, 0)
    writer.append(topic, 0, [b"c"])
    writer.append(topic, 0, [b"d"])
    results = compact_until_caught_up(compactor, topic, 0, budget_s=30)
    assert [(r.start_offset, r.end_offset) for r in results if r.outcome == "compacted"] == [(1, 2), (3, 4)]
    assert values(reader, topic) == [b"a", b"b", b"c", b"d"]
    # Generation 1 keeps its end key and its fence marker; generation 2 its end key.
    assert positions(oxia_store, root, topic, 1) == [(2, 0), (3, 1)]
    assert positions(oxia_store, root, topic, 2) == [(2, 0)]


def test_writers_appending_during_compaction_lose_nothing(
    writer: LogWriter, reader: LogReader, compactor: Compactor, oxia_config: OxiaConfig, s3_config: S3Config,
    topic: str, root: str
) -> None:
    writer.initialize_partition(topic, 0)
    stop = threading.Event()
    results: list[tuple[int, int, bytes]] = []

    def append() -> None:
        results.extend(append_many(oxia_config, s3_config, root, topic, 0, 30, SEQUENTIAL))
        stop.set()

    thread = threading.Thread(target=append)
    thread.start()
    while not stop.is_set():
        compactor.compact_once(topic, 0)
    thread.join()
    compact_until_caught_up(compactor, topic, 0, budget_s=30)
    assert_unique_and_contiguous(results, reader, topic)


# --- garbage collection and retention ----------------------------------------------------------


def test_gc_keeps_referenced_blobs_and_deletes_those_of_void_entries(
    writer: LogWriter, reader: LogReader, compactor: Compactor, oxia_store: OxiaStore, blob_store: BlobStore,
    topic: str, root: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    kept = writer.append(topic, 0, [b"kept"])
    seq_writer(storage).fence(topic, 0)
    with pytest.raises(LogFenced):
        writer.append(topic, 0, [b"void"])  # a void entry in generation 1 names this blob
    void = sequence(oxia_store, root, topic)[-1]
    assert void.void
    assert isinstance(void.value, IndexEntry)
    void_blob = S3Location.parse(void.value.ref.data_key).key
    assert kept.wal_uri is not None
    kept_blob = S3Location.parse(kept.wal_uri).key

    collector(storage).collect()
    left = wal_keys(blob_store, root)
    assert kept_blob in left  # referenced by a valid entry
    assert void_blob not in left  # only a void entry names it: never read, garbage

    compactor.compact_once(topic, 0)
    collector(storage).collect()
    assert kept_blob not in wal_keys(blob_store, root)
    assert values(reader, topic) == [b"kept"]  # served by the compacted object the collector kept


def test_retention_truncates_a_sequential_partition_and_keeps_every_counter(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, topic: str, root: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    small = Compactor(storage, config=CompactorConfig(max_offsets_per_run=2))
    stale = seq_writer(storage)
    stale.append(topic, 0, [b"g1-0"])  # it keeps generation 1 cached
    for i in range(1, 4):
        writer.append(topic, 0, [b"g1-%d" % i])
    writer.fence(topic, 0)
    writer.unfence(topic, 0)
    for i in range(4):
        writer.append(topic, 0, [b"g2-%d" % i])
    results = compact_until_caught_up(small, topic, 0, budget_s=30)
    assert [(r.start_offset, r.end_offset) for r in results if r.outcome == "compacted"] == [
        (1, 2), (3, 4), (5, 6), (7, 8)
    ]
    writer.append(topic, 0, [b"tail"])

    config = RetentionConfig(topics={topic: RetentionPolicy(max_bytes=1)})
    result = Retention(storage, config=config).enforce(topic, 0)
    # Every compacted range may go but the last entry stays: the log starts at the WAL tail (offset 9).
    assert (result.log_start_before, result.log_start_after, result.ranges_removed) == (1, 9, 4)
    assert values(reader, topic) == [b"tail"]
    with pytest.raises(OffsetOutOfRange):
        reader.read_offset(topic, 0, 8)
    # Generation 1 keeps only its fence marker (its counter); generation 2 its WAL tail.
    assert positions(oxia_store, root, topic, 1) == [(5, 1)]
    assert positions(oxia_store, root, topic, 2) == [(5, 0)]
    # The writer still holding generation 1 lands past its marker and moves on to generation 2.
    assert stale.append(topic, 0, [b"after"]).start_offset == 10
    assert positions(oxia_store, root, topic, 1) == [(5, 1), (6, 1)]
    assert values(reader, topic) == [b"tail", b"after"]


def test_retention_racing_another_run_never_deletes_a_sealed_generations_marker(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, topic: str, monkeypatch: pytest.MonkeyPatch, root: str,
    storage: Storage
) -> None:
    """A run reads the generation table while generation 1 is open. Before it moves the log start, the partition
    is fenced, unfenced and written, and another run (with the new table) moves the log start into generation 2.
    The first run meets that log start: it must not clear generation 1 up to it, which would take the fence
    marker, the counter that keeps a writer still holding generation 1 void."""
    writer.initialize_partition(topic, 0)
    small = Compactor(storage, config=CompactorConfig(max_offsets_per_run=2))
    stale = seq_writer(storage)
    stale.append(topic, 0, [b"g1-0"])  # it keeps generation 1 cached
    writer.append(topic, 0, [b"g1-1"])
    compact_until_caught_up(small, topic, 0, budget_s=30)  # [1, 2] COMPACTED at position 2
    writer.append(topic, 0, [b"g1-2"])  # the WAL tail of generation 1, offset 3

    config = RetentionConfig(topics={topic: RetentionPolicy(max_bytes=1)})
    slow = Retention(storage, config=config)
    fast = Retention(storage, config=config)
    advance = Retention._advance

    def meanwhile(self: Retention, meta: PartitionMetadata, offset: int) -> int:
        if self is slow:
            writer.fence(topic, 0)  # generation 1 sealed at 3, its marker at position 4
            writer.unfence(topic, 0)
            for i in range(2):
                writer.append(topic, 0, [b"g2-%d" % i])
            compact_until_caught_up(small, topic, 0, budget_s=30)  # [3, 3] in generation 1, [4, 5] in 2
            writer.append(topic, 0, [b"tail"])
            assert fast.enforce(topic, 0).log_start_after == 6
        return advance(self, meta, offset)

    monkeypatch.setattr(Retention, "_advance", meanwhile)
    result = slow.enforce(topic, 0)
    assert result.log_start_after == 6  # the other run's log start, past all of generation 1
    assert positions(oxia_store, root, topic, 1) == [(4, 1)]  # the marker stays
    # The writer still holding generation 1 lands past the marker and moves on, after the tail.
    assert stale.append(topic, 0, [b"after"]).start_offset == 7
    assert values(reader, topic) == [b"tail", b"after"]


def test_gc_applies_retention_to_sequential_partitions(
    writer: LogWriter, reader: LogReader, compactor: Compactor, topic: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    for i in range(3):
        writer.append(topic, 0, [b"%d" % i])
    compactor.compact_once(topic, 0)
    writer.append(topic, 0, [b"tail"])
    retention = RetentionConfig(topics={topic: RetentionPolicy(max_bytes=1)})
    report = collector(storage, retention).collect()
    assert not report.errors
    assert reader.partition_info(topic, 0).log_start == 4
    assert values(reader, topic) == [b"tail"]


# --- migration from the CAS protocol -----------------------------------------------------------


def test_migration_keeps_the_cas_offsets_and_appends_continue_in_a_sequence(
    reader: LogReader, compactor: Compactor, oxia_store: OxiaStore, topic: str, root: str, storage: Storage
) -> None:
    cas = LogWriter(storage, config=CAS)
    cas.initialize_partition(topic, 0)
    cas.append(topic, 0, [b"a", b"b"])
    cas.append(topic, 0, [b"c"])
    compactor.compact_once(topic, 0)
    cas.append(topic, 0, [b"d"])
    with pytest.raises(SimulatedCrash):  # a pending append the migration must finish first
        LogWriter(storage, config=CAS, fault_hook=crash_at(AFTER_RESERVE)).append(topic, 0, [b"e"])

    migrated = cas.migrate_to_sequential(topic, 0)
    assert migrated.sequential
    assert migrated.generations == (Generation(0, 0, 5), Generation(1, 5))
    assert migrated.pending is None
    assert cas.migrate_to_sequential(topic, 0) == migrated  # idempotent

    # Every writer, however configured, now appends with one sequential put.
    assert cas.append(topic, 0, [b"f"]).start_offset == 6
    assert seq_writer(storage).append(topic, 0, [b"g", b"h"]).end_offset == 8
    assert positions(oxia_store, root, topic) == [(1, 0), (3, 0)]
    assert values(reader, topic) == [b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h"]
    assert [reader.read_offset(topic, 0, o).value for o in (1, 4, 5, 6, 8)] == [b"a", b"d", b"e", b"f", b"h"]

    # Compaction finishes generation 0 (the CAS index) and then compacts generation 1.
    results = compact_until_caught_up(compactor, topic, 0, budget_s=30)
    assert [(r.start_offset, r.end_offset) for r in results if r.outcome == "compacted"] == [(4, 5), (6, 8)]
    assert values(reader, topic) == [b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h"]


def test_cas_appends_racing_a_migration_keep_unique_contiguous_offsets(
    reader: LogReader, oxia_store: OxiaStore, oxia_config: OxiaConfig, s3_config: S3Config, topic: str, root: str,
    storage: Storage
) -> None:
    cas = LogWriter(storage, config=CAS)
    cas.initialize_partition(topic, 0)

    patient = LogWriter(storage, config=WriterConfig(max_cas_attempts=10_000))
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(append_many, oxia_config, s3_config, root, topic, w, 15) for w in range(4)]
        time.sleep(0.05)
        migrated = patient.migrate_to_sequential(topic, 0)
        results = [r for f in futures for r in f.result()]
    first = migrated.generations[0]
    cas_end = first.end if first.number == 0 and first.end is not None else 0
    assert_unique_and_contiguous(results, reader, topic)
    batches = PartitionIndex.load(meta_of(oxia_store, root, topic)).scan(1)
    assert all(b.end_offset <= cas_end for b in batches if b.generation is None)
    assert all(b.end_offset > cas_end for b in batches if b.generation == 1)
    # The CAS appends before the switch stay where they were.
    assert bool(cas_index_keys(oxia_store, root, topic)) == (cas_end > 0)


def test_migrating_a_fenced_partition_keeps_it_fenced(reader: LogReader, topic: str, storage: Storage) -> None:
    cas = LogWriter(storage, config=CAS)
    cas.initialize_partition(topic, 0)
    cas.append(topic, 0, [b"a"])
    cas.fence(topic, 0)
    migrated = cas.migrate_to_sequential(topic, 0)
    assert migrated.log_state is LogState.FENCED
    with pytest.raises(LogFenced):
        cas.append(topic, 0, [b"no"])
    reopened = cas.unfence(topic, 0)
    assert reopened.generations == (Generation(0, 0, 1), Generation(1, 1, 1), Generation(2, 1))
    assert cas.append(topic, 0, [b"b"]).start_offset == 2
    assert values(reader, topic) == [b"a", b"b"]


# --- the read side: consume and partition status ----------------------------------------------


def test_consume_and_status_see_the_live_tail_of_a_sequential_partition(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, topic: str, root: str
) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a", b"b"])
    writer.append(topic, 0, [b"c"])
    service = ConsumeService(reader)
    (result,) = service.consume(ConsumeRequest([FetchPartition(topic, 0, 2, 1 << 20)], 0, 1, 1 << 20))
    assert (result.high_watermark, [r.value for r in result.records]) == (3, [b"b", b"c"])
    (tail,) = service.consume(ConsumeRequest([FetchPartition(topic, 0, 4, 1 << 20)], 0, 1, 1 << 20))
    assert (tail.error, tail.records, tail.high_watermark) == (None, [], 3)
    status = LogCatalog(oxia_store, root=root).status(PartitionKeys(topic, 0, root))
    assert (status.high_watermark, status.next_offset, status.compaction_lag) == (3, 4, 3)


class _LostAnswer(grpc.RpcError):  # type: ignore[misc]  # grpc has no type stubs here
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "the connection dropped before the answer came"


def test_a_commit_whose_answer_is_lost_is_outcome_unknown_and_its_records_are_read_once(
    monkeypatch: pytest.MonkeyPatch, oxia_config: OxiaConfig, blob_store: BlobStore, root: str, topic: str
) -> None:
    """One partition's commit lands in Oxia and its answer never comes back (a connection dropped after the
    server applied it): the append is reported ``AppendOutcomeUnknown``, never acknowledged and never sent
    again (a second put would be a second entry), and its records are read once, before the next append's."""
    lose_next = threading.Event()
    writes: list[bytes] = []
    stub_init = oxia_client.Stub.__init__

    def init(stub: Any, channel: Any) -> None:
        stub_init(stub, channel)
        send = stub.write_bytes

        def write_bytes(request: bytes, *args: Any, **kwargs: Any) -> Any:
            writes.append(request)
            answer = send(request, *args, **kwargs)
            if lose_next.is_set():
                lose_next.clear()
                raise _LostAnswer()  # UNAVAILABLE: what a retrying call would send again
            return answer

        stub.write_bytes = write_bytes

    monkeypatch.setattr(oxia_client.Stub, "__init__", init)
    with OxiaStore(oxia_config) as oxia:  # its stubs are made from here, with the lossy write
        storage = Storage(oxia, blob_store, BUCKET, root)
        writer = seq_writer(storage)
        writer.initialize_partition(topic, 0)
        first = writer.append(topic, 0, [b"a"]).start_offset
        assert first is not None
        sent = len(writes)
        lose_next.set()
        with pytest.raises(AppendOutcomeUnknown) as lost:
            writer.append(topic, 0, [b"b1", b"b2"])
        assert lost.value.retriable
        assert len(writes) == sent + 1  # the put was sent once
        assert writer.append(topic, 0, [b"c"]).start_offset == first + 3  # after the entry that landed
        assert values(LogReader(storage), topic) == [b"a", b"b1", b"b2", b"c"]
