"""The consume service behind ``POST /consume`` (docs/HTTP_API.md).

For each requested partition: plan the batches from ``fetch_offset`` (a tail
cache hit needs no Oxia; otherwise ``meta/control`` and the sparse index; when
several partitions need their control record, those are one Oxia read request
per shard),
fetch every needed byte range once per request (slices of one shared WAL blob
requested by several partitions become one range GET), decode, and cut the
records to ``partition_max_bytes`` and the request's ``max_bytes``.

Long-poll: until ``min_bytes`` are available or ``max_wait_ms`` passes, the
request sleeps until something it waits on may have changed, then reads
again. It is woken by Oxia's change notifications for the partitions'
commit keys (``meta/control``, which a CAS append changes, and the
``seq/`` folder, where a sequential append adds a key), shared by every
waiter of the process (``OxiaStore.changes()``), and, with a tail cache, by
this process's own appends, which it then serves from the cache without
reading Oxia. Within one long-poll, a partition's ``meta/control`` read in
one round is used again in the next unless a notification named it (a
partition's keys are on one Oxia shard, whose notifications arrive in commit
order, so a change committed before the append that woke the waiter is
notified before it): a sequential partition woken by an append then costs one
index scan. Correctness does not rest on notifications: with the
notification streams up, a waiter re-reads every ``RECHECK_S`` regardless;
while they are not (connecting, or the server has notifications off), it
re-polls with backoff from 20 ms doubling to 500 ms.

With a tail cache, every round, the first included, answers a partition from
the cache alone (its records, or nothing at its end) only while the cache
knows its end to be current (``TailCache.current``): confirmed by a read of
Oxia less than ``RECHECK_S`` ago, or by this process's append since, with no
change of the partition notified since. Otherwise the partition's control
record is read, which confirms it for the next answers: another process's
append, a topic deleted (``UnknownTopic``) or a log start moved by retention
(``OffsetOutOfRange`` below it) is answered as without the cache, once its
notification has reached this process, and after ``RECHECK_S`` at most.

A fetch offset in a range a rebuild could not recover (a LOST index entry)
fails with ``RecordsLost``, whose ``next_fetch_offset`` is the first offset
after the range; records before such a range are served first.

A deleted topic (``llog.protocol.topics``) is refused with ``UnknownTopic``
for the whole request until its reclaim ends: deletion fences every
partition, and reclaim deletes each partition's keys before the topic's
record, so only the read of a fenced partition, or of one not initialized,
costs a look at its topic record.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field

from llog.errors import (
    BlobNotFound,
    LlogError,
    OffsetOutOfRange,
    OxiaUnavailable,
    PartitionNotInitialized,
    RecordsLost,
    UnknownTopic,
)
from llog.format.codec import RecordBatch, decode_batch, headers_bytes
from llog.format.kv.control import ControlRecord, LogState
from llog.format.kv.document import INITIAL_OFFSET
from llog.format.kv.index import EntryType, IndexedBatch
from llog.protocol.read import LogReader, LogRecord, TimestampOffset, readable, records_in
from llog.protocol.topics import TopicRegistry
from llog.service.tail_cache import Mark, PartitionId, TailCache, cache_tag
from llog.store.changes import Changes, Wakeup
from llog.store.fetch import BlobFetcher
from llog.store.object_cache import ObjectCache

MAX_BATCHES_PER_PARTITION = 64
POLL_INITIAL_S = 0.02
POLL_MAX_S = 0.5
# With notifications flowing, how long a waiter trusts them before re-reading Oxia anyway:
# the most a lost notification can delay a record, for one read per waiting partition
# a second (an idle long-poll of 20 s costs about 20 reads instead of about 45). Also
# the longest a tail cache's confirmation of a partition's end is trusted.
RECHECK_S = 1.0
EVERYTHING = Changes(everything=True)


def _control_tag(pid: PartitionId) -> tuple[str, PartitionId]:
    """The wake-up tag of a partition's ``meta/control`` (its ``seq/`` folder's tag is ``pid`` itself)."""
    return ("meta/control", pid)


@dataclass(frozen=True)
class FetchPartition:
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int


@dataclass(frozen=True)
class ConsumeRequest:
    partitions: list[FetchPartition]
    max_wait_ms: int
    min_bytes: int
    max_bytes: int


def record_bytes(record: LogRecord) -> int:
    return len(record.value) + len(record.key or b"") + headers_bytes(record.headers)


@dataclass(frozen=True)
class PartitionFetch:
    """One partition's part of a consume response."""

    topic: str
    partition: int
    fetch_offset: int
    records: list[LogRecord] = field(default_factory=list)
    high_watermark: int | None = None
    log_start_offset: int = INITIAL_OFFSET
    error: LlogError | None = None

    @property
    def next_fetch_offset(self) -> int:
        if self.records:
            return self.records[-1].offset + 1
        return self.error.next_offset if isinstance(self.error, RecordsLost) else self.fetch_offset

    @property
    def nbytes(self) -> int:
        return sum(record_bytes(r) for r in self.records)


@dataclass(frozen=True)
class OffsetQuery:
    """One partition of ``POST /offsets``: a time in ms, or ``earliest`` / ``latest``."""

    topic: str
    partition: int
    timestamp: int | str


@dataclass(frozen=True)
class OffsetAnswer:
    query: OffsetQuery
    found: TimestampOffset | None = None
    error: LlogError | None = None


@dataclass
class _Plan:
    request: FetchPartition
    high_watermark: int | None = None
    log_start_offset: int = INITIAL_OFFSET
    batches: list[IndexedBatch] = field(default_factory=list)
    cached: list[tuple[int, RecordBatch]] = field(default_factory=list)  # (start_offset, batch)
    error: LlogError | None = None
    known_empty: bool = False
    from_cache: bool = False  # planned from the tail cache alone: no Oxia read
    mark: Mark | None = None  # the tail cache's, taken before the read of Oxia that planned ``batches``


class ConsumeService:
    def __init__(
        self,
        reader: LogReader,
        *,
        tail_cache: TailCache | None = None,
        object_cache: ObjectCache | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reader = reader
        self.tail_cache = tail_cache if tail_cache is not None and tail_cache.enabled else None
        self.object_cache = object_cache if object_cache is not None and object_cache.enabled else None
        self._clock = clock

    @functools.cached_property
    def _topics(self) -> TopicRegistry:
        """Read only for a fenced partition or one not initialized (a deleted topic's are): created on first use."""
        return TopicRegistry(self.reader.storage.oxia, root=self.reader.storage.root)

    def _refuse_if_deleted(self, topic: str) -> None:
        """``UnknownTopic`` if the topic's record says it was deleted: its partitions are fenced until reclaim
        deletes each one's keys, and the record last (``llog.protocol.topics``)."""
        record = self._topics.get(topic)
        if record is not None and record.deleted:
            raise UnknownTopic(topic, f"topic {topic!r} was deleted")

    @classmethod
    def from_env(cls) -> ConsumeService:
        """The consume Lambda's service: a cache of compacted objects (``LLOG_CONSUME_OBJECT_CACHE_BYTES``)."""
        return cls(LogReader.from_env(), object_cache=ObjectCache.from_env())

    def close(self) -> None:
        self.reader.close()

    def list_offsets(self, request: list[OffsetQuery]) -> list[OffsetAnswer]:
        """``POST /offsets``: each partition's offset for a time (or earliest, latest); failures inline."""
        answers = []
        for query in request:
            try:
                found = self.reader.offset_for_timestamp(query.topic, query.partition, query.timestamp)
            except LlogError as exc:
                answers.append(OffsetAnswer(query, error=exc))
            else:
                answers.append(OffsetAnswer(query, found))
        return answers

    def consume(self, request: ConsumeRequest) -> list[PartitionFetch]:
        deadline = self._clock() + request.max_wait_ms / 1000
        wakeup = Wakeup()
        feed = self.reader.storage.oxia.changes()
        with self._watching(request, wakeup):
            delay = POLL_INITIAL_S
            changed = Changes()
            controls: dict[PartitionId, ControlRecord] = {}  # read in an earlier round, not notified since
            recheck_at = self._clock() + RECHECK_S
            while True:
                now = self._clock()
                final = now >= deadline
                # The last round reads every control record afresh, and so does one every RECHECK_S however
                # often notifications came. (A partition answered from the tail cache is read again once the
                # cache's confirmation of its end is RECHECK_S old, or a notification names it.)
                if final or now >= recheck_at:
                    changed, controls = EVERYTHING, {}
                if changed.everything:
                    recheck_at = now + RECHECK_S
                results = self._fetch(request, controls)
                for result in results:
                    if isinstance(result.error, UnknownTopic):
                        if self.tail_cache is not None:
                            self.tail_cache.forget_topic(result.topic)
                        raise result.error
                if final or sum(r.nbytes for r in results) >= request.min_bytes or all(r.error for r in results):
                    return results
                remaining = deadline - self._clock()
                live = feed.live
                if live:
                    timeout = min(max(0.0, recheck_at - self._clock()), remaining)
                else:
                    timeout, delay = min(delay, remaining), min(delay * 2, POLL_MAX_S)
                # Timed out: nothing was notified, but something may have changed unnoticed.
                changed = wakeup.wait(timeout) or EVERYTHING
                # Only Oxia's notifications are ordered with control's changes: a wake by the
                # tail cache (this process's own append) may come first, so it keeps none.
                notified = live and feed.live and not changed.everything
                notified = notified and not any(cache_tag(p) in changed.tags for p in controls)
                controls = {p: c for p, c in controls.items() if notified and _control_tag(p) not in changed.tags}

    @contextlib.contextmanager
    def _watching(self, request: ConsumeRequest, wakeup: Wakeup) -> Iterator[None]:
        """Register ``wakeup`` for the request's partitions before the first read, so no change is missed."""
        if request.max_wait_ms <= 0:
            yield
            return
        pids = list(dict.fromkeys((p.topic, p.partition) for p in request.partitions))
        keys: dict[str, Hashable] = {}
        for pid in pids:
            try:
                partition_keys = self.reader.layouts.keys(*pid)
            except LlogError:
                continue  # an invalid name: its read reports the error
            keys[partition_keys.control], keys[partition_keys.sequences] = _control_tag(pid), pid
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.reader.storage.oxia.changes().watching(wakeup, keys))
            if self.tail_cache is not None:
                stack.enter_context(self.tail_cache.watching(pids, wakeup))
            yield

    # --- one round -------------------------------------------------------------

    def _fetch(self, request: ConsumeRequest, controls: dict[PartitionId, ControlRecord]) -> list[PartitionFetch]:
        """One read of every partition; a cached tail is trusted while the cache knows it to be current (its
        own bound and notifications: the same in every round, the first and the last included).

        ``controls``: control records still current, used instead of reading them; each one read is added.
        """
        marks = self._marks(request)
        plans = [self._plan_from_cache(p) for p in request.partitions]
        unread = [plan for plan in plans if not plan.from_cache]
        fresh = self._read_controls(unread, controls)
        for plan in unread:
            self._plan_from_oxia(plan, controls, fresh, marks.get((plan.request.topic, plan.request.partition)))
        fetcher = BlobFetcher(self.reader.storage.blobs, self.object_cache)
        # A failed prefetch is not fatal: each partition meets the error again
        # when it reads its own bytes, and reports it.
        with contextlib.suppress(LlogError):
            fetcher.prefetch([b.entry.ref for plan in plans if plan.error is None for b in plan.batches])
        budget = request.max_bytes
        results: list[PartitionFetch] = []
        for plan in plans:
            result = self._assemble(plan, fetcher, budget, first=not any(r.records for r in results))
            budget -= result.nbytes
            results.append(result)
        return results

    def _marks(self, request: ConsumeRequest) -> dict[PartitionId, Mark]:
        """With a tail cache, each partition's mark, taken before this round reads anything of it."""
        cache = self.tail_cache
        if cache is None:
            return {}
        feed = self.reader.storage.oxia.changes()
        marks: dict[PartitionId, Mark] = {}
        for req in request.partitions:
            try:
                keys = self.reader.layouts.keys(req.topic, req.partition)
            except LlogError:
                continue  # an invalid name, an unknown topic: its read reports the error
            marks[(req.topic, req.partition)] = cache.mark(
                req.topic, req.partition, feed, dict.fromkeys(keys.commit_keys)
            )
        return marks

    def _plan_from_cache(self, req: FetchPartition) -> _Plan:
        """What the tail cache holds from ``fetch_offset``; ``from_cache`` when that is the whole plan: the
        cache knows the partition's end to be current, and ``fetch_offset`` is in the cached range or just
        past it (not below the log start)."""
        plan = _Plan(req)
        cache = self.tail_cache
        if cache is None:
            return plan
        current = cache.current(req.topic, req.partition, max_age_s=RECHECK_S)
        if current is not None:
            high_watermark, log_start = current
            if req.fetch_offset < log_start:
                return plan  # Oxia's answer: OffsetOutOfRange
            plan.log_start_offset = log_start
            if req.fetch_offset == high_watermark + 1:
                plan.high_watermark, plan.known_empty, plan.from_cache = high_watermark, True, True
                return plan
        offset = req.fetch_offset
        while (hit := cache.lookup(req.topic, req.partition, offset)) is not None:
            plan.cached.append(hit)
            offset = hit[0] + len(hit[1])
        if plan.cached and current is not None:
            plan.high_watermark, plan.from_cache = current[0], True
        return plan

    def _read_controls(
        self, plans: list[_Plan], controls: dict[PartitionId, ControlRecord]
    ) -> dict[PartitionId, ControlRecord | LlogError]:
        """When several partitions in ``plans`` need a ``meta/control`` that ``controls`` lacks: all of them, in
        one Oxia request per shard; the error of that read for each, when it failed.

        A partition missing from the answer (not initialized, an unreadable record)
        reads its own, and meets its error there. A failed read is not repeated
        partition by partition: Oxia was out of reach for all of them.
        """
        wanted: dict[PartitionId, tuple[str, str]] = {}  # (key, partition key)
        for plan in plans:
            pid = (plan.request.topic, plan.request.partition)
            if pid not in controls:
                with contextlib.suppress(LlogError):  # an invalid name: its read reports it
                    keys = self.reader.layouts.keys(*pid)
                    wanted[pid] = keys.control, keys.partition_key
        if len(wanted) < 2:
            return {}
        pids = list(wanted)
        try:
            found = self.reader.storage.oxia.get_many([wanted[p] for p in pids])
        except LlogError as exc:
            return dict.fromkeys(pids, exc)
        fresh: dict[PartitionId, ControlRecord | LlogError] = {}
        for pid, record in zip(pids, found, strict=True):
            if record is not None:
                with contextlib.suppress(LlogError):
                    fresh[pid] = ControlRecord.decode(record.value)
        return fresh

    def _plan_from_oxia(
        self,
        plan: _Plan,
        controls: dict[PartitionId, ControlRecord],
        fresh: dict[PartitionId, ControlRecord | LlogError],
        mark: Mark | None,
    ) -> None:
        """The rest of ``plan`` from ``meta/control`` and the index.

        ``controls``: records a long-poll reuses, and each one read is added. ``fresh``: records
        ``_read_controls`` read just now (never of a partition in ``controls``), or its error.
        ``mark``: the tail cache's, taken before this round's reads; what they found confirms its end (not
        when the control record is one read in an earlier round).
        """
        req = plan.request
        cache = self.tail_cache
        plan.mark = mark
        try:
            pid = (req.topic, req.partition)
            just_read = fresh.get(pid)
            reused = controls.get(pid) if just_read is None else None
            try:
                if isinstance(just_read, LlogError):
                    raise just_read
                info, scanned = self.reader.tail(
                    req.topic,
                    req.partition,
                    req.fetch_offset,
                    page=MAX_BATCHES_PER_PARTITION,
                    control=just_read if just_read is not None else reused,
                    fresh=just_read is not None,
                )
            except PartitionNotInitialized:
                self._refuse_if_deleted(req.topic)  # its keys already reclaimed, its record not yet
                raise
            controls[pid] = info.control
            if info.control.log_state is LogState.FENCED:
                self._refuse_if_deleted(req.topic)
            plan.high_watermark = info.high_watermark
            plan.log_start_offset = info.log_start
            if cache is not None:
                # A control record read in an earlier round is older than this round's mark: what it says
                # (a CAS partition's end, the log start) confirms nothing as of the mark.
                cache.note_high_watermark(
                    req.topic,
                    req.partition,
                    info.high_watermark,
                    log_start=info.log_start,
                    mark=mark if reused is None else None,
                )
            if plan.cached and plan.cached[-1][0] + len(plan.cached[-1][1]) - 1 > info.high_watermark:
                plan.cached.clear()  # an earlier life of the partition (deleted, created again): not these
            if req.fetch_offset < info.log_start:
                plan.cached.clear()  # removed by retention: answered as without the cache
            # Cached batches of a reader catching up: serve them; the next request reads on.
            if plan.cached or req.fetch_offset == info.high_watermark + 1:
                return
            if not info.log_start <= req.fetch_offset <= info.high_watermark:
                raise OffsetOutOfRange(req.topic, req.partition, req.fetch_offset, info.log_start, info.high_watermark)
            estimate = 0
            batches = (
                self.reader.batches(info, req.fetch_offset, page=MAX_BATCHES_PER_PARTITION)
                if scanned is None
                else scanned
            )
            for batch in batches:
                if batch.entry.type is EntryType.LOST and plan.batches:
                    break  # serve the records before it; the next fetch starts in it and is told
                plan.batches.append(readable(req.topic, req.partition, batch))
                length = batch.entry.ref.byte_length
                estimate += length if length is not None else req.partition_max_bytes
                if estimate >= req.partition_max_bytes or len(plan.batches) >= MAX_BATCHES_PER_PARTITION:
                    break
        except LlogError as exc:
            # Oxia out of reach: serve what the cache holds from the offset, as of the last read of Oxia, only
            # while that read is under RECHECK_S old and no change was notified since (a delete or retention
            # makes Oxia's answer another). Otherwise, and for any other error (a deleted topic: UnknownTopic),
            # the error is the answer, as without the cache.
            last_read = (
                cache.last_read(req.topic, req.partition, max_age_s=RECHECK_S)
                if cache is not None and plan.cached and isinstance(exc, OxiaUnavailable)
                else None
            )
            if last_read is not None and req.fetch_offset >= last_read[1]:
                cached_end = plan.cached[-1][0] + len(plan.cached[-1][1]) - 1
                plan.high_watermark, plan.log_start_offset = max(last_read[0], cached_end), last_read[1]
            else:
                plan.cached.clear()
                plan.error = exc

    def _assemble(self, plan: _Plan, fetcher: BlobFetcher, budget: int, *, first: bool) -> PartitionFetch:
        req = plan.request
        limit = min(req.partition_max_bytes, budget)
        records: list[LogRecord] = []
        size = 0
        try:
            sources: list[tuple[int, RecordBatch]] = list(plan.cached)
            for batch in plan.batches:
                start, decoded = self._decode(req, batch, fetcher)  # a refetch may answer a wider batch
                sources.append((start, decoded))
                if self.tail_cache is not None:
                    at_end = plan.high_watermark is not None and batch.end_offset >= plan.high_watermark
                    self.tail_cache.add(req.topic, req.partition, start, decoded, at_end=at_end, read_by=plan.mark)
            offset = req.fetch_offset
            for start, decoded in sources:
                if offset >= start + len(decoded):
                    continue
                i = offset - start
                taken, nbytes = decoded.fitting(i, limit - size)
                # The first record of the first non-empty partition always goes
                # out, however large, so a consumer can always make progress.
                if taken == 0 and first and not records:
                    taken, nbytes = 1, decoded.sizes_in(i, i + 1)[0]
                records.extend(records_in(decoded, start, offset, offset + taken))
                size += nbytes
                offset += taken
                if offset < start + len(decoded):
                    return self._result(plan, records)
        except LlogError as exc:
            if not records:
                return PartitionFetch(
                    req.topic, req.partition, req.fetch_offset, [], plan.high_watermark, plan.log_start_offset, exc
                )
        return self._result(plan, records, plan.error)

    def _decode(self, req: FetchPartition, batch: IndexedBatch, fetcher: BlobFetcher) -> tuple[int, RecordBatch]:
        try:
            return batch.start_offset, decode_batch(fetcher.get(batch.entry.ref), expected_count=batch.entry.msg_count)
        except BlobNotFound:
            # Compaction replaced the entry and GC removed its object after we planned (LogReader.refetch).
            fresh, records = self.reader.refetch(req.topic, req.partition, batch.start_offset)
            return fresh.start_offset, records

    @staticmethod
    def _result(plan: _Plan, records: list[LogRecord], error: LlogError | None = None) -> PartitionFetch:
        req = plan.request
        return PartitionFetch(
            req.topic, req.partition, req.fetch_offset, records, plan.high_watermark, plan.log_start_offset, error
        )
