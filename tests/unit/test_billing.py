"""The S3 billing estimate: arithmetic, class mapping and Prometheus rendering (server.billing, .prometheus)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from llog.errors import ConfigurationError
from llog.store.metrics import OperationCounters, OperationStats
from server.billing import (
    DEFAULT_PRICES,
    GB,
    OPERATION_CLASSES,
    BillingConfig,
    RequestClass,
    S3Prices,
    request_class,
    request_cost,
)
from server.prometheus import prometheus_text

PUT, GET, FREE = RequestClass.PUT_COPY_POST_LIST, RequestClass.GET_AND_OTHER, RequestClass.FREE


def test_list_prices_are_the_defaults() -> None:
    p = DEFAULT_PRICES
    assert (p.region, p.storage_class) == ("us-east-1", "STANDARD")
    assert p.storage_usd_per_gb_month == 0.023
    assert p.put_copy_post_list_usd_per_1000 == 0.005
    assert p.get_and_other_usd_per_10000 == 0.004
    assert p.usd_per_request(PUT) == pytest.approx(0.000005)
    assert p.usd_per_request(GET) == pytest.approx(0.0000004)
    assert p.usd_per_request(FREE) == 0.0


@pytest.mark.parametrize(
    ("operation", "cls"),
    [("put", PUT), ("list", PUT), ("create_bucket", PUT), ("get", GET), ("range_get", GET), ("head", GET),
     ("delete", FREE), ("some_future_op", GET)],
)  # fmt: skip
def test_operations_map_to_s3_request_classes(operation: str, cls: RequestClass) -> None:
    assert request_class(operation) is cls


def test_every_blob_store_operation_has_an_explicit_class() -> None:
    # The names BlobStore records with counters.timed(...); a new one must be classified on purpose.
    source = (Path(__file__).resolve().parents[2] / "llog_layer/llog/store/s3.py").read_text()
    recorded = set(re.findall(r'timed\("([a-z_]+)"\)', source))
    assert recorded == {"put", "head", "get", "range_get", "list", "delete"}
    assert recorded <= set(OPERATION_CLASSES)


def test_request_cost_sums_calls_and_retries_by_class() -> None:
    ops = {
        "put": OperationStats(calls=1_000, errors=3),
        "list": OperationStats(calls=500, retries=500),
        "get": OperationStats(calls=4_000),
        "range_get": OperationStats(calls=6_000),
        "head": OperationStats(calls=10_000),
        "delete": OperationStats(calls=77),
    }
    cost = request_cost(ops)
    assert dict(cost.requests) == {PUT: 2_000, GET: 20_000, FREE: 77}
    # 2,000 PUT/LIST at $0.005 per 1,000 plus 20,000 GET/other at $0.004 per 10,000.
    assert cost.usd == pytest.approx(0.010 + 0.008)


def test_request_cost_of_nothing_is_zero() -> None:
    cost = request_cost({})
    assert dict(cost.requests) == {PUT: 0, GET: 0, FREE: 0}
    assert cost.usd == 0.0


def test_request_cost_reads_a_counters_snapshot() -> None:
    counters = OperationCounters()
    for _ in range(3):
        counters.record("put", 0.01, nbytes=10)
    counters.record("range_get", 0.01, error=True)
    prices = S3Prices(put_copy_post_list_usd_per_1000=1.0, get_and_other_usd_per_10000=10.0)
    cost = request_cost(counters.snapshot(), prices)
    assert cost.usd == pytest.approx(3 * 0.001 + 0.001)


def test_storage_is_priced_per_binary_gigabyte_month() -> None:
    assert GB == 2**30
    assert DEFAULT_PRICES.storage_usd_per_month(GB) == pytest.approx(0.023)
    assert DEFAULT_PRICES.storage_usd_per_month(5 * GB // 2) == pytest.approx(0.0575)
    assert DEFAULT_PRICES.storage_usd_per_month(0) == 0.0


def test_scan_interval_from_the_environment() -> None:
    assert BillingConfig.from_env({}).scan_interval_s == 300
    assert BillingConfig.from_env({"LLOG_BILLING_SCAN_INTERVAL_S": "30"}).scan_interval_s == 30
    assert BillingConfig.from_env({"LLOG_BILLING_SCAN_INTERVAL_S": "0"}).scan_interval_s == 0
    with pytest.raises(ConfigurationError, match="LLOG_BILLING_SCAN_INTERVAL_S"):
        BillingConfig.from_env({"LLOG_BILLING_SCAN_INTERVAL_S": "-1"})
    with pytest.raises(ConfigurationError, match="LLOG_BILLING_SCAN_INTERVAL_S"):
        BillingConfig.from_env({"LLOG_BILLING_SCAN_INTERVAL_S": "5m"})


def _doc(storage: Mapping[str, object]) -> dict[str, object]:
    billing = {
        "assumptions": {
            "region": "us-east-1",
            "storage_class": "STANDARD",
            "storage_usd_per_gb_month": 0.023,
            "put_copy_post_list_usd_per_1000": 0.005,
            "get_and_other_usd_per_10000": 0.004,
        },
        "requests": {"put_copy_post_list": 2, "get_and_other": 5, "free": 0},
        "request_cost_usd": 0.000012,
        "storage": storage,
    }
    return {
        "server": {"started_at_ms": 1_000},
        "http": {"requests": [], "rejected": {}, "connections": 0, "buffered_bytes": 0},
        "oxia": {},
        "s3": {"put": {"calls": 2, "errors": 0, "retries": 0, "bytes": 9, "seconds": 0.1}, "billing": billing},
        "batcher": {"flushes": 0, "flushed_calls": 0, "flushed_bytes": 0, "queue_seconds": 0.0, "call_seconds": 0.0,
                    "flush_seconds": 0.0,
                    "rejected": 0, "buffered_bytes": 0, "in_flight": 0},
        "tail_cache": {"hits": 0, "misses": 0, "bytes": 0, "max_bytes": 0},
    }


def _samples(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line[0] != "#"}


def test_prometheus_renders_billing_with_the_aggregation_advice() -> None:
    storage = {
        "objects": 4, "bytes": 3 * GB, "monthly_cost_usd": 0.069, "scanned_at_ms": 2_000, "scans": 1,
        "scan_failures": 0, "last_error": None,
    }  # fmt: skip
    text = prometheus_text(_doc(storage))
    samples = _samples(text)
    assert samples['llog_s3_billing_requests_total{class="put_copy_post_list"}'] == 2
    assert samples["llog_s3_billing_request_cost_usd_total"] == pytest.approx(0.000012)
    assert samples["llog_s3_billing_stored_objects"] == 4
    assert samples["llog_s3_billing_stored_bytes"] == 3 * GB
    assert samples["llog_s3_billing_storage_monthly_cost_usd"] == pytest.approx(0.069)
    assert samples["llog_s3_billing_scan_timestamp_seconds"] == 2.0
    assert samples["llog_s3_billing_scan_failing"] == 0
    price = 'llog_s3_billing_price_usd{item="put_copy_post_list_request",region="us-east-1",storage_class="STANDARD"}'
    assert samples[price] == pytest.approx(0.000005)
    assert "# TYPE llog_s3_billing_request_cost_usd_total counter" in text
    assert "# TYPE llog_s3_billing_stored_bytes gauge" in text
    for gauge in ("stored_objects", "stored_bytes", "storage_monthly_cost_usd"):
        help_line = next(line for line in text.splitlines() if line.startswith(f"# HELP llog_s3_billing_{gauge} "))
        assert "aggregate with max" in help_line
    # "billing" is not an S3 operation.
    assert 'op="billing"' not in text
    assert all(math.isfinite(v) for v in samples.values())


def test_prometheus_omits_the_footprint_until_a_scan_succeeded() -> None:
    storage = {"objects": None, "scans": 0, "scan_failures": 2, "last_error": "BlobStoreUnavailable: down"}
    samples = _samples(prometheus_text(_doc(storage)))
    assert "llog_s3_billing_stored_bytes" not in samples
    assert samples["llog_s3_billing_scan_failures_total"] == 2
    assert samples["llog_s3_billing_scan_failing"] == 1
    assert samples["llog_s3_billing_request_cost_usd_total"] == pytest.approx(0.000012)
