"""``llog serve`` (server/serve.py) over real HTTP: the README's curl requests, validation, metrics, shutdown.

The server runs in a thread on a free port against the session's moto S3.
Without Oxia (an unreachable address) it must still start and answer every
request that needs no Oxia; the Oxia-backed tests use the real server.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from functions.consume import app as consume_app
from functions.produce import app as produce_app
from llog.cli import main
from llog.config import S3Config
from server import http11, serve
from server.prometheus import prometheus_text
from server.serve import LlogServer
from tests.conftest import BUCKET, serve_env, start_server, unreachable_oxia_env
from tests.serve_tasks import post_json, serve_process

ROOT = Path(__file__).resolve().parents[2]

# The request bodies of the README's curl examples, verbatim.
EXAMPLE_PRODUCE = """{
    "topic_partitions": [
      {
        "topic": "orders",
        "partition": 0,
        "records": ["alpha", "beta"]
      },
      {
        "topic": "orders",
        "partition": 1,
        "records": [{"base64": "AAE="}]
      }
    ]
  }"""
EXAMPLE_CONSUME = """{
    "topic_partitions": [
      {
        "topic": "orders",
        "partition": 0,
        "fetch_offset": 1,
        "partition_max_bytes": 1048576
      },
      {
        "topic": "orders",
        "partition": 1,
        "fetch_offset": 1
      }
    ],
    "max_wait_ms": 250,
    "min_bytes": 1,
    "max_bytes": 4194304
  }"""


def storage_calls(srv: LlogServer) -> tuple[int, int]:
    return srv.services.oxia.counters.total_calls(), srv.services.blobs.counters.total_calls()


def request_counts(srv: LlogServer) -> dict[tuple[str, str, int], int]:
    return {(r["method"], r["route"], r["status"]): r["count"] for r in srv.metrics()["http"]["requests"]}


def call(
    srv: LlogServer, method: str, path: str, body: str | bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request(srv.url + path, data=data, method=method, headers=headers or {})
    if data is not None:
        req.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def call_json(srv: LlogServer, method: str, path: str, body: str | bytes | None = None) -> tuple[int, Any]:
    status, headers, raw = call(srv, method, path, body)
    assert headers["Content-Type"] == "application/json"
    return status, json.loads(raw)


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 10) -> None:
    """Until ``condition()`` holds (a state of the server, not a guess at how long it takes)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.005)


@contextlib.contextmanager
def event_loop_held(srv: LlogServer) -> Iterator[None]:
    """Hold the server's event loop: new connections wait in the kernel's listen queue until it runs again."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        held.set()
        release.wait(30)

    srv.call_in_loop(hold)
    try:
        assert held.wait(10), "the event loop did not run the hold"
        yield
    finally:
        release.set()


def send_headers_only(conn: http.client.HTTPConnection, method: str, path: str, body_length: int) -> None:
    """Start a request on ``conn``: its headers are sent, its body (``body_length`` bytes) not yet."""
    conn.putrequest(method, path)
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(body_length))
    conn.endheaders()


def wait_until_serving_only_the_next_request(srv: LlogServer) -> None:
    """Until the answers of earlier requests are written (a client has its answer slightly before the
    server counts the request done), so that one request in flight is then the next one."""
    wait_until(lambda: srv.inflight == 0, "the earlier requests are done")


# --- without Oxia: servers of their own -------------------------------------------------------


def test_the_server_starts_without_contacting_oxia(monkeypatch, s3_config, root):
    start = time.monotonic()
    srv = start_server(monkeypatch, {**serve_env(s3_config, root), "LLOG_OXIA_SERVICE_ADDRESS": "203.0.113.1:6648"})
    try:
        status, body = call_json(srv, "GET", "/health")
        assert time.monotonic() - start < 5
        assert status == 200
        assert body["status"] == "ok"
        assert (body["host"], body["port"]) == ("127.0.0.1", srv.port)
        assert srv.services.oxia.counters.total_calls() == 0
    finally:
        srv.shutdown()


def test_the_handler_and_flush_threads_are_running_before_the_first_request(monkeypatch, s3_config, root):
    before = set(threading.enumerate())  # an earlier server's threads may still be ending
    srv = start_server(monkeypatch, {**serve_env(s3_config, root), **unreachable_oxia_env()})
    try:  # a burst of requests needing a pool thread finds it started; the loop does not start it
        new = [t.name for t in set(threading.enumerate()) - before]
        started = sum(n.startswith("llog-serve_") for n in new), sum(n.startswith("llog-flush_") for n in new)
        assert started == (serve.HANDLER_THREADS_STARTED, srv.services.batcher.config.max_in_flight)
    finally:
        srv.shutdown()


def test_the_llog_package_and_its_cli_do_not_import_powertools_or_the_functions():
    code = (
        "import sys, llog, llog.cli;"
        "bad = [m for m in sys.modules if m.startswith(('aws_lambda_powertools', 'functions'))];"
        "assert not bad, bad"
    )
    # Run outside the checkout's root so that "functions" is not importable by accident.
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT / "docs", capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_prometheus_labels_are_escaped():
    doc = {
        "server": {"started_at_ms": 1_000},
        "http": {"requests": [{"method": "GET", "route": '/a"b\\c\nd', "status": 200, "count": 2, "seconds": 0.5}],
                 "rejected": {"connections": 1}, "connections": 3, "buffered_bytes": 7},
        "oxia": {}, "s3": {},
        "batcher": {"flushes": 0, "flushed_calls": 0, "flushed_bytes": 0, "queue_seconds": 0.0, "call_seconds": 0.0,
                    "flush_seconds": 0.0,
                    "rejected": 0, "buffered_bytes": 0, "in_flight": 0},
        "tail_cache": {"hits": 0, "misses": 0, "bytes": 0, "max_bytes": 0},
    }
    text = prometheus_text(doc)
    assert 'route="/a\\"b\\\\c\\nd"' in text
    assert 'llog_http_rejected_total{reason="connections"} 1.0\n' in text
    assert "llog_http_connections 3.0\n" in text
    assert "llog_http_buffered_bytes 7.0\n" in text


def test_shutdown_closes_the_services_and_uninstalls_them(monkeypatch, s3_config, root):
    srv = start_server(monkeypatch, {**serve_env(s3_config, root), **unreachable_oxia_env()})
    assert produce_app._service.peek() is srv.services.produce
    srv.shutdown()
    assert produce_app._service.peek() is None
    assert consume_app._service.peek() is None
    with pytest.raises(Exception, match="closed"):
        srv.services.batcher.append_shared([])
    with pytest.raises(urllib.error.URLError, match="refused"):
        urllib.request.urlopen(srv.url + "/health", timeout=2)


def test_missing_configuration_stops_the_command(monkeypatch, capsys):
    monkeypatch.delenv("LLOG_OXIA_SERVICE_ADDRESS", raising=False)
    monkeypatch.setenv("LLOG_S3_BUCKET", BUCKET)
    assert main(["serve", "--port", "0"]) == 2
    assert "LLOG_OXIA_SERVICE_ADDRESS" in capsys.readouterr().err


@pytest.mark.parametrize(("access_log", "logged"), [(None, ["/nope"]), ("all", ["/health", "/nope"])])
def test_llog_serve_stops_gracefully_on_sigterm(s3_config, root, access_log, logged):
    env = {**os.environ, **serve_env(s3_config, root), **unreachable_oxia_env()}
    env.pop("LLOG_SERVE_ACCESS_LOG", None)
    if access_log is not None:
        env["LLOG_SERVE_ACCESS_LOG"] = access_log
    with serve_process(env) as (proc, url):
        with urllib.request.urlopen(url + "/health", timeout=5) as resp:
            assert json.loads(resp.read())["status"] == "ok"
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(url + "/nope", timeout=5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        assert proc.stderr is not None
        rest = proc.stderr.read()
        assert "shutting down" in rest
        # The access log's writer thread wrote what it had: by default the errors only.
        assert re.findall(r'"GET (\S+) HTTP/1.1" (\d+) \d+', rest) == [(p, "200" if p == "/health" else "404")
                                                                     for p in logged]  # fmt: skip


def test_llog_serve_freezes_its_start_up_heap(s3_config, root):
    env = {**os.environ, **serve_env(s3_config, root), **unreachable_oxia_env()}
    with serve_process(env) as (proc, url):
        with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:
            collector = json.loads(resp.read())["process"]["gc"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    # The imports and clients made at start: tens of thousands of objects that full collections no longer traverse.
    assert collector["frozen_objects"] > 10_000, collector


def test_llog_serve_reports_its_traffic_as_emf_on_stdout(s3_config, root, oxia_server, topic):
    """With LLOG_SERVE_EMF_INTERVAL_S, what the process served reaches stdout as EMF; SIGTERM reports the rest."""
    env = {**os.environ, **serve_env(s3_config, root), "LLOG_OXIA_SERVICE_ADDRESS": oxia_server.address,
           "LLOG_SERVE_EMF_INTERVAL_S": "3600"}  # fmt: skip
    with serve_process(env) as (proc, url):
        produce = {"topic_partitions": [{"topic": topic, "partition": 0, "records": ["alpha", "beta"]}]}
        assert post_json(url + "/produce", produce)[0] == 200
        consume = {"topic_partitions": [{"topic": topic, "partition": 0, "fetch_offset": 1}]}
        status, answer = post_json(url + "/consume", consume)
        assert status == 200
        assert len(answer["results"][0]["records"]) == 2
        assert post_json(url + "/no-such-route", {})[0] == 404
        with urllib.request.urlopen(url + "/health", timeout=5) as resp:
            resp.read()  # a probe, not traffic
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert proc.stdout is not None
        docs = {}
        for line in proc.stdout.read().splitlines():
            doc = json.loads(line)
            if "_aws" in doc:  # not a handler's log line
                assert doc["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "llog"
                docs[doc["service"]] = doc
        assert (docs["produce"]["RecordsProduced"], docs["produce"]["BytesProduced"]) == ([2], [9])
        assert (docs["consume"]["RecordsConsumed"], docs["consume"]["BytesConsumed"]) == ([2], [9])
        serve = docs["serve"]
        assert (serve["Requests"], serve["ClientErrors"], serve["ServerErrors"]) == ([3], [1], [0])
        assert len(serve["Latency"]) == 3


BURST = 256


def test_a_burst_of_connections_waits_for_the_accept_loop_and_each_gets_its_answers(monkeypatch, s3_config, root):
    """256 connections arrive while the event loop is busy: the listen queue holds them all.

    With the stdlib's listen backlog of 5 the kernel dropped the handshakes
    past it (resets and timeouts under a burst); here the 7th connection could
    not connect. Each connection then serves two requests (keep-alive) with
    TCP_NODELAY set on the server's side.
    """
    nodelay: list[int] = []
    made = http11._Connection.connection_made

    def recording_made(connection: http11._Connection, transport: asyncio.BaseTransport) -> None:
        made(connection, transport)
        nodelay.append(transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    monkeypatch.setattr(http11._Connection, "connection_made", recording_made)
    srv = start_server(monkeypatch, {**serve_env(s3_config, root), **unreachable_oxia_env()})
    conns: list[http.client.HTTPConnection] = []
    try:
        with event_loop_held(srv):
            for i in range(BURST):
                conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
                try:
                    conn.connect()  # the kernel completes the handshake; nothing accepts it yet
                except OSError as exc:
                    pytest.fail(f"connection {i} of {BURST} could not connect while the event loop was busy: {exc!r}")
                conn.request("GET", "/health")
                conns.append(conn)
        for i, conn in enumerate(conns):
            for n in range(2):
                if n:
                    conn.request("GET", "/health")
                resp = conn.getresponse()
                assert (i, resp.status, resp.getheader("Connection")) == (i, 200, None)
                assert json.loads(resp.read())["status"] == "ok"
    finally:
        for conn in conns:
            conn.close()
        srv.shutdown()
    assert len(nodelay) == BURST, "one server connection per client: keep-alive held"
    assert all(nodelay)


def test_a_request_whose_body_is_arriving_when_shutdown_begins_is_served(monkeypatch, s3_config, root):
    """The decision to serve a request and its in-flight count are one step.

    The server had counted this request in flight (shutdown waited for it) but
    decided whether to serve it only after reading its body, so a shutdown
    beginning in between refused it with 503.
    """
    srv = start_server(monkeypatch, {**serve_env(s3_config, root), **unreachable_oxia_env()})
    stopper = threading.Thread(target=srv.shutdown)
    idle = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)  # kept alive across the shutdown
    served = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        idle.request("GET", "/health")
        assert idle.getresponse().read()
        wait_until_serving_only_the_next_request(srv)
        send_headers_only(served, "GET", "/health", 2)
        wait_until(lambda: srv.inflight == 1, "the server reads the request's body")
        stopper.start()
        wait_until(lambda: srv.closing, "shutdown began")

        idle.request("GET", "/health")  # a request that starts now is refused, and its connection closed
        resp = idle.getresponse()
        assert (resp.status, resp.getheader("Retry-After"), resp.getheader("Connection")) == (503, "1", "close")
        assert json.loads(resp.read())["error_type"] == "ShuttingDown"
        wait_until(lambda: not srv.httpd.listening, "the listening socket closed")
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        assert stopper.is_alive(), "shutdown waits for the request being served"

        served.send(b"{}")
        resp = served.getresponse()
        assert (resp.status, resp.getheader("Connection")) == (200, "close")
        assert json.loads(resp.read())["status"] == "ok"
        stopper.join(10)
        assert not stopper.is_alive()
    finally:
        idle.close()
        served.close()  # on a failure, shutdown stops waiting for it
        if stopper.is_alive():
            stopper.join(30)
        srv.shutdown()


def test_shutdown_returns_once_the_answers_of_the_requests_it_drained_are_written(monkeypatch, s3_config, root):
    """A request left the in-flight count before its answer was written: ``llog serve`` could exit without it."""
    srv = start_server(monkeypatch, {**serve_env(s3_config, root), **unreachable_oxia_env()})
    writing, release = threading.Event(), threading.Event()
    answer = LlogServer.answer

    async def held_answer(server: LlogServer, request: http11.Request) -> http11.Answer:
        done = await answer(server, request)
        if request.target == "/health?held":  # answered, not yet written
            writing.set()
            await asyncio.get_running_loop().run_in_executor(None, release.wait, 30)
        return done

    monkeypatch.setattr(LlogServer, "answer", held_answer)
    out: list[Any] = []
    client = threading.Thread(target=lambda: out.append(call(srv, "GET", "/health?held")))
    stopper = threading.Thread(target=srv.shutdown)
    try:
        client.start()
        assert writing.wait(10), "the request did not reach its answer"
        stopper.start()
        wait_until(lambda: srv.closing, "shutdown began")
        stopper.join(1)
        assert stopper.is_alive(), "shutdown returned before the answer of a request it drained was written"
        release.set()
        stopper.join(10)
        client.join(10)
        assert not stopper.is_alive()
        assert out
        assert (out[0][0], out[0][1]["Connection"]) == (200, "close")
    finally:
        release.set()
        if stopper.is_alive():
            stopper.join(30)
        srv.shutdown()


def test_a_connection_waiting_in_the_listen_queue_at_shutdown_is_answered_not_reset(monkeypatch, s3_config, root):
    """Closing the listening socket reset the connections queued on it, after their clients had sent a request."""
    srv = start_server(monkeypatch, {**serve_env(s3_config, root), **unreachable_oxia_env()})
    stopper = threading.Thread(target=srv.shutdown)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        with event_loop_held(srv):
            conn.request("POST", "/produce", EXAMPLE_PRODUCE, {"Content-Type": "application/json"})
            stopper.start()
            wait_until(lambda: srv.closing, "shutdown began")
        resp = conn.getresponse()
        assert (resp.status, resp.getheader("Retry-After"), resp.getheader("Connection")) == (503, "1", "close")
        assert json.loads(resp.read())["error_type"] == "ShuttingDown"
        stopper.join(10)
        assert not stopper.is_alive()
        assert srv.requests.take()[0] == 0  # a drain's 503 is not traffic: no 5xx for the EMF alarm
    finally:
        conn.close()
        if stopper.is_alive():
            stopper.join(30)
        srv.shutdown()


# --- without Oxia: one server for the class -------------------------------------------------------


@pytest.fixture(scope="class")
def server(s3_config: S3Config) -> Iterator[LlogServer]:
    """One server with Oxia unreachable for the tests of a class (they compare counters by deltas).

    Handlers are process-wide, so one server runs at a time: it stops at the
    end of the class, before the tests below start theirs.
    """
    with pytest.MonkeyPatch.context() as mp:
        srv = start_server(mp, {**serve_env(s3_config, f"srv-{uuid.uuid4().hex[:12]}"), **unreachable_oxia_env()})
        try:
            yield srv
        finally:
            srv.shutdown()


class TestWithoutOxia:
    """Requests that need no Oxia, over real HTTP."""

    def test_the_example_produce_with_oxia_down_is_409_per_partition(self, server):
        status, body = call_json(server, "POST", "/produce", EXAMPLE_PRODUCE)
        assert status == 409
        assert [(r["partition"], r["error_type"], r["retriable"]) for r in body["results"]] == [
            (0, "OxiaUnavailable", True),
            (1, "OxiaUnavailable", True),
        ]


    def test_the_example_consume_with_oxia_down_reports_each_partition(self, server):
        status, body = call_json(server, "POST", "/consume", EXAMPLE_CONSUME)
        assert status == 200
        assert [r["error_type"] for r in body["results"]] == ["OxiaUnavailable", "OxiaUnavailable"]


    def test_topics_with_oxia_down_is_503(self, server):
        status, headers, raw = call(server, "GET", "/topics")
        assert status == 503
        assert headers["Retry-After"] == "1"
        assert json.loads(raw)["error_type"] == "OxiaUnavailable"


    @pytest.mark.parametrize(
        ("method", "path", "body", "status", "error_type"),
        [
            ("POST", "/produce", '{"topic_partitions": [', 400, "InvalidRequest"),
            ("POST", "/produce", '{"topic_partitions": []}', 400, "InvalidRequest"),
            ("POST", "/produce", '{"topic_partitions": [{"topic": "orders", "partition": -1, "records": ["a"]}]}', 400,
             "InvalidRequest"),
            ("POST", "/produce", '{"topic_partitions": [{"topic": "o", "partition": 0, "records": [{"base64": "%"}]}]}',
             400, "InvalidRequest"),
            ("POST", "/produce", None, 400, "InvalidRequest"),
            ("POST", "/produce", b"\xff\xfe not utf-8", 400, "InvalidRequest"),
            ("POST", "/consume", '{"topic_partitions": [{"topic": "a/b", "partition": 0, "fetch_offset": 1}]}', 400,
             "InvalidTopicName"),
            ("GET", "/nope", None, 404, "NotFound"),
            ("GET", "/topics/orders/partitions/x", None, 400, "InvalidPartition"),
            ("DELETE", "/produce", None, 405, "MethodNotAllowed"),
            ("GET", "/consume", None, 405, "MethodNotAllowed"),
            ("POST", "/metrics/other", "{}", 404, "NotFound"),
        ],
    )
    def test_rejections_over_http(self, server, method, path, body, status, error_type):
        before = storage_calls(server)
        got_status, got = call_json(server, method, path, body)
        assert got_status == status
        assert got["error_type"] == error_type
        assert got["retriable"] is False
        assert storage_calls(server) == before, "a rejected request reached no store"


    def test_405_names_the_allowed_methods(self, server):
        status, headers, _ = call(server, "PUT", "/topics/orders/partitions/0/fence")
        assert status == 405
        assert headers["Allow"] == "POST"


    def test_head_is_get_without_a_body(self, server):
        status, headers, raw = call(server, "HEAD", "/health")
        assert status == 200
        assert raw == b""
        assert int(headers["Content-Length"]) > 0


    def test_a_body_over_the_limit_is_refused_from_its_content_length(self, server):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.putrequest("POST", "/produce")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(6 * 1024 * 1024 + 1))
        conn.endheaders()  # the body is never sent: the server answers from the header
        resp = conn.getresponse()
        body = json.loads(resp.read())
        conn.close()
        assert resp.status == 413
        assert body["error_type"] == "PayloadTooLarge"
        assert "LLOG_MAX_REQUEST_BYTES" in body["error"]


    def test_a_chunked_body_is_411(self, server):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("POST", "/produce", body=iter([b"{}"]), headers={"Transfer-Encoding": "chunked"})
        resp = conn.getresponse()
        assert resp.status == 411
        assert json.loads(resp.read())["error_type"] == "LengthRequired"
        conn.close()


    def test_keep_alive_serves_several_requests_on_one_connection(self, server):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        for _ in range(3):
            conn.request("GET", "/health")
            resp = conn.getresponse()
            assert resp.status == 200
            resp.read()
        conn.close()


    def test_a_body_on_any_route_is_consumed_so_keep_alive_stays_in_step(self, server):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        for method, path, expected in [("GET", "/metrics", 200), ("GET", "/health", 200), ("POST", "/nope", 404)]:
            conn.request(method, path, body=b'{"ignored": true}', headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == expected
            json.loads(resp.read())
        conn.close()

    def test_metrics_json(self, server):
        before = request_counts(server)
        call(server, "POST", "/produce", EXAMPLE_PRODUCE)
        call(server, "POST", "/produce", "{")
        call(server, "GET", "/nope")
        status, doc = call_json(server, "GET", "/metrics")

        assert status == 200
        requests = {(r["method"], r["route"], r["status"]): r["count"] for r in doc["http"]["requests"]}
        for key in [("POST", "/produce", 409), ("POST", "/produce", 400), ("GET", "/{proxy+}", 404)]:
            assert requests[key] == before.get(key, 0) + 1
        assert doc["oxia"]["get"]["errors"] >= 1
        batcher_fields = {
            "flushes", "flushed_calls", "flushed_bytes", "queue_seconds", "call_seconds", "flush_seconds", "rejected",
            "buffered_bytes", "in_flight",
            "max_bytes", "max_delay_ms", "max_buffer_bytes", "max_in_flight",
        }
        assert set(doc["batcher"]) == batcher_fields
        assert doc["batcher"]["max_delay_ms"] == 20
        assert set(doc["tail_cache"]) == {"enabled", "hits", "misses", "bytes", "max_bytes"}
        assert doc["tail_cache"]["max_bytes"] == 512 * 1024 * 1024
        assert doc["server"]["port"] == server.port
        generations = doc["process"]["gc"]["generations"]
        assert [g["generation"] for g in generations] == [0, 1, 2]
        assert set(generations[0]) == {"generation", "collections", "collected", "uncollectable", "seconds"}


    def test_metrics_prometheus(self, server):
        call(server, "POST", "/produce", EXAMPLE_PRODUCE)
        status, headers, raw = call(server, "GET", "/metrics/prometheus")
        text = raw.decode()
        assert status == 200
        assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert re.search(r'^llog_http_requests_total\{method="POST",route="/produce",status="409"\} [1-9]', text, re.M)
        assert 'llog_storage_operation_errors_total{op="get",store="oxia"}' in text  # labels sorted
        assert "# TYPE llog_batcher_flushes_total counter" in text
        for name in ("flushed_bytes", "queue_seconds", "call_seconds", "flush_seconds"):
            assert re.search(rf"^llog_batcher_{name}_total \d", text, re.M), name
        assert "llog_tail_cache_max_bytes 5.36870912e+08\n" in text  # 536870912, as Go formats a float
        assert re.search(r'^python_gc_collections_total\{generation="2"\} \d+\.0$', text, re.M)
        assert re.search(r'^llog_gc_collection_seconds_total\{generation="0"\} ', text, re.M)
        for line in text.splitlines():
            assert line.startswith("#") or len(line.rsplit(" ", 1)) == 2
            if not line.startswith("#"):
                float(line.rsplit(" ", 1)[1])

    def test_one_server_per_process(self, server):
        with pytest.raises(RuntimeError, match="already runs"):
            LlogServer("127.0.0.1", 0)

    def test_openapi_document(self, server):
        status, headers, raw = call(server, "GET", "/openapi.json")
        assert status == 200
        assert json.loads(raw) == json.loads((ROOT / "functions" / "openapi.json").read_text())


    def test_concurrent_requests_each_get_their_own_answer(self, server):
        failures: list[str] = []

        def worker(i: int) -> None:
            body = json.dumps({"topic_partitions": [{"topic": f"bad/{i}", "partition": 0, "records": ["a"]}]})
            for _ in range(5):
                status, doc = call_json(server, "POST", "/produce", body)
                if status != 400 or f"'bad/{i}'" not in doc["error"]:
                    failures.append(f"{i}: {status} {doc}")

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert failures == []

    def test_a_burst_of_keep_alive_clients_connecting_at_once_is_answered_on_every_connection(self, server):
        barrier = threading.Barrier(BURST)
        answers: dict[int, list[int]] = {}
        failures: dict[int, str] = {}

        def client(i: int) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            try:
                barrier.wait(30)
                statuses = []
                for _ in range(2):
                    conn.request("GET", "/health")
                    resp = conn.getresponse()
                    resp.read()
                    statuses.append(resp.status)
                answers[i] = statuses
            except Exception as exc:
                failures[i] = repr(exc)
            finally:
                conn.close()

        threads = [threading.Thread(target=client, args=(i,)) for i in range(BURST)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert [i for i, t in enumerate(threads) if t.is_alive()] == []
        assert failures == {}
        assert answers == {i: [200, 200] for i in range(BURST)}


    @pytest.mark.parametrize(
        "body",
        [EXAMPLE_PRODUCE, "{", '{"topic_partitions": []}', None, b"\xff\xfe not utf-8",
         '{"topic_partitions": [{"topic": "orders", "partition": -1, "records": ["a"]}]}',
         '{"topic_partitions": [{"topic": "orders", "records": [{"key": "k", "value": "v"}]}]}'],
    )  # fmt: skip
    def test_produce_answers_the_same_with_or_without_the_resolver(self, server, body):
        """Without an Origin, llog serve answers POST /produce itself (``produce_app.serve_produce``); with one,
        through the Lambda handler's resolver. The answers are the same. (A page says its body is JSON, even
        without one: functions/common/browser.py.)"""
        direct = comparable(call(server, "POST", "/produce", body))
        resolved = comparable(call(server, "POST", "/produce", body, {**ORIGIN, "Content-Type": "application/json"}))
        assert direct == resolved


ORIGIN = {"Origin": "http://console.example"}  # llog serve answers such produce requests through the resolver


def comparable(answer: tuple[int, dict[str, str], bytes]) -> tuple[int, dict[str, str], Any]:
    """An answer without what differs from one request to the next: the date, the request id, where each write
    went (its WAL object and index entry), and the wording of a transient error (Oxia out of reach)."""
    status, headers, raw = answer
    kept = {k: v for k, v in headers.items() if k not in ("Date", "X-Request-Id", "Content-Length")}
    assert "X-Request-Id" in headers
    document = json.loads(raw)
    for result in document.get("results", []):
        for name in ("index_key", "wal_uri", *(("error",) if result.get("retriable") else ())):
            result.pop(name, None)
    return status, kept, document


# --- with Oxia --------------------------------------------------------------------------------------


@pytest.mark.oxia
def test_the_example_curl_requests(live_server):
    status, produced = call_json(live_server, "POST", "/produce", EXAMPLE_PRODUCE)
    assert status == 200, produced
    assert [(r["start_offset"], r["end_offset"]) for r in produced["results"]] == [(1, 2), (1, 1)]

    status, consumed = call_json(live_server, "POST", "/consume", EXAMPLE_CONSUME)
    assert status == 200
    p0, p1 = consumed["results"]
    assert [r["value"] for r in p0["records"]] == ["alpha", "beta"]
    assert [r["value"] for r in p1["records"]] == [{"base64": "AAE="}]
    assert (p0["next_fetch_offset"], p1["next_fetch_offset"]) == (3, 2)

    metrics = call_json(live_server, "GET", "/metrics")[1]
    assert metrics["tail_cache"]["hits"] >= 2, "the consume was served from what this process produced"
    assert metrics["batcher"]["flushes"] == 1
    assert metrics["batcher"]["flushed_bytes"] == len("alpha") + len("beta") + 2  # the base64 record is 2 bytes
    assert metrics["batcher"]["flush_seconds"] > 0
    assert metrics["s3"]["put"]["calls"] == 1


def pool_paths(server: LlogServer, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the requests llog serve answers on a pool thread from now on (``_respond``), in order."""
    pooled: list[str] = []
    respond = server._respond

    def recording(request: Any, admission: Any) -> Any:
        pooled.append(admission.path)
        return respond(request, admission)

    monkeypatch.setattr(server, "_respond", recording)
    return pooled


@pytest.mark.oxia
def test_a_produce_to_a_partition_the_process_knows_waits_on_the_event_loop(live_server, monkeypatch):
    pooled = pool_paths(live_server, monkeypatch)
    body = json.dumps({"topic_partitions": [{"topic": "loop", "partition": 0, "records": ["a", "b"]}]})
    first = call_json(live_server, "POST", "/produce", body)
    assert pooled == ["/produce"]  # the partition was initialized first: an Oxia read, on a pool thread
    second = call_json(live_server, "POST", "/produce", body)
    assert pooled == ["/produce"]  # on the loop
    status, _, raw = call(live_server, "POST", "/produce", body, ORIGIN)
    through_the_resolver = (status, json.loads(raw))
    assert pooled == ["/produce", "/produce"]
    offsets = [(a[0], [(r["start_offset"], r["end_offset"]) for r in a[1]["results"]])
               for a in (first, second, through_the_resolver)]  # fmt: skip
    assert offsets == [(200, [(1, 2)]), (200, [(3, 4)]), (200, [(5, 6)])]
    # Refused on the loop as on a pool thread: the same 400, nothing written.
    empty = '{"topic_partitions": [{"topic": "loop", "partition": 0, "records": []}]}'
    assert comparable(call(live_server, "POST", "/produce", empty)) == comparable(
        call(live_server, "POST", "/produce", empty, ORIGIN)
    )
    assert call_json(live_server, "GET", "/topics/loop")[1]["partition_status"][0]["high_watermark"] == 6


@pytest.mark.oxia
def test_a_produce_on_the_loop_to_a_topic_deleted_since_it_was_cached_is_unknown_topic(live_server, monkeypatch):
    assert call_json(live_server, "POST", "/topics", json.dumps({"topic": "gone", "partitions": 1}))[0] == 201
    body = json.dumps({"topic_partitions": [{"topic": "gone", "partition": 0, "records": ["a"]}]})
    assert call_json(live_server, "POST", "/produce", body)[0] == 200
    pooled = pool_paths(live_server, monkeypatch)
    service = live_server.services.produce
    finishes: list[tuple[bool, str]] = []
    finish = service.finish

    def recording(prepared: Any, appended: Any, *, cached_only: bool = False) -> Any:
        finishes.append((cached_only, threading.current_thread().name))
        return finish(prepared, appended, cached_only=cached_only)

    monkeypatch.setattr(service, "finish", recording)
    assert call_json(live_server, "DELETE", "/topics/gone")[0] == 200
    # The produce service still trusts its cached record: the append meets the fence, and the record, read
    # again on a pool thread, turns that into the topic's absence.
    status, answer = call_json(live_server, "POST", "/produce", body)
    assert (status, answer["error_type"]) == (404, "UnknownTopic"), answer
    assert pooled == ["/topics/gone"]
    assert [cached for cached, _ in finishes] == [True, False]
    assert finishes[0][1] == "llog-serve"  # the event loop's thread
    assert finishes[1][1].startswith("llog-serve_")  # a pool thread: it reads Oxia


@pytest.mark.oxia
def test_concurrent_produce_requests_share_wal_blobs(live_server):
    n = 16
    barrier = threading.Barrier(n)
    results: dict[int, tuple[int, Any]] = {}
    failures: dict[int, str] = {}

    def produce(i: int) -> None:
        try:
            barrier.wait(30)
            body = json.dumps({"topic_partitions": [{"topic": "orders", "partition": i % 2, "records": [f"m{i}"]}]})
            results[i] = call_json(live_server, "POST", "/produce", body)
        except Exception as exc:  # reported below, by request
            failures[i] = repr(exc)

    threads = [threading.Thread(target=produce, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [i for i, t in enumerate(threads) if t.is_alive()] == [], "requests still without an answer"
    assert failures == {}, "requests that got no answer"
    assert {i: r for i, r in results.items() if r[0] != 200} == {}
    offsets = sorted((doc["results"][0]["partition"], doc["results"][0]["start_offset"]) for _, doc in results.values())
    assert offsets == sorted((p, o) for p in (0, 1) for o in range(1, n // 2 + 1))
    metrics = call_json(live_server, "GET", "/metrics")[1]
    assert metrics["batcher"]["flushes"] < n
    assert metrics["s3"]["put"]["calls"] == metrics["batcher"]["flushes"]


@pytest.mark.oxia
def test_a_long_poll_wakes_on_a_produce_in_the_same_process(live_server):
    assert call_json(live_server, "POST", "/produce", EXAMPLE_PRODUCE)[0] == 200
    body = json.dumps(
        {"topic_partitions": [{"topic": "orders", "partition": 0, "fetch_offset": 3}], "max_wait_ms": 10_000}
    )
    timer = threading.Timer(0.3, call, args=(live_server, "POST", "/produce", EXAMPLE_PRODUCE))
    start = time.monotonic()
    timer.start()
    status, doc = call_json(live_server, "POST", "/consume", body)
    elapsed = time.monotonic() - start
    timer.join()
    assert status == 200
    assert [r["value"] for r in doc["results"][0]["records"]] == ["alpha", "beta"]
    assert elapsed < 3


@pytest.mark.oxia
def test_fence_over_http(live_server):
    call_json(live_server, "POST", "/produce", EXAMPLE_PRODUCE)
    assert call_json(live_server, "POST", "/topics/orders/partitions/1/fence")[1]["log_state"] == "FENCED"
    status, doc = call_json(live_server, "POST", "/produce", EXAMPLE_PRODUCE)
    assert status == 409
    assert [r["ok"] for r in doc["results"]] == [True, False]
    assert doc["results"][1]["error_type"] == "LogFenced"
    assert call_json(live_server, "GET", "/topics")[1] == {
        "topics": [{"topic": "orders", "partitions": [0, 1], "explicit": False}]
    }


@pytest.mark.oxia
def test_shutdown_lets_a_long_poll_finish(live_server):
    assert call_json(live_server, "POST", "/produce", EXAMPLE_PRODUCE)[0] == 200
    body = json.dumps(
        {"topic_partitions": [{"topic": "orders", "partition": 0, "fetch_offset": 3}], "max_wait_ms": 1000}
    )
    out: list[Any] = []
    poll = threading.Thread(target=lambda: out.append(call_json(live_server, "POST", "/consume", body)))
    wait_until_serving_only_the_next_request(live_server)
    poll.start()
    wait_until(lambda: live_server.inflight == 1, "the server serves the long poll")
    live_server.shutdown()
    poll.join(10)
    assert out
    status, doc = out[0]
    assert status == 200, doc
    assert doc["results"][0]["records"] == []
    assert doc["results"][0]["next_fetch_offset"] == 3


@pytest.mark.oxia
def test_shutdown_lets_a_long_poll_whose_body_is_arriving_finish(live_server):
    assert call_json(live_server, "POST", "/produce", EXAMPLE_PRODUCE)[0] == 200
    body = json.dumps(
        {"topic_partitions": [{"topic": "orders", "partition": 0, "fetch_offset": 3}], "max_wait_ms": 1000}
    ).encode()
    poll = http.client.HTTPConnection("127.0.0.1", live_server.port, timeout=30)
    stopper = threading.Thread(target=live_server.shutdown)
    try:
        wait_until_serving_only_the_next_request(live_server)
        send_headers_only(poll, "POST", "/consume", len(body))
        wait_until(lambda: live_server.inflight == 1, "the server reads the long poll's body")
        stopper.start()
        wait_until(lambda: live_server.closing, "shutdown began")
        poll.send(body)
        resp = poll.getresponse()
        doc = json.loads(resp.read())
        stopper.join(10)
    finally:
        poll.close()
    assert resp.status == 200, doc
    assert [(r["records"], r["next_fetch_offset"]) for r in doc["results"]] == [([], 3)]
    assert not stopper.is_alive()


# The README's consumer-group examples (bodies verbatim; the member id comes from the join).
EXAMPLE_JOIN = '{"topics": ["orders"], "session_timeout_ms": 10000}'
EXAMPLE_COMMIT = """{
    "member_id": "%s",
    "generation": 1,
    "offsets": [{"topic": "orders", "partition": 0, "offset": 2}]
  }"""


@pytest.mark.oxia
def test_a_consumer_group_over_http_and_its_lag_in_metrics(live_server):
    assert call_json(live_server, "POST", "/produce", EXAMPLE_PRODUCE)[0] == 200

    status, joined = call_json(live_server, "POST", "/groups/billing/join", EXAMPLE_JOIN)
    assert status == 200, joined
    assert joined["assignments"] == [{"topic": "orders", "partitions": [0, 1]}]
    member = joined["member_id"]
    status, committed = call_json(live_server, "POST", "/groups/billing/commit", EXAMPLE_COMMIT % member)
    assert status == 200, committed
    status, group = call_json(live_server, "GET", "/groups/billing")
    assert status == 200
    assert [(o["partition"], o["committed"], o["lag"]) for o in group["offsets"]] == [(0, 2, 1), (1, None, None)]
    assert call_json(live_server, "GET", "/groups") == (200, {"groups": ["billing"]})

    def lag_in_metrics() -> list[dict[str, Any]]:
        return [x for x in call_json(live_server, "GET", "/metrics")[1]["groups"]["lag"] if x["committed"]]

    wait_until(lambda: bool(lag_in_metrics()), "/metrics has read the group's lag")
    assert lag_in_metrics() == [
        {"group": "billing", "topic": "orders", "partition": 0, "committed": 2, "log_start": 1, "high_watermark": 2,
         "lag": 1, "below_log_start": False, "committed_for_earlier_topic": None}
    ]
    text = call(live_server, "GET", "/metrics/prometheus")[2].decode()
    assert 'llog_consumer_group_lag{group="billing",partition="0",topic="orders"} 1.0\n' in text
    assert 'llog_consumer_group_committed_offset{group="billing",partition="0",topic="orders"} 2.0\n' in text

    status, left = call_json(live_server, "POST", "/groups/billing/leave", json.dumps({"member_id": member}))
    assert (status, left["left"]) == (200, True)
    status, gone = call_json(live_server, "POST", "/groups/billing/heartbeat",
                             json.dumps({"member_id": member, "generation": 1}))
    assert (status, gone["error_type"]) == (409, "UnknownMember")


# --- topics and keyed produce over HTTP ------------------------------------------------------------


@pytest.mark.oxia
def test_topics_and_keyed_produce_over_http(live_server):
    from llog_client.partitioner import partition_for_key

    status, created = call_json(live_server, "POST", "/topics", json.dumps({"topic": "events", "partitions": 3}))
    assert (status, created["partitions"], created["explicit"]) == (201, 3, True)
    assert call_json(live_server, "POST", "/topics", json.dumps({"topic": "events", "partitions": 3}))[0] == 200

    keyed = {"topic_partitions": [{"topic": "events", "partition": None,
                                   "records": [{"key": f"k{i}", "value": f"v{i}"} for i in range(9)]}]}  # fmt: skip
    status, produced = call_json(live_server, "POST", "/produce", json.dumps(keyed))
    assert status == 200, produced
    expected = {p: [f"v{i}" for i in range(9) if partition_for_key(f"k{i}".encode(), 3) == p] for p in range(3)}
    assert {r["partition"]: r["count"] for r in produced["results"]} == {
        p: len(v) for p, v in expected.items() if v
    }
    fetch = {"topic_partitions": [{"topic": "events", "partition": p, "fetch_offset": 1} for p in range(3)]}
    status, consumed = call_json(live_server, "POST", "/consume", json.dumps(fetch))
    assert {r["partition"]: [rec["value"] for rec in r["records"]] for r in consumed["results"]} == expected

    status, grown = call_json(live_server, "POST", "/topics/events/partitions", json.dumps({"partitions": 4}))
    assert (status, grown["partitions"]) == (200, 4)
    status, described = call_json(live_server, "GET", "/topics/events")
    assert [s["high_watermark"] for s in described["partition_status"]] == [len(expected[p]) for p in range(3)] + [0]
    past = {"topic_partitions": [{"topic": "events", "partition": 4, "records": ["x"]}]}
    assert call_json(live_server, "POST", "/produce", json.dumps(past))[1]["error_type"] == "InvalidPartition"

    status, deleted = call_json(live_server, "DELETE", "/topics/events")
    assert (status, deleted) == (200, {"topic": "events", "deleted": True})
    status, refused = call_json(live_server, "POST", "/produce", json.dumps(keyed))
    assert (status, refused["error_type"]) == (404, "UnknownTopic")
    assert call_json(live_server, "GET", "/topics/events")[0] == 404
    status, listed = call_json(live_server, "GET", "/topics")
    assert listed == {"topics": []}


# The README's topic examples (bodies verbatim).
README_CREATE_TOPIC = '{"topic": "payments", "partitions": 6, "config": {"retention_ms": 604800000}}'
README_KEYED_PRODUCE = (
    '{"topic_partitions": [{"topic": "payments", "records": [{"key": "customer-7", "value": "paid"}]}]}'
)


@pytest.mark.oxia
def test_the_readme_topic_examples(live_server):
    from llog_client.partitioner import partition_for_key

    status, created = call_json(live_server, "POST", "/topics", README_CREATE_TOPIC)
    assert (status, created["partitions"], created["config"]["retention_ms"]) == (201, 6, 604800000)
    status, produced = call_json(live_server, "POST", "/produce", README_KEYED_PRODUCE)
    assert status == 200, produced
    assert [r["partition"] for r in produced["results"]] == [partition_for_key(b"customer-7", 6)]
    status, grown = call_json(live_server, "POST", "/topics/payments/partitions", '{"partitions": 12}')
    assert (status, grown["partitions"]) == (200, 12)
    assert call_json(live_server, "DELETE", "/topics/payments") == (200, {"topic": "payments", "deleted": True})


# The README's exactly-once example (the body verbatim; the producer id comes from POST /producers).
README_IDEMPOTENT_PRODUCE = """{"producer_id": "<id>", "producer_epoch": 0,
       "topic_partitions": [{"topic": "orders", "partition": 0, "sequence": 0, "records": ["a", "b"]}]}"""


@pytest.mark.oxia
def test_the_readme_exactly_once_example(live_server):
    status, issued = call_json(live_server, "POST", "/producers", "{}")
    assert (status, issued["producer_epoch"]) == (200, 0)
    body = README_IDEMPOTENT_PRODUCE.replace("<id>", issued["producer_id"])
    status, first = call_json(live_server, "POST", "/produce", body)
    assert status == 200, first
    status, retried = call_json(live_server, "POST", "/produce", body)  # a retry: the original offsets, nothing written
    assert status == 200, retried
    ((a,), (b,)) = first["results"], retried["results"]
    assert (b["start_offset"], b["end_offset"], b.get("duplicate")) == (a["start_offset"], a["end_offset"], True)
    assert "duplicate" not in a


@pytest.mark.oxia
def test_produce_to_oxia_answers_the_same_with_or_without_the_resolver(live_server, topic):
    """Records written, a partition past an explicit topic's count: both paths, the same answers."""
    answers = []
    for headers, path in (({}, "direct"), (ORIGIN, "resolved")):
        explicit = f"{topic}-{path}"  # each path writes its own topics: the same offsets from the same state
        assert call_json(live_server, "POST", "/topics", json.dumps({"topic": explicit, "partitions": 2}))[0] == 201
        for body in (
            {"topic_partitions": [{"topic": explicit, "partition": 0, "records": ["a", {"base64": "AAE="}]},
                                  {"topic": f"{explicit}-implicit", "partition": 3, "records": ["b"]}]},
            {"topic_partitions": [{"topic": explicit, "partition": 2, "records": ["c"]}]},
        ):  # fmt: skip
            answer = comparable(call(live_server, "POST", "/produce", json.dumps(body), headers))
            answers.append((path, json.loads(json.dumps(answer).replace(explicit, "t"))))
    direct = [a for path, a in answers if path == "direct"]
    assert direct == [a for path, a in answers if path == "resolved"]
    assert [status for status, _, _ in direct] == [200, 400]
