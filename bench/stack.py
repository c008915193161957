"""What the Oxia-backed benchmarks share (bench/append.py, bench/consume.py, bench/serve.py): the local services,
op counting and how their rows are printed.

``local_stack`` runs a local Oxia standalone and an S3 server (moto's, or
VersityGW when asked and installed) for the length of a benchmark. When no
Oxia server can be had it raises with the reason (``make setup`` records why
in ``.tools/oxia-unavailable``) before starting anything; the benchmarks
report that as "Not measured here: <reason>".
"""

from __future__ import annotations

import json
import logging
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from devserver.devstack import MotoS3, OxiaProcess, VersityGW, find_oxia_binary, find_versitygw_binary
from llog.config import OxiaConfig, S3Config
from llog.format.keys import S3Location
from llog.store.metrics import OperationStats
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore

ROOT = Path(__file__).resolve().parents[1]

# Oxia operations (llog.store.oxia) that read, and that write.
READ_OPS = frozenset({"get", "get_ceiling", "get_lower", "range_scan", "list"})
WRITE_OPS = frozenset({"put", "put_sequential", "delete", "delete_range"})
# S3 operations (llog.store.s3) that are GET requests: whole-object and range GETs.
S3_GET_OPS = frozenset({"get", "range_get"})


def oxia_binary() -> str:
    """The Oxia server binary (``$OXIA_BIN``, PATH, ``.tools/bin``); raises with the reason if there is none."""
    binary = find_oxia_binary([ROOT / ".tools" / "bin"])
    if binary is None:
        reason_file = ROOT / ".tools" / "oxia-unavailable"
        raise RuntimeError(reason_file.read_text().strip() if reason_file.exists() else "no Oxia binary")
    return binary


def versitygw_binary() -> str | None:
    """VersityGW (``$VERSITYGW_BIN``, PATH, ``.tools/bin``: scripts/install-versitygw.sh), or None."""
    return find_versitygw_binary([ROOT / ".tools" / "bin"])


@contextmanager
def local_stack(bucket: str, *, fsync: bool = True, s3_server: str = "moto") -> Iterator[tuple[str, S3Config]]:
    """An Oxia standalone and an S3 server with ``bucket`` created: ``(oxia address, S3 config)``.

    ``s3_server``: ``"moto"`` (in memory) or ``"versitygw"`` (a real S3 server, objects on disk in a temporary
    directory; raises when it is not installed).
    """
    binary = oxia_binary()
    # moto's server logs every request through werkzeug: thousands of lines per benchmark.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        oxia = OxiaProcess(binary, Path(tmp), fsync=fsync)
        s3: MotoS3 | VersityGW
        if s3_server == "versitygw":
            vgw = versitygw_binary()
            if vgw is None:
                raise RuntimeError("no VersityGW binary (scripts/install-versitygw.sh)")
            s3 = VersityGW(vgw, Path(tmp) / "s3")
        else:
            s3 = MotoS3()
        oxia.start()
        try:
            s3.start()
            try:
                yield oxia.address, s3.create_bucket(bucket)
            finally:
                s3.stop()
        finally:
            oxia.stop()


def stack_env(address: str, s3_config: S3Config, bucket: str) -> dict[str, str]:
    """The LLOG_* settings that point a process (``llog serve``, a handler) at a local stack."""
    return {
        "LLOG_OXIA_SERVICE_ADDRESS": address,
        "LLOG_S3_BUCKET": bucket,
        "LLOG_S3_ENDPOINT_URL": s3_config.endpoint_url or "",
        "LLOG_S3_REGION_NAME": s3_config.region_name or "us-east-1",
        "LLOG_S3_ACCESS_KEY_ID": s3_config.access_key_id or "testing",
        "LLOG_S3_SECRET_ACCESS_KEY": s3_config.secret_access_key or "testing",
    }


def stats_diff(before: dict[str, OperationStats], after: dict[str, OperationStats]) -> dict[str, OperationStats]:
    """Per operation, what happened between two ``OperationCounters.snapshot()`` calls."""
    out = {}
    for op, a in after.items():
        b = before.get(op, OperationStats())
        out[op] = OperationStats(
            calls=a.calls - b.calls,
            errors=a.errors - b.errors,
            retries=a.retries - b.retries,
            bytes=a.bytes - b.bytes,
            seconds=a.seconds - b.seconds,
            conflicts=a.conflicts - b.conflicts,
        )
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def median_of_runs(samples: list[dict[str, Any]], keys: Iterable[str]) -> dict[str, Any]:
    """The median of each of ``keys`` over the runs; everything else from the first run."""
    row = dict(samples[0])
    for key in keys:
        row[key] = statistics.median(s[key] for s in samples)
    row["runs"] = len(samples)
    return row


def measure_floor(address: str, s3_config: S3Config, bucket: str, *, samples: int = 200) -> dict[str, float]:
    """Medians of what one append cannot avoid, on the same servers: a 100-byte S3 PUT and an Oxia put.

    One client each, warmed up, one request at a time: the physical floor an
    idle single-record append is compared with.
    """
    blobs = BlobStore(s3_config)
    s3_ms, oxia_ms = [], []
    with OxiaStore(OxiaConfig(address)) as oxia:
        prefix = f"floor-{uuid.uuid4().hex[:8]}"
        for i in range(samples + 10):  # the first 10 warm the connections up
            t0 = time.perf_counter()
            blobs.put(S3Location(bucket, f"{prefix}/{i}"), b"x" * 100)
            t1 = time.perf_counter()
            oxia.put(f"{prefix}/{i}", b"x" * 100, partition_key=prefix)
            t2 = time.perf_counter()
            if i >= 10:
                s3_ms.append((t1 - t0) * 1000)
                oxia_ms.append((t2 - t1) * 1000)
    s3_put, oxia_put = statistics.median(s3_ms), statistics.median(oxia_ms)
    return {"s3_put_p50_ms": s3_put, "oxia_put_p50_ms": oxia_put, "floor_ms": s3_put + oxia_put}


def print_rows(
    measure: Callable[[], list[dict[str, Any]]], report: Callable[[list[dict[str, Any]]], str], *, as_json: bool
) -> int:
    """Prints the rows ``measure`` returns, as JSON or as ``report`` has them; the benchmark's exit status.

    When ``measure`` fails (no Oxia server on this machine) it says so, as make bench does, and returns 2.
    """
    try:
        rows = measure()
    except Exception as exc:
        print(f"Not measured here: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(rows, indent=2) if as_json else report(rows))
    return 0
