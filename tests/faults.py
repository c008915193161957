"""Crashes and faults for tests, and the tally ``make soak`` reports (docs/RELIABILITY.md).

Components call their ``llog.protocol.faults.FaultHook`` between storage steps;
``crash_at`` returns a hook that raises ``SimulatedCrash`` at a chosen point,
so the component's remaining steps never run, as if its process had died
there; ``PauseAt`` holds the component at a point until the test releases it,
as if its process had stalled there. Every crash, Oxia server restart and injected S3 fault is counted in
``HARNESS``; ``tests/conftest.py`` writes the counts to ``LLOG_HARNESS_REPORT``
when the session ends.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping

from llog.protocol.faults import FaultHook

HARNESS: Counter[str] = Counter()


def report_run(tally: Mapping[str, int], prefix: str) -> None:
    """Print a concurrent run's counts, and add them to ``HARNESS`` as ``{prefix}: {name}`` for ``make soak``'s
    report (durations, ``seconds …``, are printed only)."""
    print(dict(sorted(tally.items())))
    for name, count in tally.items():
        if not name.startswith("seconds"):
            HARNESS[f"{prefix}: {name}"] += count


class SimulatedCrash(BaseException):
    """Raised by test hooks; a BaseException so that no ``except Exception`` swallows it."""

    def __init__(self, point: str) -> None:
        super().__init__(f"simulated crash at {point}")
        self.point = point


def crash_at(*points: str) -> FaultHook:
    """A hook that crashes at the first of ``points`` reached."""

    def hook(point: str) -> None:
        if point in points:
            HARNESS[f"crashes at {point}"] += 1
            raise SimulatedCrash(point)

    return hook


class PauseAt:
    """A hook that holds the component's thread at ``point`` until :meth:`release`; ``reached`` is set there."""

    def __init__(self, point: str) -> None:
        self.point = point
        self.reached = threading.Event()
        self._released = threading.Event()

    def __call__(self, point: str) -> None:
        if point == self.point:
            self.reached.set()
            assert self._released.wait(30)

    def release(self) -> None:
        self._released.set()
