"""``BatchingProducer`` (docs/ARCHITECTURE.md): coalesce concurrent produce calls into one shared WAL blob.

Callers on many threads submit groups; one flusher thread writes everything
buffered as a single ``append_shared`` (one S3 PUT, one commit per partition)
when ``LLOG_BATCH_MAX_BYTES`` is buffered or the oldest buffered group has
waited ``LLOG_BATCH_MAX_DELAY_MS``, then hands each caller the offsets of its
own records. When more than ``LLOG_BATCH_MAX_BUFFER_BYTES`` is waiting, new
calls are refused with ``BackPressureRejected`` (HTTP 503) instead of
queueing without bound.

Used by the long-running ``llog serve``; a Lambda environment serves one
request at a time, so there each request is simply one blob.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from llog.client.writer import AppendResult, LogWriter, SharedAppendGroup, validate_group
from llog.config import Environ, env_int
from llog.errors import LlogError
from llog.format.codec import Record


class BackPressureRejected(LlogError):
    """The producer's buffer is full; retry later."""

    retriable = True


@dataclass(frozen=True)
class BatchingConfig:
    max_bytes: int = 8 * 1024 * 1024
    max_delay_ms: int = 500
    max_buffer_bytes: int = 64 * 1024 * 1024

    @classmethod
    def from_env(cls, env: Environ | None = None) -> BatchingConfig:
        env = os.environ if env is None else env
        return cls(
            max_bytes=env_int(env, "LLOG_BATCH_MAX_BYTES", cls.max_bytes, minimum=1),
            max_delay_ms=env_int(env, "LLOG_BATCH_MAX_DELAY_MS", cls.max_delay_ms),
            max_buffer_bytes=env_int(env, "LLOG_BATCH_MAX_BUFFER_BYTES", cls.max_buffer_bytes, minimum=1),
        )


@dataclass
class _Pending:
    groups: Sequence[SharedAppendGroup]
    size: int
    enqueued_at: float
    future: Future[list[AppendResult]]


def _group_bytes(group: SharedAppendGroup) -> int:
    return sum(len(r.value) + len(r.key or b"") if isinstance(r, Record) else len(r) for r in group.records)


class BatchingProducer:
    """Thread-safe front of a ``LogWriter``; ``append_shared`` blocks until its flush completes."""

    def __init__(self, writer: LogWriter, config: BatchingConfig | None = None) -> None:
        self.writer = writer
        self.config = config or BatchingConfig()
        self._cond = threading.Condition()
        self._queue: list[_Pending] = []
        self._buffered = 0
        self._closed = False
        self.flushes = 0
        self.rejected = 0
        self._thread = threading.Thread(target=self._run, daemon=True, name="llog-batch-flusher")
        self._thread.start()

    @property
    def buffered_bytes(self) -> int:
        return self._buffered

    def append_shared(self, groups: Sequence[SharedAppendGroup]) -> list[AppendResult]:
        for group in groups:
            validate_group(group, self.writer.root)  # invalid input must not poison a shared flush
        size = sum(_group_bytes(g) for g in groups)
        with self._cond:
            if self._closed:
                raise LlogError("the batching producer is closed")
            if self._buffered + size > self.config.max_buffer_bytes:
                self.rejected += 1
                error = BackPressureRejected(
                    f"{self._buffered} bytes are waiting to be written; the buffer holds "
                    f"{self.config.max_buffer_bytes} (LLOG_BATCH_MAX_BUFFER_BYTES)"
                )
                return [AppendResult(g.topic, g.partition, len(g.records), error=error) for g in groups]
            pending = _Pending(groups, size, time.monotonic(), Future())
            self._queue.append(pending)
            self._buffered += size
            self._cond.notify_all()
        return pending.future.result()

    def _take_batch(self) -> list[_Pending] | None:
        with self._cond:
            while True:
                if self._queue:
                    age = time.monotonic() - self._queue[0].enqueued_at
                    wait = self.config.max_delay_ms / 1000 - age
                    if self._buffered >= self.config.max_bytes or wait <= 0 or self._closed:
                        batch, self._queue = self._queue, []
                        self._buffered -= sum(p.size for p in batch)
                        return batch
                    self._cond.wait(wait)
                elif self._closed:
                    return None
                else:
                    self._cond.wait()

    def _run(self) -> None:
        while (batch := self._take_batch()) is not None:
            self._flush(batch)

    def _flush(self, batch: list[_Pending]) -> None:
        # One merged group per partition, records in arrival order.
        merged: dict[tuple[str, int], list[Record | bytes]] = {}
        for pending in batch:
            for group in pending.groups:
                merged.setdefault((group.topic, group.partition), []).extend(group.records)
        try:
            results = self.writer.append_shared([SharedAppendGroup(t, p, recs) for (t, p), recs in merged.items()])
        except BaseException as exc:
            for pending in batch:
                pending.future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        self.flushes += 1
        by_partition = {(r.topic, r.partition): r for r in results}
        consumed: dict[tuple[str, int], int] = {}
        for pending in batch:
            out = []
            for group in pending.groups:
                pid = (group.topic, group.partition)
                result = by_partition[pid]
                skip = consumed.get(pid, 0)
                consumed[pid] = skip + len(group.records)
                out.append(_slice(result, group, skip))
            pending.future.set_result(out)

    def close(self) -> None:
        """Flush what is buffered, then stop the flusher."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()


def _slice(result: AppendResult, group: SharedAppendGroup, skip: int) -> AppendResult:
    """The part of a merged partition result that belongs to one caller's group."""
    count = len(group.records)
    if result.error is not None or result.start_offset is None:
        return AppendResult(group.topic, group.partition, count, error=result.error)
    start = result.start_offset + skip
    return AppendResult(group.topic, group.partition, count, start, start + count - 1, result.index_key, result.wal_uri)
