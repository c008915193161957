"""Planner and worker logic on a real Oxia server."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from llog.client.writer import LogWriter
from llog.protocol.catalog import LogCatalog
from llog.protocol.claims import CompactorClaims
from llog.protocol.compaction import Compactor
from llog.service.compaction import CompactionTask, plan_compaction, run_compaction_task
from llog.store.oxia import OxiaStore
from llog.store.storage import Storage
from tests.conftest import BUCKET

pytestmark = pytest.mark.oxia


def test_planner_picks_partitions_with_enough_lag(
    writer: LogWriter, oxia_store: OxiaStore, topic: str, root: str
) -> None:
    for partition, appends in ((0, 5), (1, 1), (2, 0)):
        writer.initialize_partition(topic, partition)
        for _ in range(appends):
            writer.append(topic, partition, [b"x"])

    plan = plan_compaction(LogCatalog(oxia_store, root=root), min_lag=3, rng=random.Random(1))

    mine = {(t.topic, t.partition): t.lag for t in plan.tasks if t.topic == topic}
    assert mine == {(topic, 0): 5}
    assert {k: v for k, v in plan.lag_by_partition.items() if k[0] == topic} == {
        (topic, 0): 5, (topic, 1): 1, (topic, 2): 0
    }


def test_worker_compacts_until_caught_up_and_releases_its_claim(
    writer: LogWriter, compactor_and_claims: tuple[Compactor, CompactorClaims], topic: str
) -> None:
    compactor, claims = compactor_and_claims
    writer.initialize_partition(topic, 0)
    for i in range(4):
        writer.append(topic, 0, [f"r{i}".encode()])

    outcome = run_compaction_task(CompactionTask(topic, 0, 4), compactor, claims, budget_s=30)

    assert outcome.outcome == "caught_up"
    assert outcome.records == 4
    assert claims.try_claim(topic, 0) is not None  # released


def test_worker_skips_a_partition_claimed_elsewhere(
    writer: LogWriter, compactor_and_claims: tuple[Compactor, CompactorClaims], oxia_store: OxiaStore, topic: str,
    root: str
) -> None:
    compactor, claims = compactor_and_claims
    writer.initialize_partition(topic, 0)
    assert CompactorClaims(oxia_store, "someone-else", root=root).try_claim(topic, 0) is not None

    outcome = run_compaction_task(CompactionTask(topic, 0, 1), compactor, claims, budget_s=30)

    assert outcome.outcome == "claim_held"
    assert outcome.runs == []


@pytest.fixture
def compactor_and_claims(oxia_config, blob_store, root: str) -> Iterator[tuple[Compactor, CompactorClaims]]:
    with OxiaStore(oxia_config) as store:
        yield Compactor(Storage(store, blob_store, BUCKET, root)), CompactorClaims(store, "worker-1", root=root)
