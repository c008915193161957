"""Offset-for-timestamp benchmark: what one lookup costs on a partition with many index entries.

Two partitions get ``--entries`` index entries each (default 100,000), one record each, timestamps
one second apart, in shared WAL blobs of 1,000 batches (one S3 PUT each):

* *WAL*: a sequential partition the writer appended to, one sequential put per batch, never
  compacted: the lookup reads index entries forward from the log start (pages of 16, 64, 256, then
  1,024), so its cost grows with the entries before the answer. This is the worst case: compaction
  keeps the uncompacted tail short.
* *compacted*: a CAS partition whose entries are all COMPACTED, written directly the way compaction
  leaves them (each with its time span and ``log_max_timestamp_ms``; the compaction cursor past them),
  pointing at the same slices. The lookup bisects them: about log2(entries) reads.

``LogReader.offset_for_timestamp`` is asked for times near the start, the middle and the end of the
log, past its end, and for ``earliest`` / ``latest``. Each row is the median time of ``--runs``
lookups and the operations of one: Oxia reads and S3 GETs (at most one batch).

    .venv/bin/python bench/timestamps.py [--entries 100000] [--runs 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `bench` importable
    sys.path.insert(0, str(ROOT))

from bench.stack import READ_OPS, S3_GET_OPS, local_stack, stats_diff  # noqa: E402
from llog.config import OxiaConfig  # noqa: E402
from llog.format.codec import Record  # noqa: E402
from llog.format.keys import PartitionKeys  # noqa: E402
from llog.format.kv.compaction import CompactionCursor  # noqa: E402
from llog.format.kv.control import AppendProtocol  # noqa: E402
from llog.format.kv.index import EntryType, IndexedBatch, IndexEntry  # noqa: E402
from llog.protocol.append import LogWriter, SharedAppendGroup  # noqa: E402
from llog.protocol.metadata import PartitionMetadata  # noqa: E402
from llog.protocol.read import EARLIEST, LATEST, LogReader  # noqa: E402
from llog.store.metrics import OperationCounters  # noqa: E402
from llog.store.oxia import OxiaStore  # noqa: E402
from llog.store.s3 import BlobStore  # noqa: E402
from llog.store.storage import Storage  # noqa: E402

BUCKET = "llog-bench"
TOPIC = "timed"
WAL_PARTITION, COMPACTED_PARTITION = 0, 1
BATCHES_PER_BLOB = 1000
BUILD_THREADS = 8
BASE_MS = 1_795_000_000_000
STEP_MS = 1000


def build_wal(storage: Storage, entries: int) -> list[IndexedBatch]:
    """``entries`` one-record batches appended to the WAL partition, timestamps ``STEP_MS`` apart."""
    writer = LogWriter(storage)
    writer.initialize_partition(TOPIC, WAL_PARTITION)
    for first in range(0, entries, BATCHES_PER_BLOB):
        groups = [SharedAppendGroup(TOPIC, WAL_PARTITION, [Record(b"x" * 100, timestamp_ms=BASE_MS + i * STEP_MS)])
                  for i in range(first, min(first + BATCHES_PER_BLOB, entries))]  # fmt: skip
        failed = [r for r in writer.append_shared(groups) if not r.ok]
        if failed:
            raise RuntimeError(f"building the partition failed: {failed[0].error}")
    reader = LogReader(storage)
    return list(reader.batches(reader.partition_info(TOPIC, WAL_PARTITION), 1, page=1024))


def build_compacted(storage: Storage, batches: list[IndexedBatch]) -> None:
    """The compacted partition: one COMPACTED entry per batch, as compacting one batch per run leaves it."""
    meta = PartitionMetadata(storage.oxia, PartitionKeys(TOPIC, COMPACTED_PARTITION, storage.root))
    meta.create(AppendProtocol.CAS)

    def create(batch: IndexedBatch) -> None:
        ref = batch.entry.ref
        if ref.times is None:
            raise RuntimeError(f"{batch} has no time span")
        # Timestamps grow with offsets here, so the greatest one so far is the batch's own.
        entry = IndexEntry(EntryType.COMPACTED, 1, ref, batch.entry.created_at_ms, data_bytes=ref.byte_length,
                           log_max_timestamp_ms=ref.times.max_ms)  # fmt: skip
        meta.create_index_entry(batch.end_offset, entry)

    with ThreadPoolExecutor(BUILD_THREADS) as pool:
        list(pool.map(create, batches))
    control = meta.control()
    meta.replace_control(control.record.with_changes(sequence_counter=len(batches) + 1), control.version_id)
    meta.replace_cursor(CompactionCursor(len(batches) + 1), meta.versioned_cursor().version_id)


def entries_before(target: int | str, expected: int | None, entries: int) -> int:
    """The index entries before a time lookup's answer (``earliest``, ``latest``: none)."""
    if target in (EARLIEST, LATEST):
        return 0
    return entries if expected is None else expected - 1


def measure(storage: Storage, oxia: OperationCounters, s3: OperationCounters, partition: int, entries: int,
            runs: int) -> list[dict[str, Any]]:  # fmt: skip
    reader = LogReader(storage)
    queries: list[tuple[str, int | str, int | None]] = [
        ("first 0.1%", BASE_MS + entries // 1000 * STEP_MS, entries // 1000 + 1),
        ("middle", BASE_MS + entries // 2 * STEP_MS, entries // 2 + 1),
        ("last 0.1%", BASE_MS + (entries - entries // 1000 - 1) * STEP_MS, entries - entries // 1000),
        ("after the end", BASE_MS + entries * STEP_MS, None),
        (EARLIEST, EARLIEST, 1),
        (LATEST, LATEST, entries + 1),
    ]
    rows = []
    for name, target, expected in queries:
        seconds = []
        for _ in range(runs):
            oxia_before, s3_before = oxia.snapshot(), s3.snapshot()
            started = time.perf_counter()
            found = reader.offset_for_timestamp(TOPIC, partition, target)
            seconds.append(time.perf_counter() - started)
            oxia_ops = stats_diff(oxia_before, oxia.snapshot())
            s3_ops = stats_diff(s3_before, s3.snapshot())
        if found.offset != expected:
            raise AssertionError(f"{name}: found offset {found.offset}, expected {expected}")
        rows.append({
            "index": "WAL" if partition == WAL_PARTITION else "compacted",
            "query": name,
            "offset": found.offset,
            "entries_before": entries_before(target, expected, entries),
            "seconds": statistics.median(seconds),
            "oxia_reads": sum(s.calls for op, s in oxia_ops.items() if op in READ_OPS),
            "oxia_reads_by_kind": {op: s.calls for op, s in oxia_ops.items() if s.calls},
            "s3_gets": sum(s.calls for op, s in s3_ops.items() if op in S3_GET_OPS),
        })  # fmt: skip
    return rows


def run(entries: int = 100_000, *, runs: int = 5) -> dict[str, Any]:
    with local_stack(BUCKET, fsync=False) as (address, s3_config):
        oxia_counters, s3_counters = OperationCounters(), OperationCounters()
        with OxiaStore(OxiaConfig(address), counters=oxia_counters) as oxia:
            storage = Storage(oxia, BlobStore(s3_config, counters=s3_counters), BUCKET,
                              f"bench-timestamps-{uuid.uuid4().hex[:8]}")  # fmt: skip
            started = time.perf_counter()
            build_compacted(storage, build_wal(storage, entries))
            build_s = time.perf_counter() - started
            rows = [row for partition in (WAL_PARTITION, COMPACTED_PARTITION)
                    for row in measure(storage, oxia_counters, s3_counters, partition, entries, runs)]  # fmt: skip
    return {"entries": entries, "runs": runs, "build_s": build_s, "rows": rows}


def table(result: dict[str, Any]) -> str:
    lines = [
        f"{result['entries']:,} index entries per partition (one record each); medians of {result['runs']} "
        f"lookups; building both took {result['build_s']:.0f} s.\n",
        "| index | query | offset found | entries before it | time ms | Oxia reads | S3 GETs | Oxia reads by kind |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in result["rows"]:
        kinds = ", ".join(f"{op} {n}" for op, n in sorted(r["oxia_reads_by_kind"].items()))
        offset = "none" if r["offset"] is None else f"{r['offset']:,}"
        lines.append(
            f"| {r['index']} | {r['query']} | {offset} | {r['entries_before']:,} | {r['seconds'] * 1000:.1f} "
            f"| {r['oxia_reads']} | {r['s3_gets']} | {kinds} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.entries, runs=args.runs)
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
