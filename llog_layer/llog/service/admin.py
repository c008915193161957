"""The admin service behind the operator routes: the partition catalog, partition status, fence and unfence."""

from __future__ import annotations

import threading
from typing import Any

from llog.client.writer import LogWriter
from llog.config import OxiaConfig, S3Config, root_prefix_from_env
from llog.format.documents import ControlRecord
from llog.protocol.catalog import LogCatalog
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

    def __init__(self, oxia: OxiaStore, *, root: str, writer: LogWriter | None = None) -> None:
        self.oxia = oxia
        self.root = root
        self.catalog = LogCatalog(oxia, root=root)
        self._writer = writer
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls) -> AdminService:
        return cls(OxiaStore(OxiaConfig.from_env()), root=root_prefix_from_env())

    @property
    def writer(self) -> LogWriter:
        """A writer on the same Oxia store, created on first use (fencing needs no S3 call)."""
        with self._lock:
            if self._writer is None:
                s3 = S3Config.from_env()
                self._writer = LogWriter(Storage(self.oxia, BlobStore(s3), s3.require_bucket(), self.root))
            return self._writer

    def topics(self) -> dict[str, Any]:
        found = self.catalog.partitions()
        return {"topics": [{"topic": t, "partitions": p} for t, p in found.items()]}

    def status(self, topic: str, partition: int) -> dict[str, Any]:
        return self.catalog.status(topic, partition).to_json()

    def fence(self, topic: str, partition: int) -> dict[str, Any]:
        return control_json(topic, partition, self.writer.fence(topic, partition))

    def unfence(self, topic: str, partition: int) -> dict[str, Any]:
        return control_json(topic, partition, self.writer.unfence(topic, partition))

    def close(self) -> None:
        self.oxia.close()
