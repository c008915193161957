"""Python's garbage collector in ``llog serve``: the start-up heap frozen, and what collections cost (``/metrics``).

A full collection traverses every tracked object and holds the GIL while it
does, so it stops every request of the process. Most of llog serve's objects
are made at start (imports, botocore's service models, the clients) and live
as long as it does; ``freeze_startup_heap`` moves them out of the
collector's reach, which shortens each full collection, and with it the
32-client produce p99 (docs/PERFORMANCE_NOTES.md).
"""

from __future__ import annotations

import gc
import time
from typing import Any

GENERATIONS = 3


def freeze_startup_heap() -> int:
    """Collect the start-up garbage, then freeze what is left; the objects frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


class CollectorStats:
    """Collections per generation and the time they took, from ``gc.callbacks`` while installed."""

    def __init__(self) -> None:
        self._seconds = [0.0] * GENERATIONS
        self._started: float | None = None

    def install(self) -> CollectorStats:
        gc.callbacks.append(self._on_phase)
        return self

    def remove(self) -> None:
        if self._on_phase in gc.callbacks:
            gc.callbacks.remove(self._on_phase)

    def _on_phase(self, phase: str, info: dict[str, int]) -> None:
        # Collections never overlap: the collector runs one at a time, with the GIL held.
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self._seconds[info["generation"]] += time.perf_counter() - self._started
            self._started = None

    def snapshot(self) -> dict[str, Any]:
        generations = [
            {
                "generation": i,
                "collections": stats["collections"],
                "collected": stats["collected"],
                "uncollectable": stats["uncollectable"],
                "seconds": round(self._seconds[i], 6),
            }
            for i, stats in enumerate(gc.get_stats())
        ]
        return {"frozen_objects": gc.get_freeze_count(), "generations": generations}
