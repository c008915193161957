"""Model-based test of consumer groups on a real Oxia server (docs/RELIABILITY.md, docs/GROUPS.md).

A Hypothesis state machine lets four would-be members of one group join
(with a subscription drawn from two topics), heartbeat, commit offsets
(of partitions they own or not, with their generation or a stale one) and
leave, while a clock jumps forward past session timeouts and the coordinator
is replaced by a new one (a restarted process or another Lambda). A model
keeps what each member was told and when its lease ends. After every step:

* the group's members are exactly those whose lease the model says is live;
* the members' assignments are disjoint and cover every partition of the
  topics the live members subscribe to;
* the generation never moves back;
* the committed offsets are exactly those of the commits the model expected
  to be accepted: a commit is accepted only from a live member, in the
  current generation, for partitions it owns, and then all of its offsets.

``make soak`` raises the examples with ``LLOG_MODEL_EXAMPLES`` and
``LLOG_MODEL_STEPS``, as for the log's own machine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from llog.errors import NotPartitionOwner, StaleGeneration, UnknownGroup, UnknownMember
from llog.format.kv.control import AppendProtocol
from llog.protocol.groups import GroupCoordinator, OffsetCommit
from llog.protocol.topics import TopicConfig, TopicRegistry
from llog.store.oxia import OxiaStore

pytestmark = pytest.mark.oxia

EXAMPLES = int(os.environ.get("LLOG_MODEL_EXAMPLES", "8"))
STEPS = int(os.environ.get("LLOG_MODEL_STEPS", "30"))
TOPICS = {"a": 4, "b": 3}
MEMBERS = 4
TIMEOUTS_MS = (1_000, 5_000, 10_000)
GROUP = "model"
EXPIRY_MS = 24 * 3600 * 1000  # longer than any run: the group never expires for being idle


@dataclass
class Seen:
    """What one would-be member was last told."""

    member_id: str | None = None
    generation: int = 0
    timeout_ms: int = 0
    expires_at_ms: int = 0


class GroupMachine(RuleBasedStateMachine):
    def __init__(self, oxia: OxiaStore, root: str) -> None:
        super().__init__()
        self.oxia = oxia
        self.root = root
        self.now_ms = 1_700_000_000_000
        self.coordinator = self._coordinator()
        self.seen = [Seen() for _ in range(MEMBERS)]
        self.offsets: dict[tuple[str, int], int] = {}
        self.last_generation = 0

    def _clock(self) -> float:
        return self.now_ms / 1000

    def _coordinator(self) -> GroupCoordinator:
        return GroupCoordinator(self.oxia, root=self.root, expiry_ms=EXPIRY_MS, clock=self._clock)

    def _live(self, i: int) -> bool:
        seen = self.seen[i]
        return seen.member_id is not None and self.now_ms < seen.expires_at_ms

    @initialize()
    def create_topics(self) -> None:
        topics = TopicRegistry(self.oxia, root=self.root, clock=self._clock)
        for topic, partitions in TOPICS.items():
            topics.create(topic, partitions, TopicConfig(AppendProtocol.SEQUENTIAL))

    @rule(
        i=st.integers(0, MEMBERS - 1),
        topics=st.sets(st.sampled_from(sorted(TOPICS)), min_size=1),
        timeout_ms=st.sampled_from(TIMEOUTS_MS),
        fresh=st.booleans(),
    )
    def join(self, i: int, topics: set[str], timeout_ms: int, fresh: bool) -> None:
        seen = self.seen[i]
        member_id = None if fresh else seen.member_id
        if member_id is not None and not self._live(i):
            with pytest.raises(UnknownMember):
                self.coordinator.join(GROUP, sorted(topics), session_timeout_ms=timeout_ms, member_id=member_id)
            seen.member_id = None
            return
        if fresh and self._live(i):
            # The old identity is abandoned, as a restarted client's would be: it stays until its lease ends.
            self.seen.append(Seen(seen.member_id, seen.generation, seen.timeout_ms, seen.expires_at_ms))
        joined = self.coordinator.join(GROUP, sorted(topics), session_timeout_ms=timeout_ms, member_id=member_id)
        if member_id is not None:
            assert joined.member_id == member_id
        self.seen[i] = Seen(joined.member_id, joined.generation, timeout_ms, self.now_ms + timeout_ms)

    @rule(i=st.integers(0, MEMBERS - 1))
    def heartbeat(self, i: int) -> None:
        seen = self.seen[i]
        if seen.member_id is None:
            return
        if not self._live(i):
            with pytest.raises(UnknownMember):
                self.coordinator.heartbeat(GROUP, seen.member_id, seen.generation)
            seen.member_id = None
            return
        answer = self.coordinator.heartbeat(GROUP, seen.member_id, seen.generation)
        seen.expires_at_ms = self.now_ms + seen.timeout_ms
        assert answer.rejoin == (answer.generation != seen.generation)

    @rule(i=st.integers(0, MEMBERS - 1))
    def leave(self, i: int) -> None:
        seen = self.seen[i]
        if seen.member_id is None:
            return
        assert self.coordinator.leave(GROUP, seen.member_id) == self._live(i)
        seen.member_id = None

    @rule(i=st.integers(0, MEMBERS - 1), data=st.data())
    def commit(self, i: int, data: st.DataObject) -> None:
        seen = self.seen[i]
        if seen.member_id is None:
            return
        wanted = data.draw(
            st.lists(st.sampled_from([(t, p) for t, n in TOPICS.items() for p in range(n)]), unique=True, max_size=3)
        )
        offsets = [OffsetCommit(t, p, data.draw(st.integers(0, 1_000))) for t, p in wanted]
        if not self._live(i):
            with pytest.raises(UnknownMember):
                self.coordinator.commit(GROUP, seen.member_id, seen.generation, offsets)
            seen.member_id = None
            return
        state = self.coordinator.describe(GROUP)  # the same instant: what the commit will be checked against
        owned = state.members[seen.member_id].assignment
        if seen.generation != state.generation:
            with pytest.raises(StaleGeneration):
                self.coordinator.commit(GROUP, seen.member_id, seen.generation, offsets)
        elif not all(p in owned.get(t, ()) for t, p in wanted):
            with pytest.raises(NotPartitionOwner):
                self.coordinator.commit(GROUP, seen.member_id, seen.generation, offsets)
        else:
            assert self.coordinator.commit(GROUP, seen.member_id, seen.generation, offsets) == offsets
            self.offsets.update(((o.topic, o.partition), o.offset) for o in offsets)
            seen.expires_at_ms = self.now_ms + seen.timeout_ms  # a commit extends the lease

    @rule(i=st.integers(0, MEMBERS - 1))
    def rejoin_when_told(self, i: int) -> None:
        """What a client does on ``rejoin``: join again with its id, which brings its generation up to date."""
        if self._live(i):
            seen = self.seen[i]
            state = self.coordinator.describe(GROUP)
            topics = state.members[seen.member_id].topics if seen.member_id else []
            self.join(i, set(topics), seen.timeout_ms, fresh=False)

    @rule(ms=st.sampled_from((1, 500, 999, 1_000, 3_000, 6_000, 11_000)))
    def advance_clock(self, ms: int) -> None:
        self.now_ms += ms

    @rule()
    def new_coordinator(self) -> None:
        self.coordinator = self._coordinator()

    @invariant()
    def the_group_is_what_the_model_says(self) -> None:
        live = {s.member_id for i, s in enumerate(self.seen) if s.member_id is not None and self._live(i)}
        try:
            state = self.coordinator.describe(GROUP)
        except UnknownGroup:  # nobody joined yet
            assert not live
            assert not self.offsets
            return
        assert set(state.members) == live
        assert state.generation >= self.last_generation
        self.last_generation = state.generation
        owned = [(t, p) for m in state.members.values() for t, ps in m.assignment.items() for p in ps]
        assert len(owned) == len(set(owned)), "two members own one partition"
        subscribed = {t for m in state.members.values() for t in m.topics}
        assert set(owned) == {(t, p) for t in subscribed for p in range(TOPICS[t])}
        committed = {(t, p): o for t, ps in state.offsets.items() for p, o in ps.items()}
        assert committed == self.offsets


def test_consumer_groups_keep_their_invariants(oxia_store: OxiaStore, root: str) -> None:
    class OnThisStore(GroupMachine):
        def __init__(self) -> None:
            super().__init__(oxia_store, f"{root}-{next(runs)}")

    runs = iter(range(10**6))
    run_state_machine_as_test(
        OnThisStore,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
            print_blob=True,
        ),
    )
