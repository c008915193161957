"""The CAS append protocol (docs/PROTOCOL.md, "Append"), one function per step.

A partition whose ``meta/control`` names the CAS protocol commits a batch
(already in a WAL blob) like this (``CasCommitter.commit``, one of the two
``llog.protocol.commit.Committer``):

1. read ``meta/control``; ``recover_pending``: finish a pending append left
   by another writer, then start over; check the commit deadline (after every
   read, before every reservation: a reservation sent late anyway names a
   version an idempotent producer's takeover has replaced, docs/IDEMPOTENCE.md);
2. ``reserve``: CAS ``meta/control`` to advance ``sequence_counter`` past the
   batch and record it as ``pending`` (the commit point: the records are
   readable through ``pending`` from here on);
3. ``materialize``: create the index entry at the batch's end offset (create-only);
4. ``clear_pending``: CAS ``meta/control`` again to clear ``pending``.

Any writer, fence or compactor that finds a ``pending`` finishes steps 3-4
for it (``finish_pending``). Index entries are only ever *created* (never
overwritten) by the append path, and a late creator whose entry turns out to
sit below a compacted range removes it again (``remove_stale``), so a writer
that stalls between steps 2 and 3 cannot resurrect a key that compaction
deleted (docs/PROTOCOL.md, "Why index entries are only ever created, and the
stale-key check").
"""

from __future__ import annotations

import logging
import time
import uuid

from llog.config import WriterConfig
from llog.errors import (
    AppendConflict,
    AppendOutcomeUnknown,
    CommitDeadlineExceeded,
    LogFenced,
    OffsetMismatch,
    StorageUnavailable,
    VersionConflict,
)
from llog.format.kv.control import LogState, PendingAppend
from llog.format.kv.index import EntryType
from llog.protocol.commit import BatchCommit, Committed, ProtocolChanged
from llog.protocol.faults import (
    WRITER_AFTER_DEADLINE_CHECK,
    WRITER_AFTER_INDEX_WRITE,
    WRITER_AFTER_RESERVE,
    FaultHook,
)
from llog.protocol.metadata import PartitionMetadata, VersionedControl

log = logging.getLogger(__name__)


def _reach(fault_hook: FaultHook | None, point: str) -> None:
    if fault_hook is not None:
        fault_hook(point)


# --- the append --------------------------------------------------------------------------------


class CasCommitter:
    """The CAS protocol's commit of one partition's batch (``llog.protocol.commit.Committer``)."""

    def __init__(self, config: WriterConfig, fault_hook: FaultHook | None = None) -> None:
        self.config = config
        self._fault_hook = fault_hook

    def commit(self, batch: BatchCommit, current: VersionedControl | None = None) -> Committed:
        """Reserve the batch's offsets, then materialize it; ``(start, end, index_key)``.

        ``current`` is a just-read ``meta/control`` (read here without it). Raises ``ProtocolChanged`` if
        the partition turns out to be sequential. ``batch.producer`` tags the batch
        (``llog.protocol.producers``). With ``batch.expected_offset`` the batch is reserved only if it
        gets that start offset (checked against the record the reservation's compare-and-set replaces),
        else ``OffsetMismatch`` and nothing is written.
        """
        meta, count, expected_offset = batch.meta, batch.count, batch.expected_offset
        config, fault_hook = self.config, self._fault_hook
        current = meta.control() if current is None else current
        append_id = uuid.uuid4().hex
        backoff = config.cas_backoff()
        reservation_sent = False
        try:
            for _ in range(config.max_cas_attempts):
                control = current.record
                if control.sequential:
                    raise ProtocolChanged(current)
                if control.log_state is LogState.FENCED:
                    raise LogFenced(meta.keys.topic, meta.keys.partition)
                if control.pending is not None:
                    finish_pending(meta, control.pending, current, fault_hook)
                    current = meta.control()
                    continue
                if time.monotonic() > batch.deadline:
                    raise CommitDeadlineExceeded(
                        f"{config.max_commit_delay_ms} ms passed since the WAL blob was written; "
                        f"nothing was committed to {meta.keys.topic}/{meta.keys.partition}"
                    )
                start = control.sequence_counter
                if expected_offset is not None and start != expected_offset:
                    raise OffsetMismatch(meta.keys.topic, meta.keys.partition, expected_offset, start)
                pending = PendingAppend(
                    append_id, start, start + count - 1, count, batch.ref, batch.now_ms, producer=batch.producer
                )
                _reach(fault_hook, WRITER_AFTER_DEADLINE_CHECK)
                reservation_sent = True
                try:
                    reserved = reserve(meta, current, pending)
                except VersionConflict as conflict:
                    current = meta.control()
                    if reservation_landed(meta, pending, current, ambiguous=conflict.ambiguous, fault_hook=fault_hook):
                        return start, pending.end_offset, meta.keys.index(pending.end_offset)
                    backoff.wait()
                    continue
                _reach(fault_hook, WRITER_AFTER_RESERVE)
                try:
                    finish_pending(meta, pending, reserved, fault_hook)
                except Exception as exc:  # nothing after the commit point may undo it
                    # The reservation is the commit point: the records are readable
                    # through meta/control.pending and the next writer or compactor
                    # materializes them. Reporting failure would invite a duplicate.
                    log.warning("append %s committed but not materialized yet: %s", append_id, exc)
                return start, pending.end_offset, meta.keys.index(pending.end_offset)
        except StorageUnavailable as exc:
            if not reservation_sent:
                raise
            raise AppendOutcomeUnknown(
                f"lost contact with Oxia while appending to {meta.keys.topic}/{meta.keys.partition}; "
                f"the records may or may not have been committed: {exc}"
            ) from exc
        raise AppendConflict(
            f"gave up reserving offsets on {meta.keys.topic}/{meta.keys.partition} after "
            f"{config.max_cas_attempts} compare-and-set conflicts"
        )


# --- reserve (the commit point) ------------------------------------------------------------------


def reserve(meta: PartitionMetadata, current: VersionedControl, pending: PendingAppend) -> VersionedControl:
    """CAS ``meta/control`` from ``current``: ``sequence_counter`` past ``pending``, which it records.

    Raises ``VersionConflict`` when another writer changed the record first.
    """
    reserved = current.record.with_changes(sequence_counter=pending.end_offset + 1, pending=pending)
    return VersionedControl(reserved, meta.replace_control(reserved, current.version_id))


def reservation_landed(
    meta: PartitionMetadata,
    pending: PendingAppend,
    current: VersionedControl,
    *,
    ambiguous: bool,
    fault_hook: FaultHook | None = None,
) -> bool:
    """After a lost ``reserve``: did our reservation apply anyway? (docs/PROTOCOL.md, "Ambiguous failures")

    Only possible when the conflict is ``ambiguous`` (an earlier attempt of
    the same call failed in transit and may have applied). Then either
    ``meta/control`` still holds our pending (we finish it), or another
    writer already finished it at the offsets we asked for: the WAL entry
    there is ours. When what now holds our end offset cannot tell (a
    compaction rewrote or removed the entry, retention removed it), the
    answer is ``AppendOutcomeUnknown``: reserving again could commit the batch
    twice. ``current`` is ``meta/control`` read after the conflict.
    """
    record = current.record
    held = record.pending
    if held is not None and held.append_id == pending.append_id:
        finish_pending(meta, held, current, fault_hook)
        return True
    if not ambiguous or record.sequence_counter <= pending.end_offset:
        return False  # had it applied, the counter would be past our end offset for good (I1)
    if held is not None and held.start_offset <= pending.end_offset <= held.end_offset:
        return False  # another append's reservation holds our end offset
    covering = meta.index_ceiling(pending.end_offset)
    if covering is not None and covering.start_offset <= pending.end_offset and covering.entry.type is EntryType.WAL:
        return covering.entry.append_id == pending.append_id
    raise AppendOutcomeUnknown(
        f"lost the answer to a reservation on {meta.keys.topic}/{meta.keys.partition} whose offsets "
        f"{pending.start_offset}..{pending.end_offset} have been compacted or removed since; "
        "the records may or may not have been committed"
    )


# --- materialize, clear pending, and the stale check ---------------------------------------------


def finish_pending(
    meta: PartitionMetadata, pending: PendingAppend, control: VersionedControl, fault_hook: FaultHook | None = None
) -> None:
    """Materialize ``pending`` and clear it from ``control`` (as read); whoever's append it is."""
    materialize(meta, pending)
    _reach(fault_hook, WRITER_AFTER_INDEX_WRITE)
    if not clear_pending(meta, pending, control):
        # Someone else finished it. The entry at its end offset (ours, or a
        # stalled recoverer's) could be a late duplicate of one compaction has
        # since removed; checking costs reads only on this contended path.
        remove_stale(meta, pending)


def materialize(meta: PartitionMetadata, pending: PendingAppend) -> None:
    """Create ``pending``'s index entry at its end offset, only if that key is absent."""
    meta.create_index_entry(pending.end_offset, pending.index_entry())


def clear_pending(meta: PartitionMetadata, pending: PendingAppend, control: VersionedControl) -> bool:
    """CAS ``meta/control`` to ``pending = null``; False if someone else already finished ``pending``."""
    while True:
        try:
            meta.replace_control(control.record.with_changes(pending=None), control.version_id)
            return True
        except VersionConflict:
            control = meta.control()
            if control.record.pending is None or control.record.pending.append_id != pending.append_id:
                return False


def remove_stale(meta: PartitionMetadata, pending: PendingAppend) -> None:
    """Delete ``pending``'s WAL entry if compaction has already covered its offsets.

    The delete is conditional on the version read, so it never removes a
    COMPACTED rewrite of the same key.
    """
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


# --- recovery ----------------------------------------------------------------------------------


def recover_pending(meta: PartitionMetadata, fault_hook: FaultHook | None = None) -> bool:
    """Finish a pending append left by a crashed writer; True if there was one.

    The compactor runs it before it selects a run, so no committed batch is
    skipped. Writers and fences finish a pending they meet in the record they
    just read (``finish_pending``).
    """
    current = meta.control()
    if current.record.pending is None:
        return False
    finish_pending(meta, current.record.pending, current, fault_hook)
    return True
