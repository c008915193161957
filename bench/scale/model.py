"""A discrete-event model of llog's background pipeline: compaction (planner and workers), GC's WAL step and
its full runs, under a steady produce load where every request is one WAL blob (the API Gateway front doors).

``simulate(workload, schedule, costs)`` plays the jobs as the deployed stack schedules them and returns the
samples (``Sample``) and what each job used (``Usage``). What each job does per run follows the code:

* **Planner** (every ``planner_interval_s``): reads every partition's status, ``planner_read_concurrency`` at
  a time, then sends a task for each partition whose compaction lag reaches ``min_lag``, or whose oldest
  uncompacted entry is ``max_delay_s`` old, whether or not one is already queued
  (``llog.service.compaction.plan_compaction``).
* **Compaction workers** (``compaction_concurrency`` at once, FIFO from the queue): a task claims the
  partition and compacts what it finds, an object per ``entries_per_object`` entries
  (``run_compaction_task``). Entries that arrive while it runs are left for the next task.
* **GC's WAL step** (every ``wal_gc_interval_s``, alone or inside the full run): reads every partition's
  references (``gc_read_concurrency`` at a time), then lists the blobs older than the grace and deletes those
  no partition references: the ones its partition's compaction had passed when the references were read
  (``llog.protocol.gc.GarbageCollector.collect_wal``), each page's once that page is listed and deleted, not
  when the run starts. A run that would outlast the function's timeout stops
  there; the rest waits for the next run. Runs do not overlap: a run still going when the next is due
  delays it.
* **Full GC** (every ``gc_interval_s``): retention and compacted objects, per partition, before its WAL step.

Partitions are equal: each gets ``rate / partitions`` requests a second. Time moves in events; a sample is
taken every ``sample_s``. Everything is deterministic.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, field, fields, replace

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class Workload:
    rate: float  # produce requests/s, one WAL blob each
    partitions: int
    duration_s: float  # simulated, after the start
    sample_s: float = 10.0
    sample_phase_s: float = 0.0  # the first sample at start + phase + sample_s
    # Start with the pipeline already full: produce began a grace ago, compaction and GC caught up (the tables
    # of a steady state); otherwise everything starts empty at 0 (a real run from scratch).
    warm: bool = False


@dataclass(frozen=True)
class Schedule:
    """The deployed defaults (infra/settings.py, llog.config), overridable to compress time."""

    planner_interval_s: float = 60.0  # llog:compactionSchedule
    compaction_concurrency: int = 50  # llog:compactionMaxConcurrency
    planner_read_concurrency: int = 16  # llog.service.compaction.PLANNER_READ_CONCURRENCY
    min_lag: int = 1  # LLOG_COMPACTION_MIN_LAG
    max_delay_s: float = 600.0  # LLOG_COMPACTION_MAX_DELAY_MS
    entries_per_object: int = 1024  # one index page per compacted object (Compactor._select)
    wal_gc_interval_s: float = 600.0  # llog:walGcSchedule
    gc_interval_s: float = 3600.0  # llog:gcSchedule
    grace_s: float = 86_400.0  # llog:gcGracePeriodHours
    gc_read_concurrency: int = 16  # LLOG_GC_READ_CONCURRENCY
    gc_timeout_s: float = 900.0  # the GC function's timeout
    list_page: int = 1000
    delete_batch: int = 1000  # keys per DeleteObjects call


@dataclass(frozen=True)
class Costs:
    """Seconds per operation as a job sees it (measured by bench/scale/calibrate.py, or assumed)."""

    planner_fixed_s: float  # a planner run's listing of topics and partitions
    planner_partition_s: float  # one partition's status, read alone
    planner_task_s: float  # one task sent (SendMessageBatch calls of 10, one after another)
    task_fixed_s: float  # a compaction task: invocation, claim, release, the last "nothing to do" check
    object_s: float  # one compacted object: its Oxia reads and writes, its object's and manifest's PUTs
    entry_s: float  # one WAL entry compacted: its share of the GETs and the encoding
    gc_run_fixed_s: float  # a GC run's namespace checks, topic records and registry listing
    gc_reference_s: float  # one partition's WAL references, read alone
    gc_partition_s: float  # one partition's retention and compacted objects in a full run, read alone
    list_page_s: float  # one LIST page of list_page keys
    delete_objects_s: float  # one DeleteObjects call of delete_batch keys
    prefix_writes_per_s: float = 3500.0  # S3's PUT/DELETE rate on one prefix: WAL PUTs and GC's deletes share it
    wal_page_s: float = 0.0  # a whole WAL run's time per list_page blobs listed and deleted, where measured


@dataclass
class Sample:
    t: float
    live_wal: int  # WAL blobs in S3
    gc_backlog: int  # WAL blobs past the grace still in S3
    compaction_lag: int  # entries appended but not yet compacted, all partitions
    compaction_lag_age_s: float  # age of the oldest uncompacted entry
    queued_tasks: int
    busy_workers: int


@dataclass
class Usage:
    """What each job used over the run: seconds busy, runs, and the S3 calls that are billed."""

    planner_runs: int = 0
    planner_s: float = 0.0
    planner_max_s: float = 0.0
    tasks: int = 0
    empty_tasks: int = 0  # found nothing to compact (a duplicate message)
    worker_s: float = 0.0
    objects: int = 0
    entries_compacted: int = 0
    wal_runs: int = 0
    wal_run_max_s: float = 0.0
    gc_s: float = 0.0
    full_runs: int = 0
    full_run_max_s: float = 0.0
    runs_cut_by_timeout: int = 0
    list_pages: int = 0
    blobs_deleted: int = 0
    delete_calls: int = 0

    def since(self, earlier: Usage) -> Usage:
        """What was used after ``earlier`` (a copy of this taken then); the longest runs stay the whole run's."""
        later = {f.name: getattr(self, f.name) - getattr(earlier, f.name) for f in fields(self)
                 if not f.name.endswith("_max_s")}  # fmt: skip
        return replace(self, **later)


@dataclass
class Result:
    workload: Workload
    schedule: Schedule
    costs: Costs
    samples: list[Sample] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    first_half: Usage = field(default_factory=Usage)  # what was used by the run's middle

    @property
    def steady_usage(self) -> Usage:
        """What the second half used: the pipeline's steady state, as ``steady`` averages the samples."""
        return self.usage.since(self.first_half)

    @property
    def start(self) -> float:
        return self.schedule.grace_s if self.workload.warm else 0.0

    def steady(self, name: str) -> float:
        """The mean of a sampled quantity over the second half of the run (after the pipeline filled)."""
        half = [getattr(s, name) for s in self.samples if s.t >= self.start + self.workload.duration_s / 2]
        return sum(half) / len(half) if half else 0.0

    def growing(self, name: str) -> bool:
        """Whether a quantity still grows: its last quarter's mean exceeds its third quarter's by 10% and by more
        than one run's worth (a WAL run's blobs, a planner tick's entries or tasks)."""
        d, t0 = self.workload.duration_s, self.start
        third = [getattr(s, name) for s in self.samples if t0 + d / 2 <= s.t < t0 + 3 * d / 4]
        last = [getattr(s, name) for s in self.samples if s.t >= t0 + 3 * d / 4]
        if not third or not last:
            return False
        a, b = float(sum(third) / len(third)), float(sum(last) / len(last))
        slack = {
            "live_wal": self.workload.rate * self.schedule.wal_gc_interval_s,
            "gc_backlog": self.workload.rate * self.schedule.wal_gc_interval_s,
            "compaction_lag": self.workload.rate * self.schedule.planner_interval_s,
            "compaction_lag_age_s": self.schedule.planner_interval_s,
            "queued_tasks": self.workload.partitions,
        }.get(name, 0.0)
        return b > 1.1 * a and b - a > slack


class _Pipeline:
    def __init__(self, workload: Workload, schedule: Schedule, costs: Costs) -> None:
        self.w, self.s, self.c = workload, schedule, costs
        self.per_partition = workload.rate / workload.partitions  # requests/s
        self.start = schedule.grace_s if workload.warm else 0.0
        # Each partition's entries before this time are compacted. Warm, under a size-or-age rule, partitions are
        # part-way through the wait between their compactions, spread evenly (a steady state's phases).
        least = max(schedule.min_lag, 1)
        cycle = min(schedule.max_delay_s, least / self.per_partition) if workload.warm and least > 1 else 0.0
        self.compacted_upto = [self.start - cycle * ((p * 0.6180339887) % 1) for p in range(workload.partitions)]
        self.offsets = np.arange(workload.partitions) / workload.rate  # each partition's first arrival
        self.queue: deque[int] = deque()
        self.plans: deque[list[int]] = deque()  # each planner run's tasks, until it sends them
        self.busy = 0
        self.events: list[tuple[float, int, str, int, float]] = []  # (time, seq, kind, partition, started)
        self.seq = 0
        self.usage = Usage()
        # WAL blobs by creation second: created - deleted is what S3 holds of that second.
        self.deleted_by_second: dict[int, float] = {}
        self.oldest_live_second = 0
        self.gc_free_at = 0.0  # when the running GC run (if any) ends
        self.pages_deleting: list[dict[int, float]] = []  # each WAL page's deletions, until the page is done

    def at(self, t: float, kind: str, partition: int = -1, started: float = 0.0) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, partition, started))

    def arrivals_before_each(self, t: float | npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        """``arrivals_before`` for every partition at once (``t``: one time, or one per partition)."""
        k = np.ceil((t - self.offsets) * self.per_partition - 1e-9)
        return np.maximum(k, 0).astype(np.int64)

    def arrivals_before(self, partition: int, t: float) -> int:
        """Requests that reached a partition before ``t``: the partitions' arrivals interleave evenly, partition
        p's k-th at ``p / rate + k / per_partition``."""
        k = math.ceil((t - partition / self.w.rate) * self.per_partition - 1e-9)
        return k if k > 0 else 0

    def entries(self, partition: int, since: float, until: float) -> int:
        """Requests that reached a partition in [since, until)."""
        return self.arrivals_before(partition, until) - self.arrivals_before(partition, since)

    def run(self) -> Result:
        result = Result(self.w, self.s, self.c)
        self.at(self.start + self.s.planner_interval_s, "plan")
        self.at(self.start + self.s.wal_gc_interval_s, "gc")
        end = self.start + self.w.duration_s
        sample_t = self.start + self.w.sample_phase_s + self.w.sample_s
        middle, halfway = self.start + self.w.duration_s / 2, False
        while self.events:
            t, _, kind, partition, started = heapq.heappop(self.events)
            if t >= middle and not halfway:
                result.first_half, halfway = replace(self.usage), True
            while sample_t <= min(t, end):
                result.samples.append(self.sample(sample_t))
                sample_t += self.w.sample_s
            if t > end:
                break
            getattr(self, f"on_{kind}")(t, partition, started)
        result.usage = self.usage
        return result

    # Planner and workers.
    def on_plan(self, t: float, _p: int, _s: float) -> None:
        rounds = math.ceil(self.w.partitions / self.s.planner_read_concurrency)
        least = max(self.s.min_lag, 1)  # the lag each partition had when its status was read
        done = self.arrivals_before_each(np.asarray(self.compacted_upto))
        lags = self.arrivals_before_each(t) - done
        due = lags >= least
        if least > 1:  # or by age: its oldest uncompacted entry arrived by max_delay ago
            due |= (lags > 0) & (done < self.arrivals_before_each(t - self.s.max_delay_s + 1e-9))
        self.plans.append(np.flatnonzero(due).tolist())
        # A partition under min_lag with some lag has its oldest entry read too (counted as one more status).
        rounds += math.ceil(int(np.count_nonzero((lags > 0) & (lags < least))) / self.s.planner_read_concurrency)
        lagging = self.plans[-1]
        took = self.c.planner_fixed_s + rounds * self.c.planner_partition_s + len(lagging) * self.c.planner_task_s
        u = self.usage
        u.planner_runs += 1
        u.planner_s += took
        u.planner_max_s = max(u.planner_max_s, took)
        self.at(t + took, "enqueue")
        self.at(t + max(self.s.planner_interval_s, took), "plan")  # a planner run outlasting the interval

    def on_enqueue(self, t: float, _p: int, _s: float) -> None:
        self.queue.extend(self.plans.popleft())
        self.dispatch(t)

    def dispatch(self, t: float) -> None:
        while self.queue and self.busy < self.s.compaction_concurrency:
            p = self.queue.popleft()
            n = self.entries(p, self.compacted_upto[p], t)
            objects = math.ceil(n / self.s.entries_per_object)
            took = self.c.task_fixed_s + objects * self.c.object_s + n * self.c.entry_s
            u = self.usage
            u.tasks += 1
            u.empty_tasks += n == 0
            u.worker_s += took
            u.objects += objects
            u.entries_compacted += n
            self.busy += 1
            self.at(t + took, "task_done", p, t)

    def on_task_done(self, t: float, p: int, started: float) -> None:
        self.compacted_upto[p] = max(self.compacted_upto[p], started)
        self.busy -= 1
        self.dispatch(t)

    # Garbage collection.
    def on_gc(self, t: float, _p: int, _s: float) -> None:
        begin = max(t, self.gc_free_at)
        full = math.floor(begin / self.s.gc_interval_s) > math.floor((begin - self.s.wal_gc_interval_s)
                                                                      / self.s.gc_interval_s)  # fmt: skip
        rounds = math.ceil(self.w.partitions / self.s.gc_read_concurrency)  # partitions read at once
        took = self.c.gc_run_fixed_s + rounds * self.c.gc_reference_s
        if full:
            took += rounds * self.c.gc_partition_s
        took += self.collect_wal(begin, begin + took, self.s.gc_timeout_s - took)
        u = self.usage
        u.gc_s += took
        if full:
            u.full_runs += 1
            u.full_run_max_s = max(u.full_run_max_s, took)
        else:
            u.wal_runs += 1
            u.wal_run_max_s = max(u.wal_run_max_s, took)
        self.gc_free_at = begin + took
        self.at(max(t + self.s.wal_gc_interval_s, self.gc_free_at), "gc")

    def collect_wal(self, begin: float, listing_from: float, time_left_s: float) -> float:
        """Lists the blobs older than the grace, deletes the unreferenced ones; the seconds it took. A page's
        blobs are gone once the page is done (``on_wal_page``): the run lists from ``listing_from``, after its
        reads of the references."""
        cutoff = begin - self.s.grace_s
        done = sorted(self.compacted_upto)  # as the references were read (compaction runs on meanwhile)
        page_s = max(
            self.c.list_page_s,
            self.c.delete_objects_s * self.s.list_page / self.s.delete_batch / self.s.gc_read_concurrency,
            self.s.list_page / max(self.c.prefix_writes_per_s - self.w.rate, 1e-9),  # beside the WAL's PUTs
            self.c.wal_page_s,
        )
        second = self.oldest_live_second
        listed = 0.0
        deletions: list[dict[int, float]] = []  # by page: each second's blobs that page deletes
        while second + 1 <= cutoff:
            live = self.w.rate - self.deleted_by_second.get(second, 0.0)
            pages_after = (listed + live) / self.s.list_page
            if pages_after * page_s > time_left_s:
                self.usage.runs_cut_by_timeout += 1
                break
            listed += live
            # Blobs of this second whose partition's compaction had passed them when the references were read.
            referenced = bisect_left(done, second + 1)
            gone = live * (1 - referenced / self.w.partitions)
            if gone:
                page = max(math.ceil(listed / self.s.list_page) - 1, 0)
                while len(deletions) <= page:
                    deletions.append({})
                deletions[page][second] = gone
                self.usage.blobs_deleted += round(gone)
            second += 1
        for page, gone_by_second in enumerate(deletions):
            self.pages_deleting.append(gone_by_second)
            self.at(listing_from + (page + 1) * page_s, "wal_page", len(self.pages_deleting) - 1)
        pages = math.ceil(listed / self.s.list_page) if listed else 1
        self.usage.list_pages += pages
        self.usage.delete_calls += math.ceil(listed / self.s.delete_batch)
        return min(pages * page_s, time_left_s)  # a run cut at the timeout took all of it

    def on_wal_page(self, _t: float, page: int, _s: float) -> None:
        """A WAL run's page done: its blobs are gone; the oldest second still in S3 moves past whole ones."""
        for second, gone in self.pages_deleting[page].items():
            self.deleted_by_second[second] = self.deleted_by_second.get(second, 0.0) + gone
        self.pages_deleting[page] = {}
        while self.deleted_by_second.get(self.oldest_live_second, 0.0) >= self.w.rate - 1e-6:
            self.deleted_by_second.pop(self.oldest_live_second)
            self.oldest_live_second += 1

    def sample(self, t: float) -> Sample:
        created_total = self.w.rate * t
        deleted = self.w.rate * self.oldest_live_second + sum(
            v for s, v in self.deleted_by_second.items() if s >= self.oldest_live_second
        )
        past_grace = self.w.rate * max(t - self.s.grace_s, 0.0) - deleted
        done = self.arrivals_before_each(np.asarray(self.compacted_upto))
        lags = self.arrivals_before_each(t) - done
        lag = int(lags.sum())
        first = self.offsets + done / self.per_partition  # each partition's oldest uncompacted entry's arrival
        oldest = float(t - first[lags > 0].min()) if lag else 0.0
        return Sample(
            t=t,
            live_wal=round(created_total - deleted),
            gc_backlog=round(max(past_grace, 0.0)),
            compaction_lag=lag,
            compaction_lag_age_s=oldest,
            queued_tasks=len(self.queue),
            busy_workers=self.busy,
        )


def simulate(workload: Workload, schedule: Schedule, costs: Costs) -> Result:
    return _Pipeline(workload, schedule, costs).run()
