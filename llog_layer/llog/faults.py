"""Named crash points, so tests can stop a writer between any two storage steps.

A component calls ``self._fault("writer.after_reserve")`` between steps. In
production the hook is ``None`` and nothing happens; a test passes a hook
that raises ``SimulatedCrash`` at the chosen point, and the component's
remaining steps never run, as if its process had died there.
"""

from __future__ import annotations

from collections.abc import Callable

FaultHook = Callable[[str], None]


class SimulatedCrash(BaseException):
    """Raised by test hooks; a BaseException so that no ``except Exception`` swallows it."""

    def __init__(self, point: str) -> None:
        super().__init__(f"simulated crash at {point}")
        self.point = point


def crash_at(*points: str) -> FaultHook:
    """A hook that crashes at the first of ``points`` reached."""

    def hook(point: str) -> None:
        if point in points:
            raise SimulatedCrash(point)

    return hook
