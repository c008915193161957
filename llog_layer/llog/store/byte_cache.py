"""What the in-process caches share: a bound in bytes and hit/miss counts (docs/ARCHITECTURE.md).

``ObjectCache`` (compacted objects) and ``llog.service.tail_cache.TailCache``
(each partition's recent batches) differ in what they hold and in how they
evict; both stay under ``max_bytes``, are off at 0, and count hits and misses.
"""

from __future__ import annotations


class ByteBoundedCache:
    """The bookkeeping of a cache that holds at most ``max_bytes`` (0 disables it)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    @property
    def size_bytes(self) -> int:
        return self._bytes
