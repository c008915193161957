"""The admin service behind the operator routes: topics (create, describe, grow, delete), the catalog,
partition status, fence and unfence."""

from __future__ import annotations

import threading
from typing import Any

from llog.client.writer import LogWriter
from llog.config import OxiaConfig, S3Config, WriterConfig, root_prefix_from_env
from llog.errors import UnknownTopic
from llog.format.documents import ControlRecord
from llog.protocol.catalog import LogCatalog
from llog.protocol.topics import TopicConfig, TopicRegistry
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
        # New topics get this config's append protocol unless their config names one.
        self.writer_config = writer_config or (writer.config if writer is not None else WriterConfig())
        self.topic_records = TopicRegistry(oxia, root=root, writer_config=self.writer_config)
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls) -> AdminService:
        return cls(OxiaStore(OxiaConfig.from_env()), root=root_prefix_from_env(), writer_config=WriterConfig.from_env())

    @property
    def writer(self) -> LogWriter:
        """A writer on the same Oxia store, created on first use (fencing needs no S3 call)."""
        with self._lock:
            if self._writer is None:
                s3 = S3Config.from_env()
                self._writer = LogWriter(Storage(self.oxia, BlobStore(s3), s3.require_bucket(), self.root))
            return self._writer

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

    def delete_topic(self, topic: str) -> dict[str, Any]:
        self.topic_records.delete(topic)
        return {"topic": topic, "deleted": True}

    def status(self, topic: str, partition: int) -> dict[str, Any]:
        return self.catalog.status(topic, partition).to_json()

    def fence(self, topic: str, partition: int) -> dict[str, Any]:
        return control_json(topic, partition, self.writer.fence(topic, partition))

    def unfence(self, topic: str, partition: int) -> dict[str, Any]:
        """Reopen appends; never on a deleted topic, whose partitions stay fenced until reclaimed."""
        record = self.topic_records.get(topic)
        if record is not None and record.deleted:
            raise UnknownTopic(topic, f"topic {topic!r} was deleted")
        return control_json(topic, partition, self.writer.unfence(topic, partition))

    def close(self) -> None:
        self.oxia.close()
