"""``llog serve``'s ``X-Request-Id`` values: UUID-shaped, unique within a process and across them."""

from __future__ import annotations

import uuid

from server.serve import RequestIds


def test_request_ids_are_version_4_uuids_that_differ_in_their_counter() -> None:
    ids = RequestIds()
    first, second = ids.next(), ids.next()
    for value in (first, second):
        parsed = uuid.UUID(value)
        assert str(parsed) == value
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
    assert first[:24] == second[:24]
    assert int(second[24:], 16) == int(first[24:], 16) + 1


def test_each_instance_draws_a_prefix_of_its_own() -> None:
    assert len({RequestIds().next()[:24] for _ in range(100)}) == 100
