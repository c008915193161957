"""The producer against a real ``llog serve`` (real Oxia, moto S3): batching, routing, offsets, failures."""

from __future__ import annotations

from typing import Any

import pytest

from devserver.devstack import free_port
from llog_client.errors import FencedError, InvalidRequestError, OutcomeUnknownError, TransportError
from llog_client.partitioner import partition_for_key
from llog_client.producer import Producer, RecordMetadata
from llog_client.transport import Transport
from llog_client.wire import decode_bytes
from server.serve import LlogServer
from tests.client.conftest import call, read_partition, results

KIB = 1024


def produce_requests(server: LlogServer) -> int:
    return sum(c["count"] for c in server.http.snapshot() if c["route"] == "/produce")


def test_futures_give_the_offsets_the_records_were_written_at(server: LlogServer) -> None:
    with Producer(server.url, linger_ms=20) as producer:
        futures = [producer.send("orders", f"v{i}", partition=i % 3) for i in range(30)]
        headers: dict[str, bytes | str] = {"h": b"\x02", "t": "text"}
        binary = producer.send("orders", b"\x00\x01\xff", key=b"k\xff", headers=headers, partition=1)
        producer.flush()
    assert results(futures) == [RecordMetadata("orders", i % 3, i // 3 + 1) for i in range(30)]
    assert binary.result(timeout=0) == RecordMetadata("orders", 1, 11)
    for partition in range(3):
        records = read_partition(server, "orders", partition)
        assert [r["value"] for r in records][:10] == [f"v{i}" for i in range(partition, 30, 3)]
    last = read_partition(server, "orders", 1)[-1]
    assert last["offset"] == 11
    assert decode_bytes(last["value"]) == b"\x00\x01\xff"
    assert decode_bytes(last["key"]) == b"k\xff"
    assert {name: decode_bytes(value) for name, value in last["headers"].items()} == {"h": b"\x02", "t": b"text"}


def test_one_kib_records_go_in_requests_of_at_least_batch_bytes(
    server: LlogServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes: list[int] = []
    exchange = Transport.exchange

    def counting(self: Transport, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
        if path == "/produce":
            sizes.append(len(body))
        return exchange(self, method, path, body, **kwargs)

    monkeypatch.setattr(Transport, "exchange", counting)
    before = produce_requests(server)
    value = "x" * KIB
    count = 1200
    # Only size closes a batch here (linger far longer than the test): flush sends the remainder.
    with Producer(server.url, linger_ms=600_000) as producer:
        futures = [producer.send("bulk", value, partition=0) for _ in range(count)]
        producer.flush()
    assert [m.offset for m in results(futures)] == list(range(1, count + 1))
    assert produce_requests(server) - before == len(sizes)
    assert len(sizes) == count * KIB // (256 * KIB) + 1, sizes
    assert min(sizes[:-1]) >= 256 * KIB, sizes  # every request but the flushed remainder
    assert len(read_partition(server, "bulk", 0)) == count


def test_keyed_records_land_on_the_partition_kafka_would_choose(server: LlogServer) -> None:
    call(server, "POST", "/topics", {"topic": "keyed", "partitions": 6})
    keys = [f"customer-{i}".encode() for i in range(40)]
    with Producer(server.url) as producer:
        futures = {key: producer.send("keyed", b"v:" + key, key=key) for key in keys}
        producer.flush()
    for key, future in futures.items():
        assert future.result(timeout=0).partition == partition_for_key(key, 6)
    for partition in range(6):
        for record in read_partition(server, "keyed", partition):
            assert partition_for_key(decode_bytes(record["key"]), 6) == partition


def test_keyless_records_stay_on_one_partition_per_batch(server: LlogServer) -> None:
    call(server, "POST", "/topics", {"topic": "sticky", "partitions": 4})
    with Producer(server.url, linger_ms=600_000, batch_bytes=10 * KIB) as producer:
        futures = [producer.send("sticky", "y" * 100) for _ in range(400)]
        producer.flush()
    partitions = [m.partition for m in results(futures)]
    runs = [p for i, p in enumerate(partitions) if i == 0 or partitions[i - 1] != p]
    assert len(set(partitions)) > 1  # full batches move on to the next partition
    assert len(runs) <= 400 * 110 // (10 * KIB) + 1  # a partition changes only when a batch is full


def test_send_batch_writes_its_values_together(server: LlogServer) -> None:
    with Producer(server.url, linger_ms=600_000) as producer:
        before = producer.send("together", "single", partition=0)
        batch = producer.send_batch("together", 0, ["b1", "b2", b"\xff"])
        after = producer.send("together", "after", partition=0)
        producer.flush()
        assert producer._buffered == 0
    assert [m.offset for m in results([before, *batch, after])] == [1, 2, 3, 4, 5]
    assert [decode_bytes(r["value"]) for r in read_partition(server, "together", 0)] == [
        b"single",
        b"b1",
        b"b2",
        b"\xff",
        b"after",
    ]


def test_a_failed_write_fails_its_futures_and_only_those(server: LlogServer) -> None:
    with Producer(server.url) as producer:
        producer.send("fenced", "first", partition=1).result(timeout=30)
        call(server, "POST", "/topics/fenced/partitions/1/fence")
        refused = [producer.send("fenced", f"r{i}", partition=1) for i in range(5)]
        accepted = [producer.send("fenced", f"a{i}", partition=0) for i in range(5)]
        producer.flush()
    for future in refused:
        error = future.exception(timeout=0)
        assert isinstance(error, FencedError)
        assert (error.error_type, error.retriable) == ("LogFenced", False)
    assert [m.offset for m in results(accepted)] == [1, 2, 3, 4, 5]
    assert [r["value"] for r in read_partition(server, "fenced", 1)] == ["first"]


def test_an_unreachable_server_fails_the_futures_after_the_delivery_timeout() -> None:
    with Producer(f"http://127.0.0.1:{free_port()}", idempotent=False, delivery_timeout_ms=1_000) as producer:
        futures = [producer.send("nowhere", "v", partition=0) for _ in range(3)]
        producer.flush()
    for future in futures:
        error = future.exception(timeout=0)
        assert isinstance(error, OutcomeUnknownError)  # no answer: the client cannot tell
        assert isinstance(error.last_error, TransportError)
        assert not error.retriable


def test_a_record_over_the_request_limit_fails_without_a_request(server: LlogServer) -> None:
    before = produce_requests(server)
    with Producer(server.url, batch_bytes=1 * KIB, max_request_bytes=2 * KIB) as producer:
        future = producer.send("large", "z" * (4 * KIB), partition=0)
        small = producer.send("large", "small", partition=0)
        producer.flush()
    error = future.exception(timeout=0)
    assert isinstance(error, InvalidRequestError)
    assert error.error_type == "RecordTooLarge"
    assert small.result(timeout=0).offset == 1
    assert produce_requests(server) - before == 1


@pytest.mark.parametrize(("topic", "partition"), [("", 0), ("a b", 0), ("wal-shared", 0), ("t", -1), ("t", 2**31)])
def test_a_bad_topic_or_partition_is_refused_before_it_is_queued(topic: str, partition: int) -> None:
    with Producer("http://127.0.0.1:1", idempotent=False) as producer, pytest.raises(ValueError, match="invalid"):
        producer.send(topic, "v", partition=partition)


def test_close_sends_what_is_queued_and_then_refuses_records(server: LlogServer) -> None:
    producer = Producer(server.url, linger_ms=600_000)
    futures = [producer.send("closing", f"c{i}", partition=0) for i in range(10)]
    producer.close()
    assert [m.offset for m in results(futures)] == list(range(1, 11))
    with pytest.raises(RuntimeError, match="closed"):
        producer.send("closing", "late", partition=0)
    producer.close()  # idempotent
