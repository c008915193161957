"""``llog serve [--host 127.0.0.1] [--port 8080]``: the HTTP API from one process.

Connections live on one asyncio event loop (``server.http11``); handlers run
on a pool of threads, except for a produce request that needs no Oxia read
before its append, which waits for its group commit on the loop
(``LlogServer._produce_on_loop``).

Every request becomes an API Gateway REST proxy event handed to the same
handler Lambda runs (``functions.produce.app.handler``,
``functions.consume.app.handler``, ``functions.admin.app.handler``), except a
``POST /produce`` without an ``Origin``: the produce handler's own steps answer
it, without the event and the resolver (``llog.api.native.routes``' produce in two steps around the
group commit on the loop, or ``produce_app.serve_produce`` on a pool thread). Unlike a
Lambda environment, the process shares one Oxia store, one S3 client, a
``BatchingProducer`` (concurrent produce requests become one shared WAL blob)
and a ``TailCache`` (``LLOG_TAIL_CACHE_MAX_BYTES``, 0 disables it) between
produce and consume. It also serves ``GET /metrics`` (JSON; ``s3.billing``
holds the S3 billing estimate of ``server.billing``), ``GET
/metrics/prometheus``, ``GET /openapi.json`` and the console (``GET /console``,
``server/console``); with ``LLOG_SERVE_EMF_INTERVAL_S`` it reports its traffic as
CloudWatch EMF lines on stdout (``server.emf``). A request is refused from
its head when its ``Host`` is not a name the server answers to (421,
``LLOG_SERVE_ALLOWED_HOSTS``) or when any web page could have made a browser
send it (415, ``functions.common.browser``); what a client may hold is bounded
by ``server.http11.HttpLimits`` (``LLOG_SERVE_MAX_*``,
``LLOG_SERVE_*_TIMEOUT_S``). SIGTERM/SIGINT stop it
gracefully: no new requests, in-flight ones finish, the batcher flushes, Oxia
closes.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import functools
import itertools
import logging
import logging.handlers
import os
import queue
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from types import FrameType, ModuleType
from typing import Any, ClassVar
from urllib.parse import urlsplit

from functions.admin import app as admin_app
from functions.common import browser, names, routes, telemetry
from functions.common.http import answer_error, json_bytes
from functions.consume import app as consume_app
from functions.kinesis import app as kinesis_app
from functions.produce import app as produce_app
from llog.api.kinesis import endpoint as kinesis_endpoint
from llog.api.kinesis.endpoint import Endpoint
from llog.api.kinesis.sigv4 import SignedRequest
from llog.api.native import routes as native
from llog.api.native.errors import client_error
from llog.config import Limits, env_int
from llog.errors import ConfigurationError, LlogError
from llog.service.groups import GroupService
from server import console, events, http11
from server.auth import ServeAuth, auth_from_env
from server.collector import CollectorStats, freeze_startup_heap
from server.emf import EmfReporter, RequestSample
from server.http11 import Answer, HttpLimits, HttpServer, Request
from server.pools import started_pool
from server.prometheus import BILLING, ConsumerLagReport, operations_json, prometheus_text
from server.services import CacheClearingAdminService, ServeServices

log = logging.getLogger("llog.serve")

HANDLERS: dict[str, ModuleType] = {names.PRODUCE: produce_app, names.CONSUME: consume_app, names.ADMIN: admin_app}
IDLE_CONNECTION_TIMEOUT_S = 30
# Connections the kernel may hold for the accept loop. The stdlib's default of 5 overflowed on a burst
# of clients (16 concurrent produce requests were enough on a busy machine): the kernel dropped the
# handshakes past it and clients saw resets and timeouts. The kernel caps it at net.core.somaxconn.
LISTEN_BACKLOG = 1024
# Handler threads, reused. A long poll holds one for up to its max_wait_ms, so the bound is far above the 256
# clients one process is expected to hold; the first HANDLER_THREADS_STARTED run before serving (server.pools).
HANDLER_THREADS = 1024
HANDLER_THREADS_STARTED = 64
SERVE_PATHS = ("/metrics", "/metrics/prometheus", "/openapi.json")  # served by llog serve itself
HEALTH_ROUTE = "/health"  # load balancers' and ECS's probes: not traffic
PRODUCE_ROUTE = ("POST", "/produce")  # without an Origin: no resolver (LlogServer._produce_on_loop, or serve_produce)
# A produce body up to this size is parsed on the event loop (about 0.1 ms per 100 KiB); larger ones on a pool thread.
LOOP_PRODUCE_MAX_BYTES = 256 * 1024
# Upper bounds (ms) of the request latency histogram in /metrics; a last bucket counts the rest.
LATENCY_BOUNDS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000)
DRAIN_MARGIN_S = 10
ACCESS_LOG_ENV = "LLOG_SERVE_ACCESS_LOG"
# Which requests get an access log line. Not every request by default: at a thousand requests a second
# the lines were a seventh of the time llog serve held the GIL (a py-spy profile), and a deployment pays
# CloudWatch Logs for each; /metrics and the EMF metrics count every request anyway.
# Each choice, and the lowest status it logs.
ACCESS_LOG_CHOICES = {"errors": 400, "all": 0, "off": 1000}


# The settings of server.http11's limits (docs/HTTP_API.md, "Limits and configuration"), by field of HttpLimits.
HTTP_LIMIT_SETTINGS = {
    "max_connections": "LLOG_SERVE_MAX_CONNECTIONS",
    "max_connection_bytes": "LLOG_SERVE_MAX_CONNECTION_BYTES",
    "max_buffered_bytes": "LLOG_SERVE_MAX_BUFFERED_BYTES",
    "head_timeout_s": "LLOG_SERVE_HEAD_TIMEOUT_S",
    "body_timeout_s": "LLOG_SERVE_BODY_TIMEOUT_S",
}
# The error_type of each refusal of server.http11 itself, by status.
REFUSAL_TYPES = {
    400: "InvalidRequest",
    408: "RequestTimeout",
    413: "PayloadTooLarge",
    431: "RequestHeaderFieldsTooLarge",
    503: "ServerBusy",
}


def http_limits_from_env(env: Mapping[str, str], limits: Limits) -> HttpLimits:
    """``LLOG_SERVE_MAX_CONNECTIONS`` and the others of ``HTTP_LIMIT_SETTINGS``; defaults: ``HttpLimits``'.

    A connection must be able to hold one request of ``LLOG_MAX_REQUEST_BYTES``: unset,
    ``LLOG_SERVE_MAX_CONNECTION_BYTES`` is at least that; set below it, it is refused.
    """
    defaults = HttpLimits()
    values: dict[str, Any] = {}
    for field_name, name in HTTP_LIMIT_SETTINGS.items():
        default = getattr(defaults, field_name)
        if field_name == "max_connection_bytes":
            default = max(default, limits.max_request_bytes)
        values[field_name] = type(default)(env_int(env, name, int(default), minimum=1))  # the timeouts: whole seconds
    if values["max_connection_bytes"] < limits.max_request_bytes:
        raise ConfigurationError(
            f"LLOG_SERVE_MAX_CONNECTION_BYTES={values['max_connection_bytes']} must be at least "
            f"LLOG_MAX_REQUEST_BYTES ({limits.max_request_bytes}): one request must fit in a connection's share"
        )
    return HttpLimits(**values)


def access_log_from_env(env: Mapping[str, str]) -> str:
    """``LLOG_SERVE_ACCESS_LOG``: ``errors`` (4xx and 5xx answers, the default), ``all`` or ``off``."""
    choice = env.get(ACCESS_LOG_ENV, "errors").strip().lower() or "errors"
    if choice not in ACCESS_LOG_CHOICES:
        raise LlogError(f"{ACCESS_LOG_ENV} must be one of {', '.join(ACCESS_LOG_CHOICES)}, not {choice!r}")
    return choice


class RequestIds:
    """``X-Request-Id`` values, shaped as UUIDs: a random prefix per process, then a counter.

    ``uuid.uuid4()`` reads its bytes from the kernel and lets go of the GIL while it does: on the event
    loop, each let-go handed the GIL to a flusher or an S3 callback, and the loop then waited to get it
    back. At 32 clients, without it: 7-14% more requests/s at 10% less CPU per request.
    """

    def __init__(self) -> None:
        self._prefix = str(uuid.uuid4())[:24]  # its first four groups: the version and variant digits included
        self._counter = itertools.count()

    def next(self) -> str:
        return f"{self._prefix}{next(self._counter) & 0xFFFF_FFFF_FFFF:012x}"


class HttpCounters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str, int], list[float]] = {}  # (method, route, status) -> [count, seconds]
        self._latency: dict[tuple[str, str], list[int]] = {}  # (method, route) -> count per LATENCY_BOUNDS_MS bucket

    def record(self, method: str, route: str, status: int, seconds: float) -> None:
        bucket = bisect.bisect_left(LATENCY_BOUNDS_MS, seconds * 1000)
        with self._lock:
            entry = self._counts.get((method, route, status))
            if entry is None:
                entry = self._counts[(method, route, status)] = [0, 0.0]
            entry[0] += 1
            entry[1] += seconds
            counts = self._latency.get((method, route))
            if counts is None:
                counts = self._latency[(method, route)] = [0] * (len(LATENCY_BOUNDS_MS) + 1)
            counts[bucket] += 1

    def latency(self) -> dict[str, Any]:
        """Cumulative histograms: a reader takes two and subtracts them for a window's quantiles."""
        with self._lock:
            items = sorted((key, list(counts)) for key, counts in self._latency.items())
        routes = [{"method": m, "route": r, "counts": counts} for (m, r), counts in items]
        return {"bounds_ms": list(LATENCY_BOUNDS_MS), "routes": routes}

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            items = sorted(self._counts.items())
        return [
            {"method": m, "route": r, "status": s, "count": int(c), "seconds": round(sec, 6)}
            for (m, r, s), (c, sec) in items
        ]


@dataclass
class _Admission:
    """What ``check_head`` decided about a request, kept until its answer is written."""

    started: float
    method: str  # GET for HEAD: a HEAD is answered as its GET
    path: str
    query: str
    route: str  # the metrics' route label
    serve_route: bool  # answered by llog serve itself (/metrics, the console, ...), not by a handler
    admitted: bool  # False: shutdown had begun; answered 503
    function: str  # the handler's (names.PRODUCE, ...); "" for llog serve's own routes
    kinesis: bool  # the Kinesis API (its SDKs send ``/kinesis/`` for an endpoint of ``.../kinesis``)


class LlogServer:
    """``llog serve``: an asyncio HTTP/1.1 server (``server.http11``) in front of the Lambda handlers.

    The event loop, on its own thread, holds the connections and parses and
    writes; each admitted request's handler runs on a pool thread (at most
    ``HANDLER_THREADS``, reused), as it blocks on Oxia, S3, a group commit or
    a long poll. The exception is a produce request that needs no Oxia read
    before its append (``_produce_on_loop``): it awaits its group commit on
    the loop, which saves the thread hand-offs that were about a quarter of
    its CPU. The handler modules hold their services process-wide (as a
    Lambda environment does), so one server runs per process at a time.
    """

    _active: ClassVar[LlogServer | None] = None

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 8080,
        *,
        services: ServeServices | None = None,
    ) -> None:
        if LlogServer._active is not None:
            raise RuntimeError(f"llog serve already runs in this process ({LlogServer._active.url})")
        self.limits = Limits.from_env()
        http_limits = http_limits_from_env(os.environ, self.limits)
        self.allowed_hosts = browser.AllowedHosts.from_env(os.environ)
        self._access_log_from = ACCESS_LOG_CHOICES[access_log_from_env(os.environ)]
        self.services = services or ServeServices.from_env()
        # LLOG_SERVE_AUTH=sigv4: every request but the probes' is signed with an issued key (server.auth). The key
        # store is opened here, so that a server without a sealing key set up refuses to start, not to answer.
        self.auth = ServeAuth(self.services.access_keys) if auth_from_env(os.environ) == "sigv4" else None
        if self.auth is not None:
            try:
                self.services.access_keys()
            except LlogError:
                if services is None:
                    self.services.close()
                raise
        self.started_at_ms = int(time.time() * 1000)
        self.http = HttpCounters()
        self.request_ids = RequestIds()
        self.requests = RequestSample()  # of the API routes, for the EMF metrics (LLOG_SERVE_EMF_INTERVAL_S)
        groups = GroupService.on(self.services.oxia, root=self.services.root)
        self.consumer_lag = ConsumerLagReport(groups.lags)
        self._inflight = 0
        self._inflight_lock = threading.Lock()  # taken as itself per request: a Condition's ``with`` is Python code
        self._inflight_cond = threading.Condition(self._inflight_lock)
        self._closing = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._serving = threading.Event()
        try:
            self.httpd = HttpServer(
                host, port, self, backlog=LISTEN_BACKLOG, idle_timeout_s=IDLE_CONNECTION_TIMEOUT_S, limits=http_limits
            )
        except OSError:
            if services is None:
                self.services.close()
            raise
        self._pool = started_pool(HANDLER_THREADS, "llog-serve", started=HANDLER_THREADS_STARTED)
        self._inject()
        # /metrics replaces EMF here; Powertools' metric set is process-wide and not for concurrent requests.
        telemetry.suspend_emf(True)
        self.collector = CollectorStats().install()  # removed at shutdown
        LlogServer._active = self

    # -- lifecycle --

    @property
    def host(self) -> str:
        return self.httpd.address[0]

    @property
    def port(self) -> int:
        return self.httpd.address[1]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _inject(self) -> None:
        s = self.services
        produce_app.set_service(s.produce)
        consume_app.set_service(s.consume)
        admin_service = CacheClearingAdminService(s.oxia, root=s.root, writer=s.writer, tail_cache=s.tail_cache)
        admin_app.set_service(admin_service)
        admin_app.set_server_info(self.host, self.port)
        kinesis_app.set_endpoint(
            Endpoint(lambda: s.produce, lambda: s.consume, lambda: admin_service, s.access_keys, account=s.account)
        )

    def serve_forever(self) -> None:
        """Serve on this thread until ``shutdown``."""
        http11.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        self._serving.set()
        await self.httpd.serve(self._stopped)

    def start(self) -> LlogServer:
        """Serve on a background thread (tests, embedding); return once it serves."""
        self._thread = threading.Thread(target=self.serve_forever, name="llog-serve", daemon=True)
        self._thread.start()
        if not self._serving.wait(30):
            raise RuntimeError("llog serve's event loop did not start")
        return self

    def call_in_loop(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the event loop's thread (it holds every connection while it runs)."""
        assert self._loop is not None, "not serving"
        self._loop.call_soon_threadsafe(callback)

    @property
    def inflight(self) -> int:
        """Requests being served: admitted (before shutdown began) and their answers not written yet."""
        with self._inflight_cond:
            return self._inflight

    @property
    def closing(self) -> bool:
        """True once ``shutdown`` has begun: every request from then on is refused (503)."""
        return self._closing

    def shutdown(self) -> None:
        """Refuse new requests, let the requests being served finish, flush the batcher, close Oxia.

        A request is being served from the moment its head is parsed (the
        decision and the in-flight count change under one lock): it gets its
        normal answer, even if its body was still arriving when shutdown
        began. Requests whose head comes later, on a kept-alive connection or
        on one the kernel had queued, are answered 503 ``ShuttingDown`` with
        ``Connection: close``; new connections are refused once the listening
        socket closes, which happens before the drain, not after it.
        """
        with self._inflight_cond:
            if self._closed:
                return
            self._closed = True
            self._closing = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop has stopped
                asyncio.run_coroutine_threadsafe(self._stop_accepting(), loop).result(30)
        drain_s = self.limits.max_wait_ms / 1000 + DRAIN_MARGIN_S
        with self._inflight_cond:
            if not self._inflight_cond.wait_for(lambda: self._inflight == 0, timeout=drain_s):
                log.warning("%d requests still running after %.0f s; closing anyway", self._inflight, drain_s)
        for module in HANDLERS.values():
            module.set_service(None)
        kinesis_app.set_endpoint(None)
        admin_app.set_server_info(None, None)
        telemetry.suspend_emf(False)
        self.collector.remove()
        LlogServer._active = None
        self.services.close()
        if loop is not None and self._stopped is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._stopped.set)
        if self._thread is not None:
            self._thread.join(10)
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._loop is None:
            self.httpd.close_socket()

    async def _stop_accepting(self) -> None:
        self.httpd.stop_accepting()

    # -- requests (server.http11.Application) --

    def check_head(self, request: Request) -> Answer | None:
        """Admit the request (or mark it for a 503, once shutdown has begun); refuse a body it cannot read."""
        method = "GET" if request.method == "HEAD" else request.method
        parts = urlsplit(request.target)
        path = parts.path or "/"
        serve_route = method == "GET" and (path in SERVE_PATHS or console.owns(path))
        kinesis = path.rstrip("/") == routes.KINESIS_PATH
        found = None if serve_route or kinesis else routes.match(path)
        route = console.ROUTE if console.owns(path) else str(found.resource) if found is not None else path
        route = routes.KINESIS_PATH if kinesis else route
        # Admitted or refused once, under the lock shutdown sets ``_closing`` with: a request admitted
        # here is served to the end, even if shutdown begins while its body is still arriving, and
        # shutdown waits until its answer is written (a process that exits sooner loses it).
        with self._inflight_lock:
            admitted = not self._closing
            if admitted:
                self._inflight += 1
        started = time.perf_counter()
        function = found.function if found is not None else names.KINESIS if kinesis else ""
        request.state = _Admission(started, method, path, parts.query, route, serve_route, admitted, function, kinesis)
        problem = self._head_problem(request)
        return None if problem is None else self._answer(request, *problem)

    async def answer(self, request: Request) -> Answer:
        admission = self._admission(request)
        if not admission.admitted:
            status, headers, payload = self._json(
                503, client_error("the server is shutting down", "ShuttingDown", retriable=True)
            )
            headers.append(("Retry-After", "1"))
            return self._answer(request, status, headers, payload)
        loop = asyncio.get_running_loop()
        if self.auth is None and self._produces_on_loop(request, admission):
            answer = await self._produce_on_loop(request, loop)
            if answer is not None:
                return self._answer(request, *answer)
        return self._answer(request, *await loop.run_in_executor(self._pool, self._respond, request, admission))

    def _produces_on_loop(self, request: Request, admission: _Admission) -> bool:
        return (
            (admission.method, admission.path) == PRODUCE_ROUTE
            and request.header("Origin") is None
            and len(request.body or b"") <= LOOP_PRODUCE_MAX_BYTES
        )

    async def _produce_on_loop(
        self, request: Request, loop: asyncio.AbstractEventLoop
    ) -> tuple[int, list[tuple[str, str]], bytes] | None:
        """``POST /produce`` without a pool thread while its group commit runs; None: a pool thread answers it.

        Parsing, the cached topic checks and the answer run here, on the loop; the append is the
        batcher's (its flush runs on a flusher thread). A request that needs an Oxia read first (a
        topic record not cached, a partition this process has not initialized, a conditional batch)
        goes to a pool thread whole, as does the rare answer that needs one after its append.
        """
        request_id = self.request_ids.next()
        service = self.services.produce
        try:
            prepared = native.produce_prepared(service, request.body or None, self.limits, cached_only=True)
            if prepared is None:
                return None
            appended = await self.services.batcher.submit_on(loop, prepared.ready_groups) if prepared.ready else []
            produced = native.produce_answer(service, prepared, appended, cached_only=True)
            if produced is None:
                answer = functools.partial(native.produce_answer, service, prepared, appended, cached_only=False)
                produced = await loop.run_in_executor(self._pool, answer)
                assert produced is not None
            return self._produce_answer(produced.status, {"X-Request-Id": request_id}, produced.body)
        except Exception as exc:  # logged on a pool thread: Powertools' logger writes to stdout as it is called
            error = functools.partial(answer_error, produce_app.telemetry, exc, request_id)
            status, refusal, headers = await loop.run_in_executor(self._pool, error)
        return self._produce_answer(status, {**headers, "X-Request-Id": request_id}, refusal)

    def _produce_answer(
        self, status: int, headers: dict[str, str], document: Any
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        status, answer_headers, payload = self._json(status, document)
        return status, answer_headers + list(headers.items()), payload

    def finished(self, request: Request) -> None:
        if self._admission(request).admitted:
            with self._inflight_lock:
                self._inflight -= 1
                if self._closing:  # only a shutdown waits, and it sets this under the lock before waiting
                    self._inflight_cond.notify_all()

    def refused(self, status: int, reason: str, limit: str | None) -> Answer:
        """server.http11's own refusal, in JSON, naming the setting of the limit (a 503 may be retried)."""
        setting = HTTP_LIMIT_SETTINGS.get(limit or "")  # MAX_HEAD_BYTES is no setting: its message gives the size
        message = f"{reason} ({setting})" if setting else reason
        document = client_error(message, REFUSAL_TYPES[status], retriable=status == 503)
        status, headers, payload = self._json(status, document)
        if status == 503:
            headers.append(("Retry-After", "1"))
        return Answer(status, headers, payload, close=True)

    @staticmethod
    def _admission(request: Request) -> _Admission:
        assert isinstance(request.state, _Admission)
        return request.state

    def _respond(self, request: Request, admission: _Admission) -> tuple[int, list[tuple[str, str]], bytes]:
        """On a pool thread: the handler's answer (a bug here answers 500, it does not kill the connection)."""
        try:
            refusal = self._auth_refusal(request, admission)
            if refusal is not None:
                return refusal
            if admission.serve_route:
                return self._serve_own(admission.path)
            return self._dispatch(request, admission)
        except Exception:
            log.exception("llog serve failed on %s %s", admission.method, admission.path)
            return self._json(500, client_error("internal error", "InternalError"))

    def _auth_refusal(self, request: Request, admission: _Admission) -> tuple[int, list[tuple[str, str]], bytes] | None:
        """With ``LLOG_SERVE_AUTH=sigv4``, why the request is refused before its route runs (server.auth)."""
        if self.auth is None or admission.kinesis:  # the Kinesis API checks its own signatures
            return None
        if ServeAuth.open(admission.method, admission.path, console.owns(admission.path)):
            return None
        signed = SignedRequest(request.method, admission.path, admission.query, dict(request.headers),
                               request.body or b"")  # fmt: skip
        refusal = self.auth.check(signed, None if admission.serve_route else routes.match(admission.path))
        if refusal is None:
            return None
        return self._json(refusal.status, client_error(refusal.message, refusal.error_type))

    def _answer(self, request: Request, status: int, headers: list[tuple[str, str]], payload: bytes) -> Answer:
        """Count the request, and log it as ``LLOG_SERVE_ACCESS_LOG`` says."""
        admission = self._admission(request)
        seconds = time.perf_counter() - admission.started
        self.http.record(admission.method, admission.route, status, seconds)
        # Traffic only: not the probes, not llog serve's own pages, not the 503s of a drain (retried elsewhere).
        if admission.admitted and not admission.serve_route and admission.route != HEALTH_ROUTE:
            self.requests.add(status, seconds)
        if status >= self._access_log_from:
            log.info('%s "%s %s HTTP/%s" %d %d', request.client, request.method, request.target, request.version,
                     status, len(payload))  # fmt: skip
        return Answer(status, headers, payload)

    def _serve_own(self, path: str) -> tuple[int, list[tuple[str, str]], bytes]:
        if path == "/metrics":
            return self._json(200, self.metrics())
        if path == "/metrics/prometheus":
            text = prometheus_text(self.metrics()).encode()
            return 200, [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")], text
        if console.owns(path):
            return console.serve(path)
        return self._openapi()

    def _dispatch(self, request: Request, admission: _Admission) -> tuple[int, list[tuple[str, str]], bytes]:
        request_id = self.request_ids.next()
        if (admission.method, admission.path) == PRODUCE_ROUTE and request.header("Origin") is None:
            return self._produce_answer(*produce_app.serve_produce(request.body, request_id))
        if admission.kinesis:
            signed = SignedRequest(request.method, admission.path, admission.query, dict(request.headers),
                                   request.body or b"")  # fmt: skip
            return kinesis_app.answer(signed, request_id)
        event = events.rest_event(
            admission.method,
            admission.path,
            headers=request.headers,
            query=admission.query,
            body=request.body,
            request_id=request_id,
            source_ip=request.client,
        )
        function = admission.function
        context = telemetry.LocalContext(f"llog-{function}", request_id=request_id, timeout_ms=self.limits.max_wait_ms)
        response = HANDLERS[function].handler(event, context)
        parts: tuple[int, list[tuple[str, str]], bytes] = events.response_parts(response)
        return parts

    def _head_problem(self, request: Request) -> tuple[int, list[tuple[str, str]], bytes] | None:
        """Why the request is refused from its head, if it is: nothing of it is read further, nothing written.

        A ``Host`` this server does not answer to (421, ``browser.AllowedHosts``); a body that will not be read
        (chunked, or too long); a request any web page could send (415, ``functions.common.browser``).
        """
        host = request.header("Host")
        if not self.allowed_hosts.allows(host):
            message = (
                f"this server does not answer to the name {host!r} (Host); "
                f"add it to {browser.ALLOWED_HOSTS_ENV} if clients reach the server by it"
            )
            return self._json(421, client_error(message, "MisdirectedRequest"))
        if "chunked" in (request.header("Transfer-Encoding") or "").lower():
            return self._json(411, client_error("send the body with a Content-Length", "LengthRequired"))
        length = int(request.header("Content-Length") or 0)  # httptools refused one that is not a number
        kinesis = self._admission(request).kinesis
        if kinesis and length > kinesis_endpoint.MAX_REQUEST_BYTES:
            return kinesis_endpoint.too_large(length, self.request_ids.next())
        if length > self.limits.max_request_bytes and not kinesis:
            message = (
                f"the request body is {length} bytes; the limit is {self.limits.max_request_bytes} bytes "
                "(LLOG_MAX_REQUEST_BYTES)"
            )
            return self._json(413, client_error(message, "PayloadTooLarge"))
        # A Kinesis request is refused unless signed with an issued key, which no page holds (nor does a browser
        # add one by itself, as it adds cookies): what a page can send there writes nothing.
        cross_site = (
            None
            if kinesis
            else browser.cross_site_problem(
                request.method, request.header("Content-Type"), length > 0, request.header("Origin")
            )
        )
        if cross_site is not None:
            return self._json(browser.UNSUPPORTED_MEDIA_TYPE, client_error(cross_site, browser.ERROR_TYPE))
        return None

    @staticmethod
    def _json(status: int, doc: Any) -> tuple[int, list[tuple[str, str]], bytes]:
        body = json_bytes(doc)
        return status, [("Content-Type", "application/json")], body

    def _openapi(self) -> tuple[int, list[tuple[str, str]], bytes]:
        document = resources.files("functions").joinpath("openapi.json").read_bytes()
        return 200, [("Content-Type", "application/json")], document

    # -- metrics --

    def metrics(self) -> dict[str, Any]:
        s = self.services
        cfg = s.batcher.config
        return {
            "server": {"host": self.host, "port": self.port, "started_at_ms": self.started_at_ms, "root": s.root},
            "http": {
                "requests": self.http.snapshot(),
                "latency": self.http.latency(),
                "rejected": dict(self.httpd.rejections),
                "connections": self.httpd.open_connections,
                "buffered_bytes": self.httpd.buffered_bytes,
            },
            "records": s.traffic.snapshot(),
            "oxia": operations_json(s.oxia.counters),
            "s3": {**operations_json(s.blobs.counters), BILLING: s.billing.report()},
            "batcher": {
                **s.batcher.flush_stats(),
                "rejected": s.batcher.rejected,
                "buffered_bytes": s.batcher.buffered_bytes,
                "in_flight": s.batcher.in_flight,
                "max_bytes": cfg.max_bytes,
                "max_delay_ms": cfg.max_delay_ms,
                "max_buffer_bytes": cfg.max_buffer_bytes,
                "max_in_flight": cfg.max_in_flight,
            },
            "tail_cache": {
                "enabled": s.tail_cache.enabled,
                "hits": s.tail_cache.hits,
                "misses": s.tail_cache.misses,
                "bytes": s.tail_cache.size_bytes,
                "max_bytes": s.tail_cache.max_bytes,
            },
            "groups": self.consumer_lag.report(),
            "process": {"gc": self.collector.snapshot()},
        }


@contextlib.contextmanager
def logging_from_a_writer_thread() -> Iterator[None]:
    """Log records (the access log among them) reach stderr through a queue and one writer thread.

    Each request thread writing its own line made busy clients queue on the
    handler's lock and on stderr (measured with 32 clients: 8% fewer
    requests/s, a fifth more p99). Now a request thread only formats the
    message and enqueues it. At the end the writer writes what is still queued.
    """
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    stderr = logging.StreamHandler()
    stderr.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    enqueue = logging.handlers.QueueHandler(records)
    listener = logging.handlers.QueueListener(records, stderr)
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.INFO)
    root.addHandler(enqueue)
    listener.start()
    try:
        yield
    finally:
        root.removeHandler(enqueue)
        root.setLevel(level)
        listener.stop()


def run(args: argparse.Namespace) -> int:
    with logging_from_a_writer_thread():
        return _serve_until_stopped(args)


def _serve_until_stopped(args: argparse.Namespace) -> int:
    try:
        emf_interval_s = EmfReporter.interval_from_env(os.environ)
        server = LlogServer(args.host, args.port)
    except LlogError as exc:
        print(f"llog serve: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"llog serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous: dict[signal.Signals, Callable[[int, FrameType | None], Any] | int | None] = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous[sig] = signal.signal(sig, on_signal)
    reporter = (
        EmfReporter(emf_interval_s, server.requests, server.services.traffic.snapshot).start()
        if emf_interval_s
        else None
    )
    freeze_startup_heap()  # before the first request: the process is the server's, its start-up objects stay
    server.start()
    print(f"llog serve: listening on {server.url} (Ctrl-C or SIGTERM to stop)", file=sys.stderr, flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        print("llog serve: shutting down", file=sys.stderr, flush=True)
        server.shutdown()
        if reporter is not None:
            reporter.stop()  # the last interval, with the requests the drain answered
        for sig, handler in previous.items():
            with contextlib.suppress(TypeError, ValueError):
                signal.signal(sig, handler)
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``llog serve`` (an entry point of the ``llog.commands`` group)."""
    serve = commands.add_parser("serve", help="serve the HTTP API (produce, consume, admin) from this process")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080; 0 picks one)")
    serve.set_defaults(run=run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="llog")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["serve", *(argv if argv is not None else sys.argv[1:])])
    run: Callable[[argparse.Namespace], int] = args.run
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
