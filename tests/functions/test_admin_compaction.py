"""``POST .../compact`` and ``GET .../storage`` on events/ samples against the real Oxia server and moto S3."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.functions.conftest import Env, invoke, load_event

pytestmark = pytest.mark.oxia


def produce(topic: str, partition: int, values: list[str]) -> None:
    body = {"topic_partitions": [{"topic": topic, "partition": partition, "records": values}]}
    answer = invoke("produce", load_event("produce", body=body))
    assert answer.status == 200, answer.body


def test_compact_rewrites_the_partition_and_answers_its_status(oxia_env: Env):
    topic = f"c-{uuid.uuid4().hex[:8]}"
    for batch in range(3):
        produce(topic, 1, [f"v{batch}-{i}" for i in range(4)])
    objects_before = oxia_env.objects()

    answer = invoke("admin", load_event("compact", path=f"/topics/{topic}/partitions/1/compact"))

    assert answer.status == 200, answer.body
    assert (answer.body["topic"], answer.body["partition"]) == (topic, 1)
    assert answer.body["caught_up"] is True
    assert answer.body["compaction_lag_before"] == 12
    assert answer.body["records"] == 12
    assert answer.body["bytes_written"] > 0
    assert [run["outcome"] for run in answer.body["runs"]] == ["compacted", "nothing_to_do"]
    assert (answer.body["runs"][0]["start_offset"], answer.body["runs"][0]["end_offset"]) == (1, 12)
    status = answer.body["status"]
    assert (status["compaction_cursor"], status["compaction_lag"], status["high_watermark"]) == (13, 0, 12)
    assert oxia_env.objects() > objects_before, "a compacted object (and its manifest) was written"

    # The records read back the same from the compacted object.
    consumed = invoke("consume", load_event("consume", body={
        "topic_partitions": [{"topic": topic, "partition": 1, "fetch_offset": 1}], "max_wait_ms": 0}))  # fmt: skip
    assert [r["value"] for r in consumed.body["results"][0]["records"]] == [
        f"v{b}-{i}" for b in range(3) for i in range(4)
    ]

    again = invoke("admin", load_event("compact", path=f"/topics/{topic}/partitions/1/compact"))
    assert again.status == 200
    assert (again.body["records"], again.body["caught_up"], again.body["compaction_lag_before"]) == (0, True, 0)
    assert [run["outcome"] for run in again.body["runs"]] == ["nothing_to_do"]


def test_storage_counts_wal_batches_then_compacted_objects(oxia_env: Env):
    topic = f"s-{uuid.uuid4().hex[:8]}"
    produce(topic, 0, ["alpha", "beta"])
    produce(topic, 0, ["gamma"])
    path = f"/topics/{topic}/partitions/0/storage"
    before_ms = int(time.time() * 1000)

    answer = invoke("admin", load_event("partition_storage", path=path))

    assert answer.status == 200, answer.body
    body = answer.body
    assert body["append_protocol"] == "sequential"  # the deployment default for new partitions
    assert (body["log_start_offset"], body["high_watermark"]) == (1, 3)
    assert (body["wal_batches"], body["compacted_objects"], body["compacted_bytes"]) == (2, 0, 0)
    assert body["wal_bytes"] > 0
    assert body["stored_bytes"] == body["wal_bytes"]
    assert (body["compaction_cursor"], body["compaction_lag"]) == (1, 3)
    assert body["oldest_uncompacted_at_ms"] <= before_ms
    assert body["compaction_lag_ms"] >= 0

    assert invoke("admin", load_event("compact", path=f"/topics/{topic}/partitions/0/compact")).status == 200
    compacted = invoke("admin", load_event("partition_storage", path=path)).body

    assert (compacted["wal_batches"], compacted["wal_bytes"], compacted["compacted_objects"]) == (0, 0, 1)
    assert compacted["compacted_bytes"] > 0
    assert compacted["stored_bytes"] == compacted["compacted_bytes"]
    assert (compacted["compaction_lag"], compacted["oldest_uncompacted_at_ms"], compacted["compaction_lag_ms"]) == (
        0, None, None)  # fmt: skip


@pytest.mark.parametrize("event", ["compact", "partition_storage"])
def test_a_partition_never_created_is_404_and_a_bad_partition_400(oxia_env: Env, event: str):
    suffix = "compact" if event == "compact" else "storage"
    missing = invoke("admin", load_event(event, path=f"/topics/nothing-{uuid.uuid4().hex[:8]}/partitions/0/{suffix}"))
    assert missing.status == 404, missing.body
    assert missing.body["error_type"] == "PartitionNotInitialized"

    invalid = invoke("admin", load_event(event, path=f"/topics/orders/partitions/-1/{suffix}"))
    assert invalid.status == 400
    assert invalid.body["error_type"] == "InvalidPartition"


def test_a_deleted_topic_is_not_compacted(oxia_env: Env):
    topic = f"d-{uuid.uuid4().hex[:8]}"
    produce(topic, 0, ["x"])
    assert invoke("admin", load_event("topic_delete", path=f"/topics/{topic}")).status == 200

    answer = invoke("admin", load_event("compact", path=f"/topics/{topic}/partitions/0/compact"))

    assert answer.status == 404
    assert answer.body["error_type"] == "UnknownTopic"


def test_compact_answers_405_to_other_methods(oxia_env: Env):
    event = load_event("compact")
    event["httpMethod"] = "GET"
    answer = invoke("admin", event)
    assert answer.status == 405
    assert answer.headers["Allow"] == "POST"
