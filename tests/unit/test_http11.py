"""``server.http11``: HTTP/1.1 on an event loop, over real sockets, with a recording application."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import uvloop

from server import http11
from server.http11 import MAX_HEAD_BYTES, SMALL_BODY, Answer, HttpLimits, HttpServer, Request

DEFAULTS = HttpLimits()


class Recorder:
    """Answers ``<method> <target> <body>``; records heads and finished requests; may refuse or hold requests."""

    closing = False

    def __init__(self) -> None:
        self.heads: list[str] = []
        self.finished_targets: list[str] = []
        self.refuse: Callable[[Request], Answer | None] = lambda request: None
        self.held: dict[str, threading.Event] = {}
        self.answering: dict[str, threading.Event] = {}

    def check_head(self, request: Request) -> Answer | None:
        self.heads.append(request.target)
        return self.refuse(request)

    async def answer(self, request: Request) -> Answer:
        if request.target in self.held:
            self.answering.setdefault(request.target, threading.Event()).set()
            await asyncio.get_running_loop().run_in_executor(None, self.held[request.target].wait, 10)
        body = f"{request.method} {request.target} {request.body!r}".encode()
        return Answer(200, [("Content-Type", "text/plain")], body)

    def finished(self, request: Request) -> None:
        self.finished_targets.append(request.target)

    def refused(self, status: int, reason: str, limit: str | None) -> Answer:
        return Answer(status, [("Content-Type", "text/plain")], f"{reason} [{limit}]".encode())


class SizedAnswers(Recorder):
    """Answers every request with ``size`` bytes."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    async def answer(self, request: Request) -> Answer:
        return Answer(200, [], b"x" * self.size)


@contextmanager
def serving(app: Recorder, idle_timeout_s: float = 30, limits: HttpLimits = DEFAULTS) -> Iterator[HttpServer]:
    server = HttpServer("127.0.0.1", 0, app, backlog=16, idle_timeout_s=idle_timeout_s, limits=limits)
    ready = threading.Event()
    handles: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def main() -> None:
        stopped = asyncio.Event()
        handles.append((asyncio.get_running_loop(), stopped))
        ready.set()
        await server.serve(stopped)

    thread = threading.Thread(target=http11.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield server
    finally:
        ((loop, stopped),) = handles
        loop.call_soon_threadsafe(stopped.set)
        thread.join(10)
        assert not thread.is_alive()


def connect(server: HttpServer) -> http.client.HTTPConnection:
    return http.client.HTTPConnection(*server.address, timeout=10)


def read_to_end(sock: socket.socket) -> bytes:
    """What the server sends until it closes the connection."""
    chunks = []
    while chunk := sock.recv(1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def raw_exchange(server: HttpServer, data: bytes) -> bytes:
    """Send ``data`` and read until the server closes the connection."""
    with socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(data)
        return read_to_end(sock)


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.005)


def test_the_server_runs_on_uvloops_event_loop() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def note_the_loop() -> None:
        loops.append(asyncio.get_running_loop())

    # On a thread of its own, as llog serve runs it: this thread may have a loop running (Playwright's).
    thread = threading.Thread(target=http11.run, args=(note_the_loop(),), daemon=True)
    thread.start()
    thread.join(10)
    assert len(loops) == 1
    assert isinstance(loops[0], uvloop.Loop)


def test_keep_alive_requests_with_and_without_bodies() -> None:
    app = Recorder()
    with serving(app) as server:
        conn = connect(server)
        for method, target, body, expected in [
            ("GET", "/a?x=1", None, b"GET /a?x=1 None"),
            ("POST", "/b", b'{"k": 1}', b"POST /b b'{\"k\": 1}'"),
            ("POST", "/c", b"", b"POST /c b''"),
        ]:
            conn.request(method, target, body=body)
            resp = conn.getresponse()
            assert (resp.status, resp.read()) == (200, expected)
            assert resp.getheader("Connection") is None
            assert resp.getheader("Server") == "llog"
            assert resp.getheader("Date")
        conn.close()
        wait_until(lambda: len(app.finished_targets) == 3, "every request finished")
    assert app.heads == app.finished_targets == ["/a?x=1", "/b", "/c"]


def test_pipelined_requests_are_answered_in_order() -> None:
    app = Recorder()
    app.held["/slow"] = threading.Event()
    with serving(app) as server, socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /fast HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        wait_until(lambda: "/slow" in app.answering, "the first request is being answered")
        app.held["/slow"].set()
        answers = read_to_end(sock)
    assert answers.index(b"GET /slow") < answers.index(b"GET /fast")
    assert answers.count(b"HTTP/1.1 200 OK") == 2
    assert b"Connection: close" in answers.split(b"GET /slow")[1]


def test_a_malformed_request_is_400_and_closes_the_connection() -> None:
    app = Recorder()
    with serving(app) as server:
        answer = raw_exchange(server, b"GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b"Connection: close\r\n" in answer
    assert b"malformed HTTP request" in answer
    assert app.finished_targets == []


def test_a_refused_head_is_answered_without_reading_its_body() -> None:
    app = Recorder()
    app.refuse = lambda request: Answer(413, body=b"too large") if request.target == "/big" else None
    with serving(app) as server:
        conn = connect(server)
        conn.putrequest("POST", "/big")
        conn.putheader("Content-Length", str(10**9))
        conn.endheaders()  # the body is never sent
        resp = conn.getresponse()
        assert (resp.status, resp.read(), resp.getheader("Connection")) == (413, b"too large", "close")
        conn.close()
        wait_until(lambda: app.finished_targets == ["/big"], "the refused request finished")


def test_head_gets_the_get_headers_without_the_body() -> None:
    app = Recorder()
    with serving(app) as server:
        conn = connect(server)
        conn.request("HEAD", "/h")
        resp = conn.getresponse()
        assert (resp.status, resp.read(), resp.getheader("Content-Length")) == (200, b"", str(len(b"HEAD /h None")))
        conn.request("GET", "/after")  # the connection is still in step
        assert conn.getresponse().read() == b"GET /after None"
        conn.close()


def test_a_large_answer_arrives_whole() -> None:
    class Large(Recorder):
        async def answer(self, request: Request) -> Answer:
            return Answer(200, [], bytes(range(256)) * (SMALL_BODY // 64))

    with serving(Large()) as server:
        conn = connect(server)
        conn.request("GET", "/large")
        assert conn.getresponse().read() == bytes(range(256)) * (SMALL_BODY // 64)
        conn.close()


def test_the_client_asking_to_close_gets_connection_close() -> None:
    app = Recorder()
    with serving(app) as server:
        answer = raw_exchange(server, b"GET /bye HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        http10 = raw_exchange(server, b"GET /old HTTP/1.0\r\n\r\n")
    assert b"Connection: close\r\n" in answer
    assert answer.endswith(b"GET /bye None")
    assert http10.endswith(b"GET /old None")


def test_an_idle_connection_is_closed_after_the_idle_timeout() -> None:
    app = Recorder()
    with serving(app, idle_timeout_s=0.2) as server, socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"GET /once HTTP/1.1\r\nHost: x\r\n\r\n")
        started = time.monotonic()
        received = read_to_end(sock)  # the answer, then the end of the stream
        assert received.endswith(b"GET /once None")
        assert 0.15 < time.monotonic() - started < 5


def test_a_connection_in_use_outlives_the_idle_timeout_and_closes_once_idle() -> None:
    """The idle deadline moves with every request, so the timer that comes due early is put off, not obeyed."""
    app = Recorder()
    with serving(app, idle_timeout_s=1.0) as server, socket.create_connection(server.address, timeout=10) as sock:
        started = time.monotonic()
        for i in range(8):  # 0.3 s apart: 2.4 s in all, well past the 1 s timeout, with 0.7 s to spare each
            target = f"/n{i}"
            sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            wait_until(lambda: target in app.finished_targets, "the request was answered")  # noqa: B023
            time.sleep(0.3)
        assert time.monotonic() - started > 2.0
        last = time.monotonic()
        received = read_to_end(sock)  # the answers, then the end of the stream once idle
        assert received.count(b"HTTP/1.1 200") == 8
        assert 0.3 < time.monotonic() - last < 8  # about 0.7 s: the timeout from the last answer


def test_a_request_whose_client_left_still_finishes() -> None:
    app = Recorder()
    app.held["/left"] = threading.Event()
    with serving(app) as server:
        with socket.create_connection(server.address, timeout=10) as sock:
            sock.sendall(b"GET /left HTTP/1.1\r\nHost: x\r\n\r\n")
            wait_until(lambda: "/left" in app.answering, "the request is being answered")
        app.held["/left"].set()
        wait_until(lambda: app.finished_targets == ["/left"], "the request finished")
        with socket.create_connection(server.address, timeout=10) as sock:
            sock.sendall(b"POST /half HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345")
            wait_until(lambda: "/half" in app.heads, "the head arrived")
        wait_until(lambda: app.finished_targets == ["/left", "/half"], "the unfinished request finished")


def test_stopping_closes_the_listening_socket_and_the_connections() -> None:
    app = Recorder()
    with serving(app) as server:
        conn = connect(server)
        conn.request("GET", "/x")
        conn.getresponse().read()
        address = server.address
    assert not server.listening
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(address, timeout=5)
    conn.request("GET", "/y")  # sent into a closed connection: no answer comes
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        conn.getresponse()


def test_expect_100_continue_gets_its_interim_answer_before_the_body_is_sent() -> None:
    app = Recorder()
    with serving(app) as server, socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
        assert sock.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"body")
        answer = b""
        while not answer.endswith(b"POST /e b'body'"):
            chunk = sock.recv(65536)
            assert chunk, answer
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")


def test_a_refused_head_that_expects_100_continue_gets_the_refusal_instead() -> None:
    app = Recorder()
    app.refuse = lambda request: Answer(413, body=b"too large")
    with serving(app) as server:
        head = b"POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 9999\r\nExpect: 100-continue\r\n\r\n"
        answer = raw_exchange(server, head)
    assert answer.startswith(b"HTTP/1.1 413 Request Entity Too Large\r\n")
    assert b"100 Continue" not in answer


def test_a_client_that_does_not_read_its_answers_stops_getting_new_ones_computed() -> None:
    """Pipelined requests from a client that reads nothing: answers stop once the socket's buffers are full."""

    class Counting(Recorder):
        answered = 0

        async def answer(self, request: Request) -> Answer:
            self.answered += 1
            return Answer(200, [], b"x" * (1 << 20))

    app = Counting()
    requests = 200
    with serving(app) as server, socket.create_connection(server.address, timeout=10) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n" * requests)
        time.sleep(1)
        held = app.answered
        assert held < requests / 2, f"{held} answers of 1 MiB computed for a client that read none"
        received = 0
        while received < requests * (1 << 20):
            chunk = sock.recv(1 << 20)
            assert chunk
            received += len(chunk)
        assert app.answered == requests


def test_a_head_without_end_is_refused_once_it_exceeds_the_limit() -> None:
    app = Recorder()
    with serving(app) as server, socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"GET /x HTTP/1.1\r\nHost: x\r\nX-Long: ")
        try:  # more than the limit and the largest read that can begin a head (256 KiB) together
            for _ in range((MAX_HEAD_BYTES + (256 << 10)) // 1024 * 2):
                sock.sendall(b"a" * 1024)
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused and closed while this was still sending
        answer = read_to_end(sock)
    assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert f"exceed {MAX_HEAD_BYTES} bytes [MAX_HEAD_BYTES]".encode() in answer
    assert app.heads == []


def test_a_client_still_sending_a_refused_body_gets_the_refusal_not_a_reset() -> None:
    app = Recorder()
    app.refuse = lambda request: Answer(413, body=b"too large")
    size = 8 << 20
    with serving(app) as server, socket.create_connection(server.address, timeout=10) as sock:
        head = f"POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: {size}\r\n\r\n".encode()

        def send() -> None:
            with contextlib.suppress(OSError):  # the server may close once the linger ends
                sock.sendall(head + bytes(size))

        sender = threading.Thread(target=send)
        sender.start()
        answer = read_to_end(sock)
        sender.join(10)
    assert answer.startswith(b"HTTP/1.1 413 Request Entity Too Large\r\n")
    assert answer.endswith(b"too large")


def test_header_joins_repeated_field_lines() -> None:
    lines = [("Transfer-Encoding", "gzip"), ("Host", "h"), ("transfer-encoding", "br"), ("TE-x", "1")]
    lines.append(("TRANSFER-encoding", "chunked"))
    request = Request("POST", "/", lines, "c")
    assert request.header("TRANSFER-ENCODING") == "gzip, br, chunked"
    assert request.header("Origin") is None
    assert (request.header("host"), request.header("transfer-encoding")) == ("h", "gzip, br, chunked")  # asked again


def test_large_bodies_and_many_pipelined_requests_are_not_mistaken_for_a_long_head() -> None:
    app = Recorder()
    with serving(app) as server, socket.create_connection(server.address, timeout=10) as sock:
        body = b"b" * (3 << 20)
        sock.sendall(b"POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        last = b"GET /last HTTP/1.1\r\nConnection: close\r\n\r\n"
        sock.sendall(b"GET /small HTTP/1.1\r\nHost: x\r\n\r\n" * 3000 + last)
        answers = read_to_end(sock)
    assert answers.count(b"HTTP/1.1 200 OK") == 3002
    assert b"400 Bad Request" not in answers
    assert answers.endswith(b"GET /last None")


def test_an_upgrade_request_is_refused_whole() -> None:
    app = Recorder()
    with serving(app) as server:
        answer = raw_exchange(server, b"POST /p HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                                      b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n"
                                      b"Content-Length: 7\r\n\r\n{\"a\":1}")  # fmt: skip
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert answer.count(b"HTTP/1.1") == 1
    assert b"Upgrade header" in answer
    assert app.heads == []


def test_no_100_continue_for_http_1_0() -> None:
    app = Recorder()
    with serving(app) as server:
        answer = raw_exchange(server, b"POST /e HTTP/1.0\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\nhi")
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"100 Continue" not in answer


def test_a_client_that_reads_nothing_is_closed_after_the_idle_timeout_and_its_requests_finish() -> None:
    app = SizedAnswers(1 << 20)
    with serving(app, idle_timeout_s=0.5) as server, socket.create_connection(server.address, timeout=10) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n" * 40)
        wait_until(lambda: len(app.heads) > 0 and len(app.finished_targets) == len(app.heads),
                   "every request read was finished once the connection closed")  # fmt: skip
        received = b""
        with contextlib.suppress(ConnectionResetError):  # the server dropped what it could not send
            received = read_to_end(sock)
        assert len(received) < 40 * (1 << 20)


def test_a_client_that_stops_reading_its_last_answer_is_dropped_after_the_idle_timeout() -> None:
    app = SizedAnswers(32 << 20)
    with serving(app, idle_timeout_s=2.0) as server, socket.create_connection(server.address, timeout=10) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 12)
        sock.sendall(b"GET /huge HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        wait_until(lambda: app.finished_targets == ["/huge"], "the answer was written")
        assert server._connections, "the client has read almost nothing of it yet"
        wait_until(lambda: not server._connections, "the server dropped the connection")


def test_a_client_that_half_closes_still_gets_its_answer() -> None:
    app = Recorder()
    app.held["/slow"] = threading.Event()
    with serving(app) as server, socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.shutdown(socket.SHUT_WR)
        wait_until(lambda: "/slow" in app.answering, "the first request is being answered")
        app.held["/slow"].set()
        answers = read_to_end(sock)
    assert answers.count(b"HTTP/1.1 200 OK") == 2
    assert answers.endswith(b"GET /next None")


def test_a_pipelined_head_split_across_reads_after_a_large_body_is_not_refused() -> None:
    app = Recorder()
    body = b"b" * 100_000
    with serving(app) as server, socket.create_connection(server.address, timeout=10) as sock:
        middle = b"st: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body + b"GET /2 HTTP/1.1\r\n"
        for part in (b"POST /1 HTTP/1.1\r\nHo", middle, b"Host: x\r\nConnection: close\r\n\r\n"):
            sock.sendall(part)
            time.sleep(0.05)  # separate reads on the server's side
        answers = read_to_end(sock)
    assert answers.count(b"HTTP/1.1 200 OK") == 2
    assert b"400" not in answers


# --- HttpLimits: what one client may hold ---------------------------------------------------------


def trickle(sock: socket.socket, piece: bytes) -> None:
    """``piece`` every 50 ms for 2 s, as a slow client sends (until the server closes the connection)."""
    with contextlib.suppress(OSError):
        for _ in range(40):
            time.sleep(0.05)
            sock.sendall(piece)


def test_a_head_is_due_within_its_deadline_however_its_bytes_trickle() -> None:
    app = Recorder()
    limits = HttpLimits(head_timeout_s=0.5)
    with serving(app, idle_timeout_s=5, limits=limits) as server, socket.create_connection(server.address) as sock:
        sock.settimeout(10)
        started = time.monotonic()
        sock.sendall(b"GET /x HTTP/1.1\r\n")
        trickle(sock, b"X: y\r\n")
        answer = read_to_end(sock)
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert answer.endswith(b"the request head did not arrive within 0.5 s [head_timeout_s]")
    assert 0.4 < time.monotonic() - started < 3
    assert app.heads == []
    assert server.rejections["head_timeout"] == 1


def test_a_body_is_due_within_its_deadline_and_its_request_is_never_answered() -> None:
    app = Recorder()
    limits = HttpLimits(body_timeout_s=0.5)
    with serving(app, idle_timeout_s=5, limits=limits) as server, socket.create_connection(server.address) as sock:
        sock.settimeout(10)
        sock.sendall(b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
        trickle(sock, b"b")
        answer = read_to_end(sock)
        wait_until(lambda: app.finished_targets == ["/slow"], "the request was finished")
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert b"[body_timeout_s]" in answer
    assert b"POST /slow" not in answer
    assert server.buffered_bytes == 0


def test_the_deadlines_do_not_cut_a_keep_alive_connection_that_sends_whole_requests() -> None:
    app = Recorder()
    with serving(app, limits=HttpLimits(head_timeout_s=0.3, body_timeout_s=0.3)) as server:
        conn = connect(server)
        for i in range(6):  # 0.9 s in all: the deadlines are of one head or body, not of the connection
            conn.request("POST", f"/n{i}", body=b"x")
            assert conn.getresponse().read() == f"POST /n{i} b'x'".encode()
            time.sleep(0.15)
        conn.close()
    assert server.rejections == dict.fromkeys(http11.REJECTIONS, 0)


def test_connections_past_the_limit_are_answered_503_and_the_rest_are_closed() -> None:
    app = Recorder()
    with serving(app, limits=HttpLimits(max_connections=1)) as server:
        kept = connect(server)
        kept.request("GET", "/kept")
        assert kept.getresponse().read() == b"GET /kept None"
        refused = raw_exchange(server, b"GET /more HTTP/1.1\r\nHost: x\r\n\r\n")
        assert refused.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
        assert refused.endswith(b"[max_connections]")
        assert app.heads == ["/kept"]
        kept.close()
        wait_until(lambda: server.open_connections == 0, "the connections closed")
        assert raw_exchange(server, b"GET /next HTTP/1.1\r\nConnection: close\r\n\r\n").endswith(b"GET /next None")
    assert server.rejections["connections"] == 1


def test_bodies_pipelined_behind_a_slow_answer_wait_in_the_kernel_past_the_connections_share() -> None:
    app = Recorder()
    app.held["/slow"] = threading.Event()
    share = 1 << 20
    body = b"b" * (300 << 10)
    limits = HttpLimits(max_connection_bytes=share)
    with serving(app, limits=limits) as server, socket.create_connection(server.address, timeout=10) as sock:
        sock.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        wait_until(lambda: "/slow" in app.answering, "the slow request is being answered")
        post = b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        sender = threading.Thread(target=sock.sendall, args=(post * 7 + b"GET /end HTTP/1.1\r\n\r\n",))
        sender.start()
        wait_until(lambda: any(c._paused for c in server._connections), "the server stopped reading")
        time.sleep(0.1)
        assert share < server.buffered_bytes <= share + (256 << 10)  # past the share by one read at most
        assert app.heads.count("/p") < 7
        app.held["/slow"].set()
        sender.join(10)
        sock.shutdown(socket.SHUT_WR)
        answers = read_to_end(sock)
    assert answers.count(b"HTTP/1.1 200 OK") == 9
    assert answers.endswith(b"GET /end None")
    assert server.buffered_bytes == 0


def test_a_body_larger_than_a_connections_share_is_refused_from_its_head() -> None:
    app = Recorder()
    with serving(app, limits=HttpLimits(max_connection_bytes=1000)) as server:
        answer = raw_exchange(server, b"POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n")
        wait_until(lambda: app.finished_targets == ["/big"], "the refused request finished")
    assert answer.startswith(b"HTTP/1.1 413 Request Entity Too Large\r\n")
    assert answer.endswith(b"a connection may hold 1000 [max_connection_bytes]")


def test_a_body_that_takes_the_servers_total_past_its_limit_is_refused_503() -> None:
    app = Recorder()
    limits = HttpLimits(max_connection_bytes=1 << 20, max_buffered_bytes=1 << 20)
    head = b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (700 << 10)
    with serving(app, limits=limits) as server:
        first = socket.create_connection(server.address, timeout=10)
        second = socket.create_connection(server.address, timeout=10)
        with first, second:
            first.sendall(head + b"a" * (600 << 10))
            wait_until(lambda: server.buffered_bytes == 600 << 10, "the first body's part arrived")
            with contextlib.suppress(OSError):
                second.sendall(head + b"b" * (600 << 10))
            refused = read_to_end(second)
            first.sendall(b"a" * (100 << 10))
            first.shutdown(socket.SHUT_WR)
            served = read_to_end(first)
    assert refused.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert refused.endswith(b"[max_buffered_bytes]")
    assert served.startswith(b"HTTP/1.1 200 OK\r\n")
    assert server.buffered_bytes == 0
    assert server.rejections["buffered_bytes"] == 1
