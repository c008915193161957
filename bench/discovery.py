"""Discovery benchmark: what the compaction planner, GC and retention cost per partition as the index grows.

1,000 partitions (half CAS, half sequential) get ``--entries`` index entries each, level by level (the
default 10 then 100: a tenfold growth). The entries are real Oxia state written the way the writers write
it, without the S3 blobs they would name: a CAS partition gets create-only ``index/{end}`` puts and one
compare-and-set of ``meta/control`` to the new counter, a sequential partition one sequential put per
entry. Nothing is compacted, so every partition's compaction lag is its length. The Oxia standalone runs
without fsync (only setup writes; every measured run except retention's size limit only reads).

At each level, counted on the store's ``OperationCounters`` and timed (medians of ``--runs`` runs):

* *planner*: one ``plan_compaction`` over every partition (the registry listing included);
* *gc, keep everything*: one ``GarbageCollector.collect`` on the unchanged log, no retention policy;
* *gc, age limit*: the same with a 7-day age limit (nothing old enough): retention reads up to the first
  entry it keeps;
* *retention, size limit*: ``Retention.enforce`` on every partition with a limit above their size: a size
  limit needs the size of everything kept, so it reads the whole index.

The issue's targets: planner Oxia operations per partition <= 2, and planner time flat (ratio of the top
level to the bottom one ~1) as the index grows tenfold.

Setting up costs one Oxia put per entry, about 1,000 puts/s through the Python client on 2 cores: the
default levels (1,000 x 100 entries at the top) take ~2 minutes; ``--entries 100 1000`` (the issue's
1,000 x 1,000) takes ~15.

    .venv/bin/python bench/discovery.py [--partitions 1000] [--entries 10 100] [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `bench` importable
    sys.path.insert(0, str(ROOT))

from bench.stack import READ_OPS, WRITE_OPS, local_stack, print_rows, stats_diff  # noqa: E402
from llog.config import GcConfig, OxiaConfig, RetentionConfig, RetentionPolicy  # noqa: E402
from llog.format.keys import PartitionKeys, S3Location, new_object_id, shared_wal_object_key  # noqa: E402
from llog.format.kv.control import AppendProtocol  # noqa: E402
from llog.format.kv.document import DataRef  # noqa: E402
from llog.format.kv.index import EntryType, IndexEntry  # noqa: E402
from llog.protocol.catalog import LogCatalog  # noqa: E402
from llog.protocol.gc import GarbageCollector  # noqa: E402
from llog.protocol.metadata import APPEND_DELTAS_FENCES, PartitionMetadata  # noqa: E402
from llog.protocol.retention import Retention  # noqa: E402
from llog.service.compaction import plan_compaction  # noqa: E402
from llog.store.metrics import OperationCounters  # noqa: E402
from llog.store.oxia import OxiaStore  # noqa: E402
from llog.store.s3 import BlobStore  # noqa: E402
from llog.store.storage import Storage  # noqa: E402

BUCKET = "llog-bench"
TOPICS = {AppendProtocol.CAS: "cas", AppendProtocol.SEQUENTIAL: "seq"}
SEQUENCE_GENERATION = 1  # a new sequential partition appends into generation 1
BUILD_THREADS = 8
WEEK_MS = 7 * 86_400_000
TARGET_OPS_PER_PARTITION = 2


class Log:
    """The partitions under one root, and how far each one's index has been filled."""

    def __init__(self, oxia: OxiaStore, root: str, partitions: int) -> None:
        self.oxia = oxia
        self.root = root
        self.partitions = [
            PartitionMetadata(oxia, PartitionKeys(TOPICS[protocol], p, root))
            for protocol in TOPICS
            for p in range(partitions // len(TOPICS))
        ]
        self.entries = 0
        # Every entry names a slice of one shared WAL blob (never written: nothing here reads S3 data).
        self.data_key = S3Location(BUCKET, shared_wal_object_key(root)).uri

    def create(self) -> None:
        with ThreadPoolExecutor(BUILD_THREADS) as pool:
            list(pool.map(lambda meta: meta.create(self._protocol(meta)), self.partitions))

    def fill(self, entries: int) -> float:
        """Append index entries until every partition has ``entries``; the seconds it took."""
        start = time.perf_counter()
        with ThreadPoolExecutor(BUILD_THREADS) as pool:
            list(pool.map(lambda meta: self._fill(meta, self.entries + 1, entries), self.partitions))
        self.entries = entries
        return time.perf_counter() - start

    @staticmethod
    def _protocol(meta: PartitionMetadata) -> AppendProtocol:
        return next(p for p, topic in TOPICS.items() if topic == meta.keys.topic)

    def _entry(self, end: int) -> IndexEntry:
        ref = DataRef(self.data_key, byte_offset=100 * end, byte_length=100)
        return IndexEntry(EntryType.WAL, 1, ref, int(time.time() * 1000), append_id=new_object_id())

    def _fill(self, meta: PartitionMetadata, first: int, last: int) -> None:
        if self._protocol(meta) is AppendProtocol.SEQUENTIAL:
            for end in range(first, last + 1):  # what SequentialAppender.commit writes: one sequential put
                meta.append_to_sequence(SEQUENCE_GENERATION, self._entry(end).encode(), (1, APPEND_DELTAS_FENCES))
            return
        for end in range(first, last + 1):  # the CAS append's materialized index entries ...
            meta.create_index_entry(end, self._entry(end))
        control = meta.control()  # ... and the counter its reservations moved
        meta.replace_control(control.record.with_changes(sequence_counter=last + 1), control.version_id)


def measure(what: str, partitions: int, oxia: OperationCounters, s3: OperationCounters, runs: int,
            action: Callable[[], object]) -> dict[str, Any]:  # fmt: skip
    """``action`` run ``runs`` times: its median time and its operations per partition (the last run's)."""
    seconds = []
    oxia_ops: dict[str, int] = {}
    s3_ops: dict[str, int] = {}
    for _ in range(runs):
        oxia_before, s3_before = oxia.snapshot(), s3.snapshot()
        start = time.perf_counter()
        action()
        seconds.append(time.perf_counter() - start)
        oxia_ops = {op: s.calls for op, s in stats_diff(oxia_before, oxia.snapshot()).items() if s.calls}
        s3_ops = {op: s.calls for op, s in stats_diff(s3_before, s3.snapshot()).items() if s.calls}
    return {
        "what": what,
        "seconds": statistics.median(seconds),
        "oxia_ops_per_partition": sum(oxia_ops.values()) / partitions,
        "oxia_reads_per_partition": sum(n for op, n in oxia_ops.items() if op in READ_OPS) / partitions,
        "oxia_writes_per_partition": sum(n for op, n in oxia_ops.items() if op in WRITE_OPS) / partitions,
        "oxia_ops": oxia_ops,
        "s3_requests_per_partition": sum(s3_ops.values()) / partitions,
    }


def measure_level(log: Log, storage: Storage, oxia: OperationCounters, s3: OperationCounters, runs: int
                  ) -> list[dict[str, Any]]:  # fmt: skip
    partitions = len(log.partitions)
    catalog = LogCatalog(storage.oxia, root=storage.root)
    plan_seen = []

    def plan() -> None:
        result = plan_compaction(catalog, min_lag=1, max_delay_ms=0)
        plan_seen.append((result.partitions_seen, len(result.tasks), frozenset(result.lag_by_partition.values())))

    def collect(policy: RetentionPolicy) -> Callable[[], object]:
        gc = GarbageCollector(storage, config=GcConfig(retention=RetentionConfig(policy)))
        return lambda: _no_errors(gc.collect().errors)

    retention = Retention(storage, config=RetentionConfig(RetentionPolicy(max_bytes=2**62)))
    rows = [
        measure("planner", partitions, oxia, s3, runs, plan),
        measure("gc, keep everything", partitions, oxia, s3, runs, collect(RetentionPolicy())),
        measure("gc, age limit", partitions, oxia, s3, runs, collect(RetentionPolicy(max_age_ms=WEEK_MS))),
        measure("retention, size limit", partitions, oxia, s3, runs,
                lambda: [retention.enforce_partition(m.keys) for m in log.partitions]),
    ]  # fmt: skip
    if set(plan_seen) != {(partitions, partitions, frozenset({log.entries}))}:
        raise AssertionError(f"the planner saw {plan_seen[-1]}, not {partitions} partitions of lag {log.entries}")
    for row in rows:
        row["entries"] = log.entries
        row["partitions"] = partitions
    return rows


def _no_errors(errors: list[str]) -> None:
    if errors:
        raise AssertionError(f"gc reported errors: {errors[:3]}")


def run(partitions: int = 1000, entries: Sequence[int] = (10, 100), *, runs: int = 3) -> list[dict[str, Any]]:
    """Every level against one Oxia standalone and one moto server; raises if Oxia cannot be had."""
    rows = []
    with local_stack(BUCKET, fsync=False) as (address, s3_config):
        oxia_counters, s3_counters = OperationCounters(), OperationCounters()
        with OxiaStore(OxiaConfig(address), counters=oxia_counters) as oxia:
            storage = Storage(oxia, BlobStore(s3_config, counters=s3_counters), BUCKET,
                              f"bench-discovery-{uuid.uuid4().hex[:8]}")  # fmt: skip
            log = Log(oxia, storage.root, partitions)
            log.create()
            for level in sorted(entries):
                build_s = log.fill(level)
                level_rows = measure_level(log, storage, oxia_counters, s3_counters, runs)
                for row in level_rows:
                    row["build_s"] = build_s
                rows.extend(level_rows)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| entries / partition | run | time s | Oxia ops / partition | Oxia reads / partition "
        "| Oxia writes / partition | S3 requests / partition | Oxia ops by kind |",
        "|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        kinds = ", ".join(f"{op} {n}" for op, n in sorted(r["oxia_ops"].items()))
        lines.append(
            f"| {r['entries']:,} | {r['what']} | {r['seconds']:.2f} | {r['oxia_ops_per_partition']:.3f} "
            f"| {r['oxia_reads_per_partition']:.3f} | {r['oxia_writes_per_partition']:.3f} "
            f"| {r['s3_requests_per_partition']:.3f} | {kinds} |"
        )
    return "\n".join(lines)


def targets(rows: list[dict[str, Any]]) -> str:
    """The issue's targets, from the planner rows of the lowest and highest level."""
    planner = sorted((r for r in rows if r["what"] == "planner"), key=lambda r: r["entries"])
    if not planner:
        return ""
    low, high = planner[0], planner[-1]
    ops = max(r["oxia_ops_per_partition"] for r in planner)
    ratio = high["seconds"] / low["seconds"] if low["seconds"] else float("nan")
    growth = high["entries"] / low["entries"]
    return (
        f"Planner Oxia operations per partition (registry listing included): {ops:.3f} "
        f"(target <= {TARGET_OPS_PER_PARTITION}: {'met' if ops <= TARGET_OPS_PER_PARTITION else 'not met'}). "
        f"Planner time at {high['entries']:,} entries per partition / at {low['entries']:,} "
        f"(index {growth:.0f}x larger): {ratio:.2f} (target: flat, about 1)."
    )


def report(rows: list[dict[str, Any]]) -> str:
    first = rows[0] if rows else {"partitions": 0}
    builds = ", ".join(sorted({f"{r['entries']:,} entries in {r['build_s']:.0f} s" for r in rows}))
    return (
        f"{first['partitions']:,} partitions; filled to {builds}.\n\n" + table(rows) + "\n\n" + targets(rows)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--entries", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    return print_rows(lambda: run(args.partitions, args.entries, runs=args.runs), report, as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
