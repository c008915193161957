"""``llog serve`` on the session's Oxia server and moto S3, for the client's tests."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from llog_client.producer import RecordMetadata
from server.serve import LlogServer


def call(server: LlogServer, method: str, path: str, body: Any = None) -> Any:
    """One request to ``server`` with urllib (not the client under test); the decoded JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path, data=data, method=method,
                                     headers={"content-type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def read_partition(server: LlogServer, topic: str, partition: int) -> list[dict[str, Any]]:
    """Every record of the partition, read with ``POST /consume``."""
    records: list[dict[str, Any]] = []
    offset = 1
    while True:
        body = {"topic_partitions": [{"topic": topic, "partition": partition, "fetch_offset": offset}]}
        (result,) = call(server, "POST", "/consume", body)["results"]
        if result.get("error_type") == "PartitionNotInitialized":
            return records
        assert result["ok"], result
        if not result["records"]:
            return records
        records += result["records"]
        offset = result["next_fetch_offset"]


def results(futures: list[Future[RecordMetadata]]) -> list[RecordMetadata]:
    return [future.result(timeout=0) for future in futures]


@pytest.fixture
def server(live_server: LlogServer) -> LlogServer:
    """The client's tests call it ``server``: ``llog serve`` (tests/conftest.py's ``live_server``)."""
    return live_server


class Gateway:
    """A tiny HTTP server in front of ``llog serve`` that stands in for API Gateway: it answers API Gateway's
    bare 429 to the first ``throttle[path]`` requests of a path, sends the first ``missing[path]`` ones to a
    path ``llog serve`` has no route for (as a version without the route would answer), holds the requests of
    the paths in ``hold`` until ``release`` is set, and forwards everything else."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.throttle: dict[str, int] = {}
        self.missing: dict[str, int] = {}
        self.hold: tuple[str, ...] = ()
        self.release = threading.Event()
        self.seen: list[tuple[float, str, int]] = []  # (monotonic time, path, status answered)
        self._lock = threading.Lock()
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                gateway.handle(self)

            def do_POST(self) -> None:
                gateway.handle(self)

            def do_DELETE(self) -> None:
                gateway.handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        body = request.rfile.read(int(request.headers.get("content-length") or 0))
        path = request.path
        with self._lock:
            throttled = self.throttle.get(path, 0) > 0
            if throttled:
                self.throttle[path] -= 1
            elif self.missing.get(path, 0) > 0:
                self.missing[path] -= 1
                path = "/no-such-route"
        if throttled:
            status, data = 429, b'{"message":"Too Many Requests"}'
        else:
            if request.path in self.hold:
                self.release.wait()
            forwarded = urllib.request.Request(self.target + path, data=body if body else None,
                                               method=request.command, headers={"content-type": "application/json"})
            try:
                with urllib.request.urlopen(forwarded, timeout=30) as response:
                    status, data = response.status, response.read()
            except urllib.error.HTTPError as exc:
                status, data = exc.code, exc.read()
        with self._lock:
            self.seen.append((time.monotonic(), request.path, status))
        request.send_response(status)
        request.send_header("content-type", "application/json")
        request.send_header("content-length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

    def answered(self, path: str, status: int) -> list[float]:
        """When ``path`` was answered ``status``."""
        with self._lock:
            return [at for at, seen, answered in self.seen if (seen, answered) == (path, status)]

    def close(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def gateway(server: LlogServer) -> Iterator[Gateway]:
    """A :class:`Gateway` in front of ``server``; set ``throttle`` and ``hold`` before use."""
    front = Gateway(server.url)
    try:
        yield front
    finally:
        front.close()
