"""The scale model against a scaled-down real run (issue 40; docs/SCALE.md "The model against a real run").

    PATH=.tools/bin:$PATH .venv/bin/python bench/scale_run.py [--rate 60] [--partitions 20] [--duration 600]
        [--planner-interval 10] [--wal-gc-interval 30] [--gc-interval 120] [--grace 60] [--workers 4]
        [--retention 300] [--sample 15] [--json PATH] [--plot PATH]

On a local Oxia standalone and VersityGW:

1. **Calibrate**: each job's per-operation costs, measured under a root of their own
   (``bench.scale.costs.measure``) beside the run's load (its producer, planner and workers) under another.
2. **Predict**: the scale model (``bench.scale.model``) run with those costs, the run's schedule and the rate
   the producer will offer, before the run starts.
3. **Run** (``bench.scale.run``): produce at the rate for the duration with the jobs on their production code
   paths at the compressed schedule, sampling the WAL blobs in S3, those past the grace and the compaction lag;
   then reconcile every acknowledged record.
4. **Compare**: each sampled quantity's mean over the second half of the run, real against predicted (and
   the model again at the rate achieved), and whether it still grows.

Exit status 0 when the reconciliation is clean, every quantity is flat and within ``--tolerance`` of the
prediction; 1 otherwise; 2 when it could not run here (no Oxia or VersityGW).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `bench` importable
    sys.path.insert(0, str(ROOT))

from bench.scale.costs import measure  # noqa: E402
from bench.scale.model import Costs, Result, Sample, Schedule, Workload, simulate  # noqa: E402
from bench.scale.run import RunResult, RunSettings, as_json, background_load, real_run  # noqa: E402
from bench.stack import local_stack  # noqa: E402
from llog.config import OxiaConfig, S3Config  # noqa: E402
from llog.store.oxia import OxiaStore  # noqa: E402
from llog.store.s3 import BlobStore  # noqa: E402
from llog.store.storage import Storage  # noqa: E402

BUCKET = "llog-scale"
COMPARED = {  # sampled quantity: what it is
    "live_wal": "WAL blobs in S3",
    "gc_backlog": "WAL blobs past the grace (GC's backlog)",
    "compaction_lag": "entries not yet compacted",
}


def compare(real: list[Sample], predicted: Result, at_rate: Result, duration_s: float) -> list[dict[str, Any]]:
    """Per quantity: the real and modelled means over the second half, their ratio, and growth."""
    half = [s for s in real if s.t >= duration_s / 2]
    real_result = Result(predicted.workload, predicted.schedule, predicted.costs, samples=real)
    rows = []
    for name, what in COMPARED.items():
        mean = sum(getattr(s, name) for s in half) / len(half) if half else 0.0
        model = predicted.steady(name)
        rows.append({
            "quantity": name, "what": what, "real": mean, "model": model,
            "model_at_achieved_rate": at_rate.steady(name), "ratio": mean / model if model else float("inf"),
            "real_growing": real_result.growing(name),
            "model_growing": predicted.growing(name),
        })  # fmt: skip
    return rows


def plot(path: Path, real: list[Sample], predicted: Result, settings: RunSettings) -> None:
    """The sampled quantities over time, real (points) against the model (line), one panel each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(COMPARED), 1, figsize=(9, 8), sharex=True)
    for axis, (name, what) in zip(axes, COMPARED.items(), strict=True):
        axis.plot([s.t for s in predicted.samples], [getattr(s, name) for s in predicted.samples],
                  label="model (predicted before the run)", color="tab:blue")  # fmt: skip
        axis.plot([s.t for s in real], [getattr(s, name) for s in real], "o", markersize=4, label="real run",
                  color="tab:orange")  # fmt: skip
        axis.set_ylabel(what, fontsize=9)
        axis.grid(alpha=0.3)
    axes[0].legend(loc="upper left", fontsize=8)
    axes[-1].set_xlabel("seconds since the producer started")
    s = settings.schedule
    figure.suptitle(
        f"{settings.rate:,.0f} produce requests/s over {settings.partitions} partitions; planner every "
        f"{s.planner_interval_s:.0f} s, {s.compaction_concurrency} workers, GC's WAL step every "
        f"{s.wal_gc_interval_s:.0f} s, grace {s.grace_s:.0f} s",
        fontsize=10,
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def report(result: RunResult, costs: Costs, rows: list[dict[str, Any]], tolerance: float) -> str:
    st, s, rec = result.settings, result.settings.schedule, result.reconcile
    lines = [
        f"{st.rate:,.0f} requests/s offered ({result.achieved_rate:,.1f} acknowledged a second, {result.failed} "
        f"failed) of {st.record_bytes} B over {st.partitions} partitions for {st.duration_s:.0f} s; planner every "
        f"{s.planner_interval_s:.0f} s with {s.compaction_concurrency} workers, GC's WAL step every "
        f"{s.wal_gc_interval_s:.0f} s and a full run every {s.gc_interval_s:.0f} s, grace {s.grace_s:.0f} s, "
        f"retention {st.retention_s:.0f} s; a sample every {st.sample_s:.0f} s.",
        "",
        "| quantity (mean of the second half) | real | model | real / model | model at the rate achieved "
        "| growing (real, model) |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        ok = abs(r["ratio"] - 1) <= tolerance
        lines.append(f"| {r['what']} | {r['real']:,.0f} | {r['model']:,.0f} | {r['ratio']:.2f}{'' if ok else ' (!)'} "
                     f"| {r['model_at_achieved_rate']:,.0f} | {r['real_growing']}, {r['model_growing']} |")  # fmt: skip
    jobs = result.jobs
    gc_s = sorted(g["seconds"] for g in jobs.gc_runs)
    lines += [
        "",
        f"Calibrated costs (ms): planner {costs.planner_partition_s * 1000:.1f} per partition; compaction task "
        f"{costs.task_fixed_s * 1000:.1f} + {costs.object_s * 1000:.1f} per object + {costs.entry_s * 1000:.2f} "
        f"per entry; GC run {costs.gc_run_fixed_s * 1000:.0f} + references {costs.gc_reference_s * 1000:.1f} per "
        f"partition, full run {costs.gc_partition_s * 1000:.1f} more per partition; LIST page "
        f"{costs.list_page_s * 1000:.0f}, DeleteObjects {costs.delete_objects_s * 1000:.0f}; a WAL run "
        f"{costs.wal_page_s * 1000:.0f} per 1,000 blobs.",
        f"Jobs: {jobs.planner_runs} planner runs, {jobs.tasks:,} compaction tasks ({jobs.empty_tasks:,} found "
        f"nothing) using {jobs.task_s:,.0f} worker-seconds, {len(gc_s)} GC runs (median "
        f"{gc_s[len(gc_s) // 2] if gc_s else 0:.2f} s, longest {gc_s[-1] if gc_s else 0:.2f} s), "
        f"{len(jobs.errors)} errors.",
        "CPU seconds while producing: " + ", ".join(f"{name} {seconds:,.0f}" for name, seconds in
                                                     sorted(result.cpu_s.items(), key=lambda kv: -kv[1])) + ".",
        f"Reconciliation: {rec['acked']:,} acknowledged, {rec['read']:,} read back, {rec['expired_by_retention']:,} "
        f"removed by retention, {rec['missing']} missing, {rec['wrong']} wrong, {rec['unexpected']} unexpected, "
        f"{rec['verify_problems']} verify problems: {'clean' if rec['clean'] else 'NOT CLEAN'}.",
    ]
    return "\n".join(lines)


def calibrate(address: str, s3: S3Config, settings: RunSettings) -> Costs:
    """``measure`` under its own root beside the run's load under another (its producer at the run's rate, and
    its planner and workers compacting what it sends): the jobs' costs with the CPU, Oxia and S3 the run's
    other jobs will take from them (the servers and the jobs share this machine)."""
    root = f"calibration-{uuid.uuid4().hex[:8]}"
    with background_load(address, s3, BUCKET, f"{root}-load", settings), OxiaStore(OxiaConfig(address)) as oxia:
        return measure(Storage(oxia, BlobStore(s3), BUCKET, root), partitions=settings.partitions)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=60.0, help="produce requests/s offered")
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of produce")
    parser.add_argument("--planner-interval", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=4, help="compaction workers (the queue's concurrency)")
    parser.add_argument("--wal-gc-interval", type=float, default=30.0)
    parser.add_argument("--gc-interval", type=float, default=120.0)
    parser.add_argument("--grace", type=float, default=60.0)
    parser.add_argument("--retention", type=float, default=300.0, help="the topic's retention, seconds")
    parser.add_argument("--sample", type=float, default=7.0, help="seconds between samples")
    parser.add_argument("--tolerance", type=float, default=0.25, help="real / model within 1 +- this")
    parser.add_argument("--json", type=Path, help="write the samples, the prediction and the comparison here")
    parser.add_argument("--plot", type=Path, help="write the PNG here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)  # a pool of 10 for 16 threads: noise
    schedule = Schedule(
        planner_interval_s=args.planner_interval, compaction_concurrency=args.workers,
        wal_gc_interval_s=args.wal_gc_interval, gc_interval_s=args.gc_interval, grace_s=args.grace,
    )  # fmt: skip
    settings = RunSettings(args.rate, args.partitions, args.duration, schedule, sample_s=args.sample,
                           retention_s=args.retention)  # fmt: skip
    try:
        stack = local_stack(BUCKET, fsync=True, s3_server="versitygw")
        address, s3 = stack.__enter__()
    except Exception as exc:
        print(f"Not run here: {exc}", file=sys.stderr)
        return 2
    try:
        costs = calibrate(address, s3, settings)
        workload = Workload(args.rate, args.partitions, args.duration, sample_s=args.sample,
                            sample_phase_s=settings.sample_phase_s)  # the real run's sampling instants
        predicted = simulate(workload, schedule, costs)
        print(f"predicted: {', '.join(f'{n} {predicted.steady(n):,.0f}' for n in COMPARED)}", file=sys.stderr)
        result = real_run(address, s3, BUCKET, settings, progress=lambda line: print(line, file=sys.stderr))
    finally:
        stack.__exit__(None, None, None)
    at_rate = simulate(replace(workload, rate=result.achieved_rate), schedule, costs)
    rows = compare(result.samples, predicted, at_rate, args.duration)
    print(report(result, costs, rows, args.tolerance))
    if args.json:
        args.json.write_text(json.dumps({"run": as_json(result), "costs": costs.__dict__, "comparison": rows,
                                         "model": [s.__dict__ for s in predicted.samples]}, indent=1))  # fmt: skip
    if args.plot:
        plot(args.plot, result.samples, predicted, settings)
    agreed = all(abs(r["ratio"] - 1) <= args.tolerance and not r["real_growing"] for r in rows)
    return 0 if result.reconcile["clean"] and agreed else 1


if __name__ == "__main__":
    sys.exit(main())
