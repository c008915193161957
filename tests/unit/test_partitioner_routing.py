"""Keyed produce's routing (``llog.service.produce.route``): Kafka's partitioner per key, keyless records sticky.

The hash itself is checked against Kafka's vectors with the client (``llog_client.partitioner``);
here, how a request's entries become partition batches.
"""

from __future__ import annotations

import itertools

from llog.format.codec import Record
from llog.protocol.append import SharedAppendGroup
from llog.service.produce import ProduceEntry, route
from llog_client.partitioner import partition_for_key


def test_each_keyed_record_goes_to_kafkas_partition_for_its_key_in_order() -> None:
    keys = [f"user-{i}".encode() for i in range(40)]
    entry = ProduceEntry("orders", None, [Record(k + b"-value", key=k) for k in keys])

    groups = route([entry], {"orders": 6}, lambda n: 0)

    expected: dict[int, list[bytes]] = {}
    for k in keys:
        expected.setdefault(partition_for_key(k, 6), []).append(k + b"-value")
    assert [g.partition for g in groups] == list(expected)  # in the order of each partition's first record
    assert {g.partition: [r.value for r in g.records if isinstance(r, Record)] for g in groups} == expected
    assert len(expected) > 3


def test_the_same_key_always_lands_on_the_same_partition() -> None:
    entry = ProduceEntry("orders", None, [Record(b"1", key=b"k"), Record(b"2", key=b"other"), Record(b"3", key=b"k")])
    (first, *_) = route([entry], {"orders": 12}, lambda n: 0)
    assert first.partition == partition_for_key(b"k", 12)
    assert [r.value for r in first.records if isinstance(r, Record)] == [b"1", b"3"]


def test_keyless_records_go_to_one_partition_per_request_and_topic() -> None:
    counter = itertools.count()
    asked: list[int] = []

    def next_partition(n: int) -> int:
        asked.append(n)
        return next(counter) % n

    request = [
        ProduceEntry("orders", None, [b"a", Record(b"b"), Record(b"c", key=None)]),
        ProduceEntry("orders", None, [b"d"]),
        ProduceEntry("audit", None, [b"e"]),
    ]
    groups = route(request, {"orders": 3, "audit": 2}, next_partition)

    assert [(g.topic, g.partition, len(g.records)) for g in groups] == [("orders", 0, 3), ("orders", 0, 1),
                                                                        ("audit", 1, 1)]  # fmt: skip
    assert asked == [3, 2]  # once per topic of the request
    second = route([ProduceEntry("orders", None, [b"f"])], {"orders": 3}, next_partition)
    assert [g.partition for g in second] == [2]  # the next request: the next partition


def test_entries_with_a_partition_pass_through_as_they_are() -> None:
    explicit = SharedAppendGroup("orders", 5, [b"x"])
    keyed = ProduceEntry("orders", None, [Record(b"y", key=b"k")])

    groups = route([explicit, ProduceEntry("implicit", 7, [b"z"]), keyed], {"orders": 8}, lambda n: 0)

    assert groups[0] == explicit
    assert (groups[1].topic, groups[1].partition) == ("implicit", 7)
    assert groups[2].partition == partition_for_key(b"k", 8)
