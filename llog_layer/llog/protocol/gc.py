"""Garbage collection of S3 objects nothing references any more (docs/GC.md).

Two kinds of garbage:

* **Shared WAL blobs** (``{root}/wal-shared/{id}``) once no partition's index
  or pending append references any slice of them: after compaction has
  rewritten those slices, or because the append that wrote the blob never
  committed (a crash after the PUT).
* **Compacted objects** (``…/data/compacted/{id}``) that no index entry
  references: left by a compaction that died before recording itself, or
  that lost a race.

Each run first checks the namespace identity (``llog.protocol.namespace``):
if Oxia's state was lost or replaced, so that every blob would look
unreferenced, it raises ``NamespaceMismatch`` and deletes nothing. Oxia can
also be lost while a run reads references (a lookup then finds no partition,
which reads as "no reference"), so the steps that delete what they judged
unreferenced (WAL blobs, orphaned compacted objects) check it again,
read-only, after their reads and right before each batch of deletes, and stop
the run with ``NamespaceMismatch`` there. Reclaim and retention delete only
what they removed from Oxia themselves first (a CAS that fails on a lost
Oxia) or what belongs to a topic deleted before. Then it
reclaims deleted topics whose deletion is older than the grace
(``llog.protocol.topics.reclaim_topic``: their Oxia keys, their compacted
objects and manifests, their registry entries, then their topic records),
then applies retention (``llog.protocol.retention``,
docs/RETENTION.md), which deletes the compacted objects of the ranges it
removes itself. A reclaimed partition's WAL slices are unreferenced from then
on, so its shared WAL blobs go with the rest.

Safety rests on one bound: nothing starts referencing an object more than
``max_commit_delay`` after its PUT began (writers and compactors check it
before their first reference, ``CommitDeadlineExceeded``). GC only deletes
objects older than ``grace`` (> max_commit_delay + clock skew), so an object
it finds unreferenced can never become referenced again.

Cost grows with data written, not with the bucket: the WAL prefix only holds
blobs not yet compacted away; compacted objects are judged once, in creation
order (object ids are UUIDv7), from a per-partition watermark in Oxia.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import islice

from llog.config import GcConfig
from llog.errors import BlobNotFound, CorruptData, LlogError, NamespaceMismatch, PartitionNotInitialized
from llog.format.keys import S3Location, object_id_time_ms, shared_wal_prefix
from llog.format.kv.compaction import END_OFFSET_METADATA
from llog.format.kv.index import EntryType
from llog.format.wal import PREAMBLE, BlobSlice, header_length, parse_shared_blob_header
from llog.protocol.faults import FaultHook
from llog.protocol.index import PartitionIndex
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.namespace import check_namespace, verify_namespace
from llog.protocol.producers import ProducerRegistry
from llog.protocol.registry import PartitionRegistry
from llog.protocol.retention import Retention
from llog.protocol.topics import (
    TopicLayouts,
    TopicRecord,
    TopicRegistry,
    keys_ids,
    new_reclaim_run_id,
    reclaim_due,
    reclaim_topic,
)
from llog.store.s3 import BlobStore, ObjectInfo
from llog.store.storage import Storage

log = logging.getLogger(__name__)

HEADER_PROBE_BYTES = 64 * 1024
WAL_CHUNK = 1000  # old WAL blobs judged per round (one S3 listing page)
MAX_WARNINGS = 100  # a report (a Lambda's answer and log line) names at most this many; counters stay exact
PartitionId = tuple[str, int]


@dataclass
class GcReport:
    wal_blobs_seen: int = 0
    wal_blobs_deleted: int = 0
    wal_bytes_deleted: int = 0
    compacted_seen: int = 0
    compacted_deleted: int = 0
    compacted_bytes_deleted: int = 0
    young_skipped: int = 0
    referenced_kept: int = 0
    retention_partitions_truncated: int = 0
    retention_ranges_removed: int = 0
    retention_objects_deleted: int = 0
    retention_bytes_deleted: int = 0
    # Old objects under wal-shared/ whose LLS1 header cannot be read (foreign or damaged): kept, never
    # deleted, and reported as warnings, not errors: they recur every run and do not make it fail.
    wal_unreadable_kept: int = 0
    topics_reclaimed: int = 0
    reclaim_partitions: int = 0
    reclaim_objects_deleted: int = 0
    reclaim_bytes_deleted: int = 0
    producers_expired: int = 0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def deleted(self) -> int:
        return (
            self.wal_blobs_deleted + self.compacted_deleted + self.retention_objects_deleted
            + self.reclaim_objects_deleted
        )  # fmt: skip


def read_blob_slices(blobs: BlobStore, location: S3Location, size: int) -> list[BlobSlice]:
    """The slices a shared WAL blob's LLS1 header names, read with one (rarely two) range GETs.

    ``CorruptData`` if it is not a readable LLS1 blob, ``BlobNotFound`` if it is gone.
    """
    if size < PREAMBLE.size:
        raise CorruptData(f"{location.uri} is {size} bytes, too short for an LLS1 blob")
    probe = blobs.get_range(location, 0, min(HEADER_PROBE_BYTES, size))
    needed = header_length(probe[: PREAMBLE.size])
    if needed > len(probe):
        probe = blobs.get_range(location, 0, needed)
    return parse_shared_blob_header(probe, total_size=size)


class GarbageCollector:
    def __init__(
        self, storage: Storage, *, config: GcConfig | None = None, fault_hook: FaultHook | None = None
    ) -> None:
        self.storage = storage
        self.config = config or GcConfig()
        self._fault_hook = fault_hook
        self._registry = PartitionRegistry(storage.oxia, root=storage.root)
        self._topics = TopicRegistry(storage.oxia, root=storage.root, clock=storage.clock)
        self._layouts = TopicLayouts(storage.oxia, root=storage.root)  # a WAL slice's partition -> its keys
        self.retention = Retention(storage, config=self.config.retention)

    @classmethod
    def from_env(cls) -> GarbageCollector:
        return cls(Storage.from_env(), config=GcConfig.from_env())

    def close(self) -> None:
        self.storage.close()

    def _verify_before_deleting(self, garbage: list[ObjectInfo]) -> None:
        """The namespace check again, once per batch of deletes: the references just read came from the Oxia
        that still holds the identity, not from one lost or replaced meanwhile (``NamespaceMismatch``)."""
        if garbage:
            verify_namespace(self.storage, "Garbage collection stopped before deleting the objects it judged")

    def _cutoff_ms(self) -> int:
        return int(self.storage.clock() * 1000) - self.config.grace_ms

    def _metadata(self, topic: str, partition: int) -> PartitionMetadata:
        return PartitionMetadata(self.storage.oxia, self._layouts.keys(topic, partition))

    def collect(self) -> GcReport:
        """One run. Raises ``NamespaceMismatch``, deleting nothing, if Oxia lost its state
        (``llog.protocol.namespace``)."""
        check_namespace(self.storage)
        report = GcReport()
        topics = self._topics.records()
        self._layouts.learn_all(topics)  # a WAL slice's partition is judged in its topic's current folder
        # Reclaim and retention first: the WAL blobs they free become garbage in the same run.
        self.reclaim_deleted_topics(topics, report)
        self.enforce_retention(report, topics)
        self.collect_wal(report)
        self.collect_compacted(report, topics)
        self.expire_producers(report)
        log.info("gc: %s", report)
        return report

    def expire_producers(self, report: GcReport) -> None:
        """Delete producer ids idle past their expiry (their per-partition states go with compaction)."""
        registry = ProducerRegistry(
            self.storage.oxia, root=self.storage.root, expiry_ms=self.config.producer_expiry_ms,
            clock=self.storage.clock,
        )  # fmt: skip
        try:
            report.producers_expired = registry.expire_idle()
        except LlogError as exc:
            report.errors.append(f"producer ids: {exc}")

    # --- deleted topics --------------------------------------------------------------

    def reclaim_deleted_topics(self, topics: Mapping[str, TopicRecord], report: GcReport) -> None:
        """Reclaim every deleted topic whose deletion is older than the grace (``llog.protocol.topics``)."""
        now_ms = int(self.storage.clock() * 1000)
        run_id = new_reclaim_run_id()  # this run's claim on each topic it reclaims
        for record in topics.values():
            if not reclaim_due(record, now_ms, self.config.grace_ms):
                continue
            try:
                result = reclaim_topic(self.storage, record, run_id=run_id, fault_hook=self._fault_hook)
            except LlogError as exc:
                report.errors.append(f"reclaim {record.topic}: {exc}")
                continue
            report.topics_reclaimed += result.finished
            report.reclaim_partitions += result.partitions_reclaimed
            report.reclaim_objects_deleted += result.objects_deleted
            report.reclaim_bytes_deleted += result.bytes_deleted
            report.warnings.extend(result.deferred[: max(0, MAX_WARNINGS - len(report.warnings))])
            log.info("gc: reclaimed deleted topic %s: %s", record.topic, result)

    # --- retention -----------------------------------------------------------------

    def enforce_retention(self, report: GcReport, topics: Mapping[str, TopicRecord] | None = None) -> None:
        """Every partition: apply its topic's retention and finish truncations a crash left behind.

        ``topics`` are the topic records (read here if not given): an explicit
        topic's config may set its own limits, and a deleted topic is left to reclaim.
        """
        topics = self._topics.records() if topics is None else topics
        for topic, entries in self._registry.entries(current=keys_ids(topics)).items():
            record = topics.get(topic)
            if record is not None and record.deleted:
                continue
            policy = None if record is None else record.config.retention(self.retention.config.policy(topic))
            for entry in entries:  # each registered partition in the folder its entry names
                partition = entry.partition
                try:
                    result = self.retention.enforce_partition(entry.keys(self.storage.root), policy)
                except PartitionNotInitialized:
                    continue  # registered, not created yet (llog.protocol.registry): nothing to retain
                except LlogError as exc:
                    report.errors.append(f"retention {topic}/{partition}: {exc}")
                    continue
                if result.log_start_after > result.log_start_before:
                    report.retention_partitions_truncated += 1
                    log.info("retention: %s/%d log start %d -> %d", topic, partition,
                             result.log_start_before, result.log_start_after)  # fmt: skip
                report.retention_ranges_removed += result.ranges_removed
                report.retention_objects_deleted += result.objects_deleted
                report.retention_bytes_deleted += result.bytes_deleted

    # --- shared WAL blobs --------------------------------------------------------

    def collect_wal(self, report: GcReport) -> None:
        cutoff = self._cutoff_ms()
        references: dict[PartitionId, set[str]] = {}
        garbage: list[ObjectInfo] = []
        old = self._old_wal_blobs(cutoff, report)
        # Headers are read concurrently, a chunk at a time (bounded memory); references
        # are judged here, in order, with one cached Oxia lookup per partition.
        with ThreadPoolExecutor(self.config.read_concurrency, thread_name_prefix="gc-read") as pool:
            while len(garbage) < self.config.max_deletes_per_run:
                chunk = list(islice(old, WAL_CHUNK))
                if not chunk:
                    break
                for obj, partitions in zip(chunk, pool.map(self._blob_partitions_or_error, chunk), strict=True):
                    if isinstance(partitions, BlobNotFound):
                        continue  # deleted since the listing: nothing to judge
                    if isinstance(partitions, CorruptData):
                        # Foreign, or a damaged blob an index may still reference: never delete
                        # what we cannot judge. Kept for an operator, reported as a warning.
                        report.wal_unreadable_kept += 1
                        if len(report.warnings) < MAX_WARNINGS:
                            report.warnings.append(f"{obj.key}: {partitions}")
                        continue
                    uri = S3Location(self.storage.bucket, obj.key).uri
                    if any(uri in self._references(pid, references) for pid in partitions):
                        report.referenced_kept += 1
                        continue
                    garbage.append(obj)
                    if len(garbage) >= self.config.max_deletes_per_run:
                        break
        self._verify_before_deleting(garbage)
        self.storage.blobs.delete(self.storage.bucket, [o.key for o in garbage])
        report.wal_blobs_deleted += len(garbage)
        report.wal_bytes_deleted += sum(o.size for o in garbage)
        if report.wal_unreadable_kept:
            log.warning("gc: kept %d object(s) under %s that are not readable LLS1 blobs (foreign or damaged; "
                        "never deleted, see docs/GC.md), e.g. %s", report.wal_unreadable_kept,
                        shared_wal_prefix(self.storage.root), "; ".join(report.warnings[:3]))  # fmt: skip

    def _old_wal_blobs(self, cutoff: int, report: GcReport) -> Iterator[ObjectInfo]:
        for obj in self.storage.blobs.list(self.storage.bucket, shared_wal_prefix(self.storage.root)):
            report.wal_blobs_seen += 1
            if obj.last_modified_ms > cutoff:
                report.young_skipped += 1
            else:
                yield obj

    def _blob_partitions_or_error(self, obj: ObjectInfo) -> set[PartitionId] | CorruptData | BlobNotFound:
        try:
            return self._blob_partitions(S3Location(self.storage.bucket, obj.key), obj.size)
        except (CorruptData, BlobNotFound) as exc:
            return exc

    def _blob_partitions(self, location: S3Location, size: int) -> set[PartitionId]:
        """The partitions a blob's LLS1 header names."""
        return {(s.topic, s.partition) for s in read_blob_slices(self.storage.blobs, location, size)}

    def _references(self, pid: PartitionId, cache: dict[PartitionId, set[str]]) -> set[str]:
        """Data keys a partition's uncompacted index and pending append reference (once per run)."""
        if pid not in cache:
            meta = self._metadata(*pid)
            try:
                index = PartitionIndex.load(meta)
            except PartitionNotInitialized:
                cache[pid] = set()
                return cache[pid]
            # Read the cursor first: WAL entries below it are gone (or going) and
            # can only be stale duplicates of compacted data. In a sequential
            # partition the scan yields valid entries only: void ones (past a
            # fence) reference nothing.
            cursor = meta.cursor().offset
            keys = {b.entry.ref.data_key for b in index.scan(cursor) if b.entry.type is EntryType.WAL}
            if index.pending is not None:
                keys.add(index.pending.ref.data_key)
            cache[pid] = keys
        return cache[pid]

    # --- orphaned compacted objects ----------------------------------------------

    def collect_compacted(self, report: GcReport, topics: Mapping[str, TopicRecord]) -> None:
        """Every registered partition of a current incarnation (``topics``: the records the run read at its
        start; an incarnation created since is judged next run): its compacted objects no index entry names."""
        cutoff = self._cutoff_ms()
        for topic, entries in self._registry.entries(current=keys_ids(topics)).items():
            for entry in entries:
                meta = PartitionMetadata(self.storage.oxia, entry.keys(self.storage.root))
                try:
                    self._collect_partition(meta, cutoff, report)
                except NamespaceMismatch:
                    raise  # the whole run stops: no other partition's references can be trusted either
                except LlogError as exc:
                    report.errors.append(f"{topic}/{entry.partition}: {exc}")
                if report.deleted >= self.config.max_deletes_per_run:
                    return

    def _collect_partition(self, meta: PartitionMetadata, cutoff: int, report: GcReport) -> None:
        index: PartitionIndex | None = None  # read once, and only if there is something to judge
        snapshot = meta.snapshot()  # the watermark and a running compaction in one read
        after, inflight = snapshot.gc_watermark, snapshot.compaction
        judged: str | None = None
        garbage: list[ObjectInfo] = []
        for obj in self.storage.blobs.list(self.storage.bucket, meta.keys.compacted_prefix, start_after=after):
            report.compacted_seen += 1
            created = object_id_time_ms(obj.key.rsplit("/", 1)[-1])
            if max(obj.last_modified_ms, created or 0) > cutoff:
                report.young_skipped += 1
                break  # keys sort by creation time: everything after is younger still
            location = S3Location(self.storage.bucket, obj.key)
            if inflight is not None and inflight.data_key == location.uri:
                break  # referenced by a running compaction: judge it on a later run
            index = index or PartitionIndex.load(meta)
            if self._compacted_referenced(index, location):
                report.referenced_kept += 1
            else:
                garbage.append(obj)
            judged = obj.key
        self._verify_before_deleting(garbage)
        self.storage.blobs.delete(self.storage.bucket, [o.key for o in garbage])
        report.compacted_deleted += len(garbage)
        report.compacted_bytes_deleted += sum(o.size for o in garbage)
        if judged is not None:
            meta.set_gc_watermark(judged)

    def _compacted_referenced(self, index: PartitionIndex, location: S3Location) -> bool:
        try:
            end = int(self.storage.blobs.head(location).metadata[END_OFFSET_METADATA])
        except BlobNotFound:
            return True  # already gone
        except (KeyError, ValueError):
            return True  # not written by this compactor: never delete what we cannot judge
        found = index.locate(end)
        return found is not None and found.batch.entry.ref.data_key == location.uri
