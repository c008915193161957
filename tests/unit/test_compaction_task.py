"""Compaction task messages (the SQS body between planner and worker)."""

from __future__ import annotations

import pytest

from llog.errors import InvalidArgument
from llog.service.compaction import CompactionTask


def test_round_trip() -> None:
    task = CompactionTask("orders", 3, 120)
    assert CompactionTask.from_message(task.to_message()) == task
    assert "topic_id" not in task.to_message()  # the legacy folder, as messages from before topic ids say it
    keyed = CompactionTask("orders", 3, 120, "6f1c0a52-8d0e-4c1b-9a57-2b9d8c1e0f43")
    assert CompactionTask.from_message(keyed.to_message()) == keyed
    assert keyed.keys("llog").base == "llog/orders/6f1c0a52-8d0e-4c1b-9a57-2b9d8c1e0f43/partitions/3"


@pytest.mark.parametrize(
    "body",
    ["", "not json", "[]", '{"topic": "orders"}', '{"partition": 0}', '{"topic": "a/b", "partition": 0}',
     '{"topic": "orders", "partition": -1}', '{"topic": "orders", "partition": "0"}',
     '{"topic": "orders", "partition": 0, "lag": "x"}',
     '{"topic": "orders", "partition": 0, "topic_id": "partitions"}',
     '{"topic": "orders", "partition": 0, "topic_id": 7}'],
)
def test_poison_messages_are_invalid_arguments(body: str) -> None:
    with pytest.raises(InvalidArgument):
        CompactionTask.from_message(body)
