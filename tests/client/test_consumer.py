"""The group consumer against a real ``llog serve``: committed offsets, rebalances, seek."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest

from llog.format.kv.control import AppendProtocol
from llog.protocol.append import LogWriter
from llog.protocol.groups import GroupCoordinator, OffsetCommit
from llog.protocol.topics import TopicConfig, TopicRegistry, reclaim_topic
from llog.store.storage import Storage
from llog_client.consumer import Consumer, Record
from llog_client.errors import UnavailableError
from llog_client.producer import Producer
from server.serve import LlogServer
from tests.client.conftest import call

# A bound on the loops that wait for the group to settle, so that a bug fails the test instead of hanging it.
SETTLE_S = 60


def produce(server: LlogServer, topic: str, values: dict[int, list[str]]) -> None:
    with Producer(server.url) as producer:
        for partition, partition_values in values.items():
            for value in partition_values:
                producer.send(topic, value, partition=partition)
        producer.flush()


def poll_until(consumer: Consumer, done: Callable[[list[Record]], bool]) -> list[Record]:
    records: list[Record] = []
    deadline = time.monotonic() + SETTLE_S
    while not done(records):
        assert time.monotonic() < deadline, f"gave up with {len(records)} records"
        records += consumer.poll(0.5)
    return records


def test_a_group_reads_every_record_once_across_restarts(server: LlogServer) -> None:
    values = {p: [f"p{p}-{i}" for i in range(10)] for p in range(3)}
    produce(server, "events", values)
    with Consumer(server.url, "readers", ["events"], enable_auto_commit=False) as consumer:
        records = poll_until(consumer, lambda got: len(got) >= 30)
        consumer.commit()
        assert sorted(consumer.assignment) == [("events", 0), ("events", 1), ("events", 2)]
    assert sorted(r.value.decode() for r in records) == sorted(v for vs in values.values() for v in vs)
    for partition in range(3):
        assert [r.offset for r in records if r.partition == partition] == list(range(1, 11))

    produce(server, "events", {1: ["late"]})
    with Consumer(server.url, "readers", ["events"]) as consumer:
        record = next(iter(consumer))  # iterating polls until a record comes
        assert (record.partition, record.offset, record.value) == (1, 11, b"late")
        assert consumer.poll(0.2) == []


def test_a_new_group_starts_at_the_tail_with_latest_and_seek_rereads(server: LlogServer) -> None:
    produce(server, "tail", {0: ["old-1", "old-2"]})
    with Consumer(server.url, "tailers", ["tail"], auto_offset_reset="latest") as consumer:
        assert consumer.poll(0.2) == []
        assert consumer.position("tail", 0) == 3
        produce(server, "tail", {0: ["new"]})
        (record,) = poll_until(consumer, lambda got: len(got) >= 1)
        assert record.value == b"new"
        consumer.seek("tail", 0, 1)
        again = poll_until(consumer, lambda got: len(got) >= 3)
        assert [r.value for r in again] == [b"old-1", b"old-2", b"new"]


def test_members_share_the_partitions_and_are_told_of_rebalances(server: LlogServer) -> None:
    produce(server, "shared", {p: [f"v{p}"] for p in range(4)})
    assigned: dict[str, list[tuple[str, int]]] = {"a": [], "b": []}
    revoked: dict[str, list[tuple[str, int]]] = {"a": [], "b": []}

    def member(name: str) -> Consumer:
        return Consumer(server.url, "sharers", ["shared"], session_timeout_ms=3_000,
                        on_assign=assigned[name].extend, on_revoke=revoked[name].extend)  # fmt: skip

    first, second = member("a"), member("b")
    try:
        poll_until(first, lambda got: len(got) >= 4)
        assert sorted(assigned["a"]) == [("shared", p) for p in range(4)]
        deadline = time.monotonic() + SETTLE_S
        while not (first.assignment and second.assignment and len(first.assignment + second.assignment) == 4):
            assert time.monotonic() < deadline, (first.assignment, second.assignment)
            first.poll(0.2)
            second.poll(0.2)
        assert not set(first.assignment) & set(second.assignment)
        assert sorted(revoked["a"]) == sorted(second.assignment)
        assert sorted(assigned["b"]) == sorted(second.assignment)
    finally:
        first.close()
        second.close()


def test_a_partition_a_join_moves_is_read_by_both_members_until_the_old_owner_hears_of_it(server: LlogServer) -> None:
    """At least once across a rebalance (docs/GROUPS.md, "What is and is not guaranteed"): a join moves a
    partition at once, and its old owner reads it on until a heartbeat or a commit tells it, so both deliver what
    was appended in between. The old owner's commit is refused (the offset never passes what the new owner
    read); it joins again, commits the partition it kept and reads only that one."""
    produce(server, "moved", {p: [f"old-{p}"] for p in range(2)})

    def member() -> Consumer:  # a heartbeat every 20 s: none comes during the test
        return Consumer(server.url, "movers", ["moved"], enable_auto_commit=False, session_timeout_ms=60_000)

    old, new = member(), member()
    try:
        poll_until(old, lambda got: len(got) >= 2)
        old.commit()
        new.poll(0.2)  # joins: the group moves one partition from the old member to it
        ((_, moved),) = new.assignment
        kept = 1 - moved
        produce(server, "moved", {p: [f"new-{p}"] for p in range(2)})
        read_by_old = poll_until(old, lambda got: len(got) >= 2)
        read_by_new = poll_until(new, lambda got: len(got) >= 1)
        assert sorted((r.partition, r.value) for r in read_by_old) == [(0, b"new-0"), (1, b"new-1")]
        assert [(r.partition, r.value) for r in read_by_new] == [(moved, f"new-{moved}".encode())]
        old.commit()  # refused as stale: it joins again and commits what it kept
        assert old.assignment == [("moved", kept)]
        offsets = {o["partition"]: o["committed"] for o in call(server, "GET", "/groups/movers")["offsets"]}
        assert offsets == {moved: 2, kept: 3}  # the old member's position 3 of the moved partition was not stored
    finally:
        old.close()
        new.close()


def test_seek_to_time_and_offsets_for_times(server: LlogServer) -> None:
    hour = 3_600_000
    base = 1_795_000_000_000
    with Producer(server.url) as producer:
        for partition in (0, 1):
            for i in range(6):
                producer.send("timed", f"p{partition}-{i}", partition=partition, timestamp_ms=base + i * hour)
        producer.flush()
    with Consumer(server.url, "time-travellers", ["timed"], enable_auto_commit=False) as consumer:
        assert consumer.poll(0.2) is not None
        found = consumer.offsets_for_times({("timed", 0): base + 2 * hour + 1, ("timed", 1): "earliest"})
        assert found == {("timed", 0): 4, ("timed", 1): 1}
        assert consumer.offsets_for_times({("timed", 0): base + 9 * hour}) == {("timed", 0): None}
        consumer.seek_to_time(base + 4 * hour)
        assert (consumer.position("timed", 0), consumer.position("timed", 1)) == (5, 5)
        records = poll_until(consumer, lambda got: len(got) >= 4)
        assert sorted(r.value.decode() for r in records) == ["p0-4", "p0-5", "p1-4", "p1-5"]
        consumer.seek_to_time(base + 9 * hour, [("timed", 1)])  # later than every record: the tail
        assert consumer.position("timed", 1) == 7


def poll_for(consumer: Consumer, count: int, seconds: float) -> list[Record]:
    """What the consumer reads until it has ``count`` records or ``seconds`` passed (a bug may bring fewer)."""
    records: list[Record] = []
    deadline = time.monotonic() + seconds
    while len(records) < count and time.monotonic() < deadline:
        records += consumer.poll(0.2)
    return records


def test_a_topic_deleted_and_created_again_is_read_from_its_start_not_at_the_old_commit(
    server: LlogServer, storage: Storage, caplog: pytest.LogCaptureFixture
) -> None:
    # The old topic and the group's commit for it, written beside the server (same root): its caches never saw them.
    topics = TopicRegistry(storage.oxia, root=storage.root)
    topics.create("orders", 1, TopicConfig(AppendProtocol.SEQUENTIAL))
    LogWriter(storage).append("orders", 0, [b"old-1", b"old-2", b"old-3"])
    coordinator = GroupCoordinator(storage.oxia, root=storage.root)
    member = coordinator.join("billing", ["orders"])
    coordinator.commit("billing", member.member_id, member.generation, [OffsetCommit("orders", 0, 4)])
    coordinator.leave("billing", member.member_id)
    topics.delete("orders")
    deleted = topics.get("orders")
    assert deleted is not None
    assert reclaim_topic(storage, deleted).finished
    topics.create("orders", 1, TopicConfig(AppendProtocol.SEQUENTIAL))
    LogWriter(storage).append("orders", 0, [f"new-{i}".encode() for i in range(1, 6)])

    with (
        caplog.at_level(logging.WARNING, logger="llog_client.consumer"),
        Consumer(server.url, "billing", ["orders"], enable_auto_commit=False) as consumer,
    ):
        records = poll_for(consumer, 5, 3.0)

    assert [(r.offset, r.value) for r in records] == [(i, f"new-{i}".encode()) for i in range(1, 6)]
    assert any("earlier topic" in m and "orders/0" in m for m in caplog.messages), caplog.messages


def test_a_commit_refused_for_a_deleted_topic_drops_its_partitions_and_the_consumer_goes_on(
    server: LlogServer, storage: Storage, caplog: pytest.LogCaptureFixture
) -> None:
    """As a Kafka consumer on UNKNOWN_TOPIC_OR_PARTITION: the gone topic's partitions are revoked, the others'
    positions are committed, and the poll loop keeps reading them; once every subscribed topic is gone, poll
    returns nothing instead of failing."""
    topics = TopicRegistry(storage.oxia, root=storage.root)
    for name in ("gone", "kept"):
        topics.create(name, 1, TopicConfig(AppendProtocol.SEQUENTIAL))
    produce(server, "gone", {0: ["g1"]})
    produce(server, "kept", {0: ["k1"]})
    revoked: list[tuple[str, int]] = []

    with (
        caplog.at_level(logging.WARNING, logger="llog_client.consumer"),
        Consumer(server.url, "audit", ["gone", "kept"], enable_auto_commit=False, on_revoke=revoked.extend) as consumer,
    ):
        assert sorted(r.value for r in poll_for(consumer, 2, 5.0)) == [b"g1", b"k1"]
        topics.delete("gone")  # beside the server: the consumer learns it from its commit

        consumer.commit()

        assert (consumer.assignment, revoked) == ([("kept", 0)], [("gone", 0)])
        produce(server, "kept", {0: ["k2"]})
        assert [r.value for r in poll_for(consumer, 1, 5.0)] == [b"k2"]  # rejoined without it, reading on
        assert consumer.assignment == [("kept", 0)]
        committed = GroupCoordinator(storage.oxia, root=storage.root).describe("audit").offsets
        assert committed == {"kept": {0: 2}}

        topics.delete("kept")
        consumer.commit()  # nothing left to commit, and nothing to read
        assert consumer.poll(0.2) == []
        assert consumer.assignment == []
    assert any("'gone'" in m and "gone/0" in m for m in caplog.messages), caplog.messages


def test_a_consume_refused_for_a_deleted_topic_drops_its_partitions_instead_of_failing_the_poll(
    server: LlogServer, storage: Storage
) -> None:
    topics = TopicRegistry(storage.oxia, root=storage.root)
    for name in ("gone", "kept"):
        topics.create(name, 1, TopicConfig(AppendProtocol.SEQUENTIAL))
    produce(server, "gone", {0: ["g1"]})
    produce(server, "kept", {0: ["k1"]})

    with Consumer(server.url, "audit", ["gone", "kept"], enable_auto_commit=False) as consumer:
        assert sorted(r.value for r in poll_for(consumer, 2, 5.0)) == [b"g1", b"k1"]
        topics.delete("gone")  # beside the server: the consumer learns it from its next consume

        assert consumer.poll(0.2) == []
        assert consumer.assignment == [("kept", 0)]
        produce(server, "kept", {0: ["k2"]})
        assert [r.value for r in poll_for(consumer, 1, 5.0)] == [b"k2"]


def test_a_commit_in_on_revoke_commits_what_the_member_keeps_and_returns(server: LlogServer) -> None:
    """Kafka users commit in ``on_revoke``. The partitions a join moved already belong to their new owner (the
    server refuses the old owner's offsets there), so the commit stores the positions of the partitions the member
    keeps, under its new generation, and returns: no rejoin from inside the rebalance, no recursion."""
    produce(server, "revoking", {p: [f"old-{p}"] for p in range(2)})
    revoked: list[list[tuple[str, int]]] = []

    def on_revoke(partitions: list[tuple[str, int]]) -> None:
        revoked.append(partitions)
        old.commit()

    old = Consumer(server.url, "revokers", ["revoking"], enable_auto_commit=False, session_timeout_ms=60_000,
                   on_revoke=on_revoke)  # fmt: skip
    new = Consumer(server.url, "revokers", ["revoking"], enable_auto_commit=False, session_timeout_ms=60_000)
    try:
        poll_until(old, lambda got: len(got) >= 2)
        new.poll(0.2)  # joins: the group moves one partition from the old member to it
        ((_, moved),) = new.assignment
        kept = 1 - moved
        old.commit()  # refused as stale: joins again, on_revoke commits, then the partition kept is committed
        assert revoked == [[("revoking", moved)]]
        assert old.assignment == [("revoking", kept)]
        offsets = {o["partition"]: o["committed"] for o in call(server, "GET", "/groups/revokers")["offsets"]}
        assert offsets == {kept: 2, moved: None}
        produce(server, "revoking", {kept: ["new"]})
        assert [r.value for r in poll_until(old, lambda got: len(got) >= 1)] == [b"new"]
    finally:
        old.close()
        new.close()


def test_a_retriable_error_raised_by_on_assign_is_raised_by_poll_not_retried_away(server: LlogServer) -> None:
    """poll retries the retriable errors of its own requests; one the application's ``on_assign`` raised is the
    application's to handle (the callback is not run again for the partitions it was given): poll raises it."""
    produce(server, "assigning", {0: ["a"]})
    calls: list[list[tuple[str, int]]] = []

    def on_assign(partitions: list[tuple[str, int]]) -> None:
        calls.append(partitions)
        if len(calls) == 1:
            raise UnavailableError("the application's store is out of reach")

    with Consumer(server.url, "assigners", ["assigning"], on_assign=on_assign) as consumer:
        with pytest.raises(UnavailableError, match="application's store"):
            consumer.poll(2.0)
        assert [r.value for r in poll_until(consumer, lambda got: len(got) >= 1)] == [b"a"]
    assert calls == [[("assigning", 0)]]


def test_a_retriable_error_raised_by_on_revoke_in_an_auto_commit_is_raised_by_poll(
    server: LlogServer, storage: Storage
) -> None:
    """An auto-commit refused for a deleted topic revokes its partitions; an error ``on_revoke`` raises there is
    raised by poll, not logged away as a refused commit."""
    topics = TopicRegistry(storage.oxia, root=storage.root)
    for name in ("gone", "kept"):
        topics.create(name, 1, TopicConfig(AppendProtocol.SEQUENTIAL))
    produce(server, "gone", {0: ["g1"]})
    produce(server, "kept", {0: ["k1"]})

    def on_revoke(partitions: list[tuple[str, int]]) -> None:
        raise UnavailableError(f"could not save the state of {partitions}")

    with Consumer(server.url, "auditors", ["gone", "kept"], auto_commit_interval_ms=0, on_revoke=on_revoke) as consumer:
        assert sorted(r.value for r in poll_for(consumer, 2, 5.0)) == [b"g1", b"k1"]
        topics.delete("gone")  # beside the server: the consumer learns it from its next auto-commit
        with pytest.raises(UnavailableError, match="could not save"):
            consumer.poll(0.5)
        assert consumer.assignment == [("kept", 0)]
