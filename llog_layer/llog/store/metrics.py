"""Process-local operation counters shared by the storage adapters.

Each store records, per operation name, how many calls it made, how many
failed, how many were retries, the bytes moved and the total latency. The
HTTP server exports snapshots as JSON/Prometheus; benchmarks diff snapshots
to count storage operations per append.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class OperationStats:
    calls: int = 0
    errors: int = 0
    retries: int = 0
    bytes: int = 0
    seconds: float = 0.0
    conflicts: int = 0  # conditional writes that found another version (compare-and-set lost)


class OperationCounters:
    """Thread-safe per-operation counters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ops: dict[str, OperationStats] = {}

    def _stats(self, op: str) -> OperationStats:
        stats = self._ops.get(op)
        if stats is None:
            stats = self._ops[op] = OperationStats()
        return stats

    def record(self, op: str, seconds: float, *, nbytes: int = 0, error: bool = False, conflict: bool = False) -> None:
        with self._lock:
            stats = self._stats(op)
            stats.calls += 1
            stats.seconds += seconds
            stats.bytes += nbytes
            if error:
                stats.errors += 1
            if conflict:
                stats.conflicts += 1

    def record_retry(self, op: str) -> None:
        with self._lock:
            self._stats(op).retries += 1

    @contextmanager
    def timed(self, op: str) -> Iterator[list[int]]:
        """Time a block; append a byte count to the yielded list to record bytes."""
        nbytes: list[int] = []
        start = time.perf_counter()
        try:
            yield nbytes
        except BaseException:
            self.record(op, time.perf_counter() - start, nbytes=sum(nbytes), error=True)
            raise
        self.record(op, time.perf_counter() - start, nbytes=sum(nbytes))

    def snapshot(self) -> dict[str, OperationStats]:
        with self._lock:
            return {op: OperationStats(**vars(s)) for op, s in self._ops.items()}

    def total_calls(self) -> int:
        with self._lock:
            return sum(s.calls for s in self._ops.values())
