"""Consumer groups (``llog.protocol.groups``, docs/GROUPS.md) on the real Oxia server, with a clock the tests move."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from llog.config import OxiaConfig, RetentionPolicy
from llog.errors import (
    InvalidArgument,
    NotPartitionOwner,
    StaleGeneration,
    UnknownGroup,
    UnknownMember,
    UnknownTopic,
)
from llog.format.kv.control import AppendProtocol
from llog.format.kv.groups import GroupKeys
from llog.protocol.append import LogWriter
from llog.protocol.catalog import LogCatalog
from llog.protocol.gc import GarbageCollector
from llog.protocol.groups import GroupCoordinator, OffsetCommit
from llog.protocol.topics import TopicConfig, TopicRegistry, reclaim_topic
from llog.service.groups import GroupService
from llog.store.oxia import OxiaStore
from llog.store.storage import Storage
from tests.integration.test_retention import compacted_log, retention

pytestmark = pytest.mark.oxia

TIMEOUT_MS = 10_000


class Clock:
    def __init__(self) -> None:
        self.now_s = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now_s

    def advance_ms(self, ms: int) -> None:
        self.now_s += ms / 1000


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def groups(oxia_store: OxiaStore, root: str, clock: Clock) -> GroupCoordinator:
    return GroupCoordinator(oxia_store, root=root, clock=clock, expiry_ms=3_600_000)


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def partitions_of(writer: LogWriter, topic: str, n: int) -> str:
    for p in range(n):
        writer.initialize_partition(topic, p)
    return topic


def test_three_members_share_twelve_partitions_and_a_stopped_one_s_go_to_the_others(
    groups: GroupCoordinator, writer: LogWriter, topic: str, group: str, clock: Clock
) -> None:
    partitions_of(writer, topic, 12)
    a = groups.join(group, [topic], session_timeout_ms=TIMEOUT_MS)
    b = groups.join(group, [topic], session_timeout_ms=TIMEOUT_MS)
    c = groups.join(group, [topic], session_timeout_ms=TIMEOUT_MS)
    # a and b learn of the new generation from their heartbeats, and rejoin with their ids.
    assert groups.heartbeat(group, a.member_id, a.generation).rejoin
    a = groups.join(group, [topic], session_timeout_ms=TIMEOUT_MS, member_id=a.member_id)
    b = groups.join(group, [topic], session_timeout_ms=TIMEOUT_MS, member_id=b.member_id)
    assert a.generation == b.generation == c.generation == 3
    assert a.heartbeat_interval_ms == TIMEOUT_MS // 3
    sets = [set(m.assignment[topic]) for m in (a, b, c)]
    assert [len(s) for s in sets] == [4, 4, 4]
    assert set().union(*sets) == set(range(12))

    # c stops; a and b keep heartbeating past c's session timeout.
    for _ in range(4):
        clock.advance_ms(TIMEOUT_MS // 3)
        beat_a = groups.heartbeat(group, a.member_id, a.generation)
        groups.heartbeat(group, b.member_id, b.generation)
    assert beat_a.rejoin
    assert beat_a.generation == 4
    a = groups.join(group, [topic], session_timeout_ms=TIMEOUT_MS, member_id=a.member_id)
    b = groups.join(group, [topic], session_timeout_ms=TIMEOUT_MS, member_id=b.member_id)

    assert set(groups.describe(group).members) == {a.member_id, b.member_id}
    assert set(a.assignment[topic]) | set(b.assignment[topic]) == set(range(12))
    assert not set(a.assignment[topic]) & set(b.assignment[topic])
    assert sets[0] <= set(a.assignment[topic]), "sticky"
    assert sets[1] <= set(b.assignment[topic]), "sticky"
    assert len(a.assignment[topic]) == len(b.assignment[topic]) == 6

    # c's commit from its old generation is rejected, and writes nothing.
    before = groups.describe(group).offsets
    with pytest.raises(UnknownMember):
        groups.commit(group, c.member_id, c.generation, [OffsetCommit(topic, min(sets[2]), 5)])
    assert groups.describe(group).offsets == before
    with pytest.raises(UnknownMember):
        groups.heartbeat(group, c.member_id, c.generation)


def test_commit_checks_generation_and_ownership_and_writes_all_or_nothing(
    groups: GroupCoordinator, writer: LogWriter, topic: str, group: str
) -> None:
    partitions_of(writer, topic, 4)
    a = groups.join(group, [topic])
    (mine,) = [OffsetCommit(topic, p, 7) for p in a.assignment[topic][:1]]
    groups.commit(group, a.member_id, a.generation, [mine])
    b = groups.join(group, [topic])
    a_now = groups.join(group, [topic], member_id=a.member_id)
    theirs = b.assignment[topic][0]

    with pytest.raises(StaleGeneration):
        groups.commit(group, a.member_id, a.generation, [OffsetCommit(topic, a_now.assignment[topic][0], 9)])
    with pytest.raises(NotPartitionOwner):
        groups.commit(
            group,
            a.member_id,
            a_now.generation,
            [OffsetCommit(topic, a_now.assignment[topic][0], 9), OffsetCommit(topic, theirs, 9)],
        )
    assert groups.describe(group).offsets == {topic: {mine.partition: 7}}, "nothing of a rejected commit"
    with pytest.raises(InvalidArgument, match="twice"):
        groups.commit(group, a.member_id, a_now.generation, [mine, mine])

    groups.commit(group, b.member_id, b.generation, [OffsetCommit(topic, theirs, 3)])
    assert groups.describe(group).offsets[topic][theirs] == 3


def test_join_rules(groups: GroupCoordinator, writer: LogWriter, topic: str, group: str) -> None:
    partitions_of(writer, topic, 2)
    with pytest.raises(UnknownTopic):
        groups.join(group, [topic, f"{topic}-missing"])
    with pytest.raises(UnknownGroup):
        groups.describe(group)  # the rejected join wrote nothing
    with pytest.raises(UnknownMember):
        groups.join(group, [topic], member_id="never-joined")
    with pytest.raises(InvalidArgument, match="session_timeout_ms"):
        groups.join(group, [topic], session_timeout_ms=999)

    a = groups.join(group, [topic])
    again = groups.join(group, [topic], member_id=a.member_id)
    assert (again.generation, again.assignment) == (a.generation, a.assignment), "a rejoin that changes nothing"

    partitions_of(writer, topic, 3)  # the topic grew: the next join covers the new partition
    grown = groups.join(group, [topic], member_id=a.member_id)
    assert grown.generation == a.generation + 1
    assert grown.assignment == {topic: [0, 1, 2]}

    assert groups.leave(group, a.member_id) is True
    assert groups.leave(group, a.member_id) is False
    assert groups.describe(group).members == {}


def test_offsets_survive_a_new_store_and_an_empty_group_expires_after_its_idle_time(
    groups: GroupCoordinator,
    writer: LogWriter,
    topic: str,
    group: str,
    clock: Clock,
    oxia_config: OxiaConfig,
    root: str,
) -> None:
    partitions_of(writer, topic, 2)
    a = groups.join(group, [topic])
    groups.commit(group, a.member_id, a.generation, [OffsetCommit(topic, 0, 11), OffsetCommit(topic, 1, 12)])
    groups.leave(group, a.member_id)

    with OxiaStore(oxia_config) as fresh:  # a restarted process
        again = GroupCoordinator(fresh, root=root, clock=clock, expiry_ms=3_600_000)
        assert again.describe(group).offsets == {topic: {0: 11, 1: 12}}
        assert group in again.groups()

        clock.advance_ms(3_600_000 - 1)
        assert again.expire_idle() == []
        clock.advance_ms(1)
        assert again.expire_idle() == [group]
        assert group not in again.groups()
        with pytest.raises(UnknownGroup):
            again.describe(group)


def test_a_group_whose_members_expired_counts_its_idle_time_from_their_expiry(
    groups: GroupCoordinator, writer: LogWriter, topic: str, group: str, clock: Clock
) -> None:
    partitions_of(writer, topic, 1)
    groups.join(group, [topic], session_timeout_ms=TIMEOUT_MS)
    clock.advance_ms(TIMEOUT_MS + 3_600_000 - 1)
    assert groups.describe(group).members == {}, "the lease ended"
    assert groups.groups() == [group]
    clock.advance_ms(1)
    assert groups.groups() == []


def test_gc_and_retention_never_touch_group_records(
    groups: GroupCoordinator, writer: LogWriter, storage: Storage, topic: str, group: str, root: str
) -> None:
    compacted_log(writer, storage, topic)
    a = groups.join(group, [topic])
    groups.commit(group, a.member_id, a.generation, [OffsetCommit(topic, 0, 3)])
    key = GroupKeys(root).group(group)
    before = storage.oxia.get(key, partition_key=GroupKeys.partition_key(group))

    retention(storage, topic, RetentionPolicy(max_age_ms=1), ahead_ms=2 * 86_400_000).enforce(topic, 0)
    GarbageCollector(storage).collect()

    after = storage.oxia.get(key, partition_key=GroupKeys.partition_key(group))
    assert after == before


def test_a_commit_below_the_log_start_is_reported_and_lag_counts_from_the_log_start(
    groups: GroupCoordinator, writer: LogWriter, storage: Storage, topic: str, group: str, root: str
) -> None:
    compacted_log(writer, storage, topic)  # offsets 1-20 compacted in 4 ranges, 21 in the WAL
    a = groups.join(group, [topic])
    groups.commit(group, a.member_id, a.generation, [OffsetCommit(topic, 0, 3)])
    service = GroupService(groups, LogCatalog(storage.oxia, root=root))
    assert service.describe(group)["offsets"] == [
        {
            "topic": topic,
            "partition": 0,
            "committed": 3,
            "log_start": 1,
            "high_watermark": 21,
            "lag": 19,
            "below_log_start": False,
            "committed_for_earlier_topic": None,
        }
    ]

    retention(storage, topic, RetentionPolicy(max_age_ms=1), ahead_ms=2 * 86_400_000).enforce(topic, 0)

    (lag,) = service.describe(group)["offsets"]
    assert (lag["committed"], lag["log_start"], lag["high_watermark"]) == (3, 21, 21)
    assert lag["below_log_start"] is True
    assert lag["lag"] == 1, "reading resumes at the log start: one record left"
    assert [(x.group, x.partition, x.lag) for x in service.lags()] == [(group, 0, 1)]


def test_offsets_committed_for_a_deleted_topic_are_reported_as_such_and_not_applied_to_its_successor(
    groups: GroupCoordinator, storage: Storage, topic: str, group: str, root: str
) -> None:
    registry = TopicRegistry(storage.oxia, root=root)
    registry.create(topic, 1, TopicConfig(AppendProtocol.SEQUENTIAL))
    LogWriter(storage).append(topic, 0, [b"a", b"b", b"c"])
    a = groups.join(group, [topic])
    groups.commit(group, a.member_id, a.generation, [OffsetCommit(topic, 0, 4)])
    registry.delete(topic)
    deleted = registry.get(topic)
    assert deleted is not None
    assert reclaim_topic(storage, deleted).finished
    registry.create(topic, 1, TopicConfig(AppendProtocol.SEQUENTIAL))  # the same name, a new topic
    LogWriter(storage).append(topic, 0, [b"n1", b"n2", b"n3", b"n4", b"n5"])
    service = GroupService(groups, LogCatalog(storage.oxia, root=root))

    (lag,) = service.describe(group)["offsets"]

    assert (lag["committed"], lag["committed_for_earlier_topic"], lag["high_watermark"]) == (None, 4, 5)
    assert lag["lag"] is None  # as for a partition without a commit
    # The first commit for the new topic replaces what was committed for the old one.
    groups.commit(group, a.member_id, a.generation, [OffsetCommit(topic, 0, 2)])
    (lag,) = service.describe(group)["offsets"]
    assert (lag["committed"], lag["committed_for_earlier_topic"], lag["lag"]) == (2, None, 4)


def test_a_commit_for_a_topic_that_is_gone_is_refused_so_its_successor_inherits_nothing(
    groups: GroupCoordinator, storage: Storage, topic: str, group: str, root: str
) -> None:
    """A slow member commits what it read of a topic after the topic's delete, and after its reclaim (no record
    left): both are refused, nothing is written, and the topic created again under the name starts with no
    commit. A topic with registered partitions and no record (from before topic records) still commits."""
    registry = TopicRegistry(storage.oxia, root=root)
    registry.create(topic, 1, TopicConfig(AppendProtocol.SEQUENTIAL))
    LogWriter(storage).append(topic, 0, [b"a", b"b", b"c"])
    legacy = partitions_of(LogWriter(storage), f"{topic}-legacy", 1)
    a = groups.join(group, [topic, legacy])
    registry.delete(topic)
    with pytest.raises(UnknownTopic, match="was deleted") as deleted:
        groups.commit(group, a.member_id, a.generation, [OffsetCommit(topic, 0, 4), OffsetCommit(legacy, 0, 1)])
    assert deleted.value.topic == topic
    deleted_record = registry.get(topic)
    assert deleted_record is not None
    assert reclaim_topic(storage, deleted_record).finished
    with pytest.raises(UnknownTopic, match="does not exist") as reclaimed:
        groups.commit(group, a.member_id, a.generation, [OffsetCommit(topic, 0, 4)])
    assert reclaimed.value.topic == topic
    assert groups.describe(group).offsets == {}  # nothing of either commit
    groups.commit(group, a.member_id, a.generation, [OffsetCommit(legacy, 0, 1)])

    registry.create(topic, 1, TopicConfig(AppendProtocol.SEQUENTIAL))  # the same name, a new topic
    LogWriter(storage).append(topic, 0, [b"n1", b"n2", b"n3", b"n4", b"n5"])
    lags = GroupService(groups, LogCatalog(storage.oxia, root=root)).describe(group)["offsets"]
    assert {(x["topic"], x["committed"], x["committed_for_earlier_topic"]) for x in lags} == {
        (topic, None, None), (legacy, 1, None)
    }  # fmt: skip


def test_concurrent_commits_and_heartbeats_keep_the_record_consistent(
    groups: GroupCoordinator, writer: LogWriter, topic: str, group: str, root: str, oxia_store: OxiaStore
) -> None:
    partitions_of(writer, topic, 6)
    members = [groups.join(group, [topic]) for _ in range(3)]
    members = [groups.join(group, [topic], member_id=m.member_id) for m in members]
    generation = members[0].generation
    assert all(m.generation == generation for m in members)
    rounds = 15
    errors: list[BaseException] = []

    def work(member_index: int) -> None:
        m = members[member_index]
        try:
            for i in range(1, rounds + 1):
                offsets = [OffsetCommit(topic, p, 100 * member_index + i) for p in m.assignment[topic]]
                groups.commit(group, m.member_id, generation, offsets)
                assert not groups.heartbeat(group, m.member_id, generation).rejoin
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    state = groups.describe(group)
    assert state.generation == generation
    expected = {p: 100 * i + rounds for i, m in enumerate(members) for p in m.assignment[topic]}
    assert state.offsets == {topic: expected}, "every member's last commit, none lost"
    raw = oxia_store.get(GroupKeys(root).group(group), partition_key=GroupKeys.partition_key(group))
    assert raw is not None
    assert json.loads(raw.value)["generation"] == generation
