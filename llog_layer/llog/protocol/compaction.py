"""Compaction (docs/PROTOCOL.md, "Compaction").

``compact_once(topic, partition)`` rewrites one contiguous run of WAL entries,
starting exactly at ``meta/compaction-cursor``, into one partition-local
``bytes-batch-v1`` object, then swaps the index over to it:

1. finish a pending append (so no committed batch is skipped);
2. resume ``meta/compaction`` if a previous run died part-way;
3. move the cursor over any LOST entry starting at it (a rebuild's lost
   range, ``llog.protocol.rebuild``: no data to compact); select WAL entries
   from the cursor, stopping at a gap, a COMPACTED or LOST entry,
   ``max_offsets`` or ``max_bytes``, and before the ``search_from_offset`` of
   an idempotent producer's unresolved claim (whose tag a takeover may still
   need, ``llog.protocol.producers``);
4. read the slices, write ``{base}/data/compacted/{uuid}``;
5. create ``meta/compaction`` (state ``WRITING_COMPACTED_INDEX``);
6. CAS the range's end key to one COMPACTED entry; state ``DELETING_OLD``;
7. publish the range's manifest (docs/FORMAT.md), ``delete_range`` the lower
   keys; state ``UPDATING_CURSOR``;
8. advance the cursor to ``end + 1``; delete ``meta/compaction``.

Every step is idempotent and ``meta/compaction`` records where a run stands,
so any compactor can finish another's work. Readers see the same records at
every step: the end key covers the whole range before any lower key goes.

Sequential partitions (docs/SEQUENTIAL_APPEND.md) are compacted the same way
through ``llog.protocol.index.PartitionIndex``: a run never crosses a generation, the
end key is rewritten in place (never deleted: a sequence's highest key is its
counter) and only keys below it are deleted.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum

from llog.config import CompactorConfig, WriterConfig
from llog.errors import CommitDeadlineExceeded, InconsistentReadState, VersionConflict
from llog.format.codec import ENCODING, Record, decode_batch, encode_batch
from llog.format.keys import PartitionKeys, S3Location
from llog.format.kv.compaction import (
    CompactedRange,
    CompactionCursor,
    CompactionRecord,
    CompactionState,
    compacted_object_metadata,
)
from llog.format.kv.document import DataRef, TimeSpan
from llog.format.kv.index import EntryType, IndexedBatch, IndexEntry
from llog.protocol import append_cas, producers
from llog.protocol.append_sequential import SequentialAppender
from llog.protocol.faults import (
    COMPACTOR_AFTER_BLOB_PUT,
    COMPACTOR_AFTER_CURSOR,
    COMPACTOR_AFTER_DELETE,
    COMPACTOR_AFTER_END_KEY,
    COMPACTOR_AFTER_MANIFEST,
    COMPACTOR_AFTER_RECORD,
    FaultHook,
)
from llog.protocol.index import PartitionIndex
from llog.protocol.manifest import ManifestStore
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.topics import TopicLayouts
from llog.store.fetch import BlobFetcher
from llog.store.storage import Storage

log = logging.getLogger(__name__)

SELECT_SCAN_LIMIT = 1024  # index entries one selection reads: a compacted range holds at most this many


class CompactionOutcome(StrEnum):
    """What one ``compact_once`` call did."""

    COMPACTED = "compacted"  # rewrote a run and swapped the index over to it
    RESUMED = "resumed"  # finished a run a previous compactor left part-way
    NOTHING_TO_DO = "nothing_to_do"  # caught up, or another compactor took the run


@dataclass(frozen=True)
class CompactionResult:
    """What one ``compact_once`` call did."""

    topic: str
    partition: int
    outcome: CompactionOutcome
    start_offset: int | None = None
    end_offset: int | None = None
    records: int = 0
    bytes_written: int = 0
    source_entries: int = 0
    recovered_pending: bool = False
    resumed_from: str | None = None
    stage_seconds: dict[str, float] = field(default_factory=dict)
    # The range took every WAL entry the index held past the cursor when it was selected: a worker stops
    # there (llog.service.compaction.run_compaction_task), leaving what arrived since to the next task.
    reached_tail: bool = False


class _Stages:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def mark(self, stage: str) -> None:
        now = time.perf_counter()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + now - self._last
        self._last = now


class Compactor:
    def __init__(
        self, storage: Storage, *, config: CompactorConfig | None = None, fault_hook: FaultHook | None = None
    ) -> None:
        self.storage = storage
        self.config = config or CompactorConfig()
        self._fault_hook = fault_hook
        self.manifests = ManifestStore(storage.blobs, bucket=storage.bucket, root=storage.root)
        self.layouts = TopicLayouts(storage.oxia, root=storage.root)
        # Rolls a sequential generation when it takes over an expired producer claim (docs/IDEMPOTENCE.md).
        self._sequential = SequentialAppender(WriterConfig(), fault=self._fault, clock=storage.clock)

    @classmethod
    def from_env(cls) -> Compactor:
        return cls(Storage.from_env(), config=CompactorConfig.from_env())

    def close(self) -> None:
        self.storage.close()

    def _fault(self, point: str) -> None:
        if self._fault_hook is not None:
            self._fault_hook(point)

    def compact_once(self, topic: str, partition: int) -> CompactionResult:
        """``compact`` the partition of the topic's current incarnation."""
        return self.compact(self.layouts.keys(topic, partition))

    def compact(self, keys: PartitionKeys) -> CompactionResult:
        """One compaction step of the partition with these keys (resume one, or compact the next range)."""
        topic, partition = keys.topic, keys.partition
        meta = PartitionMetadata(self.storage.oxia, keys)
        stages = _Stages()
        recovered = append_cas.recover_pending(meta)
        stages.mark("recover_pending")

        def nothing_to_do() -> CompactionResult:
            return CompactionResult(
                topic,
                partition,
                CompactionOutcome.NOTHING_TO_DO,
                recovered_pending=recovered,
                stage_seconds=stages.seconds,
            )

        inflight = meta.compaction()
        if inflight is not None:
            self._finish(meta, stages)
            return CompactionResult(
                topic,
                partition,
                CompactionOutcome.RESUMED,
                inflight.start_offset,
                inflight.end_offset,
                inflight.msg_count,
                recovered_pending=recovered,
                resumed_from=inflight.state.value,
                stage_seconds=stages.seconds,
            )

        cursor = meta.cursor().offset
        index = PartitionIndex.load(meta)
        run, reached_tail = self._select(index, cursor)
        if run:
            # Read after the selection: a claim made later lies past the run (llog.protocol.producers, E2).
            now_ms = int(self.storage.clock() * 1000)
            floor = producers.claims_floor(meta, now_ms, self.config.producer_expiry_ms, self._sequential)
            run = run if floor is None else [batch for batch in run if batch.end_offset < floor]
        stages.mark("select")
        if not run:
            return nothing_to_do()

        start, end = run[0].start_offset, run[-1].end_offset
        body = self._rewrite(run, start, end)
        times = TimeSpan.of_batch(body)
        stages.mark("read_and_encode")
        location = S3Location(self.storage.bucket, meta.keys.compacted_object_key())
        commit_deadline = time.monotonic() + self.config.max_commit_delay_ms / 1000
        self.storage.blobs.put(location, body, metadata=compacted_object_metadata(start, end))
        stages.mark("write_object")
        self._fault(COMPACTOR_AFTER_BLOB_PUT)

        record = CompactionRecord(
            compaction_id=uuid.uuid4().hex,
            state=CompactionState.WRITING_COMPACTED_INDEX,
            start_offset=start,
            end_offset=end,
            msg_count=end - start + 1,
            data_key=location.uri,
            created_at_ms=int(self.storage.clock() * 1000),
            last_source_start_offset=run[-1].start_offset,
            data_bytes=len(body),
            times=times,
            log_max_timestamp_ms=self._log_max_timestamp(index, start, times),
        )
        if meta.cursor().offset != start:
            # Another compactor committed a range while we were reading and writing.
            return nothing_to_do()
        if time.monotonic() > commit_deadline:
            raise CommitDeadlineExceeded(
                f"{self.config.max_commit_delay_ms} ms passed since the compacted object was written; "
                "it is left for garbage collection"
            )
        if not meta.create_compaction(record):
            # Another compactor got here first; our object is an orphan for GC.
            log.warning("compaction of %s/%s already in flight elsewhere", topic, partition)
            return nothing_to_do()
        stages.mark("record")
        self._fault(COMPACTOR_AFTER_RECORD)
        self._finish(meta, stages)
        return CompactionResult(
            topic,
            partition,
            CompactionOutcome.COMPACTED,
            start,
            end,
            record.msg_count,
            len(body),
            len(run),
            recovered_pending=recovered,
            stage_seconds=stages.seconds,
            reached_tail=reached_tail,
        )

    # --- selection and rewrite -------------------------------------------------

    def _select(self, index: PartitionIndex, cursor: int) -> tuple[list[IndexedBatch], bool]:
        """The WAL run to compact from the cursor, and whether it reaches the index's last entry; the cursor is
        first moved over LOST entries starting at it.

        A LOST entry (``llog.protocol.rebuild``) has no data to compact: a rebuild relies on this to pass its
        lost range, and a rebuild that stopped before it moved the cursor is finished here, in the same scan.
        """
        run: list[IndexedBatch] = []
        offsets = size = 0
        expected = cursor
        scanned = index.scan(cursor, limit=SELECT_SCAN_LIMIT)
        for batch in scanned:
            if not run and batch.entry.type is EntryType.LOST and batch.start_offset == expected:
                expected = batch.end_offset + 1
                self._advance_cursor(index.meta, expected)
                continue
            if batch.entry.type is not EntryType.WAL or batch.start_offset != expected:
                break  # a COMPACTED entry, a gap, or (first entry) not starting at the cursor
            if run and batch.generation != run[0].generation:
                break  # a compacted range stays within one generation (one key space)
            length = batch.entry.ref.byte_length or 0
            if run and (
                offsets + batch.entry.msg_count > self.config.max_offsets_per_run
                or size + length > self.config.max_bytes_per_run
            ):
                break
            run.append(batch)
            offsets += batch.entry.msg_count
            size += length
            expected = batch.end_offset + 1
        else:
            return run, len(scanned) < SELECT_SCAN_LIMIT
        return run, False

    @staticmethod
    def _log_max_timestamp(index: PartitionIndex, start: int, times: TimeSpan) -> int | None:
        """The greatest timestamp from the log start through a new range starting at ``start``.

        The previous compacted range's (it ends at ``start - 1``: the cursor only passes compacted
        ranges) and this range's own; this range's alone at the log start. None when the previous
        range has none (compacted before entries carried it): lookups scan instead of bisecting there.
        """
        if start <= index.control.log_start_offset:
            return times.max_ms
        previous = index.covering(start - 1)
        if previous is None and start <= index.meta.control().record.log_start_offset:
            return times.max_ms  # retention removed the previous range since the index was read
        if previous is None or previous.entry.log_max_timestamp_ms is None:
            return None
        return max(previous.entry.log_max_timestamp_ms, times.max_ms)

    def _rewrite(self, run: list[IndexedBatch], start: int, end: int) -> bytes:
        fetcher = BlobFetcher(self.storage.blobs)
        fetcher.prefetch([b.entry.ref for b in run])
        records: list[Record] = []
        for batch in run:
            decoded = decode_batch(fetcher.get(batch.entry.ref), expected_count=batch.entry.msg_count)
            records.extend(decoded)
        if len(records) != end - start + 1:
            raise InconsistentReadState(f"selected entries hold {len(records)} records for [{start}, {end}]")
        return encode_batch(records)

    # --- the index swap, resumable from any state --------------------------------

    def _finish(self, meta: PartitionMetadata, stages: _Stages) -> None:
        """Drive ``meta/compaction`` to completion, one step per round.

        Each round re-reads the record, so a conflict (another compactor moved
        it on) simply continues from wherever it now stands.
        """
        # One read of meta/control per record: read after the record exists, it knows the generation of its
        # range (which never changes). Not reused for another record: its range may be in a newer generation,
        # and deleting keys by a stale generation table could hit a sequence's highest key.
        indexes: dict[str, PartitionIndex] = {}
        while True:
            found = meta.versioned_compaction()
            if found is None:
                return  # done, by us or by another compactor
            record, version = found.record, found.version_id
            try:
                if record.state is CompactionState.WRITING_COMPACTED_INDEX:
                    if meta.cursor().offset != record.start_offset:
                        # Created by a compactor that selected its run before another
                        # compaction moved the cursor: its range is no longer the next
                        # one. While a record exists no compaction can finish, so this
                        # cursor read is authoritative. Drop it; GC takes the object.
                        meta.delete_compaction(version)
                        stages.mark("abandon_stale_record")
                        continue
                    self._write_end_key(self._index_for(meta, record, indexes), record)
                    stages.mark("end_key")
                    self._fault(COMPACTOR_AFTER_END_KEY)
                    self._set_state(meta, record, version, CompactionState.DELETING_OLD)
                elif record.state is CompactionState.DELETING_OLD:
                    # After the commit point (the end key), so no manifest names an orphan.
                    self.manifests.publish(meta.keys, CompactedRange.of(meta.keys.topic, meta.keys.partition, record))
                    stages.mark("manifest")
                    self._fault(COMPACTOR_AFTER_MANIFEST)
                    self._index_for(meta, record, indexes).delete_entries(record.start_offset, record.end_offset)
                    stages.mark("delete_old")
                    self._fault(COMPACTOR_AFTER_DELETE)
                    self._set_state(meta, record, version, CompactionState.UPDATING_CURSOR)
                else:
                    self._advance_cursor(meta, record.end_offset + 1)
                    stages.mark("cursor")
                    self._fault(COMPACTOR_AFTER_CURSOR)
                    meta.delete_compaction(version)
                    stages.mark("clear_record")
            except VersionConflict:
                continue

    @staticmethod
    def _index_for(
        meta: PartitionMetadata, record: CompactionRecord, cache: dict[str, PartitionIndex]
    ) -> PartitionIndex:
        index = cache.get(record.compaction_id)
        if index is None:
            index = cache[record.compaction_id] = PartitionIndex.load(meta)
        return index

    @staticmethod
    def _set_state(meta: PartitionMetadata, record: CompactionRecord, version: int, state: CompactionState) -> None:
        meta.replace_compaction(replace(record, state=state), version)

    @staticmethod
    def _write_end_key(index: PartitionIndex, record: CompactionRecord) -> None:
        found = index.locate(record.end_offset)
        if found is None:
            raise InconsistentReadState(f"the end key of compaction {record.compaction_id} is missing")
        batch, version = found.batch, found.version_id
        if batch.entry.type is EntryType.COMPACTED and batch.entry.ref.data_key == record.data_key:
            return  # a previous attempt already swapped it
        if batch.entry.type is not EntryType.WAL or batch.start_offset != record.last_source_start_offset:
            raise InconsistentReadState(
                f"the end key of compaction {record.compaction_id} holds an unexpected entry: {batch}"
            )
        entry = IndexEntry(
            EntryType.COMPACTED,
            record.msg_count,
            DataRef(record.data_key, ENCODING, times=record.times),
            record.created_at_ms,
            data_bytes=record.data_bytes,
            log_max_timestamp_ms=record.log_max_timestamp_ms,
        )
        # A compare-and-set on the existing key: it never creates a key, so in a
        # sequence it never moves the counter.
        index.meta.replace_entry(found.key, entry, version)

    @staticmethod
    def _advance_cursor(meta: PartitionMetadata, offset: int) -> None:
        while True:
            current = meta.versioned_cursor()
            if current.cursor.offset >= offset:
                return  # the cursor only moves forward
            try:
                meta.replace_cursor(CompactionCursor(offset), current.version_id)
                return
            except VersionConflict:
                continue


def compact_until_caught_up(
    compactor: Compactor,
    topic: str,
    partition: int,
    *,
    budget_s: float,
    clock: Callable[[], float] = time.monotonic,
    keys: PartitionKeys | None = None,
) -> list[CompactionResult]:
    """Run ``compact`` until there is nothing to do or ``budget_s`` is spent, on the partition of the topic's
    current incarnation, or of the one ``keys`` name (rebuild: before the topic's record exists)."""
    results: list[CompactionResult] = []
    keys = compactor.layouts.keys(topic, partition) if keys is None else keys
    deadline = clock() + budget_s
    while clock() < deadline:
        result = compactor.compact(keys)
        results.append(result)
        if result.outcome is CompactionOutcome.NOTHING_TO_DO:
            break
    return results
