"""Lambda handlers in-process: a cold start (import, first invocation) and warm invocations against the floor.

A produce Lambda handles one request per invocation. This starts a local
Oxia standalone (fsync on) and a moto S3 server, then, per case, a fresh
interpreter (a new execution environment, in a Lambda-like environment:
bench/cold_start.py's interpreter and variables) that

1. imports ``functions.<name>.app`` (the init phase);
2. invokes its handler once (the first request: the storage clients' modules
   are imported and the clients created, the Tracer too when tracing is on);
3. measures the floor on the same servers (``bench.stack.measure_floor``:
   medians of 200 100-byte S3 PUTs and 200 Oxia puts, one at a time);
4. invokes the handler ``--samples`` more times, one at a time, with a
   real-shaped API Gateway event (``events/produce.json``, ``events/consume.json``
   with their bodies replaced): produce one 100-byte record to one partition;
   consume one record from that partition (the produce case wrote them).

EMF metrics are flushed every invocation, as in Lambda (to /dev/null here).
With X-Ray on, each invocation gets a trace header as Lambda sets it and the
SDK sends its segments over UDP to the daemon's address (nothing listens).
Reported per case: import, first invocation, warm p50 and p99, the floor of
the same process, and p50 / floor.

    .venv/bin/python bench/lambda_warm.py [--samples 200] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `bench` importable
    sys.path.insert(0, str(ROOT))

# Nothing else of bench at module level: a child imports this module after its handler and
# before its first invocation, which must not find botocore (bench.stack's) already loaded.
from bench import cold_start  # noqa: E402

BUCKET = "llog-bench-lambda"
TOPIC = "bench-lambda"
RECORD = "x" * 100
# (function, X-Ray tracing); produce runs first: consume reads the records it wrote.
CASES = (("produce", False), ("produce", True), ("consume", False), ("consume", True))
TARGET_RATIO = 1.5  # warm produce p50 <= 1.5x the floor (issue 15)


def event(function: str, index: int) -> dict[str, Any]:
    """``events/<function>.json`` with one record to produce, or the ``index``-th record to consume."""
    doc: dict[str, Any] = json.loads((ROOT / "events" / f"{function}.json").read_text())
    if function == "produce":
        body: dict[str, Any] = {"topic_partitions": [{"topic": TOPIC, "partition": 0, "records": [RECORD]}]}
    else:
        body = {
            "topic_partitions": [{"topic": TOPIC, "partition": 0, "fetch_offset": index + 1, "partition_max_bytes": 1}],
            "max_wait_ms": 0,
        }
    doc["body"], doc["isBase64Encoded"] = json.dumps(body), False
    doc["requestContext"]["requestId"] = str(uuid.uuid4())
    return doc


def trace_header() -> str:
    """What Lambda puts in ``_X_AMZN_TRACE_ID`` for a sampled invocation."""
    return f"Root=1-{int(time.time()):08x}-{secrets.token_hex(12)};Parent={secrets.token_hex(8)};Sampled=1"


# The child's first statement is the handler's import, before anything of the harness is loaded.
_CHILD = """
import sys, time
start = time.perf_counter()
app = __import__(f"functions.{sys.argv[1]}.app", fromlist=["handler"])
import_ms = (time.perf_counter() - start) * 1000
from bench.lambda_warm import environment_run
environment_run(app, sys.argv[1], import_ms, int(sys.argv[2]), int(sys.argv[3]))
"""


def environment_run(app: ModuleType, function: str, import_ms: float, samples: int, records: int) -> None:
    """One execution environment (a child process): first invocation, floor, warm invocations; prints a JSON row.

    ``records``: how many records the consume case may read (offsets 1 to ``records``).
    """
    from functions.common.telemetry import LocalContext

    context = LocalContext(f"llog-{function}")

    def invoke(index: int) -> float:
        request = event(function, index % records if records else index)
        os.environ["_X_AMZN_TRACE_ID"] = trace_header()  # per invocation, as Lambda sets it
        start = time.perf_counter()
        response = app.handler(request, context)
        elapsed = time.perf_counter() - start
        if response["statusCode"] != 200:
            raise RuntimeError(f"{function} answered {response['statusCode']}: {response['body']}")
        return elapsed * 1000

    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):  # EMF goes to stdout
        first_ms = invoke(0)
        from bench.stack import measure_floor, percentile
        from llog.config import OxiaConfig, S3Config

        floor = measure_floor(OxiaConfig.from_env().service_address, S3Config.from_env(), BUCKET)
        warm = [invoke(i + 1) for i in range(samples)]
    print(json.dumps({
        "function": function,
        "import_ms": import_ms,
        "first_ms": first_ms,
        "p50_ms": statistics.median(warm),
        "p99_ms": percentile(warm, 0.99),
        "samples": len(warm),
        **floor,
    }))  # fmt: skip


def run(samples: int = 200) -> list[dict[str, Any]]:
    """Every case in its own interpreter, against one Oxia standalone and one moto server."""
    from bench.stack import local_stack, stack_env

    python, label = cold_start.lambda_python()
    root = f"bench-lambda-{uuid.uuid4().hex[:8]}"
    rows = []
    with local_stack(BUCKET) as (address, s3_config):
        storage = {**stack_env(address, s3_config, BUCKET), "LLOG_ROOT_PREFIX": root}
        for function, tracing in CASES:
            env = {**cold_start.lambda_env(function, tracing=tracing), **storage}
            records = 0 if function == "produce" else samples
            done = subprocess.run(
                [python, "-c", _CHILD, function, str(samples), str(records)],
                env=env, capture_output=True, text=True, check=False, cwd=ROOT,
            )  # fmt: skip
            if done.returncode != 0:
                raise RuntimeError(f"{function} (tracing {tracing}) failed: {done.stderr[-2000:]}")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append({**result, "tracing": tracing, "interpreter": label})
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"Interpreter: {rows[0]['interpreter']}.\n" if rows else "",
        "| handler | X-Ray | import ms | first invocation ms | warm p50 ms | warm p99 ms | floor ms "
        "(S3 PUT + Oxia put) | p50 / floor |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['function']} | {'on' if r['tracing'] else 'off'} | {r['import_ms']:.0f} | {r['first_ms']:.0f} "
            f"| {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['floor_ms']:.2f} ({r['s3_put_p50_ms']:.2f} + "
            f"{r['oxia_put_p50_ms']:.2f}) | {r['p50_ms'] / r['floor_ms']:.2f}x |"
        )
    for r in rows:
        if r["function"] == "produce":
            ratio = r["p50_ms"] / r["floor_ms"]
            verdict = "met" if ratio <= TARGET_RATIO else "not met"
            lines.append(
                f"\nTarget (warm produce p50 <= {TARGET_RATIO}x the floor), X-Ray {'on' if r['tracing'] else 'off'}: "
                f"{ratio:.2f}x, {verdict}."
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from bench.stack import print_rows

    return print_rows(lambda: run(args.samples), report, as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
