"""Rebuild a topic's Oxia state from S3 alone, after the Oxia data is lost (docs/RECOVERY.md, "Rebuild from S3").

Per partition (``rebuild_topic``), with nothing of it in Oxia (else
``NamespaceNotEmpty`` before any write), in the partition folders
(``llog.format.keys``) the backed-up topic record names, else the one S3's
folders show (several: ``InvalidArgument``, nothing written); folders named
by a topic id without a backed-up record get, last, an implicit topic record
of that id, so that every component finds the partitions there:

1. **Evidence.** The manifest chain from the log start retention last
   published (``manifests/``, each naming a committed compacted object);
   the newest complete backup holding the partition (``llog.protocol.backup``);
   the compacted objects (their S3 metadata names their range); the shared
   WAL blobs whose header names the partition (a slice's record count, but
   not its offsets: offsets are assigned after the PUT).
2. **Recovered entries**, contiguous from the log start: the chain's
   ranges, each as one COMPACTED entry, if its object exists; then the
   backup's entries past the chain's end (a COMPACTED end key of a compaction
   in flight replaces the WAL entries it covers), each only if its object
   still exists. The first gap or missing object ends the recovery at ``R``.
3. **The next offset** ``N``. Let ``K`` be the highest offset any evidence
   names: ``R``, the backup's high watermark, the end of any manifest or
   compacted object. Let ``U`` be the records of the WAL slices of the
   partition that no recovered or backed-up entry references (a slice is
   named by its blob and byte offset; of blobs not older than the backup's
   start minus the GC grace, when there is a backup). Then ``N = K + U + 1``.
   A WAL blob that cannot be read is only noted in the report: its records
   are not in ``U``, and the operator must check the report's notes.
4. **Writes**, in the order ``initialize`` uses: the registry entry (I10),
   the recovered entries under ``index/`` and, when ``N > R + 1``, one LOST
   entry at ``N - 1`` over ``[R + 1, N - 1]`` (no data: a read there raises
   ``RecordsLost``, which names the offset to continue at; its
   ``log_max_timestamp_ms`` is the recovered entries' or, with none, the least
   int64, so compaction after it goes on giving one), the cursor,
   ``meta/control`` last.
   A sequential partition gets ``index/`` as its generation 0, sealed at
   ``N - 1``, and an open generation ``G`` (one past every generation the
   backup knew) from ``N - 1``; each older generation's sequence the backup
   knew gets a fence marker first, so a writer still holding one lands void
   and follows ``meta/control`` (docs/SEQUENTIAL_APPEND.md, §4). That covers
   only the generations the backup knew (only the first without a backup):
   writers must be stopped during a rebuild (preconditions below).
5. **Over the lost range.** Compaction selects WAL entries from the cursor
   and stops at any other, and GC keeps only the WAL blobs entries at or
   above the cursor reference. So the cursor is first set to the first
   recovered WAL entry (or ``N`` if there is none); when ``N > R + 1`` the
   recovered WAL entries are compacted at once, and compaction, reaching the
   LOST entry at the cursor, moves the cursor over it to ``N`` (I5: ``N ≤``
   high watermark + 1). A rebuild that stops before that leaves it to the
   next compaction run. Retention removes a LOST entry like a compacted range.
6. **A backup of the rebuilt topic** (``llog.protocol.backup``; its id is
   ``RebuildReport.rebuilt_backup_id``; it prunes no older backup). A LOST
   entry exists only in Oxia: after a second loss, without it, ``K`` could
   fall below this rebuild's ``N`` and offsets acknowledged since be assigned
   again. With it, the next rebuild keeps the lost range lost and starts
   above everything since. The remaining exposure is a second loss before
   this backup completes; a failed backup is reported in the notes.

**Why no new record takes an offset that a surviving object held.** Every
offset in ``(K, true high watermark]`` was committed in a batch whose end lies
above ``K``, so not inside any compacted object or manifest (their ends are
at most ``K``, and a compacted range holds whole batches): its records were
in a WAL blob slice that an index entry referenced when Oxia was lost, and GC
never deletes a referenced blob (I8). That slice is not referenced by the
recovered or backed-up entries (those end at or below ``K``; slices are told
apart by blob and byte offset, since one blob can hold several slices of a
partition, each committed on its own: llog serve keeps idempotent and
conditional groups as their own slices, and one request may name a partition
twice), and, with a backup, its blob was written after the backup started minus
the commit delay (an earlier one committed before the backup read the
partition, at most at its high watermark): it is among the ``U`` records.
So the true high watermark is at most ``K + U`` and new offsets start past
every offset the old log ever assigned (I1 holds across the rebuild, with
the lost range as a gap). ``U`` over-counts (void sequential appends, blobs
of crashed appends, slices compaction already copied but GC has not yet
deleted): the lost range is then longer than what was really lost, never
shorter.

**What is lost** is reported per partition (``RebuildReport.lost``):
``[R + 1, K]`` (offsets the backup or an object proves were committed: the
records acknowledged after the last compaction and the last backup, whose
entries went with Oxia), and ``[K + 1, N - 1]`` (offsets reserved for the
unplaced WAL records); a LOST entry of a backup (an earlier rebuild's) stays
lost. Reads of a lost offset raise ``RecordsLost``: a consumer continues at
``N``.

Preconditions (docs/RECOVERY.md): writers MUST be stopped, and no writer or
compactor runs against the namespace until every topic is rebuilt. The fence
markers above stop only writers of the generations the backup knew; any
other writer (a CAS one, or one of a later generation) could initialize or
append to a partition while it is rebuilt, and reuse offsets. GC refuses to
run meanwhile (``llog.protocol.namespace``: on an empty namespace it would
find every WAL blob unreferenced, and ``U`` counts them) until
``llog adopt-namespace``, which comes last. Groups and producer ids are not rebuilt.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from llog.config import GcConfig, WriterConfig
from llog.errors import BlobNotFound, CorruptData, InvalidArgument, LlogError, NamespaceNotEmpty
from llog.format.keys import (
    PartitionKeys,
    RegistryKeys,
    S3Location,
    object_id_time_ms,
    partition_keys,
    shared_wal_prefix,
)
from llog.format.kv.compaction import CompactedRange, CompactionCursor
from llog.format.kv.control import CAS_GENERATION, AppendProtocol, ControlRecord, Generation, LogState
from llog.format.kv.document import INITIAL_OFFSET, DataRef
from llog.format.kv.index import EntryType, FenceMarker, IndexedBatch, IndexEntry
from llog.format.wal import BlobSlice
from llog.protocol.backup import (
    BackupSummary,
    PartitionSnapshot,
    back_up_topics,
    complete_backups,
    live_keys,
    read_catalog,
    read_partition_snapshot,
)
from llog.protocol.compaction import Compactor, compact_until_caught_up
from llog.protocol.gc import read_blob_slices
from llog.protocol.manifest import ManifestStore
from llog.protocol.metadata import FENCE_DELTAS, PartitionMetadata
from llog.protocol.registry import PartitionRegistry
from llog.protocol.topics import PARTITION_CONCURRENCY, TopicConfig, TopicRecord
from llog.store.oxia import CREATE_ONLY
from llog.store.s3 import ObjectInfo
from llog.store.storage import Storage

log = logging.getLogger(__name__)

LOG_MAX_NOTHING = -(2**63)  # a LOST entry's log max with no record before it: below every int64 timestamp
COMPACTION_BUDGET_S = 3600.0  # compacting the recovered WAL entries before moving the cursor over the lost range


@dataclass(frozen=True)
class RecoveredRange:
    start: int
    end: int
    source: str  # "manifest" or "backup {id}"


@dataclass(frozen=True)
class LostRange:
    first: int
    last: int
    reason: str


@dataclass
class RebuildReport:
    """One partition's rebuild: what came back, from where, and which offsets did not."""

    topic: str
    partition: int
    protocol: str
    log_start_offset: int
    recovered: list[RecoveredRange] = field(default_factory=list)
    recovered_end: int = 0  # R: the last offset readable again (log start - 1 if none)
    known_high_watermark: int = 0  # K: the highest offset any evidence names
    unplaced_wal_records: int = 0  # U: records of WAL slices no entry places
    next_offset: int = INITIAL_OFFSET  # N: where appends continue
    lost: list[LostRange] = field(default_factory=list)
    backup_id: str | None = None  # the backup the rebuild read
    rebuilt_backup_id: str | None = None  # the backup taken of the rebuilt topic (None if it could not be)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "protocol": self.protocol,
            "log_start_offset": self.log_start_offset,
            "recovered": [{"start": r.start, "end": r.end, "source": r.source} for r in self.recovered],
            "recovered_end": self.recovered_end,
            "known_high_watermark": self.known_high_watermark,
            "unplaced_wal_records": self.unplaced_wal_records,
            "next_offset": self.next_offset,
            "lost": [{"first": r.first, "last": r.last, "reason": r.reason} for r in self.lost],
            "backup_id": self.backup_id,
            "rebuilt_backup_id": self.rebuilt_backup_id,
            "notes": self.notes,
        }


@dataclass(frozen=True)
class WalSlice:
    """A partition's slice of a surviving shared WAL blob (a blob may hold several slices of one partition)."""

    uri: str
    byte_offset: int  # with ``uri``, what an index entry's ``DataRef`` names
    created_ms: int
    msg_count: int


# --- evidence --------------------------------------------------------------------------------


def wal_slices(storage: Storage, topic: str) -> tuple[dict[int, list[WalSlice]], list[str]]:
    """The surviving WAL slices of ``topic``'s partitions, and the blobs that could not be read."""
    found: dict[int, list[WalSlice]] = {}
    unreadable: list[str] = []
    objects = list(storage.blobs.list(storage.bucket, shared_wal_prefix(storage.root)))

    def read(obj: ObjectInfo) -> list[BlobSlice] | LlogError:
        try:
            return read_blob_slices(storage.blobs, S3Location(storage.bucket, obj.key), obj.size)
        except (CorruptData, BlobNotFound) as exc:
            return exc

    with ThreadPoolExecutor(PARTITION_CONCURRENCY, thread_name_prefix="llog-rebuild") as pool:
        for obj, slices in zip(objects, pool.map(read, objects), strict=True):
            if isinstance(slices, LlogError):
                unreadable.append(f"{obj.key}: {slices}")
                continue
            uri = S3Location(storage.bucket, obj.key).uri
            created = object_id_time_ms(obj.key.rsplit("/", 1)[-1]) or obj.last_modified_ms
            for s in slices:
                if s.topic == topic:
                    found.setdefault(s.partition, []).append(WalSlice(uri, s.byte_offset, created, s.msg_count))
    return found, unreadable


def _backup_entries(snapshot: PartitionSnapshot, root: str) -> tuple[ControlRecord | None, list[IndexedBatch]]:
    """The snapshot's control record and its valid entries by end offset (with a CAS ``pending``).

    Where a COMPACTED entry covers WAL entries (a compaction was in flight), only it is kept.
    """
    keys = snapshot.keys(root)
    control = snapshot.control(root)
    bases = {g.number: g.base for g in control.generations} if control is not None else {}
    batches: dict[int, IndexedBatch] = {}
    for relative, value in snapshot.records.items():
        key = f"{root}/{relative}"
        end = keys.parse_index_key(key)
        if end is not None:
            batches[end] = IndexedBatch(end, IndexEntry.decode(value.encode()))
            continue
        for number, base in bases.items():
            parsed = keys.parse_sequence_key(number, key) if number != CAS_GENERATION else None
            if parsed is not None and parsed.fences == 0:
                batches[base + parsed.position] = IndexedBatch(
                    base + parsed.position, IndexEntry.decode(value.encode())
                )
    if control is not None and control.pending is not None and control.pending.end_offset not in batches:
        pending = control.pending
        batches[pending.end_offset] = IndexedBatch(pending.end_offset, pending.index_entry())
    ordered = [batches[end] for end in sorted(batches)]
    compacted = [b for b in ordered if b.entry.type is EntryType.COMPACTED]
    return control, [
        b
        for b in ordered
        if b.entry.type is EntryType.COMPACTED
        or not any(c.start_offset <= b.start_offset and b.end_offset < c.end_offset for c in compacted)
    ]


@dataclass
class _Plan:
    keys: PartitionKeys
    report: RebuildReport
    entries: list[IndexedBatch]
    publish: list[CompactedRange]  # recovered COMPACTED ranges whose manifest is missing
    protocol: AppendProtocol
    state: LogState
    generation: int  # the open generation of a sequential partition; older ones get a fence marker
    topic_deleted: bool  # the backed-up meta/control marks the partition as its deleted topic's: kept


class _Evidence:
    """What S3 holds of one topic, read once for all its partitions."""

    def __init__(self, storage: Storage, topic: str, backups: list[BackupSummary]) -> None:
        self.storage = storage
        self.topic = topic
        self.manifests = ManifestStore(storage.blobs, bucket=storage.bucket, root=storage.root)
        self.backup = next((b for b in backups if topic in b.topics), None)
        self.wal, self.unreadable = wal_slices(storage, topic)
        self._exists: dict[str, bool] = {}

    def incarnation(self, topic_record: TopicRecord | None) -> str | None:
        """The id in the keys of the partitions to rebuild: the backed-up record's, else the one S3's folders
        show (None: the legacy folders, ``llog.format.keys``)."""
        if topic_record is not None:
            return topic_record.keys_id
        found = {keys.topic_id for keys in self.manifests.partitions(self.topic)}
        if len(found) > 1:
            raise InvalidArgument(
                f"S3 holds partition folders of {len(found)} incarnations of {self.topic!r} and no backup names "
                "the current one: delete the folders of the deleted ones (docs/RECOVERY.md)"
            )
        return found.pop() if found else None

    def partitions(self, topic_record: TopicRecord | None, topic_id: str | None) -> list[int]:
        compacted = {keys.partition for keys in self.manifests.partitions(self.topic) if keys.topic_id == topic_id}
        found = compacted | set(self.wal)
        if self.backup is not None:
            found |= set(self.backup.topics[self.topic])
        if topic_record is not None:
            found |= set(topic_record.partition_numbers)
        return sorted(found)

    def exists(self, uri: str) -> bool:
        if uri not in self._exists:
            try:
                self.storage.blobs.head(S3Location.parse(uri))
                self._exists[uri] = True
            except BlobNotFound:
                self._exists[uri] = False
        return self._exists[uri]


def _plan(evidence: _Evidence, keys: PartitionKeys, default_protocol: AppendProtocol, grace_ms: int) -> _Plan:
    storage, topic, partition = evidence.storage, evidence.topic, keys.partition
    backup = evidence.backup if evidence.backup is not None and partition in evidence.backup.topics[topic] else None
    snapshot = None if backup is None else read_partition_snapshot(storage, backup.backup_id, topic, partition)
    control, backed_up = (None, []) if snapshot is None else _backup_entries(snapshot, storage.root)
    protocol = default_protocol if control is None else control.protocol
    log_start = max(evidence.manifests.log_start(keys), control.log_start_offset if control else 1)
    report = RebuildReport(
        topic, partition, protocol.value, log_start, backup_id=None if backup is None else backup.backup_id
    )
    compacted = {
        S3Location(storage.bucket, o.key).uri: o for o in storage.blobs.list(storage.bucket, keys.compacted_prefix)
    }

    # 2. the recovered entries
    entries: list[IndexedBatch] = []
    publish: list[CompactedRange] = []
    expected = log_start
    stopped: str | None = None
    for span in evidence.manifests.spans(keys, log_start):
        manifest = evidence.manifests.read(keys, span.key)
        found = compacted.get(manifest.data_key)
        if found is None:
            stopped = f"the compacted object {manifest.data_key} of manifest {span.key} is gone"
            break
        ref = DataRef(manifest.data_key, manifest.encoding, times=manifest.times)
        entry = IndexEntry(
            EntryType.COMPACTED, manifest.record_count, ref, manifest.created_at_ms, data_bytes=found.size
        )
        previous = entries[-1].entry.log_max_timestamp_ms if entries else None
        entry = dataclasses.replace(entry, log_max_timestamp_ms=_log_max_after(previous, entry, first=not entries))
        entries.append(IndexedBatch(manifest.end_offset, entry))
        report.recovered.append(RecoveredRange(manifest.start_offset, manifest.end_offset, "manifest"))
        expected = manifest.end_offset + 1
    for batch in backed_up if stopped is None else []:
        if batch.end_offset < expected:
            continue  # the chain holds it already (or it lies below the log start)
        uri = batch.entry.ref.data_key
        lost = batch.entry.type is EntryType.LOST  # an earlier rebuild's: no object, still lost
        if batch.start_offset != expected:
            stopped = f"the backup has no entry starting at {expected}"
        elif batch.entry.type is EntryType.COMPACTED and any(e.entry.type is EntryType.WAL for e in entries):
            stopped = f"the backup's COMPACTED entry at {batch.start_offset} follows WAL entries"
        elif not lost and not (uri in compacted if batch.entry.type is EntryType.COMPACTED else evidence.exists(uri)):
            stopped = f"{uri}, which held offsets {batch.start_offset}-{batch.end_offset}, is gone"
        if stopped is not None:
            break
        entries.append(batch)
        expected = batch.end_offset + 1
        if lost:
            report.lost.append(LostRange(batch.start_offset, batch.end_offset,
                                         f"lost before backup {report.backup_id} (an earlier rebuild)"))  # fmt: skip
            continue
        if batch.entry.type is EntryType.COMPACTED:
            publish.append(CompactedRange(topic, partition, batch.start_offset, batch.end_offset, uri,
                                          f"rebuilt-{uuid.uuid4().hex}", batch.entry.created_at_ms,
                                          batch.entry.ref.encoding, batch.entry.ref.times))  # fmt: skip
        source = f"backup {report.backup_id}"
        last = report.recovered[-1] if report.recovered else None
        if last is not None and last.source == source and last.end + 1 == batch.start_offset:
            report.recovered[-1] = RecoveredRange(last.start, batch.end_offset, source)
        else:
            report.recovered.append(RecoveredRange(batch.start_offset, batch.end_offset, source))
    recovered_end = expected - 1

    # 3. the next offset
    known = {recovered_end: "recovered"}
    if snapshot is not None:
        known.setdefault(snapshot.high_watermark, f"the high watermark backup {report.backup_id} recorded")
    for info in evidence.storage.blobs.list(storage.bucket, keys.manifest_prefix):
        span_range = keys.parse_manifest_key(info.key)
        if span_range is not None:
            known.setdefault(span_range[1], f"manifest {info.key}")
    named = {e.entry.ref.data_key for e in entries}
    for uri in compacted:
        if uri not in named:
            try:
                end = int(storage.blobs.head(S3Location.parse(uri)).metadata["llog-end-offset"])
            except (BlobNotFound, KeyError, ValueError):
                continue
            known.setdefault(end, f"compacted object {uri}")
    high = max(known)
    # By slice, not by blob: one blob can hold several slices of the partition, committed separately
    # (llog serve keeps idempotent and conditional groups apart; a request may name a partition twice).
    referenced = {(b.entry.ref.data_key, b.entry.ref.byte_offset) for b in [*entries, *backed_up]}
    oldest = None if backup is None else backup.started_at_ms - grace_ms
    unplaced = [s for s in evidence.wal.get(partition, []) if (s.uri, s.byte_offset) not in referenced
                and (oldest is None or s.created_ms >= oldest)]  # fmt: skip
    report.recovered_end = recovered_end
    report.known_high_watermark = high
    report.unplaced_wal_records = sum(s.msg_count for s in unplaced)
    report.next_offset = high + report.unplaced_wal_records + 1
    if high > recovered_end:
        why = f"committed ({known[high]} names offset {high})"
        report.lost.append(LostRange(recovered_end + 1, high, f"{why}; not recoverable: {stopped or 'no entry'}"))
    if unplaced:
        report.lost.append(LostRange(high + 1, report.next_offset - 1, (
            f"reserved: {report.unplaced_wal_records} record(s) in {len(unplaced)} surviving WAL object(s) that no "
            "recovered entry references may have held these offsets (appends after the last compaction and backup; "
            "S3 does not record their offsets)")))  # fmt: skip
    if stopped is not None and high == recovered_end:
        report.notes.append(f"recovery stopped at {recovered_end}: {stopped}")
    if report.next_offset > recovered_end + 1:  # the lost offsets, as one entry a read reports as RecordsLost
        gone = IndexEntry.lost(report.next_offset - 1 - recovered_end, _now_ms(storage), _log_max_before_lost(entries))
        entries.append(IndexedBatch(report.next_offset - 1, gone))
    state = LogState.OPEN if control is None else control.log_state
    generations = [g.number for g in control.generations] if control is not None else []
    generation = max([CAS_GENERATION + 1, *generations]) + 1
    topic_deleted = control is not None and control.topic_deleted
    return _Plan(keys, report, entries, publish, protocol, state, generation, topic_deleted)


def _log_max_after(previous: int | None, entry: IndexEntry, *, first: bool) -> int | None:
    """``IndexEntry.log_max_timestamp_ms`` for ``entry`` after one whose value is ``previous`` (``first``: at
    the log start): the greatest record timestamp from the log start through its end; None where unknown.

    Given to the rebuilt COMPACTED and LOST entries, so that time lookups still bisect the rebuilt ranges
    and compaction, which extends the value of the entry before a new range, goes on past the lost range.
    """
    if entry.log_max_timestamp_ms is not None:
        return entry.log_max_timestamp_ms
    times = entry.ref.times
    if times is None or (previous is None and not first):
        return None
    return times.max_ms if previous is None else max(previous, times.max_ms)


def _log_max_before_lost(entries: list[IndexedBatch]) -> int | None:
    """The LOST entry's ``log_max_timestamp_ms``: ``_log_max_after`` through the last of ``entries`` (which
    start at the log start), or the least int64 (record timestamps are signed) when there are none, so that
    the first range compacted after it still gets a value (compaction takes the greater of it and its own).
    """
    if not entries:
        return LOG_MAX_NOTHING
    value: int | None = None
    for i, batch in enumerate(entries):
        value = _log_max_after(value, batch.entry, first=i == 0)
    return value


# --- writes ----------------------------------------------------------------------------------


def _write(storage: Storage, plan: _Plan, compactor: Compactor) -> None:
    report = plan.report
    keys = plan.keys
    meta = PartitionMetadata(storage.oxia, keys)
    manifests = ManifestStore(storage.blobs, bucket=storage.bucket, root=storage.root)
    PartitionRegistry(storage.oxia, root=storage.root, clock=storage.clock).register(keys)
    for batch in plan.entries:
        meta.create_index_entry(batch.end_offset, batch.entry)
    for manifest in plan.publish:
        manifests.publish(keys, manifest)
    first_wal = next((b.start_offset for b in plan.entries if b.entry.type is EntryType.WAL), None)
    gap = report.next_offset > report.recovered_end + 1
    meta.replace_cursor(CompactionCursor(report.next_offset if first_wal is None else first_wal), None)
    last = report.next_offset - 1
    control = ControlRecord(plan.state, report.next_offset, log_start_offset=report.log_start_offset,
                            topic_deleted=plan.topic_deleted)  # fmt: skip
    if plan.protocol is AppendProtocol.SEQUENTIAL:
        for number in range(CAS_GENERATION + 1, plan.generation):
            # A writer still holding an old generation lands past this marker and reads meta/control.
            meta.append_to_sequence(number, FenceMarker(f"rebuild-{uuid.uuid4().hex}", _now_ms(storage)).encode(),
                                    FENCE_DELTAS)  # fmt: skip
        sealed = last if plan.state is LogState.FENCED else None
        generations = (Generation(CAS_GENERATION, 0, last), Generation(plan.generation, last, sealed))
        control = control.with_changes(protocol=AppendProtocol.SEQUENTIAL, generations=generations)
    storage.oxia.put(keys.control, control.encode(), partition_key=keys.partition_key, expected_version_id=CREATE_ONLY)
    if first_wal is not None and gap:
        # Compaction moves the cursor over the LOST entry once it reaches it (so does any later run, if this
        # one stops first: the partition is consistent either way).
        compact_until_caught_up(compactor, report.topic, report.partition, budget_s=COMPACTION_BUDGET_S, keys=keys)
        cursor = meta.cursor().offset
        if cursor < report.next_offset:
            report.notes.append(f"the compaction cursor stayed at {cursor}: the next compaction runs on from "
                                f"there and moves it over the lost range to {report.next_offset}")  # fmt: skip


def _now_ms(storage: Storage) -> int:
    return int(storage.clock() * 1000)


def rebuild_topic(
    storage: Storage,
    topic: str,
    *,
    writer_config: WriterConfig | None = None,
    gc_config: GcConfig | None = None,
) -> list[RebuildReport]:
    """Rebuild every partition of ``topic`` that S3 or the newest backup knows (module docstring).

    Raises ``NamespaceNotEmpty`` (nothing written) if the topic has any Oxia
    state. Partitions of an unknown protocol get ``writer_config``'s
    (``LLOG_APPEND_PROTOCOL``); ``gc_config``'s grace bounds which WAL blobs
    may hold offsets past the backup.
    """
    writer_config = writer_config or WriterConfig()
    gc_config = gc_config or GcConfig()
    backups = complete_backups(storage)
    evidence = _Evidence(storage, topic, backups)
    registry_keys = RegistryKeys(storage.root)
    topic_record: TopicRecord | None = None
    record_value: str | None = None
    if evidence.backup is not None:
        record_value = read_catalog(storage, evidence.backup.backup_id).topic_records.get(
            registry_keys.topic(topic)[len(storage.root) + 1 :]
        )
        if record_value is not None:
            topic_record = TopicRecord.decode(topic, record_value.encode(), 0)
    topic_id = evidence.incarnation(topic_record)
    partitions = [partition_keys(topic, p, storage.root, topic_id)
                  for p in evidence.partitions(topic_record, topic_id)]  # fmt: skip
    live = live_keys(storage.oxia, storage.root, topic, partitions)
    if live:
        raise NamespaceNotEmpty(
            f"refusing to rebuild {topic}: Oxia holds {', '.join(live[:5])}{' …' if len(live) > 5 else ''}; "
            "rebuild only runs on a topic with no Oxia state (restore or rebuild into an empty namespace)"
        )
    default = writer_config.append_protocol if topic_record is None else topic_record.config.append_protocol
    plans = [_plan(evidence, p, default, gc_config.grace_ms) for p in partitions]
    compactor = Compactor(storage)
    for plan in plans:
        if evidence.unreadable:
            plan.report.notes.append(f"{len(evidence.unreadable)} WAL object(s) could not be read, and their "
                                     "records are not counted in the unplaced WAL records: check that they hold "
                                     f"none of this partition's: {'; '.join(evidence.unreadable[:3])}")  # fmt: skip
        _write(storage, plan, compactor)
    if record_value is None and topic_id is not None and plans:
        # Partitions in folders named by an id need a record saying so (the next produce would write a legacy
        # one): an implicit topic of that id, with the rebuilt partitions.
        numbers = frozenset(k.partition for k in partitions)
        record_value = TopicRecord(topic, 0, TopicConfig(default), _now_ms(storage), implicit_partitions=numbers,
                                   topic_id=topic_id, keys_include_id=True).encode().decode()  # fmt: skip
    if record_value is not None:  # last, as a create does: the topic is explicit again once its partitions exist
        storage.oxia.put(registry_keys.topic(topic), record_value.encode(), partition_key=registry_keys.partition_key,
                         expected_version_id=CREATE_ONLY)  # fmt: skip
        PartitionRegistry(storage.oxia, root=storage.root, clock=storage.clock).register_again(partitions)
    reports = [plan.report for plan in plans]
    if reports:
        _back_up_rebuilt(storage, topic, reports, keep=len(backups) + 1)
    return reports


def _back_up_rebuilt(storage: Storage, topic: str, reports: list[RebuildReport], *, keep: int) -> None:
    """Back the rebuilt topic up, so its LOST entries and next offsets are in S3 (module docstring, 6).

    It prunes no backup (``keep``: every complete one and this one): the older ones hold the topics
    not rebuilt yet, and the groups and producer ids.
    """
    try:
        backup = back_up_topics(storage, [topic], keep=keep)
    except LlogError as exc:
        failed = f"{exc.error_type}: {exc}"
    else:
        failed = "; ".join(backup.errors)
        for report in reports:
            report.rebuilt_backup_id = backup.backup_id
    if failed:
        note = (f"the backup after the rebuild failed ({failed}): take one (llog backup --topic {topic}) before any "
                "writer starts, or a second loss of Oxia may reuse offsets")  # fmt: skip
        for report in reports:
            report.notes.append(note)
