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


def test_counts_the_produce_path_per_request() -> None:
    small, large = opcodes.run(connections=4, requests=40)
    assert (small["requests"], large["requests"]) == (40, 40)
    functions = {name for name, _, _ in small["top"]}
    # The request went through the HTTP layer, the produce checks, the group commit and the answer.
    assert {"http11.py:data_received", "serve.py:check_head", "batching.py:_enqueue", "serve.py:_answer"} <= functions
    assert not any(name.startswith("opcodes.py:") for name in functions)  # the counting is not counted
    assert 1_000 < small["opcodes"] < 20_000
    assert small["calls"] > 50
    (again,) = opcodes.run(connections=4, requests=40, cases=opcodes.CASES[:1])
    assert again["opcodes"] == pytest.approx(small["opcodes"], rel=0.01)  # not the threads' timing
    table = opcodes.table([small, large], top=3)
    assert "| 1 record of 100 B | 40 |" in table
    assert table.count("    ") >= 6  # three functions listed per case
