"""Fence, unfence and the one-way migration to the sequential protocol.

docs/PROTOCOL.md, "Fence and unfence"; docs/SEQUENTIAL_APPEND.md, "5. Fence
and unfence" and "9. Migration from the CAS protocol".

On a CAS partition each finishes a pending append first (so an append whose
reservation landed before the fence stays readable), then compare-and-sets
``meta/control``. A sequential partition is fenced and unfenced by
``SequentialAppender``, which seals and opens generations. All three are
idempotent.
"""

from __future__ import annotations

from llog.config import WriterConfig
from llog.errors import AppendConflict, VersionConflict
from llog.format.documents import ControlRecord, LogState
from llog.protocol import append_cas
from llog.protocol.append_sequential import SequentialAppender, migrated_control
from llog.protocol.faults import FaultHook
from llog.protocol.metadata import PartitionMetadata


def set_state(
    meta: PartitionMetadata,
    state: LogState,
    *,
    config: WriterConfig,
    sequential: SequentialAppender,
    fault_hook: FaultHook | None = None,
) -> ControlRecord:
    """Bring ``meta/control`` to ``state`` by the partition's protocol; the record in force after.

    ``FENCED`` stops appends (reads keep working); ``OPEN`` reopens a fenced partition.
    """
    backoff = config.cas_backoff()
    for _ in range(config.max_cas_attempts):
        current = meta.control()
        if current.record.sequential:
            return sequential.set_state(meta, state, current)
        if current.record.pending is not None:
            append_cas.finish_pending(meta, current.record.pending, current, fault_hook)
            continue
        if current.record.log_state is state:
            return current.record
        updated = current.record.with_changes(log_state=state)
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
