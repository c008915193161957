"""The native HTTP API's parse and answer path, in one process: what each produce and consume request costs
before and after the service (``llog.api.native.contract``, and the answer's JSON encoding).

Cases, each the median of ``--repeats`` timed runs of ``--loops`` calls (garbage collector paused, as
``timeit`` does, the cases interleaved):

* ``produce parse``: an ingest request (one partition, 100 records of 1 KiB of text), a small one (1 record
  of 100 B), and 10 keyed records with a header and a timestamp each;
* ``produce answer``: the answer to a request of one partition, and of 10;
* ``consume parse``: a fetch of one partition;
* ``consume answer``: 100 records of 1 KiB, text and binary (base64).

    .venv/bin/python bench/http_bodies.py [--repeats 9] [--loops 200] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from functions.common.http import json_bytes
from llog.api.native.contract import (
    consume_response,
    parse_consume_request,
    parse_produce_request,
    produce_response,
)
from llog.config import Limits
from llog.protocol.append import AppendResult
from llog.protocol.read import LogRecord
from llog.service.consume import PartitionFetch

LIMITS = Limits()
WAL_URI = "s3://leaderless-log-wal/llog/wal-shared/0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"


@dataclass(frozen=True)
class Case:
    name: str
    call: Callable[[], object]


def _produce_body(records: list[object]) -> bytes:
    return json.dumps({"topic_partitions": [{"topic": "orders", "partition": 0, "records": records}]}).encode()


def _appended(partitions: int) -> list[AppendResult]:
    return [
        AppendResult("orders", p, 100, 1001, 1100, f"llog/orders/partitions/{p}/index/{1100:020d}", WAL_URI)
        for p in range(partitions)
    ]


def _fetched(value: bytes) -> list[PartitionFetch]:
    records = [LogRecord(1000 + i, value, b"key-%d" % i, (), 1_760_000_000_000 + i) for i in range(100)]
    return [PartitionFetch("orders", 0, 1000, records, high_watermark=1099)]


def cases() -> list[Case]:
    ingest = _produce_body(["x" * 1024] * 100)
    small = _produce_body(["y" * 100])
    keyed = _produce_body(
        [{"value": "v" * 100, "key": f"k{i}", "headers": {"h": "x"}, "timestamp_ms": 1_760_000_000_000 + i}
         for i in range(10)]
    )  # fmt: skip
    fetch = json.dumps({"topic_partitions": [{"topic": "orders", "partition": 0, "fetch_offset": 1000}]}).encode()
    one, ten = _appended(1), _appended(10)
    text, binary = _fetched(b"t" * 1024), _fetched(bytes(range(256)) * 4)
    return [
        Case("produce parse: 100 x 1 KiB", lambda: parse_produce_request(ingest, LIMITS)),
        Case("produce parse: 1 x 100 B", lambda: parse_produce_request(small, LIMITS)),
        Case("produce parse: 10 keyed records", lambda: parse_produce_request(keyed, LIMITS)),
        Case("produce answer: 1 partition", lambda: json_bytes(produce_response(one)[1])),
        Case("produce answer: 10 partitions", lambda: json_bytes(produce_response(ten)[1])),
        Case("consume parse: 1 partition", lambda: parse_consume_request(fetch, LIMITS)),
        Case("consume answer: 100 x 1 KiB text", lambda: json_bytes(consume_response(text)[1])),
        Case("consume answer: 100 x 1 KiB binary", lambda: json_bytes(consume_response(binary)[1])),
    ]


def _time(call: Callable[[], object], loops: int) -> float:
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(loops):
            call()
        return (time.perf_counter() - start) / loops
    finally:
        gc.enable()


def run(repeats: int = 9, loops: int = 200) -> dict[str, float]:
    """Each case's median time per call, in microseconds."""
    measured = cases()
    samples: dict[str, list[float]] = {case.name: [] for case in measured}
    for case in measured:
        _time(case.call, loops)  # warm-up
    for _ in range(repeats):
        for case in measured:
            samples[case.name].append(_time(case.call, loops))
    return {name: statistics.median(times) * 1e6 for name, times in samples.items()}


def table(medians: dict[str, float]) -> str:
    rows = ["| case | median µs per call |", "|---|---:|"]
    rows += [f"| {name} | {us:,.1f} |" for name, us in medians.items()]
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--loops", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a Markdown table")
    args = parser.parse_args()
    medians = run(args.repeats, args.loops)
    print(json.dumps(medians, indent=2) if args.json else table(medians))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
