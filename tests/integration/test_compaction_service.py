"""Planner and worker logic on a real Oxia server."""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Iterator

import pytest

from bench.stack import stats_diff
from llog.config import CompactorConfig, OxiaConfig, WriterConfig
from llog.format.keys import PartitionKeys
from llog.format.kv.control import AppendProtocol
from llog.protocol.append import LogWriter
from llog.protocol.catalog import LogCatalog
from llog.protocol.claims import CompactorClaims
from llog.protocol.compaction import Compactor
from llog.protocol.faults import COMPACTOR_AFTER_RECORD
from llog.protocol.index import PartitionIndex
from llog.protocol.metadata import PartitionMetadata
from llog.service.compaction import CompactionTask, plan_compaction, run_compaction_task
from llog.store.metrics import OperationCounters
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from tests.conftest import BUCKET
from tests.faults import SimulatedCrash, crash_at

pytestmark = pytest.mark.oxia


def test_planner_picks_partitions_with_enough_lag(
    writer: LogWriter, oxia_store: OxiaStore, topic: str, root: str
) -> None:
    for partition, appends in ((0, 5), (1, 1), (2, 0)):
        writer.initialize_partition(topic, partition)
        for _ in range(appends):
            writer.append(topic, partition, [b"x"])

    plan = plan_compaction(LogCatalog(oxia_store, root=root), min_lag=3, max_delay_ms=600_000, rng=random.Random(1))

    mine = {(t.topic, t.partition): t.lag for t in plan.tasks if t.topic == topic}
    assert mine == {(topic, 0): 5}
    assert {k: v for k, v in plan.lag_by_partition.items() if k[0] == topic} == {
        (topic, 0): 5,
        (topic, 1): 1,
        (topic, 2): 0,
    }


def test_the_planner_schedules_a_partition_under_min_lag_once_its_oldest_entry_is_max_delay_old(
    writer: LogWriter,
    compactor_and_claims: tuple[Compactor, CompactorClaims],
    oxia_store: OxiaStore,
    topic: str,
    root: str,
) -> None:
    """Size or age (docs/SCALE.md): two offsets under a min_lag of 3 wait until the older one is max_delay_ms
    old; the age is the oldest uncompacted entry's, not the newest's, and a compacted range starts it again."""
    compactor, claims = compactor_and_claims
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"old"])
    first_ms = int(time.time() * 1000)
    time.sleep(0.05)
    writer.append(topic, 0, [b"new"])
    catalog = LogCatalog(oxia_store, root=root)

    def planned(at_ms: int) -> list[tuple[int, int]]:
        plan = plan_compaction(catalog, min_lag=3, max_delay_ms=60_000, now_ms=lambda: at_ms)
        return [(t.partition, t.lag) for t in plan.tasks if t.topic == topic]

    assert planned(first_ms + 30_000) == []
    assert planned(first_ms + 60_020) == [(0, 2)]  # the first entry's age: the second is under 60 s old
    assert run_compaction_task(CompactionTask(topic, 0, 2), compactor, claims, budget_s=30).records == 2
    writer.append(topic, 0, [b"later"])
    assert planned(int(time.time() * 1000) + 30_000) == []
    assert planned(int(time.time() * 1000) + 61_000) == [(0, 1)]
    assert plan_compaction(catalog, min_lag=1, max_delay_ms=10**9).lag_by_partition[(topic, 0)] == 1


def test_an_unreadable_oldest_entry_or_one_stamped_ahead_makes_its_partition_due_not_the_plan_fail(
    writer: LogWriter, storage: Storage, oxia_store: OxiaStore, topic: str, root: str
) -> None:
    """The age rule's read of the oldest uncompacted entry: a corrupt entry (partition 0) is the worker's to
    report, not a reason to plan nothing for every partition; an entry stamped a day ahead by a writer's clock
    (partition 1) does not hold its partition back for a day."""
    for partition in range(3):
        writer.initialize_partition(topic, partition)
    writer.append(topic, 0, [b"to be corrupted"])
    LogWriter(dataclasses.replace(storage, clock=lambda: time.time() + 86_400), config=writer.config).append(
        topic, 1, [b"from a clock a day ahead"]
    )
    for _ in range(5):
        writer.append(topic, 2, [b"past min_lag"])
    keys = PartitionKeys(topic, 0, root)
    index = PartitionIndex.load(PartitionMetadata(oxia_store, keys))
    oxia_store.put(index.key_of(index.scan(0, limit=1)[0].end_offset), b"garbage", partition_key=keys.partition_key)

    plan = plan_compaction(LogCatalog(oxia_store, root=root), min_lag=3, max_delay_ms=600_000)

    assert sorted((t.partition, t.lag) for t in plan.tasks if t.topic == topic) == [(0, 1), (1, 1), (2, 5)]


@pytest.mark.parametrize("protocol", list(AppendProtocol))
def test_the_planner_reads_each_partition_at_most_twice_and_finds_the_lag_of_separate_reads(
    oxia_config: OxiaConfig, blob_store: BlobStore, root: str, topic: str, protocol: AppendProtocol
) -> None:
    """Partitions empty, appended, partly compacted, with a compaction in flight and fenced (sealed): the
    planner reads each one's ``meta/`` records in one scan, plus the tail of an open sequence."""
    counters = OperationCounters()
    with OxiaStore(oxia_config, counters=counters) as store:
        storage = Storage(store, blob_store, BUCKET, root)
        writer = LogWriter(storage, config=WriterConfig(append_protocol=protocol))
        compactor = Compactor(storage, config=CompactorConfig(max_offsets_per_run=2))
        for partition, appends in enumerate((0, 3, 5, 4, 2)):
            writer.initialize_partition(topic, partition)
            for i in range(appends):
                writer.append(topic, partition, [f"r{i}".encode()])
        assert compactor.compact_once(topic, 2).outcome == "compacted"  # cursor 3 of 5
        with pytest.raises(SimulatedCrash):  # meta/compaction left behind, cursor still 1
            Compactor(storage, fault_hook=crash_at(COMPACTOR_AFTER_RECORD)).compact_once(topic, 3)
        writer.fence(topic, 4)

        before = counters.snapshot()
        plan = plan_compaction(LogCatalog(store, root=root), min_lag=3, max_delay_ms=600_000, rng=random.Random(1))
        ops = {op: s.calls for op, s in stats_diff(before, counters.snapshot()).items() if s.calls}

        # The lag as separate reads find it: the high watermark, then the cursor and meta/compaction.
        expected = {}
        for partition in range(5):
            meta = PartitionMetadata(store, PartitionKeys(topic, partition, root))
            expected[(topic, partition)] = PartitionIndex.load(meta).high_watermark() + 1 - meta.cursor().offset
    assert (
        plan.lag_by_partition == expected == {(topic, 0): 0, (topic, 1): 3, (topic, 2): 3, (topic, 3): 4, (topic, 4): 2}
    )
    assert sorted((t.partition, t.lag) for t in plan.tasks) == [(1, 3), (2, 3), (3, 4)]  # 3: its compaction

    # One scan of the topic records, one of the registry (its entries name each partition's folder); per
    # partition one scan of meta/, and the tail of an open sequence (the fenced one is sealed: its high
    # watermark is in meta/control); and the oldest uncompacted entry of the one with a lag under min_lag
    # (4), for the age rule.
    open_sequences = 4 if protocol is AppendProtocol.SEQUENTIAL else 0
    assert ops == {"range_scan": 7, "get_ceiling": 1} | ({"get_lower": open_sequences} if open_sequences else {})
    assert sum(ops.values()) - 2 <= 2 * plan.partitions_seen


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


def test_a_task_ends_at_the_range_that_reached_the_tail_without_an_empty_pass(
    writer: LogWriter, oxia_store: OxiaStore, blob_store: BlobStore, topic: str, root: str
) -> None:
    writer.initialize_partition(topic, 0)
    for i in range(5):
        writer.append(topic, 0, [f"r{i}".encode()])
    compactor = Compactor(Storage(oxia_store, blob_store, BUCKET, root), config=CompactorConfig(max_offsets_per_run=2))
    claims = CompactorClaims(oxia_store, "worker-1", root=root)

    outcome = run_compaction_task(CompactionTask(topic, 0, 5), compactor, claims, budget_s=30)

    assert outcome.outcome == "caught_up"
    assert [(r.outcome, r.start_offset, r.end_offset, r.reached_tail) for r in outcome.runs] == [
        ("compacted", 1, 2, False),
        ("compacted", 3, 4, False),
        ("compacted", 5, 5, True),
    ]


def test_entries_appended_during_a_task_are_left_to_the_next_task(
    writer: LogWriter, oxia_store: OxiaStore, blob_store: BlobStore, topic: str, root: str
) -> None:
    """A partition written to faster than one range compacts would otherwise hold its worker for the whole
    budget while the other partitions' tasks wait in the queue."""
    writer.initialize_partition(topic, 0)
    for i in range(3):
        writer.append(topic, 0, [f"r{i}".encode()])
    appended: list[int] = []

    def append_meanwhile(point: str) -> None:
        if point == COMPACTOR_AFTER_RECORD:  # after the selection, before the range is committed
            appended.append(writer.append(topic, 0, [b"meanwhile"]).start_offset or 0)

    storage = Storage(oxia_store, blob_store, BUCKET, root)
    compactor = Compactor(storage, fault_hook=append_meanwhile)
    claims = CompactorClaims(oxia_store, "worker-1", root=root)

    first = run_compaction_task(CompactionTask(topic, 0, 3), compactor, claims, budget_s=30)

    assert first.outcome == "caught_up"
    assert [(r.start_offset, r.end_offset) for r in first.runs] == [(1, 3)]
    assert appended == [4]
    lag = plan_compaction(LogCatalog(oxia_store, root=root), min_lag=1, max_delay_ms=0).lag_by_partition[(topic, 0)]
    assert lag == 1
    second = run_compaction_task(CompactionTask(topic, 0, 1), Compactor(storage), claims, budget_s=30)
    assert [(r.start_offset, r.end_offset, r.reached_tail) for r in second.runs] == [(4, 4, True)]


def test_worker_skips_a_partition_claimed_elsewhere(
    writer: LogWriter,
    compactor_and_claims: tuple[Compactor, CompactorClaims],
    oxia_store: OxiaStore,
    topic: str,
    root: str,
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
