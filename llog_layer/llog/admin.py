"""Read-only views of the log for operators (``GET /topics``, ``GET /topics/{t}/partitions/{p}``).

Partitions are discovered from their ``meta/control`` records, the seed's
discovery anchor: a key listing under the root prefix across every Oxia
shard, filtered to ``{root}/{topic}/partitions/{p}/meta/control``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from llog.index import PartitionIndex
from llog.keys import DEFAULT_ROOT_PREFIX, PartitionKeys
from llog.metadata import PartitionMetadata
from llog.oxia_store import OxiaStore


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
        self._control_key = re.compile(rf"{re.escape(root)}/([^/]+)/partitions/(\d+)/meta/control")

    def partitions(self) -> dict[str, list[int]]:
        """Every initialized partition, by topic, sorted."""
        # [root/, root0/) holds every key whose first segments are the root:
        # Oxia compares '/'-separated segments left to right.
        keys = self.oxia.list_keys(f"{self.root}/", f"{self.root}0/")
        found: dict[str, set[int]] = {}
        for key in keys:
            match = self._control_key.fullmatch(key)
            if match:
                found.setdefault(match.group(1), set()).add(int(match.group(2)))
        return {topic: sorted(parts) for topic, parts in sorted(found.items())}

    def status(self, topic: str, partition: int) -> PartitionStatus:
        meta = PartitionMetadata(self.oxia, PartitionKeys(topic, partition, self.root))
        index = PartitionIndex.load(meta)
        control = index.control
        high_watermark = index.high_watermark()
        compaction = meta.compaction()
        return PartitionStatus(
            topic=topic,
            partition=partition,
            log_state=control.log_state.value,
            log_start_offset=control.log_start_offset,
            high_watermark=high_watermark,
            next_offset=high_watermark + 1,
            compaction_cursor=meta.cursor().offset,
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
