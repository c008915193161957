"""Load test of the HTTP API: N clients produce to P partitions at a target rate, then everything is read back.

    .venv/bin/python bench/load.py [--url http://127.0.0.1:8080] [--clients 8] [--partitions 4] [--rate 100]
        [--duration 10] [--record-size 100] [--batch 10] [--json summary.json]
    make load LOAD_ARGS="--rate 500 --duration 30"          # against `make dev`

A deployed API: ``--url https://<id>.execute-api.<region>.amazonaws.com/<stage>``
with ``--auth sigv4`` (credentials from the default AWS chain, ``--region``
or the URL's region) or ``--auth api-key`` (``--api-key`` or ``$LLOG_API_KEY``).

1. *Produce*: ``--clients`` threads, each with one keep-alive HTTP connection,
   send ``POST /produce`` requests of ``--batch`` records to the partitions
   ``0..P-1`` of ``--topic`` (default: a fresh topic per run) in turn, paced
   by one schedule shared by all clients to ``--rate`` records/s (0: as fast as
   they can) for ``--duration`` seconds. A progress line goes to stderr about
   once a second. Every record value names its run, client and sequence
   number (bench/reconcile.py) and is padded to ``--record-size`` bytes.
   Each batch's outcome comes from the response (docs/HTTP_API.md): *acked*
   (``ok`` with offsets), *rejected* (a 4xx, or a per-partition error other
   than ``AppendOutcomeUnknown``: not written) or *ambiguous* (a timeout, a
   lost connection, a 5xx without per-partition results, or
   ``AppendOutcomeUnknown``: may or may not be in the log).
2. *Consume*: every partition is read with ``POST /consume`` from offset 1
   (or its log start) up to the high watermark seen on its first read.
3. *Reconcile* (unless ``--no-reconcile``): every acknowledged record exactly
   once at its offset with its bytes, nothing else of this run except
   records of ambiguous requests.

The summary (throughput, latency percentiles, errors by type, the
reconciliation) is printed as a table and written as JSON to ``--json``.
Exit status: 0, or 1 when the reconciliation failed or could not read every
partition, 2 for bad arguments. docs/LOAD_TEST.md has the details.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import itertools
import json
import math
import os
import queue
import re
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `bench` importable
    sys.path.insert(0, str(ROOT))

from bench.reconcile import (  # noqa: E402
    ConsumedRecord,
    Outcome,
    ReconcileReport,
    RecordId,
    SentBatch,
    make_value,
    reconcile,
)

DEFAULT_URL = "http://127.0.0.1:8080"
API_KEY_ENV = "LLOG_API_KEY"
CONSUME_MAX_BYTES = 4 * 1024 * 1024  # the API's default cap of one consume response
READ_RETRY_DELAY_S = 0.5
AMBIGUOUS_BATCH_ERRORS = frozenset({"AppendOutcomeUnknown"})

# (method, url, body) -> headers to add: authentication
Signer = Callable[[str, str, bytes], dict[str, str]]


@dataclass(frozen=True)
class LoadConfig:
    url: str
    topic: str
    run_id: str
    partitions: int
    clients: int
    rate: float
    duration: float
    record_size: int
    batch: int
    timeout: float
    reconcile: bool = True
    read_retries: int = 5
    max_examples: int = 10
    auth: str = "none"


class UsageError(Exception):
    """Bad arguments: reported with exit status 2."""


# --- pure helpers ---------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in [0, 1]) of ``values``; NaN when there are none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def latency_summary_ms(seconds: Sequence[float]) -> dict[str, float | int | None]:
    def ms(value: float) -> float | None:
        return None if math.isnan(value) else round(value * 1000, 3)

    return {
        "count": len(seconds),
        "mean": ms(sum(seconds) / len(seconds) if seconds else math.nan),
        "p50": ms(percentile(seconds, 0.50)),
        "p90": ms(percentile(seconds, 0.90)),
        "p99": ms(percentile(seconds, 0.99)),
        "max": ms(max(seconds, default=math.nan)),
    }


class Pacer:
    """One schedule shared by every client: request ``k`` may start once the records before it fit the rate.

    A client that falls behind sends at once, without waiting for its turn
    again, so a slow response does not lower the offered rate (the schedule,
    not the responses, decides when requests go). No request starts after the
    duration, even if the clients could not keep up with the schedule: the
    summary then shows a rate below the target.
    """

    def __init__(self, rate: float, start: float, duration: float, clock: Callable[[], float] = time.monotonic):
        self.rate = rate
        self.start = start
        self.end = start + duration
        self.clock = clock
        self._scheduled = 0
        self._lock = threading.Lock()

    def next_slot(self, records: int) -> float | None:
        """When a request of ``records`` may start; None once the run's duration is used up."""
        with self._lock:
            now = self.clock()
            if now >= self.end:
                return None
            if self.rate <= 0:
                return now
            slot = self.start + self._scheduled / self.rate
            if slot >= self.end:
                return None
            self._scheduled += records
            return slot


def error_key(status: int | None, error_type: str) -> str:
    return f"{status} {error_type}" if status is not None else f"transport {error_type}"


@dataclass(frozen=True)
class BatchOutcome:
    outcome: Outcome
    start_offset: int | None = None
    error: str | None = None  # error_key(...) when not acked


def _error_type(doc: Any) -> str:
    if isinstance(doc, dict):
        for name in ("error_type", "message", "Message"):  # ours, then API Gateway's own answers
            if isinstance(doc.get(name), str):
                return str(doc[name]) if name == "error_type" else "Gateway: " + str(doc[name])[:60]
    return "HTTP"


def _batch_outcome(status: int, result: Any, count: int) -> BatchOutcome:
    if not isinstance(result, dict):
        return BatchOutcome(Outcome.AMBIGUOUS, error=error_key(status, "MalformedResult"))
    if result.get("ok") is True:
        start, end = result.get("start_offset"), result.get("end_offset")
        if isinstance(start, int) and isinstance(end, int) and end - start + 1 == count:
            return BatchOutcome(Outcome.ACKED, start_offset=start)
        return BatchOutcome(Outcome.AMBIGUOUS, error=error_key(status, "MalformedResult"))
    error_type = str(result.get("error_type") or "Error")
    outcome = Outcome.AMBIGUOUS if error_type in AMBIGUOUS_BATCH_ERRORS else Outcome.REJECTED
    return BatchOutcome(outcome, error=error_key(status, error_type))


def classify_produce(status: int, body: bytes, counts: Sequence[int]) -> list[BatchOutcome]:
    """The outcome of each batch of a produce request (``counts``: records per ``topic_partitions`` entry).

    Per-partition results, when the body has one per batch, decide (200, 409
    and 503 carry them). Otherwise a 4xx rejected the whole request before
    anything was written, and anything else (a 5xx such as API Gateway's 504
    while the function runs on) leaves the outcome unknown.
    """
    try:
        doc: Any = json.loads(body)
    except ValueError:
        doc = None
    results = doc.get("results") if isinstance(doc, dict) else None
    if isinstance(results, list) and len(results) == len(counts):
        return [_batch_outcome(status, r, n) for r, n in zip(results, counts, strict=True)]
    key = error_key(status, _error_type(doc))
    if 400 <= status < 500:
        return [BatchOutcome(Outcome.REJECTED, error=key) for _ in counts]
    return [BatchOutcome(Outcome.AMBIGUOUS, error=key) for _ in counts]


def transport_error_type(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "Timeout"
    return type(exc).__name__


def decode_bytes(doc: Any) -> bytes:
    """A value of the consume response: a string (its UTF-8) or ``{"base64": ...}``."""
    if isinstance(doc, str):
        return doc.encode("utf-8")
    if isinstance(doc, dict) and isinstance(doc.get("base64"), str):
        return base64.b64decode(doc["base64"], validate=True)
    raise ValueError(f"not a value: {doc!r:.80}")


def produce_body(topic: str, partition: int, values: Sequence[bytes]) -> bytes:
    """The produce request of ``values`` as plain JSON strings (``make_value``'s are ASCII: no base64).

    Joined as bytes rather than through ``json.dumps``: the clients share the machine with the server
    they measure, and encoding 100 KiB of records took them about 0.2 ms per request.
    """
    joined = b"".join(values)  # a quote or backslash would change the document; a control character gets a 400
    if not joined.isascii() or b'"' in joined or b"\\" in joined:
        raise ValueError("a value needs JSON escapes; the load's values are plain ASCII")
    head = json.dumps({"topic": topic, "partition": partition})[:-1].encode()  # without its closing brace
    records = b'"' + b'", "'.join(values) + b'"' if values else b""
    return b'{"topic_partitions": [' + head + b', "records": [' + records + b"]}]}"


# --- HTTP --------------------------------------------------------------------------------------


def no_auth(method: str, url: str, body: bytes) -> dict[str, str]:
    return {}


def api_key_signer(key: str) -> Signer:
    def sign(method: str, url: str, body: bytes) -> dict[str, str]:
        return {"x-api-key": key}

    return sign


def region_from_url(url: str) -> str | None:
    match = re.search(r"\.execute-api\.([a-z0-9-]+)\.amazonaws\.com", urlsplit(url).netloc)
    return match.group(1) if match else None


def sigv4_signer(url: str, region: str | None) -> Signer:
    """SigV4 for API Gateway (service ``execute-api``) with the default boto3 credential chain."""
    import boto3
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    session = boto3.Session()
    region = region or region_from_url(url) or session.region_name
    if not region:
        raise UsageError("--auth sigv4 needs a region: --region, an execute-api URL or AWS_REGION")
    credentials = session.get_credentials()
    if credentials is None:
        raise UsageError("--auth sigv4 found no AWS credentials in the default chain")

    def sign(method: str, target: str, body: bytes) -> dict[str, str]:
        request = AWSRequest(method=method, url=target, data=body, headers={"content-type": "application/json"})
        SigV4Auth(credentials, "execute-api", region).add_auth(request)
        return {k: str(v) for k, v in request.headers.items() if k.lower() != "content-type"}

    return sign


class HttpClient:
    """One keep-alive connection to the API (reopened after a failure); not thread-safe: one per thread."""

    def __init__(self, base_url: str, signer: Signer, timeout: float) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.prefix = parts.path.rstrip("/")
        self.scheme, self.host, self.port = parts.scheme, parts.hostname, parts.port
        self.signer = signer
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            self._conn = cls(self.host, self.port, timeout=self.timeout)
        return self._conn

    def post_json(self, path: str, body: bytes) -> tuple[int, bytes]:
        headers = {"content-type": "application/json", **self.signer("POST", self.base_url + path, body)}
        conn = self._connection()
        try:
            conn.request("POST", self.prefix + path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        except BaseException:
            self.close()
            raise
        if response.will_close:
            self.close()
        return response.status, data

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


# --- produce phase ---------------------------------------------------------------------------


@dataclass
class Stats:
    """What the clients did, shared between them and the progress line."""

    requests: int = 0
    requests_ok: int = 0
    records_sent: int = 0
    records_acked: int = 0
    records_rejected: int = 0
    records_ambiguous: int = 0
    bytes_acked: int = 0
    latencies: list[float] = field(default_factory=list)  # seconds, requests answered over HTTP
    errors: Counter[str] = field(default_factory=Counter)  # per failed batch
    statuses: Counter[str] = field(default_factory=Counter)  # per request: HTTP status or "transport"
    batches: list[SentBatch] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, status: int | None, latency: float | None, batch: SentBatch, value_bytes: int) -> None:
        """One request of one batch: its HTTP status (None: no answer), latency and outcome."""
        with self.lock:
            self.requests += 1
            self.statuses[str(status) if status is not None else "transport"] += 1
            if latency is not None:
                self.latencies.append(latency)
            self.batches.append(batch)
            self.records_sent += batch.count
            if batch.outcome is Outcome.ACKED:
                self.requests_ok += 1
                self.records_acked += batch.count
                self.bytes_acked += value_bytes
            else:
                self.errors[batch.error or "?"] += 1
                if batch.outcome is Outcome.REJECTED:
                    self.records_rejected += batch.count
                else:
                    self.records_ambiguous += batch.count


def one_request(client: HttpClient, config: LoadConfig, client_id: int, first_seq: int, partition: int,
                stats: Stats) -> None:
    values = [make_value(config.run_id, RecordId(client_id, first_seq + i), config.record_size)
              for i in range(config.batch)]
    body = produce_body(config.topic, partition, values)
    began = time.perf_counter()
    status: int | None = None
    latency: float | None = None
    try:
        status, answer = client.post_json("/produce", body)
    except (OSError, http.client.HTTPException) as exc:  # no answer: the request may have been written
        outcome = BatchOutcome(Outcome.AMBIGUOUS, error=error_key(None, transport_error_type(exc)))
    else:
        latency = time.perf_counter() - began
        (outcome,) = classify_produce(status, answer, [config.batch])
    batch = SentBatch(partition, client_id, first_seq, config.batch, outcome.outcome, outcome.start_offset,
                      outcome.error)
    stats.record(status, latency, batch, sum(len(v) for v in values))


def run_client(client_id: int, config: LoadConfig, signer: Signer, pacer: Pacer, stats: Stats,
               stop: threading.Event) -> None:
    client = HttpClient(config.url, signer, config.timeout)
    seq = 0
    try:
        for k in itertools.count():
            slot = pacer.next_slot(config.batch)
            if slot is None or stop.is_set():
                return
            delay = slot - time.monotonic()
            if delay > 0 and stop.wait(delay):
                return
            one_request(client, config, client_id, seq, (client_id + k) % config.partitions, stats)
            seq += config.batch
    finally:
        client.close()


def progress_line(elapsed: float, stats: Stats, rate_now: float, target: float) -> str:
    with stats.lock:
        sent, acked = stats.records_sent, stats.records_acked
        failed = sum(stats.errors.values())
        ambiguous = stats.records_ambiguous
    wanted = f"{target:.0f}" if target > 0 else "max"
    return (f"[{elapsed:6.1f}s] sent {sent} acked {acked} failed batches {failed} "
            f"ambiguous records {ambiguous} rate {rate_now:.0f} rec/s (target {wanted})")


def report_progress(stats: Stats, began: float, target: float, done: threading.Event) -> None:
    last_t, last_acked = began, 0
    while not done.wait(1.0):
        now = time.monotonic()
        acked = stats.records_acked
        rate_now = (acked - last_acked) / max(now - last_t, 1e-9)
        last_t, last_acked = now, acked
        print(progress_line(now - began, stats, rate_now, target), file=sys.stderr, flush=True)


def produce_phase(config: LoadConfig, signer: Signer) -> tuple[Stats, float]:
    """Run the clients for the duration; returns what they did and the phase's wall time."""
    stats = Stats()
    stop, done = threading.Event(), threading.Event()
    began = time.monotonic()
    pacer = Pacer(config.rate, began, config.duration)
    clients = [
        threading.Thread(target=run_client, args=(i, config, signer, pacer, stats, stop), name=f"load-client-{i}",
                         daemon=True)
        for i in range(config.clients)
    ]
    reporter = threading.Thread(target=report_progress, args=(stats, began, config.rate, done), daemon=True)
    for t in clients:
        t.start()
    reporter.start()
    interrupted = False
    try:
        for t in clients:
            t.join()
    except KeyboardInterrupt:  # stop sending, but still summarize and reconcile what was sent
        interrupted = True
        stop.set()
        for t in clients:
            t.join()
    done.set()
    reporter.join()
    elapsed = time.monotonic() - began
    # A paced run's last request may finish before the duration is over: rates are over the whole duration.
    return stats, elapsed if interrupted else max(elapsed, config.duration)


# --- consume phase ---------------------------------------------------------------------------


class ReadError(Exception):
    def __init__(self, message: str, *, retriable: bool = True) -> None:
        super().__init__(message)
        self.retriable = retriable


def _consume_once(client: HttpClient, topic: str, partition: int, fetch: int) -> dict[str, Any]:
    body = json.dumps({
        "topic_partitions": [
            {"topic": topic, "partition": partition, "fetch_offset": fetch, "partition_max_bytes": CONSUME_MAX_BYTES}
        ],
        "max_wait_ms": 0,
        "max_bytes": CONSUME_MAX_BYTES,
    }).encode()
    status, answer = client.post_json("/consume", body)
    if status != 200:
        retriable = status >= 500 or status == 429  # 429: API Gateway's throttling
        raise ReadError(error_key(status, _error_type(_json_or_none(answer))), retriable=retriable)
    doc = json.loads(answer)
    result = doc["results"][0]
    if not isinstance(result, dict):
        raise ReadError("malformed consume response")
    return result


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def read_partition(client: HttpClient, topic: str, partition: int, retries: int,
                   retry_delay: float = READ_RETRY_DELAY_S) -> Iterator[list[ConsumedRecord]]:
    """Pages of ``partition`` from its first readable offset to the high watermark of the first answer."""
    fetch, target, failures = 1, None, 0
    while True:
        try:
            result = _consume_once(client, topic, partition, fetch)
            if not result.get("ok"):
                error_type = result.get("error_type")
                if error_type == "OffsetOutOfRange" and fetch < result.get("log_start_offset", 0):
                    fetch = int(result["log_start_offset"])  # retention removed the head of the log
                    continue
                if error_type == "PartitionNotInitialized":
                    return  # nothing was ever written to it
                raise ReadError(f"{error_type}: {result.get('error')}", retriable=bool(result.get("retriable")))
            page = [ConsumedRecord(partition, int(r["offset"]), decode_bytes(r["value"])) for r in result["records"]]
            high_watermark, next_fetch = int(result["high_watermark"]), int(result["next_fetch_offset"])
        except (ReadError, OSError, http.client.HTTPException, ValueError, KeyError, IndexError, TypeError) as exc:
            failures += 1
            if failures > retries or (isinstance(exc, ReadError) and not exc.retriable):
                raise ReadError(f"partition {partition} at offset {fetch}: {exc}", retriable=False) from exc
            time.sleep(retry_delay)
            continue
        failures = 0
        if target is None:
            target = high_watermark
        yield page
        if next_fetch > target:
            return
        if next_fetch <= fetch:
            raise ReadError(f"partition {partition}: no progress at offset {fetch} below the high watermark {target}")
        fetch = next_fetch


def consume_phase(config: LoadConfig, signer: Signer, read_errors: list[str]) -> Iterator[ConsumedRecord]:
    """Every record of every partition, read by up to ``clients`` threads; failures go to ``read_errors``."""
    todo: queue.Queue[int] = queue.Queue()
    for p in range(config.partitions):
        todo.put(p)
    pages: queue.Queue[list[ConsumedRecord] | None] = queue.Queue(maxsize=64)  # bounds memory, not the log size

    def worker() -> None:
        client = HttpClient(config.url, signer, config.timeout)
        try:
            while True:
                try:
                    partition = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    for page in read_partition(client, config.topic, partition, config.read_retries):
                        pages.put(page)
                except Exception as exc:  # reported, never lost: an unread partition makes the result incomplete
                    read_errors.append(str(exc) if isinstance(exc, ReadError) else f"partition {partition}: {exc!r}")
                finally:
                    pages.put(None)
        finally:
            client.close()

    for _ in range(min(config.clients, config.partitions)):
        threading.Thread(target=worker, daemon=True, name="load-reader").start()
    finished = 0
    while finished < config.partitions:
        page = pages.get()
        if page is None:
            finished += 1
        else:
            yield from page


# --- summary -----------------------------------------------------------------------------------


def summarize(config: LoadConfig, stats: Stats, elapsed: float, report: ReconcileReport | None,
              reconcile_seconds: float | None) -> dict[str, Any]:
    seconds = max(elapsed, 1e-9)
    reconciliation = None
    if report is not None:
        reconciliation = {**report.to_json(), "seconds": round(reconcile_seconds or 0.0, 3)}
    return {
        "run_id": config.run_id,
        "url": config.url,
        "auth": config.auth,
        "topic": config.topic,
        "config": {
            "partitions": config.partitions,
            "clients": config.clients,
            "target_rate": config.rate,
            "duration_s": config.duration,
            "record_size": config.record_size,
            "batch": config.batch,
            "timeout_s": config.timeout,
        },
        "elapsed_s": round(elapsed, 3),
        "requests": {
            "sent": stats.requests,
            "ok": stats.requests_ok,
            "failed": stats.requests - stats.requests_ok,
            "by_status": dict(sorted(stats.statuses.items())),
        },
        "records": {
            "sent": stats.records_sent,
            "acked": stats.records_acked,
            "rejected": stats.records_rejected,
            "ambiguous": stats.records_ambiguous,
        },
        "throughput": {
            "records_per_s": round(stats.records_acked / seconds, 1),
            "mb_per_s": round(stats.bytes_acked / 1e6 / seconds, 3),
            "requests_per_s": round(stats.requests / seconds, 1),
        },
        "latency_ms": latency_summary_ms(stats.latencies),
        "errors": dict(stats.errors.most_common()),
        "reconciliation": reconciliation,
    }


def _fmt(value: Any) -> str:
    return "-" if value is None else str(value)


def reconciliation_verdict(summary: dict[str, Any]) -> str:
    rec = summary["reconciliation"]
    if rec is None:
        return "not run (--no-reconcile)"
    if not rec["complete"]:
        return "INCOMPLETE (not every partition could be read)"
    return "OK" if rec["ok"] else "FAILED"


def render_table(summary: dict[str, Any]) -> str:
    lat, req, rec, thr = summary["latency_ms"], summary["requests"], summary["records"], summary["throughput"]
    rows: list[tuple[str, str]] = [
        ("url", summary["url"]),
        ("topic", f"{summary['topic']} (run {summary['run_id']})"),
        ("elapsed", f"{summary['elapsed_s']} s"),
        ("requests", f"{req['sent']} (ok {req['ok']}, failed {req['failed']})"),
        ("records", f"sent {rec['sent']}, acked {rec['acked']}, rejected {rec['rejected']}, "
                    f"ambiguous {rec['ambiguous']}"),
        ("throughput", f"{thr['records_per_s']} rec/s, {thr['mb_per_s']} MB/s (acked)"),
        ("latency ms", f"p50 {_fmt(lat['p50'])}, p90 {_fmt(lat['p90'])}, p99 {_fmt(lat['p99'])}, "
                       f"max {_fmt(lat['max'])} ({lat['count']} answered)"),
    ]
    rows += [("error", f"{key}: {count} batches") for key, count in summary["errors"].items()]
    rows.append(("reconciliation", reconciliation_verdict(summary)))
    recon = summary["reconciliation"]
    if recon is not None:
        rows.append(("  acked found", f"{recon['found']} of {recon['acked']}"))
        for name in ("missing", "duplicates", "misplaced", "altered", "invented", "ambiguous_present",
                     "ambiguous_absent", "rejected_absent", "foreign", "consumed"):
            rows.append((f"  {name}", str(recon[name])))
        rows += [("  read error", e) for e in recon["read_errors"]]
        for name, examples in recon["examples"].items():
            rows += [(f"  e.g. {name}", e) for e in examples]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


# --- command line ------------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text}")
    return value


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0: {text}")
    return value


def _non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench/load.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=DEFAULT_URL, help="the API's base URL (default %(default)s)")
    parser.add_argument("--auth", choices=("none", "sigv4", "api-key"), default="none")
    parser.add_argument("--api-key", help=f"for --auth api-key (default ${API_KEY_ENV})")
    parser.add_argument("--region", help="for --auth sigv4 (default: the URL's, else the AWS configuration's)")
    parser.add_argument("--topic", help="default: load-<run id>, a fresh topic per run")
    parser.add_argument("--partitions", type=_positive_int, default=4, help="partitions 0..P-1 (default 4)")
    parser.add_argument("--clients", type=_positive_int, default=8, help="concurrent clients (default 8)")
    parser.add_argument("--rate", type=_non_negative, default=100.0,
                        help="target records/s over all clients, 0 = as fast as possible (default 100)")
    parser.add_argument("--duration", type=_non_negative, default=10.0, help="seconds of producing (default 10)")
    parser.add_argument("--record-size", type=_positive_int, default=100,
                        help="bytes per record value (default 100; at least the identity prefix, ~30 bytes)")
    parser.add_argument("--batch", type=_positive_int, default=10, help="records per produce request (default 10)")
    parser.add_argument("--timeout", type=_positive, default=30.0, help="seconds per HTTP request (default 30)")
    parser.add_argument("--read-retries", type=int, default=5, help="retries of a failing read per partition")
    parser.add_argument("--max-examples", type=int, default=10, help="examples per reconciliation failure")
    parser.add_argument("--json", type=Path, help="write the summary as JSON to this file")
    parser.add_argument("--no-reconcile", action="store_true", help="skip reading back and reconciling")
    return parser


def make_signer(args: argparse.Namespace) -> Signer:
    if args.auth == "sigv4":
        return sigv4_signer(args.url, args.region)
    if args.auth == "api-key":
        key = args.api_key or os.environ.get(API_KEY_ENV)
        if not key:
            raise UsageError(f"--auth api-key needs --api-key or ${API_KEY_ENV}")
        return api_key_signer(key)
    return no_auth


def config_from_args(args: argparse.Namespace) -> LoadConfig:
    run_id = uuid.uuid4().hex[:12]
    return LoadConfig(
        url=args.url, topic=args.topic or f"load-{run_id}", run_id=run_id, partitions=args.partitions,
        clients=args.clients, rate=args.rate, duration=args.duration, record_size=args.record_size,
        batch=args.batch, timeout=args.timeout, reconcile=not args.no_reconcile,
        read_retries=max(0, args.read_retries), max_examples=max(0, args.max_examples), auth=args.auth,
    )


def run(config: LoadConfig, signer: Signer) -> dict[str, Any]:
    """Produce, then (unless disabled) read back and reconcile; the summary document."""
    stats, elapsed = produce_phase(config, signer)
    report, reconcile_seconds = None, None
    if config.reconcile:
        print(f"reading back {config.partitions} partitions of {config.topic} ...", file=sys.stderr, flush=True)
        began = time.monotonic()
        read_errors: list[str] = []
        consumed: Iterable[ConsumedRecord] = consume_phase(config, signer, read_errors)
        report = reconcile(stats.batches, consumed, run_id=config.run_id, record_size=config.record_size,
                           read_errors=read_errors, max_examples=config.max_examples)
        reconcile_seconds = time.monotonic() - began
    return summarize(config, stats, elapsed, report, reconcile_seconds)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        signer = make_signer(args)
        config = config_from_args(args)
        HttpClient(config.url, signer, config.timeout)  # validates the URL before anything runs
    except (UsageError, ValueError) as exc:
        print(f"bench/load.py: {exc}", file=sys.stderr)
        return 2
    print(f"load: {config.clients} clients, {config.partitions} partitions of {config.topic} at {config.url}, "
          f"rate {config.rate or 'max'} rec/s for {config.duration} s", file=sys.stderr, flush=True)
    summary = run(config, signer)
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    print(render_table(summary))
    recon = summary["reconciliation"]
    return 0 if recon is None or recon["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
