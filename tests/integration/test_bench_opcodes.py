"""bench/opcodes.py against a real Oxia: it counts what llog serve's produce path executes, and only that."""

from __future__ import annotations

import json

import pytest

from bench import opcodes


def test_the_request_is_what_wrk_sends() -> None:
    raw = opcodes.request_bytes(opcodes.Case("3 records", 3, 5))
    head, body = raw.split(b"\r\n\r\n", 1)
    assert head.startswith(b"POST /produce HTTP/1.1\r\n")
    assert f"Content-Length: {len(body)}".encode() in head
    entry = {"topic": opcodes.TOPIC, "partition": 0, "records": ["xxxxx"] * 3}
    assert json.loads(body) == {"topic_partitions": [entry]}
    wide = opcodes.request_bytes(opcodes.Case("2 partitions", 1, 5, partitions=2)).split(b"\r\n\r\n", 1)[1]
    assert [e["partition"] for e in json.loads(wide)["topic_partitions"]] == [0, 1]


def test_counts_the_produce_path_per_request() -> None:
    small, large, wide = opcodes.run(connections=4, requests=40)
    assert (small["requests"], large["requests"], wide["requests"]) == (40, 40, 40)
    functions = {name for name, _, _ in small["top"]}
    # The request went through the HTTP layer, the produce checks, the group commit and the answer.
    assert {"http11.py:data_received", "serve.py:check_head", "batching.py:_enqueue", "serve.py:_answer"} <= functions
    assert not any(name.startswith("opcodes.py:") for name in functions)  # the counting is not counted
    assert 1_000 < small["opcodes"] < 20_000
    assert small["calls"] > 50
    assert wide["opcodes"] > small["opcodes"] + 15 * 100  # each of the 16 partitions is checked and batched
    (again,) = opcodes.run(connections=4, requests=40, cases=opcodes.CASES[:1])
    assert again["opcodes"] == pytest.approx(small["opcodes"], rel=0.01)  # not the threads' timing
    table = opcodes.table([small, large], top=3)
    assert "| 1 record of 100 B | 40 |" in table
    assert table.count("    ") >= 6  # three functions listed per case


def test_counts_append_shared_per_call() -> None:
    one, sixteen = opcodes.run_writer(calls=5)
    assert (one["case"], one["requests"]) == ("append_shared, 1 partition", 5)
    functions = {name for name, _, _ in one["top"]}
    # The caller's thread encoded the batch and the blob, PUT it and committed it on llog's Oxia wire encoding.
    assert {"append.py:_append_shared", "codec.py:encode_batch", "oxia_wire.py:encode_write_request"} <= functions
    assert not any(name.startswith("opcodes.py:") for name in functions)
    assert sixteen["opcodes"] > 5 * one["opcodes"]  # per partition: its batch, index entry, put and answer
    (again,) = opcodes.run_writer(partitions=(1,), calls=5)
    assert again["opcodes"] == pytest.approx(one["opcodes"], rel=0.01)
