"""docs/SCALE.md's tables: the scale model (``bench.scale.model``) from 1 to 10,000 produce requests/s, with the
deployed defaults and the costs the cost model assumes for a deployed stack (``bench.scale.costs.assumed``).

Each rate is simulated from a steady state (``Workload.warm``) for ``HOURS`` hours; the tables show means over
the second half, each job's busiest run against its limit, and the first job to reach its limit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from bench.cost.inputs import Assumptions
from bench.scale.costs import assumed
from bench.scale.model import Costs, Result, Schedule, Workload, simulate

RATES = (1, 10, 100, 1000, 10_000)
PARTITIONS = 10_000
RECORD_BYTES = 1024
HOURS = 2
SAMPLE_S = 120.0
LAMBDA_ACCOUNT_CONCURRENCY = 1000  # AWS's default per region
SQS_REQUESTS_PER_TASK = 2.1  # a send in a batch of 10, the event source's receive and delete
PLANNER_GB = 0.5  # infra/functions.py: the planner's memory; the worker's and GC's come from the cost model
# The planner's size-or-age rule set for cost (docs/SCALE.md): objects of about a MiB of 1 KiB records, or an hour.
SIZE_OR_AGE = Schedule(min_lag=1000, max_delay_s=3600.0)
SIZE_OR_AGE_RATES = (1, 10, 100, 1000)


@dataclass(frozen=True)
class Row:
    rate: float
    result: Result
    utilization: dict[str, float]  # job: its busiest run (or its share of time) over its limit

    @property
    def first_limit(self) -> str:
        return max(self.utilization, key=lambda k: self.utilization[k])


def utilization(result: Result) -> dict[str, float]:
    """Each job against its limit: the planner's longest run against its interval, the workers' busy time
    against their concurrency, GC's longest WAL run against its interval (and the timeout), the full run
    against the timeout, and S3's PUT and DELETE rate on ``wal-shared/`` against its rate per prefix."""
    w, s, c, u = result.workload, result.schedule, result.costs, result.usage
    return {
        "planner": u.planner_max_s / s.planner_interval_s,
        "compaction workers": u.worker_s / (s.compaction_concurrency * w.duration_s),
        "GC's WAL step": u.wal_run_max_s / min(s.wal_gc_interval_s, s.gc_timeout_s),
        "GC's full run": u.full_run_max_s / s.gc_timeout_s,
        "S3 writes on wal-shared/": 2 * w.rate / c.prefix_writes_per_s,
    }


def background_usd_per_gb(result: Result, a: Assumptions) -> float:
    """Lambda, SQS and S3 requests of compaction, its planner and GC per GB of record bytes compacted, over
    the second half (in a steady state, what is produced; Oxia's servers are a fixed monthly cost:
    docs/COST.md)."""
    p, code, u = a.prices, a.code, result.steady_usage
    gb_seconds = (u.worker_s * code.worker_memory_mb / 1024 + u.planner_s * PLANNER_GB
                  + u.gc_s * code.gc_memory_mb / 1024)  # fmt: skip
    invocations = u.tasks + u.planner_runs + u.wal_runs + u.full_runs
    usd = (gb_seconds * p.lambda_arm_gb_second + invocations * p.lambda_per_million / 1e6
           + u.tasks * SQS_REQUESTS_PER_TASK * p.sqs_per_million / 1e6
           + u.entries_compacted * p.s3_get_per_10000 / 1e4
           + (2 * u.objects + u.list_pages) * p.s3_put_per_1000 / 1e3)  # fmt: skip
    gb = u.entries_compacted * RECORD_BYTES / 1e9  # a request is one entry of one record
    return usd / gb


def rows(schedule: Schedule | None = None, costs: Costs | None = None, rates: tuple[int, ...] = RATES) -> list[Row]:
    schedule = schedule or Schedule()
    costs = costs or assumed(record_bytes=RECORD_BYTES)
    out = []
    for rate in rates:
        result = simulate(Workload(rate, PARTITIONS, HOURS * 3600, sample_s=SAMPLE_S, warm=True), schedule, costs)
        out.append(Row(rate, result, utilization(result)))
    return out


def workers_busy(result: Result) -> float:
    """The compaction workers the load keeps busy on average, however many there are: each planner tick sends a
    task for every partition that received a request since the last one, and each task compacts that
    partition's entries of the tick (an object per ``entries_per_object``)."""
    w, s, c = result.workload, result.schedule, result.costs
    entries = w.rate * s.planner_interval_s
    active = min(w.partitions, entries)
    objects = active * math.ceil(entries / active / s.entries_per_object) if active else 0
    return (active * c.task_fixed_s + objects * c.object_s + entries * c.entry_s) / s.planner_interval_s


def workers_needed(result: Result, busy: float = 0.7) -> int:
    """Compaction concurrency that keeps the workers ``busy`` (a share) at most."""
    return max(1, math.ceil(workers_busy(result) / busy))


def _flag(value: float) -> str:
    if value >= 10:
        return "**over 1,000%**"
    return f"**{value:.0%}**" if value >= 1 else f"{value:.0%}"


def entries_per_object(result: Result) -> float:
    u = result.steady_usage
    return u.entries_compacted / max(u.objects, 1)


def render(table: list[Row], size_or_age: list[Row], a: Assumptions | None = None) -> str:
    """The defaults' tables, then the defaults against ``SIZE_OR_AGE`` at the rates of ``size_or_age``."""
    a = a or Assumptions()
    s = table[0].result.schedule
    lines = [
        f"{PARTITIONS:,} partitions, {RECORD_BYTES:,}-byte records, one WAL blob per request; planner every "
        f"{s.planner_interval_s:.0f} s with {s.compaction_concurrency} workers, GC's WAL step every "
        f"{s.wal_gc_interval_s:.0f} s, a full GC run every {s.gc_interval_s:.0f} s, grace {s.grace_s / 3600:.0f} h. "
        f"Means over the second half of {HOURS} simulated hours from a steady state.",
        "",
        "| requests/s | WAL blobs in S3 | GC backlog | entries not compacted | oldest uncompacted, s "
        "| tasks queued | workers busy (mean) | still growing |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    quantities = ("live_wal", "gc_backlog", "compaction_lag", "compaction_lag_age_s", "queued_tasks")
    for row in table:
        r, u = row.result, row.result.usage
        growing = [q for q in quantities if r.growing(q)]
        values = " | ".join(f"{r.steady(q):,.0f}" for q in quantities)
        lines.append(f"| {row.rate:,} | {values} | {u.worker_s / r.workload.duration_s:,.1f} "
                     f"| {', '.join(growing) or 'no'} |")  # fmt: skip
    lines += [
        "",
        "Each job's busiest run against its limit (100% or more: it does not keep up):",
        "",
        "| requests/s | " + " | ".join(table[0].utilization) + " | first to reach its limit "
        "| workers for 70% busy | background USD per GB |",
        "|---:|" + "---:|" * len(table[0].utilization) + "---|---:|---:|",
    ]
    for row in table:
        values = " | ".join(_flag(v) for v in row.utilization.values())
        lines.append(f"| {row.rate:,} | {values} | {row.first_limit} | {workers_needed(row.result):,} "
                     f"| {background_usd_per_gb(row.result, a):.4f} |")  # fmt: skip
    preset = size_or_age[0].result.schedule
    lines += [
        "",
        f"Compacting at a size or an age: the defaults against a `LLOG_COMPACTION_MIN_LAG` of {preset.min_lag:,} "
        f"and a `LLOG_COMPACTION_MAX_DELAY_MS` of {preset.max_delay_s / 60:.0f} minutes (defaults | "
        f"{preset.min_lag:,} or {preset.max_delay_s / 60:.0f} min):",
        "",
        "| requests/s | requests per partition per hour | entries per compacted object | oldest uncompacted, s "
        "| compaction tasks per hour | background USD per GB |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    by_rate = {row.rate: row.result for row in table}
    columns: tuple[tuple[Callable[[Result], float], str], ...] = (
        (entries_per_object, ",.1f"),
        (lambda r: r.steady("compaction_lag_age_s"), ",.0f"),
        (lambda r: r.steady_usage.tasks / (r.workload.duration_s / 2 / 3600), ",.0f"),
        (lambda r: background_usd_per_gb(r, a), ".4f"),
    )
    for row in size_or_age:
        pair = (by_rate[row.rate], row.result)
        cells = [" \\| ".join(format(value(r), spec) for r in pair) for value, spec in columns]
        lines.append(f"| {row.rate:,} | {row.rate * 3600 / PARTITIONS:,.2f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
