"""The scale model's per-operation costs (``bench.scale.model.Costs``): assumed for a deployed stack, from the
cost model's own latencies and operation counts (bench/cost/inputs.py), or measured here on a local Oxia and
S3 server, by running each job's real code on a log built for it (``measure``).
"""

from __future__ import annotations

import math
import statistics
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from itertools import islice

from bench.cost.inputs import CAS, Assumptions
from bench.cost.operations import cpu_ms, oxia_write_ms
from bench.gc_scale import put_blobs, shifted
from bench.scale.model import Costs
from llog.config import GcConfig
from llog.format.keys import shared_wal_prefix
from llog.protocol.append import LogWriter
from llog.protocol.catalog import LogCatalog
from llog.protocol.claims import CompactorClaims
from llog.protocol.compaction import Compactor
from llog.protocol.gc import GarbageCollector
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.namespace import check_namespace
from llog.protocol.topics import TopicConfig
from llog.service.compaction import (
    PLANNER_READ_CONCURRENCY,
    CompactionTask,
    TaskEnd,
    plan_compaction,
    run_compaction_task,
)
from llog.service.produce import ProduceEntry, ProduceService
from llog.store.queue import SQS_BATCH
from llog.store.storage import Storage

CALIBRATION_TOPIC = "calibration"
ENTRY_COUNTS = (1, 16, 128)  # WAL entries a calibration partition gets before one compaction task
TASK_BUDGET_S = 240.0  # LLOG_COMPACTION_BUDGET_MS
PRODUCE_THREADS = 16
CALIBRATION_GRACE_MS = 60_000
WAL_RUN_BLOBS = 2000


def assumed(a: Assumptions | None = None, record_bytes: int = 1024) -> Costs:
    """A deployed stack's costs from the cost model's assumed latencies (none measured: nothing deployed)."""
    a = a or Assumptions()
    c, lat = a.code, a.latency
    read, write = lat.oxia_read_ms, oxia_write_ms(a)
    entry_bytes = record_bytes + c.batch_overhead_bytes
    return Costs(
        planner_fixed_s=(lat.handler_overhead_ms + c.planner_oxia_reads_per_tick * read) / 1000,
        # One status each; the tasks go out in SendMessageBatch calls of 10.
        planner_partition_s=CAS.planner_reads_per_partition * read / 1000,
        planner_task_s=lat.sqs_send_ms / SQS_BATCH / 1000,
        task_fixed_s=(lat.handler_overhead_ms + c.worker_oxia_reads * read + c.worker_oxia_writes * write) / 1000,
        object_s=(c.compaction_oxia_reads * read + c.compaction_oxia_writes * write + 2 * lat.s3_put_ms) / 1000,
        entry_s=(lat.s3_get_ms / c.consume_fetch_threads + cpu_ms(2 * entry_bytes, c.worker_memory_mb, lat)) / 1000,
        gc_run_fixed_s=(lat.handler_overhead_ms + c.wal_gc_oxia_reads_per_run * read) / 1000,
        gc_reference_s=c.wal_gc_oxia_reads_per_partition * read / 1000,
        gc_partition_s=(
            (c.gc_oxia_reads_per_partition - c.wal_gc_oxia_reads_per_partition) * read
            + c.gc_oxia_writes_per_partition * write
            + lat.s3_list_ms
        )
        / 1000,  # fmt: skip
        list_page_s=lat.s3_list_ms / 1000,
        delete_objects_s=lat.s3_delete_objects_ms / 1000,
        prefix_writes_per_s=lat.s3_prefix_writes_per_s,
    )


def _median_s(calls: list[Callable[[], object]]) -> float:
    times = []
    for call in calls:
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares ``y = a + b x``: (a, b), b at least 0."""
    xs, ys = [x for x, _ in points], [y for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = max(sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs), 0.0)
    return my - b * mx, b


def measure(storage: Storage, *, partitions: int, record_bytes: int = 1024, gc: GcConfig | None = None,
            runs: int = 3) -> Costs:  # fmt: skip
    """Each job's costs on this stack, under a root of their own (``storage.root``): the log is built for it.

    * planner: ``plan_compaction`` over ``partitions`` partitions, per partition;
    * compaction: ``run_compaction_task`` on partitions holding each of ``ENTRY_COUNTS`` one-record entries,
      fitted to ``object_s + n * entry_s`` after the task's fixed part, a task that finds nothing;
    * GC: one partition's WAL references, a whole WAL run and a full run over ``partitions`` partitions read
      one at a time, a LIST page and a DeleteObjects call of 1,000 keys.
    """
    gc = gc or GcConfig()
    # The namespace's identity a calibration grace before every blob: the whole WAL run below judges blobs
    # from the partitions' references alone, as a collector does past a stack's first grace.
    check_namespace(shifted(storage, -CALIBRATION_GRACE_MS - 1000))
    produce = ProduceService(LogWriter(storage))
    value = b"c" * record_bytes

    def fill(partition: int, count: int) -> None:
        for _ in range(count):
            result = produce.produce([ProduceEntry(CALIBRATION_TOPIC, partition, [value])])[0]
            if not result.ok:
                raise RuntimeError(f"calibration produce failed: {result.error}")

    by_count = {n: list(range(i * runs, (i + 1) * runs)) for i, n in enumerate(ENTRY_COUNTS)}
    every = max(partitions, len(ENTRY_COUNTS) * runs)
    # Created before the concurrent produces: their implicit creation of a new topic races (docs/SCALE.md).
    produce.topics.create(CALIBRATION_TOPIC, every, TopicConfig(produce.writer.config.append_protocol))
    with ThreadPoolExecutor(PRODUCE_THREADS) as pool:
        counts = {p: n for n, ps in by_count.items() for p in ps}
        list(pool.map(lambda p: fill(p, counts.get(p, 1)), range(every)))

    catalog = LogCatalog(storage.oxia, root=storage.root)
    planner_s = _median_s([lambda: plan_compaction(catalog, min_lag=1, max_delay_ms=0) for _ in range(runs)])
    planner_rounds = math.ceil(every / PLANNER_READ_CONCURRENCY)  # statuses read at once

    compactor = Compactor(storage)
    claims = CompactorClaims(storage.oxia, f"calibration-{uuid.uuid4().hex[:8]}", root=storage.root)
    record = produce.topics.get(CALIBRATION_TOPIC)
    keys_id = None if record is None else record.keys_id

    def task(partition: int) -> Callable[[], object]:
        def compact() -> object:
            outcome = run_compaction_task(CompactionTask(CALIBRATION_TOPIC, partition, 0, keys_id), compactor,
                                          claims, budget_s=TASK_BUDGET_S)  # fmt: skip
            if outcome.outcome is not TaskEnd.CAUGHT_UP:
                raise RuntimeError(f"calibration compaction of partition {partition}: {outcome.outcome}")
            return outcome

        return compact

    points = [(n, _median_s([task(p) for p in ps])) for n, ps in by_count.items()]
    empty_s = _median_s([task(p) for ps in by_count.values() for p in ps])  # caught up: nothing to do
    object_s, entry_s = _fit([(n, s - empty_s) for n, s in points])

    # GC, on the log compaction just caught up (its references are short), one partition at a time.
    metas = [PartitionMetadata(storage.oxia, CompactionTask(CALIBRATION_TOPIC, p, 0, keys_id).keys(storage.root))
             for p in range(every)]  # fmt: skip
    reference_s = _median_s([partial(GarbageCollector._partition_references, m) for m in metas])
    one_at_a_time = GarbageCollector(storage, config=replace(gc, read_concurrency=1))
    wal_run_s = _median_s([lambda: one_at_a_time.collect(wal_only=True) for _ in range(runs)])
    full_run_s = _median_s([lambda: one_at_a_time.collect() for _ in range(runs)])

    blobs, bucket, prefix = storage.blobs, storage.bucket, shared_wal_prefix(storage.root)
    page_keys = 1000
    batches = [put_blobs(storage, page_keys, b"g") for _ in range(runs)]
    list_page_s = _median_s([lambda: list(islice(blobs.list(bucket, prefix), page_keys)) for _ in range(runs)])
    delete_s = _median_s([partial(blobs.delete, bucket, keys) for keys in batches])

    # A whole WAL run over WAL_RUN_BLOBS old unreferenced blobs: listing and deleting as one run does, with
    # whatever else this machine runs meanwhile; per page of blobs, after the run's own fixed part.
    put_blobs(storage, WAL_RUN_BLOBS, b"w")
    ahead = GarbageCollector(shifted(storage, CALIBRATION_GRACE_MS + 60_000),
                             config=replace(gc, grace_ms=CALIBRATION_GRACE_MS))  # fmt: skip
    started = time.perf_counter()
    report = ahead.collect(wal_only=True)
    whole_run_s = time.perf_counter() - started
    if report.errors or report.wal_blobs_deleted < WAL_RUN_BLOBS:
        raise RuntimeError(f"calibration WAL run deleted {report.wal_blobs_deleted}: {report.errors[:3]}")
    return Costs(
        planner_fixed_s=0.0,
        planner_partition_s=planner_s / planner_rounds,
        planner_task_s=0.0,  # an in-process queue here
        task_fixed_s=empty_s,
        object_s=object_s,
        entry_s=entry_s,
        gc_run_fixed_s=max(wal_run_s - every * reference_s, 0.0),
        gc_reference_s=reference_s,
        gc_partition_s=max(full_run_s - wal_run_s, 0.0) / every,
        list_page_s=list_page_s,
        delete_objects_s=delete_s,
        prefix_writes_per_s=math.inf,  # a local server has no per-prefix rate
        wal_page_s=max(whole_run_s - wal_run_s, 0.0) / (report.wal_blobs_seen / 1000),
    )
