"""Kinesis API benchmark (issue 41): PutRecords and GetRecords through ``llog serve``'s ``/kinesis`` against the
native ``/produce`` and ``/consume`` of the same records, in the same run.

One local Oxia standalone (fsync on) and one S3 server (VersityGW when installed, else moto) behind one
``python -m server.serve`` with a sealing key file; the benchmark issues itself an access key
(``AccessKeys``, as ``llog keys create`` does) and creates its streams with CreateStream.

* *Put*: wrk's ``connections`` keep-alive connections (``bench.wrk``) send one request back to back, either a
  PutRecords of 500 records of 1 KiB of random bytes (``Data`` base64 in the JSON, 500 distinct partition keys,
  so the 4 shards get about 125 each) or a native ``/produce`` of the same records: each record with its
  partition key as its key and its bytes as ``{"base64": ...}``, in one entry per shard the key hashes to
  (``shard_for``), to the same stream. The arms alternate, ``runs`` of each; every answer is checked
  (``"FailedRecordCount":0``, or every partition acknowledged). The PutRecords request is signed once per run
  with botocore's ``SigV4Auth`` and replayed by wrk (llog, as Kinesis, accepts a signature for five
  minutes): a Python client (boto3) would spend more of the 2 cores signing and encoding than the server
  spends answering, and so measure itself.
* *Get*: one reader, one request at a time, reads a stream of one shard holding ``read_records`` records of
  1 KiB from its start to its tail: GetRecords (``Limit`` 10,000) following ``NextShardIterator`` until
  ``MillisBehindLatest`` is 0, against native ``/consume`` asking for as many bytes (``partition_max_bytes``
  and ``max_bytes`` 10 MiB, capped by ``LLOG_CONSUME_MAX_RESPONSE_BYTES``, 4 MiB by default) following
  ``next_fetch_offset`` to the high watermark. Each request is
  signed as it is sent (the iterator changes) and each answer parsed with ``json.loads`` (blobs left as
  base64 text in both). Alternating, after one unmeasured scan of each.

llog serve's CPU (``/proc``) is counted per 1,000 records for each arm.

    .venv/bin/python bench/kinesis.py [--json] [--seconds S] [--runs N] [--read-records N]
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `bench` importable
    sys.path.insert(0, str(ROOT))

from botocore.auth import SigV4Auth  # noqa: E402
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.credentials import Credentials  # noqa: E402

from bench import load, wrk  # noqa: E402
from bench.serve_processes import Service, llog_serve, running  # noqa: E402
from bench.serve_scenarios import produce_expectation  # noqa: E402
from bench.serve_settings import BUCKET, TIMEOUT_S  # noqa: E402
from bench.stack import local_stack, versitygw_binary  # noqa: E402
from llog.api.kinesis.operations import MAX_GET_RECORDS, MAX_GET_RECORDS_BYTES, MAX_PUT_RECORDS  # noqa: E402
from llog.api.kinesis.shards import shard_for  # noqa: E402
from llog.api.kinesis.wire import JSON_CONTENT_TYPE, TARGET_PREFIX  # noqa: E402
from llog.config import OxiaConfig, root_prefix_from_env  # noqa: E402
from llog.service.keys import AccessKeys, KeyPermissions  # noqa: E402
from llog.store.oxia import OxiaStore  # noqa: E402
from llog.store.sealing import LocalSealer  # noqa: E402

REGION = "us-east-1"
SHARDS = 4  # of the put stream: what CreateStream gives an on-demand stream, and the ingest bench's partitions
RECORDS_PER_PUT = MAX_PUT_RECORDS
RECORD_SIZE = 1024
CONNECTIONS = 16  # the HTTP benchmark's ingest and flush-sharing clients
GET_LIMIT = MAX_GET_RECORDS
GET_MAX_BYTES = MAX_GET_RECORDS_BYTES  # asked of /consume too (which caps its answers)
TARGET_RATIO = 0.8  # Kinesis PutRecords records/s >= 80% of native /produce's (issue 41)
PUT_EXPECT = '"FailedRecordCount":0,'


@dataclass(frozen=True)
class Key:
    """An access key llog issued: what signs the benchmark's Kinesis requests."""

    access_key_id: str
    secret: str

    def sign(self, url: str, operation: str, body: bytes) -> dict[str, str]:
        """The headers of a SigV4-signed Kinesis request of ``operation`` (lower-case names)."""
        headers = {"Content-Type": JSON_CONTENT_TYPE, "X-Amz-Target": TARGET_PREFIX + operation}
        request = AWSRequest(method="POST", url=url, data=body, headers=headers)
        SigV4Auth(Credentials(self.access_key_id, self.secret), "kinesis", REGION).add_auth(request)
        return {name.lower(): str(value) for name, value in request.headers.items()}


def issue_key(serve: Service, address: str) -> Key:
    """A key with every right on every stream, in the Oxia and under the sealing key ``serve`` uses."""
    with OxiaStore(OxiaConfig(address)) as oxia:
        keys = AccessKeys(oxia, root=root_prefix_from_env(serve.env),
                          sealer=LocalSealer.from_file(serve.env["LLOG_KEYS_SEALING_KEY_FILE"]))  # fmt: skip
        key, secret = keys.create("bench-kinesis", KeyPermissions(("*",), read=True, write=True, admin=True))
    return Key(key.access_key_id, secret)


class KinesisClient:
    """One keep-alive connection sending Kinesis requests, each signed as it is sent."""

    def __init__(self, serve: Service, key: Key) -> None:
        self._key = key
        self._url = serve.url + "/kinesis"
        self._connection = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=TIMEOUT_S)

    def call(self, operation: str, document: dict[str, Any]) -> dict[str, Any]:
        body = json.dumps(document).encode()
        self._connection.request("POST", "/kinesis", body=body, headers=self._key.sign(self._url, operation, body))
        response = self._connection.getresponse()
        answer = response.read()
        if response.status != 200:
            raise RuntimeError(f"Kinesis {operation} answered {response.status}: {answer[:300]!r}")
        result: dict[str, Any] = json.loads(answer) if answer else {}
        return result

    def close(self) -> None:
        self._connection.close()


def create_stream(serve: Service, key: Key, shards: int) -> str:
    name = f"bench-kinesis-{uuid.uuid4().hex[:8]}"
    client = KinesisClient(serve, key)
    try:
        client.call("CreateStream", {"StreamName": name, "ShardCount": shards})
    finally:
        client.close()
    return name


# --- put --------------------------------------------------------------------------------------------------------


def random_records(count: int, rng: random.Random) -> list[tuple[str, bytes]]:
    """``count`` records of ``RECORD_SIZE`` random bytes, each with its own partition key."""
    return [(f"key-{i}-{rng.getrandbits(32):08x}", rng.randbytes(RECORD_SIZE)) for i in range(count)]


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def put_records_body(stream: str, records: Sequence[tuple[str, bytes]]) -> bytes:
    entries = [{"Data": _base64(data), "PartitionKey": key} for key, data in records]
    return json.dumps({"StreamName": stream, "Records": entries}).encode()


def native_produce_body(stream: str, records: Sequence[tuple[str, bytes]], shards: int) -> tuple[bytes, int]:
    """The same records as one native produce request: one entry per shard their keys hash to, keys kept;
    with the number of entries."""
    by_shard: dict[int, list[dict[str, Any]]] = {}
    for key, data in records:
        by_shard.setdefault(shard_for(key, None, shards), []).append({"key": key, "value": {"base64": _base64(data)}})
    entries = [{"topic": stream, "partition": p, "records": rs} for p, rs in sorted(by_shard.items())]
    return json.dumps({"topic_partitions": entries}).encode(), len(entries)


@dataclass(frozen=True)
class PutArm:
    """One side of the put comparison: what wrk sends, where, and the text every good answer has."""

    name: str
    path: str
    body: bytes
    expect: str
    headers: Callable[[], dict[str, str]]  # signed afresh for each run


def put_run(serve: Service, arm: PutArm, *, connections: int, seconds: float, records: int) -> dict[str, Any]:
    cpu = serve.cpu_seconds()
    result = wrk.run(serve.url, arm.path, arm.body, clients=connections, seconds=seconds, headers=arm.headers(),
                     expect=arm.expect)  # fmt: skip
    used = serve.cpu_seconds() - cpu
    written = result.ok * records
    row = {
        "arm": arm.name,
        "requests": result.requests,
        "records_per_s": written / result.elapsed if result.elapsed > 0 else 0.0,
        "p50_ms": result.p50_ms,
        "p99_ms": result.p99_ms,
        "server_cpu_ms_per_1000": used * 1000 / written * 1000 if written else None,
        "errors": dict(result.errors),
    }
    if result.errors:  # wrk counts failed answers without keeping one: ask once more, to say why
        row["error_sample"] = error_sample(serve, arm)
    return row


def error_sample(serve: Service, arm: PutArm) -> str:
    headers = arm.headers()
    client = load.HttpClient(serve.url, lambda method, url, body: headers, TIMEOUT_S)
    try:
        status, answer = client.post_json(arm.path, arm.body)
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        client.close()
    return f"{status} {answer[:300].decode(errors='replace')}"


def put_arms(serve: Service, key: Key, stream: str, records: Sequence[tuple[str, bytes]]) -> list[PutArm]:
    kinesis_body = put_records_body(stream, records)
    native_body, entries = native_produce_body(stream, records, SHARDS)
    url = serve.url + "/kinesis"

    def signed() -> dict[str, str]:
        return key.sign(url, "PutRecords", kinesis_body)

    return [PutArm("Kinesis PutRecords", "/kinesis", kinesis_body, PUT_EXPECT, signed),
            PutArm("native /produce", "/produce", native_body, produce_expectation(entries), dict)]  # fmt: skip


# --- get --------------------------------------------------------------------------------------------------------


def fill(serve: Service, stream: str, records: int, rng: random.Random) -> None:
    """``records`` records of ``RECORD_SIZE`` bytes into shard 0 of ``stream``, 500 per native produce."""
    client = load.HttpClient(serve.url, load.no_auth, TIMEOUT_S)
    try:
        for start in range(0, records, RECORDS_PER_PUT):
            body, entries = native_produce_body(stream, random_records(min(RECORDS_PER_PUT, records - start), rng), 1)
            status, answer = client.post_json("/produce", body)
            if status != 200 or produce_expectation(entries).encode() not in answer:
                raise RuntimeError(f"filling {stream}: produce answered {status}: {answer[:300]!r}")
    finally:
        client.close()


def scan_kinesis(client: KinesisClient, stream: str) -> tuple[int, int]:
    """(records, requests) of GetRecords from the start of shard 0 to its tail."""
    iterator = client.call("GetShardIterator", {"StreamName": stream, "ShardId": "shardId-000000000000",
                                                "ShardIteratorType": "TRIM_HORIZON"})["ShardIterator"]  # fmt: skip
    records = requests = 0
    while True:
        answer = client.call("GetRecords", {"ShardIterator": iterator, "Limit": GET_LIMIT})
        records += len(answer["Records"])
        requests += 1
        if answer["MillisBehindLatest"] == 0:
            return records, requests
        iterator = answer["NextShardIterator"]


def scan_native(client: load.HttpClient, stream: str) -> tuple[int, int]:
    """(records, requests) of native consume from offset 1 of partition 0 to its high watermark."""
    offset, records, requests = 1, 0, 0
    while True:
        body = json.dumps({"topic_partitions": [{"topic": stream, "partition": 0, "fetch_offset": offset,
                                                 "partition_max_bytes": GET_MAX_BYTES}],
                           "max_wait_ms": 0, "min_bytes": 0, "max_bytes": GET_MAX_BYTES}).encode()  # fmt: skip
        status, answer = client.post_json("/consume", body)
        result = json.loads(answer)["results"][0] if status == 200 else None
        if result is None or not result["ok"]:
            raise RuntimeError(f"consume answered {status}: {answer[:300]!r}")
        records += len(result["records"])
        requests += 1
        offset = result["next_fetch_offset"]
        if offset > result["high_watermark"]:
            return records, requests


def get_run(serve: Service, name: str, scan: Callable[[], tuple[int, int]], expected: int) -> dict[str, Any]:
    cpu, client_cpu, began = serve.cpu_seconds(), time.process_time(), time.perf_counter()
    records, requests = scan()
    elapsed, client_used = time.perf_counter() - began, time.process_time() - client_cpu
    used = serve.cpu_seconds() - cpu
    if records != expected:
        raise RuntimeError(f"{name} read {records} records, not {expected}")
    return {"arm": name, "records": records, "requests": requests, "records_per_s": records / elapsed,
            "server_cpu_ms_per_1000": used * 1000 / records * 1000,
            "client_cpu_ms_per_1000": client_used * 1000 / records * 1000}  # fmt: skip


# --- the run ----------------------------------------------------------------------------------------------------


def medians(rows: Sequence[dict[str, Any]], keys: Sequence[str]) -> dict[str, Any]:
    """Per arm (in first-seen order): the median of each of ``keys`` over its runs, and its runs' errors."""
    arms: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        arms.setdefault(row["arm"], []).append(row)
    out = {}
    for arm, runs in arms.items():
        summary: dict[str, Any] = {"runs": len(runs), "samples": [r["records_per_s"] for r in runs]}
        for key in keys:
            values = [r[key] for r in runs if r.get(key) is not None]
            summary[key] = statistics.median(values) if values else None
        errors: dict[str, int] = {}
        for r in runs:
            for kind, n in r.get("errors", {}).items():
                errors[kind] = errors.get(kind, 0) + n
        summary["errors"] = errors
        out[arm] = summary
    return out


def alternating(count: int, arms: Sequence[Any]) -> list[Any]:
    """``count`` rounds of the arms, each round in the other order from the one before (noise hits both)."""
    return [arm for i in range(count) for arm in (arms if i % 2 == 0 else list(reversed(arms)))]


def run(*, connections: int = CONNECTIONS, seconds: float = 5.0, runs: int = 3, read_records: int = 50_000
        ) -> dict[str, Any]:  # fmt: skip
    s3_server = "versitygw" if versitygw_binary() is not None else "moto"
    print(f"kinesis benchmark: Oxia standalone (fsync on) and {s3_server} S3", file=sys.stderr, flush=True)
    rng = random.Random(41)
    with ExitStack() as stack:
        address, s3 = stack.enter_context(local_stack(BUCKET, s3_server=s3_server))
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        serve = llog_serve("serve-kinesis", address, s3, tmp,
                           {"LLOG_KEYS_SEALING_KEY_FILE": str(tmp / "sealing.key")})  # fmt: skip
        stack.enter_context(running([serve]))
        key = issue_key(serve, address)
        put_stream = create_stream(serve, key, SHARDS)
        arms = put_arms(serve, key, put_stream, random_records(RECORDS_PER_PUT, rng))
        for arm in arms:  # the first request of each (connections, the stream's description) is not measured
            put_run(serve, arm, connections=1, seconds=1, records=RECORDS_PER_PUT)
        put_rows = [put_run(serve, arm, connections=connections, seconds=seconds, records=RECORDS_PER_PUT)
                    for arm in alternating(runs, arms)]  # fmt: skip

        read_stream = create_stream(serve, key, 1)
        fill(serve, read_stream, read_records, rng)
        # Opened now: the server closes a connection left idle through the puts.
        client, native = KinesisClient(serve, key), load.HttpClient(serve.url, load.no_auth, TIMEOUT_S)
        stack.callback(client.close)
        stack.callback(native.close)
        scans = [("Kinesis GetRecords", lambda: scan_kinesis(client, read_stream)),
                 ("native /consume", lambda: scan_native(native, read_stream))]  # fmt: skip
        for name, scan in scans:  # warm: the tail cache or S3, and the connections
            get_run(serve, name, scan, read_records)
        get_rows = [get_run(serve, name, scan, read_records) for name, scan in alternating(runs, scans)]
    return {
        "s3_server": s3_server,
        "cores": os.cpu_count(),
        "put": {"connections": connections, "seconds": seconds, "records_per_request": RECORDS_PER_PUT,
                "record_size": RECORD_SIZE, "shards": SHARDS, "rows": put_rows,
                "arms": medians(put_rows, ("records_per_s", "p50_ms", "p99_ms", "server_cpu_ms_per_1000"))},
        "get": {"records": read_records, "record_size": RECORD_SIZE, "limit": GET_LIMIT, "rows": get_rows,
                "arms": medians(get_rows, ("records_per_s", "requests", "server_cpu_ms_per_1000",
                                           "client_cpu_ms_per_1000"))},
    }  # fmt: skip


# --- the report -------------------------------------------------------------------------------------------------


def _number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def ratio(results: dict[str, Any], phase: str) -> float:
    kinesis, native = (results[phase]["arms"][name]["records_per_s"] for name in arm_names(phase))
    return float(kinesis / native) if native else 0.0


def arm_names(phase: str) -> tuple[str, str]:
    return ("Kinesis PutRecords", "native /produce") if phase == "put" else ("Kinesis GetRecords", "native /consume")


def report(results: dict[str, Any]) -> str:
    put, get = results["put"], results["get"]
    lines = [f"S3 server: **{results['s3_server']}**; {results['cores']} cores shared by llog serve, wrk or the "
             "reader, Oxia and the S3 server.", "",
             f"| put: {put['connections']} connections, {put['records_per_request']} records of "
             f"{put['record_size']} B per request over {put['shards']} shards, {put['seconds']:.0f} s a run | runs "
             "| records/s (median) | each run | MB/s | p50 ms | p99 ms | llog serve CPU ms per 1,000 records "
             "| errors |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name in arm_names("put"):
        arm = put["arms"][name]
        lines.append(f"| {name} | {arm['runs']} | {_number(arm['records_per_s'], 0)} | "
                     f"{', '.join(_number(s, 0) for s in arm['samples'])} | "
                     f"{_number(arm['records_per_s'] * put['record_size'] / 1e6, 2)} | {_number(arm['p50_ms'])} | "
                     f"{_number(arm['p99_ms'])} | {_number(arm['server_cpu_ms_per_1000'], 0)} | "
                     f"{sum(arm['errors'].values())} |")  # fmt: skip
    lines += ["", f"| get: one reader, {get['records']:,} records of {get['record_size']} B on one shard, start "
              "to tail | runs | records/s (median) | each run | requests per scan | llog serve CPU ms per 1,000 "
              "records | reader CPU ms per 1,000 records |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for name in arm_names("get"):
        arm = get["arms"][name]
        lines.append(f"| {name} | {arm['runs']} | {_number(arm['records_per_s'], 0)} | "
                     f"{', '.join(_number(s, 0) for s in arm['samples'])} | {_number(arm['requests'], 0)} | "
                     f"{_number(arm['server_cpu_ms_per_1000'], 0)} | "
                     f"{_number(arm['client_cpu_ms_per_1000'], 0)} |")  # fmt: skip
    put_ratio, get_ratio = ratio(results, "put"), ratio(results, "get")
    verdict = "met" if put_ratio >= TARGET_RATIO else "**not met**"
    lines += ["", "Ratios from this run (medians):", "",
              f"* PutRecords records/s / native /produce's: {put_ratio:.2f} (≥ {TARGET_RATIO}): {verdict}",
              f"* GetRecords records/s / native /consume's: {get_ratio:.2f}"]  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/kinesis.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of the tables")
    parser.add_argument("--connections", type=int, default=CONNECTIONS, help="wrk's connections for the puts")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of one put run")
    parser.add_argument("--runs", type=int, default=3, help="runs of each arm, alternating")
    parser.add_argument("--read-records", type=int, default=50_000, help="records in the stream the reads scan")
    args = parser.parse_args(argv)
    try:
        results = run(connections=args.connections, seconds=args.seconds, runs=args.runs,
                      read_records=args.read_records)  # fmt: skip
    except Exception as exc:
        print(f"Not measured here: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(results, indent=2) if args.json else report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
