"""Compaction on a real Oxia server: the index swap, crash recovery at every step, concurrent writers."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from llog.config import CompactorConfig, GcConfig, RetentionConfig, RetentionPolicy
from llog.format.codec import Record
from llog.format.keys import PartitionKeys
from llog.format.kv.compaction import CompactionRecord, CompactionState
from llog.format.kv.index import EntryType
from llog.protocol.append import LogWriter, SharedAppendGroup
from llog.protocol.compaction import Compactor, compact_until_caught_up
from llog.protocol.faults import COMPACTOR_AFTER_BLOB_PUT as AFTER_BLOB_PUT
from llog.protocol.faults import COMPACTOR_AFTER_CURSOR as AFTER_CURSOR
from llog.protocol.faults import COMPACTOR_AFTER_DELETE as AFTER_DELETE
from llog.protocol.faults import COMPACTOR_AFTER_END_KEY as AFTER_END_KEY
from llog.protocol.faults import COMPACTOR_AFTER_MANIFEST as AFTER_MANIFEST
from llog.protocol.faults import COMPACTOR_AFTER_RECORD as AFTER_RECORD
from llog.protocol.faults import WRITER_AFTER_INDEX_WRITE as AFTER_INDEX_WRITE
from llog.protocol.faults import WRITER_AFTER_RESERVE as AFTER_RESERVE
from llog.protocol.gc import GarbageCollector
from llog.protocol.manifest import ManifestStore
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.read import LogReader
from llog.service.consume import ConsumeRequest, ConsumeService, FetchPartition
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from tests.conftest import BUCKET
from tests.faults import PauseAt, SimulatedCrash, crash_at
from tests.protocols import CAS

pytestmark = pytest.mark.oxia


def snapshot(reader: LogReader, topic: str, partition: int = 0) -> list[tuple[int, bytes, bytes | None, int]]:
    return [(r.offset, r.value, r.key, r.timestamp_ms) for r in reader.iter_from(topic, partition, 1)]


def index_types(oxia: OxiaStore, root: str, topic: str, partition: int = 0) -> list[tuple[int, str, int]]:
    meta = PartitionMetadata(oxia, PartitionKeys(topic, partition, root))
    return [(b.end_offset, b.entry.type.value, b.entry.msg_count) for b in meta.scan_index(1)]


def manifest_chain(blob_store: BlobStore, root: str, topic: str, partition: int = 0) -> list[tuple[int, int, int]]:
    store = ManifestStore(blob_store, bucket=BUCKET, root=root)
    return [(m.start_offset, m.end_offset, m.record_count) for m in store.ranges(PartitionKeys(topic, partition, root))]


def fill(writer: LogWriter, topic: str) -> None:
    """Five appends, each shared between two partitions (two topics' partition 0)."""
    for t in (topic, f"{topic}-x"):
        writer.initialize_partition(t, 0)
    for i in range(5):
        writer.append_shared([
            SharedAppendGroup(topic, 0, [Record(f"a{i}-{j}".encode(), key=b"k", timestamp_ms=i) for j in range(i + 1)]),
            SharedAppendGroup(f"{topic}-x", 0, [f"other{i}".encode()]),
        ])


def test_compaction_rewrites_shared_wal_ranges_into_one_entry(
    writer: LogWriter, reader: LogReader, compactor: Compactor, oxia_store: OxiaStore, topic: str, root: str
) -> None:
    fill(writer, topic)
    before = snapshot(reader, topic)
    assert len(before) == 15

    result = compactor.compact_once(topic, 0)

    assert (result.outcome, result.start_offset, result.end_offset, result.records) == ("compacted", 1, 15, 15)
    assert result.source_entries == 5
    assert set(result.stage_seconds) >= {"select", "read_and_encode", "write_object", "end_key", "delete_old"}
    assert index_types(oxia_store, root, topic) == [(15, "COMPACTED", 15)]
    assert PartitionMetadata(oxia_store, PartitionKeys(topic, 0, root)).cursor().offset == 16
    assert snapshot(reader, topic) == before
    assert [reader.read_offset(topic, 0, o).value for o in (1, 7, 15)] == [b"a0-0", b"a3-0", b"a4-4"]
    # the other partition of the shared blobs is untouched
    assert [r.value for r in reader.iter_from(f"{topic}-x", 0, 1)] == [f"other{i}".encode() for i in range(5)]

    assert compactor.compact_once(topic, 0).outcome == "nothing_to_do"
    writer.append(topic, 0, [b"new"])
    assert compactor.compact_once(topic, 0).end_offset == 16
    assert index_types(oxia_store, root, topic) == [(15, "COMPACTED", 15), (16, "COMPACTED", 1)]
    assert snapshot(reader, topic)[-1][1] == b"new"


def test_limits_split_runs(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, blob_store: BlobStore, topic: str, root: str,
    storage: Storage
) -> None:
    fill(writer, topic)
    small = Compactor(storage, config=CompactorConfig(max_offsets_per_run=4))
    results = compact_until_caught_up(small, topic, 0, budget_s=30)
    assert [(r.start_offset, r.end_offset) for r in results if r.outcome == "compacted"] == [
        (1, 3), (4, 6), (7, 10), (11, 15)
    ]
    assert [t for _, t, _ in index_types(oxia_store, root, topic)] == ["COMPACTED"] * 4
    assert len(snapshot(reader, topic)) == 15
    assert manifest_chain(blob_store, root, topic) == [(1, 3, 3), (4, 6, 3), (7, 10, 4), (11, 15, 5)]


@pytest.mark.parametrize(
    "point", [AFTER_BLOB_PUT, AFTER_RECORD, AFTER_END_KEY, AFTER_MANIFEST, AFTER_DELETE, AFTER_CURSOR]
)
def test_a_crash_at_any_step_is_finished_by_another_compactor(
    writer: LogWriter, reader: LogReader, compactor: Compactor, oxia_store: OxiaStore, blob_store: BlobStore,
    topic: str, point: str, root: str, storage: Storage
) -> None:
    fill(writer, topic)
    before = snapshot(reader, topic)
    doomed = Compactor(storage, fault_hook=crash_at(point))
    with pytest.raises(SimulatedCrash):
        doomed.compact_once(topic, 0)

    assert snapshot(reader, topic) == before  # readers are right in every intermediate state
    # a manifest exists only once the range is committed (never for an orphaned object)
    committed = point not in (AFTER_BLOB_PUT, AFTER_RECORD, AFTER_END_KEY)
    assert manifest_chain(blob_store, root, topic) == ([(1, 15, 15)] if committed else [])

    result = compactor.compact_once(topic, 0)
    assert result.outcome == ("compacted" if point == AFTER_BLOB_PUT else "resumed")
    assert (result.start_offset, result.end_offset) == (1, 15)
    assert index_types(oxia_store, root, topic) == [(15, "COMPACTED", 15)]
    assert PartitionMetadata(oxia_store, PartitionKeys(topic, 0, root)).compaction() is None
    assert snapshot(reader, topic) == before
    assert manifest_chain(blob_store, root, topic) == [(1, 15, 15)]


def test_compactor_finishes_a_pending_append_first(
    writer: LogWriter, reader: LogReader, compactor: Compactor, topic: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a"])
    with pytest.raises(SimulatedCrash):
        LogWriter(storage, config=CAS, fault_hook=crash_at(AFTER_RESERVE)).append(topic, 0, [b"b"])

    result = compactor.compact_once(topic, 0)

    assert result.recovered_pending
    assert (result.start_offset, result.end_offset) == (1, 2)
    assert [r.value for r in reader.iter_from(topic, 0, 1)] == [b"a", b"b"]


def test_writers_appending_during_compaction_lose_nothing(
    writer: LogWriter, reader: LogReader, compactor: Compactor, topic: str
) -> None:
    writer.initialize_partition(topic, 0)
    acknowledged: dict[int, bytes] = {}
    stop = threading.Event()

    def produce() -> None:
        i = 0
        while not stop.is_set() and i < 200:
            payload = f"r{i}".encode()
            result = writer.append(topic, 0, [payload])
            assert result.start_offset is not None
            acknowledged[result.start_offset] = payload
            i += 1

    producer = threading.Thread(target=produce)
    producer.start()
    while producer.is_alive():
        compactor.compact_once(topic, 0)
    producer.join()
    stop.set()
    compact_until_caught_up(compactor, topic, 0, budget_s=30)

    assert {r.offset: r.value for r in reader.iter_from(topic, 0, 1)} == acknowledged
    assert len(acknowledged) == 200


def test_a_stalled_writer_cannot_resurrect_a_key_the_compactor_removed(
    writer: LogWriter, reader: LogReader, compactor: Compactor, oxia_store: OxiaStore, topic: str, root: str,
    storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    stall = PauseAt(AFTER_RESERVE)
    stalled = LogWriter(storage, config=CAS, fault_hook=stall)
    thread = threading.Thread(target=stalled.append, args=(topic, 0, [b"a", b"b"]))
    thread.start()
    assert stall.reached.wait(30)
    writer.append(topic, 0, [b"c"])  # recovers the stalled append, then appends
    assert compactor.compact_once(topic, 0).end_offset == 3

    stall.release()
    thread.join(30)

    assert [(e, t) for e, t, _ in index_types(oxia_store, root, topic)] == [(3, EntryType.COMPACTED.value)]
    assert [r.value for r in reader.iter_from(topic, 0, 1)] == [b"a", b"b", b"c"]


def stalled_until_crash(storage: Storage, topic: str, values: list[bytes]) -> tuple[PauseAt, threading.Thread]:
    """A writer held right after reserving ``values`` that dies right after its index write once released."""
    stall, crash = PauseAt(AFTER_RESERVE), crash_at(AFTER_INDEX_WRITE)

    def stall_then_crash(point: str) -> None:
        stall(point)
        crash(point)

    # Not inlined in its index entry: a read of the stale key's offsets goes to its blob.
    stalled = LogWriter(storage, config=dataclasses.replace(CAS, inline_batch_max_bytes=0), fault_hook=stall_then_crash)

    def append_until_crash() -> None:
        with pytest.raises(SimulatedCrash):
            stalled.append(topic, 0, values)

    thread = threading.Thread(target=append_until_crash)
    thread.start()
    assert stall.reached.wait(30)
    return stall, thread


@pytest.mark.parametrize("stale_keys", [1, 2])
def test_a_stale_key_whose_recoverer_died_before_its_check_never_blocks_readers_or_retention(
    writer: LogWriter, reader: LogReader, compactor: Compactor, oxia_store: OxiaStore, topic: str, root: str,
    storage: Storage, stale_keys: int
) -> None:
    """docs/PROTOCOL.md's residual case: a stalled writer re-creates a WAL key compaction removed and dies before
    its stale check (two of them in one compacted range, with ``stale_keys=2``). Reads resolve past the keys to
    the compacted entry over them (also once GC deleted their blobs, which nothing else references), and
    retention removes them with that range."""
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"z"])
    stalled = []
    expected = [b"z"]
    for n in range(stale_keys):
        values = [b"%d-a" % n, b"%d-b" % n]
        stalled.append(stalled_until_crash(storage, topic, values))
        writer.append(topic, 0, [b"%d-c" % n])  # finishes the stalled append, then appends one more record
        expected += [*values, b"%d-c" % n]
    last = len(expected)
    assert compactor.compact_once(topic, 0).end_offset == last
    for stall, thread in stalled:
        stall.release()
        thread.join(30)
    stale = [(3 * n + 3, "WAL") for n in range(stale_keys)]
    assert [(e, t) for e, t, _ in index_types(oxia_store, root, topic)] == [*stale, (last, "COMPACTED")]

    consume = ConsumeService(reader)

    def read_everything() -> None:
        assert [reader.read_offset(topic, 0, o).value for o in range(1, last + 1)] == expected
        for start in range(1, last + 1):
            assert [r.value for r in reader.iter_from(topic, 0, start)] == expected[start - 1 :]
            request = ConsumeRequest([FetchPartition(topic, 0, start, 1 << 20)], max_wait_ms=0, min_bytes=1,
                                     max_bytes=1 << 20)  # fmt: skip
            [fetched] = consume.consume(request)
            assert fetched.error is None
            assert [r.value for r in fetched.records] == expected[start - 1 :]

    read_everything()  # offset 1 lies below the stale keys, in the compacted range over them
    late = dataclasses.replace(storage, clock=lambda: time.time() + 3600)
    assert GarbageCollector(late, config=GcConfig(grace_ms=1)).collect().wal_blobs_deleted == 2 * stale_keys + 1
    read_everything()  # the stale keys' blobs are gone: their offsets come from the compacted object

    writer.append(topic, 0, [b"d"])
    retention = RetentionConfig(topics={topic: RetentionPolicy(max_age_ms=1)})
    report = GarbageCollector(late, config=GcConfig(grace_ms=1, retention=retention)).collect()
    assert report.retention_partitions_truncated == 1
    assert [(e, t) for e, t, _ in index_types(oxia_store, root, topic)] == [(last + 1, "WAL")]
    assert [r.value for r in reader.iter_from(topic, 0, last + 1)] == [b"d"]


def test_a_compactor_that_stalled_past_another_compaction_does_not_commit_its_stale_range(
    writer: LogWriter, reader: LogReader, compactor: Compactor, oxia_store: OxiaStore, topic: str, root: str,
    storage: Storage
) -> None:
    fill(writer, topic)
    before = snapshot(reader, topic)
    stall = PauseAt(AFTER_BLOB_PUT)
    stalled = Compactor(storage, fault_hook=stall)
    outcome: list[str] = []
    thread = threading.Thread(target=lambda: outcome.append(stalled.compact_once(topic, 0).outcome))
    thread.start()
    assert stall.reached.wait(30)
    assert compactor.compact_once(topic, 0).outcome == "compacted"  # the same range, first
    writer.append(topic, 0, [b"later"])
    stall.release()
    thread.join(30)

    assert outcome == ["nothing_to_do"]
    assert index_types(oxia_store, root, topic)[0] == (15, "COMPACTED", 15)
    assert snapshot(reader, topic)[:15] == before


def test_a_stale_compaction_record_is_abandoned_not_applied(
    writer: LogWriter, reader: LogReader, compactor: Compactor, oxia_store: OxiaStore, topic: str, root: str
) -> None:
    fill(writer, topic)
    compactor.compact_once(topic, 0)  # cursor now 16
    writer.append(topic, 0, [b"x", b"y"])
    keys = PartitionKeys(topic, 0, root)
    stale = CompactionRecord("stale", CompactionState.WRITING_COMPACTED_INDEX, 1, 17, 17,
                             f"s3://{BUCKET}/{keys.compacted_object_key()}", 0, last_source_start_offset=16)
    oxia_store.put(keys.compaction, stale.encode(), partition_key=keys.partition_key)

    result = compactor.compact_once(topic, 0)

    assert result.outcome == "resumed"
    assert PartitionMetadata(oxia_store, PartitionKeys(topic, 0, root)).compaction() is None
    assert [r[1] for r in snapshot(reader, topic)][-2:] == [b"x", b"y"]
    assert index_types(oxia_store, root, topic) == [(15, "COMPACTED", 15), (17, "WAL", 2)]
