"""``POST /producers`` and idempotent or conditional ``POST /produce`` through the Lambda handlers (real Oxia)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from functions.produce import app as produce_app
from llog.format.keys import new_object_id
from tests.functions.conftest import Env, invoke, load_event

pytestmark = pytest.mark.oxia


def producers(body: dict[str, Any]) -> Any:
    return invoke("produce", load_event("producers", body=body))


def produce(entries: list[dict[str, Any]], **top: Any) -> Any:
    return invoke("produce", load_event("produce", body={"topic_partitions": entries, **top}))


def entry(topic: str, values: list[str], **fields: Any) -> dict[str, Any]:
    return {"topic": topic, "partition": 0, "records": values, **fields}


def test_a_retried_idempotent_produce_returns_the_original_offsets_marked_duplicate(oxia_env: Env) -> None:
    topic = f"idem-{uuid.uuid4().hex[:8]}"
    issued = producers({})
    assert issued.status == 200, issued.body
    assert issued.body["producer_epoch"] == 0
    me = {"producer_id": issued.body["producer_id"], "producer_epoch": 0}

    first = produce([entry(topic, ["a", "b"], sequence=0)], **me)
    assert first.status == 200, first.body
    (result,) = first.body["results"]
    assert (result["start_offset"], result["end_offset"], "duplicate" in result) == (1, 2, False)
    retry = produce([entry(topic, ["a", "b"], sequence=0)], **me)
    assert retry.status == 200, retry.body
    (again,) = retry.body["results"]
    assert (again["start_offset"], again["end_offset"], again["duplicate"]) == (1, 2, True)
    assert (again["index_key"], again["wal_uri"]) == (None, None)

    gap = produce([entry(topic, ["z"], sequence=5)], **me)
    assert (gap.status, gap.body["results"][0]["error_type"]) == (409, "OutOfOrderSequence")
    bumped = producers({"producer_id": me["producer_id"]})
    assert (bumped.status, bumped.body["producer_epoch"]) == (200, 1)
    assert produce([entry(topic, ["c"], sequence=0)], **{**me, "producer_epoch": 1}).status == 200
    fenced = produce([entry(topic, ["z"], sequence=2)], **me)
    assert (fenced.status, fenced.body["results"][0]["error_type"]) == (409, "ProducerFenced")
    unknown = produce([entry(topic, ["z"], sequence=0)], producer_id=new_object_id(), producer_epoch=0)
    assert (unknown.status, unknown.body["results"][0]["error_type"]) == (409, "UnknownProducer")

    consumed = invoke("consume", load_event("consume", body={"topic_partitions": [
        {"topic": topic, "partition": 0, "fetch_offset": 1}]}))  # fmt: skip
    assert [r["value"] for r in consumed.body["results"][0]["records"]] == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("body", "error_type", "status"),
    [
        ({"producer_id": "not-an-id"}, "InvalidRequest", 400),
        ({"producer_id": "0190a0e0-0000-7000-8000-000000000000"}, "UnknownProducer", 409),
        ({"epoch": 1}, "InvalidRequest", 400),
    ],
)
def test_bad_producers_requests(oxia_env: Env, body: dict[str, Any], error_type: str, status: int) -> None:
    answer = producers(body)
    assert (answer.status, answer.body["error_type"]) == (status, error_type)


@pytest.mark.parametrize(
    ("top", "fields", "message"),
    [
        ({}, {"sequence": 0}, "needs a producer_id"),
        ({"producer_id": "0190a0e0-0000-7000-8000-000000000000", "producer_epoch": 0}, {}, "sequence is required"),
        ({"producer_id": "0190a0e0-0000-7000-8000-000000000000"}, {"sequence": 0}, "producer_epoch"),
        ({}, {"expected_offset": 0}, "expected_offset"),
    ],
)
def test_malformed_idempotence_fields_are_400_and_write_nothing(
    oxia_env: Env, top: dict[str, Any], fields: dict[str, Any], message: str
) -> None:
    answer = produce([entry("orders", ["x"], **fields)], **top)
    assert (answer.status, answer.body["error_type"]) == (400, "InvalidRequest")
    assert message in answer.body["error"]
    assert oxia_env.objects() == 0


def test_conditional_produce(oxia_env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    sequential = f"seq-{uuid.uuid4().hex[:8]}"
    refused = produce([entry(sequential, ["a"], expected_offset=1)])
    assert (refused.status, refused.body["error_type"]) == (400, "ConditionalAppendUnsupported")
    assert oxia_env.objects() == 0

    monkeypatch.setenv("LLOG_APPEND_PROTOCOL", "cas")
    produce_app.reset()  # a new execution environment, whose writer creates CAS partitions
    cas = f"cas-{uuid.uuid4().hex[:8]}"
    assert produce([entry(cas, ["a", "b"], expected_offset=1)]).status == 200
    mismatch = produce([entry(cas, ["c"], expected_offset=1)])
    assert mismatch.status == 412, mismatch.body
    (result,) = mismatch.body["results"]
    assert (result["error_type"], result["next_offset"], result["retriable"]) == ("OffsetMismatch", 3, False)
    assert produce([entry(cas, ["c"], expected_offset=3)]).body["results"][0]["start_offset"] == 3
