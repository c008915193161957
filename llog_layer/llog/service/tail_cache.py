"""A bounded in-process cache of each partition's most recent batches (docs/ARCHITECTURE.md).

The writer reports every committed batch (``LogWriter(commit_listener=...)``);
readers in the same process then serve recent offsets without touching Oxia
or S3, and a consumer waiting at the cached tail is woken by the next
append (``watching``) without a round trip to Oxia.

It is opportunistic: it only knows what *this* process wrote or read. Records
at an offset never change, so a hit is always correct; what the cache may
not know is that another process appended since, deleted the topic, or moved
the log start (retention). So the cached end is the partition's high watermark
only while it is known to be current (``current``): Oxia confirmed it (a read
of ``meta/control``, which also gives the log start, or this process's append)
less than the caller's bound ago, and no change of the partition's commit keys
(``meta/control``: appends, fencing, a topic delete, retention; the ``seq/``
folder: sequential appends) has been notified since, with Oxia's change feed up
all the while. The cache follows a partition's notifications (``mark``) from
the first read that confirms it until the partition is forgotten. Only a tail
that was the partition's end when it was cached (this process's append, or a
read that reached the high watermark) counts as one: batches a catching-up
reader pulled from S3 are cached for the next request, but their end says
nothing about the partition's.

An append of this process confirms the end it committed without a read, when
the writer's commit keys for the partition are those the cache follows and
every notification of the partition unseen at the writer's report is of one of
the append's own writes: the writer reports its writes to the commit keys as
(key, Oxia version id), and a notification carries the key and the version id
of the write. Both count: Oxia counts version ids per shard, so another
process's write on another shard can get the id of one of the append's.
Any other unseen notification (another process's change, a deletion, a
reconnect of the feed: what changed while it was down was notified by nobody)
means the append confirms nothing and the next answer reads Oxia. A
notification of the append that comes after the report costs the next answer
a read.

A partition's batches are only as good as the partition: one deleted, reclaimed
and created again restarts at offset 1. So a partition's cached batches last
``STALE_TOPIC_MS`` after Oxia last confirmed it (an append here, a read that
went through Oxia, a high watermark read at or past the cached end); reclaim
waits longer than that after a deletion, and a deleted partition is confirmed
no more. A high watermark read below the cached end drops them at once, and a
topic deleted through this process, or found deleted by a read, is forgotten
at once (``forget_topic``): a read under way then caches nothing of it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from llog.config import CacheConfig
from llog.format.codec import RecordBatch, batch_record_count, decode_batch
from llog.protocol.metadata import CommitWrites, KeyVersion
from llog.protocol.topics import STALE_TOPIC_MS
from llog.store.byte_cache import ByteBoundedCache
from llog.store.changes import ChangeFeed, Wakeup, Watchers

PartitionId = tuple[str, int]
# Followed partitions without cached batches (read, then evicted or never cached) kept before they are let go.
FOLLOW_SLACK = 1024
RECENT_NOTICES = 8  # a partition's latest notifications kept, to tell whether the unseen ones were an append's


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
    confirmed_at: float = 0.0  # when Oxia last showed the partition (the cache's clock, seconds)

    @property
    def first(self) -> int:
        return self.batches[0][0]

    @property
    def last(self) -> int:
        return self.batches[-1][1]


class _Notices(Wakeup):
    """Counts the change notifications of one partition's commit keys (and the feed's reconnects, after
    which anything may have changed), with the writes (key, version id) the latest notified: registered
    on the feed for as long as the cache follows the partition, and woken before the consumers waiting on
    the same change, who then find the count moved."""

    counts = True

    def __init__(self) -> None:
        super().__init__()
        self._count_lock = threading.Lock()
        self.count = 0
        # Of the latest; the last is number ``count``. Empty: writes nobody can claim (a reconnect, a deletion).
        self._written: deque[frozenset[KeyVersion]] = deque(maxlen=RECENT_NOTICES)

    def _bump(self, written: frozenset[KeyVersion]) -> None:
        with self._count_lock:
            self.count += 1
            self._written.append(written)

    def unseen(self, seen: int) -> list[frozenset[KeyVersion]] | None:
        """The writes each notification after number ``seen`` named; None if too many to tell."""
        with self._count_lock:
            unseen = self.count - seen
            if unseen > len(self._written):
                return None
            return list(self._written)[len(self._written) - unseen :] if unseen > 0 else []

    def notified(self, tags: Iterable[Hashable | None], written: frozenset[KeyVersion]) -> None:
        self._bump(written)

    def wake(self, tag: Hashable | None = None) -> None:
        self._bump(frozenset())

    def wake_tags(self, tags: Iterable[Hashable | None]) -> None:
        self._bump(frozenset())

    def wake_all(self) -> None:
        # The feed (re)connected: what changed while it was down was notified by nobody, so no append can
        # take it for its own; it confirms nothing until a read.
        self._bump(frozenset())


@dataclass
class _Follow:
    """A partition the cache follows: its notifications, and the state Oxia last confirmed."""

    feed: ChangeFeed
    keys: Mapping[str, Hashable]
    notices: _Notices
    high_watermark: int | None = None  # as last confirmed (None: never)
    log_start: int | None = None  # as last read from meta/control (None: never)
    seen: int = -1  # ``notices.count`` when confirmed: another since means something changed
    at: float = 0.0  # when confirmed (before the read that did it)


@dataclass(frozen=True)
class Mark:
    """Taken before a read of Oxia: what the read confirms is as of this moment."""

    follow: _Follow
    seen: int
    at: float


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
        self._follows: dict[PartitionId, _Follow] = {}
        self._watchers: Watchers[PartitionId] = Watchers()
        self._order: OrderedDict[tuple[PartitionId, int], int] = OrderedDict()  # (partition, start) -> bytes

    def on_commit(
        self, topic: str, partition: int, start_offset: int, batch: bytes, written: CommitWrites | None = None
    ) -> None:
        """``LogWriter`` commit listener: cache the batch and wake waiting consumers. ``written``: the append's
        commit keys and writes to them; with those keys followed and every notification of the partition
        unseen now among its writes, the append confirms the end it committed (see the module docstring)."""
        if self.enabled and len(batch) <= self.max_bytes:
            count = batch_record_count(batch)
            end = start_offset + count - 1
            with self._lock:  # before the batch wakes a waiter, which then finds the end confirmed
                follow = self._follows.get((topic, partition))
                if (
                    follow is not None
                    and follow.high_watermark is not None
                    and end > follow.high_watermark
                    and written is not None
                    and set(written.commit_keys) == set(follow.keys)
                ):
                    # The end this append committed, as of now (see the module docstring); the log start is
                    # still the one read, so the confirmation keeps the read's age.
                    notices = follow.notices.count
                    unseen = follow.notices.unseen(follow.seen)  # those up to ``notices`` at least
                    if unseen is not None and all(named and named <= written.writes for named in unseen):
                        follow.high_watermark, follow.seen = end, notices
            self._add(topic, partition, start_offset, count, batch, True)

    def add(
        self,
        topic: str,
        partition: int,
        start_offset: int,
        batch: RecordBatch,
        *,
        at_end: bool,
        read_by: Mark | None = None,
    ) -> None:
        """Cache a batch; ``at_end`` if it ended at the partition's high watermark as of now. ``read_by``: the
        mark of the read that found it; the batch is of another incarnation, and dropped, when the partition
        was forgotten (its topic deleted here) or followed under other keys since."""
        if self.enabled:
            self._add(topic, partition, start_offset, len(batch), batch, at_end, read_by)

    def _add(
        self,
        topic: str,
        partition: int,
        start_offset: int,
        count: int,
        batch: bytes | RecordBatch,
        at_end: bool,
        read_by: Mark | None = None,
    ) -> None:
        pid = (topic, partition)
        end = start_offset + count - 1
        with self._lock:
            if read_by is not None and self._follows.get(pid) is not read_by.follow:
                return
            tail = self._live(pid)
            if tail is not None and tail.batches and start_offset <= tail.last:
                tail.confirmed_at = self._clock()  # read (or appended) through Oxia just now
                if at_end and end == tail.last:
                    tail.at_end = True
                return  # already cached (a re-read of something we hold)
            if tail is None or not tail.batches or start_offset != tail.last + 1:
                self._drop_batches(pid)  # not contiguous with what we hold: start over at this batch
                tail = self._tails[pid] = _Tail()
            if isinstance(batch, RecordBatch):  # a reader's batch: its bytes are copied only when they are kept
                batch = batch.encoded()
            tail.batches.append((start_offset, end, batch))
            tail.at_end, tail.confirmed_at = at_end, self._clock()
            self._order[(pid, start_offset)] = len(batch)
            self._bytes += len(batch)
            self._evict()
            self._watchers.wake(pid)

    def _live(self, pid: PartitionId) -> _Tail | None:
        """The partition's tail, unless Oxia has not confirmed it for ``STALE_TOPIC_MS`` (then dropped)."""
        tail = self._tails.get(pid)
        if tail is not None and self._clock() - tail.confirmed_at > STALE_TOPIC_MS / 1000:
            self._forget(pid)
            return None
        return tail

    def _forget(self, pid: PartitionId) -> None:
        """Drop the partition's batches and stop following it (under the lock; the feed's lock comes after)."""
        self._drop_batches(pid)
        follow = self._follows.pop(pid, None)
        if follow is not None:
            follow.feed.unwatch(follow.notices, follow.keys)

    def forget_topic(self, topic: str) -> None:
        """Everything cached of ``topic`` (deleted by this process; other processes learn it from Oxia)."""
        with self._lock:
            for pid in [pid for pid in {*self._tails, *self._follows} if pid[0] == topic]:
                self._forget(pid)

    def _drop_batches(self, pid: PartitionId) -> None:
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

    def mark(self, topic: str, partition: int, feed: ChangeFeed, keys: Mapping[str, Hashable]) -> Mark:
        """Before a read of the partition in Oxia: follow its notifications on ``feed`` (``keys``: its commit
        keys) if not yet, and note the moment, for ``note_high_watermark`` to confirm what the read finds.

        Followed under other keys (resolved before the topic existed, or of an incarnation deleted since), the
        partition is forgotten, its batches with it, and followed under ``keys``: the old keys never change."""
        pid = (topic, partition)
        with self._lock:
            follow = self._follows.get(pid)
            if follow is not None and follow.keys != keys:
                self._forget(pid)
                follow = None
            if follow is None:
                if len(self._follows) > len(self._tails) + FOLLOW_SLACK:
                    for idle in [p for p in self._follows if p not in self._tails]:
                        self._forget(idle)
                follow = self._follows[pid] = _Follow(feed, dict(keys), _Notices())
                feed.watch(follow.notices, follow.keys)
            return Mark(follow, follow.notices.count, self._clock())

    def current(self, topic: str, partition: int, *, max_age_s: float) -> tuple[int, int] | None:
        """``(high watermark, log start)`` when the cached tail is known to be the partition's end now: Oxia
        confirmed it less than ``max_age_s`` ago, and the feed, up since, notified no change of it."""
        pid = (topic, partition)
        with self._lock:
            tail = self._live(pid)
            follow = self._follows.get(pid)
            if tail is None or not tail.batches or not tail.at_end or follow is None:
                return None
            if follow.high_watermark != tail.last or follow.log_start is None or not follow.feed.live:
                return None
            if follow.notices.count != follow.seen or self._clock() - follow.at >= max_age_s:
                return None
            return follow.high_watermark, follow.log_start

    def last_read(self, topic: str, partition: int, *, max_age_s: float) -> tuple[int, int] | None:
        """``(high watermark, log start)`` as the last read of Oxia showed them, when that read is less than
        ``max_age_s`` old and no change of the partition was notified since; None otherwise (never read here,
        forgotten). Unlike ``current``, whether the feed is up is not asked: what Oxia out of reach falls
        back to, for no longer than the bound on any answer's age."""
        with self._lock:
            follow = self._follows.get((topic, partition))
            if follow is None or follow.high_watermark is None or follow.log_start is None:
                return None
            if follow.notices.count != follow.seen or self._clock() - follow.at >= max_age_s:
                return None
            return follow.high_watermark, follow.log_start

    def note_high_watermark(
        self, topic: str, partition: int, high_watermark: int, *, log_start: int | None = None, mark: Mark | None = None
    ) -> None:
        """A high watermark read from Oxia: a cached tail short of it is no longer the end; one past it belongs
        to an earlier life of the partition (deleted and created again), and is dropped. With the ``mark``
        taken before the read, the high watermark and ``log_start`` read are confirmed as of the mark."""
        pid = (topic, partition)
        with self._lock:
            if mark is not None and self._follows.get(pid) is mark.follow and log_start is not None:
                follow = mark.follow
                follow.high_watermark, follow.log_start, follow.seen, follow.at = (
                    high_watermark,
                    log_start,
                    mark.seen,
                    mark.at,
                )
            tail = self._live(pid)
            if tail is None or not tail.batches:
                return
            if tail.last > high_watermark:
                self._drop_batches(pid)
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
