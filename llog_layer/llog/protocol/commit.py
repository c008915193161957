"""One partition's batch to commit, and the interface both append protocols implement.

The append (``llog.protocol.append``) writes the WAL blob, then hands each partition's batch to the
protocol its ``meta/control`` names (docs/PROTOCOL.md, "Append"; docs/SEQUENTIAL_APPEND.md): a
:class:`BatchCommit` to ``append_cas.CasCommitter`` or ``append_sequential.SequentialAppender``, both a
:class:`Committer`. Each returns the batch's ``(start, end, index_key)``. The CAS protocol raises
:class:`ProtocolChanged` when the control record it reads names the sequential protocol (the partition
was migrated while the append worked on it; migration goes one way), and the append hands the batch on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from llog.errors import LlogError
from llog.format.kv.document import DataRef
from llog.format.kv.index import ProducerTag
from llog.protocol.metadata import PartitionMetadata, VersionedControl


@dataclass(frozen=True)
class BatchCommit:
    """One partition's batch, in the WAL blob already, to be given its offsets."""

    meta: PartitionMetadata
    ref: DataRef  # where the batch is (and, small enough, the batch itself)
    count: int
    now_ms: int  # the append's time: the entry's and the pending record's
    deadline: float  # time.monotonic() after which nothing may be committed (the WAL blob's GC grace)
    producer: ProducerTag | None = None  # an idempotent producer's tag (llog.protocol.producers)
    expected_offset: int | None = None  # a conditional append: committed only at this start offset


Committed = tuple[int, int, str]
"""``(start, end, index_key)`` of a committed batch."""

CommitOutcome = Committed | LlogError
"""A committed batch, or why it was not committed."""


class Committer(Protocol):
    """An append protocol: commit one partition's batch.

    ``current`` is a just-read ``meta/control``; without it the protocol reads one, or (sequential) uses
    the open generation it knows.
    """

    def commit(self, batch: BatchCommit, current: VersionedControl | None = None) -> Committed: ...


class ProtocolChanged(Exception):
    """The partition's control record names the sequential protocol: commit the batch by that one."""

    def __init__(self, current: VersionedControl) -> None:
        super().__init__(f"the partition now uses the {current.record.protocol.value} append protocol")
        self.current = current
