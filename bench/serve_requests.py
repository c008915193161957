"""The HTTP benchmark's requests (bench/serve.py): produce and consume bodies, the check of a produce answer,
one timed request, and the table row of a wrk run."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench import load, wrk
from bench.reconcile import Outcome
from bench.serve_settings import VALUE


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


def percentile_ms(seconds: Sequence[float], q: float) -> float | None:
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
