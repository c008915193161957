"""A bounded in-process cache of each partition's most recent batches (docs/ARCHITECTURE.md).

The writer reports every committed batch (``LogWriter(commit_listener=...)``);
readers in the same process then serve recent offsets without touching Oxia
or S3, and a consumer waiting at the cached tail is woken by the next
append (``watching``) without a round trip to Oxia.

It is opportunistic: it only knows what *this* process wrote or read. Records
at an offset never change, so a hit is always correct; what the cache may
not know is that another process appended since. Callers therefore treat a
"nothing after the cached tail" answer as a reason to wait, and check Oxia
before they finally answer "empty". Only a tail that was the partition's end
when it was cached (this process's append, or a read that reached the high
watermark) counts as one: batches a catching-up reader pulled from S3 are
cached for the next request, but their end says nothing about the partition's.

A partition's batches are only as good as the partition: one deleted, reclaimed
and created again restarts at offset 1. So a partition's cached batches last
``STALE_TOPIC_MS`` after Oxia last confirmed it (an append here, a read that
went through Oxia, a high watermark read at or past the cached end); reclaim
waits longer than that after a deletion, and a deleted partition is confirmed
no more. A high watermark read below the cached end drops them at once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from llog.config import CacheConfig
from llog.format.codec import RecordBatch, batch_record_count, decode_batch
from llog.protocol.topics import STALE_TOPIC_MS
from llog.store.byte_cache import ByteBoundedCache
from llog.store.changes import Wakeup, Watchers

PartitionId = tuple[str, int]


@dataclass
class _Tail:
    """Contiguous cached batches of one partition: ``batches[i]`` = (start, end, the encoded batch).

    Encoded, not opened: a ``RecordBatch`` is a handful of objects the garbage collector tracks (its
    views and columns), and a full cache of small batches made every full collection, which stops the
    process, traverse millions of them. Bytes are not tracked, nor, after their first collection, are
    tuples of untracked objects.
    """

    batches: deque[tuple[int, int, bytes]] = field(default_factory=deque)
    at_end: bool = False  # the last batch ended at the partition's high watermark when it was added
    appended_here: bool = False  # the last batch came from this process's writer (``on_commit``)
    confirmed_at: float = 0.0  # when Oxia last showed the partition (the cache's clock, seconds)

    @property
    def first(self) -> int:
        return self.batches[0][0]

    @property
    def last(self) -> int:
        return self.batches[-1][1]


def cache_tag(pid: PartitionId) -> tuple[str, PartitionId]:
    """The tag a ``TailCache`` wakes its watchers with: a batch of ``pid`` is in the cache."""
    return ("tail cache", pid)


class TailCache(ByteBoundedCache):
    """Thread-safe; holds at most ``max_bytes`` of encoded batches (0 disables it)."""

    @classmethod
    def from_env(cls) -> TailCache:
        """``LLOG_TAIL_CACHE_MAX_BYTES`` (default 512 MiB; 0 disables the cache)."""
        return cls(CacheConfig.from_env().tail_cache_bytes)

    def __init__(self, max_bytes: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(max_bytes)
        self._clock = clock
        self._lock = threading.Lock()
        self._tails: dict[PartitionId, _Tail] = {}
        self._watchers: Watchers[PartitionId] = Watchers()
        self._order: OrderedDict[tuple[PartitionId, int], int] = OrderedDict()  # (partition, start) -> bytes

    def on_commit(self, topic: str, partition: int, start_offset: int, batch: bytes) -> None:
        """``LogWriter`` commit listener: cache the batch and wake waiting consumers."""
        if self.enabled and len(batch) <= self.max_bytes:
            self._add(topic, partition, start_offset, batch_record_count(batch), batch, True, True)

    def add(
        self,
        topic: str,
        partition: int,
        start_offset: int,
        batch: RecordBatch,
        *,
        at_end: bool,
        appended_here: bool = False,
    ) -> None:
        """Cache a batch; ``at_end`` if it ended at the partition's high watermark as of now,
        ``appended_here`` if this process's writer appended it."""
        if self.enabled:
            self._add(topic, partition, start_offset, len(batch), batch, at_end, appended_here)

    def _add(
        self,
        topic: str,
        partition: int,
        start_offset: int,
        count: int,
        batch: bytes | RecordBatch,
        at_end: bool,
        appended_here: bool,
    ) -> None:
        pid = (topic, partition)
        end = start_offset + count - 1
        with self._lock:
            tail = self._live(pid)
            if tail is not None and tail.batches and start_offset <= tail.last:
                tail.confirmed_at = self._clock()  # read (or appended) through Oxia just now
                if at_end and end == tail.last:
                    tail.at_end = True
                    # A reader may have cached our own append before the writer reported it.
                    tail.appended_here = tail.appended_here or appended_here
                return  # already cached (a re-read of something we hold)
            if tail is None or not tail.batches or start_offset != tail.last + 1:
                self._drop(pid)  # not contiguous with what we hold: start over at this batch
                tail = self._tails[pid] = _Tail()
            if isinstance(batch, RecordBatch):  # a reader's batch: its bytes are copied only when they are kept
                batch = batch.encoded()
            tail.batches.append((start_offset, end, batch))
            tail.at_end, tail.appended_here, tail.confirmed_at = at_end, appended_here, self._clock()
            self._order[(pid, start_offset)] = len(batch)
            self._bytes += len(batch)
            self._evict()
            self._watchers.wake(pid)

    def _live(self, pid: PartitionId) -> _Tail | None:
        """The partition's tail, unless Oxia has not confirmed it for ``STALE_TOPIC_MS`` (then dropped)."""
        tail = self._tails.get(pid)
        if tail is not None and self._clock() - tail.confirmed_at > STALE_TOPIC_MS / 1000:
            self._drop(pid)
            return None
        return tail

    def _drop(self, pid: PartitionId) -> None:
        tail = self._tails.pop(pid, None)
        if tail is None:
            return
        for start, _, batch in tail.batches:
            self._order.pop((pid, start), None)
            self._bytes -= len(batch)

    def _evict(self) -> None:
        while self._bytes > self.max_bytes and self._order:
            (pid, start), size = self._order.popitem(last=False)
            self._bytes -= size
            tail = self._tails[pid]
            # Oldest-first eviction keeps each partition's cached range contiguous.
            while tail.batches and tail.batches[0][0] <= start:
                tail.batches.popleft()
            if not tail.batches:
                del self._tails[pid]

    def lookup(self, topic: str, partition: int, offset: int) -> tuple[int, RecordBatch] | None:
        """``(start_offset, batch)`` of the cached batch holding ``offset``, if any (opened here, outside the lock)."""
        found = None
        with self._lock:
            tail = self._live((topic, partition))
            if tail is not None and tail.batches and tail.first <= offset <= tail.last:
                found = next(((start, batch) for start, end, batch in tail.batches if start <= offset <= end), None)
            if found is None:
                self.misses += 1
                return None
            self.hits += 1
        return found[0], decode_batch(found[1], checksum=False)  # checked when it was opened, or encoded here

    def cached_high_watermark(self, topic: str, partition: int) -> int | None:
        """The partition's high watermark as this process last knew it, or None.

        None when the cache holds nothing for the partition, or when its cached
        batches did not reach the partition's end (a reader catching up).
        """
        with self._lock:
            tail = self._live((topic, partition))
            return tail.last if tail is not None and tail.batches and tail.at_end else None

    def appended_here(self, topic: str, partition: int) -> bool:
        """Whether the partition's cached end is this process's latest append.

        Such a partition's next append normally comes from here too and wakes
        its waiters through the cache; Oxia's notification of it comes first
        (at the commit point, before the writer finishes) and is best ignored.
        """
        with self._lock:
            tail = self._live((topic, partition))
            return tail is not None and bool(tail.batches) and tail.at_end and tail.appended_here

    def note_high_watermark(self, topic: str, partition: int, high_watermark: int) -> None:
        """A high watermark read from Oxia: a cached tail short of it is no longer the end; one past it belongs
        to an earlier life of the partition (deleted and created again), and is dropped."""
        pid = (topic, partition)
        with self._lock:
            tail = self._live(pid)
            if tail is None or not tail.batches:
                return
            if tail.last > high_watermark:
                self._drop(pid)
                return
            tail.confirmed_at = self._clock()
            if tail.last < high_watermark:
                tail.at_end = False

    @contextlib.contextmanager
    def watching(self, partitions: list[PartitionId], wakeup: Wakeup) -> Iterator[None]:
        """Wake ``wakeup`` whenever a batch is added at the tail of one of ``partitions``.

        Tagged ``cache_tag(pid)``: the news is in the cache, so the waiter need not
        re-read Oxia for it (this wake is not ordered with Oxia's notifications).
        """
        with self._lock:
            self._watchers.add(wakeup, {pid: cache_tag(pid) for pid in partitions})
        try:
            yield
        finally:
            with self._lock:
                self._watchers.remove(wakeup, partitions)
