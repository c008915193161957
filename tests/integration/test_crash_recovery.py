"""Writers that die between storage steps, and the writers that recover after them.

A crash is a ``SimulatedCrash`` raised by a fault hook at a named point: the
writer's remaining steps never run, exactly as if its process had died.
"""

from __future__ import annotations

import threading

import pytest

from llog.blob_store import BlobStore
from llog.faults import FaultHook, SimulatedCrash, crash_at
from llog.keys import PartitionKeys
from llog.models import CompactionCursor, DataRef, EntryType, IndexEntry
from llog.oxia_store import OxiaStore
from llog.reader import LogReader
from llog.writer import AFTER_BLOB_PUT, AFTER_INDEX_WRITE, AFTER_RESERVE, LogWriter
from tests.conftest import BUCKET
from tests.integration.test_append_and_read import control_of

pytestmark = pytest.mark.oxia


def crashing_writer(oxia: OxiaStore, blobs: BlobStore, hook: FaultHook) -> LogWriter:
    return LogWriter(oxia, blobs, bucket=BUCKET, fault_hook=hook)


def index_keys(oxia: OxiaStore, topic: str, partition: int = 0) -> list[str]:
    keys = PartitionKeys(topic, partition)
    return [r.key for r in oxia.range_scan(keys.index_prefix, keys.index_scan_end, partition_key=keys.partition_key)]


def test_crash_between_reserve_and_index_write_is_read_through_pending(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, blob_store: BlobStore, topic: str
) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a"])
    doomed = crashing_writer(oxia_store, blob_store, crash_at(AFTER_RESERVE))
    with pytest.raises(SimulatedCrash):
        doomed.append(topic, 0, [b"b", b"c"])

    pending = control_of(oxia_store, topic, 0).pending
    assert pending is not None
    assert (pending.start_offset, pending.end_offset) == (2, 3)
    assert index_keys(oxia_store, topic) == [PartitionKeys(topic, 0).index(1)]
    # Logically committed: readable before anyone recovers it.
    assert reader.high_watermark(topic, 0) == 3
    assert [r.value for r in reader.iter_from(topic, 0, 1)] == [b"a", b"b", b"c"]
    assert reader.read_offset(topic, 0, 3).value == b"c"

    # The next writer materializes it before reserving its own offsets.
    assert writer.append(topic, 0, [b"d"]).start_offset == 4
    assert control_of(oxia_store, topic, 0).pending is None
    keys = PartitionKeys(topic, 0)
    assert index_keys(oxia_store, topic) == [keys.index(1), keys.index(3), keys.index(4)]
    assert [r.value for r in reader.iter_from(topic, 0, 1)] == [b"a", b"b", b"c", b"d"]


def test_crash_after_index_write_leaves_pending_that_recovery_clears(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, blob_store: BlobStore, topic: str
) -> None:
    writer.initialize_partition(topic, 0)
    with pytest.raises(SimulatedCrash):
        crashing_writer(oxia_store, blob_store, crash_at(AFTER_INDEX_WRITE)).append(topic, 0, [b"a", b"b"])
    assert control_of(oxia_store, topic, 0).pending is not None
    assert index_keys(oxia_store, topic) == [PartitionKeys(topic, 0).index(2)]

    assert writer.recover_pending(topic, 0) is True
    assert writer.recover_pending(topic, 0) is False
    assert control_of(oxia_store, topic, 0).pending is None
    assert index_keys(oxia_store, topic) == [PartitionKeys(topic, 0).index(2)]
    assert [r.value for r in reader.read_range(topic, 0, 1, 2)] == [b"a", b"b"]


def test_crash_after_blob_put_commits_nothing(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, blob_store: BlobStore, topic: str
) -> None:
    writer.initialize_partition(topic, 0)
    with pytest.raises(SimulatedCrash):
        crashing_writer(oxia_store, blob_store, crash_at(AFTER_BLOB_PUT)).append(topic, 0, [b"lost"])
    assert reader.high_watermark(topic, 0) == 0
    assert writer.append(topic, 0, [b"kept"]).start_offset == 1
    assert reader.read_offset(topic, 0, 1).value == b"kept"


def test_fence_finishes_a_pending_append_so_it_stays_readable(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, blob_store: BlobStore, topic: str
) -> None:
    writer.initialize_partition(topic, 0)
    with pytest.raises(SimulatedCrash):
        crashing_writer(oxia_store, blob_store, crash_at(AFTER_RESERVE)).append(topic, 0, [b"a"])
    writer.fence(topic, 0)
    control = control_of(oxia_store, topic, 0)
    assert control.pending is None
    assert index_keys(oxia_store, topic) == [PartitionKeys(topic, 0).index(1)]
    assert reader.read_offset(topic, 0, 1).value == b"a"


def test_a_stalled_writer_cannot_resurrect_an_index_key_that_compaction_removed(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, blob_store: BlobStore, topic: str
) -> None:
    """The classic trap: a late re-materialization of a WAL key below a COMPACTED entry."""
    writer.initialize_partition(topic, 0)
    keys = PartitionKeys(topic, 0)
    reserved, release = threading.Event(), threading.Event()

    def stall(point: str) -> None:
        if point == AFTER_RESERVE:
            reserved.set()
            assert release.wait(30)

    stalled = LogWriter(oxia_store, blob_store, bucket=BUCKET, fault_hook=stall)
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(stalled.append(topic, 0, [b"a", b"b"])))
    thread.start()
    assert reserved.wait(30)

    # Another writer recovers the stalled append and moves on.
    writer.append(topic, 0, [b"c"])
    assert index_keys(oxia_store, topic) == [keys.index(2), keys.index(3)]

    # Compaction of [1, 3] (its Oxia steps, done by hand until the compactor
    # exists): one COMPACTED entry at the end key, lower keys deleted, cursor moved.
    end_entry = oxia_store.get(keys.index(3), partition_key=keys.partition_key)
    assert end_entry is not None
    wal_ref = IndexEntry.decode(end_entry.value).ref
    compacted = IndexEntry(EntryType.COMPACTED, 3, DataRef(wal_ref.data_key), 0)
    oxia_store.put(keys.index(3), compacted.encode(), partition_key=keys.partition_key,
                   expected_version_id=end_entry.version_id)
    oxia_store.delete_range(keys.index(1), keys.index(3), partition_key=keys.partition_key)
    oxia_store.put(keys.compaction_cursor, CompactionCursor(4).encode(), partition_key=keys.partition_key)

    release.set()
    thread.join(30)
    assert outcome
    assert getattr(outcome[0], "end_offset", None) == 2

    # Its late index write at offset 2 was detected as stale and removed.
    assert index_keys(oxia_store, topic) == [keys.index(3)]
