"""The three Lambda handlers on events/ samples against the real Oxia server and moto S3.

Each test has its own ``LLOG_ROOT_PREFIX`` (see conftest), so topics, S3
objects and the ``/topics`` listing are its own.
"""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any

import pytest

from functions.produce import app as produce_app
from llog.service.http_contract import decode_bytes
from tests.conftest import OxiaServer
from tests.functions.conftest import Env, invoke, load_event

pytestmark = pytest.mark.oxia


def produce_body(*items: tuple[str, int, list[Any]]) -> dict[str, Any]:
    return {"topic_partitions": [{"topic": t, "partition": p, "records": r} for t, p, r in items]}


def consume_body(*items: tuple[str, int, int], max_wait_ms: int = 0) -> dict[str, Any]:
    parts = [{"topic": t, "partition": p, "fetch_offset": o} for t, p, o in items]
    return {"topic_partitions": parts, "max_wait_ms": max_wait_ms}


def status_of(topic: str, partition: int) -> dict[str, Any]:
    answer = invoke("admin", load_event("partition_status", path=f"/topics/{topic}/partitions/{partition}"))
    assert answer.status == 200, answer.body
    body: dict[str, Any] = answer.body
    return body


def test_the_example_produce_and_consume(oxia_env: Env):
    produced = invoke("produce", load_event("produce"))

    assert produced.status == 200, produced.body
    assert (produced.body["success_count"], produced.body["error_count"]) == (2, 0)
    first, second = produced.body["results"]
    assert (first["start_offset"], first["end_offset"], first["count"]) == (1, 2, 2)
    assert (second["start_offset"], second["end_offset"], second["count"]) == (1, 1, 1)
    # New partitions are sequential: the entry is the sequence key ending at offset 2 (docs/SEQUENTIAL_APPEND.md).
    assert first["index_key"].startswith(f"{oxia_env.root}/orders/partitions/0/seq/")
    assert "/e-00000000000000000002-" in first["index_key"]
    assert first["wal_uri"] == second["wal_uri"]
    assert first["wal_uri"].startswith(f"s3://llog-test/{oxia_env.root}/wal-shared/")
    assert oxia_env.objects() == 1, "one shared WAL blob for the whole request"

    consumed = invoke("consume", load_event("consume"))

    assert consumed.status == 200
    p0, p1 = consumed.body["results"]
    assert [r["value"] for r in p0["records"]] == ["alpha", "beta"]
    assert [r["offset"] for r in p0["records"]] == [1, 2]
    assert (p0["high_watermark"], p0["next_fetch_offset"], p0["ok"]) == (2, 3, True)
    assert p1["records"][0]["value"] == {"base64": "AAE="}
    assert p1["records"][0]["key"] is None
    assert p1["records"][0]["headers"] == {}


def test_binary_and_utf8_records_round_trip_byte_exact(oxia_env: Env):
    topic = f"rt-{uuid.uuid4().hex[:8]}"
    values = [
        b"", b"\x00", bytes(range(256)), "héllo wörld ✓ 😀".encode(), b"\xff\xfe\xfd", b"\xed\xa0\x80", b"x" * 5000
    ]
    records: list[Any] = [
        {
            "value": {"base64": base64.b64encode(v).decode()},
            "key": {"base64": base64.b64encode(v[:3]).decode()} if i % 2 else None,
            "headers": {"n": {"base64": base64.b64encode(v[:2]).decode()}, "text": "é"},
            "timestamp_ms": 1_700_000_000_000 + i,
        }
        for i, v in enumerate(values)
    ]
    records.append("plain ✓")
    produced = invoke("produce", load_event("produce", body=produce_body((topic, 0, records))))
    assert produced.status == 200, produced.body

    consumed = invoke("consume", load_event("consume", body=consume_body((topic, 0, 1))))
    (result,) = consumed.body["results"]
    got = result["records"]
    assert len(got) == len(values) + 1
    for i, (record, value) in enumerate(zip(got, values, strict=False)):
        assert decode_bytes(record["value"], "value") == value
        assert record["key"] is None if i % 2 == 0 else decode_bytes(record["key"], "key") == value[:3]
        assert decode_bytes(record["headers"]["n"], "h") == value[:2]
        assert record["headers"]["text"] == "é"
        assert record["timestamp_ms"] == 1_700_000_000_000 + i
    assert isinstance(got[3]["value"], str)  # valid UTF-8 comes back as text
    assert got[3]["value"] == "héllo wörld ✓ 😀"
    assert got[4]["value"] == {"base64": base64.b64encode(b"\xff\xfe\xfd").decode()}
    assert got[-1]["value"] == "plain ✓"


def test_one_fenced_partition_gives_409_with_mixed_results(oxia_env: Env):
    assert invoke("produce", load_event("produce")).status == 200
    fenced = invoke("admin", load_event("fence"))
    assert fenced.status == 200
    assert fenced.body == {
        "topic": "orders", "partition": 1, "log_state": "FENCED", "high_watermark": 1, "next_offset": 2
    }

    answer = invoke("produce", load_event("produce"))

    assert answer.status == 409
    ok, rejected = answer.body["results"]
    assert (ok["ok"], ok["start_offset"], ok["end_offset"]) == (True, 3, 4)
    assert (rejected["ok"], rejected["error_type"], rejected["retriable"]) == (False, "LogFenced", False)
    assert (answer.body["success_count"], answer.body["error_count"]) == (1, 1)
    assert status_of("orders", 1)["high_watermark"] == 1

    unfenced = invoke("admin", load_event("unfence"))
    assert unfenced.body["log_state"] == "OPEN"
    assert invoke("produce", load_event("produce")).status == 200
    assert status_of("orders", 1)["high_watermark"] == 2


def test_a_rejected_request_writes_nothing(oxia_env: Env):
    assert invoke("produce", load_event("produce")).status == 200
    objects = oxia_env.objects()
    before = status_of("orders", 0)

    invalid = ["produce_invalid_json", "produce_invalid_partition", "produce_invalid_base64", "produce_empty_records"]
    for name in invalid:
        assert invoke("produce", load_event(name)).status == 400
    bad_second_group = produce_body(("orders", 0, ["fine"]), ("orders", 1, [{"base64": "!"}]))
    assert invoke("produce", load_event("produce", body=bad_second_group)).status == 400

    assert oxia_env.objects() == objects
    assert status_of("orders", 0) == before


def test_topics_lists_initialized_partitions(oxia_env: Env):
    empty = invoke("admin", load_event("topics"))
    assert empty.status == 200
    assert empty.body == {"topics": []}
    invoke("produce", load_event("produce"))
    invoke("produce", load_event("produce", body=produce_body(("audit", 3, ["x"]))))

    answer = invoke("admin", load_event("topics"))

    assert answer.body == {
        "topics": [{"topic": "audit", "partitions": [3]}, {"topic": "orders", "partitions": [0, 1]}]
    }


def test_partition_status(oxia_env: Env):
    invoke("produce", load_event("produce"))
    body = invoke("admin", load_event("partition_status")).body
    assert body == {
        "topic": "orders",
        "partition": 0,
        "log_state": "OPEN",
        "log_start_offset": 1,
        "high_watermark": 2,
        "next_offset": 3,
        "compaction_cursor": 1,
        "compaction_lag": 2,
        "pending": None,
        "compaction": None,
    }


@pytest.mark.parametrize("event", ["partition_status", "fence", "unfence"])
def test_an_unknown_partition_is_404(oxia_env: Env, event):
    answer = invoke("admin", load_event(event))
    assert answer.status == 404
    assert answer.body["error_type"] == "PartitionNotInitialized"


def test_consume_errors_are_per_partition(oxia_env: Env):
    invoke("produce", load_event("produce"))
    body = consume_body(("orders", 0, 0), ("orders", 1, 3), ("audit", 0, 1))
    answer = invoke("consume", load_event("consume", body=body))
    assert answer.status == 200
    below, beyond, missing = answer.body["results"]
    assert (below["ok"], below["error_type"]) == (False, "OffsetOutOfRange")
    assert (beyond["ok"], beyond["error_type"], beyond["high_watermark"]) == (False, "OffsetOutOfRange", 1)
    assert (missing["ok"], missing["error_type"]) == (False, "PartitionNotInitialized")


def test_consume_at_the_tail_is_empty_and_long_polls(oxia_env: Env):
    invoke("produce", load_event("produce"))
    start = time.monotonic()
    answer = invoke("consume", load_event("consume", body=consume_body(("orders", 0, 3), max_wait_ms=300)))
    elapsed = time.monotonic() - start
    (tail,) = answer.body["results"]
    assert (tail["ok"], tail["records"], tail["high_watermark"], tail["next_fetch_offset"]) == (True, [], 2, 3)
    assert 0.3 <= elapsed < 3


def test_the_service_survives_an_oxia_restart(oxia_env: Env, oxia_server: OxiaServer):
    """Like a Lambda environment frozen while Oxia moved on: the cached service recovers."""
    assert invoke("produce", load_event("produce")).status == 200
    service = produce_app._service.peek()
    oxia_server.restart()
    deadline = time.monotonic() + 30
    while True:
        answer = invoke("produce", load_event("produce"))
        if answer.status == 200:
            break
        assert answer.status in (409, 503), answer.body
        assert all(r["retriable"] for r in answer.body.get("results", [answer.body]) if not r.get("ok"))
        assert time.monotonic() < deadline, answer.body
        time.sleep(0.5)
    assert produce_app._service.peek() is service
    assert answer.body["results"][0]["start_offset"] >= 3
