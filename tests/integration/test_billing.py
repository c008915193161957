"""The S3 billing estimate against the session's moto S3 server: the cached footprint scan and ``/metrics``.

The scan's interval, its LIST requests and its failure handling are checked
on a real botocore client; ``llog serve`` runs with Oxia unreachable (nothing
here needs Oxia).
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import botocore.exceptions
import pytest

from llog.config import S3Config
from llog.format.keys import S3Location
from llog.store.s3 import BlobStore
from server.billing import GB, FootprintScanner, S3Billing
from server.serve import LlogServer
from tests.conftest import BUCKET, serve_env, start_server, unreachable_oxia_env


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class ListFailure:
    """Fail every ListObjectsV2 call while ``on`` (botocore's before-send hook, so nothing reaches moto)."""

    def __init__(self, store: BlobStore) -> None:
        self.on = False
        store.events.register("before-send.s3.ListObjectsV2", self)

    def __call__(self, request: Any, **_: Any) -> None:
        if self.on:
            raise botocore.exceptions.EndpointConnectionError(endpoint_url=request.url)


@pytest.fixture
def store(s3_config: S3Config) -> BlobStore:
    return BlobStore(S3Config(**{**s3_config.__dict__, "max_attempts": 1}))


def put_objects(store: BlobStore, prefix: str, sizes: list[int]) -> None:
    for size in sizes:
        store.put(S3Location(BUCKET, f"{prefix}{uuid.uuid4()}"), b"x" * size)


def list_calls(store: BlobStore) -> int:
    stats = store.counters.snapshot().get("list")
    return 0 if stats is None else stats.calls


def test_the_scan_counts_objects_and_bytes_under_the_prefix_only(store: BlobStore, root: str) -> None:
    put_objects(store, f"{root}/wal-shared/", [10, 20])
    put_objects(store, f"{root}/orders/partitions/0/data/compacted/", [300])
    put_objects(store, f"{root}-other/", [5_000])  # shares the characters of the prefix, not the prefix
    scanner = FootprintScanner(store, BUCKET, f"{root}/", interval_s=60, background=False)

    status = scanner.status()

    assert status.footprint is not None
    assert (status.footprint.objects, status.footprint.bytes) == (3, 330)
    assert (status.scans, status.failures, status.last_error) == (1, 0, None)


def test_the_interval_is_honoured_and_each_scan_is_counted_as_list(store: BlobStore, root: str) -> None:
    put_objects(store, f"{root}/a/", [1])
    clock = Clock()
    scanner = FootprintScanner(store, BUCKET, f"{root}/", interval_s=300, background=False, clock=clock)

    first = scanner.status().footprint
    put_objects(store, f"{root}/b/", [2])
    clock.now += 299
    cached = scanner.status().footprint
    assert first is not None
    assert cached == first  # within the interval: the cached value, no request
    assert list_calls(store) == 1

    clock.now += 1
    fresh = scanner.status().footprint
    assert fresh is not None
    assert (fresh.objects, fresh.bytes) == (2, 3)
    assert list_calls(store) == 2
    assert scanner.status().scans == 2


def test_the_scan_pauses_after_each_page_for_19_times_the_cpu_the_page_took(store: BlobStore, root: str) -> None:
    put_objects(store, f"{root}/a/", [1] * 5)
    cpu = Clock()
    pauses: list[float] = []

    def list_then_burn(*args: Any, **kwargs: Any) -> Iterator[Any]:
        for info in BlobStore.list(store, *args, **kwargs):
            cpu.now += 0.010  # what taking an object from a page costs, on the scan's own CPU clock
            yield info

    store.list = list_then_burn  # type: ignore[method-assign]
    scanner = FootprintScanner(
        store, BUCKET, f"{root}/", interval_s=60, background=False, cpu_clock=cpu, sleep=pauses.append, page_objects=2
    )

    footprint = scanner.status().footprint

    assert footprint is not None
    assert footprint.objects == 5
    assert pauses == pytest.approx([0.38, 0.38])  # after objects 2 and 4: 20 ms of CPU each, 5% of a core


def test_a_failed_scan_keeps_the_last_footprint_and_is_reported(store: BlobStore, root: str) -> None:
    put_objects(store, f"{root}/a/", [7])
    failure = ListFailure(store)
    clock = Clock()
    scanner = FootprintScanner(store, BUCKET, f"{root}/", interval_s=10, background=False, clock=clock)
    before = scanner.status().footprint

    failure.on = True
    clock.now += 10
    failed = scanner.status()
    assert failed.footprint == before
    assert failed.failures == 1
    assert failed.last_error is not None
    assert failed.last_error.startswith("BlobStoreUnavailable")
    assert failed.last_error_at_ms is not None

    clock.now += 5  # a failure is not retried before the interval either
    assert scanner.status().failures == 1

    failure.on = False
    clock.now += 5
    recovered = scanner.status()
    assert (recovered.scans, recovered.failures, recovered.last_error) == (2, 1, None)


def test_a_scan_of_a_missing_bucket_is_reported_not_raised(store: BlobStore) -> None:
    scanner = FootprintScanner(store, "no-such-bucket-llog-billing", "llog/", interval_s=10, background=False)
    status = scanner.status()
    assert status.footprint is None
    assert status.last_error is not None
    assert "NoSuchBucket" in status.last_error


def test_a_background_scan_does_not_hold_up_the_caller(store: BlobStore, root: str) -> None:
    put_objects(store, f"{root}/a/", [4, 4])
    scanner = FootprintScanner(store, BUCKET, f"{root}/", interval_s=300)
    scanner.status()  # starts the scan
    deadline = time.monotonic() + 10
    while (found := scanner.status().footprint) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert found is not None
    assert (found.objects, found.bytes) == (2, 8)


def test_scanning_can_be_turned_off(store: BlobStore, root: str) -> None:
    scanner = FootprintScanner(store, BUCKET, f"{root}/", interval_s=0, background=False)
    assert scanner.status().footprint is None
    assert list_calls(store) == 0


def test_the_report_prices_requests_and_footprint(store: BlobStore, root: str) -> None:
    put_objects(store, f"{root}/a/", [1_000, 24])
    store.get_range(S3Location(BUCKET, next(iter(store.list(BUCKET, f"{root}/a/"))).key), 0, 1)
    billing = S3Billing(FootprintScanner(store, BUCKET, f"{root}/", interval_s=60, background=False))

    report = billing.report()

    # 2 PUTs and the test's own listing, then the scan's LIST; 1 range GET.
    assert report["requests"] == {"put_copy_post_list": 4, "get_and_other": 1, "free": 0}
    assert report["request_cost_usd"] == pytest.approx(4 * 0.005 / 1000 + 0.004 / 10_000)
    storage = report["storage"]
    assert (storage["objects"], storage["bytes"]) == (2, 1_024)
    assert storage["gb"] == pytest.approx(1_024 / GB)
    assert storage["monthly_cost_usd"] == pytest.approx(1_024 / GB * 0.023)
    assert storage["prefix"] == f"{root}/"
    assert report["assumptions"]["operation_classes"]["range_get"] == "get_and_other"
    assert "KMS" in report["assumptions"]["excludes"]


# --- llog serve without Oxia ----------------------------------------------------------------------


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, s3_config: S3Config, root: str) -> Iterator[LlogServer]:
    env = {**serve_env(s3_config, root), **unreachable_oxia_env(),
           "LLOG_S3_MAX_ATTEMPTS": "1", "LLOG_BILLING_SCAN_INTERVAL_S": "3600"}  # fmt: skip
    srv = start_server(monkeypatch, env)
    try:
        yield srv
    finally:
        srv.shutdown()


def get(srv: LlogServer, path: str) -> bytes:
    with urllib.request.urlopen(srv.url + path, timeout=10) as resp:
        assert resp.status == 200
        body: bytes = resp.read()
        return body


def billing_when_scanned(srv: LlogServer) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        billing: dict[str, Any] = json.loads(get(srv, "/metrics"))["s3"]["billing"]
        if billing["storage"]["objects"] is not None or time.monotonic() > deadline:
            return billing
        time.sleep(0.05)


def test_metrics_carry_the_s3_billing_estimate(server: LlogServer, store: BlobStore, root: str) -> None:
    put_objects(store, f"{root}/wal-shared/", [100, 200, 300])

    billing = billing_when_scanned(server)

    storage = billing["storage"]
    assert (storage["objects"], storage["bytes"]) == (3, 600)
    assert storage["monthly_cost_usd"] == pytest.approx(600 / GB * 0.023)
    assert (storage["prefix"], storage["bucket"], storage["scan_interval_s"]) == (f"{root}/", BUCKET, 3600)
    assert storage["last_error"] is None
    assert billing["assumptions"]["region"] == "us-east-1"
    doc = json.loads(get(server, "/metrics"))
    assert doc["s3"]["list"]["calls"] >= 1  # the scan is an ordinary, counted S3 listing
    assert billing["requests"]["put_copy_post_list"] >= 1
    assert billing["request_cost_usd"] > 0

    text = get(server, "/metrics/prometheus").decode()
    assert "llog_s3_billing_stored_objects 3.0\n" in text
    assert "llog_s3_billing_stored_bytes 600.0\n" in text
    assert 'llog_storage_operations_total{op="list",store="s3"}' in text
    assert 'op="billing"' not in text


def test_metrics_survive_a_failing_scan(server: LlogServer) -> None:
    failure = ListFailure(server.services.blobs)
    failure.on = True
    server.services.billing.scanner.scan()

    doc = json.loads(get(server, "/metrics"))
    storage = doc["s3"]["billing"]["storage"]
    assert storage["last_error"] is not None
    assert storage["scan_failures"] >= 1
    text = get(server, "/metrics/prometheus").decode()
    assert "llog_s3_billing_scan_failing 1.0\n" in text
