"""The produce service behind ``POST /produce``: lazy partition creation, then one shared append.

A partition is initialized on the first write this process sees for it
(docs/PROTOCOL.md); successful initializations are remembered for the life of
the process (a Lambda execution environment or ``llog serve``). A Lambda
appends each request on its own; ``llog serve`` passes a batching appender,
which turns concurrent requests into one shared WAL object.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

from llog.client.writer import AppendResult, LogWriter, SharedAppendGroup, validate_group
from llog.errors import LlogError
from llog.protocol.producers import ProducerIdentity


class SharedAppender(Protocol):
    """What appends a request's groups when it is not the writer itself: a batcher in front of it."""

    def append_shared(self, groups: Sequence[SharedAppendGroup]) -> list[AppendResult]: ...

    def close(self) -> None: ...


class ProduceService:
    def __init__(self, writer: LogWriter, *, batcher: SharedAppender | None = None) -> None:
        self.writer = writer
        self.batcher = batcher
        self._initialized: set[tuple[str, int]] = set()
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls) -> ProduceService:
        """The service of a produce Lambda: one shared append per request."""
        return cls(LogWriter.from_env())

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

    def producer(self, producer_id: str | None) -> ProducerIdentity:
        """``POST /producers``: a new producer id at epoch 0, or ``producer_id`` with its epoch bumped."""
        registry = self.writer.producers
        return registry.issue() if producer_id is None else registry.bump(producer_id)

    def close(self) -> None:
        if self.batcher is not None:
            self.batcher.close()
        self.writer.close()

