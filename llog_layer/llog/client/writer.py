"""The append path (docs/PROTOCOL.md, "Append").

``append_shared(groups)`` writes one ``LLS1`` blob holding every group's
batch, then commits each partition on its own, by the protocol the
partition's ``meta/control`` names: a sequential partition with one Oxia
sequential put (``llog.protocol.append_sequential``, docs/SEQUENTIAL_APPEND.md), a CAS
partition as follows:

1. read ``meta/control``; recover a pending append left by another writer;
2. CAS ``meta/control``: advance ``sequence_counter`` and record ``pending``
   (offsets reserved: the append is now logically committed);
3. create the index entry at the batch's end offset (create-only);
4. CAS ``meta/control`` again to clear ``pending``.

Any writer, fence call or compactor that finds a ``pending`` finishes steps
3-4 for it. Index entries are only ever *created* (never overwritten) by the
append path, and a late creator whose entry turns out to sit below a
compacted range removes it again (``_remove_if_stale``), so a writer that
stalls between steps 2 and 3 cannot resurrect a key that compaction deleted.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from llog.config import WriterConfig
from llog.errors import (
    AppendConflict,
    AppendOutcomeUnknown,
    CommitDeadlineExceeded,
    InvalidArgument,
    LlogError,
    LogFenced,
    StorageUnavailable,
    VersionConflict,
)
from llog.format.codec import Record, check_record, encode_batch
from llog.format.documents import ControlRecord, DataRef, EntryType, LogState, PendingAppend
from llog.format.keys import DEFAULT_ROOT_PREFIX, PartitionKeys, S3Location, shared_wal_object_key
from llog.format.wal import PartitionBody, build_shared_blob
from llog.protocol.append_sequential import SequentialAppender, migrated_control
from llog.protocol.faults import FaultHook
from llog.protocol.metadata import PartitionMetadata, VersionedControl
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage

log = logging.getLogger(__name__)

AFTER_BLOB_PUT = "writer.after_blob_put"
AFTER_RESERVE = "writer.after_reserve"
AFTER_INDEX_WRITE = "writer.after_index_write"


@dataclass(frozen=True)
class SharedAppendGroup:
    """Records for one topic-partition inside a shared append."""

    topic: str
    partition: int
    records: Sequence[Record | bytes]


class _ProtocolChanged(Exception):
    """A CAS partition was migrated to the sequential protocol while we were working on it."""

    def __init__(self, control: ControlRecord) -> None:
        super().__init__("the partition now uses the sequential append protocol")
        self.control = control


CommitListener = Callable[[str, int, int, bytes], None]
"""Called as ``(topic, partition, start_offset, batch)`` after each committed group (e.g. a tail cache)."""


def validate_group(group: SharedAppendGroup, root: str = DEFAULT_ROOT_PREFIX) -> PartitionKeys:
    """Check a group's names and records without encoding it; raises ``InvalidArgument``."""
    keys = PartitionKeys(group.topic, group.partition, root)
    if not group.records:
        raise InvalidArgument(f"group {keys.topic}/{keys.partition} has no records")
    for record in group.records:
        check_record(record if isinstance(record, Record) else Record(record))
    return keys


@dataclass(frozen=True)
class AppendResult:
    """Outcome of one group: offsets on success, the error otherwise."""

    topic: str
    partition: int
    count: int
    start_offset: int | None = None
    end_offset: int | None = None
    index_key: str | None = None
    wal_uri: str | None = None
    error: LlogError | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def error_type(self) -> str | None:
        return None if self.error is None else self.error.error_type


class LogWriter:
    """Appends to partitions; safe to share between threads."""

    def __init__(
        self,
        oxia: OxiaStore,
        blobs: BlobStore,
        *,
        bucket: str,
        root: str = DEFAULT_ROOT_PREFIX,
        config: WriterConfig | None = None,
        fault_hook: FaultHook | None = None,
        clock: Callable[[], float] = time.time,
        commit_listener: CommitListener | None = None,
    ) -> None:
        if not bucket:
            raise InvalidArgument("the writer needs an S3 bucket")
        self.oxia = oxia
        self.blobs = blobs
        self.bucket = bucket
        self.root = root
        self.config = config or WriterConfig()
        self._fault_hook = fault_hook
        self._clock = clock
        self._commit_listener = commit_listener
        self._sequential = SequentialAppender(self.config, fault=self._fault, clock=clock)

    @classmethod
    def from_env(cls, *, commit_listener: CommitListener | None = None) -> LogWriter:
        storage = Storage.from_env()
        return cls(
            storage.oxia,
            storage.blobs,
            bucket=storage.bucket,
            root=storage.root,
            config=WriterConfig.from_env(),
            commit_listener=commit_listener,
        )

    def close(self) -> None:
        self.oxia.close()

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _fault(self, point: str) -> None:
        if self._fault_hook is not None:
            self._fault_hook(point)

    def _metadata(self, topic: str, partition: int) -> PartitionMetadata:
        return PartitionMetadata(self.oxia, PartitionKeys(topic, partition, self.root))

    # --- partition lifecycle ---------------------------------------------------

    def initialize_partition(self, topic: str, partition: int) -> bool:
        """Create the partition if absent (``sequence_counter=1``, cursor 1, ``OPEN``).

        New partitions use ``config.append_protocol``; an existing one keeps
        its own. Idempotent; returns True if this call created it.
        """
        return self._metadata(topic, partition).create(self.config.append_protocol)

    def fence(self, topic: str, partition: int) -> ControlRecord:
        """Stop appends. Finishes a pending append first, so it stays readable."""
        return self._set_state(topic, partition, LogState.FENCED)

    def unfence(self, topic: str, partition: int) -> ControlRecord:
        """Reopen a fenced partition for appends."""
        return self._set_state(topic, partition, LogState.OPEN)

    def migrate_to_sequential(self, topic: str, partition: int) -> ControlRecord:
        """Switch a CAS partition to the sequential protocol, one way (docs/SEQUENTIAL_APPEND.md).

        Finishes a pending append, then compare-and-sets ``meta/control``: the
        CAS entries become generation 0 and appends continue in generation 1.
        Every CAS append after this fails its own compare-and-set and moves to
        the sequential path. Idempotent. Needs every writer to run this version.
        """
        meta = self._metadata(topic, partition)
        backoff_ms = float(self.config.cas_backoff_initial_ms)
        for _ in range(self.config.max_cas_attempts):
            current = meta.control()
            if current.record.sequential:
                return current.record
            if current.record.pending is not None:
                self._materialize(meta, current.record.pending, current)
                continue
            migrated = migrated_control(current.record)
            try:
                meta.replace_control(migrated, current.version_id)
            except VersionConflict:
                time.sleep(backoff_ms * (0.5 + random.random()) / 1000)
                backoff_ms = min(backoff_ms * 2, self.config.cas_backoff_max_ms)
                continue
            self._sequential.remember(meta.keys, migrated)
            return migrated
        raise AppendConflict(
            f"gave up migrating {topic}/{partition} after {self.config.max_cas_attempts} "
            "compare-and-set conflicts with concurrent appends"
        )

    def _set_state(self, topic: str, partition: int, state: LogState) -> ControlRecord:
        meta = self._metadata(topic, partition)
        backoff_ms = float(self.config.cas_backoff_initial_ms)
        for _ in range(self.config.max_cas_attempts):
            current = meta.control()
            if current.record.sequential:
                return self._sequential.set_state(meta, state, current)
            if current.record.pending is not None:
                self._materialize(meta, current.record.pending, current)
                continue
            if current.record.log_state is state:
                return current.record
            updated = current.record.with_changes(log_state=state)
            try:
                meta.replace_control(updated, current.version_id)
            except VersionConflict:
                time.sleep(backoff_ms * (0.5 + random.random()) / 1000)
                backoff_ms = min(backoff_ms * 2, self.config.cas_backoff_max_ms)
                continue
            return updated
        raise AppendConflict(
            f"gave up setting {topic}/{partition} to {state.value} after {self.config.max_cas_attempts} "
            "compare-and-set conflicts with concurrent appends"
        )

    def recover_pending(self, topic: str, partition: int) -> bool:
        """Finish a pending append left by a crashed writer; True if there was one."""
        meta = self._metadata(topic, partition)
        current = meta.control()
        if current.record.pending is None:
            return False
        self._materialize(meta, current.record.pending, current)
        return True

    # --- appends ---------------------------------------------------------------

    def append(self, topic: str, partition: int, records: Sequence[Record | bytes]) -> AppendResult:
        """Append to one partition; raises the error instead of returning it."""
        (result,) = self.append_shared([SharedAppendGroup(topic, partition, records)])
        if result.error is not None:
            raise result.error
        return result

    def append_shared(self, groups: Sequence[SharedAppendGroup]) -> list[AppendResult]:
        """Write all groups in one shared WAL blob, then commit each partition.

        Invalid input raises before anything is written. Storage failures are
        reported per group: there is no atomicity across partitions.
        """
        if not groups:
            raise InvalidArgument("append_shared needs at least one group")
        now = self._now_ms()
        bodies = []
        for group in groups:
            keys = validate_group(group, self.root)
            bodies.append(
                PartitionBody(keys.topic, keys.partition, len(group.records), encode_batch(group.records, now_ms=now))
            )
        blob, slices = build_shared_blob(bodies, now_ms=now)
        location = S3Location(self.bucket, shared_wal_object_key(self.root))
        commit_deadline = time.monotonic() + self.config.max_commit_delay_ms / 1000

        try:
            self.blobs.put(location, blob)
        except LlogError as exc:
            return [AppendResult(b.topic, b.partition, b.msg_count, error=exc) for b in bodies]
        self._fault(AFTER_BLOB_PUT)

        results = []
        for s, body in zip(slices, bodies, strict=True):
            ref = DataRef(location.uri, s.encoding, s.byte_offset, s.byte_length)
            meta = self._metadata(s.topic, s.partition)
            try:
                start, end, index_key = self._commit_group(meta, ref, s.msg_count, now, commit_deadline)
            except LlogError as exc:
                results.append(AppendResult(s.topic, s.partition, s.msg_count, error=exc))
            else:
                results.append(AppendResult(s.topic, s.partition, s.msg_count, start, end, index_key, location.uri))
                if self._commit_listener is not None:
                    try:
                        self._commit_listener(s.topic, s.partition, start, body.body)
                    except Exception:  # a cache must never fail a committed append
                        log.exception("commit listener failed for %s/%s", s.topic, s.partition)
        return results

    def _commit_group(
        self, meta: PartitionMetadata, ref: DataRef, count: int, now_ms: int, deadline: float
    ) -> tuple[int, int, str]:
        """Commit one partition's batch by the partition's protocol; ``(start, end, index_key)``.

        A partition known to be sequential costs no read here; otherwise the
        ``meta/control`` read that picks the protocol is the CAS path's first read.
        """
        if self._sequential.knows(meta.keys):
            return self._sequential.commit(meta, ref, count, now_ms, deadline)
        current = meta.control()
        control = current.record
        try:
            if not control.sequential:
                start, end = self._commit(meta, ref, count, now_ms, deadline, current)
                return start, end, meta.keys.index(end)
        except _ProtocolChanged as changed:
            control = changed.control
        return self._sequential.commit(meta, ref, count, now_ms, deadline, control)

    def _commit(
        self,
        meta: PartitionMetadata,
        ref: DataRef,
        count: int,
        now_ms: int,
        deadline: float,
        current: VersionedControl,
    ) -> tuple[int, int]:
        """The CAS protocol: reserve by compare-and-set on ``meta/control``, then materialize."""
        append_id = uuid.uuid4().hex
        backoff_ms = float(self.config.cas_backoff_initial_ms)
        reservation_sent = False
        try:
            for _ in range(self.config.max_cas_attempts):
                control = current.record
                if control.sequential:
                    raise _ProtocolChanged(control)
                if control.log_state is LogState.FENCED:
                    raise LogFenced(meta.keys.topic, meta.keys.partition)
                if control.pending is not None:
                    self._materialize(meta, control.pending, current)
                    current = meta.control()
                    continue
                if time.monotonic() > deadline:
                    raise CommitDeadlineExceeded(
                        f"{self.config.max_commit_delay_ms} ms passed since the WAL blob was written; "
                        f"nothing was committed to {meta.keys.topic}/{meta.keys.partition}"
                    )
                start = control.sequence_counter
                pending = PendingAppend(append_id, start, start + count - 1, count, ref, now_ms)
                reserved = control.with_changes(sequence_counter=pending.end_offset + 1, pending=pending)
                reservation_sent = True
                try:
                    version = meta.replace_control(reserved, current.version_id)
                except VersionConflict as conflict:
                    current = meta.control()
                    if self._reservation_landed(meta, pending, current, ambiguous=conflict.ambiguous):
                        return start, pending.end_offset
                    time.sleep(backoff_ms * (0.5 + random.random()) / 1000)
                    backoff_ms = min(backoff_ms * 2, self.config.cas_backoff_max_ms)
                    continue
                self._fault(AFTER_RESERVE)
                try:
                    self._materialize(meta, pending, VersionedControl(reserved, version))
                except Exception as exc:  # nothing after the commit point may undo it
                    # The reservation is the commit point: the records are readable
                    # through meta/control.pending and the next writer or compactor
                    # materializes them. Reporting failure would invite a duplicate.
                    log.warning("append %s committed but not materialized yet: %s", append_id, exc)
                return start, pending.end_offset
        except StorageUnavailable as exc:
            if not reservation_sent:
                raise
            raise AppendOutcomeUnknown(
                f"lost contact with Oxia while appending to {meta.keys.topic}/{meta.keys.partition}; "
                f"the records may or may not have been committed: {exc}"
            ) from exc
        raise AppendConflict(
            f"gave up reserving offsets on {meta.keys.topic}/{meta.keys.partition} after "
            f"{self.config.max_cas_attempts} compare-and-set conflicts"
        )

    def _reservation_landed(
        self, meta: PartitionMetadata, pending: PendingAppend, current: VersionedControl, *, ambiguous: bool
    ) -> bool:
        """After a CAS conflict: did our reservation apply anyway?

        Only possible when the conflict is ``ambiguous`` (an earlier attempt of
        the same call failed in transit and may have applied). Then either
        ``meta/control`` still holds our pending (we finish it), or another
        writer already finished it at the offsets we asked for.
        """
        mine = current.record.pending
        if mine is not None and mine.append_id == pending.append_id:
            self._materialize(meta, mine, current)
            return True
        if not ambiguous:
            return False
        found = meta.index_entry(pending.end_offset)
        return found is not None and found[0].entry.append_id == pending.append_id

    # --- materialization and recovery -----------------------------------------

    def _materialize(self, meta: PartitionMetadata, pending: PendingAppend, control: VersionedControl) -> None:
        """Create ``pending``'s index entry (if absent) and clear it from ``meta/control``."""
        meta.create_index_entry(pending.end_offset, pending.index_entry())
        self._fault(AFTER_INDEX_WRITE)
        while True:
            try:
                meta.replace_control(control.record.with_changes(pending=None), control.version_id)
                return
            except VersionConflict:
                control = meta.control()
                if control.record.pending is None or control.record.pending.append_id != pending.append_id:
                    break  # someone else finished this append
        # Someone else finished it. The entry at its end offset (ours, or a
        # stalled recoverer's) could be a late duplicate of one compaction has
        # since removed; checking costs reads only on this contended path.
        self._remove_if_stale(meta, pending)

    def _remove_if_stale(self, meta: PartitionMetadata, pending: PendingAppend) -> None:
        found = meta.index_entry(pending.end_offset)
        if found is None:
            return
        batch, version = found
        if batch.entry.type is not EntryType.WAL or batch.entry.append_id != pending.append_id:
            return
        # Read meta/compaction before the cursor: a compaction finishing in
        # between advances the cursor before it clears its record, so one of
        # the two reads sees it.
        compaction = meta.compaction()
        cursor = meta.cursor()
        compacted = cursor.offset > pending.end_offset or (
            compaction is not None and compaction.index_deletions_started and compaction.covers(pending.end_offset)
        )
        if compacted:
            meta.delete_index_entry(pending.end_offset, expected_version_id=version)
