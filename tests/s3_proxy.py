"""``S3Proxy``: an HTTP proxy in front of a test S3 server that records requests and injects faults.

``BlobStore`` PUTs through the AWS Common Runtime, whose requests never pass
through botocore's event hooks: tests see and break them on the wire instead.
The proxy forwards every request unchanged (its Host header too, which the
client signed), records what it saw, and answers the first matching requests
with a fault instead: an S3 error, a dropped connection, or no answer at all.
"""

from __future__ import annotations

import http.client
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from tests.faults import HARNESS


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes


@dataclass
class Fault:
    """What the next ``times`` requests of ``method`` get: ``(status, code)``, ``"drop"`` or ``"hang"``."""

    method: str
    answer: tuple[int, str] | str
    times: int
    hits: int = 0


@dataclass
class S3Proxy:
    upstream: str | None  # the S3 server's endpoint URL; None: answer every request 200 with no body
    seen: list[Seen] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    endpoint_url: str = ""
    released: threading.Event = field(default_factory=threading.Event)  # ends every "hang"

    def fail(self, method: str, answer: tuple[int, str] | str, times: int) -> Fault:
        fault = Fault(method, answer, times)
        self.faults.append(fault)
        return fault

    def requests(self, method: str) -> list[Seen]:
        return [s for s in self.seen if s.method == method]

    def _fault_for(self, method: str) -> Fault | None:
        for fault in self.faults:
            if fault.method == method and fault.hits < fault.times:
                fault.hits += 1
                HARNESS["S3 faults injected"] += 1
                return fault
        return None


@contextmanager
def s3_proxy(upstream: str | None, *, tls: ssl.SSLContext | None = None) -> Iterator[S3Proxy]:
    """``tls``: the server's context; the proxy then speaks HTTPS (``endpoint_url`` says so)."""
    proxy = S3Proxy(upstream)
    target = urlsplit(upstream or "")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            proxy.seen.append(Seen(self.command, self.path, headers, body))
            fault = proxy._fault_for(self.command)
            if fault is not None and fault.answer == "drop":
                self.close_connection = True
                return
            if fault is not None and fault.answer == "hang":
                proxy.released.wait(60)
                self.close_connection = True
                return
            if fault is None and upstream is None:
                fault = Fault(self.command, (200, ""), 1)
            if fault is not None:
                assert isinstance(fault.answer, tuple)
                status, code = fault.answer
                error = f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode() if code else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(error)))
                self.end_headers()
                self.wfile.write(error)
                return
            connection = http.client.HTTPConnection(target.netloc, timeout=30)
            try:
                connection.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
                answer = connection.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                        self.send_header(name, value)
                # A HEAD answer says the length of the body it does not carry.
                self.send_header("Content-Length", answer.getheader("Content-Length", "0") if self.command == "HEAD"
                                 else str(len(data)))  # fmt: skip
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            finally:
                connection.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    proxy.endpoint_url = f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.released.set()
        server.shutdown()
        server.server_close()
