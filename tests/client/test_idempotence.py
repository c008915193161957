"""The idempotent producer against a real ``llog serve``: a retry never duplicates, an old epoch is fenced."""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import Any

import pytest

from devserver.serve import LlogServer
from llog.protocol.producers import REVALIDATE_AFTER_MS
from llog_client.errors import FencedError, OffsetMismatchError, TransportError
from llog_client.producer import Producer, RecordMetadata
from llog_client.transport import Transport
from tests.client.conftest import call, read_partition, results


def test_a_batch_whose_answer_was_lost_is_retried_and_written_once(
    server: LlogServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    lost: list[tuple[int, Any]] = []
    exchange = Transport.exchange

    def lose_the_first_answer(self: Transport, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        answer = exchange(self, method, path, body, **kwargs)
        if path == "/produce" and not lost:
            lost.append(answer)  # the server wrote the batch; the client never hears of it
            raise TransportError("connection lost after the request was sent")
        return answer

    monkeypatch.setattr(Transport, "exchange", lose_the_first_answer)
    with Producer(server.url, linger_ms=50) as producer:
        futures = [producer.send("once", f"r{i}", partition=0) for i in range(10)]
        producer.flush()
        assert producer.idempotent
    ((status, first),) = lost
    assert status == 200
    assert first["results"][0]["start_offset"] == 1
    assert [m.offset for m in results(futures)] == list(range(1, 11))
    assert [r["value"] for r in read_partition(server, "once", 0)] == [f"r{i}" for i in range(10)]


def test_a_fenced_producer_fails_its_batch_and_continues_under_a_new_id(server: LlogServer) -> None:
    with Producer(server.url) as producer:
        producer.send("epochs", "before", partition=0).result(timeout=30)
        identity = producer._identity
        assert identity is not None
        bumped = call(server, "POST", "/producers", {"producer_id": identity.producer_id})
        assert bumped["producer_epoch"] == identity.producer_epoch + 1
        # A partition's producer state vouches for its epoch this long before the registry is read again
        # (docs/IDEMPOTENCE.md): after it, the old epoch is fenced on every partition.
        time.sleep(REVALIDATE_AFTER_MS / 1000 + 0.2)
        error = producer.send("epochs", "fenced", partition=0).exception(timeout=30)
        assert isinstance(error, FencedError)
        assert error.error_type == "ProducerFenced"
        assert producer.send("epochs", "after", partition=0).result(timeout=30).offset == 2
    assert [r["value"] for r in read_partition(server, "epochs", 0)] == ["before", "after"]


def test_a_conditional_batch_is_written_only_at_its_expected_offset(server: LlogServer) -> None:
    # Only the CAS protocol checks expected_offset atomically (sequential partitions refuse it).
    call(server, "POST", "/topics", {"topic": "ledger", "partitions": 1, "config": {"append_protocol": "cas"}})
    with Producer(server.url) as producer:
        first = producer.send_batch("ledger", 0, ["a", "b"], expected_offset=1)
        assert [m.offset for m in results_within(first)] == [1, 2]
        (stale,) = producer.send_batch("ledger", 0, ["c"], expected_offset=1)
        error = stale.exception(timeout=30)
        assert isinstance(error, OffsetMismatchError)
        assert error.next_offset == 3
        # The refused batch was not written, so its sequence is reused: no gap for the next one.
        assert producer.send("ledger", "d", partition=0).result(timeout=30).offset == 3
    assert [r["value"] for r in read_partition(server, "ledger", 0)] == ["a", "b", "d"]


def results_within(futures: list[Future[RecordMetadata]]) -> list[RecordMetadata]:
    return [future.result(timeout=30) for future in futures]


def test_a_gateway_timeout_after_the_write_is_retried_not_taken_as_unwritten(
    server: LlogServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """API Gateway answers 504 while the function still appends: the batch is retried, and found written."""
    timed_out: list[Any] = []
    exchange = Transport.exchange

    def time_out_the_first_answer(self: Transport, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        answer = exchange(self, method, path, body, **kwargs)
        if path == "/produce" and not timed_out:
            timed_out.append(answer)  # written; the client sees the gateway's bare 504
            return 504, {"message": "Endpoint request timed out"}
        return answer

    monkeypatch.setattr(Transport, "exchange", time_out_the_first_answer)
    with Producer(server.url, linger_ms=50) as producer:
        first = [producer.send("gateway", f"a{i}", partition=0) for i in range(3)]
        producer.flush()
        second = [producer.send("gateway", f"b{i}", partition=0) for i in range(3)]  # same count, next sequence
        producer.flush()
    assert [m.offset for m in results(first)] == [1, 2, 3]
    assert [m.offset for m in results(second)] == [4, 5, 6]
    assert [r["value"] for r in read_partition(server, "gateway", 0)] == ["a0", "a1", "a2", "b0", "b1", "b2"]
