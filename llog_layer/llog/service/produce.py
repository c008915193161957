"""The produce service behind ``POST /produce``: lazy partition creation, then one shared append.

As the seed's broker does, a partition is initialized on the first write
this process sees for it; successful initializations are remembered for the
life of the process (a Lambda execution environment or ``llog serve``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from llog.batching import BatchingConfig, BatchingProducer
from llog.client.writer import AppendResult, LogWriter, SharedAppendGroup, validate_group
from llog.config import env_int
from llog.errors import LlogError
from llog.service.tail_cache import TailCache

DEFAULT_TAIL_CACHE_BYTES = 512 * 1024 * 1024


class ProduceService:
    def __init__(self, writer: LogWriter, *, batcher: BatchingProducer | None = None) -> None:
        self.writer = writer
        self.batcher = batcher
        self._initialized: set[tuple[str, int]] = set()
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, *, batching: bool = False, tail_cache: TailCache | None = None) -> ProduceService:
        """The service for Lambda (``batching=False``) or ``llog serve`` (batcher and tail cache on)."""
        writer = LogWriter.from_env(commit_listener=None if tail_cache is None else tail_cache.on_commit)
        return cls(writer, batcher=BatchingProducer(writer, BatchingConfig.from_env()) if batching else None)

    def produce(self, groups: Sequence[SharedAppendGroup]) -> list[AppendResult]:
        """Append every group; invalid input raises before anything is written."""
        for group in groups:
            validate_group(group, self.writer.root)
        results: dict[int, AppendResult] = {}
        ready: list[tuple[int, SharedAppendGroup]] = []
        for i, group in enumerate(groups):
            try:
                self._ensure_initialized(group.topic, group.partition)
            except LlogError as exc:
                results[i] = AppendResult(group.topic, group.partition, len(group.records), error=exc)
            else:
                ready.append((i, group))
        if ready:
            appender = self.batcher or self.writer
            appended = appender.append_shared([g for _, g in ready])
            results.update((i, r) for (i, _), r in zip(ready, appended, strict=True))
        return [results[i] for i in range(len(groups))]

    def _ensure_initialized(self, topic: str, partition: int) -> None:
        pid = (topic, partition)
        if pid in self._initialized:
            return
        self.writer.initialize_partition(topic, partition)
        with self._lock:
            self._initialized.add(pid)

    def close(self) -> None:
        if self.batcher is not None:
            self.batcher.close()
        self.writer.close()


def tail_cache_from_env() -> TailCache:
    return TailCache(env_int(os.environ, "LLOG_TAIL_CACHE_MAX_BYTES", DEFAULT_TAIL_CACHE_BYTES))
