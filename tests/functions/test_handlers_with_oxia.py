"""The three Lambda handlers on events/ samples against the real Oxia server and moto S3.

Each test has its own ``LLOG_ROOT_PREFIX`` (see conftest), so topics, S3
objects and the ``/topics`` listing are its own.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from typing import Any

import pytest

from functions.compaction_planner import app as planner_app
from functions.produce import app as produce_app
from llog_client.wire import decode_bytes
from tests.conftest import OxiaServer
from tests.functions.conftest import Answer, Env, invoke, load_event

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
    # New partitions are sequential: the entry is the sequence key ending at offset 2 (docs/SEQUENTIAL_APPEND.md),
    # in the folder of the topic's id (its first produce created its record).
    assert re.match(rf"{oxia_env.root}/orders/[0-9a-f-]{{36}}/partitions/0/seq/", first["index_key"])
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
        assert decode_bytes(record["value"]) == value
        assert record["key"] is None if i % 2 == 0 else decode_bytes(record["key"]) == value[:3]
        assert decode_bytes(record["headers"]["n"]) == value[:2]
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
        "topics": [
            {"topic": "audit", "partitions": [3], "explicit": False},
            {"topic": "orders", "partitions": [0, 1], "explicit": False},
        ]
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


# --- consumer groups (docs/GROUPS.md) ---------------------------------------------------------


def group_event(name: str, body: Any = None, *, group: str = "billing") -> dict[str, Any]:
    """A group sample event, for ``group`` (path and path parameter) and with ``body`` if given."""
    event = load_event(name, body=body)
    event["path"] = event["path"].replace("/billing", f"/{group}")
    event["requestContext"]["path"] = f"/prod{event['path']}"
    if event["pathParameters"]:
        event["pathParameters"] = {"group": group}
    return event


def commit(member: str, generation: int, offsets: list[dict[str, Any]]) -> Answer:
    return invoke("consume", group_event("group_commit", {"member_id": member, "generation": generation,
                                                          "offsets": offsets}))


def test_a_group_joins_commits_and_reports_its_lag(oxia_env: Env):
    assert invoke("produce", load_event("produce")).status == 200  # orders/0 has 2 records, orders/1 one

    joined = invoke("consume", group_event("group_join"))

    assert joined.status == 200, joined.body
    member, generation = joined.body["member_id"], joined.body["generation"]
    assert joined.body == {
        "group": "billing",
        "member_id": member,
        "generation": 1,
        "assignments": [{"topic": "orders", "partitions": [0, 1]}],
        "heartbeat_interval_ms": 3333,
    }
    beat = invoke("consume", group_event("group_heartbeat", {"member_id": member, "generation": generation}))
    assert (beat.status, beat.body) == (200, {"generation": 1, "rejoin": False})
    offsets = [{"topic": "orders", "partition": 0, "offset": 2}]
    committed = commit(member, 1, offsets)
    assert (committed.status, committed.body) == (200, {"group": "billing", "committed": offsets})

    described = invoke("consume", group_event("group_describe"))

    assert described.status == 200
    assert described.body["generation"] == 1
    (m,) = described.body["members"]
    assert (m["member_id"], m["topics"], m["assignments"]) == (member, ["orders"], joined.body["assignments"])
    assert described.body["offsets"] == [
        {"topic": "orders", "partition": 0, "committed": 2, "log_start": 1, "high_watermark": 2, "lag": 1,
         "below_log_start": False, "committed_for_earlier_topic": None},
        {"topic": "orders", "partition": 1, "committed": None, "log_start": 1, "high_watermark": 1, "lag": None,
         "below_log_start": False, "committed_for_earlier_topic": None},
    ]
    assert invoke("consume", group_event("group_list")).body == {"groups": ["billing"]}

    # A second member: the first one's generation is stale until it rejoins.
    other = invoke("consume", group_event("group_join")).body
    assert other["generation"] == 2
    stale = commit(member, 1, offsets)
    assert (stale.status, stale.body["error_type"], stale.body["retriable"]) == (409, "StaleGeneration", False)
    beat = invoke("consume", group_event("group_heartbeat", {"member_id": member, "generation": 1}))
    assert beat.body == {"generation": 2, "rejoin": True}
    rejoined = invoke("consume", group_event("group_join", {"topics": ["orders"], "member_id": member})).body
    theirs = other["assignments"][0]["partitions"][0]
    not_mine = [{"topic": "orders", "partition": theirs, "offset": 1}]
    refused = commit(member, 2, not_mine)
    assert (refused.status, refused.body["error_type"]) == (409, "NotPartitionOwner")
    assert rejoined["generation"] == 2

    left = invoke("consume", group_event("group_leave", {"member_id": member}))
    assert (left.status, left.body) == (200, {"group": "billing", "member_id": member, "left": True})
    gone = invoke("consume", group_event("group_heartbeat", {"member_id": member, "generation": 2}))
    assert (gone.status, gone.body["error_type"]) == (409, "UnknownMember")


@pytest.mark.parametrize(
    ("name", "body", "group", "status", "error_type"),
    [
        ("group_describe", None, "nobody", 404, "UnknownGroup"),
        ("group_join", {"topics": ["no-such-topic"]}, "billing", 404, "UnknownTopic"),
        ("group_join_invalid_session_timeout", None, "billing", 400, "InvalidArgument"),
        ("group_join", {"topics": ["orders"], "session_timeout": 10000}, "billing", 400, "InvalidRequest"),
        ("group_join", {"topics": []}, "billing", 400, "InvalidRequest"),
        ("group_join", {"topics": ["orders"]}, "bad%20name", 400, "InvalidArgument"),
        ("group_heartbeat", {"member_id": "m", "generation": "1"}, "billing", 400, "InvalidRequest"),
        ("group_heartbeat", {"member_id": "nobody", "generation": 1}, "billing", 409, "UnknownMember"),
        ("group_commit", {"member_id": "m", "generation": 1, "offsets": []}, "billing", 400, "InvalidRequest"),
        (
            "group_commit",
            {"member_id": "m", "generation": 1, "offsets": [{"topic": "no-such-topic", "partition": 0, "offset": 1}]},
            "billing", 404, "UnknownTopic",
        ),
        (
            "group_commit",
            {"member_id": "m", "generation": 1, "offsets": [{"topic": "orders", "partition": 0, "offset": -1}]},
            "billing", 400, "InvalidRequest",
        ),
    ],
)
def test_group_requests_that_are_refused_write_nothing(oxia_env: Env, name, body, group, status, error_type):
    assert invoke("produce", load_event("produce")).status == 200

    answer = invoke("consume", group_event(name, body, group=group))

    assert (answer.status, answer.body["error_type"]) == (status, error_type), answer.body
    if error_type == "UnknownTopic":  # the answer names the topic, so that a consumer can drop its partitions
        assert answer.body["topic"] == "no-such-topic"
    assert invoke("consume", group_event("group_list")).body == {"groups": []}


def test_a_group_route_with_another_method_is_405(oxia_env: Env):
    event = group_event("group_describe")
    event["httpMethod"] = event["requestContext"]["httpMethod"] = "DELETE"
    answer = invoke("consume", event)
    assert answer.status == 405
    assert answer.headers["Allow"] == "GET"


def test_the_planner_emits_consumer_lag_per_group_and_partition(
    oxia_env: Env, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    assert invoke("produce", load_event("produce")).status == 200
    joined = invoke("consume", group_event("group_join")).body
    assert commit(joined["member_id"], 1, [{"topic": "orders", "partition": 0, "offset": 1}]).status == 200
    capsys.readouterr()
    planner_app.reset()
    try:
        assert planner_app.report_consumer_lag() == 1
    finally:
        planner_app.reset()

    emitted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    (doc,) = [d for d in emitted if "ConsumerLag" in d]
    assert (doc["ConsumerLag"], doc["group"], doc["topic"], doc["partition"]) == ([2.0], "billing", "orders", "0")
    (directive,) = doc["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "llog"
    assert sorted(directive["Dimensions"][0]) == ["group", "partition", "service", "topic"]


# --- topics and keyed produce ----------------------------------------------------------------------


def topic_event(name: str, body: Any = None, *, topic: str = "orders") -> dict[str, Any]:
    """A topic sample event (events/topic_*.json) for ``topic``, optionally with another body."""
    event = load_event(name, body=body)
    if event["pathParameters"]:
        event["path"] = event["path"].replace("/orders", f"/{topic}", 1)
        event["requestContext"]["path"] = f"/prod{event['path']}"
        event["pathParameters"]["topic"] = topic
    return event


def test_a_topic_is_created_described_grown_and_deleted(oxia_env: Env):
    created = invoke("admin", topic_event("topic_create"))
    assert created.status == 201, created.body
    assert created.body["topic"] == "orders"
    assert (created.body["partitions"], created.body["explicit"]) == (6, True)
    assert created.body["config"] == {"append_protocol": "sequential", "retention_ms": 604800000,
                                      "retention_bytes": None}  # fmt: skip
    assert [s["partition"] for s in created.body["partition_status"]] == list(range(6))
    assert all(s["log_state"] == "OPEN" and s["next_offset"] == 1 for s in created.body["partition_status"])

    again = invoke("admin", topic_event("topic_create"))
    assert again.status == 200
    assert again.body["created_at_ms"] == created.body["created_at_ms"]
    other = invoke("admin", load_event("topic_create", body={"topic": "orders", "partitions": 3}))
    assert (other.status, other.body["error_type"]) == (409, "TopicExists")

    described = invoke("admin", topic_event("topic_describe"))
    assert described.status == 200
    assert described.body == again.body
    listed = invoke("admin", load_event("topics"))
    assert listed.body == {"topics": [{"topic": "orders", "partitions": list(range(6)), "explicit": True}]}

    grown = invoke("admin", topic_event("topic_grow"))
    assert (grown.status, grown.body["partitions"]) == (200, 12)
    shrink = invoke("admin", topic_event("topic_grow", {"partitions": 4}))
    assert (shrink.status, shrink.body["error_type"]) == (400, "InvalidPartitionCount")

    deleted = invoke("admin", topic_event("topic_delete"))
    assert (deleted.status, deleted.body) == (200, {"topic": "orders", "deleted": True})
    gone = invoke("admin", topic_event("topic_describe"))
    assert (gone.status, gone.body["error_type"]) == (404, "UnknownTopic")
    produced = invoke("produce", load_event("produce"))
    assert (produced.status, produced.body["error_type"]) == (404, "UnknownTopic")
    consumed = invoke("consume", load_event("consume"))
    assert (consumed.status, consumed.body["error_type"]) == (404, "UnknownTopic")
    recreate = invoke("admin", topic_event("topic_create"))
    assert (recreate.status, recreate.body["error_type"]) == (409, "TopicDeleted")
    assert invoke("admin", load_event("topics")).body == {"topics": []}


def test_topic_requests_that_are_refused_write_nothing(oxia_env: Env):
    for body, error_type in [
        ({"topic": "orders", "partitions": 0}, "InvalidPartitionCount"),
        ({"topic": "orders", "partitions": 10_001}, "InvalidPartitionCount"),
        ({"topic": "orders", "config": {"segment_bytes": 1}}, "InvalidArgument"),
        ({"topic": "orders", "config": {"append_protocol": "fast"}}, "InvalidArgument"),
        ({"topic": "orders/x"}, "InvalidTopicName"),
        ({"topic": "orders", "replicas": 3}, "InvalidRequest"),
    ]:
        answer = invoke("admin", load_event("topic_create", body=body))
        assert (answer.status, answer.body["error_type"]) == (400, error_type), body
    for name in ("topic_describe", "topic_grow", "topic_delete"):
        answer = invoke("admin", topic_event(name, topic="nothing-here"))
        assert (answer.status, answer.body["error_type"]) == (404, "UnknownTopic"), name
    assert invoke("admin", load_event("topics")).body == {"topics": []}
    assert oxia_env.objects() == 0


def test_keyed_produce_routes_by_kafkas_partitioner(oxia_env: Env):
    from llog_client.partitioner import partition_for_key

    assert invoke("admin", load_event("topic_create", body={"topic": "orders", "partitions": 4})).status == 201

    answer = invoke("produce", load_event("produce_keyed"))

    assert answer.status == 200, answer.body
    first, second = partition_for_key(b"customer-1", 4), partition_for_key(b"customer-2", 4)
    consumed = invoke("consume", load_event("consume", body=consume_body(*[("orders", p, 1) for p in range(4)])))
    by_partition = {r["partition"]: [(rec["key"], rec["value"]) for rec in r["records"]]
                    for r in consumed.body["results"]}  # fmt: skip
    assert ("customer-1", "created") in by_partition[first]
    assert ("customer-1", "paid") in by_partition[first]
    assert ("customer-2", "created") in by_partition[second]
    (keyless,) = [p for p, records in by_partition.items() if (None, "no key") in records]
    # One result per partition written, in the order the records first go there.
    assert [r["partition"] for r in answer.body["results"]] == list(dict.fromkeys([first, second, keyless]))
    assert sum(r["count"] for r in answer.body["results"]) == 4


def test_a_partition_past_an_explicit_topics_count_is_400_and_writes_nothing(oxia_env: Env):
    assert invoke("admin", load_event("topic_create", body={"topic": "orders", "partitions": 1})).status == 201

    answer = invoke("produce", load_event("produce"))  # orders/0 and orders/1

    assert (answer.status, answer.body["error_type"]) == (400, "InvalidPartition")
    assert "has 1 partitions" in answer.body["error"]
    assert oxia_env.objects() == 0
    keyed_implicit = invoke("produce", load_event("produce_keyed", body={
        "topic_partitions": [{"topic": "implicit", "records": [{"key": "k", "value": "v"}]}]}))  # fmt: skip
    assert (keyed_implicit.status, keyed_implicit.body["error_type"]) == (404, "UnknownTopic")
    assert oxia_env.objects() == 0


def test_an_implicit_topic_describes_as_not_explicit(oxia_env: Env):
    assert invoke("produce", load_event("produce")).status == 200

    described = invoke("admin", topic_event("topic_describe"))

    assert described.status == 200
    assert (described.body["explicit"], described.body["partitions"]) == (False, 2)
    assert [s["high_watermark"] for s in described.body["partition_status"]] == [2, 1]
    grow = invoke("admin", topic_event("topic_grow"))
    assert (grow.status, grow.body["error_type"]) == (404, "UnknownTopic")


def test_offsets_for_times_earliest_and_latest(oxia_env: Env):
    stamps = [1_700_000_000_000, 1_700_000_060_000, 1_700_000_030_000]
    records = [{"value": f"r{i}", "timestamp_ms": ts} for i, ts in enumerate(stamps)]
    assert invoke("produce", load_event("produce", body=produce_body(("orders", 0, records)))).status == 200
    answer = invoke("consume", load_event("offsets"))
    assert answer.status == 200, answer.body
    at_time, earliest = answer.body["results"]
    assert (at_time["ok"], at_time["offset"], at_time["timestamp_ms"]) == (True, 1, stamps[0])
    assert (earliest["ok"], earliest["error_type"]) == (False, "PartitionNotInitialized")

    def lookup(timestamp: int | str) -> dict[str, Any]:
        body = {"topic_partitions": [{"topic": "orders", "partition": 0, "timestamp_ms": timestamp}]}
        found = invoke("consume", load_event("offsets", body=body))
        assert found.status == 200, found.body
        result: dict[str, Any] = found.body["results"][0]
        return result

    # The first record at or after the time in offset order, though timestamps go back at offset 3.
    assert (lookup(1_700_000_020_000)["offset"], lookup(1_700_000_020_000)["timestamp_ms"]) == (2, stamps[1])
    assert lookup(1_700_000_060_001)["offset"] is None
    assert (lookup("earliest")["offset"], lookup("latest")["offset"], lookup("latest")["high_watermark"]) == (1, 4, 3)
