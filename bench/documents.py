"""Document codec benchmark: encode and decode of the JSON documents llog stores in Oxia, one row per kind.

The hot ones come first: an index entry (read for every fetch that misses the tail cache, written per
append), ``meta/control`` (read and written by every CAS append). Each figure is the median over
``--repeats`` timed runs of ``--iterations`` operations each, garbage collector paused, per operation in µs.

    .venv/bin/python bench/documents.py [--repeats 7] [--iterations 20000] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from llog.format.codec import ENCODING
from llog.format.kv.compaction import CompactionRecord, CompactionState
from llog.format.kv.control import AppendProtocol, ControlRecord, Generation, LogState, PendingAppend
from llog.format.kv.document import DataRef, TimeSpan
from llog.format.kv.index import EntryType, IndexEntry, ProducerTag, decode_sequence_value
from llog.format.kv.producers import InFlightClaim, ProducerBatch, ProducerState

NOW_MS = 1_760_000_000_000
_SHARED = DataRef(
    "s3://bucket/llog/wal-shared/0190c8a2-7b3e-7c41-9a52-000000000001", ENCODING, 177, 104, TimeSpan(NOW_MS, NOW_MS)
)
_COMPACTED = DataRef("s3://bucket/llog/orders/0190c8a2/partitions/0/data/compacted/0190c8a2", times=TimeSpan(1, 9))
_TAG = ProducerTag("0190c8a2-7b3e-7c41-9a52-3f6d1e2b4c5d", 2, 10, 12)


def documents() -> list[tuple[str, Any, Callable[[bytes], Any]]]:
    """``(name, value, decode)`` of each document measured."""
    return [
        ("index entry (WAL, shared blob)", IndexEntry(EntryType.WAL, 2, _SHARED, NOW_MS, "a-1"), IndexEntry.decode),
        (
            "index entry (COMPACTED)",
            IndexEntry(EntryType.COMPACTED, 1000, _COMPACTED, NOW_MS, data_bytes=104_857, log_max_timestamp_ms=9),
            IndexEntry.decode,
        ),
        (
            "sequence entry (WAL, producer tag)",
            IndexEntry(EntryType.WAL, 2, _SHARED, NOW_MS, "a-1", producer=_TAG),
            decode_sequence_value,
        ),
        (
            "meta/control (CAS, pending)",
            ControlRecord(LogState.OPEN, 12, PendingAppend("a-1", 10, 11, 2, _SHARED, NOW_MS)),
            ControlRecord.decode,
        ),
        (
            "meta/control (sequential)",
            ControlRecord(
                LogState.OPEN, 40, None, 5, AppendProtocol.SEQUENTIAL, (Generation(1, 0, 20), Generation(2, 20))
            ),
            ControlRecord.decode,
        ),
        (
            "producer state",
            ProducerState(
                2,
                tuple(ProducerBatch(s, s + 1, 4 * s, 4 * s + 1, s) for s in range(5)),
                InFlightClaim("c", 13, 14, 100, 200, 7, 5),
                NOW_MS,
                NOW_MS,
            ),
            ProducerState.decode,
        ),
        (
            "meta/compaction",
            CompactionRecord(
                "c-1", CompactionState.DELETING_OLD, 1, 1000, 1000, _COMPACTED.data_key, NOW_MS, ENCODING, 991,
                104_857, TimeSpan(1, 9), 9,
            ),
            CompactionRecord.decode,
        ),
    ]  # fmt: skip


def _per_op_us(fn: Callable[[], object], iterations: int) -> float:
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(iterations):
            fn()
        return (time.perf_counter() - start) / iterations * 1e6
    finally:
        gc.enable()


def run(repeats: int = 7, iterations: int = 20_000) -> list[dict[str, Any]]:
    rows = []
    for name, value, decode in documents():
        raw = value.encode()
        if decode(raw) != value:
            raise AssertionError(f"{name} does not round-trip")
        samples: dict[str, list[float]] = {"encode": [], "decode": []}
        ops: dict[str, Callable[[], object]] = {"encode": value.encode, "decode": partial(decode, raw)}
        for fn in ops.values():
            _per_op_us(fn, iterations // 10)  # warm-up
        for _ in range(repeats):  # interleaved, so drift affects both alike
            for op, fn in ops.items():
                samples[op].append(_per_op_us(fn, iterations))
        for op, times in samples.items():
            rows.append({"document": name, "bytes": len(raw), "operation": op, "median_us": statistics.median(times)})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| document | bytes | operation | median µs |", "|---|---:|---|---:|"]
    lines += [f"| {r['document']} | {r['bytes']} | {r['operation']} | {r['median_us']:.2f} |" for r in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per operation (median reported)")
    parser.add_argument("--iterations", type=int, default=20_000, help="operations per timed run")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a Markdown table")
    args = parser.parse_args(argv)
    rows = run(args.repeats, args.iterations)
    print(json.dumps(rows, indent=2) if args.json else table(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
