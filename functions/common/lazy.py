"""Per-environment singletons created on first use, and per-thread objects.

A Lambda execution environment creates its services once, on the first
request that needs them (creating them touches no network: the Oxia store
connects on its first call, and reconnects after a freeze). A failed creation
(missing configuration) is not cached: the next request tries again.
``llog serve`` injects its own shared services instead (``set``), and tests
``reset`` between cases.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Lazy(Generic[T]):
    def __init__(self, factory: Callable[[], T], close: Callable[[T], None] | None = None) -> None:
        self._factory = factory
        self._close = close
        self._lock = threading.Lock()
        self._value: T | None = None
        self._owned = False

    def get(self) -> T:
        value = self._value
        if value is not None:
            return value
        with self._lock:
            if self._value is None:
                self._value = self._factory()
                self._owned = True
            return self._value

    def peek(self) -> T | None:
        return self._value

    def set(self, value: T | None) -> None:
        """Use ``value`` (owned by the caller, never closed here); None forgets it."""
        with self._lock:
            self._value, self._owned = value, False

    def reset(self) -> None:
        """Forget the value, closing it if this holder created it."""
        with self._lock:
            value, owned = self._value, self._owned
            self._value, self._owned = None, False
        if value is not None and owned and self._close is not None:
            self._close(value)


class PerThread(Generic[T]):
    """One object per thread (Powertools resolvers keep the current request on themselves)."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._local = threading.local()

    def get(self) -> T:
        value: T | None = getattr(self._local, "value", None)
        if value is None:
            value = self._local.value = self._factory()
        return value
