"""The consumer groups' assignment (``llog.protocol.groups.assign``), a pure function: properties with Hypothesis."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from llog.protocol.groups import Assignment, assign

TOPICS = ("a", "b", "c")
members_st = st.lists(st.sampled_from([f"m{i}" for i in range(8)]), min_size=1, max_size=8, unique=True)
partitions_st = st.fixed_dictionaries({t: st.integers(0, 20).map(lambda n: list(range(n))) for t in TOPICS})


def owners(result: Assignment) -> dict[tuple[str, int], list[str]]:
    found: dict[tuple[str, int], list[str]] = {}
    for m, topics in result.items():
        for t, ps in topics.items():
            for p in ps:
                found.setdefault((t, p), []).append(m)
    return found


def load(result: Assignment, m: str) -> int:
    return sum(len(ps) for ps in result[m].values())


def check_disjoint_and_covering(
    result: Assignment, subscriptions: Mapping[str, set[str]], partitions: Mapping[str, list[int]]
) -> None:
    subscribed = {t for ts in subscriptions.values() for t in ts}
    expected = {(t, p) for t in subscribed for p in partitions.get(t, [])}
    found = owners(result)
    assert set(found) == expected, "every partition of a subscribed topic, nothing else"
    assert all(len(ms) == 1 for ms in found.values()), "disjoint"
    for m, topics in result.items():
        assert set(topics) <= subscriptions[m], "only subscribed topics"


@st.composite
def group(draw: st.DrawFn) -> tuple[dict[str, set[str]], dict[str, list[int]], Assignment]:
    """Subscriptions, partitions, and a previous assignment (possibly stale: gone members, gone partitions)."""
    members = draw(members_st)
    topic_sets = st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3, unique=True)
    subscriptions = {m: set(draw(topic_sets)) for m in members}
    partitions = draw(partitions_st)
    previous: Assignment = {}
    for m in draw(st.lists(st.sampled_from([f"m{i}" for i in range(10)]), max_size=10, unique=True)):
        previous[m] = {t: draw(st.lists(st.integers(0, 25), max_size=12, unique=True)) for t in TOPICS}
    return subscriptions, partitions, previous


@settings(max_examples=300, deadline=None)
@given(group())
def test_disjoint_covering_and_balanced_among_equal_subscriptions(case):
    subscriptions, partitions, previous = case
    result = assign(subscriptions, partitions, previous)

    check_disjoint_and_covering(result, subscriptions, partitions)
    for m1 in result:
        for m2 in result:
            if subscriptions[m1] == subscriptions[m2]:
                assert abs(load(result, m1) - load(result, m2)) <= 1, (m1, m2, result)


@settings(max_examples=300, deadline=None)
@given(group())
def test_deterministic(case):
    subscriptions, partitions, previous = case
    assert assign(subscriptions, partitions, previous) == assign(subscriptions, partitions, previous)


@settings(max_examples=300, deadline=None)
@given(members_st, st.integers(0, 60), st.data())
def test_sticky_with_one_topic_a_member_only_gains_or_only_loses(members, n, data):
    """Minimal movement: a partition moves only from a member above its fair share to one below it.

    With equal subscriptions the fair shares are fixed (floor or ceiling of
    partitions/members), so the moves are the fewest that balance: no member
    both gives and receives, and one that keeps fewer than it had ends at the
    larger share or above its previous count.
    """
    partitions = {"a": list(range(n))}
    subscriptions = {m: {"a"} for m in members}
    first = assign(subscriptions, partitions, {})
    # Someone leaves and someone joins, from a balanced start.
    leaving = data.draw(st.sampled_from(members))
    after = {m: {"a"} for m in members if m != leaving} | {"new": {"a"}}
    second = assign(after, partitions, first)

    check_disjoint_and_covering(second, after, partitions)
    moved_away = 0
    for m in after:
        before = set(first.get(m, {}).get("a", []))
        now = set(second[m].get("a", []))
        gained, lost = now - before, before - now
        assert not (gained and lost), (m, first, second)
        moved_away += len(lost)
    # Only surplus moves: what the leaver had plus what the others had over the new ceiling.
    ceiling = -(-n // len(after))
    surplus = sum(max(0, len(first.get(m, {}).get("a", [])) - ceiling) for m in after)
    assert moved_away <= surplus


def test_a_stopped_member_s_partitions_go_to_the_others_and_the_rest_stay():
    partitions = {"orders": list(range(12))}
    three = {m: {"orders"} for m in ("m1", "m2", "m3")}
    first = assign(three, partitions, {})
    assert sorted(len(first[m]["orders"]) for m in three) == [4, 4, 4]

    two = {m: {"orders"} for m in ("m1", "m3")}
    second = assign(two, partitions, first)

    assert sorted(second["m1"]["orders"] + second["m3"]["orders"]) == list(range(12))
    assert set(first["m1"]["orders"]) <= set(second["m1"]["orders"])
    assert set(first["m3"]["orders"]) <= set(second["m3"]["orders"])
    assert len(second["m1"]["orders"]) == len(second["m3"]["orders"]) == 6


def test_members_of_other_topics_share_nothing_they_did_not_subscribe_to():
    result = assign({"x": {"a"}, "y": {"b"}, "z": {"a", "b"}}, {"a": [0, 1, 2, 3], "b": [0, 1]}, {})
    assert set(result["x"]) <= {"a"}
    assert set(result["y"]) <= {"b"}
    assert sum(len(ps) for m in result for ps in result[m].values()) == 6
