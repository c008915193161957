"""``llog serve``'s CloudWatch metrics: every ``LLOG_SERVE_EMF_INTERVAL_S`` seconds, EMF lines on stdout.

A Lambda function flushes its EMF metrics at the end of each invocation;
``llog serve`` suspends that (Powertools' metric set is process-wide, not for
concurrent requests) and reports what it counted since the last report
instead, one EMF document per service, namespace ``llog``:

* ``service=produce``: ``RecordsProduced``, ``BytesProduced``; ``service=consume``:
  ``RecordsConsumed``, ``BytesConsumed``. The same metrics the produce and
  consume functions emit, so the dashboard's records and bytes rows count the
  serve fleet's traffic too.
* ``service=serve``: ``Requests``, ``ClientErrors`` (4xx), ``ServerErrors``
  (5xx; not the 503s of a task draining on its way out, which clients retry
  elsewhere), and ``Latency`` (ms): a uniform sample of at most
  ``LATENCY_SAMPLES`` requests of the interval, from which CloudWatch
  computes percentiles. The serve fleet reached by DNS has no load balancer,
  so these are its request metrics and its 5xx alarm.

On ECS the ``awslogs`` driver ships stdout to CloudWatch Logs, which extracts
the metrics. 0 (the default) reports nothing, as ``make dev`` wants.
"""

from __future__ import annotations

import json
import logging
import random
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TextIO

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from functions.common import names
from llog.config import Environ, env_int

log = logging.getLogger("llog.serve")

INTERVAL_ENV = "LLOG_SERVE_EMF_INTERVAL_S"
# EMF takes at most 100 values per metric in one document, and Powertools publishes a metric set on its 100th.
LATENCY_SAMPLES = 99


class RequestSample:
    """Requests of the current interval: counts by status class and a uniform sample of their latencies."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._lock = threading.Lock()
        self._rng = rng or random.Random()
        self._reset()

    def _reset(self) -> None:
        self.requests = self.client_errors = self.server_errors = 0
        self.latencies_ms: list[float] = []

    def add(self, status: int, seconds: float) -> None:
        with self._lock:
            self.requests += 1
            self.client_errors += 400 <= status < 500
            self.server_errors += status >= 500
            # Reservoir sampling (Algorithm R): each request of the interval is kept with equal chance.
            if len(self.latencies_ms) < LATENCY_SAMPLES:
                self.latencies_ms.append(seconds * 1000)
            else:
                slot = int(self._rng.random() * self.requests)  # randrange is some 50 bytecodes of Python
                if slot < LATENCY_SAMPLES:
                    self.latencies_ms[slot] = seconds * 1000

    def take(self) -> tuple[int, int, int, list[float]]:
        """(requests, 4xx, 5xx, sampled latencies in ms) since the last take; starts a new interval."""
        with self._lock:
            taken = (self.requests, self.client_errors, self.server_errors, self.latencies_ms)
            self._reset()
        return taken


class EmfReporter:
    """Writes the EMF documents of each interval to ``out``; ``stop`` writes the last, partial one."""

    def __init__(
        self,
        interval_s: int,
        requests: RequestSample,
        traffic: Callable[[], Mapping[str, int]],
        out: TextIO | None = None,
    ) -> None:
        self.interval_s = interval_s
        self.requests = requests
        self._traffic = traffic
        self._out = out
        self._last_traffic = dict(traffic())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="llog-serve-emf", daemon=True)

    @staticmethod
    def interval_from_env(env: Environ) -> int:
        return env_int(env, INTERVAL_ENV, 0, maximum=3600)

    def start(self) -> EmfReporter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._report_or_log()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._report_or_log()

    def _report_or_log(self) -> None:
        try:
            self.report()
        except Exception:  # a broken stdout must not end the reports for the process's life
            log.exception("llog serve: EMF report failed")

    def report(self) -> None:
        """One document per service with what was counted since the last report; nothing for an idle interval."""
        now = dict(self._traffic())
        delta = {k: now[k] - self._last_traffic.get(k, 0) for k in now}
        self._last_traffic = now
        requests, client_errors, server_errors, latencies = self.requests.take()
        documents = [
            self._document(names.PRODUCE, [("RecordsProduced", MetricUnit.Count, [delta["produced_records"]]),
                                           ("BytesProduced", MetricUnit.Bytes, [delta["produced_bytes"]])]),
            self._document(names.CONSUME, [("RecordsConsumed", MetricUnit.Count, [delta["consumed_records"]]),
                                           ("BytesConsumed", MetricUnit.Bytes, [delta["consumed_bytes"]])]),
            self._document(names.SERVE, [("Requests", MetricUnit.Count, [requests]),
                                         ("ClientErrors", MetricUnit.Count, [client_errors]),
                                         ("ServerErrors", MetricUnit.Count, [server_errors]),
                                         ("Latency", MetricUnit.Milliseconds, latencies)]),
        ]  # fmt: skip
        out = self._out or sys.stdout
        for doc in documents:
            if doc is not None:
                out.write(json.dumps(doc, separators=(",", ":")) + "\n")
        out.flush()

    @staticmethod
    def _document(service: str, metrics: list[tuple[str, MetricUnit, list[float]]]) -> Mapping[str, object] | None:
        if not any(any(values) for _, _, values in metrics):
            return None  # no traffic: no datapoints (a missing datapoint reads as 0 on the dashboard)
        emf = EphemeralMetrics(namespace=names.METRIC_NAMESPACE, service=service)
        for name, unit, values in metrics:
            for value in values:
                emf.add_metric(name=name, unit=unit, value=value)
        doc: Mapping[str, object] = emf.serialize_metric_set()
        return doc
