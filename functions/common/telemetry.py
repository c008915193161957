"""Logs, metrics and traces of one function (Powertools), and a local Lambda context.

Every function has one ``Telemetry(names.<FUNCTION>)`` (service = the
function's name, metric namespace ``llog``) and decorates its handler with
``telemetry.lambda_handler``: a structured ``Logger`` whose ``correlation_id``
is the API Gateway request id (none for scheduled and SQS events), EMF
``Metrics`` flushed at the end of each invocation (plus ``ColdStart`` and
``Latency``, ms per invocation), and a ``Tracer`` where Powertools traces (in
Lambda unless ``POWERTOOLS_TRACE_DISABLED``), created on the first invocation:
it loads the X-Ray SDK and patches botocore, which is not part of import (the
cold-start init phase). S3 PUTs go through the AWS Common Runtime, not
botocore, so they are not traced. Elsewhere (tests, ``llog serve``) there is no tracer
and the X-Ray SDK is never imported.

``Errors`` counts request errors and per-partition failures of the HTTP
functions, with an ``error_type`` dimension; each function adds its own
metrics with ``metric`` (infra/observability.py's dashboard and alarms read
some of them by name).

``llog serve`` suspends EMF (``suspend_emf``; it exports its own counters at
``/metrics`` and reports them as EMF per interval, server/emf.py), as
``POWERTOOLS_METRICS_DISABLED=true`` does: then nothing is added to
Powertools' process-wide metric set, which is not meant for concurrent
requests, and the handlers print nothing.
"""

from __future__ import annotations

import functools
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.common.lazy import Lazy
from functions.common.names import METRIC_NAMESPACE

R = TypeVar("R")
Handler = Callable[[dict[str, Any], LambdaContext], R]


class Telemetry:
    def __init__(self, function: str) -> None:
        self.service = function
        self.logger = Logger(service=function)
        self.metrics = Metrics(namespace=METRIC_NAMESPACE, service=function)
        self.tracing = tracing_enabled()

    @staticmethod
    def enabled() -> bool:
        return _suspended == 0 and not is_metrics_disabled()

    def metric(self, name: str, unit: MetricUnit, value: float) -> None:
        if self.enabled():
            self.metrics.add_metric(name=name, unit=unit, value=value)

    def errors(self, error_types: Iterable[str | None]) -> None:
        """One ``Errors`` datapoint per error type (dimension ``error_type``)."""
        if not self.enabled():
            return
        for error_type, count in Counter(t for t in error_types if t).items():
            with single_metric(
                name="Errors",
                unit=MetricUnit.Count,
                value=count,
                namespace=METRIC_NAMESPACE,
                default_dimensions={"service": self.service},
            ) as metric:
                metric.add_dimension(name="error_type", value=error_type)

    def lambda_handler(self, fn: Handler[R]) -> Handler[R]:
        """Trace, log with the request's correlation id, time, and flush metrics around ``fn``."""

        @functools.wraps(fn)
        def timed(event: dict[str, Any], context: LambdaContext) -> R:
            start = time.perf_counter()
            try:
                return fn(event, context)
            finally:
                self.metric("Latency", MetricUnit.Milliseconds, (time.perf_counter() - start) * 1000)

        traced = self._traced(timed) if self.tracing else timed
        logged: Handler[R] = self.logger.inject_lambda_context(
            traced, correlation_id_path=correlation_paths.API_GATEWAY_REST
        )
        measured: Handler[R] = self.metrics.log_metrics(logged, capture_cold_start_metric=True)

        @functools.wraps(fn)
        def handler(event: dict[str, Any], context: LambdaContext) -> R:
            # Decided per call: llog serve suspends EMF after the modules were imported.
            return measured(event, context) if self.enabled() else logged(event, context)

        return handler

    def _traced(self, fn: Handler[R]) -> Handler[R]:
        """``fn`` in an X-Ray subsegment; the first call creates the Tracer."""
        captured: Lazy[Handler[R]] = Lazy(lambda: Tracer(service=self.service).capture_lambda_handler(fn))

        @functools.wraps(fn)
        def traced(event: dict[str, Any], context: LambdaContext) -> R:
            return captured.get()(event, context)

        return traced


def tracing_enabled() -> bool:
    """Powertools' own rule for its Tracer: in Lambda (not SAM or Chalice locally), unless POWERTOOLS_TRACE_DISABLED."""
    return not Tracer._is_tracer_disabled()


_suspended = 0
_suspend_lock = threading.Lock()


def suspend_emf(suspend: bool) -> None:
    """Stop (True) or resume (False) EMF output; nested calls count.

    ``llog serve`` suspends it for its lifetime: it exports ``/metrics``
    instead, and Powertools' process-wide metric set is not meant for
    concurrent requests (``POWERTOOLS_METRICS_DISABLED`` has the same effect).
    """
    global _suspended
    with _suspend_lock:
        _suspended = max(_suspended + (1 if suspend else -1), 0)


class LocalContext(LambdaContext):
    """The Lambda context for handlers run outside Lambda (``llog serve``, ``devserver.invoke``, tests)."""

    def __init__(self, function_name: str, *, request_id: str | None = None, timeout_ms: int = 30_000) -> None:
        self._function_name = function_name
        self._function_version = "$LATEST"
        self._invoked_function_arn = f"arn:aws:lambda:local:000000000000:function:{function_name}"
        self._memory_limit_in_mb = 0
        self._aws_request_id = request_id or str(uuid.uuid4())
        self._log_group_name = f"/aws/lambda/{function_name}"
        self._log_stream_name = "local"
        self._deadline = time.monotonic() + timeout_ms / 1000

    def get_remaining_time_in_millis(self) -> int:  # type: ignore[override]  # a staticmethod there
        return max(int((self._deadline - time.monotonic()) * 1000), 0)
