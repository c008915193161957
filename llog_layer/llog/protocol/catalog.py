"""Read-only views of the log for operators (``GET /topics``, ``GET /topics/{t}/partitions/{p}``).

Partitions are discovered through the registry (``llog.protocol.registry``); a
registered partition whose ``meta/control`` does not exist yet (a crash
during its creation) raises ``PartitionNotInitialized`` from ``status``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llog.errors import PartitionNotInitialized
from llog.format.keys import DEFAULT_ROOT_PREFIX, PartitionKeys
from llog.protocol.index import PartitionIndex
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.registry import PartitionRegistry
from llog.store.oxia import OxiaStore


@dataclass(frozen=True)
class PartitionStatus:
    topic: str
    partition: int
    log_state: str
    log_start_offset: int
    high_watermark: int
    next_offset: int
    compaction_cursor: int
    pending: dict[str, Any] | None
    compaction: dict[str, Any] | None

    @property
    def compaction_lag(self) -> int:
        """Offsets appended but not yet compacted."""
        return self.next_offset - self.compaction_cursor

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "log_state": self.log_state,
            "log_start_offset": self.log_start_offset,
            "high_watermark": self.high_watermark,
            "next_offset": self.next_offset,
            "compaction_cursor": self.compaction_cursor,
            "compaction_lag": self.compaction_lag,
            "pending": self.pending,
            "compaction": self.compaction,
        }


class LogCatalog:
    def __init__(self, oxia: OxiaStore, *, root: str = DEFAULT_ROOT_PREFIX) -> None:
        self.oxia = oxia
        self.root = root
        self._registry = PartitionRegistry(oxia, root=root)

    def partitions(self) -> dict[str, list[int]]:
        """Every registered partition, by topic, sorted."""
        return self._registry.partitions()

    def status(self, topic: str, partition: int) -> PartitionStatus:
        """Two Oxia reads at most: the ``meta/`` records in one scan, and a sequential partition's tail.

        The compaction planner calls this for every partition each tick, so its
        cost is what discovery costs per partition: it never grows with the index
        (a fenced sequential generation not sealed yet adds a binary search,
        ``SequenceSegment.last_valid_position``).
        """
        meta = PartitionMetadata(self.oxia, PartitionKeys(topic, partition, self.root))
        snapshot = meta.snapshot()
        control = snapshot.control
        if control is None:
            raise PartitionNotInitialized(topic, partition)
        high_watermark = PartitionIndex(meta, control).high_watermark()
        compaction = snapshot.compaction
        return PartitionStatus(
            topic=topic,
            partition=partition,
            log_state=control.log_state.value,
            log_start_offset=control.log_start_offset,
            high_watermark=high_watermark,
            next_offset=high_watermark + 1,
            compaction_cursor=snapshot.cursor.offset,
            pending=None if control.pending is None else control.pending.to_json(),
            compaction=None
            if compaction is None
            else {
                "compaction_id": compaction.compaction_id,
                "state": compaction.state.value,
                "start_offset": compaction.start_offset,
                "end_offset": compaction.end_offset,
            },
        )
