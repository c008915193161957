"""Idempotent produce benchmark: what exactly-once costs per append, against plain appends in the same run.

One writer appends one 100-byte record at a time to one partition, ``--appends`` times per mode, on a local
Oxia standalone (fsync on) and moto S3: plain appends, idempotent appends (``producer_id``, epoch and the
next sequence: docs/IDEMPOTENCE.md), and retries of an already-appended idempotent batch (the duplicate a
lost answer's retry finds). Both append protocols. Oxia reads and writes are counted on the store's
``OperationCounters``; latencies are medians and p99 of the appends.

    .venv/bin/python bench/idempotent.py [--appends 200] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.stack import READ_OPS, WRITE_OPS, local_stack, percentile, print_rows, stats_diff  # noqa: E402
from llog.config import OxiaConfig, WriterConfig  # noqa: E402
from llog.format.kv.control import AppendProtocol  # noqa: E402
from llog.protocol.append import LogWriter, SharedAppendGroup  # noqa: E402
from llog.store.metrics import OperationCounters  # noqa: E402
from llog.store.oxia import OxiaStore  # noqa: E402
from llog.store.s3 import BlobStore  # noqa: E402
from llog.store.storage import Storage  # noqa: E402

BUCKET = "llog-bench-idempotent"
MODES = ("plain", "idempotent", "duplicate retry")


def _measure(writer: LogWriter, oxia: OperationCounters, groups: list[SharedAppendGroup]) -> dict[str, Any]:
    before = oxia.snapshot()
    latencies = []
    for group in groups:
        t0 = time.perf_counter()
        (result,) = writer.append_shared([group])
        latencies.append((time.perf_counter() - t0) * 1000)
        if not result.ok:
            raise RuntimeError(f"append failed: {result.error_type}: {result.error}")
    ops = stats_diff(before, oxia.snapshot())
    n = len(groups)
    return {
        "appends": n,
        "p50_ms": statistics.median(latencies),
        "p99_ms": percentile(latencies, 0.99),
        "oxia_reads": sum(s.calls for op, s in ops.items() if op in READ_OPS) / n,
        "oxia_writes": sum(s.calls for op, s in ops.items() if op in WRITE_OPS) / n,
    }


def run(appends: int = 200) -> list[dict[str, Any]]:
    rows = []
    with local_stack(BUCKET) as (address, s3):
        for protocol in AppendProtocol:
            oxia_counters = OperationCounters()
            with OxiaStore(OxiaConfig(address), counters=oxia_counters) as oxia:
                storage = Storage(oxia, BlobStore(s3), BUCKET, f"bench-{uuid.uuid4().hex[:8]}")
                writer = LogWriter(storage, config=WriterConfig(append_protocol=protocol))
                topic = "idempotent"
                writer.initialize_partition(topic, 0)
                identity = writer.producers.issue()
                pid, epoch = identity.producer_id, identity.epoch
                warm = [SharedAppendGroup(topic, 0, [b"w" * 100])] * 10
                _measure(writer, oxia_counters, warm)
                _measure(writer, oxia_counters, [SharedAppendGroup(topic, 0, [b"w" * 100], pid, epoch, i)
                                                 for i in range(10)])  # fmt: skip
                plain = [SharedAppendGroup(topic, 0, [b"x" * 100])] * appends
                idempotent = [SharedAppendGroup(topic, 0, [b"x" * 100], pid, epoch, 10 + i) for i in range(appends)]
                # A retry of the last batch, as after a lost answer: each finds it among the remembered five.
                retries = [idempotent[-1]] * appends
                for mode, groups in zip(MODES, (plain, idempotent, retries), strict=True):
                    rows.append({"protocol": protocol.value, "mode": mode, **_measure(writer, oxia_counters, groups)})
                writer.close()
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| protocol | mode | appends | p50 ms | p99 ms | Oxia reads/append | Oxia writes/append | p50 / plain p50 |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    plain = {r["protocol"]: r["p50_ms"] for r in rows if r["mode"] == "plain"}
    for r in rows:
        lines.append(
            f"| {r['protocol']} | {r['mode']} | {r['appends']} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
            f"{r['oxia_reads']:.2f} | {r['oxia_writes']:.2f} | {r['p50_ms'] / plain[r['protocol']]:.2f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    args = parser.parse_args()
    print_rows(lambda: run(args.appends), report, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
