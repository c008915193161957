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
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import queue
import random
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `bench` importable
    sys.path.insert(0, str(ROOT))

from bench import load, wrk  # noqa: E402
from bench.reconcile import Outcome  # noqa: E402
from bench.stack import WRITE_OPS, local_stack, measure_floor, stack_env, versitygw_binary  # noqa: E402
from devserver.devstack import free_port  # noqa: E402
from llog.config import S3Config  # noqa: E402
from llog.format.keys import S3Location  # noqa: E402
from llog.store.s3 import BlobStore  # noqa: E402

BUCKET = "llog-bench"
PEER_BUCKET = "s2-lite-bench"
PEER_BASIN = "llog-bench-basin"
PEER_STREAM = "s0"
VALUE = "x" * 100  # one 100-byte record
TIMEOUT_S = 30.0
LONG_POLL_MS = 5000
START_TIMEOUT_S = 60.0

# Seconds (or samples) per scenario: the whole benchmark stays within ~4 minutes on 2 cores.
PRODUCE_S = 5.0
TAIL_SAMPLES = 40
TAIL_DELAY_S = (0.01, 0.15)


@dataclass(frozen=True)
class LoadShape:
    """A ``bench.load`` run at full speed (rate 0)."""

    clients: int
    partitions: int
    batch: int
    record_size: int
    duration: float


@dataclass(frozen=True)
class IngestShape:
    """wrk's ``connections`` sending ``records`` of ``record_size`` bytes per request, spread over ``partitions``."""

    connections: int
    partitions: int = 4
    records: int = 100
    record_size: int = 1024
    duration: float = 8.0

    @property
    def per_partition(self) -> int:
        return self.records // self.partitions


# Sustained ingest: a closed loop of 16 connections keeps about 8 requests (800 KB) waiting behind each flush;
# more connections let a flush carry more (up to LLOG_BATCH_MAX_BYTES). The highest rate of these is the one
# the target compares with raw PUTs.
INGEST = tuple(IngestShape(connections) for connections in (16, 64, 128))
# Requests of 256,000 bytes of values (the cost model's size, docs/COST.md) from 1, 4 and 16 clients: how many
# produce requests share one flush (one S3 PUT), the count the serve fleet's cost per GB divides by.
FLUSH_SHARING = tuple(LoadShape(clients=c, partitions=4, batch=250, record_size=1024, duration=6.0) for c in (1, 4, 16))
RAW_PUT_S = 4.0
MANY = LoadShape(clients=256, partitions=16, batch=1, record_size=100, duration=6.0)

# (key, what) of the produce scenarios, in table order.
PRODUCE_SCENARIOS = (
    ("idle", "idle: 1 client, 1 record to 1 partition"),
    ("partitions16", "1 client, 1 record to each of 16 partitions"),
    ("clients32", "32 clients, 1 record each to 1 partition"),
)
PEER_SCENARIOS = (
    ("idle", "idle: 1 client, 1 record"),
    ("clients32", "32 clients, 1 record each to 1 stream"),
)


# --- processes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessStat:
    """What ``/proc/<pid>/stat`` says of a process."""

    name: str
    kernel_thread: bool
    cpu_seconds: float  # user + system
    started: int  # clock ticks after boot: with the pid, names the process across pid reuse


def process_stat(directory: Path) -> ProcessStat | None:
    """``directory/stat`` read (None once the process is gone); fields after the name counted from its state."""
    try:
        stat = (directory / "stat").read_text()
    except OSError:
        return None
    rest = stat[stat.rindex(")") + 2 :].split()
    return ProcessStat(name=stat[stat.index("(") + 1 : stat.rindex(")")],
                       kernel_thread=bool(int(rest[6]) & 0x00200000),  # flags & PF_KTHREAD
                       cpu_seconds=(int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK"),  # utime + stime
                       started=int(rest[19]))  # fmt: skip


class Service:
    """A server subprocess on a loopback port, its output in ``log_path``; ready once ``probe`` succeeds."""

    def __init__(self, name: str, args: Sequence[str], env: Mapping[str, str], log_path: Path, port: int,
                 probe: Callable[[Service], object]) -> None:  # fmt: skip
        self.name, self.args, self.env, self.log_path, self.port, self.probe = name, args, env, log_path, port, probe
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def launch(self) -> None:
        with open(self.log_path, "ab") as log_file:
            self._proc = subprocess.Popen(list(self.args), cwd=ROOT, env=dict(self.env), stdout=log_file,
                                          stderr=subprocess.STDOUT)  # fmt: skip

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self._proc is None or self._proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited while starting; log tail:\n{self.log_tail()}")
            try:
                self.probe(self)
                return
            except (OSError, http.client.HTTPException, ValueError) as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} not ready in {START_TIMEOUT_S:.0f} s: {exc}; log tail:\n"
                                       f"{self.log_tail()}") from exc  # fmt: skip
                time.sleep(0.2)

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def cpu_seconds(self) -> float:
        """User plus system CPU the server process has used so far (Linux ``/proc``; 0 elsewhere)."""
        stat = None if self.pid is None else process_stat(Path(f"/proc/{self.pid}"))
        return 0.0 if stat is None else stat.cpu_seconds

    def metrics(self) -> dict[str, Any]:
        """``GET /metrics`` (llog serve)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=TIMEOUT_S) as response:
            doc: dict[str, Any] = json.loads(response.read())
        return doc


def _health(service: Service) -> None:
    with urllib.request.urlopen(service.url + "/health", timeout=2) as response:
        response.read()


def llog_serve(name: str, address: str, s3: S3Config, tmp: Path) -> Service:
    """``python -m server.serve`` against the stack: the LLOG_* settings of scripts/dev.py, nothing inherited."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLOG_")}
    env.update(stack_env(address, s3, BUCKET))
    port = free_port()
    args = [sys.executable, "-m", "server.serve", "--port", str(port)]
    return Service(name, args, env, tmp / f"{name}.log", port, _health)


@contextmanager
def running(services: Sequence[Service]) -> Iterator[None]:
    """Start them side by side, wait until each is ready; stop them all at the end."""
    try:
        for s in services:
            s.launch()
        for s in services:
            s.wait_ready()
        yield
    finally:
        for s in services:
            s.stop()


# --- counting ------------------------------------------------------------------------------------


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

    def __init__(
        self, serve: Service, proc: Path = Path("/proc"), clock: Callable[[], float] = time.monotonic
    ) -> None:
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


# --- requests ------------------------------------------------------------------------------------


def produce_request(topic: str, partitions: Sequence[int], value: str = VALUE) -> bytes:
    """One record per partition, each partition its own entry."""
    entries = [{"topic": topic, "partition": p, "records": [value]} for p in partitions]
    return json.dumps({"topic_partitions": entries}).encode()


def consume_request(topic: str, partition: int, fetch_offset: int, max_wait_ms: int) -> bytes:
    return json.dumps(
        {
            "topic_partitions": [{"topic": topic, "partition": partition, "fetch_offset": fetch_offset}],
            "max_wait_ms": max_wait_ms,
            "min_bytes": 1,
        }
    ).encode()


Check = Callable[[int, bytes], str | None]  # (status, body) -> None when it succeeded, else the error's key


def produce_check(partitions: int, records: int = 1) -> Check:
    """A produce answer succeeded when every partition's batch of ``records`` was acknowledged (``bench.load``'s
    rules)."""

    def check(status: int, body: bytes) -> str | None:
        outcomes = load.classify_produce(status, body, [records] * partitions)
        failed = [o.error for o in outcomes if o.outcome is not Outcome.ACKED]
        return failed[0] if failed else None

    return check


def timed_post(client: load.HttpClient, path: str, body: bytes, check: Check) -> tuple[float | None, str | None]:
    """(seconds, None) when it succeeded; (None, error key) otherwise."""
    began = time.perf_counter()
    try:
        status, answer = client.post_json(path, body)
    except (OSError, http.client.HTTPException) as exc:
        return None, load.error_key(None, load.transport_error_type(exc))
    seconds = time.perf_counter() - began
    error = check(status, answer)
    return (seconds, None) if error is None else (None, error)


def _ms(seconds: Sequence[float], q: float) -> float | None:
    return load.percentile(seconds, q) * 1000 if seconds else None


def loop_row(what: str, clients: int, result: wrk.WrkResult, ops: Mapping[str, float] | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "what": what,
        "clients": clients,
        "requests": result.requests,
        "requests_per_s": result.ok / result.elapsed if result.elapsed > 0 else 0.0,
        "p50_ms": result.p50_ms,
        "p99_ms": result.p99_ms,
        "mean_ms": result.mean_ms,
        "errors": dict(result.errors),
    }
    if ops is not None:
        per = max(result.requests, 1)
        row["s3_puts_per_request"] = ops["s3_puts"] / per
        row["oxia_writes_per_request"] = ops["oxia_writes"] / per
    return row


# --- llog serve scenarios -------------------------------------------------------------------------


def produce_expectation(partitions: int) -> str:
    """What a produce answer of ``partitions`` batches says when every batch was acknowledged."""
    return f'"success_count":{partitions},"error_count":0'


@dataclass(frozen=True)
class WrkProduce:
    """What one wrk run of produce requests did, and what it cost llog serve and the machine."""

    result: wrk.WrkResult
    ops: dict[str, float]
    server_cpu_ms_per_request: float
    machine_cpu: dict[str, Any]


def wrk_produce(serve: Service, body: bytes, partitions: int, records: int, *, clients: int, seconds: float,
                what: str) -> WrkProduce:  # fmt: skip
    """One request that creates the partitions (not measured), then wrk's ``clients`` sending ``body`` back to
    back, every answer checked (each partition's batch of ``records`` acknowledged)."""
    first = load.HttpClient(serve.url, load.no_auth, TIMEOUT_S)
    try:
        _, error = timed_post(first, "/produce", body, produce_check(partitions, records))
    finally:
        first.close()
    if error is not None:
        raise RuntimeError(f"the first produce request of {what!r} failed: {error}")
    counts, cpu, machine = op_counts(serve.metrics()), serve.cpu_seconds(), MachineCpu(serve)
    result = wrk.run(serve.url, "/produce", body, clients=clients, seconds=seconds,
                     expect=produce_expectation(partitions))  # fmt: skip
    machine_cpu = machine.since_start({"load": result.cpu_seconds})
    used = serve.cpu_seconds() - cpu
    ops = counts_between(counts, op_counts(serve.metrics()))
    return WrkProduce(result, ops, used * 1000 / max(result.requests, 1), machine_cpu)


def produce_scenario(serve: Service, key: str, what: str) -> dict[str, Any]:
    topic = f"serve-{key}-{uuid.uuid4().hex[:8]}"
    partitions = list(range(16)) if key == "partitions16" else [0]
    clients = 32 if key == "clients32" else 1
    run = wrk_produce(serve, produce_request(topic, partitions), len(partitions), 1, clients=clients,
                      seconds=PRODUCE_S, what=what)  # fmt: skip
    return {**loop_row(what, clients, run.result, run.ops), "partitions_per_request": len(partitions),
            "server_cpu_ms_per_request": run.server_cpu_ms_per_request,
            "flush": flush_breakdown(run.ops, run.result.mean_ms), "machine_cpu": run.machine_cpu}  # fmt: skip


def tail_scenario(producer: Service, consumer: Service, what: str, rng: random.Random) -> dict[str, Any]:
    """A long-poll at the tail, then one record produced: produce sent -> consume answered, per record."""
    topic = f"serve-tail-{uuid.uuid4().hex[:8]}"
    p_client = load.HttpClient(producer.url, load.no_auth, TIMEOUT_S)
    c_client = load.HttpClient(consumer.url, load.no_auth, TIMEOUT_S)
    produce_payload = produce_request(topic, [0])
    # The partition exists (offset 1) and both connections are open before the first sample.
    p_client.post_json("/produce", produce_payload)
    c_client.post_json("/consume", consume_request(topic, 0, 1, 0))
    answers: queue.Queue[tuple[float, str | None]] = queue.Queue()  # (arrival, error)
    polling = threading.Event()

    def consume_loop() -> None:
        for i in range(TAIL_SAMPLES):
            offset = 2 + i
            polling.set()
            try:
                status, body = c_client.post_json("/consume", consume_request(topic, 0, offset, LONG_POLL_MS))
                offsets = _offsets(body) if status == 200 else None
                error = None if offsets == [offset] else f"consume {status}: offsets {offsets}, not [{offset}]"
            except (OSError, http.client.HTTPException) as exc:
                error = load.error_key(None, load.transport_error_type(exc))
            answers.put((time.perf_counter(), error))

    consumer_thread = threading.Thread(target=consume_loop, daemon=True)
    e2e, after_ack, produce_s, errors = [], [], [], Counter[str]()
    try:
        consumer_thread.start()
        for _ in range(TAIL_SAMPLES):
            polling.wait(TIMEOUT_S)
            polling.clear()
            time.sleep(rng.uniform(*TAIL_DELAY_S))  # the long-poll is waiting at the server by now
            sent = time.perf_counter()
            latency, error = timed_post(p_client, "/produce", produce_payload, produce_check(1))
            acked = time.perf_counter()
            try:
                arrived, consume_error = answers.get(timeout=LONG_POLL_MS / 1000 + TIMEOUT_S)
            except queue.Empty:
                errors["consume never answered"] += 1
                break
            if latency is None or consume_error is not None:
                errors[str(error or consume_error)] += 1
                continue
            produce_s.append(latency)
            e2e.append(arrived - sent)
            after_ack.append(arrived - acked)
        consumer_thread.join(LONG_POLL_MS / 1000 + TIMEOUT_S)
    finally:
        p_client.close()
        c_client.close()
    return {
        "what": what,
        "samples": len(e2e),
        "produce_p50_ms": _ms(produce_s, 0.50),
        "e2e_p50_ms": _ms(e2e, 0.50),
        "e2e_p99_ms": _ms(e2e, 0.99),
        "after_ack_p50_ms": _ms(after_ack, 0.50),
        "errors": dict(errors),
    }


def _offsets(answer: bytes) -> list[int] | None:
    """The offsets of the records of a one-partition consume answer; None when it has none to give."""
    try:
        result = json.loads(answer)["results"][0]
        return [int(r["offset"]) for r in result["records"]] if result.get("ok") else None
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def load_config(shape: LoadShape, url: str, *, reconcile: bool) -> load.LoadConfig:
    run_id = uuid.uuid4().hex[:12]
    return load.LoadConfig(url=url, topic=f"serve-load-{run_id}", run_id=run_id, partitions=shape.partitions,
                           clients=shape.clients, rate=0.0, duration=shape.duration, record_size=shape.record_size,
                           batch=shape.batch, timeout=TIMEOUT_S, reconcile=reconcile)  # fmt: skip


def ingest_request(topic: str, shape: IngestShape) -> bytes:
    """One request of ``shape.records`` distinct ASCII values, an equal share to each partition."""
    entries = [{"topic": topic, "partition": p, "records": [secrets.token_hex(shape.record_size // 2)
                                                            for _ in range(shape.per_partition)]}
               for p in range(shape.partitions)]  # fmt: skip
    return json.dumps({"topic_partitions": entries}).encode()


def ingest_scenario(serve: Service, shape: IngestShape) -> dict[str, Any]:
    """wrk at full speed with one request body."""
    body = ingest_request(f"serve-ingest-{uuid.uuid4().hex[:8]}", shape)
    run = wrk_produce(serve, body, shape.partitions, shape.per_partition, clients=shape.connections,
                      seconds=shape.duration, what=f"ingest, {shape.connections} connections")  # fmt: skip
    result, ops = run.result, run.ops
    values = shape.partitions * shape.per_partition * shape.record_size
    return {
        "connections": shape.connections,
        "partitions": shape.partitions,
        "records": shape.records,
        "record_size": shape.record_size,
        "mb_per_s": result.ok * values / 1e6 / result.elapsed if result.elapsed > 0 else 0.0,
        "requests": result.requests,
        "p50_ms": result.p50_ms,
        "p99_ms": result.p99_ms,
        "server_cpu_ms_per_request": run.server_cpu_ms_per_request,
        "s3_puts": ops["s3_puts"],
        "mean_put_bytes": ops["s3_put_bytes"] / ops["s3_puts"] if ops["s3_puts"] else 0.0,
        "errors": dict(result.errors),
        "flush": flush_breakdown(ops, result.mean_ms),
        "machine_cpu": run.machine_cpu,
    }


def flush_sharing_scenario(serve: Service, shape: LoadShape) -> dict[str, Any]:
    """``bench.load`` at full speed: its requests per S3 PUT and MB/s."""
    before = op_counts(serve.metrics())
    summary = load.run(load_config(shape, serve.url, reconcile=False), load.no_auth)
    ops = counts_between(before, op_counts(serve.metrics()))
    return {
        "clients": shape.clients,
        "partitions": shape.partitions,
        "batch": shape.batch,
        "record_size": shape.record_size,
        "mb_per_s": summary["throughput"]["mb_per_s"],
        "requests": summary["requests"]["sent"],
        "p50_ms": summary["latency_ms"]["p50"],
        "s3_puts": ops["s3_puts"],
        "errors": summary["errors"],
    }


def sustained(ingest: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The ingest run (llog serve's and its raw PUTs') where llog serve reached the most MB/s."""
    return max(ingest, key=lambda run: run["llog"]["mb_per_s"])


def raw_s3_puts(s3: S3Config, size: int, writers: int, seconds: float) -> dict[str, Any]:
    """``writers`` threads, each with its own boto3 client, PUT ``size``-byte objects to ``BUCKET`` back to back."""
    payload = b"x" * size
    prefix = f"raw-{uuid.uuid4().hex[:8]}"
    ready, go = threading.Barrier(writers + 1), threading.Event()
    latencies: list[list[float]] = [[] for _ in range(writers)]
    deadline = [0.0]

    def work(i: int) -> None:
        blobs = BlobStore(s3)
        blobs.put(S3Location(BUCKET, f"{prefix}/{i}/warm-up"), payload)
        ready.wait(START_TIMEOUT_S)
        go.wait()
        n = 0
        while time.perf_counter() < deadline[0]:
            t0 = time.perf_counter()
            blobs.put(S3Location(BUCKET, f"{prefix}/{i}/{n}"), payload)
            latencies[i].append(time.perf_counter() - t0)
            n += 1

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(writers)]
    for t in threads:
        t.start()
    ready.wait(START_TIMEOUT_S * 2)
    began = time.perf_counter()
    deadline[0] = began + seconds
    go.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    puts = [x for w in latencies for x in w]
    return {"writers": writers, "object_bytes": size, "puts": len(puts), "mb_per_s": len(puts) * size / 1e6 / elapsed,
            "p50_ms": _ms(puts, 0.50)}  # fmt: skip


def ceiling_scenario(tmp: Path) -> dict[str, Any]:
    """1 and 32 clients against ``bench/noop_http.py``, one-record produce bodies, as in the produce scenarios."""
    port = free_port()
    noop = Service("noop-http", [sys.executable, "-m", "bench.noop_http", "--port", str(port)], dict(os.environ),
                   tmp / "noop-http.log", port, _health)  # fmt: skip
    payload = produce_request("noop", [0])
    with running([noop]):
        return {str(clients): loop_row(f"{clients} clients", clients,
                                       wrk.run(noop.url, "/produce", payload, clients=clients, seconds=PRODUCE_S),
                                       None)
                for clients in (1, 32)}  # fmt: skip


def many_clients_scenario(serve: Service) -> dict[str, Any]:
    summary = load.run(load_config(MANY, serve.url, reconcile=True), load.no_auth)
    transport = {k: v for k, v in summary["errors"].items() if k.startswith("transport")}
    return {
        "clients": MANY.clients,
        "partitions": MANY.partitions,
        "requests": summary["requests"]["sent"],
        "requests_per_s": summary["throughput"]["requests_per_s"],
        "p50_ms": summary["latency_ms"]["p50"],
        "p99_ms": summary["latency_ms"]["p99"],
        "transport_errors": sum(transport.values()),
        "errors": summary["errors"],
        "reconciliation": load.reconciliation_verdict(summary),
    }


# --- the peer: s2-lite ----------------------------------------------------------------------------


def s2_lite_binary() -> str | None:
    explicit = os.environ.get("S2_LITE_BIN")
    candidate = Path(explicit) if explicit else ROOT / ".tools" / "bin" / "s2-lite"
    return str(candidate) if os.access(candidate, os.X_OK) else None


def _append_payload() -> bytes:
    return json.dumps({"records": [{"body": VALUE}]}).encode()


def _peer_headers() -> dict[str, str]:
    return {"s2-basin": PEER_BASIN}


def _peer_append(service: Service) -> None:
    client = load.HttpClient(service.url, lambda m, u, b: _peer_headers(), 5.0)
    try:
        status, answer = client.post_json(f"/v1/streams/{PEER_STREAM}/records", _append_payload())
    finally:
        client.close()
    if status != 200:
        raise ValueError(f"append answered {status}: {answer[:200]!r}")


def s2_lite(binary: str, s3: S3Config, tmp: Path) -> Service:
    """s2-lite on ``PEER_BUCKET`` of the same S3 server, with one basin and one stream created at startup."""
    init = tmp / "s2-init.json"
    init.write_text(json.dumps({"basins": [{"name": PEER_BASIN, "streams": [{"name": PEER_STREAM}]}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S2"))}
    env.update(
        {
            "AWS_ENDPOINT_URL_S3": s3.endpoint_url or "",
            "AWS_REGION": s3.region_name or "us-east-1",
            "AWS_ACCESS_KEY_ID": s3.access_key_id or "testing",
            "AWS_SECRET_ACCESS_KEY": s3.secret_access_key or "testing",
            "RUST_LOG": "warn",
        }
    )
    port = free_port()
    args = [binary, "--bucket", PEER_BUCKET, "--port", str(port), "--no-dashboard", "--init-file", str(init)]
    return Service("s2-lite", args, env, tmp / "s2-lite.log", port, _peer_append)


def peer_scenarios(s3: S3Config, tmp: Path) -> dict[str, Any]:
    binary = s2_lite_binary()
    if binary is None:
        return {"skipped": "no s2-lite binary ($S2_LITE_BIN or .tools/bin/s2-lite)"}
    BlobStore(s3).create_bucket(PEER_BUCKET)
    service = s2_lite(binary, s3, tmp)
    payload = _append_payload()
    rows = {}
    with running([service]):
        for key, what in PEER_SCENARIOS:
            clients = 32 if key == "clients32" else 1
            result = wrk.run(service.url, f"/v1/streams/{PEER_STREAM}/records", payload, clients=clients,
                             seconds=PRODUCE_S, headers=_peer_headers())  # fmt: skip
            rows[key] = loop_row(what, clients, result, None)
    return {"rows": rows}


# --- the run ---------------------------------------------------------------------------------------


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


# --- the report --------------------------------------------------------------------------------------


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _errors(errors: Mapping[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(errors.items())) or "0"


def _verdict(met: bool) -> str:
    return "met" if met else "**not met**"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def targets(r: Mapping[str, Any]) -> list[str]:
    """The issue's targets, each met or not with its numbers (all from this run)."""
    floor, produce, ingest = r["floor"], r["produce"], sustained(r["ingest"])
    idle, multi, busy = produce["idle"], produce["partitions16"], produce["clients32"]
    lines = []

    def target(text: str, value: float | None, limit: float, at_most: bool) -> None:
        met = value is not None and (value <= limit if at_most else value >= limit)
        sign = "≤" if at_most else "≥"
        lines.append(f"* {text}: {_f(value, 2)} ({sign} {limit:g}): {_verdict(met)}")

    target(f"Idle produce p50 / floor ({_f(idle['p50_ms'])} ms / {_f(floor['floor_ms'])} ms)",
           _ratio(idle["p50_ms"], floor["floor_ms"]), 2, True)  # fmt: skip
    target(f"32 clients requests/s / 1 client's ({_f(busy['requests_per_s'])} / {_f(idle['requests_per_s'])})",
           _ratio(busy["requests_per_s"], idle["requests_per_s"]), 15, False)  # fmt: skip
    cpu_ms, single_rate = busy.get("server_cpu_ms_per_request"), idle["requests_per_s"]
    if cpu_ms and single_rate:
        lines.append(f"  * server CPU per request at 32 clients: {cpu_ms:.2f} ms, so one core serves at most "
                     f"{1000 / cpu_ms:.0f} requests/s; 15x the single client's rate ({15 * single_rate:.0f} "
                     f"requests/s) needs at most {1000 / (15 * single_rate):.2f} ms")  # fmt: skip
    ceiling = r["ceiling"]["32"]["requests_per_s"]
    if ceiling and single_rate:
        lines.append(f"  * the same 32 clients against llog serve's HTTP server with nothing behind it: "
                     f"{ceiling:.0f} requests/s, {ceiling / single_rate:.1f}x the single llog client's rate; "
                     f"llog reached {busy['requests_per_s'] / ceiling:.2f} of that ceiling")  # fmt: skip
    target("32 clients S3 PUTs per request", busy["s3_puts_per_request"], 0.25, True)
    target(f"32 clients p99 / 1 client's p50 ({_f(busy['p99_ms'])} ms / {_f(idle['p50_ms'])} ms)",
           _ratio(busy["p99_ms"], idle["p50_ms"]), 4, True)  # fmt: skip
    target(f"16-partition request p50 / 1-partition p50 ({_f(multi['p50_ms'])} ms / {_f(idle['p50_ms'])} ms)",
           _ratio(multi["p50_ms"], idle["p50_ms"]), 2, True)  # fmt: skip
    for tail in r["tail"]:
        target(f"Tail consumer, {tail['what']}: produce→consume p50 / produce p50 "
               f"({_f(tail['e2e_p50_ms'])} ms / {_f(tail['produce_p50_ms'])} ms)",
               _ratio(tail["e2e_p50_ms"], tail["produce_p50_ms"]), 1.5, True)  # fmt: skip
    llog_mb, raw_mb = ingest["llog"]["mb_per_s"], ingest["raw_s3"]["mb_per_s"]
    target(f"Sustained ingest MB/s / raw S3 PUT MB/s ({ingest['llog']['connections']} connections: "
           f"{_f(llog_mb, 2)} / {_f(raw_mb, 2)})",
           _ratio(llog_mb, raw_mb), 0.5, False)  # fmt: skip
    many = r["many_clients"]
    lines.append(f"* {many['clients']} keep-alive clients, resets and refused connections: "
                 f"{many['transport_errors']} (= 0): {_verdict(many['transport_errors'] == 0)}")  # fmt: skip
    return lines


def _where_row(what: str, row: Mapping[str, Any]) -> str:
    flush, machine = row["flush"], row["machine_cpu"]
    processes = dict(machine["processes"])
    serve, clients = processes.pop("llog serve", 0.0), processes.pop("load", 0.0)
    rest = ", ".join(f"{name} {cores:.2f}" for name, cores in list(processes.items())[:4])
    return (f"| {what} | {_f(flush['latency_ms'], 2)} | {_f(flush['queue_ms'], 2)} | {_f(flush['batcher_ms'], 2)} | "
            f"{_f(flush['rest_ms'], 2)} | {_f(flush['flush_ms'], 2)} | {_f(flush['s3_put_ms'], 2)} | "
            f"{_f(flush['oxia_write_ms'], 2)} | {machine['busy_cores']:.2f} of {machine['cores']} | {serve:.2f} | "
            f"{clients:.2f} | {rest} |")  # fmt: skip


def report(r: Mapping[str, Any]) -> str:
    floor, batcher = r["floor"], r["batcher"]
    out = [
        f"S3 server: **{r['s3_server']}**. Batcher: `max_delay_ms` {batcher['max_delay_ms']}, `max_in_flight` "
        f"{batcher['max_in_flight']}, `max_bytes` {batcher['max_bytes']}. Floor on the same servers: S3 PUT p50 "
        f"{_f(floor['s3_put_p50_ms'], 2)} ms + Oxia put p50 {_f(floor['oxia_put_p50_ms'], 2)} ms = "
        f"**{_f(floor['floor_ms'], 2)} ms**.",
        "",
        "| produce | requests | requests/s | p50 ms | p99 ms | S3 PUTs/request | Oxia writes/request | "
        "server CPU ms/request | errors |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, _ in PRODUCE_SCENARIOS:
        row = r["produce"][key]
        out.append(f"| {row['what']} | {row['requests']} | {_f(row['requests_per_s'])} | {_f(row['p50_ms'])} | "
                   f"{_f(row['p99_ms'])} | {_f(row['s3_puts_per_request'], 3)} | "
                   f"{_f(row['oxia_writes_per_request'], 2)} | {_f(row['server_cpu_ms_per_request'], 2)} | "
                   f"{_errors(row['errors'])} |")  # fmt: skip
    out += [
        "",
        "| tail consumer (long-poll) | samples | produce p50 ms | produce→consume p50 ms | p99 ms | "
        "after the ack p50 ms | errors |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in r["tail"]:
        out.append(f"| {row['what']} | {row['samples']} | {_f(row['produce_p50_ms'])} | {_f(row['e2e_p50_ms'])} | "
                   f"{_f(row['e2e_p99_ms'])} | {_f(row['after_ack_p50_ms'])} | {_errors(row['errors'])} |")  # fmt: skip
    out += [
        "",
        "| ingest | MB/s | requests or PUTs | p50 ms | p99 ms | S3 PUTs, mean size | server CPU ms/request | errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in r["ingest"]:
        llog, raw = run["llog"], run["raw_s3"]
        out += [
            f"| llog serve: {llog['connections']} connections, {llog['records']} records of {llog['record_size']} B "
            f"per request over {llog['partitions']} partitions | {_f(llog['mb_per_s'], 2)} | {llog['requests']} | "
            f"{_f(llog['p50_ms'])} | {_f(llog['p99_ms'])} | {llog['s3_puts']}, {llog['mean_put_bytes']:.0f} B | "
            f"{_f(llog['server_cpu_ms_per_request'], 2)} | {_errors(llog['errors'])} |",
            f"| raw S3 PUTs: {raw['writers']} writers, {raw['object_bytes']} B objects | {_f(raw['mb_per_s'], 2)} | "
            f"{raw['puts']} | {_f(raw['p50_ms'])} | - | {raw['puts']}, {raw['object_bytes']} B | - | 0 |",
        ]
    llog = sustained(r["ingest"])["llog"]
    out += [
        "",
        "| where the time went (means over the scenario) | request ms | waiting for its flush | in the batcher "
        "(waiting and written) | outside it (HTTP, the loop, the clients) | flush ms | S3 PUT ms | Oxia write ms | "
        "machine: busy cores | llog serve | load (clients) | the rest |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *(_where_row(what, row) for what, row in (("idle produce", r["produce"]["idle"]),
                                                 ("32 clients", r["produce"]["clients32"]),
                                                 (f"ingest, {llog['connections']} connections", llog))),
    ]  # fmt: skip
    sharing = r["flush_sharing"]
    first = sharing[0]
    out += [
        "",
        f"| produce requests of {first['batch'] * first['record_size']:,} B ({first['batch']} records of "
        f"{first['record_size']:,} B), {first['partitions']} partitions | requests | S3 PUTs | requests per S3 PUT | "
        "MB/s | p50 ms | errors |",
        "|---|---|---|---|---|---|---|",
        *(f"| {row['clients']} clients | {row['requests']} | {row['s3_puts']} | "
          f"{_f(row['requests'] / row['s3_puts'] if row['s3_puts'] else None, 2)} | {_f(row['mb_per_s'], 2)} | "
          f"{_f(row['p50_ms'])} | {_errors(row['errors'])} |" for row in sharing),
    ]
    out += [
        "",
        "| HTTP ceiling: llog serve's HTTP server, nothing behind it | requests | requests/s | p50 ms | p99 ms | "
        "errors |",
        "|---|---|---|---|---|---|",
        *(f"| {row['what']}, 1 record per request | {row['requests']} | {_f(row['requests_per_s'])} | "
          f"{_f(row['p50_ms'], 2)} | {_f(row['p99_ms'], 2)} | {_errors(row['errors'])} |"
          for row in r["ceiling"].values()),
    ]
    many = r["many_clients"]
    out += [
        "",
        "| many clients | requests | requests/s | p50 ms | p99 ms | resets/refused | errors | reconciliation |",
        "|---|---|---|---|---|---|---|---|",
        f"| {many['clients']} keep-alive clients, 1 record per request, {many['partitions']} partitions | "
        f"{many['requests']} | "
        f"{_f(many['requests_per_s'])} | {_f(many['p50_ms'])} | {_f(many['p99_ms'])} | {many['transport_errors']} | "
        f"{_errors(many['errors'])} | {many['reconciliation']} |",
    ]
    peer = r["peer"]
    out.append("")
    if "rows" in peer:
        out += [
            "| peer: s2-lite 0.43.4, same S3 server | requests | appends/s | p50 ms | p99 ms | errors |",
            "|---|---|---|---|---|---|",
        ]
        for key, _ in PEER_SCENARIOS:
            row = peer["rows"][key]
            out.append(f"| {row['what']} | {row['requests']} | {_f(row['requests_per_s'])} | {_f(row['p50_ms'])} | "
                       f"{_f(row['p99_ms'])} | {_errors(row['errors'])} |")  # fmt: skip
    else:
        out.append(f"Peer (s2-lite 0.43.4): not measured: {peer['skipped']}.")
    out += ["", "Targets (issue 15), ratios from this run:", "", *targets(r)]
    return "\n".join(out)


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
