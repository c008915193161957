"""``llog serve`` at its edges, over real sockets: what a slow, greedy or hostile client may cost the process
(server/http11.py's limits, ``LLOG_SERVE_MAX_*`` and ``LLOG_SERVE_*_TIMEOUT_S``), and what a page of another
site may make a browser send (functions/common/browser.py, ``AllowedHosts`` in server/serve.py)."""

from __future__ import annotations

import contextlib
import http.client
import json
import select
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from server.serve import LlogServer
from tests.conftest import serve_env, start_server, unreachable_oxia_env

MIB = 1 << 20
PRODUCE = {"topic_partitions": [{"topic": "orders", "partition": 0, "records": ["alpha"]}]}


@contextlib.contextmanager
def serving(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> Iterator[LlogServer]:
    srv = start_server(monkeypatch, env)
    try:
        yield srv
    finally:
        srv.shutdown()


@pytest.fixture
def offline(monkeypatch, s3_config, root) -> Callable[..., contextlib.AbstractContextManager[LlogServer]]:
    """A server with Oxia out of reach, configured by the extra variables given."""
    return lambda **extra: serving(monkeypatch, {**serve_env(s3_config, root), **unreachable_oxia_env(), **extra})


@pytest.fixture
def online(monkeypatch, s3_config, root, oxia_server) -> Callable[..., contextlib.AbstractContextManager[LlogServer]]:
    """A server on the session's Oxia, configured by the extra variables given."""
    env = {**serve_env(s3_config, root), "LLOG_OXIA_SERVICE_ADDRESS": oxia_server.address}
    return lambda **extra: serving(monkeypatch, {**env, **extra})


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.005)


def read_to_end(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def answers(raw: bytes) -> list[tuple[int, dict[str, str], Any]]:
    """The answers in ``raw``, in order: status, headers (lower-case names) and the JSON body."""
    found = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers["content-length"])
        found.append((int(lines[0].split()[1]), headers, json.loads(rest[:length]) if length else None))
        raw = rest[length:]
    return found


def exchange(srv: LlogServer, data: bytes, timeout_s: float = 10) -> list[tuple[int, dict[str, str], Any]]:
    with socket.create_connection(("127.0.0.1", srv.port), timeout=timeout_s) as sock:
        sock.sendall(data)
        return answers(read_to_end(sock))


def trickle(sock: socket.socket, data: bytes, every_s: float) -> None:
    """Send ``data`` a byte at a time, ``every_s`` apart, until it is sent or the server answers."""
    for i in range(len(data)):
        try:
            sock.sendall(data[i : i + 1])
        except OSError:
            return
        if select.select([sock], [], [], every_s)[0]:
            return


def request(method: str, path: str, body: bytes = b"", /, **headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", *(f"{k.replace('_', '-')}: {v}" for k, v in headers.items())]
    if body or method not in ("GET", "HEAD"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def held_body_bytes(srv: LlogServer) -> int:
    """Request body bytes the server's connections hold: those of requests not answered yet and the one arriving."""
    held = 0
    for connection in list(srv.httpd._connections):
        for queued in list(connection._queue):
            held += len(queued.request.body or b"") if queued.request is not None else 0
        receiving = connection._receiving
        held += sum(len(part) for part in receiving.body) if receiving is not None else 0
    return held


# --- the HTTP server's limits ---------------------------------------------------------------------


def test_a_head_trickled_past_its_deadline_is_answered_408(offline):
    """Each byte used to put the idle timer off: a head sent over minutes was served."""
    with offline(LLOG_SERVE_HEAD_TIMEOUT_S="1") as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
            started = time.monotonic()
            trickle(sock, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 30 + b"\r\n\r\n", 0.1)
            took = time.monotonic() - started
            ((status, headers, doc),) = answers(read_to_end(sock))
        assert (status, doc["error_type"], headers["connection"]) == (408, "RequestTimeout", "close")
        assert "LLOG_SERVE_HEAD_TIMEOUT_S" in doc["error"]
        assert 0.9 < took < 3
        assert srv.metrics()["http"]["rejected"]["head_timeout"] == 1
        assert srv.metrics()["http"]["requests"] == []  # no handler saw it


def test_a_body_trickled_past_its_deadline_is_answered_408_and_not_served(offline):
    with offline(LLOG_SERVE_BODY_TIMEOUT_S="1") as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
            body = json.dumps(PRODUCE).encode()
            head = request("POST", "/produce", body, Host="127.0.0.1", Content_Type="application/json")[: -len(body)]
            sock.sendall(head)
            started = time.monotonic()
            trickle(sock, body, 0.1)
            took = time.monotonic() - started
            ((status, headers, doc),) = answers(read_to_end(sock))
        assert (status, doc["error_type"], headers["connection"]) == (408, "RequestTimeout", "close")
        assert "LLOG_SERVE_BODY_TIMEOUT_S" in doc["error"]
        assert 0.9 < took < 3
        assert srv.services.oxia.counters.total_calls() == srv.services.blobs.counters.total_calls() == 0
        assert srv.metrics()["http"]["rejected"]["body_timeout"] == 1


def test_connections_past_the_limit_are_answered_503_until_one_closes(offline):
    with offline(LLOG_SERVE_MAX_CONNECTIONS="2") as srv:
        kept = [http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10) for _ in range(2)]
        for conn in kept:
            conn.request("GET", "/health")
            assert conn.getresponse().read()
        ((status, headers, doc),) = exchange(srv, request("GET", "/health", Host="127.0.0.1"))
        assert (status, doc["error_type"], doc["retriable"]) == (503, "ServerBusy", True)
        assert (headers["retry-after"], headers["connection"]) == ("1", "close")
        assert "LLOG_SERVE_MAX_CONNECTIONS" in doc["error"]
        kept[0].request("GET", "/metrics")
        assert json.loads(kept[0].getresponse().read())["http"]["rejected"]["connections"] == 1
        kept[1].close()
        wait_until(lambda: srv.httpd.open_connections == 1, "the server saw the connection close")
        ((status, _, doc),) = exchange(srv, request("GET", "/health", Host="127.0.0.1", Connection="close"))
        assert (status, doc["status"]) == (200, "ok")
        kept[0].close()


@pytest.mark.oxia
def test_bodies_pipelined_behind_a_long_poll_are_held_to_the_connections_share(online):
    """They used to be read until 8 requests waited: 7 bodies of up to 6 MiB parked behind one long poll."""
    env = {"LLOG_MAX_REQUEST_BYTES": str(MIB), "LLOG_SERVE_MAX_CONNECTION_BYTES": str(MIB)}
    with online(**env) as srv:
        assert exchange(srv, request("POST", "/produce", json.dumps(PRODUCE).encode(), Host="127.0.0.1",
                                     Content_Type="application/json", Connection="close"))[0][0] == 200  # fmt: skip
        poll = {"topic_partitions": [{"topic": "orders", "partition": 0, "fetch_offset": 2}], "max_wait_ms": 2000}
        large = json.dumps({"unknown": "a" * (MIB - 100)}).encode()  # a 400, after the long poll
        pipelined = request("POST", "/consume", json.dumps(poll).encode(), Host="127.0.0.1",
                            Content_Type="application/json")  # fmt: skip
        pipelined += request("POST", "/consume", large, Host="127.0.0.1", Content_Type="application/json") * 6
        pipelined += request("GET", "/health", Host="127.0.0.1", Connection="close")
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 16)
            sock.setblocking(False)
            sent = 0
            deadline = time.monotonic() + 10
            while not any(c._paused for c in list(srv.httpd._connections)):
                assert time.monotonic() < deadline, "the server never stopped reading"
                with contextlib.suppress(BlockingIOError):
                    sent += sock.send(pipelined[sent : sent + (1 << 16)])
            held = held_body_bytes(srv)
            assert held <= MIB + (512 << 10), f"{held} bytes of bodies held behind the long poll"
            sock.setblocking(True)
            sock.sendall(pipelined[sent:])
            got = answers(read_to_end(sock))
        assert [status for status, _, _ in got] == [200] + [400] * 6 + [200]
        assert srv.httpd.buffered_bytes == 0


def test_bodies_past_the_servers_total_are_refused_503(offline):
    env = {"LLOG_MAX_REQUEST_BYTES": str(MIB), "LLOG_SERVE_MAX_CONNECTION_BYTES": str(MIB),
           "LLOG_SERVE_MAX_BUFFERED_BYTES": str(3 * MIB // 2)}  # fmt: skip
    body = json.dumps({"unknown": "a" * (MIB - 100)}).encode()
    head = request("POST", "/consume", body, Host="127.0.0.1", Content_Type="application/json", Connection="close")
    head = head[: -len(body)]
    part = 900 << 10
    with offline(**env) as srv:
        first = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        second = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        with first, second:
            first.sendall(head + body[:part])
            wait_until(lambda: held_body_bytes(srv) >= part, "the first body's part arrived")
            with contextlib.suppress(OSError):
                second.sendall(head + body[:part])
            ((status, headers, doc),) = answers(read_to_end(second))
            assert (status, doc["error_type"], headers["retry-after"]) == (503, "ServerBusy", "1")
            assert "LLOG_SERVE_MAX_BUFFERED_BYTES" in doc["error"]
            first.sendall(body[part:])
            ((status, _, doc),) = answers(read_to_end(first))
            assert (status, doc["error_type"]) == (400, "InvalidRequest")  # served: the unknown field
        assert srv.metrics()["http"]["rejected"]["buffered_bytes"] == 1
        assert srv.httpd.buffered_bytes == 0


# --- requests a web page of another site can make a browser send ----------------------------------


def topics(srv: LlogServer) -> list[str]:
    ((_, _, doc),) = exchange(srv, request("GET", "/topics", Host="127.0.0.1", Connection="close"))
    return [t["topic"] for t in doc["topics"]]


@pytest.mark.oxia
@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None]
)
def test_a_post_any_page_can_send_is_refused_415_and_writes_nothing(online, content_type):
    """A page of any site sends these without a preflight; they used to produce (200)."""
    headers = {"Host": "127.0.0.1", "Origin": "http://evil.example", "Connection": "close"}
    if content_type is not None:
        headers["Content_Type"] = content_type
    with online() as srv:
        ((status, _, doc),) = exchange(srv, request("POST", "/produce", json.dumps(PRODUCE).encode(), **headers))
        assert (status, doc["error_type"]) == (415, "UnsupportedMediaType")
        assert "Content-Type: application/json" in doc["error"]
        assert topics(srv) == []


@pytest.mark.oxia
def test_a_bodiless_post_from_a_page_does_not_fence_but_one_from_curl_does(online):
    with online() as srv:
        json_produce = request("POST", "/produce", json.dumps(PRODUCE).encode(), Host="127.0.0.1",
                               Content_Type="application/json", Connection="close")  # fmt: skip
        assert exchange(srv, json_produce)[0][0] == 200
        fence = "/topics/orders/partitions/0/fence"
        for headers in ({"Origin": "http://evil.example"},
                        {"Origin": "null", "Content_Type": "application/x-www-form-urlencoded"}):  # fmt: skip
            ((status, _, doc),) = exchange(srv, request("POST", fence, Host="127.0.0.1", Connection="close", **headers))
            assert (status, doc["error_type"]) == (415, "UnsupportedMediaType")
        assert exchange(srv, json_produce)[0][0] == 200  # not fenced
        ((status, _, doc),) = exchange(srv, request("POST", fence, Host="127.0.0.1", Connection="close"))  # as curl
        assert (status, doc["log_state"]) == (200, "FENCED")


def test_a_host_this_server_does_not_answer_to_is_refused_421(offline):
    """DNS rebinding: a page of evil.example, its name resolving to 127.0.0.1, sends Host: evil.example."""
    with offline(LLOG_SERVE_ALLOWED_HOSTS="llog.internal, other.example") as srv:
        port = srv.port
        for method, path, body in (("GET", "/topics", b""), ("POST", "/produce", json.dumps(PRODUCE).encode())):
            raw = request(method, path, body, Host=f"evil.example:{port}", Content_Type="application/json",
                          Connection="close")  # fmt: skip
            ((status, _, doc),) = exchange(srv, raw)
            assert (status, doc["error_type"]) == (421, "MisdirectedRequest")
            assert "LLOG_SERVE_ALLOWED_HOSTS" in doc["error"]
        assert srv.services.oxia.counters.total_calls() == srv.services.blobs.counters.total_calls() == 0
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}", f"10.1.2.3:{port}",
                     f"llog.internal:{port}", "other.example."):  # fmt: skip
            ((status, _, _),) = exchange(srv, request("GET", "/health", Host=host, Connection="close"))
            assert (host, status) == (host, 200)
