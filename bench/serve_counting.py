"""What a scenario of the HTTP benchmark (bench/serve.py) cost: llog serve's operation counts from
``/metrics``, the means of its flushes, and where the machine's CPU went (``/proc``)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bench.serve_processes import Service, process_stat
from bench.stack import WRITE_OPS


def op_counts(metrics: Mapping[str, Any]) -> dict[str, float]:
    """S3 PUTs (their bytes and seconds), Oxia writes and the batcher's flushes so far, from ``/metrics``."""
    put = metrics["s3"].get("put", {})
    writes = [v for op, v in metrics["oxia"].items() if op in WRITE_OPS]
    batcher = metrics["batcher"]
    return {
        "s3_puts": int(put.get("calls", 0)),
        "s3_put_bytes": int(put.get("bytes", 0)),
        "s3_put_seconds": float(put.get("seconds", 0.0)),
        "oxia_writes": sum(int(v["calls"]) for v in writes),
        "oxia_write_seconds": sum(float(v["seconds"]) for v in writes),
        "flushes": int(batcher["flushes"]),
        "flushed_calls": int(batcher["flushed_calls"]),
        "queue_seconds": float(batcher["queue_seconds"]),
        "call_seconds": float(batcher["call_seconds"]),
        "flush_seconds": float(batcher["flush_seconds"]),
    }


def counts_between(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in after}


def flush_breakdown(ops: Mapping[str, float], latency_ms: float | None) -> dict[str, float | None]:
    """Means over a window: of a request, its latency, its wait for its flush, its time in the batcher and the rest
    (HTTP and the event loop at both ends, the kernel); of a flush, its write, its S3 PUT and its Oxia write."""

    def mean_ms(seconds: str, count: str) -> float | None:
        return ops[seconds] * 1000 / ops[count] if ops[count] else None

    batcher_ms = mean_ms("call_seconds", "flushed_calls")
    return {
        "latency_ms": latency_ms,
        "queue_ms": mean_ms("queue_seconds", "flushed_calls"),
        "batcher_ms": batcher_ms,
        "rest_ms": latency_ms - batcher_ms if latency_ms is not None and batcher_ms is not None else None,
        "flush_ms": mean_ms("flush_seconds", "flushes"),
        "s3_put_ms": mean_ms("s3_put_seconds", "s3_puts"),
        "oxia_write_ms": mean_ms("oxia_write_seconds", "oxia_writes"),
    }


class MachineCpu:
    """Where the machine's CPU went over a window (Linux ``/proc``): llog serve, this process, the rest by name.

    The benchmark's clients, llog serve, the S3 server and Oxia share this machine's cores; the split says which
    of them was busy while a scenario ran (``kernel threads``: disk writeback among them). A process that ends
    within the window is not counted.
    """

    def __init__(self, serve: Service, proc: Path = Path("/proc"), clock: Callable[[], float] = time.monotonic) -> None:
        self.serve_pid = serve.pid
        self.proc = proc
        self.clock = clock
        self._start = self._read()

    def _read(self) -> tuple[float, dict[tuple[int, int, str], float], list[int]]:
        processes: dict[tuple[int, int, str], float] = {}  # (pid, start time, name) -> CPU seconds so far
        for entry in self.proc.iterdir():
            stat = process_stat(entry) if entry.name.isdigit() else None
            if stat is not None:
                label = "kernel threads" if stat.kernel_thread else stat.name
                processes[int(entry.name), stat.started, label] = stat.cpu_seconds
        machine = [int(x) for x in (self.proc / "stat").read_text().split("\n", 1)[0].split()[1:]]
        return self.clock(), processes, machine

    def since_start(self, ended_within: Mapping[str, float] | None = None) -> dict[str, Any]:
        """Cores busy on average: the machine's, and per process (``llog serve``, ``load``: this process).

        ``ended_within``: CPU seconds, by label, of processes that ran and ended within the window (gone from
        ``/proc``), such as wrk's (``load``).
        """
        began, before, machine_before = self._start
        ended, after, machine_after = self._read()
        seconds = max(ended - began, 1e-9)
        by_name = {label: cpu / seconds for label, cpu in (ended_within or {}).items()}
        for (pid, started, name), cpu in after.items():
            used = cpu - before.get((pid, started, name), 0.0)
            label = "llog serve" if pid == self.serve_pid else "load" if pid == os.getpid() else name
            by_name[label] = by_name.get(label, 0.0) + used / seconds
        # user nice system idle iowait irq softirq steal (guest time is in user and nice already)
        ticks = [b - a for a, b in zip(machine_before[:8], machine_after[:8], strict=False)]
        idle = ticks[3] + ticks[4]
        cores = os.cpu_count() or 1
        return {"cores": cores, "busy_cores": cores * (1 - idle / max(sum(ticks), 1)),
                "processes": {name: round(c, 3) for name, c in sorted(by_name.items(), key=lambda item: -item[1])
                              if c >= 0.01}}  # fmt: skip
