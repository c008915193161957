"""The idempotent producer against a real ``llog serve``: a retry never duplicates, an old epoch is fenced."""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import Future
from typing import Any

import pytest

from llog.errors import SequenceInFlight
from llog.protocol.producers import REVALIDATE_AFTER_MS, IdempotentAppender
from llog.protocol.topics import TOPIC_CACHE_TTL_MS
from llog_client.errors import (
    FencedError,
    InvalidRequestError,
    NotFoundError,
    OffsetMismatchError,
    OutcomeUnknownError,
    TransportError,
    UnavailableError,
)
from llog_client.producer import Producer, RecordMetadata
from llog_client.transport import Transport
from server.serve import LlogServer
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


def test_a_refused_retry_of_a_batch_whose_answer_was_lost_does_not_free_its_sequence(
    server: LlogServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batch A is written but its answer lost; its retry meets a request refused as a whole (batch B names a
    partition past the topic's count). That refusal says nothing of A's first attempt: A's sequence stays
    unresolved, A is resolved on its own retry (a duplicate: its offset), and the next batch C is written."""
    call(server, "POST", "/topics", {"topic": "unresolved", "partitions": 1})
    refused: list[Future[RecordMetadata]] = []
    answers: list[tuple[int, Any]] = []
    exchange = Transport.exchange

    def lose_the_first_answer(self: Transport, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        answer = exchange(self, method, path, body, **kwargs)
        if path == "/produce":
            answers.append(answer)
            if len(answers) == 1:
                # A was written. B is queued while A's request is the only one allowed in flight, so A's retry
                # and B's first attempt go out together.
                refused.append(producer.send("unresolved", "B", partition=5))
                raise TransportError("connection lost after the request was sent")
        return answer

    monkeypatch.setattr(Transport, "exchange", lose_the_first_answer)
    with Producer(server.url, linger_ms=0, retry_backoff_ms=0, max_in_flight_requests=1) as producer:
        first = producer.send("unresolved", "A", partition=0)
        producer.flush()
        (b,) = refused
        assert isinstance(b.exception(timeout=0), InvalidRequestError)
        later = producer.send("unresolved", "C", partition=0)
        producer.flush()
    assert [r["value"] for r in read_partition(server, "unresolved", 0)] == ["A", "C"]
    assert first.result(timeout=0).offset == 1
    assert later.result(timeout=0).offset == 2


def test_a_batch_whose_answer_was_lost_and_whose_retry_is_refused_fails_as_outcome_unknown(
    server: LlogServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A's answer is lost, its topic is deleted, and the retry comes after the server's copy of the topic's record
    expired (TOPIC_CACHE_TTL_MS, on the produce service's clock): it is refused (UnknownTopic), which does not
    say A's first attempt was not written. A fails with OutcomeUnknownError, and the producer takes a new id
    rather than give A's sequence to another batch."""
    lost: list[Any] = []
    identities: list[Any] = []
    exchange = Transport.exchange

    def lose_the_first_answer(self: Transport, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        answer = exchange(self, method, path, body, **kwargs)
        if path == "/produce" and not lost:
            lost.append(answer)
            identities.append(producer._identity)
            call(server, "DELETE", "/topics/doomed")
            later = time.monotonic() + 2 * TOPIC_CACHE_TTL_MS / 1000
            monkeypatch.setattr(server.services.produce, "_clock", lambda: later)
            raise TransportError("connection lost after the request was sent")
        return answer

    monkeypatch.setattr(Transport, "exchange", lose_the_first_answer)
    call(server, "POST", "/topics", {"topic": "doomed", "partitions": 1})
    with Producer(server.url, linger_ms=0, retry_backoff_ms=0) as producer:
        future = producer.send("doomed", "A", partition=0)
        producer.flush()
        error = future.exception(timeout=0)
        assert isinstance(error, OutcomeUnknownError), error
        assert isinstance(error.last_error, NotFoundError)
        assert error.last_error.error_type == "UnknownTopic"
        producer.send("other", "C", partition=0).result(timeout=30)
        assert producer._identity not in (None, *identities)
    assert lost[0][0] == 200


def test_a_record_sent_while_its_partitions_batch_is_handed_to_a_request_goes_in_the_next_batch(
    server: LlogServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sender fixes a batch's sequence range and hands the batch to a worker thread. A ``send`` in between (here:
    exactly then) must start a new batch: one that joined the batch being sent would go out under a range one
    short, and the next batch's sequence would be refused (OutOfOrderSequence)."""
    late: list[Future[RecordMetadata]] = []
    with Producer(server.url, linger_ms=0) as producer:
        submit = producer._workers.submit

        def send_while_handing_over(fn: Any, *args: Any) -> Any:
            if not late:
                late.append(producer.send("sealed", "late", partition=0))
            return submit(fn, *args)

        monkeypatch.setattr(producer._workers, "submit", send_while_handing_over)
        first = producer.send("sealed", "first", partition=0)
        producer.flush()
        identity = producer._identity
        after = producer.send("sealed", "after", partition=0)
        producer.flush()
        assert producer._identity == identity  # no sequence went astray: the producer kept its id
    assert [m.offset for m in results([first, *late, after])] == [1, 2, 3]
    assert [r["value"] for r in read_partition(server, "sealed", 0)] == ["first", "late", "after"]


def test_threads_sending_to_one_partition_get_every_record_written_once_at_contiguous_offsets(
    server: LlogServer,
) -> None:
    """Many small batches (linger 0) sealed while other threads append: each record once, no future failed."""
    threads, per_thread = 4, 150
    futures: dict[str, Future[RecordMetadata]] = {}
    with Producer(server.url, linger_ms=0) as producer:
        identity: list[Any] = []

        def send_all(thread: int) -> None:
            for i in range(per_thread):
                futures[f"{thread}-{i}"] = producer.send("crowded", f"{thread}-{i}", partition=0)
                identity.append(producer._identity)

        workers = [threading.Thread(target=send_all, args=(t,)) for t in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        producer.flush()
        assert len({i for i in identity if i is not None} | {producer._identity}) == 1
    offsets = {value: future.result(timeout=0).offset for value, future in futures.items()}
    assert sorted(offsets.values()) == list(range(1, threads * per_thread + 1))
    log = read_partition(server, "crowded", 0)
    assert {r["value"]: r["offset"] for r in log} == offsets
    assert len(log) == threads * per_thread


@pytest.mark.parametrize("refusal", ["BackPressureRejected", "SequenceInFlight"])
def test_a_batch_refused_before_it_was_written_fails_as_not_written_and_its_sequence_is_reused(
    server: LlogServer, monkeypatch: pytest.MonkeyPatch, refusal: str
) -> None:
    """``BackPressureRejected`` (llog serve's batcher is full: the batch was never queued) and ``SequenceInFlight``
    (an earlier claim of this producer: nothing of this attempt was written) are retriable refusals of a batch
    none of whose attempts may have been written: once its delivery timeout passes it fails with that error, not
    as of unknown outcome, and the next batch takes its sequence under the same producer id."""
    batcher, append = server.services.batcher, IdempotentAppender.append
    config = batcher.config
    if refusal == "BackPressureRejected":
        monkeypatch.setattr(batcher, "config", dataclasses.replace(config, max_buffer_bytes=1))
    else:

        def in_flight(*args: Any, **kwargs: Any) -> Any:
            raise SequenceInFlight("an earlier attempt of this producer may still commit")

        monkeypatch.setattr(IdempotentAppender, "append", in_flight)
    with Producer(server.url, linger_ms=0, retry_backoff_ms=20, delivery_timeout_ms=300) as producer:
        error = producer.send("refused", "A: refused", partition=0).exception(timeout=30)
        assert isinstance(error, UnavailableError), error
        assert not isinstance(error, OutcomeUnknownError)
        assert error.error_type == refusal
        identity = producer._identity
        monkeypatch.setattr(batcher, "config", config)
        monkeypatch.setattr(IdempotentAppender, "append", append)
        assert producer.send("refused", "B", partition=0).result(timeout=30).offset == 1
        assert producer._identity == identity
    assert [r["value"] for r in read_partition(server, "refused", 0)] == ["B"]
