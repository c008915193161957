"""Named crash points, so tests can stop a component between any two storage steps.

A component passes a point's name to its hook between two steps
(``self._fault(COMPACTOR_AFTER_RECORD)``). In production the hook is
``None`` and nothing happens; tests pass a hook that raises at a chosen point
(``tests/faults.py``), and the component's remaining steps never run, as if
its process had died there.

This module is the catalogue of every crash point, grouped by the action
(``llog.protocol``'s table) it interrupts. Each point's docstring says what
has happened when a crash there strikes. The strings are stable: the
reliability harness tallies crashes by them (docs/RELIABILITY.md).
"""

from __future__ import annotations

from collections.abc import Callable

FaultHook = Callable[[str], None]

# --- append, both protocols (docs/PROTOCOL.md, "Append") -------------------------------------

WRITER_AFTER_BLOB_PUT = "writer.after_blob_put"
"""The shared WAL blob is in S3 and nothing references it: no append committed; GC deletes it."""

WRITER_AFTER_DEADLINE_CHECK = "writer.after_deadline_check"
"""The commit deadline was checked; the commit's request (a CAS reservation, a sequential put) is not sent yet.
A process paused here past its claim's takeover sends it late: the takeover has made it fail or void it
(docs/IDEMPOTENCE.md, "Takeover")."""

# --- reserve, CAS protocol (docs/PROTOCOL.md, "Append", step 3.2) ------------------------------

WRITER_AFTER_RESERVE = "writer.after_reserve"
"""``meta/control`` holds this append as ``pending``: committed and readable, not yet in the index."""

# --- materialize, CAS protocol (docs/PROTOCOL.md, "Append", step 3.3) ---------------------------

WRITER_AFTER_INDEX_WRITE = "writer.after_index_write"
"""The index entry exists and ``pending`` is not cleared yet: the next writer, fence or compactor clears it."""

# --- append, sequential protocol (docs/SEQUENTIAL_APPEND.md, "4. Append") -------------------------

WRITER_AFTER_SEQUENCE_PUT = "writer.after_sequence_put"
"""The sequential put landed: a committed entry, or a void one past a fence marker; nothing to finish."""

# --- fence, sequential protocol (docs/SEQUENTIAL_APPEND.md, "5. Fence and unfence") --------------

WRITER_AFTER_FENCE_MARKER = "writer.after_fence_marker"
"""A fence marker is in the open generation, which ``meta/control`` does not show sealed yet."""

# --- idempotent append, both protocols (docs/IDEMPOTENCE.md) --------------------------------------

PRODUCER_AFTER_CLAIM = "producer.after_claim"
"""The producer state claims the batch (``in_flight``); the batch is not committed: a retry takes over later."""

PRODUCER_AFTER_COMMIT = "producer.after_commit"
"""The batch is committed with its producer tag; ``in_flight`` still claims it: a takeover finds the tag."""

# --- compaction (docs/PROTOCOL.md, "Compaction") --------------------------------------------------

COMPACTOR_AFTER_BLOB_PUT = "compactor.after_blob_put"
"""The compacted object is in S3 and nothing references it: GC deletes it."""

COMPACTOR_AFTER_RECORD = "compactor.after_record"
"""``meta/compaction`` exists (``WRITING_COMPACTED_INDEX``): the next ``compact_once`` resumes it."""

COMPACTOR_AFTER_END_KEY = "compactor.after_end_key"
"""The range's end key is COMPACTED (the commit point); the record still says ``WRITING_COMPACTED_INDEX``."""

COMPACTOR_AFTER_MANIFEST = "compactor.after_manifest"
"""The range's manifest is in S3; the lower index keys are still there (``DELETING_OLD``)."""

COMPACTOR_AFTER_DELETE = "compactor.after_delete"
"""The lower index keys are gone; the record still says ``DELETING_OLD``."""

COMPACTOR_AFTER_CURSOR = "compactor.after_cursor"
"""The cursor is past the range; ``meta/compaction`` (``UPDATING_CURSOR``) is not deleted yet."""

# --- topic reclaim (docs/GC.md, "Deleted topics") -------------------------------------------------

RECLAIM_AFTER_LEASE_CHECK = "reclaim.after_lease_check"
"""A reclaim run holds its claim on the deleted record, found it less than half expired, and deletes nothing of
the next partition yet. A run paused here past the claim's lease deletes late: only its own incarnation's keys and
objects, never those of a topic created again under the name (docs/GC.md, "Deleted topics")."""

CRASH_POINTS = frozenset(
    {
        WRITER_AFTER_BLOB_PUT,
        WRITER_AFTER_DEADLINE_CHECK,
        WRITER_AFTER_RESERVE,
        WRITER_AFTER_INDEX_WRITE,
        WRITER_AFTER_SEQUENCE_PUT,
        WRITER_AFTER_FENCE_MARKER,
        PRODUCER_AFTER_CLAIM,
        PRODUCER_AFTER_COMMIT,
        COMPACTOR_AFTER_BLOB_PUT,
        COMPACTOR_AFTER_RECORD,
        COMPACTOR_AFTER_END_KEY,
        COMPACTOR_AFTER_MANIFEST,
        COMPACTOR_AFTER_DELETE,
        COMPACTOR_AFTER_CURSOR,
        RECLAIM_AFTER_LEASE_CHECK,
    }
)
"""Every crash point of every component of the library."""
