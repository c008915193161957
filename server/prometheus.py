"""``llog serve``'s ``/metrics`` document, and the same in Prometheus' text exposition format (prometheus_client)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from llog.service.groups import PartitionLag
from llog.store.metrics import OperationCounters

log = logging.getLogger(__name__)

LAG_REFRESH_S = 15.0  # a usual Prometheus scrape interval: one read of every group per scrape at most


class ConsumerLagReport:
    """``groups`` of ``/metrics``: every consumer group's lag per partition, read on a background thread.

    Reading the report starts a refresh when the last one began ``LAG_REFRESH_S``
    ago or more, and answers with the last result: ``/metrics`` never waits on
    Oxia, nor fails with it (``last_error`` until a refresh succeeds).
    """

    def __init__(
        self,
        lags: Callable[[], list[PartitionLag]],
        *,
        refresh_s: float = LAG_REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._lags = lags
        self.refresh_s = refresh_s
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._result: list[dict[str, Any]] = []
        self._refreshed_at_ms: int | None = None
        self._last_error: str | None = None
        self._last_start: float | None = None
        self._running = False

    def report(self) -> dict[str, Any]:
        with self._lock:
            due = self._last_start is None or self._clock() - self._last_start >= self.refresh_s
            start = due and not self._running
            if start:
                self._running, self._last_start = True, self._clock()
            report = {
                "lag": list(self._result),
                "refreshed_at_ms": self._refreshed_at_ms,
                "refreshing": self._running,
                "last_error": self._last_error,
            }
        if start:
            threading.Thread(target=self._refresh, name="llog-group-lag", daemon=True).start()
        return report

    def _refresh(self) -> None:
        try:
            found = [{"group": lag.group, **lag.to_json()} for lag in self._lags()]
        except Exception as exc:  # /metrics must outlive any Oxia failure
            log.warning("reading the consumer groups' lag failed: %s", exc)
            with self._lock:
                self._last_error, self._running = f"{type(exc).__name__}: {exc}", False
            return
        with self._lock:
            self._result, self._refreshed_at_ms = found, int(self._wall_clock() * 1000)
            self._last_error, self._running = None, False


def operations_json(counters: OperationCounters) -> dict[str, dict[str, float]]:
    return {
        op: {"calls": st.calls, "errors": st.errors, "retries": st.retries, "bytes": st.bytes, "seconds": st.seconds}
        for op, st in sorted(counters.snapshot().items())
    }


BILLING = "billing"  # the key of the billing estimate inside the "s3" section, next to the operations


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


class DocumentCollector(Collector):
    """The metric families of one ``/metrics`` document, for prometheus_client to render."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self._doc = doc

    def collect(self) -> Iterator[Metric]:
        metrics: list[Metric] = []

        def family(name: str, kind: str, help_text: str, samples: Iterable[tuple[dict[str, object], float]]) -> None:
            samples = list(samples)
            labels = list(samples[0][0]) if samples else []
            kind_family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            metric = kind_family(name, help_text, labels=labels)
            for sample_labels, value in samples:
                metric.add_metric([str(v) for v in sample_labels.values()], value)
            metrics.append(metric)

        _families(family, self._doc)
        return iter(metrics)


def prometheus_text(doc: dict[str, Any]) -> str:
    """The ``/metrics`` document in Prometheus' text exposition format (version 0.0.4), by prometheus_client."""
    return generate_latest(DocumentCollector(doc)).decode()


def _families(family: Family, doc: dict[str, Any]) -> None:
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
    server = doc["http"]
    family(
        "llog_http_rejected_total",
        "counter",
        "Requests and connections the HTTP server refused itself, by reason (server/http11.py REJECTIONS).",
        [({"reason": reason}, count) for reason, count in server["rejected"].items()],
    )
    family("llog_http_connections", "gauge", "Connections open.", [({}, server["connections"])])
    family(
        "llog_http_buffered_bytes",
        "gauge",
        "Request body bytes held by all connections (received, answer not written).",
        [({}, server["buffered_bytes"])],
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
    family("llog_batcher_flushed_bytes_total", "counter", "Record bytes of those flushes.",
           [({}, b["flushed_bytes"])])  # fmt: skip
    family(
        "llog_batcher_queue_seconds_total", "counter", "Time produce calls waited for their flush to start, summed "
        "over calls (mean wait: this over flushed calls).", [({}, b["queue_seconds"])],
    )
    family(
        "llog_batcher_call_seconds_total", "counter", "Time produce calls spent in the batcher, waiting and in their "
        "flush's write, summed over calls (mean: this over flushed calls).", [({}, b["call_seconds"])],
    )
    family(
        "llog_batcher_flush_seconds_total", "counter", "Time flushes spent writing (S3 PUT, Oxia commits), summed "
        "over flushes (mean flush: this over flushes; a flush weighs once, however many calls it holds).",
        [({}, b["flush_seconds"])],
    )
    family("llog_batcher_rejected_total", "counter", "Produce calls refused (back-pressure).", [({}, b["rejected"])])
    family("llog_batcher_buffered_bytes", "gauge", "Bytes waiting to be flushed.", [({}, b["buffered_bytes"])])
    family("llog_batcher_in_flight", "gauge", "Flushes being written now.", [({}, b["in_flight"])])
    cache = doc["tail_cache"]
    family("llog_tail_cache_hits_total", "counter", "Tail cache lookups that hit.", [({}, cache["hits"])])
    family("llog_tail_cache_misses_total", "counter", "Tail cache lookups that missed.", [({}, cache["misses"])])
    family("llog_tail_cache_bytes", "gauge", "Bytes held by the tail cache.", [({}, cache["bytes"])])
    family("llog_tail_cache_max_bytes", "gauge", "Tail cache capacity (0: disabled).", [({}, cache["max_bytes"])])
    if "groups" in doc:
        _group_families(family, doc["groups"])
    if "process" in doc:
        _collector_families(family, doc["process"]["gc"])


def _group_families(family: Family, groups: dict[str, Any]) -> None:
    """Consumer lag per group and partition (shared state: aggregate with max across processes, never sum)."""
    labelled = [({k: lag[k] for k in ("group", "topic", "partition")}, lag) for lag in groups["lag"]]
    family(
        "llog_consumer_group_lag",
        "gauge",
        "Offsets a consumer group has still to read in a partition (from max(committed, log start) to the end).",
        [(labels, lag["lag"]) for labels, lag in labelled if lag["lag"] is not None],
    )
    family(
        "llog_consumer_group_committed_offset",
        "gauge",
        "The next offset a consumer group will read in a partition (its committed offset).",
        [(labels, lag["committed"]) for labels, lag in labelled if lag["committed"] is not None],
    )
    family(
        "llog_consumer_group_below_log_start",
        "gauge",
        "1 when retention removed offsets the group had not read (it resumes at the log start).",
        [(labels, int(lag["below_log_start"])) for labels, lag in labelled if lag["committed"] is not None],
    )
    if groups["refreshed_at_ms"] is not None:
        family(
            "llog_consumer_group_lag_timestamp_seconds",
            "gauge",
            "When the consumer lag above was read (Unix seconds).",
            [({}, groups["refreshed_at_ms"] / 1000)],
        )


def _collector_families(family: Family, collector: dict[str, Any]) -> None:
    """Python's garbage collector, under the names of the Prometheus Python client, plus its time and frozen objects."""
    generations = collector["generations"]
    for field, name, help_text in (
        ("collections", "python_gc_collections_total", "Collections by generation, since the process started."),
        ("collected", "python_gc_objects_collected_total", "Objects collected, by generation."),
        ("uncollectable", "python_gc_objects_uncollectable_total", "Uncollectable objects found, by generation."),
        ("seconds", "llog_gc_collection_seconds_total", "Time in collections, by generation, since llog serve "
         "started: the process answers nothing meanwhile."),
    ):  # fmt: skip
        family(name, "counter", help_text, [({"generation": str(g["generation"])}, g[field]) for g in generations])
    family("llog_gc_frozen_objects", "gauge", "Objects frozen at start, which collections skip.",
           [({}, collector["frozen_objects"])])  # fmt: skip
