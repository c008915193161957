"""``BatchingProducer`` (docs/ARCHITECTURE.md): group commit of concurrent produce calls into shared WAL blobs.

Group commit, as a database commits its log or Kafka's producer sends with
``linger.ms=0`` and requests in flight: a call that finds no flush in flight
flushes at once, so an idle log answers at its floor (one S3 PUT and one
Oxia write). Calls that arrive while a flush is in flight wait and go
together in the next one, so a busy log pays one S3 PUT and one commit per
partition for many calls. Flushes run on flusher threads (at most
``LLOG_BATCH_MAX_IN_FLIGHT``); a flush that ends starts the next. A call is
``submit``ted and gets a future, which its caller waits for on a thread
(``append_shared``), or ``submit_on`` an event loop and gets one of the
loop's (``llog serve``), with no thread of its own: each caller takes the
offsets of its own records from it. A flush answers all of its callers on
one loop with one hand-off to that loop, not one per caller.

A further flush starts beside the one in flight (at most
``LLOG_BATCH_MAX_IN_FLIGHT``) when ``LLOG_BATCH_MAX_BYTES`` is queued or the
oldest queued call has waited ``LLOG_BATCH_MAX_DELAY_MS``: a slow flush holds
the next calls at most that long. When more than
``LLOG_BATCH_MAX_BUFFER_BYTES`` is waiting, new calls are refused with
``BackPressureRejected`` (HTTP 503) instead of queueing without bound.

Each caller's own records keep their order, and the records of one flush keep
arrival order per partition; two flushes in flight at once may commit the
same partition in either order.

Used by the long-running ``llog serve``; a Lambda environment serves one
request at a time, so there each request is simply one blob.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from llog.config import Environ, env_int
from llog.errors import LlogError
from llog.format.codec import Record, records_bytes
from llog.protocol.append import AppendResult, LogWriter, SharedAppendGroup, validate_group
from server.pools import started_pool


class BackPressureRejected(LlogError):
    """The producer's buffer is full; retry later."""

    retriable = True


@dataclass(frozen=True)
class BatchingConfig:
    # A full flush's worth queued behind one in flight starts another beside it: at 4 MiB a process
    # that has more than one flush's worth waiting keeps several PUTs going (docs/PERFORMANCE_NOTES.md).
    max_bytes: int = 4 * 1024 * 1024
    max_delay_ms: int = 500
    max_buffer_bytes: int = 64 * 1024 * 1024
    max_in_flight: int = 4

    @classmethod
    def from_env(cls, env: Environ | None = None) -> BatchingConfig:
        env = os.environ if env is None else env
        return cls(
            max_bytes=env_int(env, "LLOG_BATCH_MAX_BYTES", cls.max_bytes, minimum=1),
            max_delay_ms=env_int(env, "LLOG_BATCH_MAX_DELAY_MS", cls.max_delay_ms),
            max_buffer_bytes=env_int(env, "LLOG_BATCH_MAX_BUFFER_BYTES", cls.max_buffer_bytes, minimum=1),
            max_in_flight=env_int(env, "LLOG_BATCH_MAX_IN_FLIGHT", cls.max_in_flight, minimum=1),
        )


@dataclass(frozen=True)
class _OnLoop:
    """A caller on an event loop: the future it awaits there, answered through the loop."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[list[AppendResult]]


@dataclass
class _Pending:
    """A queued call; ``caller`` is the future a thread waits for, or a loop's (``submit_on``)."""

    groups: Sequence[SharedAppendGroup]
    size: int
    enqueued_at: float
    caller: Future[list[AppendResult]] | _OnLoop
    answered: bool = False

    def claim(self) -> bool:
        """Whether the call is still wanted (its caller did not cancel it); a flush takes it if so.

        A thread's future is marked running: it can no longer be cancelled. A loop's future is only
        read here (the loop may cancel it a moment later): either way a call cancelled once its flush
        has taken it is written, and its answer dropped.
        """
        if isinstance(self.caller, _OnLoop):
            return not self.caller.future.cancelled()
        return self.caller.set_running_or_notify_cancel()


Outcome = list[AppendResult] | BaseException


class BatchingProducer:
    """Thread-safe front of a ``LogWriter``: ``submit`` queues a call, ``append_shared`` also waits for it."""

    def __init__(self, writer: LogWriter, config: BatchingConfig | None = None) -> None:
        self.writer = writer
        self.config = config or BatchingConfig()
        self._cond = threading.Condition()
        self._queue: list[_Pending] = []
        self._buffered = 0
        self._in_flight = 0
        self._closed = False
        self._flushers = started_pool(self.config.max_in_flight, "llog-flush")  # flushes are submitted from the loop
        self._timer: threading.Timer | None = None  # re-checks the queue when its oldest call reaches max_delay
        # Of the flushes that ended with results, a partition's error among them (a flush that raised is not counted):
        # what Kafka's producer reports as batch size and record queue time.
        self.flushes = 0
        self.flushed_calls = 0
        self.flushed_bytes = 0
        self.queue_seconds = 0.0  # summed over calls: from submit to their flush starting to write
        self.call_seconds = 0.0  # summed over calls: from submit to their flush's write ending (wait and write)
        self.flush_seconds = 0.0  # summed over flushes: the write (S3 PUT, Oxia commits), merging included
        self.rejected = 0

    @property
    def buffered_bytes(self) -> int:
        return self._buffered

    @property
    def in_flight(self) -> int:
        """Flushes being written now."""
        return self._in_flight

    def flush_stats(self) -> dict[str, float]:
        """The flush counters, read together (one flush's counts are never half in)."""
        with self._cond:
            return {
                "flushes": self.flushes,
                "flushed_calls": self.flushed_calls,
                "flushed_bytes": self.flushed_bytes,
                "queue_seconds": round(self.queue_seconds, 6),
                "call_seconds": round(self.call_seconds, 6),
                "flush_seconds": round(self.flush_seconds, 6),
            }

    @property
    def queued_calls(self) -> int:
        """Calls waiting for a flush to take them."""
        return len(self._queue)

    def append_shared(self, groups: Sequence[SharedAppendGroup]) -> list[AppendResult]:
        future = self.submit(groups)
        try:
            return future.result()
        except BaseException:
            self._withdraw(future)  # this caller leaves: its call must not be written for nobody
            raise

    def submit_on(
        self, loop: asyncio.AbstractEventLoop, groups: Sequence[SharedAppendGroup]
    ) -> asyncio.Future[list[AppendResult]]:
        """``submit`` from ``loop``'s thread: the loop's future of the call, answered on the loop.

        Cancelling it (its awaiting task was cancelled) withdraws the call if no flush has taken it yet,
        as cancelling ``submit``'s future does.
        """
        awaited: asyncio.Future[list[AppendResult]] = loop.create_future()
        refused = self._enqueue(groups, _OnLoop(loop, awaited))
        if refused is not None:
            awaited.set_result(refused)
        return awaited

    def submit(self, groups: Sequence[SharedAppendGroup]) -> Future[list[AppendResult]]:
        """Queue a call; its future holds one result per group once the flush that takes it has ended.

        Invalid input raises here, before anything is queued. A call the buffer has no room for is
        answered at once, each group with ``BackPressureRejected``.
        """
        future: Future[list[AppendResult]] = Future()
        refused = self._enqueue(groups, future)
        if refused is not None:
            future.set_result(refused)
        return future

    def _enqueue(
        self, groups: Sequence[SharedAppendGroup], caller: Future[list[AppendResult]] | _OnLoop
    ) -> list[AppendResult] | None:
        """Queue a call answered through ``caller``; or, refused at once, its answer (queued: None).

        A loop's caller gets no ``concurrent.futures.Future`` (and its condition variable) of its own.
        """
        for group in groups:
            validate_group(group, self.writer.root)  # invalid input must not poison a shared flush
        size = sum(records_bytes(g.records) for g in groups)
        with self._cond:
            if self._closed:
                raise LlogError("the batching producer is closed")
            if self._buffered + size > self.config.max_buffer_bytes:
                self.rejected += 1
                error = BackPressureRejected(
                    f"{self._buffered} bytes are waiting to be written; the buffer holds "
                    f"{self.config.max_buffer_bytes} (LLOG_BATCH_MAX_BUFFER_BYTES)"
                )
                return [AppendResult(g.topic, g.partition, len(g.records), error=error) for g in groups]
            self._queue.append(_Pending(groups, size, time.monotonic(), caller))
            self._buffered += size
            self._start_flushes()
        return None

    def _withdraw(self, future: Future[list[AppendResult]]) -> None:
        with self._cond:
            for pending in self._queue:
                if pending.caller is future:
                    self._queue.remove(pending)
                    self._buffered -= pending.size
                    self._cond.notify_all()
                    return

    def _start_flushes(self) -> None:
        """Hand the queue to flusher threads while it may be flushed now; called under the lock."""
        while self._queue:
            wait = self._wait_before_flush()
            if wait is None:
                return  # a flush ending starts the next
            if wait > 0:
                self._arm_timer(wait)
                return
            batch = self._take_batch()
            if not batch:
                continue  # every call taken had been cancelled
            try:
                self._flushers.submit(self._flush, batch)
            except BaseException as exc:  # no thread to write it (interpreter shutdown): its callers learn so
                self._in_flight -= 1
                _answer((pending, exc) for pending in batch)
                return

    def _arm_timer(self, wait: float) -> None:
        if self._timer is not None:
            return
        timer = threading.Timer(wait, self._on_timer)
        timer.daemon = True
        try:
            timer.start()
        except RuntimeError:
            return  # no thread: the next call or flush to end checks the queue again
        self._timer = timer

    def _on_timer(self) -> None:
        with self._cond:
            self._timer = None
            self._start_flushes()

    def _wait_before_flush(self) -> float | None:
        """Seconds until the queue may be flushed (0 or less: now; None: when a flush in flight ends)."""
        if self._in_flight == 0:
            return 0.0
        if self._in_flight >= self.config.max_in_flight:
            return None
        if self._buffered >= self.config.max_bytes:
            return 0.0
        return self.config.max_delay_ms / 1000 - (time.monotonic() - self._queue[0].enqueued_at)

    def _take_batch(self) -> list[_Pending]:
        """Take queued calls in arrival order, up to ``max_bytes`` (at least one); called under the lock.

        A call whose future was cancelled (its awaiting task was) is dropped, not written for nobody;
        the others' futures are marked running, so they can no longer be cancelled. A batch of none
        (every call taken was cancelled) counts no flush in flight.
        """
        taken = 0
        size = 0
        for pending in self._queue:
            if taken and size + pending.size > self.config.max_bytes:
                break
            taken += 1
            size += pending.size
        candidates, self._queue = self._queue[:taken], self._queue[taken:]
        self._buffered -= size
        batch = [pending for pending in candidates if pending.claim()]
        if batch:
            self._in_flight += 1
        return batch

    def _flush(self, batch: list[_Pending]) -> None:
        try:
            self._append(batch)
        finally:
            with self._cond:
                self._in_flight -= 1
                self._start_flushes()
                self._cond.notify_all()

    def _append(self, batch: list[_Pending]) -> None:
        try:
            self._write(batch)
        except BaseException as exc:  # every caller of the batch gets an answer, whatever happened
            _answer((pending, exc) for pending in batch if not pending.answered)
            if not isinstance(exc, Exception):
                raise

    def _write(self, batch: list[_Pending]) -> None:
        started = time.monotonic()
        # One merged group per partition, records in arrival order. A group of an idempotent producer or with
        # an expected offset keeps its own batch (its sequence or offset check is about exactly its records);
        # plain records arriving after it go into a new merged group, after it.
        groups: list[SharedAppendGroup] = []
        merging: dict[tuple[str, int], tuple[int, list[Record | bytes]]] = {}  # partition: its group, records
        spots: list[list[tuple[int, int]]] = []  # per call, per group: (group, records of the group before it)
        for pending in batch:
            spots.append([])
            for group in pending.groups:
                pid = (group.topic, group.partition)
                if group.producer_id is not None or group.expected_offset is not None:
                    merging.pop(pid, None)
                    spots[-1].append((len(groups), 0))
                    groups.append(group)
                    continue
                if pid not in merging:
                    merging[pid] = (len(groups), [])
                    # Its list of records fills up below, before anything reads the group.
                    groups.append(SharedAppendGroup(group.topic, group.partition, merging[pid][1]))
                index, records = merging[pid]
                spots[-1].append((index, len(records)))
                records.extend(group.records)
        results = self.writer.append_shared(groups)
        written = time.monotonic() - started
        waited = sum(started - pending.enqueued_at for pending in batch)
        with self._cond:  # counted before any caller learns of its result
            self.flushes += 1
            self.flushed_calls += len(batch)
            self.flushed_bytes += sum(pending.size for pending in batch)
            self.queue_seconds += waited
            self.call_seconds += waited + len(batch) * written
            self.flush_seconds += written
        _answer(
            (pending, [_slice(results[i], g, skip) for g, (i, skip) in zip(pending.groups, places, strict=True)])
            for pending, places in zip(batch, spots, strict=True)
        )

    def close(self) -> None:
        """Refuse new calls; return once the calls already queued are flushed."""
        with self._cond:
            self._closed = True
            self._cond.wait_for(lambda: not self._queue and self._in_flight == 0)
            if self._timer is not None:
                self._timer.cancel()
        self._flushers.shutdown(wait=False)


def _answer(outcomes: Iterable[tuple[_Pending, Outcome]]) -> None:
    """Each call's results (or the exception that stopped its flush): a caller on a thread through its future,
    the callers on an event loop together, with one ``call_soon_threadsafe`` per loop."""
    on_loops: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[list[AppendResult]], Outcome]]] = {}
    for pending, outcome in list(outcomes):  # all made first: one that raises leaves every call unanswered
        pending.answered = True
        if isinstance(pending.caller, _OnLoop):
            on_loops.setdefault(pending.caller.loop, []).append((pending.caller.future, outcome))
        elif isinstance(outcome, BaseException):
            pending.caller.set_exception(outcome)
        else:
            pending.caller.set_result(outcome)
    for loop, answers in on_loops.items():
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is left to hear it
            loop.call_soon_threadsafe(_answer_on_loop, answers)


def _answer_on_loop(answers: list[tuple[asyncio.Future[list[AppendResult]], Outcome]]) -> None:
    for awaited, outcome in answers:
        if awaited.done():  # cancelled after its flush had taken it
            continue
        if isinstance(outcome, BaseException):
            awaited.set_exception(outcome)
        else:
            awaited.set_result(outcome)


def _slice(result: AppendResult, group: SharedAppendGroup, skip: int) -> AppendResult:
    """The part of a merged partition result that belongs to one caller's group."""
    count = len(group.records)
    if result.duplicate or (skip == 0 and count == result.count):
        return result  # the group's own batch
    if result.error is not None or result.start_offset is None:
        return AppendResult(group.topic, group.partition, count, error=result.error)
    start = result.start_offset + skip
    return AppendResult(group.topic, group.partition, count, start, start + count - 1, result.index_key, result.wal_uri)
