"""Retention next to an unfinished compaction, on a real Oxia server and moto S3 (docs/RETENTION.md, "Safety").

The regression of the 2026-11-23 soak (``/work/shared/findings/soak-2026-11-23-sequential-gc.md``): a
compactor dies at ``compactor.after_cursor``, so ``meta/compaction`` stays in ``UPDATING_CURSOR`` with the
cursor already past its range; a later append makes that range no longer the partition's last entry; then
garbage collection applies a size limit. Retention used to remove the range (log start, index keys, object)
while ``meta/compaction`` still named its object, against docs/GC.md's rule ("an object named by a running
``meta/compaction`` is left for a later run"). It now leaves every range from the record's start offset up
until a compactor has finished the record.

Every test checks what readers see: each acknowledged offset at or above the log start reads back byte for
byte (``read_offset``, ``iter_from``, consume); offsets below it raise ``OffsetOutOfRange``; no manifest
(the export's view) and no index entry at or above the log start names a missing object; and the compactor
never works below the log start. Both append protocols, each test under a root prefix of its own.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from llog.config import CompactorConfig, GcConfig, RetentionConfig, RetentionPolicy, WriterConfig
from llog.errors import BlobNotFound, OffsetOutOfRange
from llog.format.codec import RecordBatch
from llog.format.keys import PartitionKeys, S3Location
from llog.format.kv.compaction import CompactionState
from llog.format.kv.control import AppendProtocol
from llog.format.kv.index import EntryType, IndexedBatch
from llog.protocol import faults
from llog.protocol.append import LogWriter
from llog.protocol.compaction import CompactionResult, Compactor
from llog.protocol.faults import FaultHook
from llog.protocol.gc import GarbageCollector, GcReport
from llog.protocol.index import PartitionIndex
from llog.protocol.manifest import ManifestStore
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.read import LogReader
from llog.service.consume import ConsumeRequest, ConsumeService, FetchPartition
from llog.store.storage import Storage
from tests.conftest import BUCKET
from tests.faults import SimulatedCrash, crash_at
from tests.integration.test_model import COMPACTOR_CRASH_POINTS, GRACE_MS

pytestmark = pytest.mark.oxia

@dataclass
class Log:
    """One partition of a fresh topic under the test's own root, and what was acknowledged in it."""

    storage: Storage
    protocol: AppendProtocol
    topic: str = ""
    partition: int = 0

    def __post_init__(self) -> None:
        self.topic = f"t-{uuid.uuid4().hex[:8]}"
        self.acked: dict[int, bytes] = {}
        self.writer = LogWriter(self.storage, config=WriterConfig(append_protocol=self.protocol))
        self.reader = LogReader(self.storage)
        self.manifests = ManifestStore(self.storage.blobs, bucket=BUCKET, root=self.storage.root)
        assert self.writer.initialize_partition(self.topic, self.partition)
        assert self.meta.control().record.sequential is (self.protocol is AppendProtocol.SEQUENTIAL)

    @property
    def meta(self) -> PartitionMetadata:
        return PartitionMetadata(self.storage.oxia, PartitionKeys(self.topic, self.partition, self.storage.root))

    def append(self, *values: bytes) -> None:
        result = self.writer.append(self.topic, self.partition, list(values))
        assert result.start_offset is not None
        for offset, value in enumerate(values, start=result.start_offset):
            assert offset not in self.acked
            self.acked[offset] = value

    def compact_once(self, hook: FaultHook | None = None) -> CompactionResult:
        return Compactor(self.storage, fault_hook=hook).compact_once(self.topic, self.partition)

    def crash_compaction_at(self, point: str) -> None:
        with pytest.raises(SimulatedCrash):
            self.compact_once(crash_at(point))

    def collector(self, max_bytes: int, *, ahead: bool = True) -> GarbageCollector:
        """GC with a size limit; ``ahead``: its clock is past the grace, so every unreferenced object looks old."""
        retention = RetentionConfig(topics={self.topic: RetentionPolicy(max_bytes=max_bytes)})
        offset = 2 * GRACE_MS / 1000 if ahead else 0.0
        clock: Callable[[], float] = lambda: time.time() + offset  # noqa: E731
        return GarbageCollector(dataclasses.replace(self.storage, clock=clock),
                                config=GcConfig(grace_ms=GRACE_MS, retention=retention))

    def collect_garbage(self, max_bytes: int = 1, *, ahead: bool = True) -> GcReport:
        report = self.collector(max_bytes, ahead=ahead).collect()
        assert not report.errors, report.errors
        return report

    @property
    def log_start(self) -> int:
        return self.meta.control().record.log_start_offset

    def exists(self, uri: str) -> bool:
        try:
            self.storage.blobs.head(S3Location.parse(uri))
        except BlobNotFound:
            return False
        return True

    # --- what readers see ---------------------------------------------------------

    def check(self) -> None:
        """What readers see (:meth:`check_reads`) and what names an object (:meth:`check_references`)."""
        self.check_reads()
        self.check_references()

    def check_reads(self) -> None:
        """Every acknowledged offset from the log start reads back exactly; nothing below it is followed."""
        start = self.log_start
        info = self.reader.partition_info(self.topic, self.partition)
        assert info.log_start == start
        live = {o: v for o, v in self.acked.items() if o >= start}
        assert live, "the tests keep at least the last append"
        assert info.high_watermark == max(self.acked)
        for offset, value in live.items():
            assert self.reader.read_offset(self.topic, self.partition, offset).value == value
        assert [(r.offset, r.value) for r in self.reader.iter_from(self.topic, self.partition, start)] == sorted(
            live.items()
        )
        assert self.consume_all(start) == sorted(live.items())
        for offset in [o for o in self.acked if o < start]:
            with pytest.raises(OffsetOutOfRange):
                self.reader.read_offset(self.topic, self.partition, offset)
            with pytest.raises(OffsetOutOfRange):
                list(self.reader.iter_from(self.topic, self.partition, offset))
            (below,) = ConsumeService(self.reader).consume(
                ConsumeRequest([FetchPartition(self.topic, self.partition, offset, 1 << 20)], 0, 1, 1 << 20)
            )
            assert isinstance(below.error, OffsetOutOfRange)
            assert not below.records

    def consume_all(self, offset: int) -> list[tuple[int, bytes]]:
        """Consume from ``offset`` to the high watermark, request after request, as a consumer does."""
        service, got = ConsumeService(self.reader), []
        while offset <= max(self.acked):
            (fetch,) = service.consume(
                ConsumeRequest([FetchPartition(self.topic, self.partition, offset, 1 << 20)], 0, 1, 1 << 20)
            )
            assert fetch.error is None, fetch
            assert fetch.log_start_offset == self.log_start
            assert fetch.records, fetch
            got += [(r.offset, r.value) for r in fetch.records]
            offset = fetch.next_fetch_offset
        return got

    def check_references(self) -> None:
        """Nothing that can lead a reader, a compactor or the export to an object names a missing one.

        And docs/GC.md's rule, which retention now follows too: an object named by ``meta/compaction`` (in
        any state) exists while the record does, and the log start has not passed the record's range.
        """
        meta, start = self.meta, self.log_start
        index = PartitionIndex.load(meta)
        for batch in index.scan(start):
            assert self.exists(batch.entry.ref.data_key), f"index entry {batch} names a missing object"
        if index.pending is not None:
            assert self.exists(index.pending.ref.data_key)
        keys = PartitionKeys(self.topic, self.partition, self.storage.root)
        assert self.manifests.log_start(keys) == start
        for info in self.storage.blobs.list(BUCKET, keys.manifest_prefix):
            span = keys.parse_manifest_key(info.key)
            if span is None:
                continue  # log-start.json
            assert span[0] >= start, f"manifest {info.key} below the log start {start}"
            manifest = self.manifests.read(keys, info.key)
            assert self.exists(manifest.data_key), f"manifest {info.key} names a missing object"
        record = meta.compaction()
        if record is not None:
            assert self.exists(record.data_key), f"{record.state.value} compaction's object was deleted"
            assert start <= record.start_offset, f"the log start {start} passed a running compaction {record}"
        assert start <= meta.cursor().offset

    def compact_once_checked(self) -> None:
        """The next compaction works at or above the log start, and everything still reads back."""
        start = self.log_start
        result = self.compact_once()
        if result.start_offset is not None:
            assert result.start_offset >= start
        assert self.meta.compaction() is None
        self.check()


@pytest.fixture(params=[AppendProtocol.CAS, AppendProtocol.SEQUENTIAL], ids=str)
def log(request: pytest.FixtureRequest, storage: Storage) -> Log:
    """A fresh partition of each append protocol."""
    return Log(storage, request.param)


def test_retention_leaves_a_range_whose_compaction_died_before_clearing_its_record(log: Log) -> None:
    """The soak's five steps: append; compactor dies at after_cursor; append; GC with a size limit of 1 byte."""
    log.append(b"first-1", b"first-2")  # offsets 1-2
    log.crash_compaction_at(faults.COMPACTOR_AFTER_CURSOR)
    record = log.meta.compaction()
    assert record is not None
    assert record.state is CompactionState.UPDATING_CURSOR
    assert (record.start_offset, record.end_offset, log.meta.cursor().offset) == (1, 2, 3)
    log.append(b"second")  # offset 3: [1, 2] is no longer the last entry, so retention may consider it

    log.collect_garbage(max_bytes=1)

    # The range stays while meta/compaction names it (before the fix: log start 3 and the object deleted).
    assert log.log_start == 1
    assert log.exists(record.data_key)
    log.check()

    # The next compaction finishes the record; the following run removes the range.
    result = log.compact_once()
    assert (result.outcome, result.resumed_from) == ("resumed", CompactionState.UPDATING_CURSOR.value)
    assert log.meta.compaction() is None
    log.collect_garbage(max_bytes=1)
    assert log.log_start == 3
    assert not log.exists(record.data_key)
    log.check()
    log.compact_once_checked()


@pytest.mark.parametrize("point", COMPACTOR_CRASH_POINTS)
def test_retention_after_a_compactor_died_at_any_point(log: Log, point: str) -> None:
    """An older compacted range, then a compaction that dies at ``point``, a later append, and GC."""
    log.append(b"old-1", b"old-2")  # offsets 1-2, compacted and finished
    assert log.compact_once().outcome == "compacted"
    log.append(b"mid-1", b"mid-2", b"mid-3")  # offsets 3-5: the compaction that dies
    log.crash_compaction_at(point)
    log.append(b"late")  # offset 6
    record = log.meta.compaction()

    log.collect_garbage(max_bytes=1)

    # [1, 2] is finished and not last: it goes. The dying compaction's range stays, whatever its state
    # (before the fix, a record left in UPDATING_CURSOR did not stop retention: log start 6).
    assert log.log_start == 3
    log.check()
    if record is not None:
        assert log.exists(record.data_key)

    log.compact_once_checked()  # resumes the record, or (none left) compacts [3, 6] afresh
    log.collect_garbage(max_bytes=1)
    # After a crash before the record, [3, 6] became one range, the last entry: it stays. Otherwise the
    # resumed compaction finished [3, 5], which now goes, and offset 6 is the last entry.
    assert log.log_start == (3 if point == faults.COMPACTOR_AFTER_BLOB_PUT else 6)
    log.check()
    log.compact_once_checked()


@pytest.mark.parametrize("point", COMPACTOR_CRASH_POINTS)
def test_retention_running_while_a_compactor_is_paused_between_its_steps(log: Log, point: str) -> None:
    """A compactor that stalls at ``point`` (not dead) while GC runs, and then carries on.

    GC runs on a real clock here: the stalled compactor's new object is young, as docs/GC.md's commit
    deadline guarantees in production (a collector clock hours ahead would judge it before its record).
    """
    log.append(b"old-1", b"old-2")
    assert log.compact_once().outcome == "compacted"
    log.append(b"mid-1", b"mid-2")
    log.append(b"mid-3")  # [3, 5] is two WAL entries
    seen: list[str] = []

    def stall(reached: str) -> None:
        if reached != point:
            return
        log.append(b"during")  # the stalled compaction's range is not last any more
        log.collect_garbage(max_bytes=1, ahead=False)
        log.check()
        seen.append(reached)

    result = log.compact_once(stall)
    assert seen == [point]
    assert (result.outcome, result.start_offset, result.end_offset) == ("compacted", 3, 5)
    assert log.meta.compaction() is None
    log.check()
    log.collect_garbage(max_bytes=1, ahead=False)
    assert log.log_start == 6  # [3, 5] is finished now; offset 6 is the last entry
    log.check()
    log.compact_once_checked()


def test_a_read_whose_range_retention_removed_after_the_read_looked_it_up_again_is_below_the_log_start(
    log: Log,
) -> None:
    """A reader resolves offset 1 to its WAL entry; compaction replaces it and GC deletes the blob, so the fetch
    finds nothing and the reader looks the offset up again: the compacted range. Before it fetches that, retention
    removes the range (log start first, then its object). The answer is the offset's being below the log start
    (what the reader would have said a moment later), not ``BlobNotFound``."""
    log.writer = LogWriter(log.storage, config=WriterConfig(append_protocol=log.protocol, inline_batch_max_bytes=0))
    for value in (b"a", b"b", b"c", b"d"):
        log.append(value)  # each in a WAL blob of its own (none inline in its index entry)
    compactor = Compactor(log.storage, config=CompactorConfig(max_offsets_per_run=2))
    real_fetch, fetched = log.reader.fetch, []

    def fetch(batch: IndexedBatch) -> RecordBatch:
        fetched.append(batch.entry.type)
        if len(fetched) == 1:  # the WAL entry of offsets 1: compacted, its blob collected
            assert compactor.compact_once(log.topic, log.partition).end_offset == 2
            assert log.collector(max_bytes=2**40).collect().wal_blobs_deleted >= 1
        else:  # the compacted range, looked up again: retention removes it now
            assert log.collector(max_bytes=1).collect().retention_partitions_truncated == 1
            assert log.log_start == 3
        return real_fetch(batch)

    log.reader.fetch = fetch  # type: ignore[method-assign]
    with pytest.raises(OffsetOutOfRange):
        log.reader.read_offset(log.topic, log.partition, 1)
    assert fetched == [EntryType.WAL, EntryType.COMPACTED]
    log.reader.fetch = real_fetch  # type: ignore[method-assign]
    log.check()
