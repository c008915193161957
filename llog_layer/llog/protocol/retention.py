"""Retention: per-topic limits by age and by size (docs/RETENTION.md). Default: keep everything.

A topic's limits come from its record's config (``llog.protocol.topics``) where
it sets them, else from the deployment's settings (``RetentionConfig``).

Truncation moves a partition's log start (``meta/control.log_start_offset``)
forward past whole compacted ranges, then removes what lies below it:

1. CAS ``meta/control`` to the new log start (only forward). From here reads
   below it are ``OffsetOutOfRange`` and consume reports the new start.
2. Publish the log start next to the manifests (``manifests/log-start.json``)
   and delete the removed ranges' manifests, so manifest readers (the export)
   jump instead of waiting at a gap.
3. ``delete_range`` the index keys below the log start.
4. Delete the removed ranges' compacted objects, those under the partition's
   own ``data/compacted/`` prefix only: a range restored into another root
   names the original root's object, which stays that root's to delete. Shared
   WAL blobs are left to garbage collection, which deletes them once nothing
   references them.

Only COMPACTED ranges (and LOST ones, ``llog.protocol.rebuild``) wholly below
the compaction cursor, and below the start of a running compaction's range
(``meta/compaction``, read after the cursor), are removed, never the
partition's last index entry (the counter must not move back), and never a
WAL entry (those belong to compaction). In a sequential partition
(docs/SEQUENTIAL_APPEND.md) the index is read through ``PartitionIndex`` and
a sealed generation keeps its fence marker, the counter of its sequence. Each step is idempotent and driven
by the log start in ``meta/control``, so a run that dies part-way is finished
by the next one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from llog.config import RetentionConfig, RetentionPolicy
from llog.errors import BlobNotFound, VersionConflict
from llog.format.keys import PartitionKeys, S3Location
from llog.format.kv.document import INITIAL_OFFSET
from llog.format.kv.index import EntryType, IndexedBatch
from llog.protocol.index import PartitionIndex
from llog.protocol.manifest import ManifestStore
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.topics import TopicLayouts
from llog.store.storage import Storage

# What retention removes: compacted ranges, and the LOST entries a rebuild wrote over offsets it could not
# recover (no object; created when the rebuild ran, later than every record before them).
REMOVABLE = frozenset({EntryType.COMPACTED, EntryType.LOST})


def plan_log_start(
    entries: Sequence[IndexedBatch],
    *,
    cursor: int,
    policy: RetentionPolicy,
    now_ms: int,
    size_of: Callable[[IndexedBatch], int],
) -> int | None:
    """The log start ``policy`` asks for, or ``None`` to leave the partition as it is.

    ``entries`` are the partition's index entries from its log start, in
    offset order; ``cursor`` the offset retention stays below: the compaction
    cursor, or the start of a running compaction's range if that is lower
    (``Retention._bound``). The answer is always one past a removable range:
    a COMPACTED (or LOST) entry wholly below ``cursor`` that is not the
    partition's last entry.
    """
    candidates: list[IndexedBatch] = []
    for batch in entries:
        if batch.entry.type not in REMOVABLE or batch.end_offset >= cursor:
            break
        candidates.append(batch)
    if candidates and candidates[-1] is entries[-1]:
        candidates.pop()  # the last entry stays: the counter must never move back
    remove = 0
    if policy.max_age_ms is not None:
        cutoff = now_ms - policy.max_age_ms
        while remove < len(candidates) and candidates[remove].entry.created_at_ms < cutoff:
            remove += 1
    if policy.max_bytes is not None:
        excess = sum(size_of(b) for b in entries) - policy.max_bytes
        dropped = 0
        while dropped < len(candidates) and excess > 0:
            excess -= size_of(candidates[dropped])
            dropped += 1
        remove = max(remove, dropped)
    return candidates[remove - 1].end_offset + 1 if remove else None


def without_stale_keys(entries: Sequence[IndexedBatch]) -> list[IndexedBatch]:
    """``entries`` (in offset order) without the WAL entries a later COMPACTED entry holds.

    Such a WAL entry is a stale key (``PartitionIndex.superseding``): its
    records are the compacted range's, and removing that range removes its key
    too (``delete_below`` deletes key ranges), so it neither stops a plan nor
    counts twice towards a size.
    """
    kept: list[IndexedBatch] = []
    over: IndexedBatch | None = None
    for batch in reversed(entries):
        if batch.entry.type is EntryType.COMPACTED:
            over = batch
        elif batch.entry.type is EntryType.WAL and over is not None and over.start_offset <= batch.start_offset:
            continue
        kept.append(batch)
    return kept[::-1]


def _expired(batch: IndexedBatch, policy: RetentionPolicy, now_ms: int) -> bool:
    """A compacted (or LOST) range older than the policy's age limit (``plan_log_start`` removes such ranges
    only)."""
    return (
        policy.max_age_ms is not None
        and batch.entry.type in REMOVABLE
        and batch.entry.created_at_ms < now_ms - policy.max_age_ms
    )


@dataclass(frozen=True)
class RetentionResult:
    topic: str
    partition: int
    log_start_before: int
    log_start_after: int
    ranges_removed: int = 0
    objects_deleted: int = 0
    bytes_deleted: int = 0


class Retention:
    def __init__(self, storage: Storage, *, config: RetentionConfig | None = None) -> None:
        self.storage = storage
        self.config = config or RetentionConfig()
        self.manifests = ManifestStore(storage.blobs, bucket=storage.bucket, root=storage.root)
        self.layouts = TopicLayouts(storage.oxia, root=storage.root)

    def enforce(self, topic: str, partition: int, policy: RetentionPolicy | None = None) -> RetentionResult:
        """``enforce_partition`` on the partition of the topic's current incarnation."""
        return self.enforce_partition(self.layouts.keys(topic, partition), policy)

    def enforce_partition(self, keys: PartitionKeys, policy: RetentionPolicy | None = None) -> RetentionResult:
        """Apply the topic's policy to one partition, and finish any earlier truncation.

        ``policy`` is the topic's own (its record's config, ``llog.protocol.topics``);
        without one, the configured policy of the topic.

        A partition that keeps everything and was never truncated costs one read
        of ``meta/control``. Otherwise the index is read from its first key (keys
        below the log start are a crashed run's leftovers) only as far as the
        policy needs: without one, up to the log start; with an age limit, up to
        the first entry it keeps, so a run costs what expired since the last one,
        not the length of the log. A size limit needs the size of everything
        kept: the whole index.
        """
        topic, partition = keys.topic, keys.partition
        meta = PartitionMetadata(self.storage.oxia, keys)
        index = PartitionIndex.load(meta)
        before = index.control.log_start_offset
        policy = self.config.policy(topic) if policy is None else policy
        if policy.keeps_everything and before == INITIAL_OFFSET:
            return RetentionResult(topic, partition, before, before)
        now_ms = int(self.storage.clock() * 1000)
        bound = functools.cache(lambda: self._bound(meta))  # read only if a range may go
        entries = without_stale_keys(list(self._scan(index, before=before, policy=policy, bound=bound, now_ms=now_ms)))
        kept = [b for b in entries if b.end_offset >= before]
        target = None
        # An age limit removes nothing unless the first entry is a compacted range old enough.
        if policy.max_bytes is not None or (kept and _expired(kept[0], policy, now_ms)):
            target = plan_log_start(
                kept,
                cursor=bound(),
                policy=policy,
                now_ms=now_ms,
                size_of=self._size_of,
            )
        after = self._advance(meta, target) if target is not None else before
        doomed = [b for b in entries if b.end_offset < after]
        if not doomed:
            return RetentionResult(topic, partition, before, after)
        deleted, nbytes = self._remove(index, after, doomed)
        return RetentionResult(topic, partition, before, after, len(doomed), deleted, nbytes)

    @staticmethod
    def _bound(meta: PartitionMetadata) -> int:
        """The offset retention stays below: the compaction cursor, or a running compaction's start if lower.

        ``meta/compaction`` is read after the cursor. A compaction that records
        itself later starts at or above the cursor read here (or is stale: its
        object is in no index entry, and ``_finish`` drops it), and one that
        finished in between is complete, so every record retention does not see
        names a range it leaves alone anyway. A record left in
        ``UPDATING_CURSOR`` (cursor already past its range) keeps its range
        until a compactor clears it: docs/GC.md's rule, "an object named by a
        running ``meta/compaction`` is left for a later run" (docs/RETENTION.md).
        """
        cursor = meta.cursor().offset
        inflight = meta.compaction()
        return cursor if inflight is None else min(cursor, inflight.start_offset)

    @staticmethod
    def _scan(
        index: PartitionIndex, *, before: int, policy: RetentionPolicy, bound: Callable[[], int], now_ms: int
    ) -> Iterator[IndexedBatch]:
        """The index from its first key, as far as ``plan_log_start`` needs it to decide.

        With a size limit: everything. Otherwise up to the first entry at or past
        the log start ``before`` that stays (without a policy, any; with an age
        limit, one that is not an expired compacted range below ``bound``):
        whatever follows stays too, and that entry shows the ones before it are
        not the partition's last. The first entry alone usually decides (no
        leftover below the log start, nothing expired since the last run): it is
        read with one single-record lookup, since an index read returns the
        server's first batch of entries whatever the limit.
        """
        if policy.max_bytes is not None:
            yield from index.iter(INITIAL_OFFSET)
            return

        def stays(batch: IndexedBatch) -> bool:
            # Below the bound a WAL entry can be a stale key under a compacted range (``without_stale_keys``):
            # read on to see that range.
            return batch.end_offset >= before and (
                policy.keeps_everything
                or not (_expired(batch, policy, now_ms) or batch.entry.type is EntryType.WAL)
                or batch.end_offset >= bound()
            )

        first = index.ceiling(INITIAL_OFFSET)
        if first is not None and stays(first):
            yield first
            return
        for batch in index.iter(INITIAL_OFFSET):
            yield batch
            if stays(batch):
                return

    def _size_of(self, batch: IndexedBatch) -> int:
        entry = batch.entry
        if entry.type is EntryType.LOST:
            return 0  # no object
        if entry.data_bytes is not None:
            return entry.data_bytes
        if entry.ref.byte_length is not None:
            return entry.ref.byte_length  # a slice of a shared WAL blob
        try:  # a compacted entry written before entries recorded their size
            return self.storage.blobs.head(S3Location.parse(entry.ref.data_key)).size
        except BlobNotFound:
            return 0

    def _advance(self, meta: PartitionMetadata, offset: int) -> int:
        """CAS the log start forward to ``offset``; returns the log start now in force."""
        while True:
            current = meta.control()
            if current.record.log_start_offset >= offset:
                return current.record.log_start_offset
            try:
                meta.replace_control(current.record.with_changes(log_start_offset=offset), current.version_id)
                return offset
            except VersionConflict:
                continue  # a writer appended in between: re-read, the log start is ours alone

    def _remove(self, index: PartitionIndex, log_start: int, doomed: list[IndexedBatch]) -> tuple[int, int]:
        keys = index.meta.keys
        compacted = [b for b in doomed if b.entry.type is EntryType.COMPACTED]
        self.manifests.publish_log_start(keys, log_start)
        self.manifests.delete(keys, [(b.start_offset, b.end_offset) for b in compacted])
        # The log start in force may come from another run that read a newer generation table:
        # clear this table's open generation only as far as the entries read through it.
        index.delete_below(log_start, read_through=max(b.end_offset for b in doomed))
        # Only the partition's own objects: entries restored into another root name the original root's
        # objects, which only that root's retention and GC delete (docs/RECOVERY.md, "Back up and restore").
        bucket = self.storage.bucket
        owned = [
            (b, location) for b in compacted
            if (location := S3Location.parse(b.entry.ref.data_key)).bucket == bucket
            and location.key.startswith(keys.compacted_prefix)
        ]  # fmt: skip
        self.storage.blobs.delete(bucket, [location.key for _, location in owned])
        return len(owned), sum(self._size_of(b) for b, _ in owned)
