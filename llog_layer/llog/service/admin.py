"""The admin service behind the operator routes: topics (create, describe, grow, delete), the catalog,
partition status and storage, fence and unfence, compaction on demand."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from llog.config import CompactorConfig, OxiaConfig, S3Config, WriterConfig, root_prefix_from_env
from llog.errors import UnknownTopic
from llog.format.kv.control import ControlRecord
from llog.format.kv.document import INITIAL_OFFSET
from llog.format.kv.index import EntryType
from llog.protocol.append import LogWriter
from llog.protocol.catalog import LogCatalog
from llog.protocol.compaction import CompactionOutcome, Compactor, compact_until_caught_up
from llog.protocol.index import PartitionIndex
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.topics import TopicConfig, TopicRecord, TopicRegistry
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage


def control_json(topic: str, partition: int, control: ControlRecord) -> dict[str, Any]:
    """A partition's control record as the fence and unfence routes answer it."""
    return {
        "topic": topic,
        "partition": partition,
        "log_state": control.log_state.value,
        "high_watermark": control.high_watermark,
        "next_offset": control.sequence_counter,
    }


class AdminService:
    """The Oxia store, catalog and (for fencing) writer of the admin routes."""

    def __init__(
        self,
        oxia: OxiaStore,
        *,
        root: str,
        writer: LogWriter | None = None,
        writer_config: WriterConfig | None = None,
    ) -> None:
        self.oxia = oxia
        self.root = root
        self.catalog = LogCatalog(oxia, root=root)
        self._writer = writer
        self._storage: Storage | None = None if writer is None else writer.storage
        self._compactor: Compactor | None = None
        # New topics get this config's append protocol unless their config names one.
        self.writer_config = writer_config or (writer.config if writer is not None else WriterConfig())
        self.topic_records = TopicRegistry(oxia, root=root, writer_config=self.writer_config)
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls) -> AdminService:
        return cls(OxiaStore(OxiaConfig.from_env()), root=root_prefix_from_env(), writer_config=WriterConfig.from_env())

    def _storage_locked(self) -> Storage:
        if self._storage is None:
            s3 = S3Config.from_env()
            self._storage = Storage(self.oxia, BlobStore(s3), s3.require_bucket(), self.root)
        return self._storage

    @property
    def writer(self) -> LogWriter:
        """A writer on the same Oxia store, created on first use (fencing needs no S3 call)."""
        with self._lock:
            if self._writer is None:
                self._writer = LogWriter(self._storage_locked())
            return self._writer

    @property
    def compactor(self) -> Compactor:
        """A compactor on the same stores, created by the first compaction request."""
        with self._lock:
            if self._compactor is None:
                self._compactor = Compactor(self._storage_locked(), config=CompactorConfig.from_env())
            return self._compactor

    def topics(self) -> dict[str, Any]:
        return {"topics": [listing.to_json() for listing in self.catalog.topics()]}

    def create_topic(self, topic: str, partitions: int, config: dict[str, Any] | None) -> tuple[bool, dict[str, Any]]:
        """``(created, description)``: created, or found with the same settings (and its partitions completed)."""
        parsed = TopicConfig.parse(config, default_protocol=self.writer_config.append_protocol)
        _, created = self.topic_records.create(topic, partitions, parsed)
        return created, self.catalog.describe(topic)

    def describe_topic(self, topic: str) -> dict[str, Any]:
        return self.catalog.describe(topic)

    def grow_topic(self, topic: str, partitions: int) -> dict[str, Any]:
        self.topic_records.grow(topic, partitions)
        return self.catalog.describe(topic)

    def topic_record(self, topic: str) -> TopicRecord:
        """An explicit topic's record (``UnknownTopic`` for a deleted, implicit or unknown one)."""
        return self.topic_records.active(topic)

    def configure_topic(self, topic: str, change: Callable[[TopicRecord], TopicRecord]) -> TopicRecord:
        """Its settings or tags changed by ``change`` (``TopicRegistry.configure``)."""
        return self.topic_records.configure(topic, change)

    def delete_topic(self, topic: str) -> dict[str, Any]:
        self.topic_records.delete(topic)
        return {"topic": topic, "deleted": True}

    def status(self, topic: str, partition: int) -> dict[str, Any]:
        return self.catalog.status(self.catalog.layouts.keys(topic, partition)).to_json()

    def storage_usage(self, topic: str, partition: int) -> dict[str, Any]:
        """What a partition keeps and how far compaction is behind, from one read of its whole index.

        Bytes are the index's own sizes (a compacted object's ``data_bytes``, a
        WAL slice's ``byte_length``): no S3 call. WAL slices share objects with
        other partitions, so they are counted as batches, not objects. The
        compaction lag's age is that of the oldest entry past the cursor.
        """
        self._require_live(topic)
        meta = PartitionMetadata(self.oxia, self.catalog.layouts.keys(topic, partition))
        index = PartitionIndex.load(meta)
        cursor = meta.cursor().offset
        totals = {EntryType.COMPACTED: [0, 0], EntryType.WAL: [0, 0]}  # type -> [entries, bytes]
        oldest_uncompacted_ms: int | None = None
        for batch in index.iter(INITIAL_OFFSET):
            entry = batch.entry
            count = totals.setdefault(entry.type, [0, 0])
            count[0] += 1
            count[1] += entry.data_bytes if entry.data_bytes is not None else entry.ref.byte_length or 0
            if batch.end_offset >= cursor and oldest_uncompacted_ms is None:
                oldest_uncompacted_ms = entry.created_at_ms
        high_watermark = index.high_watermark()
        compacted, wal = totals[EntryType.COMPACTED], totals[EntryType.WAL]
        now_ms = int(time.time() * 1000)
        return {
            "topic": topic,
            "partition": partition,
            "append_protocol": index.control.protocol.value,
            "log_start_offset": index.control.log_start_offset,
            "high_watermark": high_watermark,
            "compacted_objects": compacted[0],
            "compacted_bytes": compacted[1],
            "wal_batches": wal[0],
            "wal_bytes": wal[1],
            "stored_bytes": compacted[1] + wal[1],
            "compaction_cursor": cursor,
            "compaction_lag": high_watermark + 1 - cursor,
            "oldest_uncompacted_at_ms": oldest_uncompacted_ms,
            "compaction_lag_ms": None if oldest_uncompacted_ms is None else max(0, now_ms - oldest_uncompacted_ms),
        }

    def compact(self, topic: str, partition: int, *, budget_s: float) -> dict[str, Any]:
        """Compact until caught up or ``budget_s`` is spent (what ``llog compact`` does), then the status."""
        self._require_live(topic)
        # PartitionNotInitialized (404) before any work
        before = self.catalog.status(self.catalog.layouts.keys(topic, partition))
        results = compact_until_caught_up(self.compactor, topic, partition, budget_s=budget_s)
        runs = [{**dataclasses.asdict(r), "outcome": r.outcome.value} for r in results]
        return {
            "topic": topic,
            "partition": partition,
            "caught_up": bool(results) and results[-1].outcome is CompactionOutcome.NOTHING_TO_DO,
            "records": sum(r.records for r in results if r.outcome is CompactionOutcome.COMPACTED),
            "bytes_written": sum(r.bytes_written for r in results),
            "compaction_lag_before": before.compaction_lag,
            "runs": runs,
            "status": self.status(topic, partition),
        }

    def _require_live(self, topic: str) -> None:
        record = self.topic_records.get(topic)
        if record is not None and record.deleted:
            raise UnknownTopic(topic, f"topic {topic!r} was deleted")

    def fence(self, topic: str, partition: int) -> dict[str, Any]:
        return control_json(topic, partition, self.writer.fence(topic, partition))

    def unfence(self, topic: str, partition: int) -> dict[str, Any]:
        """Reopen appends; never on a deleted topic, whose partitions stay fenced until reclaimed.

        The record check answers a deleted topic at once (also one whose delete crashed before its fence); an
        unfence racing a delete is refused by the mark the delete's fence puts in ``meta/control``
        (``fence.set_state``), not by this check.
        """
        self._require_live(topic)
        return control_json(topic, partition, self.writer.unfence(topic, partition))

    def close(self) -> None:
        self.oxia.close()
