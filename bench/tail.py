"""Tail consumer end-to-end latency: produce acknowledged -> long-poll consume returns (library level).

A consumer waits at a partition's tail in ``ConsumeService.consume`` (``max_wait_ms`` 10 s,
``min_bytes`` 1); once it is waiting, one single-record ``LogWriter.append`` is made. A sample is
the time from the append returning (the produce acknowledgement) to the consume call returning
with the record; it is negative when the consumer, woken at the commit point, returns before the
writer has finished. Two setups, each for CAS and sequential partitions, against a local Oxia
standalone (fsync on) and a moto S3 server:

* ``serve``: one process, as ``llog serve`` wires it: one ``Storage``, a writer feeding a
  ``TailCache`` through its commit listener, the consumer reading through that cache;
* ``cross-process``: the writer in a subprocess (its own Oxia and S3 clients), the consumer here
  with its own clients and no tail cache, as the consume Lambda runs. Both read one system-wide
  monotonic clock (``CLOCK_MONOTONIC``).

Reported per row (one run of ``--samples`` samples after 5 warm-up ones): the produce p50 and p99
(the append call), the end-to-end p50 and p99, their ratio (target: end-to-end p50 <= 1.5x
produce p50), and the consumer's Oxia reads per sample (in ``serve`` its one Oxia client is the
writer's too, so a CAS append's read of ``meta/control`` counts there).

    .venv/bin/python bench/tail.py [--samples 100] [--protocols cas sequential] [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `bench` importable
    sys.path.insert(0, str(ROOT))

from bench.stack import READ_OPS, local_stack, percentile, print_rows  # noqa: E402
from llog.config import OxiaConfig, S3Config, WriterConfig  # noqa: E402
from llog.format.kv.control import AppendProtocol  # noqa: E402
from llog.protocol.append import LogWriter  # noqa: E402
from llog.protocol.read import LogReader  # noqa: E402
from llog.service.consume import ConsumeRequest, ConsumeService, FetchPartition  # noqa: E402
from llog.service.tail_cache import TailCache  # noqa: E402
from llog.store.oxia import OxiaStore  # noqa: E402
from llog.store.s3 import BlobStore  # noqa: E402
from llog.store.storage import Storage  # noqa: E402

BUCKET = "llog-bench-tail"
PROTOCOLS = ("cas", "sequential")
SETUPS = ("serve", "cross-process")
WARMUP = 5
MAX_WAIT_MS = 10_000
# How long the consumer gets to reach its wait before the append: its first read takes ~1 ms.
SETTLE_S = 0.03
VALUE = b"x" * 100

Append = Callable[[], tuple[int, int]]  # one append: (started, acknowledged), monotonic ns


def _storage(address: str, s3_config: S3Config, root: str) -> Storage:
    return Storage(OxiaStore(OxiaConfig(address)), BlobStore(s3_config), BUCKET, root)


def _writer_config(protocol: str) -> WriterConfig:
    return WriterConfig(append_protocol=AppendProtocol(protocol))


def _sample(service: ConsumeService, topic: str, offset: int, append: Append) -> tuple[float, float, int]:
    """(produce ms, end-to-end ms, Oxia reads) of one append the waiting consumer receives."""
    returned: list[int] = []
    reads_before = _reads(service)

    def consume() -> None:
        request = ConsumeRequest([FetchPartition(topic, 0, offset, 1 << 20)], MAX_WAIT_MS, 1, 1 << 20)
        (result,) = service.consume(request)
        returned.append(time.monotonic_ns())
        if [r.offset for r in result.records] != [offset]:
            raise AssertionError(f"expected offset {offset}, got {result}")

    consumer = threading.Thread(target=consume)
    consumer.start()
    time.sleep(SETTLE_S)
    started, acknowledged = append()
    consumer.join()
    if not returned:
        raise RuntimeError("the consumer failed")
    return (acknowledged - started) / 1e6, (returned[0] - acknowledged) / 1e6, _reads(service) - reads_before


def _reads(service: ConsumeService) -> int:
    snapshot = service.reader.storage.oxia.counters.snapshot()
    return sum(s.calls for op, s in snapshot.items() if op in READ_OPS)


def _row(setup: str, protocol: str, samples: list[tuple[float, float, int]]) -> dict[str, Any]:
    produce = [s[0] for s in samples]
    e2e = [s[1] for s in samples]
    return {
        "setup": setup,
        "protocol": protocol,
        "samples": len(samples),
        "produce_p50_ms": statistics.median(produce),
        "produce_p99_ms": percentile(produce, 0.99),
        "e2e_p50_ms": statistics.median(e2e),
        "e2e_p99_ms": percentile(e2e, 0.99),
        "ratio_p50": statistics.median(e2e) / statistics.median(produce),
        "oxia_reads_per_sample": statistics.mean(s[2] for s in samples),
    }


def _measure(service: ConsumeService, topic: str, append: Append, samples: int) -> list[tuple[float, float, int]]:
    out = [_sample(service, topic, offset, append) for offset in range(1, WARMUP + samples + 1)]
    return out[WARMUP:]


def serve(address: str, s3_config: S3Config, protocol: str, samples: int) -> dict[str, Any]:
    topic = f"tail-{uuid.uuid4().hex[:8]}"
    storage = _storage(address, s3_config, f"bench-{uuid.uuid4().hex[:8]}")
    cache = TailCache(64 << 20)
    writer = LogWriter(storage, config=_writer_config(protocol), commit_listener=cache.on_commit)
    service = ConsumeService(LogReader(storage), tail_cache=cache)
    try:
        writer.initialize_partition(topic, 0)

        def append() -> tuple[int, int]:
            started = time.monotonic_ns()
            writer.append(topic, 0, [VALUE])
            return started, time.monotonic_ns()

        return _row("serve", protocol, _measure(service, topic, append, samples))
    finally:
        writer.close()


def writer_process(address: str, s3_json: str, root: str, topic: str, protocol: str) -> None:
    """The cross-process writer: one append per line read from stdin, answering "started acknowledged"."""
    writer = LogWriter(_storage(address, S3Config(**json.loads(s3_json)), root), config=_writer_config(protocol))
    writer.initialize_partition(topic, 0)
    print("ready", flush=True)
    for _ in sys.stdin:
        started = time.monotonic_ns()
        writer.append(topic, 0, [VALUE])
        print(started, time.monotonic_ns(), flush=True)
    writer.close()


def cross_process(address: str, s3_config: S3Config, protocol: str, samples: int) -> dict[str, Any]:
    topic, root = f"tail-{uuid.uuid4().hex[:8]}", f"bench-{uuid.uuid4().hex[:8]}"
    code = "import sys; from bench.tail import writer_process; writer_process(*sys.argv[1:])"
    s3_json = json.dumps(dataclasses.asdict(s3_config))
    child = subprocess.Popen(
        [sys.executable, "-c", code, address, s3_json, root, topic, protocol],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    stdin, stdout = child.stdin, child.stdout
    if stdin is None or stdout is None:
        raise AssertionError("Popen with PIPE has both pipes")
    service = ConsumeService(LogReader(_storage(address, s3_config, root)))
    try:
        if stdout.readline().strip() != "ready":
            raise RuntimeError("the writer process did not start")

        def append() -> tuple[int, int]:
            stdin.write("append\n")
            stdin.flush()
            started, acknowledged = stdout.readline().split()
            return int(started), int(acknowledged)

        return _row("cross-process", protocol, _measure(service, topic, append, samples))
    finally:
        stdin.close()
        child.wait(30)
        service.close()


def run(
    *, samples: int = 100, protocols: Sequence[str] = PROTOCOLS, setups: Sequence[str] = SETUPS
) -> list[dict[str, Any]]:
    """One row per setup and protocol, against one Oxia standalone and one moto server."""
    measures = {"serve": serve, "cross-process": cross_process}
    with local_stack(BUCKET) as (address, s3_config):
        return [measures[setup](address, s3_config, protocol, samples) for protocol in protocols for setup in setups]


def report(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| setup | protocol | samples | produce p50 ms | produce p99 ms | end-to-end p50 ms | end-to-end p99 ms "
        "| e2e p50 / produce p50 | consumer Oxia reads / sample |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['setup']} | {r['protocol']} | {r['samples']} | {r['produce_p50_ms']:.2f} "
            f"| {r['produce_p99_ms']:.2f} | {r['e2e_p50_ms']:.2f} | {r['e2e_p99_ms']:.2f} | {r['ratio_p50']:.2f} "
            f"| {r['oxia_reads_per_sample']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--protocols", nargs="+", choices=PROTOCOLS, default=list(PROTOCOLS))
    parser.add_argument("--setups", nargs="+", choices=SETUPS, default=list(SETUPS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    return print_rows(
        lambda: run(samples=args.samples, protocols=args.protocols, setups=args.setups), report, as_json=args.json
    )


if __name__ == "__main__":
    sys.exit(main())
