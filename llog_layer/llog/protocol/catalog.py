"""Read-only views of the log for operators (``GET /topics``, ``GET /topics/{t}``, ``GET /topics/{t}/partitions/{p}``).

Partitions are discovered through the registry (``llog.protocol.registry``); a
registered partition whose ``meta/control`` does not exist yet (a crash
during its creation) raises ``PartitionNotInitialized`` from ``status``.
Topics are the registry's topics plus the topic records
(``llog.protocol.topics``): a topic whose record is not marked implicit is
explicit; an implicit one (created by produce) has an implicit record, or none
if all its partitions were created before topic records existed. A deleted topic is listed nowhere, and so
neither compacted nor described, from its deletion on. A partition's status is read from the keys of the
incarnation its registry entry (``partitions``) or its topic's record (``describe``) names
(``llog.format.keys``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from llog.errors import CorruptMetadata, PartitionNotInitialized, UnknownTopic
from llog.format.keys import DEFAULT_ROOT_PREFIX, PartitionKeys, partition_keys
from llog.protocol.index import PartitionIndex
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.registry import PartitionRegistry
from llog.protocol.topics import PARTITION_CONCURRENCY, TopicLayouts, TopicRecord, TopicRegistry, keys_ids
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
    # When the oldest entry not yet compacted was appended (ms), where the reader asked for it: the
    # planner's age rule (``llog.service.compaction.plan_compaction``).
    oldest_uncompacted_ms: int | None = None

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


@dataclass(frozen=True)
class TopicListing:
    topic: str
    partitions: list[int]  # registered, in numeric order
    explicit: bool  # created by POST /topics (or adopted by it), not implicitly by produce

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "partitions": self.partitions, "explicit": self.explicit}


def partition_summary(status: PartitionStatus | None, partition: int) -> dict[str, Any]:
    """One partition of a topic's description; a partition not initialized yet reads as empty."""
    if status is None:
        return {"partition": partition, "high_watermark": 0, "log_start": 1, "next_offset": 1,
                "log_state": "NOT_INITIALIZED"}  # fmt: skip
    return {
        "partition": partition,
        "high_watermark": status.high_watermark,
        "log_start": status.log_start_offset,
        "next_offset": status.next_offset,
        "log_state": status.log_state,
    }


class LogCatalog:
    def __init__(self, oxia: OxiaStore, *, root: str = DEFAULT_ROOT_PREFIX) -> None:
        self.oxia = oxia
        self.root = root
        self._registry = PartitionRegistry(oxia, root=root)
        self.topic_records = TopicRegistry(oxia, root=root)
        self.layouts = TopicLayouts(oxia, root=root)  # a partition named by its topic -> its keys

    def topics(self) -> list[TopicListing]:
        """Every topic that is not deleted, in name order: two reads (topic records, registry)."""
        records = self.topic_records.records()
        registered = {
            t: [e.partition for e in es] for t, es in self._registry.entries(current=keys_ids(records)).items()
        }
        names = sorted(set(registered) | set(records))
        return [
            TopicListing(t, registered.get(t, []), t in records and not records[t].implicit)
            for t in names
            if not (t in records and records[t].deleted)
        ]

    def partitions(self) -> dict[str, list[PartitionKeys]]:
        """Every registered partition of the topics that are not deleted, by topic, sorted: the keys of the
        incarnation its registry entry names. Two reads (topic records, registry)."""
        records = self.topic_records.records()
        return {
            topic: [entry.keys(self.root) for entry in entries]
            for topic, entries in self._registry.entries(current=keys_ids(records)).items()
            if not (topic in records and records[topic].deleted)
        }

    def describe(self, topic: str) -> dict[str, Any]:
        """A topic's settings and each partition's offsets; ``UnknownTopic`` if deleted or never created."""
        record = self.topic_records.get(topic)
        if record is not None and record.deleted:
            raise UnknownTopic(topic, f"topic {topic!r} was deleted")
        registered = self.topic_records.registered(topic, record)
        if record is None and not registered:
            raise UnknownTopic(topic)
        if record is None:  # an implicit topic all of whose partitions predate topic records
            partitions = registered
        elif record.implicit:  # the registry may hold partitions created before its record (their migration)
            partitions = sorted(set(registered) | set(record.partition_numbers))
        else:
            partitions = record.partition_numbers
        keys = [partition_keys(topic, p, self.root) if record is None else record.partition_keys(p, self.root)
                for p in partitions]  # fmt: skip
        with ThreadPoolExecutor(min(PARTITION_CONCURRENCY, len(partitions))) as pool:
            statuses = list(pool.map(self._status_or_none, keys))
        return {
            "topic": topic,
            "partitions": len(partitions),
            "config": self._config_json(record),
            "created_at_ms": None if record is None else record.created_at_ms,
            "topic_id": None if record is None else record.topic_id,
            "explicit": record is not None and not record.implicit,
            "partition_status": [partition_summary(s, p) for s, p in zip(statuses, partitions, strict=True)],
        }

    @staticmethod
    def _config_json(record: TopicRecord | None) -> dict[str, Any]:
        if record is None or record.implicit:  # each partition has the protocol its creator was configured with
            return {"append_protocol": None, "retention_ms": None, "retention_bytes": None}
        return record.config.to_json()

    def _status_or_none(self, keys: PartitionKeys) -> PartitionStatus | None:
        try:
            return self.status(keys)
        except PartitionNotInitialized:
            return None

    def status(self, keys: PartitionKeys, *, oldest_below_lag: int = 0) -> PartitionStatus:
        """Two Oxia reads at most: the ``meta/`` records in one scan, and a sequential partition's tail; one
        more, where the compaction lag is positive and under ``oldest_below_lag``, for the oldest uncompacted
        entry's append time (``oldest_uncompacted_ms``).

        The compaction planner calls this for every partition each tick, so its
        cost is what discovery costs per partition: it never grows with the index
        (a fenced sequential generation not sealed yet adds a binary search,
        ``SequenceSegment.last_valid_position``).
        """
        topic, partition = keys.topic, keys.partition
        meta = PartitionMetadata(self.oxia, keys)
        snapshot = meta.snapshot()
        control = snapshot.control
        if control is None:
            raise PartitionNotInitialized(topic, partition)
        index = PartitionIndex(meta, control)
        high_watermark = index.high_watermark()
        compaction = snapshot.compaction
        cursor = snapshot.cursor.offset
        oldest = None
        if 0 < high_watermark + 1 - cursor < oldest_below_lag:
            try:
                first = index.ceiling(cursor)
            except CorruptMetadata:  # the planner's to schedule, and the worker's to report, not to fail a plan
                first = None
            oldest = None if first is None else first.entry.created_at_ms
        return PartitionStatus(
            topic=topic,
            partition=partition,
            log_state=control.log_state.value,
            log_start_offset=control.log_start_offset,
            high_watermark=high_watermark,
            next_offset=high_watermark + 1,
            compaction_cursor=cursor,
            pending=None if control.pending is None else control.pending.to_json(),
            compaction=None
            if compaction is None
            else {
                "compaction_id": compaction.compaction_id,
                "state": compaction.state.value,
                "start_offset": compaction.start_offset,
                "end_offset": compaction.end_offset,
            },
            oldest_uncompacted_ms=oldest,
        )
