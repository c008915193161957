"""A bounded in-process LRU cache of whole compacted objects, for the consume Lambda.

A consume request serves at most ``partition_max_bytes`` (1 MiB by default) of
a compacted object of up to ~8 MiB, and S3 has no way to fetch "the records
from offset N" without the whole batch: a consumer catching up would download
the same object once per request. Compacted objects are immutable and are only
ever read through an index entry that still references them (the reader checks
the log start before planning), so a cached copy is always the right bytes.
WAL slices are not cached: each is read once, at the tail.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from llog.config import CacheConfig, Environ
from llog.store.byte_cache import ByteBoundedCache


class ObjectCache(ByteBoundedCache):
    """Thread-safe; holds at most ``max_bytes`` of object bytes, least recently used out first."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes)
        self._lock = threading.Lock()
        self._objects: OrderedDict[str, bytes] = OrderedDict()

    @classmethod
    def from_env(cls, env: Environ | None = None) -> ObjectCache:
        """``LLOG_CONSUME_OBJECT_CACHE_BYTES`` (default 256 MiB; 0 disables the cache)."""
        return cls(CacheConfig.from_env(env).object_cache_bytes)

    def get(self, key: str) -> bytes | None:
        with self._lock:
            data = self._objects.get(key)
            if data is None:
                self.misses += 1
                return None
            self._objects.move_to_end(key)
            self.hits += 1
            return data

    def put(self, key: str, data: bytes) -> None:
        if not self.enabled or len(data) > self.max_bytes:
            return
        with self._lock:
            old = self._objects.pop(key, None)
            if old is not None:
                self._bytes -= len(old)
            self._objects[key] = data
            self._bytes += len(data)
            while self._bytes > self.max_bytes:
                _, evicted = self._objects.popitem(last=False)
                self._bytes -= len(evicted)
