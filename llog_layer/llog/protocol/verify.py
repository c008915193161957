"""Verify partitions against the protocol's invariants, reading only (docs/RECOVERY.md, "Verify a partition").

For each partition, as of one read of its records:

* **Index** (I1, I6): from the log start to the high watermark every offset is
  in exactly one entry (or, CAS partitions, in ``pending``): no gap, no
  overlap, so the record counts add up (a LOST entry, a rebuild's record of
  offsets it could not recover, counts as an entry). Entries below the compaction cursor
  are COMPACTED (I5); a WAL entry inside a committed compacted range is the
  stale key PROTOCOL.md names as the residual case of I6.
* **Objects** (I3, I4): every object an entry names exists, the entry's byte
  range lies inside it, and the batch decodes with its CRC32C and holds the
  entry's record count. A compacted object's size and end-offset metadata
  match its entry.
* **Manifests** (I4): the manifests from the log start form a chain
  ``[a, b], [b + 1, c], …``; each names the object of the COMPACTED entry of
  its range, every COMPACTED entry has one, and none exists for a range the
  index does not hold as compacted.
* **Cursor and log start** (I5, I9): cursor <= high watermark + 1, log start
  <= cursor, and the log start is where an entry starts.

It also counts orphans: compacted objects under the partition's prefix that
nothing references (garbage collection's to delete once older than its grace).
Shared WAL blobs are judged across partitions by garbage collection
(``llog.protocol.gc``), not here.

**Concurrent writers.** Verification runs next to appends, compaction,
retention and GC, so what it reads is never one snapshot. Each is handled:

* *Appends* after ``meta/control`` was read: the index is checked up to the
  high watermark read then (the cursor is read *before* it, so the cursor
  bound holds); a later entry is ignored, one straddling the watermark counts
  up to it. A CAS append between reservation and index entry is covered by
  ``pending``.
* *Compaction* rewrites an end key to a COMPACTED entry covering the range,
  then deletes the lower WAL keys, then moves the cursor; a paged scan can
  read the lower keys and then the new end key. A COMPACTED entry overlapping
  only WAL entries it contains therefore replaces them; they are a problem
  (a stale key) only if they are still there after the scan while no
  ``meta/compaction`` (read after the scan) is finishing that range. A
  COMPACTED range or manifest that appeared after the scan is confirmed by a
  fresh lookup of its end key.
* *Retention* moves the log start, then deletes manifests, index keys and
  objects below it: a problem at an offset below the log start re-read at the
  end is dropped.
* *GC* deletes only objects nothing has referenced for its grace period; an
  object missing for an entry that a fresh lookup no longer finds (compacted
  since, or below the log start) is dropped.

Every problem found is confirmed this way before it is reported, so a report
names damage, not a race. A stalled writer that re-creates a stale key and is
checked before its own stale-key check runs is reported as ``stale_entry``:
that key is exactly the residual case, if the writer dies before its check.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from llog.config import GcConfig
from llog.errors import (
    BlobNotFound,
    CorruptData,
    CorruptMetadata,
    InvalidArgument,
    PartitionNotInitialized,
    UnknownTopic,
)
from llog.format.codec import ENCODING, decode_batch
from llog.format.keys import PartitionKeys, S3Location, object_id_time_ms
from llog.format.kv.compaction import END_OFFSET_METADATA, CompactionRecord
from llog.format.kv.index import EntryType, IndexedBatch
from llog.protocol.index import PartitionIndex
from llog.protocol.manifest import LOG_START_NAME, ManifestStore
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.registry import PartitionRegistry
from llog.protocol.topics import TopicLayouts, TopicRegistry, keys_ids
from llog.store.fetch import fetch_ref
from llog.store.s3 import ObjectInfo
from llog.store.storage import Storage

log = logging.getLogger(__name__)

MAX_PROBLEMS = 100  # a report lists at most this many problems; its counters stay exact
CHECK_THREADS = 8  # objects checked at once


class ProblemKind(StrEnum):
    """What is wrong, and the invariant it breaks."""

    UNREADABLE_METADATA = "unreadable_metadata"  # an Oxia record of the partition does not decode
    INDEX_GAP = "index_gap"  # I1: offsets in no entry
    INDEX_OVERLAP = "index_overlap"  # I6: offsets in two entries
    STALE_ENTRY = "stale_entry"  # I6: a WAL entry left inside a committed compacted range
    UNCOMPACTED_BELOW_CURSOR = "uncompacted_below_cursor"  # I5: the cursor is past a WAL entry
    OBJECT_MISSING = "object_missing"  # I4: an entry names an object that does not exist
    RANGE_OUTSIDE_OBJECT = "range_outside_object"  # I4: the entry's bytes lie past the object's end
    CORRUPT_BATCH = "corrupt_batch"  # I3: the bytes fail the CRC32C, do not decode, or hold another count
    OBJECT_MISMATCH = "object_mismatch"  # I3: a compacted object's size or range disagrees with its entry
    INLINE_MISMATCH = "inline_mismatch"  # I3: the copy of a small batch in its entry differs from the object's bytes
    MANIFEST_MISSING = "manifest_missing"  # I4: a committed compacted range has no manifest
    MANIFEST_MISMATCH = "manifest_mismatch"  # I4: a manifest is unreadable or names another object
    MANIFEST_UNINDEXED = "manifest_unindexed"  # I4: a manifest for a range the index does not hold as compacted
    MANIFEST_CHAIN_BROKEN = "manifest_chain_broken"  # the manifests do not follow each other from the log start
    CURSOR_BEYOND_WATERMARK = "cursor_beyond_watermark"  # I5
    LOG_START_BEYOND_CURSOR = "log_start_beyond_cursor"  # I9
    LOG_START_NOT_AT_BOUNDARY = "log_start_not_at_boundary"  # I9: an entry straddles the log start


@dataclass(frozen=True)
class Problem:
    """One finding: what, where (an Oxia key or an ``s3://`` URI), and why."""

    kind: ProblemKind
    topic: str
    partition: int
    key: str
    detail: str
    offset: int | None = None  # the first offset concerned: a problem below the log start is retention's doing

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "kind": self.kind.value}


@dataclass
class PartitionSummary:
    """What was verified in one partition, as of the reads named."""

    topic: str
    partition: int
    protocol: str
    log_start: int
    high_watermark: int
    cursor: int
    topic_id: str | None = None  # the incarnation verified; None: a topic from before topic ids
    entries: int = 0
    records: int = 0
    compacted_ranges: int = 0
    manifests: int = 0
    objects_checked: int = 0
    bytes_read: int = 0
    orphans: int = 0  # unreferenced compacted objects older than the GC grace: garbage collection's to delete
    young_unreferenced: int = 0  # unreferenced and younger: possibly a compaction still recording itself
    problems: int = 0


@dataclass
class VerifyReport:
    partitions: list[PartitionSummary] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # the first MAX_PROBLEMS
    problem_count: int = 0
    not_initialized: int = 0  # registered partitions without meta/control yet: nothing to verify
    skipped: int = 0  # partitions left unverified when the deadline came

    @property
    def ok(self) -> bool:
        return self.problem_count == 0

    @property
    def orphans(self) -> int:
        return sum(p.orphans for p in self.partitions)

    def add(self, summary: PartitionSummary, problems: Sequence[Problem]) -> None:
        self.partitions.append(summary)
        self.problem_count += len(problems)
        self.problems.extend(problems[: max(0, MAX_PROBLEMS - len(self.problems))])

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "partitions_verified": len(self.partitions),
            "problem_count": self.problem_count,
            "orphans": self.orphans,
            "not_initialized": self.not_initialized,
            "skipped": self.skipped,
            "partitions": [asdict(p) for p in self.partitions],
            "problems": [p.to_json() for p in self.problems],
        }


@dataclass
class _Partition:
    """One partition's verification in progress: its reads and suspected problems (confirmed at the end)."""

    meta: PartitionMetadata
    index: PartitionIndex
    summary: PartitionSummary
    inflight: CompactionRecord | None = None
    batches: list[IndexedBatch] = field(default_factory=list)  # covering [log start, high watermark]
    superseded: list[tuple[IndexedBatch, IndexedBatch]] = field(default_factory=list)  # (WAL entry, its COMPACTED)
    suspects: list[Problem] = field(default_factory=list)

    @property
    def keys(self) -> PartitionKeys:
        return self.meta.keys

    def suspect(self, kind: ProblemKind, key: str, detail: str, offset: int | None = None) -> None:
        self.suspects.append(Problem(kind, self.keys.topic, self.keys.partition, key, detail, offset))

    def entry_key(self, batch: IndexedBatch) -> str:
        try:
            return self.index.key_of(batch.end_offset)
        except CorruptMetadata:
            return self.keys.control


class Verifier:
    """Verifies partitions (A34); writes nothing."""

    def __init__(self, storage: Storage, *, read_data: bool = True, grace_ms: int | None = None) -> None:
        self.storage = storage
        self.read_data = read_data  # False: existence and ranges only (HEADs), no GETs
        self.grace_ms = GcConfig().grace_ms if grace_ms is None else grace_ms
        self.manifests = ManifestStore(storage.blobs, bucket=storage.bucket, root=storage.root)

    @classmethod
    def from_env(cls, *, read_data: bool = True) -> Verifier:
        return cls(Storage.from_env(), read_data=read_data, grace_ms=GcConfig.from_env().grace_ms)

    def close(self) -> None:
        self.storage.close()

    def verify(
        self,
        topics: Sequence[str] | None = None,
        partition: int | None = None,
        *,
        deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        shuffle: bool = False,
    ) -> VerifyReport:
        """Verify ``topics`` (None: every registered topic that is not deleted), or one ``partition`` of them.

        A named topic (or partition) that is not registered raises
        ``UnknownTopic``. Past ``deadline`` (of ``clock``) no further partition
        is started (the first one always is); ``shuffle`` verifies in random order, so that runs which
        stop at a deadline cover every partition over time.
        """
        registry = PartitionRegistry(self.storage.oxia, root=self.storage.root)
        root = self.storage.root
        found: list[PartitionKeys] = []  # each registered partition in the folder its entry names
        if topics is None:
            records = TopicRegistry(self.storage.oxia, root=root).records()
            found = [e.keys(root) for t, es in registry.entries(current=keys_ids(records)).items()
                     if not (t in records and records[t].deleted) for e in es]  # fmt: skip
        else:
            for topic in topics:
                record = TopicRegistry(self.storage.oxia, root=root).get(topic)
                current = {} if record is None else {topic: record.keys_id}
                registered = registry.entries(topic, current=current).get(topic, [])
                if partition is not None:
                    registered = [e for e in registered if e.partition == partition]
                if not registered:
                    what = topic if partition is None else f"{topic}/{partition}"
                    raise UnknownTopic(topic, f"{what} has no registered partition")
                found.extend(e.keys(root) for e in registered)
        if shuffle:
            random.shuffle(found)
        report = VerifyReport()
        for i, keys in enumerate(found):
            if i and deadline is not None and clock() > deadline:  # the first one in any case: progress
                report.skipped = len(found) - i
                break
            try:
                summary, problems = self.verify_keys(keys)
            except PartitionNotInitialized:
                report.not_initialized += 1
                continue
            report.add(summary, problems)
        return report

    def verify_partition(self, topic: str, partition: int) -> tuple[PartitionSummary, list[Problem]]:
        """``verify_keys`` of the partition of the topic's current incarnation."""
        return self.verify_keys(TopicLayouts(self.storage.oxia, root=self.storage.root).keys(topic, partition))

    def verify_keys(self, keys: PartitionKeys) -> tuple[PartitionSummary, list[Problem]]:
        """One partition: its summary and its confirmed problems, in the order found."""
        topic, partition = keys.topic, keys.partition
        meta = PartitionMetadata(self.storage.oxia, keys)
        try:
            # The cursor before meta/control: then cursor <= high watermark + 1 holds between the two reads.
            cursor = meta.cursor().offset
            index = PartitionIndex.load(meta)
            high_watermark = index.high_watermark()
        except CorruptMetadata as exc:
            problem = Problem(ProblemKind.UNREADABLE_METADATA, topic, partition, meta.keys.control, str(exc))
            return PartitionSummary(topic, partition, "unknown", 0, 0, 0, keys.topic_id, problems=1), [problem]
        control = index.control
        state = _Partition(
            meta,
            index,
            PartitionSummary(
                topic,
                partition,
                control.protocol.value,
                control.log_start_offset,
                high_watermark,
                cursor,
                keys.topic_id,
            ),
        )
        try:
            self._check_bounds(state)
            self._scan_index(state)
            state.inflight = meta.compaction()  # after the scan: a compaction it may have overlapped
            self._check_superseded(state)
            self._check_manifests(state)
        except CorruptMetadata as exc:
            state.suspect(ProblemKind.UNREADABLE_METADATA, meta.keys.base, str(exc))
        self._check_objects(state)
        self._count_orphans(state)
        problems = self._confirm(state)
        state.summary.problems = len(problems)
        if problems:
            log.warning("verify: %s/%d: %d problem(s), first %s", topic, partition, len(problems), problems[0])
        return state.summary, problems

    # --- cursor and log start -------------------------------------------------------

    @staticmethod
    def _check_bounds(state: _Partition) -> None:
        s, keys = state.summary, state.keys
        if s.cursor > s.high_watermark + 1:
            state.suspect(ProblemKind.CURSOR_BEYOND_WATERMARK, keys.compaction_cursor,
                          f"cursor {s.cursor} is past high watermark {s.high_watermark} + 1", s.cursor)  # fmt: skip
        if s.log_start > s.cursor:
            state.suspect(ProblemKind.LOG_START_BEYOND_CURSOR, keys.control,
                          f"log start {s.log_start} is past cursor {s.cursor}")  # fmt: skip

    # --- the index --------------------------------------------------------------------

    def _scan_index(self, state: _Partition) -> None:
        """Walk the entries from the log start to the high watermark: gaps, overlaps, the cursor bound."""
        s, index = state.summary, state.index
        expected = s.log_start
        for batch in index.iter(s.log_start):
            if batch.start_offset > s.high_watermark:
                break  # appended after meta/control was read
            if batch.start_offset < s.log_start:  # the first entry read (it ends at or after the log start)
                state.suspect(ProblemKind.LOG_START_NOT_AT_BOUNDARY, state.entry_key(batch),
                              f"entry [{batch.start_offset}, {batch.end_offset}] straddles log start {s.log_start}",
                              s.log_start)  # fmt: skip
            elif batch.start_offset < expected and not self._supersede(state, batch):
                state.suspect(ProblemKind.INDEX_OVERLAP, state.entry_key(batch),
                              f"[{batch.start_offset}, {batch.end_offset}] overlaps offsets before {expected}",
                              batch.start_offset)  # fmt: skip
                expected = max(expected, batch.end_offset + 1)
                continue
            elif batch.start_offset > expected:
                self._gap(state, expected, batch.start_offset - 1, state.entry_key(batch))
            state.batches.append(batch)
            expected = batch.end_offset + 1
        pending = index.pending
        if expected <= s.high_watermark and pending is not None and pending.start_offset == expected:
            state.batches.append(IndexedBatch(pending.end_offset, pending.index_entry()))  # not materialized yet
            expected = pending.end_offset + 1
        if expected <= s.high_watermark:
            self._gap(state, expected, s.high_watermark, state.keys.control)
        for batch in state.batches:
            if batch.entry.type is EntryType.WAL and batch.end_offset < s.cursor:
                state.suspect(ProblemKind.UNCOMPACTED_BELOW_CURSOR, state.entry_key(batch),
                              f"WAL entry [{batch.start_offset}, {batch.end_offset}] lies below cursor {s.cursor}",
                              batch.start_offset)  # fmt: skip
        s.entries = len(state.batches)
        s.records = sum(min(b.end_offset, s.high_watermark) - max(b.start_offset, s.log_start) + 1
                        for b in state.batches)  # fmt: skip
        s.compacted_ranges = sum(b.entry.type is EntryType.COMPACTED for b in state.batches)

    @staticmethod
    def _gap(state: _Partition, first: int, last: int, key: str) -> None:
        state.suspect(ProblemKind.INDEX_GAP, key, f"offsets [{first}, {last}] are in no index entry", first)

    @staticmethod
    def _supersede(state: _Partition, compacted: IndexedBatch) -> bool:
        """A COMPACTED entry over WAL entries it contains replaces them (a compaction, maybe in flight)."""
        if compacted.entry.type is not EntryType.COMPACTED:
            return False
        overlapped = [b for b in state.batches if b.end_offset >= compacted.start_offset]
        if not all(b.entry.type is EntryType.WAL and b.start_offset >= compacted.start_offset for b in overlapped):
            return False
        del state.batches[len(state.batches) - len(overlapped) :]
        state.superseded.extend((b, compacted) for b in overlapped)
        return True

    @staticmethod
    def _check_superseded(state: _Partition) -> None:
        """WAL entries inside a compacted range are legitimate only while its compaction deletes them."""
        inflight = state.inflight
        for wal, compacted in state.superseded:
            if inflight is not None and (inflight.start_offset, inflight.end_offset) == (
                compacted.start_offset, compacted.end_offset,
            ):  # fmt: skip
                continue
            state.suspect(ProblemKind.STALE_ENTRY, state.entry_key(wal),
                          f"WAL entry [{wal.start_offset}, {wal.end_offset}] lies inside compacted range "
                          f"[{compacted.start_offset}, {compacted.end_offset}]", wal.start_offset)  # fmt: skip

    # --- manifests -----------------------------------------------------------------------

    def _check_manifests(self, state: _Partition) -> None:
        """The manifests from the log start against the COMPACTED entries (listed after the index scan)."""
        s, keys = state.summary, state.keys
        compacted = {(b.start_offset, b.end_offset): b for b in state.batches if b.entry.type is EntryType.COMPACTED}
        spans: list[tuple[str, int, int]] = []
        for info in self.storage.blobs.list(self.storage.bucket, keys.manifest_prefix):
            named = keys.parse_manifest_key(info.key)
            if named is not None and named[1] >= s.log_start:  # below it: retention's, being deleted
                spans.append((info.key, *named))
            elif named is None and not info.key.endswith(LOG_START_NAME):
                log.info("verify: %s is not a manifest; ignored", info.key)
        s.manifests = len(spans)
        compacted_ends = dict(compacted.keys())  # start -> end
        # A LOST range (a rebuild's, llog.protocol.rebuild) has no manifest: the chain resumes after it.
        compacted_ends.update((b.start_offset, b.end_offset) for b in state.batches if b.entry.type is EntryType.LOST)
        expected = s.log_start
        for key, start, end in spans:
            while expected < start and expected in compacted_ends:
                expected = compacted_ends[expected] + 1  # a range whose manifest is missing (reported below)
            if start != expected:
                state.suspect(ProblemKind.MANIFEST_CHAIN_BROKEN, key,
                              f"manifest [{start}, {end}] does not follow the chain's end {expected - 1}",
                              min(start, expected))  # fmt: skip
            expected = end + 1
            batch = compacted.pop((start, end), None)
            if batch is None:
                state.suspect(ProblemKind.MANIFEST_UNINDEXED, key,
                              f"no COMPACTED index entry holds [{start}, {end}]", start)  # fmt: skip
                continue
            try:
                manifest = self.manifests.read(keys, key)
            except (CorruptMetadata, BlobNotFound) as exc:
                state.suspect(ProblemKind.MANIFEST_MISMATCH, key, str(exc), start)
                continue
            if manifest.data_key != batch.entry.ref.data_key:
                state.suspect(ProblemKind.MANIFEST_MISMATCH, key,
                              f"names {manifest.data_key}, the index entry {batch.entry.ref.data_key}",
                              start)  # fmt: skip
        inflight = state.inflight
        for (start, end), _ in compacted.items():
            if inflight is not None and (inflight.start_offset, inflight.end_offset) == (start, end):
                continue  # its compaction publishes the manifest before it moves on
            state.suspect(ProblemKind.MANIFEST_MISSING, keys.manifest_key(start, end),
                          f"the COMPACTED entry [{start}, {end}] has no manifest", start)  # fmt: skip

    # --- objects -------------------------------------------------------------------------

    def _check_objects(self, state: _Partition) -> None:
        by_object: dict[str, list[IndexedBatch]] = {}
        for batch in state.batches:
            if batch.entry.type is not EntryType.LOST:  # a LOST entry names no object
                by_object.setdefault(batch.entry.ref.data_key, []).append(batch)

        def check(data_key: str) -> list[tuple[IndexedBatch, ProblemKind, str] | int]:
            return self._check_object(data_key, by_object[data_key])

        with ThreadPoolExecutor(CHECK_THREADS, thread_name_prefix="verify") as pool:
            for data_key, results in zip(by_object, pool.map(check, by_object), strict=True):
                state.summary.objects_checked += 1
                for result in results:
                    if isinstance(result, int):
                        state.summary.bytes_read += result
                        continue
                    batch, kind, detail = result
                    state.suspect(kind, data_key, f"{state.entry_key(batch)} [{batch.start_offset}, "
                                  f"{batch.end_offset}]: {detail}", batch.start_offset)  # fmt: skip

    def _check_object(
        self, data_key: str, batches: list[IndexedBatch]
    ) -> list[tuple[IndexedBatch, ProblemKind, str] | int]:
        """One object and the entries naming it: problems, and the number of bytes read."""
        found: list[tuple[IndexedBatch, ProblemKind, str] | int] = []
        try:
            info = self.storage.blobs.head(S3Location.parse(data_key))
        except BlobNotFound:
            return [(b, ProblemKind.OBJECT_MISSING, "the object does not exist") for b in batches]
        except InvalidArgument as exc:
            return [(b, ProblemKind.UNREADABLE_METADATA, str(exc)) for b in batches]
        for batch in batches:
            ref, entry = batch.entry.ref, batch.entry
            if ref.encoding != ENCODING:
                found.append((batch, ProblemKind.CORRUPT_BATCH, f"unknown encoding {ref.encoding!r}"))
                continue
            if ref.byte_offset is not None and ref.byte_length is not None:
                if ref.byte_offset + ref.byte_length > info.size:
                    found.append((batch, ProblemKind.RANGE_OUTSIDE_OBJECT, f"bytes [{ref.byte_offset}, "
                                  f"{ref.byte_offset + ref.byte_length}) of a {info.size}-byte object"))  # fmt: skip
                    continue
            else:
                mismatch = self._compacted_mismatch(batch, info)
                if mismatch is not None:
                    found.append((batch, ProblemKind.OBJECT_MISMATCH, mismatch))
            if not self.read_data:
                continue
            try:
                data = fetch_ref(self.storage.blobs, ref)
                found.append(len(data))
                decode_batch(data, expected_count=entry.msg_count)
                if ref.inline is not None and ref.inline != data:
                    found.append((batch, ProblemKind.INLINE_MISMATCH, "the entry's inline copy is not the object's"))
            except BlobNotFound:
                found.append((batch, ProblemKind.OBJECT_MISSING, "the object does not exist"))
            except CorruptData as exc:  # a short read, a bad CRC32C, another record count
                found.append((batch, ProblemKind.CORRUPT_BATCH, str(exc)))
        return found

    @staticmethod
    def _compacted_mismatch(batch: IndexedBatch, info: ObjectInfo) -> str | None:
        if batch.entry.data_bytes is not None and batch.entry.data_bytes != info.size:
            return f"the object has {info.size} bytes, its entry says {batch.entry.data_bytes}"
        end = info.metadata.get(END_OFFSET_METADATA)
        if end is not None and end != str(batch.end_offset):
            return f"the object's metadata names end offset {end}"
        return None

    # --- orphans -------------------------------------------------------------------------

    def _count_orphans(self, state: _Partition) -> None:
        """Compacted objects no entry read, nor a running compaction, references (listed after the scan)."""
        referenced = {b.entry.ref.data_key for b in state.batches}
        referenced.update(b.entry.ref.data_key for b, _ in state.superseded)
        if state.inflight is not None:
            referenced.add(state.inflight.data_key)
        cutoff = int(self.storage.clock() * 1000) - self.grace_ms
        for obj in self.storage.blobs.list(self.storage.bucket, state.keys.compacted_prefix):
            if S3Location(self.storage.bucket, obj.key).uri in referenced:
                continue
            created = object_id_time_ms(obj.key.rsplit("/", 1)[-1])
            if max(obj.last_modified_ms, created or 0) > cutoff:
                state.summary.young_unreferenced += 1
            else:
                state.summary.orphans += 1

    # --- confirmation --------------------------------------------------------------------

    def _confirm(self, state: _Partition) -> list[Problem]:
        """Drop what a concurrent writer explains, from fresh reads (module docstring, "Concurrent writers")."""
        if not state.suspects:
            return []
        meta = state.meta
        try:
            cursor = meta.cursor().offset
            fresh = PartitionIndex.load(meta)
            inflight = meta.compaction()
        except CorruptMetadata:
            return state.suspects
        log_start = fresh.control.log_start_offset
        confirmed = []
        for problem in state.suspects:
            if problem.offset is not None and problem.offset < log_start:
                continue  # retention removed it since
            if problem.kind is ProblemKind.LOG_START_BEYOND_CURSOR and log_start <= cursor:
                continue  # the compaction cursor moved on between the reads
            if not self._still_there(problem, fresh, inflight):
                continue
            confirmed.append(problem)
        return confirmed

    def _still_there(self, problem: Problem, fresh: PartitionIndex, inflight: CompactionRecord | None) -> bool:
        offset = problem.offset
        if offset is None:
            return True
        kind = ProblemKind
        if problem.kind is kind.INDEX_GAP:
            return fresh.covering(offset) is None
        if problem.kind in (kind.STALE_ENTRY, kind.UNCOMPACTED_BELOW_CURSOR):
            # The WAL entry at the key is still there, and no compaction is deleting it.
            covering = fresh.ceiling(offset)
            if inflight is not None and inflight.covers(offset):
                return False
            return covering is not None and covering.entry.type is EntryType.WAL and covering.start_offset == offset
        if problem.kind is kind.MANIFEST_UNINDEXED:
            # A compaction that committed after the scan: its end key is now the range's COMPACTED entry.
            covering = fresh.ceiling(offset)
            return covering is None or covering.entry.type is not EntryType.COMPACTED or covering.start_offset != offset
        if problem.kind is kind.MANIFEST_MISSING:
            try:
                self.storage.blobs.head(S3Location(self.storage.bucket, problem.key))
            except BlobNotFound:
                return True
            return False  # published since, by the compaction that was finishing
        if problem.kind in (kind.OBJECT_MISSING, kind.RANGE_OUTSIDE_OBJECT, kind.CORRUPT_BATCH, kind.OBJECT_MISMATCH,
                            kind.INLINE_MISMATCH):  # fmt: skip
            # Still referenced by the entry holding the offset? (Compaction or retention may have replaced it.)
            covering = fresh.covering(offset)
            return covering is not None and covering.entry.ref.data_key == problem.key
        return True


def verify(storage: Storage, topics: Sequence[str] | None = None, partition: int | None = None, *,
           read_data: bool = True) -> VerifyReport:  # fmt: skip
    """:meth:`Verifier.verify` with a verifier on ``storage``."""
    return Verifier(storage, read_data=read_data).verify(topics, partition)
