"""Fence, unfence, the one-way migration to the sequential protocol, and voiding late commits.

docs/PROTOCOL.md, "Fence and unfence"; docs/SEQUENTIAL_APPEND.md, "5. Fence
and unfence", "Roll" and "9. Migration from the CAS protocol";
docs/IDEMPOTENCE.md, "Takeover".

On a CAS partition each finishes a pending append first (so an append whose
reservation landed before the fence stays readable), then compare-and-sets
``meta/control``. A sequential partition is fenced, unfenced and rolled by
``SequentialAppender``, which seals and opens generations. All four are
idempotent.

The fence of a topic's delete (``topic_deleted``) also marks ``meta/control``
as its deleted topic's, in the same compare-and-set (or seal), and keeps at it
until the record in force is fenced and marked: an unfence whose
compare-and-set raced it either lost (and refuses the marked record it reads
again, ``UnknownTopic``) or won and is fenced again. Nothing clears the mark:
migration and voiding late commits rewrite the record with it, and neither
unfences (docs/PROTOCOL.md, "Fence and unfence").
"""

from __future__ import annotations

from llog.config import WriterConfig
from llog.errors import AppendConflict, InvalidArgument, VersionConflict
from llog.format.kv.control import ControlRecord, LogState
from llog.protocol import append_cas
from llog.protocol.append_sequential import SequentialAppender, migrated_control, refuse_deleted
from llog.protocol.faults import FaultHook
from llog.protocol.metadata import PartitionMetadata


def set_state(
    meta: PartitionMetadata,
    state: LogState,
    *,
    config: WriterConfig,
    sequential: SequentialAppender,
    fault_hook: FaultHook | None = None,
    topic_deleted: bool = False,
) -> ControlRecord:
    """Bring ``meta/control`` to ``state`` by the partition's protocol; the record in force after.

    ``FENCED`` stops appends (reads keep working); with ``topic_deleted`` (a topic's delete) it also marks
    the partition as its deleted topic's. ``OPEN`` reopens a fenced partition; ``UnknownTopic`` for a
    marked one.
    """
    if topic_deleted and state is not LogState.FENCED:
        raise InvalidArgument("only a fence marks a partition as its deleted topic's")
    backoff = config.cas_backoff()
    for _ in range(config.max_cas_attempts):
        current = meta.control()
        if state is LogState.OPEN:
            refuse_deleted(meta, current.record)
        if current.record.sequential:
            return sequential.set_state(meta, state, current, topic_deleted=topic_deleted)
        if current.record.pending is not None:
            append_cas.finish_pending(meta, current.record.pending, current, fault_hook)
            continue
        marked = current.record.topic_deleted or topic_deleted
        if current.record.log_state is state and marked == current.record.topic_deleted:
            return current.record
        updated = current.record.with_changes(log_state=state, topic_deleted=marked)
        try:
            meta.replace_control(updated, current.version_id)
        except VersionConflict:
            backoff.wait()
            continue
        return updated
    raise AppendConflict(
        f"gave up setting {meta.keys.topic}/{meta.keys.partition} to {state.value} after "
        f"{config.max_cas_attempts} compare-and-set conflicts with concurrent appends"
    )


def migrate_to_sequential(
    meta: PartitionMetadata,
    *,
    config: WriterConfig,
    sequential: SequentialAppender,
    fault_hook: FaultHook | None = None,
) -> ControlRecord:
    """Switch a CAS partition to the sequential protocol, one way (docs/SEQUENTIAL_APPEND.md, section 9).

    Finishes a pending append, then compare-and-sets ``meta/control``: the
    CAS entries become generation 0 and appends continue in generation 1.
    Every CAS append after this fails its own compare-and-set and moves to
    the sequential path. Idempotent. Needs every writer to run this version.
    """
    backoff = config.cas_backoff()
    for _ in range(config.max_cas_attempts):
        current = meta.control()
        if current.record.sequential:
            return current.record
        if current.record.pending is not None:
            append_cas.finish_pending(meta, current.record.pending, current, fault_hook)
            continue
        migrated = migrated_control(current.record)
        try:
            meta.replace_control(migrated, current.version_id)
        except VersionConflict:
            backoff.wait()
            continue
        sequential.remember(meta.keys, migrated)
        return migrated
    raise AppendConflict(
        f"gave up migrating {meta.keys.topic}/{meta.keys.partition} after {config.max_cas_attempts} "
        "compare-and-set conflicts with concurrent appends"
    )


def void_late_commits(
    meta: PartitionMetadata,
    *,
    config: WriterConfig,
    sequential: SequentialAppender,
    fault_hook: FaultHook | None = None,
) -> None:
    """Make every commit request of an append that read the partition before this call fail or be void.

    An append reads ``meta/control`` (CAS) or its open generation
    (sequential), then checks its commit deadline, then sends its request; a
    process paused between the check and the send sends it late. After this
    returns, such a request is refused: a CAS reservation names a version of
    ``meta/control`` that this replaced (a compare-and-set of the record onto
    itself, after finishing a pending append, which stays committed), so its
    writer reads again and meets its deadline; a sequential put lands past a
    roll's marker, void, and its writer re-targets only after checking its
    deadline again (``SequentialAppender.roll``). The log stays open for
    everyone else. A claim's takeover runs it before it looks for the claim's
    batch (docs/IDEMPOTENCE.md, "Takeover").
    """
    backoff = config.cas_backoff()
    for _ in range(config.max_cas_attempts):
        current = meta.control()
        if current.record.sequential:
            sequential.roll(meta, current)
            return
        if current.record.pending is not None:
            append_cas.finish_pending(meta, current.record.pending, current, fault_hook)
            continue
        try:
            meta.replace_control(current.record, current.version_id)  # the same record at a new version
        except VersionConflict:
            backoff.wait()
            continue
        return
    raise AppendConflict(
        f"gave up voiding late commits to {meta.keys.topic}/{meta.keys.partition} after "
        f"{config.max_cas_attempts} compare-and-set conflicts with concurrent appends"
    )
