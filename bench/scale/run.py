"""A scaled-down real run of the background pipeline, to check the scale model against (bench/scale_run.py).

A producer process sends one-record produce requests at a fixed rate (``ProduceService`` as the produce
function runs it: one WAL blob per request), round the partitions of one topic, and records what was
acknowledged. The background jobs run on their production code paths at a compressed schedule, each worker
and GC in a process of its own (as Lambda gives each invocation an environment):

* the planner (``plan_compaction``) every ``planner_interval_s``, onto a queue that keeps duplicates as SQS
  does, and ``compaction_concurrency`` worker processes (``run_compaction_task``, a claim each);
* GC (``GarbageCollector.collect``): its WAL step every ``wal_gc_interval_s``, the full run (retention,
  compacted objects, the WAL step) when a multiple of ``gc_interval_s`` passed since the last run, one run
  at a time, with ``grace_s`` as its grace; the topic keeps ``retention_s`` so that retention removes ranges.

A sampler lists ``wal-shared/`` every ``sample_s``: the WAL blobs in S3, those past the grace (GC's backlog),
and reads every partition's compaction lag. When the producer stops, compaction catches up and every
acknowledged record is read back (``reconcile``) and the log verified (``Verifier``).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.scale.model import Sample, Schedule
from llog.config import GcConfig, OxiaConfig, RetentionConfig, S3Config
from llog.errors import LlogError
from llog.format.keys import object_id_time_ms, shared_wal_prefix
from llog.protocol.append import LogWriter
from llog.protocol.catalog import LogCatalog
from llog.protocol.claims import CompactorClaims
from llog.protocol.compaction import Compactor
from llog.protocol.gc import GarbageCollector, GcReport
from llog.protocol.read import LogReader
from llog.protocol.topics import TopicConfig, TopicRegistry
from llog.protocol.verify import Verifier
from llog.service.compaction import CompactionTask, TaskEnd, plan_compaction, run_compaction_task
from llog.service.produce import ProduceEntry, ProduceService
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage

log = logging.getLogger("bench.scale")

TOPIC = "scale"
PRODUCER_THREADS = 16
TASK_BUDGET_S = 240.0  # LLOG_COMPACTION_BUDGET_MS
UNBOUNDED_LAG = 2**62  # as a status's oldest_below_lag: the oldest uncompacted entry of every lagging partition


@dataclass(frozen=True)
class RunSettings:
    rate: float  # produce requests/s offered
    partitions: int
    duration_s: float
    schedule: Schedule
    sample_s: float = 7.0  # not a divisor of the jobs' intervals: the samples fall at every phase of them
    sample_phase_s: float = 0.5
    record_bytes: int = 1024
    retention_s: float = 300.0


@dataclass
class JobStats:
    planner_runs: int = 0
    tasks: int = 0
    empty_tasks: int = 0
    task_s: float = 0.0
    gc_runs: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass
class RunResult:
    settings: RunSettings
    sent: int
    acked: int
    failed: int
    achieved_rate: float
    samples: list[Sample]
    jobs: JobStats
    reconcile: dict[str, Any]
    cpu_s: dict[str, float]  # CPU seconds while producing, by process: this one's jobs, the producer, the servers


@dataclass(frozen=True)
class _Place:
    address: str
    s3: S3Config
    bucket: str
    root: str


def _storage(place: _Place, oxia: OxiaStore) -> Storage:
    return Storage(oxia, BlobStore(place.s3), place.bucket, place.root)


def _value(sequence: int, size: int) -> bytes:
    head = f"scale:{sequence}:".encode()
    return head + b"." * max(size - len(head), 0)


def _produce(place: _Place, rate: float, partitions: int, duration_s: float, record_bytes: int,
             start_at: float, answers: Any) -> None:  # fmt: skip
    """The producer process: request i is due at ``start_at + i / rate`` (wall clock) and goes to partition
    ``i % partitions``; a thread behind its slot sends at once. Sends ``(acks, failed)`` to ``answers``:
    ``acks[i] = (partition, offset)``."""
    with OxiaStore(OxiaConfig(place.address)) as oxia:
        service = ProduceService(LogWriter(_storage(place, oxia)))
        total = int(rate * duration_s)
        next_slot = [0]
        lock = threading.Lock()
        acks: dict[int, tuple[int, int]] = {}
        failed = [0]

        def send() -> None:
            while True:
                with lock:
                    i = next_slot[0]
                    next_slot[0] += 1
                if i >= total:
                    return
                delay = start_at + i / rate - time.time()
                if delay > 0:
                    time.sleep(delay)
                try:
                    result = service.produce([ProduceEntry(TOPIC, i % partitions, [_value(i, record_bytes)])])[0]
                except LlogError:
                    result = None
                with lock:
                    if result is not None and result.ok and result.start_offset is not None:
                        acks[i] = (i % partitions, result.start_offset)
                    else:
                        failed[0] += 1

        threads = [threading.Thread(target=send, daemon=True) for _ in range(PRODUCER_THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        service.close()
    answers.put((acks, failed[0]))


_in_process: dict[str, Any] = {}  # a job process's own clients (``_start_job_process``)


def _start_job_process(place: _Place, gc: GcConfig) -> None:
    """A compaction worker's or GC's process, as a Lambda execution environment: clients of its own."""
    oxia = OxiaStore(OxiaConfig(place.address))
    storage = _storage(place, oxia)
    _in_process.update(
        compactor=Compactor(storage),
        claims=CompactorClaims(oxia, f"scale-{os.getpid()}", root=place.root),
        collector=GarbageCollector(storage, config=gc),
    )


def _compact(task: CompactionTask) -> tuple[int, bool]:
    """One worker's turn on a task: (records compacted, whether it found nothing)."""
    outcome = run_compaction_task(task, _in_process["compactor"], _in_process["claims"], budget_s=TASK_BUDGET_S)
    return outcome.records, outcome.records == 0 and outcome.outcome is TaskEnd.CAUGHT_UP


def _collect(wal_only: bool) -> GcReport:
    report: GcReport = _in_process["collector"].collect(wal_only=wal_only)
    return report


class _Jobs:
    """The planner and the sampler on threads of this process; the compaction workers and GC in processes of
    their own (as Lambda runs each invocation in its own environment), driven from threads here."""

    def __init__(self, storage: Storage, place: _Place, settings: RunSettings, start: float) -> None:
        self.storage, self.settings, self.start = storage, settings, start
        self.schedule = settings.schedule
        self.stop = threading.Event()
        self.tasks: queue.Queue[CompactionTask] = queue.Queue()
        self.busy = 0
        self.lock = threading.Lock()
        self.stats = JobStats()
        gc = GcConfig(grace_ms=int(self.schedule.grace_s * 1000), read_concurrency=self.schedule.gc_read_concurrency,
                      retention=RetentionConfig())  # fmt: skip
        spawn = multiprocessing.get_context("spawn")
        self.workers = ProcessPoolExecutor(self.schedule.compaction_concurrency, mp_context=spawn,
                                           initializer=_start_job_process, initargs=(place, gc))  # fmt: skip
        self.collector = ProcessPoolExecutor(1, mp_context=spawn, initializer=_start_job_process,
                                             initargs=(place, gc))  # fmt: skip
        self.catalog = LogCatalog(storage.oxia, root=storage.root)

    def close(self) -> None:
        self.workers.shutdown()
        self.collector.shutdown()

    def every(self, interval_s: float, job: Callable[[float], None], name: str) -> threading.Thread:
        """``job(elapsed)`` at ``start + k * interval_s`` (k = 1, 2, ...); a run that outlasts the interval
        delays the next, as the model has it."""

        def loop() -> None:
            due = self.start + interval_s
            while not self.stop.wait(max(due - time.time(), 0)):
                began = time.time()
                try:
                    job(began - self.start)
                except LlogError as exc:
                    self.stats.errors.append(f"{name}: {exc}")
                due = max(due + interval_s, time.time())

        thread = threading.Thread(target=loop, name=name, daemon=True)
        thread.start()
        return thread

    def plan(self, _elapsed: float) -> None:
        plan = plan_compaction(
            self.catalog, min_lag=self.schedule.min_lag, max_delay_ms=round(self.schedule.max_delay_s * 1000)
        )
        self.stats.planner_runs += 1
        for task in plan.tasks:
            self.tasks.put(task)

    def worker(self) -> threading.Thread:
        """Takes tasks off the queue (SQS's part) and has a worker process compact each."""

        def loop() -> None:
            while not self.stop.is_set():
                try:
                    task = self.tasks.get(timeout=0.2)
                except queue.Empty:
                    continue
                with self.lock:
                    self.busy += 1
                began = time.perf_counter()
                try:
                    _records, empty = self.workers.submit(_compact, task).result()
                    with self.lock:
                        self.stats.tasks += 1
                        self.stats.empty_tasks += empty
                except LlogError as exc:
                    self.stats.errors.append(f"compaction of {task.topic}/{task.partition}: {exc}")
                finally:
                    with self.lock:
                        self.busy -= 1
                        self.stats.task_s += time.perf_counter() - began

        thread = threading.Thread(target=loop, name="worker", daemon=True)
        thread.start()
        return thread

    def collect(self, elapsed: float) -> None:
        interval, wal = self.schedule.gc_interval_s, self.schedule.wal_gc_interval_s
        full = int(elapsed // interval) > int((elapsed - wal) // interval)
        began = time.perf_counter()
        report = self.collector.submit(_collect, not full).result()
        self.stats.gc_runs.append({
            "at_s": round(elapsed, 1), "full": full, "seconds": round(time.perf_counter() - began, 3),
            "wal_blobs_deleted": report.wal_blobs_deleted, "wal_blobs_seen": report.wal_blobs_seen,
            "retention_ranges_removed": report.retention_ranges_removed, "errors": report.errors[:3],
        })  # fmt: skip
        self.stats.errors.extend(report.errors[:3])

    def sample(self, now: float) -> Sample:
        cutoff_ms = (now - self.schedule.grace_s) * 1000
        # Distinct keys: VersityGW may list a key twice while GC deletes others under the prefix.
        keys = {obj.key for obj in self.storage.blobs.list(self.storage.bucket, shared_wal_prefix(self.storage.root))}
        live = len(keys)
        past_grace = 0
        for key in keys:
            created = object_id_time_ms(key.rsplit("/", 1)[-1])
            past_grace += created is not None and created < cutoff_ms
        lag, oldest_ms = 0, now * 1000
        for partitions in self.catalog.partitions().values():
            for partition in partitions:
                status = self.catalog.status(partition, oldest_below_lag=UNBOUNDED_LAG)
                lag += status.compaction_lag
                if status.oldest_uncompacted_ms is not None:
                    oldest_ms = min(oldest_ms, status.oldest_uncompacted_ms)
        with self.lock:
            busy = self.busy
        return Sample(now - self.start, live, past_grace, lag, now - oldest_ms / 1000, self.tasks.qsize(), busy)

    def catch_up(self, timeout_s: float = 300.0) -> None:
        """Plan and compact until no partition lags (the producer has stopped)."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            plan = plan_compaction(self.catalog, min_lag=1, max_delay_ms=0)
            if not plan.tasks and self.tasks.empty():
                return
            for task in plan.tasks:
                self.tasks.put(task)
            time.sleep(1.0)
        raise RuntimeError("compaction did not catch up after the run")


def reconcile(storage: Storage, acks: dict[int, tuple[int, int]], partitions: int, record_bytes: int) -> dict[str, Any]:
    """Every acknowledged record read back at its offset with its bytes, unless retention removed its range
    (below the partition's log start); no record read that was not acknowledged; ``Verifier`` finds nothing."""
    reader = LogReader(storage)
    by_partition: dict[int, dict[int, int]] = {p: {} for p in range(partitions)}
    for sequence, (partition, offset) in acks.items():
        by_partition[partition][offset] = sequence
    missing = wrong = unexpected = expired = read = 0
    for partition, expected in by_partition.items():
        info = reader.partition_info(TOPIC, partition)
        start = info.log_start
        seen = set()
        for record in reader.iter_from(TOPIC, partition, start):
            read += 1
            sent = expected.get(record.offset)
            if sent is None:
                unexpected += 1
            elif record.value != _value(sent, record_bytes):
                wrong += 1
            seen.add(record.offset)
        for offset in expected:
            if offset < start:
                expired += 1
            elif offset not in seen:
                missing += 1
    verify = Verifier(storage, read_data=False).verify([TOPIC])
    return {
        "acked": len(acks), "read": read, "missing": missing, "wrong": wrong, "unexpected": unexpected,
        "expired_by_retention": expired, "verify_problems": verify.problem_count,
        "clean": not (missing or wrong or unexpected) and verify.ok,
    }  # fmt: skip


def start_producer(address: str, s3: S3Config, bucket: str, root: str,
                   settings: RunSettings) -> tuple[Any, Any, float]:  # fmt: skip
    """The producer process (``_produce``) under ``root``: (process, its answer queue, its start time)."""
    place = _Place(address, s3, bucket, root)
    start = time.time() + 2.0  # the producer process's start-up
    spawn = multiprocessing.get_context("spawn")  # no fork of this process's gRPC and boto3 clients
    answers: Any = spawn.Queue()
    producer = spawn.Process(
        target=_produce,
        name="producer",
        args=(place, settings.rate, settings.partitions, settings.duration_s, settings.record_bytes, start, answers),
    )
    producer.start()
    return producer, answers, start


def cpu_seconds(names: dict[int, str] | None = None) -> dict[str, float]:
    """CPU seconds used so far by this process (``jobs``: the planner and the sampler) and its children: by
    ``names``, the other Python processes together (the workers and GC), the rest by command (oxia,
    versitygw), from /proc (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {"jobs": sum(os.times()[:2])}
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name, fields = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()
        if fields[1] == me:  # the parent's pid
            name = (names or {}).get(int(stat.parent.name), "job processes" if name.startswith("python") else name)
            out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def _answer(producer: Any, answers: Any) -> tuple[dict[int, tuple[int, int]], int]:
    """The producer process's acknowledgements, once it sends them; raises if it died without."""
    while True:
        try:
            acks, failed = answers.get(timeout=1.0)
        except queue.Empty:
            if not producer.is_alive():
                raise RuntimeError(f"the producer process exited with {producer.exitcode}") from None
            continue
        producer.join()
        return acks, failed


def _create_topic(storage: Storage, settings: RunSettings) -> None:
    registry = TopicRegistry(storage.oxia, root=storage.root, writer_config=LogWriter(storage).config)
    registry.create(TOPIC, settings.partitions, TopicConfig(
        LogWriter(storage).config.append_protocol, retention_ms=int(settings.retention_s * 1000)))  # fmt: skip


@contextmanager
def background_load(address: str, s3: S3Config, bucket: str, root: str, settings: RunSettings) -> Iterator[None]:
    """The run's producer and its compaction (the planner and the worker processes) under ``root`` while the
    block runs: what is measured inside it shares the machine and the servers as the run's GC will."""
    place = _Place(address, s3, bucket, root)
    with OxiaStore(OxiaConfig(address)) as oxia:
        storage = _storage(place, oxia)
        _create_topic(storage, settings)
        producer, _answers, start = start_producer(address, s3, bucket, root, replace(settings, duration_s=3600))
        jobs = _Jobs(storage, place, settings, start)
        threads = [jobs.every(settings.schedule.planner_interval_s, jobs.plan, "planner")]
        threads += [jobs.worker() for _ in range(settings.schedule.compaction_concurrency)]
        try:
            yield
        finally:
            jobs.stop.set()
            for thread in threads:
                thread.join()
            jobs.close()
            producer.terminate()
            producer.join()


def real_run(address: str, s3: S3Config, bucket: str, settings: RunSettings,
             progress: Callable[[str], None] = lambda _: None) -> RunResult:  # fmt: skip
    """The run on a local stack (``address``: Oxia, ``s3``/``bucket``), under a root of its own."""
    place = _Place(address, s3, bucket, f"scale-{uuid.uuid4().hex[:8]}")
    schedule = settings.schedule
    with OxiaStore(OxiaConfig(address)) as oxia:
        storage = _storage(place, oxia)
        _create_topic(storage, settings)
        producer, answers, start = start_producer(address, s3, bucket, place.root, settings)
        names = {producer.pid: "producer"}
        cpu_before = cpu_seconds(names)
        jobs = _Jobs(storage, place, settings, start)
        threads = [jobs.every(schedule.planner_interval_s, jobs.plan, "planner"),
                   jobs.every(schedule.wal_gc_interval_s, jobs.collect, "gc")]  # fmt: skip
        threads += [jobs.worker() for _ in range(schedule.compaction_concurrency)]
        samples: list[Sample] = []
        due = start + settings.sample_phase_s + settings.sample_s
        while due <= start + settings.duration_s:
            time.sleep(max(due - time.time(), 0))
            samples.append(jobs.sample(time.time()))  # at the time it starts: a slow sample delays the next
            s = samples[-1]
            progress(f"[{s.t:6.0f} s] WAL blobs {s.live_wal:,} past grace {s.gc_backlog:,} "
                     f"compaction lag {s.compaction_lag:,} queued {s.queued_tasks} busy {s.busy_workers}")  # fmt: skip
            due = max(due + settings.sample_s, time.time())
        cpu = {name: seconds - cpu_before.get(name, 0.0) for name, seconds in cpu_seconds(names).items()}
        acks, failed = _answer(producer, answers)
        jobs.stop.set()
        for thread in threads:
            thread.join()
        jobs.stop.clear()
        workers = [jobs.worker() for _ in range(schedule.compaction_concurrency)]
        jobs.catch_up()
        jobs.stop.set()
        for thread in workers:
            thread.join()
        jobs.close()
        sent = int(settings.rate * settings.duration_s)
        return RunResult(
            settings=settings, sent=sent, acked=len(acks), failed=failed,
            achieved_rate=len(acks) / settings.duration_s, samples=samples, jobs=jobs.stats,
            cpu_s={name: round(seconds, 1) for name, seconds in cpu.items()},
            reconcile=reconcile(storage, acks, settings.partitions, settings.record_bytes),
        )  # fmt: skip


def as_json(result: RunResult) -> dict[str, Any]:
    return asdict(result)
