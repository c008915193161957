"""HTTP benchmark of ``llog serve`` (issue 15): what an HTTP client sees, next to the floor of the same servers.

One local Oxia standalone (fsync on) and one S3 server (VersityGW when
``.tools/bin/versitygw`` is installed, else moto's server) back two
``python -m server.serve`` processes, A and B. The produce, HTTP-ceiling
and peer clients are wrk's keep-alive connections (``bench.wrk``: C, so that
the clients take little of the 2 cores from the servers they measure), and
so are the ingest clients; the tail, flush-sharing and many-clients scenarios
use ``bench.load``'s Python clients (one thread and connection each), which
check every record they wrote. S3 and Oxia operations are counted by llog
serve itself (``GET /metrics``).

* *Floor*: medians of 200 one-at-a-time 100-byte S3 PUTs (``BlobStore.put``) and 200
  Oxia puts (``OxiaStore``) against the same servers (``bench.stack.measure_floor``).
* *Produce*: 1 client sending one 100-byte record per request (idle), 1
  client sending one record to each of 16 partitions per request, 32
  clients sending one record per request to one partition; back to back
  (wrk), every answer checked (each partition acknowledged), after one
  request that creates the partitions.
* *Tail*: a consumer long-polls (``max_wait_ms`` 5000) at the tail of a
  partition; 10-150 ms later (random) a producer sends one record; the
  latency is from sending the produce request to the consume answer
  arriving, with the consumer on A (the producer's process) or on B.
* *Ingest*: wrk's connections (16, 64 and 128) sending requests of 100
  records of 1 KiB (25 to each of 4 partitions) back to back; after each,
  raw S3 PUTs of that run's mean PUT size from as many concurrent writers as
  llog's batcher may have flushes in flight. More connections keep more
  requests waiting behind a flush, so that each flush carries more; the
  sustained rate is the highest of the three. MB/s count record values
  (llog) and object bytes (raw).
* *Flush sharing*: ``bench.load`` at full speed with requests of 250
  records of 1 KiB (256,000 bytes, the cost model's request size) from 1,
  4 and 16 clients: produce requests per S3 PUT, the group commit the serve
  fleet's cost per GB is divided by (docs/COST.md).
* *HTTP ceiling*: the same clients, 1 and 32, against ``llog serve``'s HTTP
  server with nothing behind it (``bench/noop_http.py``): the most any
  handler behind that server could reach on this machine.
* *Where the time went*: for idle produce, 32 clients and ingest, the mean wait of a
  request for its flush, of a flush, of its S3 PUT and of its Oxia write (from
  ``/metrics``), and the machine's busy cores with the processes that used them
  (``/proc``): llog serve, this process (the clients), the S3 server, Oxia, kernel threads.
* *256 clients*: ``bench.load`` with 256 keep-alive clients at full speed,
  then every record read back and reconciled; transport errors (resets,
  refusals) are counted.
* *Peer* (optional): s2-lite 0.43.4 (``$S2_LITE_BIN`` or ``.tools/bin/s2-lite``:
  ``cargo install s2-lite --version 0.43.4 --root .tools`` installs it as
  ``.tools/bin/server``, renamed so) with its defaults (SlateDB flushes every
  50 ms on S3) on its own bucket of the same S3 server: idle one-record
  appends and 32 clients appending to one stream, JSON over HTTP.

    .venv/bin/python bench/serve.py [--json]

This script runs the scenarios in order and prints the report. The parts:
``bench/serve_settings.py`` (buckets, timeouts, load shapes),
``serve_processes.py`` (the servers), ``serve_counting.py`` (``/metrics``
counts, ``/proc`` CPU), ``serve_requests.py`` (bodies, checks, rows),
``serve_scenarios.py`` (against ``llog serve``), ``serve_peer.py`` (s2-lite)
and ``serve_report.py`` (the tables and targets).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `bench` importable
    sys.path.insert(0, str(ROOT))

from bench.serve_peer import peer_scenarios  # noqa: E402
from bench.serve_processes import llog_serve, running  # noqa: E402
from bench.serve_report import report  # noqa: E402
from bench.serve_scenarios import (  # noqa: E402
    ceiling_scenario,
    flush_sharing_scenario,
    ingest_scenario,
    many_clients_scenario,
    produce_scenario,
    raw_s3_puts,
    tail_scenario,
)
from bench.serve_settings import BUCKET, FLUSH_SHARING, INGEST, PRODUCE_SCENARIOS, RAW_PUT_S  # noqa: E402
from bench.stack import local_stack, measure_floor, versitygw_binary  # noqa: E402


def s3_server() -> str:
    return "versitygw" if versitygw_binary() is not None else "moto"


def run(*, peer: bool = True) -> dict[str, Any]:
    server = s3_server()
    print(f"serve benchmark: Oxia standalone (fsync on) and {server} S3", file=sys.stderr, flush=True)
    rng = random.Random(15)
    with ExitStack() as stack:
        address, s3 = stack.enter_context(local_stack(BUCKET, s3_server=server))
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        a, b = llog_serve("serve-a", address, s3, tmp), llog_serve("serve-b", address, s3, tmp)
        results: dict[str, Any] = {"s3_server": server}
        with running([a, b]):
            results["batcher"] = a.metrics()["batcher"]
            results["floor"] = measure_floor(address, s3, BUCKET)
            results["produce"] = {key: produce_scenario(a, key, what) for key, what in PRODUCE_SCENARIOS}
            results["tail"] = [tail_scenario(a, a, "same process (A → A)", rng),
                               tail_scenario(a, b, "other process (A → B)", rng)]  # fmt: skip
            results["ingest"] = []
            for shape in INGEST:
                ingest = ingest_scenario(a, shape)
                raw = raw_s3_puts(s3, max(1, round(ingest["mean_put_bytes"])),
                                  int(results["batcher"]["max_in_flight"]), RAW_PUT_S)  # fmt: skip
                results["ingest"].append({"llog": ingest, "raw_s3": raw})
            results["flush_sharing"] = [flush_sharing_scenario(a, shape) for shape in FLUSH_SHARING]
            results["many_clients"] = many_clients_scenario(a)
            results["ceiling"] = ceiling_scenario(tmp)
        results["peer"] = peer_scenarios(s3, tmp) if peer else {"skipped": "not asked for (--no-peer)"}
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/serve.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of the tables")
    parser.add_argument("--no-peer", action="store_true", help="skip s2-lite even when it is installed")
    args = parser.parse_args(argv)
    try:
        results = run(peer=not args.no_peer)
    except Exception as exc:
        print(f"Not measured here: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(results, indent=2) if args.json else report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
