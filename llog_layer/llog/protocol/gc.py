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
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

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
from llog.protocol.registry import PartitionRegistry, RegisteredPartition
from llog.protocol.retention import Retention, RetentionResult
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
WAL_CHUNK = 1000  # WAL blobs judged by their headers per round (one S3 listing page)
DELETE_BATCH = 10_000  # WAL blobs deleted at once, after one namespace check
DELETE_OBJECTS_KEYS = 1000  # keys per S3 DeleteObjects call, its limit
MAX_WARNINGS = 100  # a report (a Lambda's answer and log line) names at most this many; counters stay exact
PartitionId = tuple[str, int]
T = TypeVar("T")


@dataclass
class GcReport:
    wal_blobs_seen: int = 0
    wal_partitions_read: int = 0  # registered partitions whose WAL references were read
    wal_judged_unread: int = 0  # WAL blobs judged unreferenced from the references alone
    wal_headers_read: int = 0  # WAL blobs judged by their headers (written before the namespace's identity)
    wal_referenced_kept: int = 0  # WAL blobs past the grace still referenced (also in referenced_kept)
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


class _WalDeletes:
    """WAL blobs judged unreferenced, deleted while the listing goes on: a batch at a time after one namespace
    check (``GarbageCollector._verify_before_deleting``), in DeleteObjects calls of 1,000 keys sent
    concurrently, at most as many in flight as the pool has threads; up to ``max_deletes_per_run``."""

    def __init__(
        self, storage: Storage, verify: Callable[[list[ObjectInfo]], None], pool: ThreadPoolExecutor, *,
        limit: int, concurrency: int, report: GcReport,
    ) -> None:  # fmt: skip
        self._storage, self._verify, self._pool, self._report = storage, verify, pool, report
        self._limit, self._concurrency = limit, concurrency
        self._batch: list[ObjectInfo] = []
        self._sent = 0
        self._in_flight: deque[tuple[Future[None], list[ObjectInfo]]] = deque()

    @property
    def full(self) -> bool:
        return self._sent + len(self._batch) >= self._limit

    def add(self, garbage: list[ObjectInfo]) -> None:
        self._batch.extend(garbage)
        if len(self._batch) >= DELETE_BATCH:
            self._send()

    def finish(self) -> None:
        self._send()
        while self._in_flight:
            self._wait_oldest()

    def _send(self) -> None:
        batch, self._batch = self._batch[: max(0, self._limit - self._sent)], []
        if not batch:
            return
        self._verify(batch)
        self._sent += len(batch)
        storage = self._storage
        for start in range(0, len(batch), DELETE_OBJECTS_KEYS):
            chunk = batch[start : start + DELETE_OBJECTS_KEYS]
            if len(self._in_flight) >= self._concurrency:
                self._wait_oldest()
            future = self._pool.submit(storage.blobs.delete, storage.bucket, [o.key for o in chunk])
            self._in_flight.append((future, chunk))

    def _wait_oldest(self) -> None:
        future, chunk = self._in_flight.popleft()
        future.result()  # a failed deletion fails the run, as a failed S3 call does anywhere in it
        self._report.wal_blobs_deleted += len(chunk)
        self._report.wal_bytes_deleted += sum(o.size for o in chunk)


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

    def collect(self, *, wal_only: bool = False) -> GcReport:
        """One run; ``wal_only``: the WAL blobs alone (the frequent schedule, docs/GC.md "Schedules"). Raises
        ``NamespaceMismatch``, deleting nothing, if Oxia lost its state (``llog.protocol.namespace``)."""
        namespace = check_namespace(self.storage)
        report = GcReport()
        cutoff = self._cutoff_ms()  # before the topic records are read (collect_wal)
        topics = self._topics.records()
        self._layouts.learn_all(topics)  # a WAL slice's partition is judged in its topic's current folder
        # Reclaim and retention first: the WAL blobs they free become garbage in the same run.
        if not wal_only:
            self.reclaim_deleted_topics(topics, report)
        # One listing of the registry, after reclaim removed its topics' entries; a partition registered
        # since is new (its blobs and objects are younger than the cutoff) and judged next run.
        partitions = self._registered(topics)
        if not wal_only:
            self.enforce_retention(report, topics, partitions)
        # A grace after the identity: every writer registers (an upgrade from before the registry is rolled
        # out) and clock skew between the collector that created it and the writers is covered (collect_wal).
        registered_since = namespace.created_at_ms + self.config.grace_ms
        self.collect_wal(report, partitions, cutoff=cutoff, registered_since_ms=registered_since)
        if wal_only:
            log.info("gc (WAL blobs): %s", report)
            return report
        self.collect_compacted(report, partitions)
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

    def enforce_retention(
        self, report: GcReport, topics: Mapping[str, TopicRecord], partitions: list[RegisteredPartition]
    ) -> None:
        """Every partition: apply its topic's retention and finish truncations a crash left behind
        (``read_concurrency`` partitions at a time).

        ``topics`` are the topic records: an explicit topic's config may set its own limits, and a deleted
        topic is left to reclaim.
        """

        def retain(entry: RegisteredPartition) -> RetentionResult | None:
            record = topics.get(entry.topic)
            policy = None if record is None else record.config.retention(self.retention.config.policy(entry.topic))
            try:
                return self.retention.enforce_partition(entry.keys(self.storage.root), policy)
            except PartitionNotInitialized:
                return None  # registered, not created yet (llog.protocol.registry): nothing to retain

        live = [e for e in partitions if (record := topics.get(e.topic)) is None or not record.deleted]
        for entry, result in self._each_partition(live, retain):
            if isinstance(result, LlogError):
                report.errors.append(f"retention {entry.topic}/{entry.partition}: {result}")
                continue
            if result is None:
                continue
            if result.log_start_after > result.log_start_before:
                report.retention_partitions_truncated += 1
                log.info("retention: %s/%d log start %d -> %d", entry.topic, entry.partition,
                         result.log_start_before, result.log_start_after)  # fmt: skip
            report.retention_ranges_removed += result.ranges_removed
            report.retention_objects_deleted += result.objects_deleted
            report.retention_bytes_deleted += result.bytes_deleted

    def _registered(self, topics: Mapping[str, TopicRecord]) -> list[RegisteredPartition]:
        """Every registered partition of the topics' current incarnations (deleted topics' included)."""
        return [e for found in self._registry.entries(current=keys_ids(topics)).values() for e in found]

    def _each_partition(
        self, entries: list[RegisteredPartition], work: Callable[[RegisteredPartition], T]
    ) -> Iterator[tuple[RegisteredPartition, T | LlogError]]:
        """``work`` on each of ``entries``, ``read_concurrency`` at a time; each result (or the ``LlogError``
        it raised) in their order."""

        def run(entry: RegisteredPartition) -> T | LlogError:
            try:
                return work(entry)
            except LlogError as exc:
                return exc

        pool = ThreadPoolExecutor(self.config.read_concurrency, thread_name_prefix="gc-partitions")
        try:
            yield from zip(entries, pool.map(run, entries), strict=True)
        finally:
            pool.shutdown(cancel_futures=True)  # a caller that stops early (NamespaceMismatch) waits for no more

    # --- shared WAL blobs --------------------------------------------------------

    def collect_wal(
        self, report: GcReport, partitions: list[RegisteredPartition], *, cutoff: int, registered_since_ms: int
    ) -> None:
        """Delete the shared WAL blobs written before ``cutoff`` that no partition references (docs/GC.md).

        First the references of every registered partition (``partitions``) are read, then ``wal-shared/``
        is listed in key order, which is creation order (UUIDv7), up to the first blob written after ``cutoff``.
        A blob written since ``registered_since_ms`` (a grace after the namespace's identity: every partition
        that can reference it is registered) is judged against those references alone, without being read. An
        older one, or one whose name is no UUIDv7, may belong to a partition made before the registry existed
        and not initialized since (docs/PROTOCOL.md, "Initialize"), so its header is read and the partitions it
        names are checked.

        ``cutoff`` was taken before the topic records were read: a topic created since (so missing from
        ``partitions``) only references blobs written after its creation, which are younger than the cutoff.
        """
        by_partition = self._wal_references(partitions, report)
        if by_partition is None:
            return  # a partition's references could not be read: nothing is judged unreferenced this run
        referenced = set().union(*by_partition.values())
        by_header: list[ObjectInfo] = []  # to judge by their headers, a chunk at a time
        header_partitions = dict(by_partition)  # and those headers name that the registry does not list
        with ThreadPoolExecutor(self.config.read_concurrency, thread_name_prefix="gc-wal") as pool:
            deletes = _WalDeletes(
                self.storage, self._verify_before_deleting, pool, limit=self.config.max_deletes_per_run,
                concurrency=self.config.read_concurrency, report=report,
            )  # fmt: skip
            for obj in self._old_wal_blobs(cutoff, report):
                created = object_id_time_ms(obj.key.rsplit("/", 1)[-1])
                if created is None or created < registered_since_ms:
                    by_header.append(obj)
                    if len(by_header) >= WAL_CHUNK:
                        deletes.add(self._judged_by_header(by_header, pool, referenced, header_partitions, report))
                        by_header = []
                elif S3Location(self.storage.bucket, obj.key).uri in referenced:
                    report.referenced_kept += 1
                    report.wal_referenced_kept += 1
                else:
                    report.wal_judged_unread += 1
                    deletes.add([obj])
                if deletes.full:
                    break
            deletes.add(self._judged_by_header(by_header, pool, referenced, header_partitions, report))
            deletes.finish()
        if report.wal_unreadable_kept:
            log.warning("gc: kept %d object(s) under %s that are not readable LLS1 blobs (foreign or damaged; "
                        "never deleted, see docs/GC.md), e.g. %s", report.wal_unreadable_kept,
                        shared_wal_prefix(self.storage.root), "; ".join(report.warnings[:3]))  # fmt: skip

    def _wal_references(
        self, partitions: list[RegisteredPartition], report: GcReport
    ) -> dict[PartitionId, set[str]] | None:
        """The WAL data keys each partition references (its index from the compaction cursor and its pending
        append), read ``read_concurrency`` partitions at a time; None if one could not be read.

        Deleted topics not reclaimed yet count: their indexes still name their blobs. Each partition is read
        once: a pending append it materializes meanwhile was read as pending (``_partition_references``).
        """
        referenced: dict[PartitionId, set[str]] = {}
        failed: list[str] = []

        def read(entry: RegisteredPartition) -> set[str]:
            return self._partition_references(PartitionMetadata(self.storage.oxia, entry.keys(self.storage.root)))

        for entry, keys in self._each_partition(partitions, read):
            if isinstance(keys, LlogError):
                failed.append(f"WAL references of {entry.topic}/{entry.partition}: {keys}")
            else:
                report.wal_partitions_read += 1
                referenced[entry.topic, entry.partition] = keys
        if failed:
            report.errors.extend(failed)
            return None
        return referenced

    def _judged_by_header(
        self,
        chunk: list[ObjectInfo],
        pool: ThreadPoolExecutor,
        referenced: set[str],
        header_partitions: dict[PartitionId, set[str]],
        report: GcReport,
    ) -> list[ObjectInfo]:
        """The blobs of ``chunk`` that no partition their headers name references (headers read concurrently)."""
        garbage: list[ObjectInfo] = []
        for obj, partitions in zip(chunk, pool.map(self._blob_partitions_or_error, chunk), strict=True):
            if isinstance(partitions, BlobNotFound):
                continue  # deleted since the listing: nothing to judge
            report.wal_headers_read += 1
            if isinstance(partitions, CorruptData):
                # Foreign, or a damaged blob an index may still reference: never delete
                # what we cannot judge. Kept for an operator, reported as a warning.
                report.wal_unreadable_kept += 1
                if len(report.warnings) < MAX_WARNINGS:
                    report.warnings.append(f"{obj.key}: {partitions}")
                continue
            uri = S3Location(self.storage.bucket, obj.key).uri
            # A partition the registry lists was read already; one it does not (made before the
            # registry existed) is read here, in its topic's current folder.
            if uri in referenced or any(uri in self._references(pid, header_partitions) for pid in partitions):
                report.referenced_kept += 1
                report.wal_referenced_kept += 1
            else:
                garbage.append(obj)
        return garbage

    def _old_wal_blobs(self, cutoff: int, report: GcReport) -> Iterator[ObjectInfo]:
        """``wal-shared/`` in key order up to the first blob created after ``cutoff`` (UUIDv7 keys sort by
        creation time: the rest are younger still), those S3 says were written by ``cutoff``."""
        for obj in self.storage.blobs.list(self.storage.bucket, shared_wal_prefix(self.storage.root)):
            report.wal_blobs_seen += 1
            created = object_id_time_ms(obj.key.rsplit("/", 1)[-1])
            if created is not None and created > cutoff:
                report.young_skipped += 1
                return
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
        """Data keys a partition named by a blob's header references, in its topic's current folder (once per run)."""
        if pid not in cache:
            cache[pid] = self._partition_references(self._metadata(*pid))
        return cache[pid]

    @staticmethod
    def _partition_references(meta: PartitionMetadata) -> set[str]:
        """Data keys a partition's uncompacted index and pending append reference."""
        try:
            index = PartitionIndex.load(meta)  # meta/control, with the pending append: before the scan below
        except PartitionNotInitialized:
            return set()
        # A pending append materialized after the read above is in the scan. WAL entries below the
        # cursor are gone (or going) and can only be stale duplicates of compacted data. In a sequential
        # partition the scan yields valid entries only: void ones (past a fence) reference nothing.
        cursor = meta.cursor().offset
        keys = {b.entry.ref.data_key for b in index.scan(cursor) if b.entry.type is EntryType.WAL}
        if index.pending is not None:
            keys.add(index.pending.ref.data_key)
        return keys

    # --- orphaned compacted objects ----------------------------------------------

    def collect_compacted(self, report: GcReport, partitions: list[RegisteredPartition]) -> None:
        """Every registered partition (of the incarnations whose records the run read at its start; one
        created since is judged next run): its compacted objects no index entry names."""
        cutoff = self._cutoff_ms()

        def collect(entry: RegisteredPartition) -> GcReport:
            found = GcReport()  # this partition's counts, added to the run's below
            if report.deleted < self.config.max_deletes_per_run:  # read while other partitions' counts come in
                meta = PartitionMetadata(self.storage.oxia, entry.keys(self.storage.root))
                self._collect_partition(meta, cutoff, found)
            return found

        for entry, found in self._each_partition(partitions, collect):
            if isinstance(found, NamespaceMismatch):
                raise found  # the whole run stops: no other partition's references can be trusted either
            if isinstance(found, LlogError):
                report.errors.append(f"{entry.topic}/{entry.partition}: {found}")
                continue
            for counter in ("compacted_seen", "compacted_deleted", "compacted_bytes_deleted", "young_skipped",
                            "referenced_kept"):  # fmt: skip
                setattr(report, counter, getattr(report, counter) + getattr(found, counter))

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
