"""Compaction task messages (the SQS body between planner and worker)."""

from __future__ import annotations

import pytest

from llog.errors import InvalidArgument
from llog.service.compaction import CompactionTask


def test_round_trip() -> None:
    task = CompactionTask("orders", 3, 120)
    assert CompactionTask.from_message(task.to_message()) == task


@pytest.mark.parametrize(
    "body",
    ["", "not json", "[]", '{"topic": "orders"}', '{"partition": 0}', '{"topic": "a/b", "partition": 0}',
     '{"topic": "orders", "partition": -1}', '{"topic": "orders", "partition": "0"}',
     '{"topic": "orders", "partition": 0, "lag": "x"}'],
)
def test_poison_messages_are_invalid_arguments(body: str) -> None:
    with pytest.raises(InvalidArgument):
        CompactionTask.from_message(body)
