"""Unit tests of ``BatchingProducer`` (llog/batching.py): coalescing, ordering, fan-out, flush triggers,
back-pressure, validation, close.

The batcher only needs its writer's ``root`` and ``append_shared(groups)``.
``RecordingWriter`` below provides exactly that: it records every call and
numbers each partition's records from 1, as the log would. It stands in for
the writer's interface only (no Oxia, no S3 behaviour is imitated); the same
batcher on a real writer and Oxia is exercised in
tests/integration/test_consume.py.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Sequence
from typing import Any, cast

import pytest

from llog.errors import InvalidArgument, InvalidTopicName, LlogError, LogFenced
from llog.format.codec import Record
from llog.protocol.append import AppendResult, LogWriter, SharedAppendGroup
from server.batching import BackPressureRejected, BatchingConfig, BatchingProducer


class RecordingWriter:
    root = "llog"

    def __init__(
        self,
        *,
        gate: threading.Event | None = None,
        gated_calls: int | None = None,
        fail: dict[tuple[str, int], LlogError] | None = None,
    ):
        """``gate`` holds the first ``gated_calls`` calls (all of them when None) until it is set."""
        self.calls: list[list[SharedAppendGroup]] = []
        self.next_offset: dict[tuple[str, int], int] = {}
        self.gate = gate
        self.gated_calls = gated_calls
        self.fail = fail or {}
        self.raise_exc: BaseException | None = None
        self.entered = threading.Event()
        self.started = 0
        self._lock = threading.Lock()

    def append_shared(self, groups: Sequence[SharedAppendGroup]) -> list[AppendResult]:
        with self._lock:
            number = self.started
            self.started += 1
        self.entered.set()
        if self.gate is not None and (self.gated_calls is None or number < self.gated_calls):
            assert self.gate.wait(10), "test gate never opened"
        with self._lock:
            return self._record(groups)

    def _record(self, groups: Sequence[SharedAppendGroup]) -> list[AppendResult]:
        self.calls.append(list(groups))
        if self.raise_exc is not None:
            raise self.raise_exc
        results = []
        for g in groups:
            pid = (g.topic, g.partition)
            if pid in self.fail:
                results.append(AppendResult(g.topic, g.partition, len(g.records), error=self.fail[pid]))
                continue
            start = self.next_offset.get(pid, 1)
            end = start + len(g.records) - 1
            self.next_offset[pid] = end + 1
            results.append(
                AppendResult(
                    g.topic, g.partition, len(g.records), start, end,
                    f"llog/{g.topic}/partitions/{g.partition}/index/{end:020d}", "s3://bucket/llog/wal-shared/x",
                )
            )
        return results

    def records_of(self, topic: str, partition: int) -> list[Any]:
        """Every record the writer received for a partition, in offset order."""
        pid = (topic, partition)
        return [r for call in self.calls for g in call if (g.topic, g.partition) == pid for r in g.records]


def producer(writer: RecordingWriter, **config: int) -> BatchingProducer:
    return BatchingProducer(cast(LogWriter, writer), BatchingConfig(**config))


def run_in_thread(fn: Any, *args: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def target() -> None:
        try:
            out.append(fn(*args))
        except BaseException as exc:
            out.append(exc)

    t = threading.Thread(target=target)
    t.start()
    return t, out


def wait_until(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.002)


@pytest.fixture
def writer() -> RecordingWriter:
    return RecordingWriter()


def held_first_flush(**config: int) -> tuple[RecordingWriter, BatchingProducer, threading.Event, Any]:
    """A producer whose first flush (of one record to ``warmup/0``) is held in the writer until the gate opens."""
    gate = threading.Event()
    writer = RecordingWriter(gate=gate, gated_calls=1)
    batcher = producer(writer, **config)
    first = run_in_thread(batcher.append_shared, [SharedAppendGroup("warmup", 0, [b"w"])])
    assert writer.entered.wait(5)
    return writer, batcher, gate, first


def test_a_single_call_is_one_flush_with_its_offsets(writer):
    batcher = producer(writer)
    try:
        (result,) = batcher.append_shared([SharedAppendGroup("orders", 0, [b"a", b"b"])])
    finally:
        batcher.close()
    assert (result.ok, result.start_offset, result.end_offset, result.count) == (True, 1, 2, 2)
    assert result.index_key == "llog/orders/partitions/0/index/00000000000000000002"
    assert batcher.flushes == 1
    assert len(writer.calls) == 1


class SlowSecondCall(RecordingWriter):
    """Holds its first call until the gate opens, then takes ``second_s`` over its second."""

    def __init__(self, gate: threading.Event, second_s: float):
        super().__init__(gate=gate, gated_calls=1)
        self.second_s = second_s

    def append_shared(self, groups: Sequence[SharedAppendGroup]) -> list[AppendResult]:
        if self.started == 1:
            time.sleep(self.second_s)
        return super().append_shared(groups)


def test_flushes_report_their_bytes_the_time_calls_waited_and_the_time_spent_writing():
    held_s, second_s = 0.2, 0.5
    gate = threading.Event()
    writer = SlowSecondCall(gate, second_s)
    batcher = producer(writer, max_delay_ms=60_000, max_bytes=1 << 20)
    first = run_in_thread(batcher.append_shared, [SharedAppendGroup("warmup", 0, [b"w"])])
    assert writer.entered.wait(5)
    threads = [run_in_thread(batcher.append_shared, [SharedAppendGroup("orders", 0, [b"x" * 10, b"y"])])
               for _ in range(3)]  # fmt: skip
    wait_until(lambda: batcher.queued_calls == 3)
    time.sleep(held_s)
    gate.set()
    for t, _ in [*threads, first]:
        t.join(10)
    batcher.close()

    assert (batcher.flushes, batcher.flushed_calls) == (2, 4)
    assert batcher.flushed_bytes == 1 + 3 * 11, "the warm-up's record, then three calls of 11 bytes"
    assert batcher.flush_seconds >= held_s + second_s, "each flush was writing all that time"
    assert batcher.queue_seconds >= 3 * held_s, "each queued call waited out the held flush"
    assert batcher.queue_seconds < 3 * (held_s + second_s), "a call's wait ends when its flush starts to write"
    assert batcher.call_seconds >= batcher.queue_seconds + 3 * second_s, "then each waited out its own flush"
    assert batcher.flush_stats() == {
        "flushes": 2, "flushed_calls": 4, "flushed_bytes": 34, "queue_seconds": round(batcher.queue_seconds, 6),
        "call_seconds": round(batcher.call_seconds, 6), "flush_seconds": round(batcher.flush_seconds, 6),
    }  # fmt: skip


def test_a_flush_that_raises_is_not_counted_and_a_partition_error_is():
    writer = RecordingWriter(fail={("orders", 1): LogFenced("orders", 1)})
    batcher = producer(writer)
    (failed,) = batcher.append_shared([SharedAppendGroup("orders", 1, [b"abc"])])
    writer.raise_exc = LlogError("the writer broke")
    with pytest.raises(LlogError, match="the writer broke"):
        batcher.append_shared([SharedAppendGroup("orders", 0, [b"de"])])
    batcher.close()
    assert isinstance(failed.error, LogFenced)
    assert (batcher.flushes, batcher.flushed_calls, batcher.flushed_bytes) == (1, 1, 3)


def test_an_idle_producer_flushes_at_once_whatever_the_max_delay(writer):
    batcher = producer(writer, max_bytes=1 << 20, max_delay_ms=60_000)
    start = time.monotonic()
    (result,) = batcher.append_shared([SharedAppendGroup("orders", 0, [b"x"])])
    elapsed = time.monotonic() - start
    batcher.close()
    assert result.ok
    assert elapsed < 5, "nothing was in flight: the call must not wait for max_delay_ms"


def test_calls_arriving_during_a_flush_go_together_in_the_next_one_each_with_its_own_offsets():
    writer, batcher, gate, (first, first_out) = held_first_flush(max_delay_ms=60_000, max_bytes=1 << 20)
    n = 12

    def call(i: int) -> list[AppendResult]:
        groups = [SharedAppendGroup("orders", i % 3, [f"{i}-{j}".encode() for j in range(i % 4 + 1)])]
        if i % 2:
            groups.append(SharedAppendGroup("audit", 0, [f"audit-{i}".encode()]))
        return batcher.append_shared(groups)

    threads = [run_in_thread(call, i) for i in range(n)]
    wait_until(lambda: batcher.queued_calls == n)
    assert len(writer.calls) == 0, "the queued calls wait for the flush in flight"
    gate.set()
    for t, _ in [*threads, (first, first_out)]:
        t.join(10)
    batcher.close()

    assert len(writer.calls) == 2, "the held flush, then one shared append of every call queued behind it"
    assert batcher.flushes == 2
    assert batcher.flushed_calls == n + 1
    call_groups = writer.calls[1]
    # One merged group per partition.
    merged = sorted((g.topic, g.partition) for g in call_groups)
    assert merged == [("audit", 0), ("orders", 0), ("orders", 1), ("orders", 2)]
    for i, (_, out) in enumerate(threads):
        (results,) = out
        assert all(r.ok for r in results)
        # Fan-out: each caller's offsets point at exactly its own records.
        for r in results:
            received = writer.records_of(r.topic, r.partition)[r.start_offset - 1 : r.end_offset]
            if r.topic == "orders":
                assert received == [f"{i}-{j}".encode() for j in range(i % 4 + 1)]
            else:
                assert received == [f"audit-{i}".encode()]
    # Offsets of one partition are disjoint and contiguous from 1.
    for pid in [("orders", 0), ("orders", 1), ("orders", 2), ("audit", 0)]:
        spans = sorted(
            (r.start_offset, r.end_offset) for _, out in threads for r in out[0] if (r.topic, r.partition) == pid
        )
        assert spans[0][0] == 1
        assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(spans))


def test_records_keep_arrival_order_across_callers():
    writer, batcher, gate, (first, _) = held_first_flush(max_delay_ms=60_000)
    second, second_out = run_in_thread(batcher.append_shared, [SharedAppendGroup("orders", 0, [b"first"])])
    wait_until(lambda: batcher.queued_calls == 1)
    third, third_out = run_in_thread(batcher.append_shared, [SharedAppendGroup("orders", 0, [b"second", b"third"])])
    wait_until(lambda: batcher.queued_calls == 2)
    gate.set()
    for t in (first, second, third):
        t.join(5)
    batcher.close()
    assert len(writer.calls) == 2
    assert writer.records_of("orders", 0) == [b"first", b"second", b"third"]
    (a,), (b,) = second_out[0], third_out[0]
    assert (a.start_offset, b.start_offset, b.end_offset) == (1, 2, 3)


def test_a_caller_repeating_a_partition_gets_consecutive_slices(writer):
    batcher = producer(writer)
    results = batcher.append_shared(
        [SharedAppendGroup("orders", 0, [b"a"]), SharedAppendGroup("orders", 0, [b"b", b"c"])]
    )
    batcher.close()
    assert [(r.start_offset, r.end_offset) for r in results] == [(1, 1), (2, 3)]


def test_sequential_calls_get_increasing_offsets(writer):
    batcher = producer(writer)
    spans = [batcher.append_shared([SharedAppendGroup("orders", 0, [b"x"] * k)])[0] for k in (1, 3, 2)]
    batcher.close()
    assert [(r.start_offset, r.end_offset) for r in spans] == [(1, 1), (2, 4), (5, 6)]
    assert batcher.flushes == 3


def test_max_bytes_queued_starts_a_flush_beside_the_one_in_flight():
    writer, batcher, gate, (first, _) = held_first_flush(max_bytes=10, max_delay_ms=60_000, max_in_flight=2)
    (result,) = batcher.append_shared([SharedAppendGroup("orders", 0, [b"x" * 10])])
    assert result.ok, "a full batch went beside the held flush"
    assert first.is_alive()
    gate.set()
    first.join(5)
    batcher.close()


def test_a_flush_takes_at_most_max_bytes():
    writer, batcher, gate, (first, _) = held_first_flush(max_bytes=10, max_delay_ms=60_000, max_in_flight=1)
    calls = []
    for i in range(3):  # one at a time: the queue's order is the order the threads reach it
        calls.append(run_in_thread(batcher.append_shared, [SharedAppendGroup("orders", 0, [bytes([i]) * 6])]))
        wait_until(lambda n=i + 1: batcher.queued_calls == n)
    gate.set()
    for t, _ in [*calls, (first, None)]:
        t.join(5)
    batcher.close()
    assert [[r for g in call for r in g.records] for call in writer.calls[1:]] == [[bytes([i]) * 6] for i in range(3)]
    assert all(out[0][0].ok for _, out in calls)


def test_a_slow_flush_holds_the_next_calls_at_most_max_delay():
    writer, batcher, gate, (first, _) = held_first_flush(max_bytes=1 << 20, max_delay_ms=150, max_in_flight=2)
    start = time.monotonic()
    (result,) = batcher.append_shared([SharedAppendGroup("orders", 0, [b"x"])])
    elapsed = time.monotonic() - start
    assert result.ok
    assert first.is_alive(), "it did not wait for the held flush"
    assert elapsed >= 0.14, "it waited max_delay_ms for the flush in flight first"
    gate.set()
    first.join(5)
    batcher.close()


def test_max_in_flight_bounds_concurrent_flushes():
    writer, batcher, gate, (first, _) = held_first_flush(max_bytes=1, max_delay_ms=0, max_in_flight=1)
    queued, queued_out = run_in_thread(batcher.append_shared, [SharedAppendGroup("orders", 0, [b"x"])])
    wait_until(lambda: batcher.queued_calls == 1)
    time.sleep(0.1)  # long past max_delay_ms and max_bytes: still queued, one flush is the limit
    assert (batcher.queued_calls, batcher.in_flight, len(writer.calls)) == (1, 1, 0)
    gate.set()
    queued.join(5)
    first.join(5)
    batcher.close()
    assert queued_out[0][0].ok


def test_a_full_buffer_rejects_with_back_pressure_and_writes_nothing_for_it():
    gate = threading.Event()
    writer = RecordingWriter(gate=gate)
    batcher = producer(writer, max_bytes=1, max_delay_ms=0, max_buffer_bytes=10, max_in_flight=1)
    blocked, blocked_out = run_in_thread(batcher.append_shared, [SharedAppendGroup("orders", 0, [b"12345"])])
    assert writer.entered.wait(5)  # the first call is being written
    queued, queued_out = run_in_thread(batcher.append_shared, [SharedAppendGroup("orders", 0, [b"12345678"])])
    wait_until(lambda: batcher.buffered_bytes == 8)

    refused = batcher.append_shared([SharedAppendGroup("orders", 0, [b"abc"]), SharedAppendGroup("audit", 1, [b"d"])])

    assert [r.error_type for r in refused] == ["BackPressureRejected", "BackPressureRejected"]
    assert all(isinstance(r.error, BackPressureRejected) and r.error.retriable for r in refused)
    assert "LLOG_BATCH_MAX_BUFFER_BYTES" in str(refused[0].error)
    assert [(r.topic, r.partition, r.count) for r in refused] == [("orders", 0, 1), ("audit", 1, 1)]
    assert batcher.rejected == 1
    gate.set()
    blocked.join(5)
    queued.join(5)
    batcher.close()
    assert blocked_out[0][0].ok
    assert queued_out[0][0].ok
    assert writer.records_of("orders", 0) == [b"12345", b"12345678"]  # never b"abc"
    assert writer.records_of("audit", 1) == []


@pytest.mark.parametrize(
    ("groups", "error"),
    [
        ([SharedAppendGroup("bad/topic", 0, [b"x"])], InvalidTopicName),
        ([SharedAppendGroup("orders", -1, [b"x"])], InvalidArgument),
        ([SharedAppendGroup("orders", 0, [])], InvalidArgument),
        ([SharedAppendGroup("orders", 0, [Record(b"x", timestamp_ms=2**63)])], InvalidArgument),
        ([SharedAppendGroup("orders", 0, [b"ok"]), SharedAppendGroup("..", 0, [b"x"])], InvalidTopicName),
    ],
)
def test_invalid_input_raises_before_it_is_enqueued(writer, groups, error):
    batcher = producer(writer)
    with pytest.raises(error):
        batcher.append_shared(groups)
    assert batcher.buffered_bytes == 0
    batcher.close()
    assert writer.calls == []  # not even the valid group of a rejected call


def test_close_waits_for_the_queued_calls_then_refuses():
    writer, batcher, gate, (first, first_out) = held_first_flush(max_bytes=1 << 20, max_delay_ms=60_000)
    t, out = run_in_thread(batcher.append_shared, [SharedAppendGroup("orders", 0, [b"late"])])
    wait_until(lambda: batcher.queued_calls == 1)
    closing, _ = run_in_thread(batcher.close)
    wait_until(lambda: batcher._closed)  # close has begun: it refuses from here on
    assert closing.is_alive(), "close waits for the flush in flight and the queued call"
    with pytest.raises(LlogError, match="closed"):
        batcher.append_shared([SharedAppendGroup("orders", 0, [b"after"])])
    gate.set()
    for thread in (closing, t, first):
        thread.join(5)
    assert out[0][0].ok
    assert first_out[0][0].ok
    assert writer.records_of("orders", 0) == [b"late"]


def test_per_partition_failures_fan_out_to_every_caller_of_that_partition():
    gate = threading.Event()
    writer = RecordingWriter(gate=gate, gated_calls=1, fail={("orders", 1): LogFenced("orders", 1)})
    batcher = producer(writer, max_delay_ms=60_000)
    first, _ = run_in_thread(batcher.append_shared, [SharedAppendGroup("warmup", 0, [b"w"])])
    assert writer.entered.wait(5)
    a, a_out = run_in_thread(
        batcher.append_shared, [SharedAppendGroup("orders", 0, [b"a"]), SharedAppendGroup("orders", 1, [b"b"])]
    )
    wait_until(lambda: batcher.queued_calls == 1)
    b, b_out = run_in_thread(batcher.append_shared, [SharedAppendGroup("orders", 1, [b"c", b"d"])])
    wait_until(lambda: batcher.queued_calls == 2)
    gate.set()
    for t in (first, a, b):
        t.join(5)
    batcher.close()
    (ok0, fenced_a), (fenced_b,) = a_out[0], b_out[0]
    assert ok0.ok
    assert (fenced_a.error_type, fenced_a.count) == ("LogFenced", 1)
    assert (fenced_b.error_type, fenced_b.count) == ("LogFenced", 2)
    assert fenced_b.start_offset is None


def test_a_writer_exception_reaches_every_caller_of_that_flush():
    writer, batcher, gate, (first, _) = held_first_flush(max_delay_ms=60_000)
    writer.raise_exc = RuntimeError("boom")
    a, a_out = run_in_thread(batcher.append_shared, [SharedAppendGroup("orders", 0, [b"a"])])
    b, b_out = run_in_thread(batcher.append_shared, [SharedAppendGroup("orders", 1, [b"b"])])
    wait_until(lambda: batcher.queued_calls == 2)
    gate.set()
    for t in (first, a, b):
        t.join(5)
    assert isinstance(a_out[0], RuntimeError)
    assert isinstance(b_out[0], RuntimeError)
    assert batcher.flushes == 0
    writer.raise_exc = None
    assert batcher.append_shared([SharedAppendGroup("orders", 0, [b"again"])])[0].ok  # the producer survived
    wait_until(lambda: batcher.in_flight == 0)  # the flush counts itself out after answering its callers
    batcher.close()


def test_batching_config_from_env():
    assert BatchingConfig.from_env({}) == BatchingConfig(4 * 1024 * 1024, 500, 64 * 1024 * 1024, 4)
    assert BatchingConfig.from_env(
        {
            "LLOG_BATCH_MAX_BYTES": "10",
            "LLOG_BATCH_MAX_DELAY_MS": "0",
            "LLOG_BATCH_MAX_BUFFER_BYTES": "20",
            "LLOG_BATCH_MAX_IN_FLIGHT": "1",
        }
    ) == BatchingConfig(10, 0, 20, 1)
    with pytest.raises(LlogError, match="LLOG_BATCH_MAX_BYTES"):
        BatchingConfig.from_env({"LLOG_BATCH_MAX_BYTES": "0"})
    with pytest.raises(LlogError, match="LLOG_BATCH_MAX_IN_FLIGHT"):
        BatchingConfig.from_env({"LLOG_BATCH_MAX_IN_FLIGHT": "0"})


def test_a_broken_writer_answer_reaches_every_caller_instead_of_hanging():
    writer, batcher, gate, (first, first_out) = held_first_flush(max_delay_ms=60_000)
    writer.raise_exc = None
    writer.append_shared = lambda groups: []  # type: ignore[method-assign]  # no result for any partition
    a, a_out = run_in_thread(batcher.append_shared, [SharedAppendGroup("orders", 0, [b"a"])])
    b, b_out = run_in_thread(batcher.append_shared, [SharedAppendGroup("orders", 1, [b"b"])])
    wait_until(lambda: batcher.queued_calls == 2)
    gate.set()
    for t in (first, a, b):
        t.join(5)
    assert not a.is_alive()
    assert not b.is_alive()
    assert isinstance(a_out[0], IndexError)  # no result at the index of its group
    assert isinstance(b_out[0], IndexError)
    wait_until(lambda: batcher.in_flight == 0)  # the flush counts itself out after answering its callers
    batcher.close()


def test_a_submitted_call_cancelled_before_its_flush_is_not_written_and_the_others_are():
    writer, batcher, gate, (first, first_out) = held_first_flush(max_delay_ms=60_000)
    cancelled = batcher.submit([SharedAppendGroup("orders", 0, [b"never"])])
    kept = batcher.submit([SharedAppendGroup("orders", 0, [b"kept"])])
    assert cancelled.cancel()  # what asyncio does to the future when the awaiting task is cancelled
    gate.set()
    (result,) = kept.result(10)
    first.join(10)
    batcher.close()
    assert (result.ok, result.start_offset) == (True, 1)
    assert writer.records_of("orders", 0) == [b"kept"]
    assert batcher.buffered_bytes == 0


def on_a_loop(coroutine: Any) -> Any:
    """Run ``coroutine`` to its end on an event loop of its own thread (the test process's main thread may run a
    loop already: Playwright's sync API)."""
    thread, out = run_in_thread(asyncio.run, coroutine)
    thread.join(10)
    assert not thread.is_alive()
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


def test_awaited_calls_are_answered_on_their_loop_one_hand_off_per_flush():
    writer, batcher, gate, (first, _) = held_first_flush(max_delay_ms=60_000)
    hand_offs = []

    async def produce() -> list[list[AppendResult]]:
        loop = asyncio.get_running_loop()
        call_soon_threadsafe = loop.call_soon_threadsafe

        def counted(*args: Any, **kwargs: Any) -> Any:
            hand_offs.append(threading.current_thread().name)
            return call_soon_threadsafe(*args, **kwargs)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign,assignment]
        calls = [batcher.submit_on(loop, [SharedAppendGroup("orders", 0, [b"%d" % i] * (i + 1))]) for i in range(3)]
        assert batcher.queued_calls == 3
        gate.set()
        return list(await asyncio.gather(*calls))

    answers = on_a_loop(produce())
    first.join(10)
    batcher.close()
    assert [(r.start_offset, r.end_offset) for (r,) in answers] == [(1, 1), (2, 3), (4, 6)]
    assert len(writer.calls) == 2, "the three calls went in one flush"
    assert len(hand_offs) == 1
    assert hand_offs[0].startswith("llog-flush")


def test_an_awaited_call_cancelled_before_its_flush_is_not_written_and_after_it_is():
    writer, batcher, gate, (first, _) = held_first_flush(max_delay_ms=60_000)

    async def produce() -> tuple[AppendResult, SharedAppendGroup]:
        loop = asyncio.get_running_loop()
        withdrawn = batcher.submit_on(loop, [SharedAppendGroup("orders", 0, [b"never"])])
        kept = batcher.submit_on(loop, [SharedAppendGroup("orders", 0, [b"kept"])])
        withdrawn.cancel()  # what cancelling the awaiting task does
        await asyncio.sleep(0)  # the loop moves on: a flush reads the cancellation when it takes the call
        gate.set()
        (answer,) = await kept
        while batcher.in_flight:  # kept's flush answers before it ends: late must start a flush of its own
            await asyncio.sleep(0.002)
        held = threading.Event()
        writer.gate, writer.gated_calls, writer.started = held, 1, 0  # the next call's flush is held
        late = batcher.submit_on(loop, [SharedAppendGroup("orders", 0, [b"late"])])
        while writer.started == 0:  # late's flush has taken it and is in the writer
            await asyncio.sleep(0.002)
        late.cancel()  # too late: its flush has taken it
        held.set()
        while batcher.in_flight:
            await asyncio.sleep(0.002)
        await asyncio.sleep(0.05)  # the late answer reaches the loop, where nobody waits for it
        (written,) = writer.calls[-1]
        return answer, written

    answer, written = on_a_loop(produce())
    first.join(10)
    batcher.close()
    assert (answer.ok, answer.start_offset) == (True, 1)
    assert writer.records_of("orders", 0) == [b"kept", b"late"]
    assert list(written.records) == [b"late"]
    assert batcher.buffered_bytes == 0


def test_an_awaited_call_hears_back_pressure_and_its_flushs_failure():
    writer, batcher, gate, (first, _) = held_first_flush(max_delay_ms=60_000, max_buffer_bytes=4)

    async def produce() -> tuple[list[AppendResult], BaseException]:
        loop = asyncio.get_running_loop()
        queued = batcher.submit_on(loop, [SharedAppendGroup("orders", 0, [b"abc"])])
        refused = batcher.submit_on(loop, [SharedAppendGroup("orders", 1, [b"de"])])  # 5 bytes would be waiting
        assert refused.done()
        writer.raise_exc = LlogError("Oxia is unavailable")  # the held first flush raises too
        gate.set()
        try:
            await queued
        except LlogError as exc:
            return refused.result(), exc
        raise AssertionError("the flush's failure did not reach its caller")

    (rejected,), failure = on_a_loop(produce())
    first.join(10)
    batcher.close()
    assert isinstance(rejected.error, BackPressureRejected)
    assert str(failure) == "Oxia is unavailable"
    assert writer.records_of("orders", 1) == []
