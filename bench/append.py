"""Append benchmark: the CAS and the sequential protocol side by side (docs/SEQUENTIAL_APPEND.md).

For each protocol, number of concurrent writers (1, 8, 32, 64), kind of writer (threads of this
process, or processes) and layout (every append to one partition, or spread over 16 partitions),
writers append single 100-byte records for a fixed time against a local Oxia standalone (fsync on)
and a moto S3 server. Each writer has its own ``LogWriter`` and Oxia client, as each Lambda
environment has its own. Reported per scenario (the median over ``--runs`` runs): appends/s, p50
and p99 append latency, Oxia reads and writes per partition-append, S3 requests per append,
compare-and-set conflicts and Oxia transport retries per append, and the errors seen; then the
issue's targets, computed from rows of the same run:

* sequential appends/s at 32 writers on one partition >= 10x the CAS protocol's;
* sequential p99 at 32 writers <= 3x the sequential single-writer p50;
* sequential Oxia writes per partition-append <= 1 on average.

    .venv/bin/python bench/append.py [--protocols cas sequential] [--writers 1 8 32 64]
        [--kinds threads processes] [--partitions 1 16] [--seconds 3] [--runs 2] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.synchronize import Barrier as ProcessBarrier
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `bench` importable
    sys.path.insert(0, str(ROOT))

from bench.stack import READ_OPS as READ_OPS  # noqa: E402  (re-exported: tests and callers use append.READ_OPS)
from bench.stack import WRITE_OPS as WRITE_OPS  # noqa: E402
from bench.stack import local_stack, measure_floor, median_of_runs, percentile, print_rows, stats_diff  # noqa: E402
from llog.config import OxiaConfig, S3Config, WriterConfig  # noqa: E402
from llog.format.keys import DEFAULT_ROOT_PREFIX, PartitionKeys  # noqa: E402
from llog.format.kv.control import AppendProtocol  # noqa: E402
from llog.protocol.append import LogWriter, SharedAppendGroup  # noqa: E402
from llog.store.metrics import OperationCounters, OperationStats  # noqa: E402
from llog.store.oxia import OxiaStore  # noqa: E402
from llog.store.s3 import BlobStore  # noqa: E402
from llog.store.storage import Storage  # noqa: E402

BUCKET = "llog-bench"
PAYLOAD = b"x" * 100
PROTOCOLS = ("cas", "sequential")
KINDS = ("threads", "processes")
TARGET_WRITERS = 32
WORKER_CONNECT_TIMEOUT_MS = 60_000


@dataclass(frozen=True)
class Scenario:
    protocol: str
    writers: int
    kind: str
    partitions: int


@dataclass
class WorkerResult:
    """What one writer did; summed over the writers of a run."""

    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    oxia: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # op -> (calls, retries, conflicts)
    s3: dict[str, int] = field(default_factory=dict)
    started: float = 0.0
    ended: float = 0.0


def _diff(before: dict[str, OperationStats], after: dict[str, OperationStats]) -> dict[str, tuple[int, int, int]]:
    return {op: (s.calls, s.retries, s.conflicts) for op, s in stats_diff(before, after).items()}


def _writer(address: str, s3_config: S3Config, protocol: str, oxia: OperationCounters, s3: OperationCounters
            ) -> LogWriter:  # fmt: skip
    # Patient connecting: 64 writer processes start at once on a small machine.
    config = OxiaConfig(address, connect_timeout_ms=WORKER_CONNECT_TIMEOUT_MS)
    storage = Storage(OxiaStore(config, counters=oxia), BlobStore(s3_config, counters=s3), BUCKET,
                      DEFAULT_ROOT_PREFIX)  # fmt: skip
    return LogWriter(storage, config=WriterConfig(append_protocol=AppendProtocol(protocol)))


def _warm_up(writer: LogWriter, topic: str) -> None:
    """Open the Oxia and S3 connections before the clock starts (what a warm Lambda environment has).

    It does not fill the writer's cache of sequential partitions: each writer's first append to a
    partition reads ``meta/control``, and that read is counted.
    """
    keys = PartitionKeys(topic, 0)
    writer.storage.oxia.get(keys.control, partition_key=keys.partition_key)
    writer.layouts.topic_id(topic)  # the topic's record (its folders), read again once per TTL
    list(writer.storage.blobs.list(BUCKET, "warm-up/"))


def _append_until(writer: LogWriter, topic: str, partitions: int, index: int, deadline: float) -> WorkerResult:
    """Append one record at a time, round-robin over the partitions from this writer's own start."""
    result = WorkerResult(started=time.time())
    for n in itertools.count():
        if time.perf_counter() >= deadline:
            break
        partition = (index + n) % partitions
        t0 = time.perf_counter()
        (appended,) = writer.append_shared([SharedAppendGroup(topic, partition, [PAYLOAD])])
        if appended.ok:
            result.latencies.append(time.perf_counter() - t0)
        else:
            result.errors[appended.error_type or "?"] += 1
    result.ended = time.time()
    return result


def _process_worker(address: str, s3_config: S3Config, scenario: Scenario, topic: str, index: int, seconds: float,
                    gate: ProcessBarrier, out: Any) -> None:  # fmt: skip
    """One writer in its own process (Oxia clients are not fork-safe: everything is created here)."""
    oxia, s3 = OperationCounters(), OperationCounters()
    writer = _writer(address, s3_config, scenario.protocol, oxia, s3)
    try:
        _warm_up(writer, topic)
        gate.wait()
        oxia_before, s3_before = oxia.snapshot(), s3.snapshot()
        result = _append_until(writer, topic, scenario.partitions, index, time.perf_counter() + seconds)
        result.oxia = _diff(oxia_before, oxia.snapshot())
        result.s3 = {op: v[0] for op, v in _diff(s3_before, s3.snapshot()).items()}
        out.put(result)
    except Exception as exc:
        gate.abort()  # the other writers stop waiting for this one
        out.put(f"writer {index}: {type(exc).__name__}: {exc}")
    finally:
        writer.close()


def _run_threads(address: str, s3_config: S3Config, scenario: Scenario, topic: str, seconds: float
                 ) -> list[WorkerResult]:  # fmt: skip
    oxia, s3 = OperationCounters(), OperationCounters()
    pool = [_writer(address, s3_config, scenario.protocol, oxia, s3) for _ in range(scenario.writers)]
    for w in pool:
        _warm_up(w, topic)
    results: list[WorkerResult] = [WorkerResult() for _ in pool]
    gate = threading.Barrier(scenario.writers + 1)
    deadline = [0.0]

    def work(i: int) -> None:
        gate.wait()
        results[i] = _append_until(pool[i], topic, scenario.partitions, i, deadline[0])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(scenario.writers)]
    for t in threads:
        t.start()
    oxia_before, s3_before = oxia.snapshot(), s3.snapshot()
    deadline[0] = time.perf_counter() + seconds
    gate.wait()
    for t in threads:
        t.join()
    for w in pool:
        w.close()
    results[0].oxia = _diff(oxia_before, oxia.snapshot())  # the counters are shared: report them once
    results[0].s3 = {op: v[0] for op, v in _diff(s3_before, s3.snapshot()).items()}
    return results


def _run_processes(address: str, s3_config: S3Config, scenario: Scenario, topic: str, seconds: float
                   ) -> list[WorkerResult]:  # fmt: skip
    ctx = multiprocessing.get_context("spawn")
    gate = ctx.Barrier(scenario.writers)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_process_worker, args=(address, s3_config, scenario, topic, i, seconds, gate, out))
        for i in range(scenario.writers)
    ]
    for p in procs:
        p.start()
    answers = [out.get(timeout=300 + seconds) for _ in procs]
    for p in procs:
        p.join(60)
    failed = [a for a in answers if isinstance(a, str)]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(procs)} writer processes failed; first: {failed[0]}")
    return answers


def one_run(address: str, s3_config: S3Config, scenario: Scenario, seconds: float) -> dict[str, Any]:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    with _writer(address, s3_config, scenario.protocol, OperationCounters(), OperationCounters()) as admin:
        for partition in range(scenario.partitions):
            admin.initialize_partition(topic, partition)
    run = _run_threads if scenario.kind == "threads" else _run_processes
    results = run(address, s3_config, scenario, topic, seconds)

    latencies = [x for r in results for x in r.latencies]
    appends = len(latencies)
    elapsed = max(r.ended for r in results) - min(r.started for r in results)
    oxia: Counter[str] = Counter()
    retries = conflicts = 0
    for r in results:
        for op, (calls, op_retries, op_conflicts) in r.oxia.items():
            oxia[op] += calls
            retries += op_retries
            conflicts += op_conflicts
    errors: Counter[str] = Counter()
    for r in results:
        errors.update(r.errors)
    per = max(appends, 1)
    return {
        **asdict(scenario),
        "appends": appends,
        "appends_per_s": appends / elapsed if elapsed > 0 else 0.0,
        "p50_ms": percentile(latencies, 0.50) * 1000 if appends else float("nan"),
        "p99_ms": percentile(latencies, 0.99) * 1000 if appends else float("nan"),
        "oxia_reads_per_append": sum(n for op, n in oxia.items() if op in READ_OPS) / per,
        "oxia_writes_per_append": sum(n for op, n in oxia.items() if op in WRITE_OPS) / per,
        "oxia_ops_by_kind": {op: n / per for op, n in sorted(oxia.items()) if n},
        "s3_requests_per_append": sum(n for r in results for n in r.s3.values()) / per,
        "cas_conflicts_per_append": conflicts / per,
        "oxia_retries_per_append": retries / per,
        "errors": dict(errors),
    }


MEDIAN_KEYS = (
    "appends_per_s",
    "p50_ms",
    "p99_ms",
    "oxia_reads_per_append",
    "oxia_writes_per_append",
    "s3_requests_per_append",
    "cas_conflicts_per_append",
    "oxia_retries_per_append",
)


def _median_row(samples: list[dict[str, Any]]) -> dict[str, Any]:
    row = median_of_runs(samples, MEDIAN_KEYS)
    row["appends"] = sum(s["appends"] for s in samples)
    errors: Counter[str] = Counter()
    for s in samples:
        errors.update(s["errors"])
    row["errors"] = dict(errors)
    return row


def scenarios(protocols: Sequence[str], writers: Sequence[int], kinds: Sequence[str], partitions: Sequence[int]
              ) -> list[Scenario]:  # fmt: skip
    """Grouped so that the two protocols of one shape run back to back (their ratio is the point)."""
    return [Scenario(p, w, k, n) for n in partitions for k in kinds for w in writers for p in protocols]


def run(
    protocols: Sequence[str] = PROTOCOLS,
    writers: Sequence[int] = (1, 8, 32, 64),
    kinds: Sequence[str] = KINDS,
    partitions: Sequence[int] = (1, 16),
    *,
    seconds: float = 3.0,
    runs: int = 2,
) -> list[dict[str, Any]]:
    """Every scenario against one Oxia standalone and one moto server; raises if Oxia cannot be had.

    The first row (``protocol == "floor"``) is the floor on the same servers (``measure_floor``).
    """
    with local_stack(BUCKET) as (address, s3_config):
        floor = {"protocol": "floor", **measure_floor(address, s3_config, BUCKET)}
        return [floor] + [
            _median_row([one_run(address, s3_config, sc, seconds) for _ in range(runs)])
            for sc in scenarios(protocols, writers, kinds, partitions)
        ]


def floor_report(rows: list[dict[str, Any]]) -> str:
    """The floor row, and each protocol's single-writer p50 as a multiple of it (same run)."""
    floor = next((r for r in rows if r["protocol"] == "floor"), None)
    if floor is None:
        return ""
    text = (
        f"Floor on the same servers, same run (medians of 200 requests, one at a time): a 100-byte S3 PUT "
        f"{floor['s3_put_p50_ms']:.2f} ms + an Oxia put {floor['oxia_put_p50_ms']:.2f} ms = "
        f"**{floor['floor_ms']:.2f} ms**."
    )
    for kind in KINDS:
        for protocol in PROTOCOLS:
            single = _find(rows, protocol, 1, kind)
            if single is not None:
                text += (
                    f" {protocol}, 1 writer ({kind}): p50 {single['p50_ms']:.2f} ms = "
                    f"{single['p50_ms'] / floor['floor_ms']:.1f}x the floor."
                )
    return text


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| protocol | writers | kind | partitions | appends/s | p50 ms | p99 ms | Oxia reads / append "
        "| Oxia writes / append | S3 requests / append | CAS conflicts / append | Oxia retries / append | errors |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if r["protocol"] == "floor":
            continue
        lines.append(
            f"| {r['protocol']} | {r['writers']} | {r['kind']} | {r['partitions']} | {r['appends_per_s']:.0f} "
            f"| {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['oxia_reads_per_append']:.2f} "
            f"| {r['oxia_writes_per_append']:.2f} | {r['s3_requests_per_append']:.2f} "
            f"| {r['cas_conflicts_per_append']:.2f} | {r['oxia_retries_per_append']:.2f} | {r['errors'] or '-'} |"
        )
    return "\n".join(lines)


def _find(rows: list[dict[str, Any]], protocol: str, writers: int, kind: str) -> dict[str, Any] | None:
    for r in rows:
        if r["protocol"] == "floor":
            continue
        if (r["protocol"], r["writers"], r["kind"], r["partitions"]) == (protocol, writers, kind, 1):
            return r
    return None


def targets(rows: list[dict[str, Any]]) -> str:
    """The issue's targets, from rows of the same run (one partition, per kind of writer)."""
    lines = [
        "| kind | sequential / CAS appends/s at 32 writers (target >= 10) "
        "| sequential p99 at 32 / p50 at 1 writer (target <= 3) | sequential Oxia writes / append (target <= 1) |",
        "|---|---:|---:|---:|",
    ]
    for kind in KINDS:
        seq, cas = _find(rows, "sequential", TARGET_WRITERS, kind), _find(rows, "cas", TARGET_WRITERS, kind)
        single = _find(rows, "sequential", 1, kind)
        if seq is None or cas is None or single is None:
            continue
        speedup = seq["appends_per_s"] / cas["appends_per_s"] if cas["appends_per_s"] else float("inf")
        tail = seq["p99_ms"] / single["p50_ms"] if single["p50_ms"] else float("nan")
        sequential = [r for r in rows if r["protocol"] == "sequential" and r["kind"] == kind]
        writes = max(r["oxia_writes_per_append"] for r in sequential)
        lines.append(
            f"| {kind} | {speedup:.1f} ({'met' if speedup >= 10 else 'not met'}) "
            f"| {tail:.2f} ({'met' if tail <= 3 else 'not met'}) "
            f"| {writes:.2f} ({'met' if writes <= 1 else 'not met'}) |"
        )
    return "\n".join(lines)


def report(rows: list[dict[str, Any]]) -> str:
    floor = floor_report(rows)
    return (
        (floor + "\n\n" if floor else "")
        + table(rows)
        + "\n\nTargets (docs/SEQUENTIAL_APPEND.md), from the rows above:\n\n"
        + targets(rows)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--protocols", nargs="+", choices=PROTOCOLS, default=list(PROTOCOLS))
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    return print_rows(
        lambda: run(args.protocols, args.writers, args.kinds, args.partitions, seconds=args.seconds, runs=args.runs),
        report,
        as_json=args.json,
    )


if __name__ == "__main__":
    sys.exit(main())
