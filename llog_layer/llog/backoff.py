"""Jittered exponential backoff, the one wait between retries everywhere in llog.

Used by the Oxia adapter between transient failures and by the protocol
between lost compare-and-sets. The jitter (each wait is 0.5 to 1.5 times the
current delay) keeps writers that collided once from colliding again in step.
"""

from __future__ import annotations

import random
import time


class Backoff:
    """Waits that double from ``initial_s`` up to ``max_s``; one instance per retry loop."""

    def __init__(self, initial_s: float, max_s: float) -> None:
        self._delay_s = initial_s
        self._max_s = max_s

    def wait(self) -> None:
        """Sleep the current delay, jittered, then double it (up to the cap)."""
        time.sleep(self._delay_s * (0.5 + random.random()))
        self._delay_s = min(self._delay_s * 2, self._max_s)
