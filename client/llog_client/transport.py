"""JSON over HTTP to llog: one pooled urllib3 connection manager, timeouts, typed errors.

Retries here are only those that cannot duplicate a write: a connection that could not be opened
(nothing was sent) for any method, and any failure of a ``GET``. Whether a ``POST`` that got no
answer is sent again is the caller's decision (the producer resends a batch under the same
sequence, which the server deduplicates), after :func:`backoff`. :meth:`Transport.abort` ends the
requests under way (a producer closed with a timeout).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from llog_client.auth import Auth
from llog_client.errors import LlogClientError, TransportError, error_from
from llog_client.zones import resolve_url

DEFAULT_URL = "http://127.0.0.1:8080"
URL_VARIABLE = "LLOG_URL"
CONNECT_RETRIES = 3
Body = Mapping[str, Any] | bytes | None


JITTER = 0.2  # Kafka's retry backoff jitter: each wait is 80-120% of the exponential step


def backoff(attempt: int, base_s: float, max_s: float) -> float:
    """The wait before retry ``attempt`` (1 for the first): ``base_s`` doubling per attempt up to ``max_s``,
    with ±20% jitter so that clients throttled together do not retry together."""
    step: float = min(max_s, base_s * 2.0 ** min(max(0, attempt - 1), 32))  # no float overflow
    return step * random.uniform(1 - JITTER, 1 + JITTER)


def default_url() -> str:
    """``$LLOG_URL``, else ``make dev``'s ``llog serve``."""
    return os.environ.get(URL_VARIABLE) or DEFAULT_URL


def path(*segments: str) -> str:
    """A request path of escaped segments, e.g. ``path("groups", g, "join")`` is ``/groups/<g>/join``."""
    return "/" + "/".join(quote(segment, safe="") for segment in segments)


class Transport:
    """Sends JSON requests to ``url`` (a base URL, e.g. an API Gateway stage URL) and decodes the answers.

    ``url`` may also map availability zones to URLs (``<zone>=<url>,...``): then it is this
    machine's zone's URL (``llog_client.zones``).
    """

    def __init__(
        self,
        url: str | None = None,
        auth: Auth | None = None,
        *,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 30.0,
        max_connections: int = 8,
    ) -> None:
        self.url = resolve_url(url or default_url()).rstrip("/")
        self.auth = auth
        self.read_timeout_s = read_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._pool = urllib3.PoolManager(maxsize=max_connections, block=False)
        # Every connection this transport opened, so that abort() can end the requests under way on them.
        self._connections: weakref.WeakSet[HTTPConnection] = weakref.WeakSet()
        self._connections_lock = threading.Lock()
        self._aborted = False
        self._pool.pool_classes_by_scheme = _tracking_pools(self._opened)

    def request(
        self, method: str, request_path: str, body: Body = None, *, read_timeout_s: float | None = None
    ) -> tuple[int, Any]:
        """``(status, decoded JSON)`` of a 2xx answer; raises the typed error of any other."""
        status, document = self.exchange(method, request_path, body, read_timeout_s=read_timeout_s)
        if status >= 300:
            raise error_from(document if isinstance(document, Mapping) else {}, status)
        return status, document

    def exchange(
        self, method: str, request_path: str, body: Body = None, *, read_timeout_s: float | None = None
    ) -> tuple[int, Any]:
        """``(status, decoded JSON)`` of whatever the server answered; :class:`TransportError` if it did not.

        ``body`` is a JSON document, or one already encoded (bytes).
        """
        if self._aborted:
            raise TransportError(f"{method} {self.url}{request_path}: not sent, the transport was aborted")
        url = self.url + request_path
        if body is None or isinstance(body, bytes):
            data = body or b""
        else:
            data = json.dumps(body, separators=(",", ":")).encode("utf-8")
        headers = {"accept": "application/json"}
        if body is not None:
            headers["content-type"] = "application/json"
        if self.auth is not None:
            headers.update(self.auth.headers(method, url, headers, data))
        # A GET is safe to repeat; a POST only when its connection never opened.
        safe = method in ("GET", "HEAD")
        retries = urllib3.Retry(
            total=None, connect=CONNECT_RETRIES, read=2 if safe else 0, other=0, status=0, redirect=0,
            backoff_factor=0.1, raise_on_status=False,
        )  # fmt: skip
        timeout = urllib3.Timeout(connect=self.connect_timeout_s, read=read_timeout_s or self.read_timeout_s)
        try:
            response = self._pool.request(
                method, url, body=data if body is not None else None, headers=headers, retries=retries, timeout=timeout
            )
        except urllib3.exceptions.HTTPError as exc:
            raise TransportError(f"{method} {url}: {exc}") from exc
        try:
            document = json.loads(response.data) if response.data else None
        except ValueError as exc:
            text = response.data[:200].decode("utf-8", "replace")
            if response.status >= 300:
                # An answer of a proxy in front of llog (API Gateway's 403, a load balancer's 502).
                raise error_from({"error": text}, response.status) from exc
            raise LlogClientError(f"{method} {url}: not JSON: {text!r}", status=response.status) from exc
        return response.status, document

    def _opened(self, connection: HTTPConnection) -> None:
        with self._connections_lock:
            self._connections.add(connection)
            aborted = self._aborted
        if aborted:  # opened while abort() ran: end it too
            _shut_down(connection)

    def abort(self) -> None:
        """End every request under way at once (each fails with :class:`TransportError`); refuse new ones."""
        with self._connections_lock:
            self._aborted = True
            connections = list(self._connections)
        for connection in connections:
            _shut_down(connection)

    def close(self) -> None:
        self._pool.clear()


def _shut_down(connection: HTTPConnection) -> None:
    """Shut the connection's socket down: a thread blocked reading from it gets an error or EOF at once."""
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):  # closed already
            sock.shutdown(socket.SHUT_RDWR)


def _tracking_pools(opened: Callable[[HTTPConnection], None]) -> dict[str, type[HTTPConnectionPool]]:
    """urllib3 pool classes whose connections call ``opened(connection)`` once connected."""

    class TrackedHTTPConnection(HTTPConnection):
        def connect(self) -> None:
            super().connect()
            opened(self)

    class TrackedHTTPSConnection(HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            opened(self)

    class TrackedHTTPConnectionPool(HTTPConnectionPool):
        ConnectionCls = TrackedHTTPConnection

    class TrackedHTTPSConnectionPool(HTTPSConnectionPool):
        ConnectionCls = TrackedHTTPSConnection

    return {"http": TrackedHTTPConnectionPool, "https": TrackedHTTPSConnectionPool}
