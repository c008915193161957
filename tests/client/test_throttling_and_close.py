"""The client under API Gateway's throttling (429), a producer closed with a timeout, and a server without
``POST /producers``: against a real ``llog serve``, behind a tiny stand-in for API Gateway (``Gateway``)."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from llog_client.consumer import Consumer
from llog_client.errors import LlogClientError, OutcomeUnknownError
from llog_client.producer import Producer
from server.serve import LlogServer
from tests.client.conftest import Gateway, call, read_partition, results
from tests.client.test_consumer import poll_until, produce

BACKOFF_MS = 50


def assert_backed_off(answered_429: list[float], answered_next: float) -> None:
    """Each attempt after a 429 came at least the backoff (less its 20% jitter) later, the backoff doubling."""
    times = [*answered_429, answered_next]
    for attempt, (before, after) in enumerate(itertools.pairwise(times)):
        assert after - before >= 0.8 * BACKOFF_MS / 1000 * 2**attempt, (attempt, times)


def test_a_throttled_produce_is_retried_with_backoff_and_written_once(server: LlogServer, gateway: Gateway) -> None:
    gateway.throttle = {"/produce": 3}
    with Producer(gateway.url, linger_ms=0, retry_backoff_ms=BACKOFF_MS) as producer:
        futures = [producer.send("throttled", f"v{i}", partition=0) for i in range(5)]
        producer.flush()
    assert [m.offset for m in results(futures)] == [1, 2, 3, 4, 5]
    assert [r["value"] for r in read_partition(server, "throttled", 0)] == [f"v{i}" for i in range(5)]
    throttled = gateway.answered("/produce", 429)
    assert len(throttled) == 3
    assert_backed_off(throttled, gateway.answered("/produce", 200)[0])


def test_a_throttled_poll_backs_off_and_returns_the_records(server: LlogServer, gateway: Gateway) -> None:
    produce(server, "slowed", {0: ["a", "b", "c"]})
    gateway.throttle = {"/groups/slowers/join": 2, "/consume": 2}
    with Consumer(gateway.url, "slowers", ["slowed"], retry_backoff_ms=BACKOFF_MS) as consumer:
        records = poll_until(consumer, lambda got: len(got) >= 3)
    assert [r.value for r in records] == [b"a", b"b", b"c"]
    assert len(gateway.answered("/groups/slowers/join", 429)) == 2
    assert_backed_off(gateway.answered("/groups/slowers/join", 429), gateway.answered("/groups/slowers/join", 200)[0])
    assert len(gateway.answered("/consume", 429)) == 2


def producer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("llog-producer")]


def test_a_close_that_times_out_stops_every_thread_and_resolves_every_future(
    server: LlogServer, gateway: Gateway
) -> None:
    """A request that hangs (held by the gateway) outlasts ``close(timeout)``: close aborts it, stops the sender,
    and fails every future: the one in flight as of unknown outcome, the one never sent as not written."""
    gateway.hold = ("/produce",)
    producer = Producer(gateway.url, linger_ms=0, max_in_flight_requests=1)
    in_flight = producer.send("stuck", "sent", partition=0)
    deadline = time.monotonic() + 10
    while not gateway.answered("/producers", 200) or not producer._partitions[("stuck", 0)].in_flight:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    queued = producer.send("stuck", "never sent", partition=1)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        producer.close(timeout=0.5)
    assert time.monotonic() - started < 3
    assert producer_threads() == []
    error = in_flight.exception(timeout=0)
    assert isinstance(error, OutcomeUnknownError), error
    unsent = queued.exception(timeout=0)
    assert isinstance(unsent, LlogClientError)
    assert not isinstance(unsent, OutcomeUnknownError)
    assert unsent.error_type == "ProducerClosed"
    with pytest.raises(RuntimeError, match="closed"):
        producer.send("stuck", "late", partition=0)
    producer.close()  # idempotent


def test_a_missing_producers_route_fails_the_waiting_batches_clearly_and_idempotence_stays_on(
    server: LlogServer, gateway: Gateway
) -> None:
    """One 404 from ``POST /producers`` (a task of an older version behind the same URL, say) fails the batches
    that waited for it with a clear error, never sends them without idempotence, and the next batch asks again."""
    gateway.missing = {"/producers": 1}
    with Producer(gateway.url) as producer:
        first = producer.send("resumed", "first", partition=0)
        error = first.exception(timeout=30)
        assert isinstance(error, LlogClientError), error
        assert error.error_type == "IdempotenceUnavailable"
        assert "idempotent=False" in str(error)
        assert producer.send("resumed", "second", partition=0).result(timeout=30).offset == 1
        assert producer.idempotent
        assert producer._identity is not None
    assert [r["value"] for r in read_partition(server, "resumed", 0)] == ["second"]
    assert call(server, "GET", "/topics/resumed/partitions/0")["high_watermark"] == 1


def test_a_send_blocked_on_a_full_buffer_when_close_times_out_raises_instead_of_queueing(
    server: LlogServer, gateway: Gateway
) -> None:
    """A ``send`` waiting for buffer space while ``close(timeout)`` aborts wakes once the aborted batch freed the
    buffer, after the sender stopped: it raises (the producer is closed) rather than queue a record whose
    future nobody would ever resolve."""
    gateway.hold = ("/produce",)
    producer = Producer(gateway.url, linger_ms=0, buffer_bytes=200, max_block_ms=30_000)
    held = producer.send("full", "x" * 120, partition=0)  # fills the buffer; its request is held
    deadline = time.monotonic() + 10
    while not producer._partitions[("full", 0)].in_flight:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    outcome: dict[str, object] = {}

    def send_into_the_full_buffer() -> None:
        try:
            outcome["future"] = producer.send("full", "y" * 120, partition=0)
        except RuntimeError as exc:
            outcome["error"] = exc

    blocked = threading.Thread(target=send_into_the_full_buffer)
    blocked.start()
    time.sleep(0.3)  # it waits for buffer space
    assert blocked.is_alive()
    with pytest.raises(TimeoutError):
        producer.close(timeout=0.5)
    blocked.join(5)
    assert not blocked.is_alive()
    assert "future" not in outcome, outcome
    assert "closed" in str(outcome["error"])
    assert isinstance(held.exception(timeout=0), OutcomeUnknownError)
    assert producer._unfinished == 0
