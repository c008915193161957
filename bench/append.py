"""Append benchmark: the seed protocol on one partition with 1, 8 and 32 concurrent writers.

Each writer is a thread with its own ``LogWriter`` and Oxia client (as each
Lambda environment has its own), appending single-record batches to one
partition against a local Oxia standalone and a moto S3 server. Reports
appends/s, p50/p99 latency, Oxia operations per partition-append (by kind)
and S3 operations per append, each the median over ``--runs`` runs.

    .venv/bin/python bench/append.py [--writers 1 8 32] [--seconds 5] [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from llog.blob_store import BlobStore
from llog.config import OxiaConfig
from llog.devstack import MotoS3, OxiaProcess, find_oxia_binary
from llog.metrics import OperationCounters, OperationStats
from llog.oxia_store import OxiaStore
from llog.writer import LogWriter, SharedAppendGroup

ROOT = Path(__file__).resolve().parents[1]

BUCKET = "llog-bench"
PAYLOAD = b"x" * 100


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def one_run(oxia_address: str, s3: MotoS3, writers: int, seconds: float) -> dict[str, Any]:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    oxia_counters, s3_counters = OperationCounters(), OperationCounters()
    s3_config = s3.config(BUCKET)
    pool = [
        LogWriter(OxiaStore(OxiaConfig(oxia_address), counters=oxia_counters),
                  BlobStore(s3_config, counters=s3_counters), bucket=BUCKET)
        for _ in range(writers)
    ]
    pool[0].initialize_partition(topic, 0)
    latencies: list[list[float]] = [[] for _ in range(writers)]
    errors: Counter[str] = Counter()
    start_gate = threading.Barrier(writers + 1)
    deadline = 0.0

    def work(i: int) -> None:
        start_gate.wait()
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            (result,) = pool[i].append_shared([SharedAppendGroup(topic, 0, [PAYLOAD])])
            if result.ok:
                latencies[i].append(time.perf_counter() - t0)
            else:
                errors[result.error_type or "?"] += 1

    threads = [threading.Thread(target=work, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    oxia_before, s3_before = oxia_counters.snapshot(), s3_counters.snapshot()
    began = time.perf_counter()
    deadline = began + seconds
    start_gate.wait()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    for w in pool:
        w.close()

    all_latencies = [x for per in latencies for x in per]
    appends = len(all_latencies)
    oxia_ops = _diff(oxia_before, oxia_counters.snapshot())
    s3_ops = _diff(s3_before, s3_counters.snapshot())
    return {
        "writers": writers,
        "appends": appends,
        "appends_per_s": appends / elapsed,
        "p50_ms": percentile(all_latencies, 0.50) * 1000 if appends else float("nan"),
        "p99_ms": percentile(all_latencies, 0.99) * 1000 if appends else float("nan"),
        "oxia_ops_per_append": sum(oxia_ops.values()) / max(appends, 1),
        "oxia_ops_by_kind": {k: v / max(appends, 1) for k, v in sorted(oxia_ops.items())},
        "s3_ops_per_append": sum(s3_ops.values()) / max(appends, 1),
        "errors": dict(errors),
    }


def _diff(before: dict[str, OperationStats], after: dict[str, OperationStats]) -> dict[str, int]:
    return {op: after[op].calls - (before[op].calls if op in before else 0) for op in after}


def run(writer_counts: list[int], seconds: float, runs: int) -> list[dict[str, Any]]:
    binary = find_oxia_binary([ROOT / ".tools" / "bin"])
    if binary is None:
        reason_file = ROOT / ".tools" / "oxia-unavailable"
        raise RuntimeError(reason_file.read_text().strip() if reason_file.exists() else "no Oxia binary")
    with tempfile.TemporaryDirectory() as tmp:
        oxia = OxiaProcess(binary, Path(tmp), fsync=True)
        s3 = MotoS3()
        oxia.start()
        s3.start()
        try:
            s3.create_bucket(BUCKET)
            rows = []
            for n in writer_counts:
                samples = [one_run(oxia.address, s3, n, seconds) for _ in range(runs)]
                rows.append(_median_row(samples))
            return rows
        finally:
            s3.stop()
            oxia.stop()


def _median_row(samples: list[dict[str, Any]]) -> dict[str, Any]:
    row = dict(samples[0])
    for key in ("appends_per_s", "p50_ms", "p99_ms", "oxia_ops_per_append", "s3_ops_per_append"):
        row[key] = statistics.median(s[key] for s in samples)
    row["appends"] = sum(s["appends"] for s in samples)
    row["runs"] = len(samples)
    errors: Counter[str] = Counter()
    for s in samples:
        errors.update(s["errors"])
    row["errors"] = dict(errors)
    return row


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| writers | appends/s | p50 ms | p99 ms | Oxia ops / partition-append | S3 ops / append | errors |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        kinds = ", ".join(f"{k} {v:.2f}" for k, v in r["oxia_ops_by_kind"].items())
        lines.append(
            f"| {r['writers']} | {r['appends_per_s']:.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
            f"{r['oxia_ops_per_append']:.2f} ({kinds}) | {r['s3_ops_per_append']:.2f} | {r['errors'] or '-'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = run(args.writers, args.seconds, args.runs)
    print(json.dumps(rows, indent=2) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
