"""The S3 billing estimate that ``llog serve`` exports under ``s3.billing`` (docs/COST.md).

Two halves, aggregated differently across processes:

* **Requests**: this process's S3 calls, read from the ``BlobStore``'s
  operation counters and priced by S3's request classes (PUT, COPY, POST and
  LIST requests; GET and all other requests; DELETE, which is free). A
  process-local counter: sum it across processes.
* **Storage**: object count and bytes under the root prefix, from a cached
  ``list_objects_v2`` scan (its pages are counted as operation ``list`` like
  any other listing), priced as one month of S3 Standard. It describes the
  shared bucket, so every process reports the same footprint: aggregate it
  with max, never sum.

The prices are fixed assumptions, S3 Standard list prices in us-east-1
(:class:`S3Prices`), not read from AWS. Not included: data transfer,
replication, lifecycle transitions, KMS, taxes, discounts, support and
account-level billing adjustments.
"""

from __future__ import annotations

import enum
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llog.config import Environ, env_int
from llog.store.metrics import OperationStats
from llog.store.s3 import BlobStore

log = logging.getLogger(__name__)

GB = 1 << 30  # AWS bills storage in binary gigabytes (GiB)
DEFAULT_SCAN_INTERVAL_S = 300
# A scan's share of a core at most: after each page of a listing it pauses for 19 times the CPU that page took.
# botocore parses a page of 1,000 keys in about 70 ms of Python, holding the GIL that llog serve's event loop
# needs: unpaced, a scan of 76,000 objects cut a single client's requests/s by 69% while it ran; paced, by 8-13%.
SCAN_CPU_SHARE = 0.05
LIST_PAGE_OBJECTS = 1000  # list_objects_v2's page
EXCLUDED = (
    "data transfer in or out",
    "replication",
    "lifecycle transitions",
    "KMS",
    "taxes, discounts, support and account-level billing adjustments",
)


class RequestClass(enum.StrEnum):
    """S3's request pricing tiers."""

    PUT_COPY_POST_LIST = "put_copy_post_list"
    GET_AND_OTHER = "get_and_other"
    FREE = "free"


# The operation names BlobStore records (llog/store/s3.py).
OPERATION_CLASSES: Mapping[str, RequestClass] = {
    "put": RequestClass.PUT_COPY_POST_LIST,
    "list": RequestClass.PUT_COPY_POST_LIST,
    "create_bucket": RequestClass.PUT_COPY_POST_LIST,
    "get": RequestClass.GET_AND_OTHER,
    "range_get": RequestClass.GET_AND_OTHER,  # a ranged GET is billed as one GET
    "head": RequestClass.GET_AND_OTHER,
    "delete": RequestClass.FREE,  # DeleteObjects; S3 does not charge DELETE requests
}


def request_class(operation: str) -> RequestClass:
    """The class of a BlobStore operation; unknown ones follow S3's rule for "all other requests"."""
    return OPERATION_CLASSES.get(operation, RequestClass.GET_AND_OTHER)


@dataclass(frozen=True)
class S3Prices:
    """Price assumptions: S3 Standard list prices in us-east-1 (first storage tier), in USD."""

    region: str = "us-east-1"
    storage_class: str = "STANDARD"
    storage_usd_per_gb_month: float = 0.023
    put_copy_post_list_usd_per_1000: float = 0.005
    get_and_other_usd_per_10000: float = 0.004

    def usd_per_request(self, cls: RequestClass) -> float:
        if cls is RequestClass.PUT_COPY_POST_LIST:
            return self.put_copy_post_list_usd_per_1000 / 1_000
        if cls is RequestClass.GET_AND_OTHER:
            return self.get_and_other_usd_per_10000 / 10_000
        return 0.0

    def storage_usd_per_month(self, nbytes: int) -> float:
        return nbytes / GB * self.storage_usd_per_gb_month


DEFAULT_PRICES = S3Prices()


@dataclass(frozen=True)
class RequestCost:
    """Requests by class and their estimated cost in USD."""

    requests: Mapping[RequestClass, int]
    usd: float


def request_cost(operations: Mapping[str, OperationStats], prices: S3Prices = DEFAULT_PRICES) -> RequestCost:
    """Price an ``OperationCounters.snapshot()`` of a BlobStore.

    Failed calls count too: S3 bills the requests it answers with an error, and
    telling those from calls that never reached it is not worth an estimate's while.
    """
    counts = dict.fromkeys(RequestClass, 0)
    for operation, stats in operations.items():
        counts[request_class(operation)] += stats.calls + stats.retries
    return RequestCost(counts, sum(prices.usd_per_request(cls) * n for cls, n in counts.items()))


@dataclass(frozen=True)
class BillingConfig:
    """``LLOG_BILLING_SCAN_INTERVAL_S``: seconds between footprint scans; 0 turns scanning off."""

    scan_interval_s: int = DEFAULT_SCAN_INTERVAL_S

    @classmethod
    def from_env(cls, env: Environ | None = None) -> BillingConfig:
        env = os.environ if env is None else env
        return cls(env_int(env, "LLOG_BILLING_SCAN_INTERVAL_S", DEFAULT_SCAN_INTERVAL_S, minimum=0))


@dataclass(frozen=True)
class Footprint:
    """What one scan found under the prefix."""

    objects: int
    bytes: int
    scanned_at_ms: int
    seconds: float

    @property
    def gb(self) -> float:
        return self.bytes / GB


@dataclass(frozen=True)
class ScanStatus:
    """The cached footprint and how the scans went."""

    footprint: Footprint | None  # of the last successful scan
    scans: int  # successful
    failures: int
    last_error: str | None  # set while the latest scan failed
    last_error_at_ms: int | None
    running: bool


class FootprintScanner:
    """Objects and bytes under ``prefix``, listed at most once per ``interval_s``.

    :meth:`status` never raises and, in background mode, never waits for S3:
    a due scan runs on its own thread and the previous result is served
    meanwhile. A failed scan keeps the last footprint and is reported; the
    interval also spaces out attempts after a failure. A scan is paced to
    ``SCAN_CPU_SHARE`` of a core (``cpu_clock`` and ``sleep``, per page of
    ``page_objects``): a large bucket takes longer to count, not the requests
    served meanwhile.
    """

    def __init__(
        self,
        blobs: BlobStore,
        bucket: str,
        prefix: str,
        *,
        interval_s: float = DEFAULT_SCAN_INTERVAL_S,
        background: bool = True,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        cpu_clock: Callable[[], float] = time.thread_time,
        sleep: Callable[[float], None] = time.sleep,
        page_objects: int = LIST_PAGE_OBJECTS,
    ) -> None:
        self.blobs = blobs
        self.bucket = bucket
        self.prefix = prefix
        self.interval_s = interval_s
        self._background = background
        self._clock = clock
        self._wall_clock = wall_clock
        self._cpu_clock = cpu_clock
        self._sleep = sleep
        self._page_objects = page_objects
        self._lock = threading.Lock()
        self._footprint: Footprint | None = None
        self._scans = 0
        self._failures = 0
        self._last_error: str | None = None
        self._last_error_at_ms: int | None = None
        self._last_attempt: float | None = None
        self._running = False

    @property
    def enabled(self) -> bool:
        return self.interval_s > 0

    def now_ms(self) -> int:
        return int(self._wall_clock() * 1000)

    def status(self) -> ScanStatus:
        """The cached result, after starting a scan if one is due."""
        if self._claim_due_scan():
            if self._background:
                threading.Thread(target=self._run, name="llog-billing-scan", daemon=True).start()
            else:
                self._run()
        with self._lock:
            return ScanStatus(
                self._footprint, self._scans, self._failures, self._last_error, self._last_error_at_ms, self._running
            )

    def scan(self) -> None:
        """Scan now, whatever the interval (unless a scan is already running)."""
        with self._lock:
            if self._running:
                return
            self._running = True
            self._last_attempt = self._clock()
        self._run()

    def _claim_due_scan(self) -> bool:
        with self._lock:
            due = self._last_attempt is None or self._clock() - self._last_attempt >= self.interval_s
            if not self.enabled or self._running or not due:
                return False
            self._running = True
            self._last_attempt = self._clock()
            return True

    def _run(self) -> None:
        start = time.perf_counter()
        objects = nbytes = 0
        try:
            busy_from = self._cpu_clock()
            for info in self.blobs.list(self.bucket, self.prefix):
                objects += 1
                nbytes += info.size
                if objects % self._page_objects == 0:
                    self._sleep((self._cpu_clock() - busy_from) * (1 / SCAN_CPU_SHARE - 1))
                    busy_from = self._cpu_clock()
        except Exception as exc:  # /metrics must outlive any S3 or client failure
            log.warning("S3 footprint scan of s3://%s/%s failed: %s", self.bucket, self.prefix, exc)
            with self._lock:
                self._failures += 1
                self._last_error = f"{type(exc).__name__}: {exc}"
                self._last_error_at_ms = self.now_ms()
                self._running = False
            return
        footprint = Footprint(objects, nbytes, self.now_ms(), time.perf_counter() - start)
        with self._lock:
            self._footprint = footprint
            self._scans += 1
            self._last_error = None
            self._running = False


class S3Billing:
    """The ``s3.billing`` document: request cost from a BlobStore's counters, storage from a scanner."""

    def __init__(self, scanner: FootprintScanner, prices: S3Prices = DEFAULT_PRICES) -> None:
        self.scanner = scanner
        self.prices = prices

    @classmethod
    def for_root(cls, blobs: BlobStore, bucket: str, root: str, config: BillingConfig | None = None) -> S3Billing:
        """The footprint of every llog object: ``{root}/`` in ``bucket``."""
        config = config or BillingConfig()
        return cls(FootprintScanner(blobs, bucket, f"{root}/", interval_s=config.scan_interval_s))

    def report(self) -> dict[str, Any]:
        status = self.scanner.status()  # first: a scan it runs inline is counted below
        cost = request_cost(self.scanner.blobs.counters.snapshot(), self.prices)
        return {
            "assumptions": self.assumptions(),
            "requests": {cls.value: n for cls, n in cost.requests.items()},
            "request_cost_usd": cost.usd,
            "storage": self._storage(status),
        }

    def assumptions(self) -> dict[str, Any]:
        p = self.prices
        return {
            "region": p.region,
            "storage_class": p.storage_class,
            "currency": "USD",
            "storage_usd_per_gb_month": p.storage_usd_per_gb_month,
            "put_copy_post_list_usd_per_1000": p.put_copy_post_list_usd_per_1000,
            "get_and_other_usd_per_10000": p.get_and_other_usd_per_10000,
            "gb_bytes": GB,
            "operation_classes": {op: cls.value for op, cls in sorted(OPERATION_CLASSES.items())},
            "excludes": list(EXCLUDED),
        }

    def _storage(self, status: ScanStatus) -> dict[str, Any]:
        s = self.scanner
        found = status.footprint
        now_ms = s.now_ms()
        return {
            "bucket": s.bucket,
            "prefix": s.prefix,
            "enabled": s.enabled,
            "scan_interval_s": s.interval_s,
            "objects": None if found is None else found.objects,
            "bytes": None if found is None else found.bytes,
            "gb": None if found is None else found.gb,
            "monthly_cost_usd": None if found is None else self.prices.storage_usd_per_month(found.bytes),
            "scanned_at_ms": None if found is None else found.scanned_at_ms,
            "age_s": None if found is None else max(0.0, (now_ms - found.scanned_at_ms) / 1000),
            "scan_seconds": None if found is None else found.seconds,
            "scans": status.scans,
            "scan_failures": status.failures,
            "scanning": status.running,
            "last_error": status.last_error,
            "last_error_at_ms": status.last_error_at_ms,
        }
