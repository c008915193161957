"""``llog serve``'s ``/metrics`` document, and the same in Prometheus' text exposition format."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from llog.store.metrics import OperationCounters


def operations_json(counters: OperationCounters) -> dict[str, dict[str, float]]:
    return {
        op: {"calls": st.calls, "errors": st.errors, "retries": st.retries, "bytes": st.bytes, "seconds": st.seconds}
        for op, st in sorted(counters.snapshot().items())
    }


BILLING = "billing"  # the key of the billing estimate inside the "s3" section, next to the operations


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


Family = Callable[[str, str, str, Iterable[tuple[dict[str, object], float]]], None]


def _billing_families(family: Family, billing: dict[str, Any]) -> None:
    """``s3.billing`` as Prometheus families: request cost sums across processes, the footprint does not."""
    a = billing["assumptions"]
    prices = [
        ("storage_gb_month", a["storage_usd_per_gb_month"]),
        ("put_copy_post_list_request", a["put_copy_post_list_usd_per_1000"] / 1_000),
        ("get_and_other_request", a["get_and_other_usd_per_10000"] / 10_000),
    ]
    family(
        "llog_s3_billing_price_usd",
        "gauge",
        "Price assumed by the S3 billing estimate (list price, USD), by item.",
        [({"item": item, "region": a["region"], "storage_class": a["storage_class"]}, usd) for item, usd in prices],
    )
    family(
        "llog_s3_billing_requests_total",
        "counter",
        "S3 requests of this process by billing class (failed calls included); sum across processes.",
        [({"class": cls}, n) for cls, n in billing["requests"].items()],
    )
    family(
        "llog_s3_billing_request_cost_usd_total",
        "counter",
        "Estimated S3 request cost of this process (USD); sum across processes.",
        [({}, billing["request_cost_usd"])],
    )
    storage = billing["storage"]
    shared = "describes the shared bucket prefix: aggregate with max across processes, not sum."
    if storage["objects"] is not None:
        for name, key, what in (
            ("llog_s3_billing_stored_objects", "objects", "Objects under the root prefix at the last scan"),
            ("llog_s3_billing_stored_bytes", "bytes", "Bytes under the root prefix at the last scan"),
            (
                "llog_s3_billing_storage_monthly_cost_usd",
                "monthly_cost_usd",
                "Estimated monthly S3 Standard storage cost of the last scanned footprint (USD)",
            ),
        ):
            family(name, "gauge", f"{what}; {shared}", [({}, storage[key])])
        family(
            "llog_s3_billing_scan_timestamp_seconds",
            "gauge",
            "Time of the last successful footprint scan (Unix seconds).",
            [({}, storage["scanned_at_ms"] / 1000)],
        )
    family("llog_s3_billing_scans_total", "counter", "Successful footprint scans.", [({}, storage["scans"])])
    failures = storage["scan_failures"]
    family("llog_s3_billing_scan_failures_total", "counter", "Failed footprint scans.", [({}, failures)])
    family(
        "llog_s3_billing_scan_failing",
        "gauge",
        "1 while the latest footprint scan has failed (the last footprint is kept).",
        [({}, 0 if storage["last_error"] is None else 1)],
    )


def prometheus_text(doc: dict[str, Any]) -> str:
    """The ``/metrics`` document in Prometheus' text exposition format (version 0.0.4)."""
    lines: list[str] = []

    def family(name: str, kind: str, help_text: str, samples: Iterable[tuple[dict[str, object], float]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            rendered = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
            number = str(value) if isinstance(value, int) else repr(float(value))
            lines.append(f"{name}{{{rendered}}} {number}" if rendered else f"{name} {number}")

    http = doc["http"]["requests"]
    family("llog_up", "gauge", "1 while llog serve runs.", [({}, 1)])
    started = doc["server"]["started_at_ms"] / 1000
    family("llog_started_at_seconds", "gauge", "Start time (Unix seconds).", [({}, started)])
    key = ("method", "route", "status")
    family(
        "llog_http_requests_total",
        "counter",
        "HTTP requests by method, route and status.",
        [({k: r[k] for k in key}, r["count"]) for r in http],
    )
    family(
        "llog_http_request_seconds_total",
        "counter",
        "Time spent answering HTTP requests.",
        [({k: r[k] for k in key}, r["seconds"]) for r in http],
    )
    for field, name, help_text in (
        ("calls", "llog_storage_operations_total", "Storage calls by store and operation."),
        ("errors", "llog_storage_operation_errors_total", "Failed storage calls."),
        ("retries", "llog_storage_operation_retries_total", "Retried storage calls."),
        ("bytes", "llog_storage_operation_bytes_total", "Bytes moved by storage calls."),
        ("seconds", "llog_storage_operation_seconds_total", "Time spent in storage calls."),
    ):
        samples = [
            ({"store": store, "op": op}, stats[field])
            for store in ("oxia", "s3")
            for op, stats in doc[store].items()
            if op != BILLING
        ]
        family(name, "counter", help_text, samples)
    if BILLING in doc["s3"]:
        _billing_families(family, doc["s3"][BILLING])
    b = doc["batcher"]
    family("llog_batcher_flushes_total", "counter", "Shared WAL blobs written by the batcher.", [({}, b["flushes"])])
    family(
        "llog_batcher_flushed_calls_total", "counter", "Produce calls written by those flushes (calls per blob: "
        "this over flushes).", [({}, b["flushed_calls"])],
    )
    family("llog_batcher_rejected_total", "counter", "Produce calls refused (back-pressure).", [({}, b["rejected"])])
    family("llog_batcher_buffered_bytes", "gauge", "Bytes waiting to be flushed.", [({}, b["buffered_bytes"])])
    family("llog_batcher_in_flight", "gauge", "Flushes being written now.", [({}, b["in_flight"])])
    cache = doc["tail_cache"]
    family("llog_tail_cache_hits_total", "counter", "Tail cache lookups that hit.", [({}, cache["hits"])])
    family("llog_tail_cache_misses_total", "counter", "Tail cache lookups that missed.", [({}, cache["misses"])])
    family("llog_tail_cache_bytes", "gauge", "Bytes held by the tail cache.", [({}, cache["bytes"])])
    family("llog_tail_cache_max_bytes", "gauge", "Tail cache capacity (0: disabled).", [({}, cache["max_bytes"])])
    return "\n".join(lines) + "\n"
