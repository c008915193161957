"""``server.collector``: what Python's collections cost, and the start-up heap frozen out of their reach."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from server.collector import CollectorStats, freeze_startup_heap


@pytest.fixture
def stats() -> Iterator[CollectorStats]:
    collector = CollectorStats().install()
    try:
        yield collector
    finally:
        collector.remove()


def full(snapshot: dict[str, Any]) -> dict[str, Any]:
    generation: dict[str, Any] = snapshot["generations"][2]
    return generation


def test_a_full_collection_is_counted_with_its_time(stats: CollectorStats) -> None:
    before = full(stats.snapshot())
    cycles = []
    for _ in range(100):
        node: list[object] = []
        node.append(node)  # a cycle only the collector frees
        cycles.append(node)
    del cycles, node
    gc.collect()
    after = full(stats.snapshot())
    assert after["collections"] >= before["collections"] + 1  # and any the interpreter ran meanwhile
    assert after["collected"] >= before["collected"] + 100
    assert after["seconds"] > before["seconds"]
    assert [g["generation"] for g in stats.snapshot()["generations"]] == [0, 1, 2]


def test_removed_stats_stop_counting_time(stats: CollectorStats) -> None:
    stats.remove()
    seconds = full(stats.snapshot())["seconds"]
    gc.collect()
    assert full(stats.snapshot())["seconds"] == seconds
    stats.remove()  # twice is harmless


def test_the_frozen_heap_is_skipped_by_collections() -> None:
    survivor: list[object] = []
    survivor.append(survivor)
    try:
        frozen = freeze_startup_heap()
        assert frozen > 0
        # Reference counting still frees frozen objects (other threads of the test process run meanwhile).
        assert 0 < CollectorStats().snapshot()["frozen_objects"] <= frozen
        assert not any(obj is survivor for obj in gc.get_objects())  # no generation holds it any more
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0
    assert any(obj is survivor for obj in gc.get_objects())
