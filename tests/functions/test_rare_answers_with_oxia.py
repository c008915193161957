"""Review of the typed answers (llog.api.native.bodies.answer): the rare branches of the admin and group
services' documents, through the handlers and real Oxia. Each answer is converted to its definition, so a
document shape the definition does not allow would be a 500 here."""

from __future__ import annotations

import time
from typing import Any

from llog.config import OxiaConfig
from llog.format.codec import ENCODING
from llog.format.kv.compaction import CompactionRecord, CompactionState
from llog.format.kv.control import ControlRecord, PendingAppend
from llog.format.kv.document import DataRef, TimeSpan
from llog.format.kv.index import EntryType, ProducerTag
from llog.protocol.topics import TopicLayouts, TopicRegistry, reclaim_topic
from llog.store.oxia import OxiaStore
from llog.store.storage import Storage
from tests.functions.conftest import Env, invoke, load_event
from tests.functions.test_handlers_with_oxia import commit, group_event, topic_event

PRODUCER = "0f9c2d1e-8b7a-4c3d-9e8f-7a6b5c4d3e2f"


def _status(topic: str, partition: int, event: str = "partition_status") -> Any:
    suffix = "/storage" if event == "partition_storage" else ""
    return invoke("admin", load_event(event, path=f"/topics/{topic}/partitions/{partition}{suffix}"))


def test_a_pending_append_and_a_compaction_in_progress_answer_200(oxia_env: Env):
    created = invoke("admin", topic_event("topic_create", {"topic": "orders", "config": {"append_protocol": "cas"}}))
    assert created.status == 201, created.body
    body = {"topic_partitions": [{"topic": "orders", "partition": 0, "records": ["a", "b"]}]}
    assert invoke("produce", load_event("produce", body=body)).status == 200
    oxia = OxiaStore(OxiaConfig.from_env())
    try:
        keys = TopicLayouts(oxia, root=oxia_env.root).keys("orders", 0)
        found = oxia.get(keys.control, partition_key=keys.partition_key)
        assert found is not None
        control = ControlRecord.decode(found.value)
        start = control.sequence_counter
        # An append reserved and not yet indexed (a writer stopped between its two writes), idempotent and inline.
        ref = DataRef("s3://bucket/llog/wal-shared/x", ENCODING, 0, 3, TimeSpan(-5, 7), b"abc")
        pending = PendingAppend("a-1", start, start + 1, 2, ref, 1, EntryType.WAL, ProducerTag(PRODUCER, 0, 0, 1))
        written = control.with_changes(pending=pending, sequence_counter=start + 2)
        oxia.put(keys.control, written.encode(), partition_key=keys.partition_key, expected_version_id=found.version_id)
        running = CompactionRecord("c-1", CompactionState.WRITING_COMPACTED_INDEX, 1, 2, 2, "s3://bucket/k", 1)
        oxia.put(keys.compaction, running.encode(), partition_key=keys.partition_key)
    finally:
        oxia.close()

    status = _status("orders", 0)
    assert status.status == 200, status.body
    assert status.body["pending"] == pending.to_json()
    assert status.body["compaction"] == {"compaction_id": "c-1", "state": "WRITING_COMPACTED_INDEX",
                                         "start_offset": 1, "end_offset": 2}  # fmt: skip
    for answer in (_status("orders", 0, "partition_storage"), invoke("admin", topic_event("topic_describe"))):
        assert answer.status == 200, answer.body


def test_a_group_with_an_expired_member_and_an_earlier_topics_offsets_describes(oxia_env: Env):
    assert invoke("admin", topic_event("topic_create", {"topic": "orders", "partitions": 1})).status == 201
    assert invoke("produce", load_event("produce", body={
        "topic_partitions": [{"topic": "orders", "partition": 0, "records": ["a"]}]})).status == 200  # fmt: skip
    joined = invoke("consume", group_event("group_join", {"topics": ["orders"], "session_timeout_ms": 1000}))
    assert joined.status == 200, joined.body
    committed = commit(joined.body["member_id"], joined.body["generation"], [
        {"topic": "orders", "partition": 0, "offset": 1}])  # fmt: skip
    assert committed.status == 200, committed.body
    assert invoke("admin", topic_event("topic_delete")).status == 200
    storage = Storage.from_env()
    try:
        deleted = TopicRegistry(storage.oxia, root=oxia_env.root).get("orders")
        assert deleted is not None
        assert reclaim_topic(storage, deleted).finished
    finally:
        storage.close()
    assert invoke("admin", topic_event("topic_create", {"topic": "orders", "partitions": 1})).status == 201
    time.sleep(1.2)  # the member's lease ends

    described = invoke("consume", group_event("group_describe"))

    assert described.status == 200, described.body
    assert described.body["members"] == []
    (offsets,) = described.body["offsets"]
    assert (offsets["committed"], offsets["committed_for_earlier_topic"], offsets["lag"]) == (None, 1, None)
    assert invoke("consume", group_event("group_list")).status == 200
