"""Consumer groups: membership leases, sticky assignment, generations and committed offsets (docs/GROUPS.md).

A Lambda function cannot hold an Oxia session between requests, so a member
is a lease, not an ephemeral record: its expiry time sits in the group's one
record, ``{root}/__catalog/groups/{group}`` (``llog.format.kv.groups``), with
the generation, every member's subscription and assignment, and the
committed offsets. Every action reads the record, applies itself to it and
writes it back with a compare-and-set on the version it read, retrying with
backoff when another action won. Offsets live in the same record as the
assignment so that a commit's ownership check and its write are one atomic
step.

Actions (each at most one conditional put, or one conditional delete):

| action | effect |
|---|---|
| join | adds a member (new id) or refreshes a known one (lease = now + session timeout); a new member, |
|  | a changed subscription or a changed partition set bumps the generation and reassigns |
| heartbeat | extends the lease; ``rejoin`` when the member's generation is older than the group's |
| leave | removes the member, bumps the generation, reassigns (idempotent) |
| commit | writes offsets if the member exists, names the current generation and owns every partition; else nothing |
|  | (with each topic's identity, read before; a topic's offsets of an earlier topic of the name are dropped; |
|  | a topic deleted, or with neither record nor registered partitions, is ``UnknownTopic``) |
| expire_idle | deletes a group with no live member and no commit for ``expiry_ms`` |

Every action first drops the members whose lease has expired, which bumps
the generation and reassigns their partitions (the same pure function of the
record, so a read-only ``describe`` shows what the next write will store).
A group idle past ``expiry_ms`` reads as absent everywhere, before its record
is deleted.

Crash points: an action is one conditional write, so a crash leaves it
applied or not. A put that failed in transit and was retried may have applied
(an ambiguous ``VersionConflict``): the loop re-reads and applies again, and
every action is idempotent on its own result (a new member's id is chosen
before the first attempt, so a repeated join finds it; a repeated commit
writes the same offsets; a repeated leave finds the member gone).

Invariants:

1. The members' assignments are disjoint and cover every partition of the
   subscribed topics known at the last rebalance (``assign``).
2. An offset is written only by a commit whose member, generation and
   ownership were checked on the very version it replaces.
3. While the record exists its generation only grows.
4. Committed offsets change only by commit, and disappear only with the
   whole group (idle expiry) or when a commit for a topic finds them
   committed for an earlier topic of that name (deleted, maybe created
   again: each offset's topic identity is kept, ``offset_topics``). A commit
   for a topic that does not exist (deleted, or neither record nor
   registered partitions) is refused, so no offset of a reclaimed topic is
   stored without its identity. (The identity is the topic's at commit
   time; docs/GROUPS.md names the window that leaves.) GC and
   retention never read the groups' folder (docs/GROUPS.md).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from llog.backoff import Backoff
from llog.config import default_int
from llog.errors import (
    InvalidArgument,
    NotPartitionOwner,
    StaleGeneration,
    UnknownGroup,
    UnknownMember,
    UnknownTopic,
    VersionConflict,
)
from llog.format.keys import DEFAULT_ROOT_PREFIX, OFFSET_WIDTH, validate_partition, validate_topic
from llog.format.kv.groups import GroupDocument, GroupKeys, StoredMember, validate_group, validate_member_id
from llog.limits import (
    DEFAULT_SESSION_TIMEOUT_MS,
    MAX_SESSION_TIMEOUT_MS,
    MAX_TOPICS_PER_MEMBER,
    MIN_SESSION_TIMEOUT_MS,
)
from llog.protocol.topics import TopicRegistry
from llog.store.oxia import CREATE_ONLY, OxiaStore

T = TypeVar("T")

# The record is rewritten by every heartbeat: these keep it small (and MAX_TOPICS_PER_MEMBER).
MAX_MEMBERS = 1_000
MAX_GROUP_PARTITIONS = 10_000
CAS_ATTEMPTS = 32
CAS_BACKOFF_INITIAL_S = 0.005
CAS_BACKOFF_MAX_S = 0.2

TopicPartition = tuple[str, int]
Assignment = dict[str, dict[str, list[int]]]  # member -> topic -> partitions


def assign(
    subscriptions: Mapping[str, Collection[str]],
    partitions: Mapping[str, Sequence[int]],
    previous: Mapping[str, Mapping[str, Sequence[int]]],
) -> Assignment:
    """A sticky assignment: disjoint, covering every partition of a subscribed topic.

    Members keep what they owned (if still subscribed and the partition still
    exists); partitions nobody keeps go to the least-loaded subscriber; then a
    partition moves from a member to one subscribed to its topic while their
    loads differ by two or more. Members subscribed to the same topics end
    within one partition of each other, and a member that receives partitions
    never also gives some away (moves go from the most to the least loaded).
    """
    members = sorted(subscriptions)
    subscribed = {m: frozenset(subscriptions[m]) for m in members}
    subscribers: dict[str, list[str]] = {}
    for m in members:
        for t in subscribed[m]:
            subscribers.setdefault(t, []).append(m)
    wanted = {(t, p) for t, ps in partitions.items() if t in subscribers for p in ps}
    owned: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    load = dict.fromkeys(members, 0)
    taken: set[TopicPartition] = set()

    def give(m: str, tp: TopicPartition) -> None:
        owned[m].setdefault(tp[0], set()).add(tp[1])
        load[m] += 1
        taken.add(tp)

    for m in members:
        for t, ps in sorted(previous.get(m, {}).items()):
            for p in sorted(ps):
                if t in subscribed[m] and (t, p) in wanted and (t, p) not in taken:
                    give(m, (t, p))
    for tp in sorted(wanted - taken):
        give(min(subscribers[tp[0]], key=lambda m: (load[m], m)), tp)
    while _move_one(members, subscribed, owned, load):
        pass
    return {m: {t: sorted(ps) for t, ps in sorted(owned[m].items()) if ps} for m in members}


def _move_one(
    members: list[str],
    subscribed: Mapping[str, frozenset[str]],
    owned: dict[str, dict[str, set[int]]],
    load: dict[str, int],
) -> bool:
    """Move one partition from the most loaded member that can give one to a member two or more below it."""
    receivers = sorted(members, key=lambda m: (load[m], m))
    for donor in sorted(members, key=lambda m: (-load[m], m)):
        for receiver in receivers:
            if load[receiver] > load[donor] - 2:
                break
            topics = sorted(t for t in subscribed[receiver] if owned[donor].get(t))
            if topics:
                partition = max(owned[donor][topics[0]])
                owned[donor][topics[0]].discard(partition)
                owned[receiver].setdefault(topics[0], set()).add(partition)
                load[donor] -= 1
                load[receiver] += 1
                return True
    return False


# --- the record ------------------------------------------------------------------------------


@dataclass
class Member:
    topics: list[str]
    session_timeout_ms: int
    expires_at_ms: int
    assignment: dict[str, list[int]] = field(default_factory=dict)

    def owns(self, topic: str, partition: int) -> bool:
        return partition in self.assignment.get(topic, ())


def _stored_partitions(ps: list[int]) -> int | list[int]:
    """A topic's partitions: the count when they are ``0..n-1`` (explicit topics), else the list."""
    return len(ps) if ps == list(range(len(ps))) else ps


@dataclass
class GroupState:
    """The group's record. ``touched_at_ms``: last join, leave, lease expiry or commit (idle expiry counts from it)."""

    generation: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    partitions: dict[str, list[int]] = field(default_factory=dict)  # what the assignment covers
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    touched_at_ms: int = 0
    # Per topic, the identity (``TopicRecord.identity``) of the topic its offsets were committed for; none for a
    # topic without a record, or offsets committed before identities were kept.
    offset_topics: dict[str, str] = field(default_factory=dict)

    def document(self) -> GroupDocument:
        return GroupDocument(
            generation=self.generation,
            members={
                m: StoredMember(v.topics, v.session_timeout_ms, v.expires_at_ms, v.assignment)
                for m, v in sorted(self.members.items())
            },
            partitions={t: _stored_partitions(ps) for t, ps in sorted(self.partitions.items())},
            offsets={t: dict(sorted(ps.items())) for t, ps in sorted(self.offsets.items())},
            offset_topics=dict(sorted(self.offset_topics.items())),
            touched_at_ms=self.touched_at_ms,
        )

    @classmethod
    def of(cls, doc: GroupDocument) -> GroupState:
        return cls(
            generation=doc.generation,
            members={
                m: Member(v.topics, v.session_timeout_ms, v.expires_at_ms, v.assignment) for m, v in doc.members.items()
            },
            partitions={t: list(range(v)) if isinstance(v, int) else v for t, v in doc.partitions.items()},
            offsets=doc.offsets,
            touched_at_ms=doc.touched_at_ms,
            offset_topics=doc.offset_topics,
        )

    def committed_for_earlier_topics(self, identities: Mapping[str, str | None]) -> set[str]:
        """The topics whose offsets were committed for an earlier topic of the name than ``identities``' (each
        topic's current identity, None without a record): deleted since, maybe created again."""
        return {t for t, committed_for in self.offset_topics.items() if identities.get(t) != committed_for}

    def rebalance(self, partitions: Mapping[str, list[int]], now_ms: int) -> None:
        """Next generation: reassign ``partitions`` (of the subscribed topics) among the members."""
        topics = {t for m in self.members.values() for t in m.topics}
        self.partitions = {t: list(ps) for t, ps in sorted(partitions.items()) if t in topics}
        assignment = assign(
            {m: v.topics for m, v in self.members.items()},
            self.partitions,
            {m: v.assignment for m, v in self.members.items()},
        )
        for m, v in self.members.items():
            v.assignment = assignment[m]
        self.generation += 1
        self.touched_at_ms = max(self.touched_at_ms, now_ms)

    def expire_members(self, now_ms: int) -> None:
        """Drop the members whose lease ended; idle time counts from the moment the last one did."""
        expired = [m for m, v in self.members.items() if v.expires_at_ms <= now_ms]
        if expired:
            last = max(self.members[m].expires_at_ms for m in expired)
            for m in expired:
                del self.members[m]
            self.rebalance(self.partitions, last)

    def idle_expired(self, now_ms: int, expiry_ms: int) -> bool:
        return not self.members and now_ms >= self.touched_at_ms + expiry_ms

    def member(self, member_id: str, group: str) -> Member:
        found = self.members.get(member_id)
        if found is None:
            raise UnknownMember(f"member {member_id!r} is not in group {group!r} (left, expired or never joined)")
        return found


# --- results ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class JoinResult:
    group: str
    member_id: str
    generation: int
    assignment: dict[str, list[int]]
    heartbeat_interval_ms: int


@dataclass(frozen=True)
class HeartbeatResult:
    generation: int
    rejoin: bool


@dataclass(frozen=True)
class OffsetCommit:
    """``offset``: the next offset the group will read (Kafka's meaning)."""

    topic: str
    partition: int
    offset: int

    def __post_init__(self) -> None:
        validate_topic(self.topic)
        validate_partition(self.partition)
        if isinstance(self.offset, bool) or not isinstance(self.offset, int) or not 0 <= self.offset < 10**OFFSET_WIDTH:
            raise InvalidArgument(f"invalid offset {self.offset!r} for {self.topic}/{self.partition}")


def heartbeat_interval_ms(session_timeout_ms: int) -> int:
    """A third of the session timeout: two heartbeats may be lost before the lease ends."""
    return session_timeout_ms // 3


def _topics(topics: object) -> list[str]:
    if not isinstance(topics, list | tuple) or not topics:
        raise InvalidArgument("topics must be a non-empty list of topic names")
    if len(topics) > MAX_TOPICS_PER_MEMBER:
        raise InvalidArgument(f"a member subscribes to at most {MAX_TOPICS_PER_MEMBER} topics, not {len(topics)}")
    return sorted({validate_topic(t) for t in topics})


def _session_timeout(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"session_timeout_ms must be an integer, not {value!r}")
    if not MIN_SESSION_TIMEOUT_MS <= value <= MAX_SESSION_TIMEOUT_MS:
        raise InvalidArgument(
            f"session_timeout_ms={value} is outside [{MIN_SESSION_TIMEOUT_MS}, {MAX_SESSION_TIMEOUT_MS}]"
        )
    return value


def _generation(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"generation must be a non-negative integer, not {value!r}")
    return value


def existing_partitions(topics: TopicRegistry, topic: str) -> list[int]:
    """An explicit topic's ``0..N-1`` (none once deleted), else an implicit topic's registered partitions."""
    record = topics.get(topic)
    if record is not None and (record.deleted or not record.implicit):
        return [] if record.deleted else record.partition_numbers
    return topics.registered(topic, record)


class GroupCoordinator:
    """The actions of docs/GROUPS.md on the groups of one root prefix.

    ``topic_partitions(topic)`` gives the partitions a topic has (empty if it
    does not exist); the default is ``existing_partitions``.
    """

    def __init__(
        self,
        oxia: OxiaStore,
        *,
        root: str = DEFAULT_ROOT_PREFIX,
        expiry_ms: int = default_int("LLOG_GROUP_EXPIRY_MS"),
        clock: Callable[[], float] = time.time,
        topic_partitions: Callable[[str], list[int]] | None = None,
    ) -> None:
        self.oxia = oxia
        self.keys = GroupKeys(root)
        self.expiry_ms = expiry_ms
        self._clock = clock
        self._topics = TopicRegistry(oxia, root=root, clock=clock)
        self._topic_partitions = topic_partitions or (lambda t: existing_partitions(self._topics, t))

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def topic_identity(self, topic: str) -> str | None:
        """The topic's identity (``TopicRecord.identity``; a deleted topic's too), None if it has no record."""
        record = self._topics.get(topic)
        return None if record is None else record.identity

    def _committable_identity(self, topic: str) -> str | None:
        """The identity a commit stamps the topic's offsets with; ``UnknownTopic`` for a topic that does not
        exist: deleted, or without a record and without registered partitions (reclaimed, or never created).
        Offsets committed then would be taken for those of the next topic created under the name.
        A topic whose partitions predate topic records (registered, no record) has no identity (None)."""
        record = self._topics.get(topic)
        if record is not None and record.deleted:
            raise UnknownTopic(topic, f"topic {topic!r} was deleted: offsets of it are not committed")
        if record is None and not self._topics.registered(topic, None):
            raise UnknownTopic(topic, f"topic {topic!r} does not exist (never created, or deleted and reclaimed)")
        return None if record is None else record.identity

    # --- actions ------------------------------------------------------------------------------

    def join(
        self,
        group: str,
        topics: Sequence[str],
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        member_id: str | None = None,
    ) -> JoinResult:
        """Join ``group`` (a new member without ``member_id``; ``UnknownMember`` for an id not in the group)."""
        validate_group(group)
        wanted = _topics(topics)
        timeout = _session_timeout(session_timeout_ms)
        known = member_id is not None
        chosen = validate_member_id(member_id) if known else uuid.uuid4().hex
        found: dict[str, list[int]] = {}  # partitions per topic, read once for all attempts

        def partitions_of(topics: Collection[str]) -> dict[str, list[int]]:
            for t in sorted(set(topics) - found.keys()):
                found[t] = self._topic_partitions(t)
            return {t: found[t] for t in topics if found[t]}

        def apply(state: GroupState, now: int) -> tuple[JoinResult, bool]:
            # Not known: the id is ours, and finding it means an earlier attempt of this join applied.
            member = state.member(chosen, group) if known else state.members.get(chosen)
            if member is None and len(state.members) >= MAX_MEMBERS:
                raise InvalidArgument(f"group {group!r} has {MAX_MEMBERS} members, the most it may have")
            partitions = partitions_of({*wanted, *(t for m in state.members.values() for t in m.topics)})
            missing = [t for t in wanted if t not in partitions]
            if missing:
                raise UnknownTopic(missing[0])
            subscribed = {*wanted, *(t for m, v in state.members.items() if m != chosen for t in v.topics)}
            covered = {t: ps for t, ps in partitions.items() if t in subscribed}
            total = sum(len(ps) for ps in covered.values())
            if total > MAX_GROUP_PARTITIONS:
                raise InvalidArgument(f"group {group!r} would cover {total} partitions, over {MAX_GROUP_PARTITIONS}")
            changed = member is None or member.topics != wanted or covered != state.partitions
            state.members[chosen] = Member(wanted, timeout, now + timeout, member.assignment if member else {})
            if changed:
                state.rebalance(covered, now)
            assignment = state.members[chosen].assignment
            return JoinResult(group, chosen, state.generation, assignment, heartbeat_interval_ms(timeout)), True

        return self._update(group, apply)

    def heartbeat(self, group: str, member_id: str, generation: int) -> HeartbeatResult:
        validate_group(group)
        validate_member_id(member_id)
        _generation(generation)

        def apply(state: GroupState, now: int) -> tuple[HeartbeatResult, bool]:
            member = state.member(member_id, group)
            member.expires_at_ms = now + member.session_timeout_ms
            return HeartbeatResult(state.generation, rejoin=generation != state.generation), True

        return self._update(group, apply)

    def leave(self, group: str, member_id: str) -> bool:
        """Remove the member; False (and nothing written) if it was not in the group."""
        validate_group(group)
        validate_member_id(member_id)

        def apply(state: GroupState, now: int) -> tuple[bool, bool]:
            if member_id not in state.members:
                return False, False
            del state.members[member_id]
            state.rebalance(state.partitions, now)
            return True, True

        return self._update(group, apply)

    def commit(
        self, group: str, member_id: str, generation: int, offsets: Sequence[OffsetCommit]
    ) -> list[OffsetCommit]:
        """Write ``offsets`` atomically, all or none; the commit also extends the member's lease."""
        validate_group(group)
        validate_member_id(member_id)
        _generation(generation)
        if len(offsets) > MAX_GROUP_PARTITIONS:
            raise InvalidArgument(f"at most {MAX_GROUP_PARTITIONS} offsets per commit, not {len(offsets)}")
        seen: set[TopicPartition] = set()
        for o in offsets:
            if (o.topic, o.partition) in seen:
                raise InvalidArgument(f"{o.topic}/{o.partition} appears twice in one commit")
            seen.add((o.topic, o.partition))
        identities = {t: self._committable_identity(t) for t in sorted({o.topic for o in offsets})}

        def apply(state: GroupState, now: int) -> tuple[list[OffsetCommit], bool]:
            member = state.member(member_id, group)
            if generation != state.generation:
                raise StaleGeneration(
                    f"generation {generation} of group {group!r} is stale: the group is at {state.generation}; rejoin"
                )
            for o in offsets:
                if not member.owns(o.topic, o.partition):
                    raise NotPartitionOwner(
                        f"member {member_id!r} does not own {o.topic}/{o.partition} in generation {generation}"
                    )
            for t in state.committed_for_earlier_topics(identities) & identities.keys():
                state.offsets.pop(t, None)  # an earlier topic's offsets mean nothing in this one (docs/GROUPS.md)
                del state.offset_topics[t]
            for t, identity in identities.items():
                if identity is not None:
                    state.offset_topics[t] = identity
            for o in offsets:
                state.offsets.setdefault(o.topic, {})[o.partition] = o.offset
            member.expires_at_ms = now + member.session_timeout_ms
            state.touched_at_ms = max(state.touched_at_ms, now)
            return list(offsets), True

        return self._update(group, apply)

    def describe(self, group: str) -> GroupState:
        """The group as of now (expired leases dropped, as the next write will); ``UnknownGroup`` if none."""
        validate_group(group)
        now = self.now_ms()
        state = self._read(group, now)[0]
        if state is None:
            raise UnknownGroup(f"group {group!r} does not exist")
        return state

    def groups(self) -> list[str]:
        """The groups that exist, in name order (idle-expired ones are deleted first)."""
        self.expire_idle()
        return self._names()

    def states(self) -> dict[str, GroupState]:
        """Every group as of now, by name (expired leases dropped, idle-expired groups left out): one read each,
        nothing written."""
        now = self.now_ms()
        found = {}
        for group in self._names():
            state = self._read(group, now)[0]
            if state is not None:
                found[group] = state
        return found

    def expire_idle(self, now_ms: int | None = None) -> list[str]:
        """Delete every group with no live member and no commit for ``expiry_ms``; the names deleted.

        Each delete names the version judged, so a group that came back to
        life in between is left alone.
        """
        now = self.now_ms() if now_ms is None else now_ms
        deleted = []
        for group in self._names():
            key, pk = self.keys.group(group), self.keys.partition_key(group)
            record = self.oxia.get(key, partition_key=pk)
            if record is None:
                continue
            state = self._parse(group, record.value)
            state.expire_members(now)
            if state.idle_expired(now, self.expiry_ms):
                try:
                    self.oxia.delete(key, partition_key=pk, expected_version_id=record.version_id)
                except VersionConflict:
                    continue
                deleted.append(group)
        return deleted

    # --- the compare-and-set loop ---------------------------------------------------------------

    def _names(self) -> list[str]:
        keys = self.oxia.list_keys(self.keys.prefix, self.keys.scan_end)
        return sorted(g for g in (self.keys.parse(k) for k in keys) if g is not None)

    def _parse(self, group: str, value: bytes) -> GroupState:
        return GroupState.of(GroupDocument.decode(value, group))

    def _read(self, group: str, now: int) -> tuple[GroupState | None, int | None]:
        """The live state (None if absent or idle-expired) and the version to write over (None: create)."""
        record = self.oxia.get(self.keys.group(group), partition_key=self.keys.partition_key(group))
        if record is None:
            return None, None
        state = self._parse(group, record.value)
        state.expire_members(now)
        return (None if state.idle_expired(now, self.expiry_ms) else state), record.version_id

    def _update(self, group: str, apply: Callable[[GroupState, int], tuple[T, bool]]) -> T:
        """Apply ``apply`` to the current state and write it back with a compare-and-set, until one wins.

        ``apply`` returns its result and whether to write; it raises to reject (nothing written).
        """
        backoff = Backoff(CAS_BACKOFF_INITIAL_S, CAS_BACKOFF_MAX_S)
        key, pk = self.keys.group(group), self.keys.partition_key(group)
        for _ in range(CAS_ATTEMPTS):
            now = self.now_ms()
            state, version = self._read(group, now)
            state = state or GroupState(touched_at_ms=now)
            result, write = apply(state, now)
            if not write:
                return result
            value = state.document().encode()
            try:
                expected = CREATE_ONLY if version is None else version
                self.oxia.put(key, value, partition_key=pk, expected_version_id=expected)
            except VersionConflict:
                backoff.wait()
                continue
            return result
        raise VersionConflict(f"group {group!r}: lost {CAS_ATTEMPTS} compare-and-sets in a row; retry")
