"""The HTTP benchmark's scenarios against ``llog serve`` (bench/serve.py): produce, tail, ingest (with raw
S3 PUTs to compare), flush sharing, the HTTP ceiling and many clients."""

from __future__ import annotations

import http.client
import json
import os
import queue
import random
import secrets
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import load, wrk
from bench.serve_counting import MachineCpu, counts_between, flush_breakdown, op_counts
from bench.serve_processes import Service, health, running
from bench.serve_requests import consume_request, loop_row, percentile_ms, produce_check, produce_request, timed_post
from bench.serve_settings import (
    BUCKET,
    LONG_POLL_MS,
    MANY,
    PRODUCE_S,
    START_TIMEOUT_S,
    TAIL_DELAY_S,
    TAIL_SAMPLES,
    TIMEOUT_S,
    IngestShape,
    LoadShape,
)
from devserver.devstack import free_port
from llog.config import S3Config
from llog.format.keys import S3Location
from llog.store.s3 import BlobStore


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
        "produce_p50_ms": percentile_ms(produce_s, 0.50),
        "e2e_p50_ms": percentile_ms(e2e, 0.50),
        "e2e_p99_ms": percentile_ms(e2e, 0.99),
        "after_ack_p50_ms": percentile_ms(after_ack, 0.50),
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
            "p50_ms": percentile_ms(puts, 0.50)}  # fmt: skip


def ceiling_scenario(tmp: Path) -> dict[str, Any]:
    """1 and 32 clients against ``bench/noop_http.py``, one-record produce bodies, as in the produce scenarios."""
    port = free_port()
    noop = Service("noop-http", [sys.executable, "-m", "bench.noop_http", "--port", str(port)], dict(os.environ),
                   tmp / "noop-http.log", port, health)  # fmt: skip
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
