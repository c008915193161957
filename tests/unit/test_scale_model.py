"""The scale model (bench/scale/model.py): what it predicts where the answer is known by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.scale.model import Costs, Schedule, Workload, simulate
from bench.scale.tables import Row, utilization

FREE = Costs(planner_fixed_s=0.0, planner_partition_s=0.0, planner_task_s=0.0, task_fixed_s=0.0, object_s=0.0,
             entry_s=0.0, gc_run_fixed_s=0.0, gc_reference_s=0.0, gc_partition_s=0.0, list_page_s=0.0,
             delete_objects_s=0.0)  # fmt: skip
FAST = Schedule(planner_interval_s=10, wal_gc_interval_s=60, gc_interval_s=600, grace_s=300)


def test_with_free_jobs_the_wal_holds_a_grace_and_half_a_gc_interval_of_blobs() -> None:
    rate = 20.0
    result = simulate(Workload(rate, 10, 1800, sample_s=0.25), FAST, FREE)
    # Blobs live from their PUT until the first WAL run after their grace: grace + interval / 2 on average.
    assert result.steady("live_wal") == pytest.approx(rate * (300 + 60 / 2), rel=0.02)
    assert result.steady("gc_backlog") == pytest.approx(rate * 60 / 2, rel=0.05)
    # Compacted at every planner tick: half a tick's entries wait on average.
    assert result.steady("compaction_lag") == pytest.approx(rate * 10 / 2, rel=0.03)
    assert not any(result.growing(q) for q in ("live_wal", "gc_backlog", "compaction_lag", "queued_tasks"))
    assert result.usage.blobs_deleted == pytest.approx(rate * (1800 - 300), rel=0.05)


def test_too_few_workers_leave_a_queue_and_a_lag_that_grow_and_name_the_workers() -> None:
    slow = replace(FREE, task_fixed_s=1.0)  # a task a second, one worker, 20 partitions a tick of 10 s
    result = simulate(Workload(20, 20, 1800, sample_s=5), replace(FAST, compaction_concurrency=1), slow)
    # The planner sends a task for every lagging partition each tick, queued or not: the queue grows without
    # end, while each partition waits for its turn (20 tasks of a second on one worker) with twice a tick's lag.
    assert result.growing("queued_tasks")
    assert result.steady("compaction_lag_age_s") > 2 * 10
    used = utilization(result)
    assert used["compaction workers"] == pytest.approx(1.0, rel=0.01)
    assert Row(20, result, used).first_limit == "compaction workers"
    enough = simulate(Workload(20, 20, 1800, sample_s=5), replace(FAST, compaction_concurrency=4), slow)
    assert not enough.growing("queued_tasks")
    assert utilization(enough)["compaction workers"] < 0.6


def test_blobs_compaction_has_not_passed_are_kept_past_the_grace() -> None:
    never = replace(FAST, planner_interval_s=10_000)  # no planner tick within the run
    result = simulate(Workload(10, 5, 1200, sample_s=10), never, FREE)
    assert result.usage.blobs_deleted == 0
    assert result.samples[-1].live_wal == pytest.approx(10 * 1200, rel=0.01)
    assert result.samples[-1].gc_backlog == pytest.approx(10 * (1200 - 300), rel=0.01)


def test_a_wal_run_stops_at_the_timeout_and_the_backlog_grows() -> None:
    # One LIST page a second, a page per 1,000 blobs: 50 blobs/s produced, at most 1,000 deleted a 60 s run.
    slow_list = replace(FREE, list_page_s=1.0)
    short = replace(FAST, gc_timeout_s=1.0)
    result = simulate(Workload(50, 5, 1800, sample_s=10), short, slow_list)
    assert result.usage.runs_cut_by_timeout > 0
    assert result.growing("gc_backlog")
    roomy = simulate(Workload(50, 5, 1800, sample_s=10), FAST, slow_list)
    assert roomy.usage.runs_cut_by_timeout == 0
    assert not roomy.growing("gc_backlog")


def test_the_prefix_rate_bounds_deletes_beside_the_wal_puts() -> None:
    # 3,500 writes/s on the prefix, 1,500 of them PUTs: a page of 1,000 deletes takes 0.5 s at least.
    result = simulate(Workload(1500, 10, 900, sample_s=30), FAST, replace(FREE, prefix_writes_per_s=3500.0))
    pages = result.usage.list_pages
    assert result.usage.gc_s == pytest.approx(pages * 1000 / 2000, rel=0.01)
    assert utilization(result)["S3 writes on wal-shared/"] == pytest.approx(3000 / 3500)


def test_a_warm_start_begins_a_grace_in_with_the_pipeline_full() -> None:
    result = simulate(Workload(10, 10, 600, sample_s=60, warm=True), FAST, FREE)
    assert result.samples[0].t == 300 + 60
    assert result.samples[0].live_wal == pytest.approx(10 * 360, rel=0.05)


def test_the_model_is_deterministic() -> None:
    args = (Workload(30, 7, 900, sample_s=7), FAST, replace(FREE, task_fixed_s=0.3, entry_s=0.01))
    assert simulate(*args).samples == simulate(*args).samples
