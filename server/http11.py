"""HTTP/1.1 on one asyncio event loop: the transport of ``llog serve`` (docs/ARCHITECTURE.md).

A connection costs no thread. The loop (uvloop's, on libuv: ``run``)
accepts connections, parses requests with httptools (llhttp, the parser of
Node.js) and writes the answers; an
``Application`` answers each request and runs its blocking work wherever it
likes (``llog serve``: a thread pool). Before, a thread per connection parsed
headers with the email package and wrote through file objects: measured
with 32 keep-alive clients, that server alone topped out near 2,500
requests/s on this project's machines, below what llog needs.

- Requests of one connection are answered in arrival order (pipelining
  works); reading pauses while ``MAX_PIPELINED`` wait, or while requests wait
  and the bodies the connection holds exceed ``HttpLimits.max_connection_bytes``
  (the client's bytes wait in the kernel); an answer waits while the client
  has not read the ones before it (at most ``idle_timeout_s``: then the
  connection closes).
- ``HttpLimits`` bounds what clients cost (docs/HTTP_API.md, "Limits of the
  connections"): past ``max_connections`` a new connection is answered 503 and
  closed; a body over ``max_connection_bytes`` is refused from its head (413);
  once the bodies held by all connections exceed ``max_buffered_bytes`` the
  request whose bytes went over is refused (503); a head not complete within
  ``head_timeout_s`` of its first byte, or a body within ``body_timeout_s`` of
  its head, is answered 408 (bytes trickled in do not put these deadlines
  off; time the server is not reading does). Each refusal closes the
  connection, is counted in ``HttpServer.rejections``, and never reaches
  ``Application.answer``.
- The application sees each request's head first (``check_head``) and may
  refuse it there: the answer goes out without the body being read, and the
  connection closes after it.
- A malformed request is answered 400, one whose head exceeds
  ``MAX_HEAD_BYTES`` 431, and its connection closed.
- ``HEAD`` gets the headers of its ``GET`` answer, without the body.
- ``Expect: 100-continue`` gets its interim answer once the head is accepted.
- A request asking for a protocol upgrade (``Upgrade``, as ``curl --http2``
  sends) is refused with 400: llhttp would not parse its body.
- A connection with nothing to answer closes after ``idle_timeout_s``
  without a byte; a closing connection whose client reads nothing is dropped
  after ``idle_timeout_s``. A client that half-closes still gets its answers.
- Stopping (``stop_accepting``, then ``close``) accepts the connections the
  kernel has queued before the listening socket closes, so their clients get
  an answer instead of a reset, and lets written answers reach the kernel
  before the connections close.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import email.utils
import logging
import socket
import time
from collections.abc import Awaitable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Protocol, TypeVar, cast

import httptools
import uvloop

log = logging.getLogger("llog.serve")

ACCEPT_RETRY_S = 1.0  # after accept() failed (no file descriptor left), before trying again
LINGER_S = 2.0  # after refusing a request, how long its connection reads and drops what the client sends
MAX_HEAD_BYTES = 64 * 1024  # request line and headers; the stdlib server allowed 64 KiB per line
MAX_PIPELINED = 8  # requests of one connection received and not yet answered; more waits in the kernel
SETTLE_S = 1.0  # at the end, how long connections may take to bring their first request and get its answer
SMALL_BODY = 64 * 1024  # at most this: the body goes out in the head's write (one send, one copy)

# Why the server itself refuses a request or a connection (the keys of ``HttpServer.rejections``), and the
# limit each names to ``Application.refused`` (a field of ``HttpLimits``, or this module's constant).
REJECTIONS: Mapping[str, str | None] = {
    "malformed": None,
    "head_bytes": "MAX_HEAD_BYTES",
    "connections": "max_connections",
    "connection_bytes": "max_connection_bytes",
    "buffered_bytes": "max_buffered_bytes",
    "head_timeout": "head_timeout_s",
    "body_timeout": "body_timeout_s",
}


@dataclass(frozen=True)
class HttpLimits:
    """What clients may hold of the process: a slow or hostile one costs its connection's share, not the memory."""

    max_connections: int = 1024  # connections served at once; one more is answered 503
    max_connection_bytes: int = 16 << 20  # request bodies one connection holds (received, answer not written)
    max_buffered_bytes: int = 256 << 20  # request bodies all connections hold together
    head_timeout_s: float = 10.0  # from a request's first byte to the end of its head
    body_timeout_s: float = 60.0  # from the end of a request's head to the end of its body

    def __post_init__(self) -> None:
        if min(self.max_connections, self.max_connection_bytes, self.max_buffered_bytes) < 1:
            raise ValueError(f"every limit must be positive: {self}")
        if min(self.head_timeout_s, self.body_timeout_s) <= 0:
            raise ValueError(f"every timeout must be positive: {self}")


T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on uvloop's event loop: side by side at 32 clients, llog serve took a median 12% less CPU
    per request on it than on asyncio's own loop, at the same requests/s (docs/PERFORMANCE_NOTES.md)."""
    return uvloop.run(main)


@dataclass
class Request:
    """One request, as parsed: ``body`` is None when it came without a Content-Length."""

    method: str
    target: str  # path and query, as sent
    headers: list[tuple[str, str]]
    client: str  # the peer's address
    version: str = "1.1"
    keep_alive: bool = True
    body: bytes | None = None
    state: object = None  # the application's, from ``check_head`` to ``finished``

    _by_name: dict[str, str] | None = field(default=None, init=False, repr=False, compare=False)

    def header(self, name: str) -> str | None:
        """Header ``name`` (any case), its field lines joined with commas as HTTP combines them; None if not sent."""
        by_name = self._by_name
        if by_name is None:  # indexed once: a produce request asks five times
            by_name = self._by_name = {}
            for field_name, value in self.headers:
                key = field_name.lower()
                by_name[key] = f"{by_name[key]}, {value}" if key in by_name else value
        return by_name.get(name.lower())


@dataclass
class Answer:
    status: int
    headers: Sequence[tuple[str, str]] = ()  # without Content-Length and Connection, which are written here
    body: bytes = b""
    close: bool = False  # close the connection once this answer is written


class Application(Protocol):
    @property
    def closing(self) -> bool:
        """Once true, every answer closes its connection: the server is on its way out."""

    def check_head(self, request: Request) -> Answer | None:
        """Called once the head is parsed; an answer refuses the request without reading its body."""

    def answer(self, request: Request) -> Awaitable[Answer]:
        """The answer to a complete request; must not raise."""

    def finished(self, request: Request) -> None:
        """The answer to ``request`` is written, or its connection is gone; called once per head parsed."""

    def refused(self, status: int, reason: str, limit: str | None) -> Answer:
        """The server's own refusal: bytes that are not an HTTP/1.1 request (400), or over ``limit``, the
        name of a field of ``HttpLimits`` (or ``MAX_HEAD_BYTES``); the connection closes after it."""


class HttpServer:
    """Listens on ``(host, port)`` from construction (so a busy port fails at once); serves in ``serve``."""

    def __init__(
        self,
        host: str,
        port: int,
        app: Application,
        *,
        backlog: int,
        idle_timeout_s: float,
        limits: HttpLimits = HttpLimits(),  # noqa: B008 (frozen)
    ) -> None:
        self.app = app
        self.idle_timeout_s = idle_timeout_s
        self.limits = limits
        self.rejections = dict.fromkeys(REJECTIONS, 0)  # keys fixed: read from other threads while counted
        self.buffered_bytes = 0  # request bodies every connection holds (HttpLimits.max_buffered_bytes)
        self._served = 0  # connections accepted within max_connections, not closed yet
        self._turned_away = 0  # connections accepted past it, being answered 503
        self._backlog = backlog
        self._socket = socket.create_server((host, port), backlog=backlog)  # SO_REUSEADDR: restarts rebind at once
        self._socket.setblocking(False)
        self.address: tuple[str, int] = self._socket.getsockname()[:2]
        self._connections: set[_Connection] = set()
        self._all_closed: asyncio.Event | None = None
        self._accepting: set[asyncio.Task[object]] = set()  # connections accepted, their transports not made yet
        self._date = (0, "")

    @property
    def open_connections(self) -> int:
        """Connections open now, those being answered 503 for being past ``max_connections`` included."""
        return len(self._connections)

    @property
    def listening(self) -> bool:
        return self._socket.fileno() != -1

    async def serve(self, stopped: asyncio.Event) -> None:
        """Accept and answer until ``stopped`` is set, then close every connection (their answers flushed)."""
        self._all_closed = asyncio.Event()
        asyncio.get_running_loop().add_reader(self._socket, self._accept)
        try:
            await stopped.wait()
        finally:
            self.stop_accepting()
            await self._settle()
            for connection in list(self._connections):
                connection.close()
            if self._connections:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._all_closed.wait(), timeout=5)

    async def _settle(self) -> None:
        """Until no connection has an answer to write or a first request on its way (at most ``SETTLE_S``).

        A connection taken from the listen queue as the server stopped carries
        a request its client has sent: it gets its answer, not a reset.
        """
        deadline = time.monotonic() + SETTLE_S
        while True:
            await asyncio.sleep(0.01)  # a connection accepted a moment ago gets its transport
            busy = self._accepting or any(c.busy for c in self._connections)
            if not busy or time.monotonic() > deadline:
                return

    def _accept(self) -> None:
        """In the loop: take in the connections waiting in the listen queue (the loop creates their transports)."""
        loop = asyncio.get_running_loop()
        for _ in range(self._backlog):
            try:
                sock, _ = self._socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of file descriptors, say: pause, or the ready socket spins the loop
                log.warning("accepting a connection failed: %s; accepting again in %.0f s", exc, ACCEPT_RETRY_S)
                loop.remove_reader(self._socket)
                loop.call_later(ACCEPT_RETRY_S, self._resume_accepting)
                return
            limit = self.limits.max_connections
            if self._served >= limit and self._turned_away >= limit:
                self.rejections["connections"] += 1  # as many are being answered 503 already: no answer, closed
                sock.close()
                continue
            sock.setblocking(False)
            task = loop.create_task(loop.connect_accepted_socket(self._connection, sock))
            self._accepting.add(task)
            task.add_done_callback(self._accepting.discard)

    def _resume_accepting(self) -> None:
        if self.listening:
            asyncio.get_running_loop().add_reader(self._socket, self._accept)

    def stop_accepting(self) -> None:
        """In the loop: take in the connections still queued, then close the listening socket."""
        if not self.listening:
            return
        self._accept()
        asyncio.get_running_loop().remove_reader(self._socket)
        self.close_socket()

    def close_socket(self) -> None:
        """Stop listening (the server never served, or has stopped).

        Not while the loop watches the socket: uvloop holds it open until its reader is removed
        (``stop_accepting`` removes it first).
        """
        self._socket.close()

    def _connection(self) -> _Connection:
        return _Connection(self)

    def opened(self, connection: _Connection) -> None:
        """Count the connection: served, or past ``max_connections`` and to be answered 503."""
        self._connections.add(connection)
        connection.served = self._served < self.limits.max_connections
        if connection.served:
            self._served += 1
        else:
            self._turned_away += 1

    def closed(self, connection: _Connection) -> None:
        self._connections.discard(connection)
        if connection.served:
            self._served -= 1
        else:
            self._turned_away -= 1
        if not self._connections and self._all_closed is not None:
            self._all_closed.set()

    def date(self) -> str:
        """The Date header's value, formatted once a second."""
        now = int(time.time())
        if self._date[0] != now:
            self._date = (now, email.utils.formatdate(now, usegmt=True))
        return self._date[1]


@dataclass
class _Queued:
    request: Request | None  # None: the answer to a malformed request
    answer: Answer | None = None  # set at once when the request was refused from its head
    body: list[bytes] = field(default_factory=list)
    held: int = 0  # body bytes received, counted in the connection's and the server's totals until written


class _Connection(asyncio.Protocol):
    """One client connection: httptools feeds the callbacks; a task answers the queued requests in order."""

    def __init__(self, server: HttpServer) -> None:
        self._server = server
        self.served = True  # False: opened past HttpLimits.max_connections, to be answered 503 (HttpServer.opened)
        self._held = 0  # body bytes of this connection's requests not answered yet (HttpLimits.max_connection_bytes)
        self._deadline: asyncio.TimerHandle | None = None  # fires at or before _deadline_at
        self._deadline_at: float | None = None  # the loop's time by which the head or body being received is due
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._client = ""
        self._url = b""
        self._headers: list[tuple[str, str]] = []
        self._receiving: _Queued | None = None  # head parsed, body not complete
        self._queue: collections.deque[_Queued] = collections.deque()
        self._answering: asyncio.Task[None] | None = None
        self._done = False  # no further request is read: a refusal or a malformed request ends the connection
        self._paused = False
        self._idle: asyncio.TimerHandle | None = None
        self._active_at = 0.0  # the loop's time of the last thing received or answered
        self._fresh = True  # nothing received yet
        self._in_head = False  # a request has begun and its head is not complete
        self._begun = 0  # requests begun on this connection
        self._eof = False  # the client has shut down its sending side
        self._head_bytes = 0  # received while in that head
        self._writable = asyncio.Event()  # cleared while the transport's write buffer is over its high-water mark
        self._writable.set()

    @property
    def busy(self) -> bool:
        """An answer is due, or the first request has not arrived yet."""
        return not self._done and (self._fresh or bool(self._queue) or self._answering is not None)

    # -- transport events --

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport instances
        # Head and body of a large answer go out in separate writes: with Nagle on, a keep-alive client's
        # delayed ACK held such replies ~40 ms. (uvloop sets it on every TCP transport; asyncio's own loop
        # only on sockets whose proto is TCP, which accepted ones do not say: set here whatever the loop.)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        self._client = str(peer[0]) if peer else ""
        self._server.opened(self)
        if not self.served:
            limit = self._server.limits.max_connections
            self._reject("connections", 503, f"the server has {limit} connections open, its limit; try again")
            return
        self._arm_idle_timer()

    def data_received(self, data: bytes) -> None:
        self._fresh = False
        if self._done:
            return
        was_in_head, begun = self._in_head, self._begun
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass  # refused in on_headers_complete
        except httptools.HttpParserError as exc:
            self._reject("malformed", 400, f"malformed HTTP request: {exc}")
        if was_in_head and self._in_head and begun == self._begun and not self._done:
            # All of it is one head, which llhttp keeps until its end: bounded (give or take the read it began in).
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._reject("head_bytes", 431, f"the request line and headers exceed {MAX_HEAD_BYTES} bytes")
        self._pause_if_full()
        self._arm_idle_timer()

    def eof_received(self) -> bool:
        """The client sent all it will send: answer what is due, then close (a half-closed client still reads)."""
        self._eof = True
        self._done = True
        return bool(self._queue) or self._answering is not None

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self._done = True
        self._writable.set()  # an answer waiting to be written finds the connection gone
        if self._idle is not None:
            self._idle.cancel()
        if self._deadline is not None:
            self._deadline.cancel()
        self._forget_receiving()
        self._server.closed(self)

    def close(self) -> None:
        """Close once what is written has gone out, or drop it after ``idle_timeout_s`` if the client reads nothing.

        A request still being answered is answered unheard.
        """
        self._done = True
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.close()
            asyncio.get_running_loop().call_later(self._server.idle_timeout_s, transport.abort)

    def _linger_close(self) -> None:
        """Send the answer and end the stream, but read and drop what the client still sends for ``LINGER_S``.

        Closing a socket with unread input makes the kernel reset the
        connection, and a client still sending a refused body may then lose the
        answer that says why.
        """
        self._done = True
        transport = self._transport
        if transport is None or transport.is_closing() or not transport.can_write_eof():
            self.close()
            return
        transport.write_eof()
        transport.resume_reading()
        asyncio.get_running_loop().call_later(LINGER_S, transport.abort)

    # -- parser callbacks (httptools) --

    def on_message_begin(self) -> None:
        self._begun += 1
        self._in_head = True
        self._head_bytes = 0
        self._url = b""
        self._headers = []
        self._start_deadline()

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        self._in_head = False
        if self._done:  # a request pipelined after a refused one
            return
        if self._parser.should_upgrade():
            # llhttp stops at an upgrade and would not parse this request's body: refuse it, whole.
            self._reject("malformed", 400, "protocol upgrades (the Upgrade header) are not supported")
            return
        request = Request(
            method=self._parser.get_method().decode("ascii"),
            target=self._url.decode("latin-1"),
            headers=self._headers,
            client=self._client,
            version=self._parser.get_http_version(),
            keep_alive=self._parser.should_keep_alive(),
        )
        refusal = self._server.app.check_head(request)
        if refusal is None and int(request.header("Content-Length") or 0) > self._server.limits.max_connection_bytes:
            limit = self._server.limits.max_connection_bytes
            reason = f"the request body is {request.header('Content-Length')} bytes; a connection may hold {limit}"
            refusal = self._refusal("connection_bytes", 413, reason)
        if refusal is not None:
            self._refuse(refusal, request)
            return
        self._receiving = _Queued(request)
        self._start_deadline()  # now the body's
        expects = (request.header("Expect") or "").lower() == "100-continue" and request.version == "1.1"
        if expects and not self._queue and self._answering is None and self._transport is not None:
            # curl asks before sending a large body (over 1 MB), and waits a second for this if it never comes.
            # (Behind earlier answers still to be written it would come first: then the client waits.)
            self._transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        receiving = self._receiving
        if receiving is None:
            return
        receiving.body.append(body)
        receiving.held += len(body)
        self._held += len(body)
        server = self._server
        server.buffered_bytes += len(body)
        if server.buffered_bytes > server.limits.max_buffered_bytes:
            limit = server.limits.max_buffered_bytes
            reason = f"the server holds {limit} bytes of request bodies, its limit; try again"
            self._reject("buffered_bytes", 503, reason)

    def on_message_complete(self) -> None:
        queued, self._receiving = self._receiving, None
        if queued is None or queued.request is None:  # refused from its head
            return
        self._deadline_at = None
        if queued.request.header("content-length") is not None:
            queued.request.body = b"".join(queued.body)
        queued.body = []
        self._enqueue(queued)

    # -- limits --

    def _refusal(self, kind: str, status: int, reason: str) -> Answer:
        """The server's own refusal of ``kind`` (a key of ``REJECTIONS``), counted."""
        self._server.rejections[kind] += 1
        return self._server.app.refused(status, reason, REJECTIONS[kind])

    def _reject(self, kind: str, status: int, reason: str) -> None:
        """Refuse what is being received: answered after what is queued, then the connection closes."""
        self._refuse(self._refusal(kind, status, reason))

    def _start_deadline(self) -> None:
        """From now, the head or the body being received has its whole time (while this connection reads).

        One timer per connection, put off when it fires early (as the idle timer): a timer made and
        cancelled for every request would cost the loop what ``_arm_idle_timer`` says.
        """
        if self._done or self._paused or not (self._in_head or self._receiving is not None):
            self._deadline_at = None
            return
        loop = asyncio.get_running_loop()
        limits = self._server.limits
        due = self._deadline_at = loop.time() + (limits.head_timeout_s if self._in_head else limits.body_timeout_s)
        timer = self._deadline
        if timer is not None and timer.when() > due:  # set for a body's longer deadline: this head's comes first
            timer.cancel()
            timer = None
        if timer is None:
            self._deadline = loop.call_at(due, self._deadline_passed)

    def _deadline_passed(self) -> None:
        self._deadline = None
        due = self._deadline_at
        if due is None or self._done:
            return
        loop = asyncio.get_running_loop()
        if loop.time() < due:
            self._deadline = loop.call_at(due, self._deadline_passed)
            return
        limits = self._server.limits
        if self._in_head:
            self._reject("head_timeout", 408, f"the request head did not arrive within {limits.head_timeout_s:g} s")
        else:
            self._reject("body_timeout", 408, f"the request body did not arrive within {limits.body_timeout_s:g} s")

    def _full(self) -> bool:
        """Read no more for now: enough requests wait, or they hold the connection's share of bytes."""
        queued = len(self._queue)
        return queued >= MAX_PIPELINED or (queued > 0 and self._held > self._server.limits.max_connection_bytes)

    def _pause_if_full(self) -> None:
        if not self._paused and not self._done and self._transport is not None and self._full():
            self._paused = True
            self._transport.pause_reading()
            self._deadline_at = None  # the client cannot send while this does not read

    def _resume_if_room(self) -> None:
        if self._paused and not self._done and not self._full():
            self._paused = False
            assert self._transport is not None
            self._transport.resume_reading()
            self._start_deadline()

    def _release(self, queued: _Queued) -> None:
        self._held -= queued.held
        self._server.buffered_bytes -= queued.held
        queued.held = 0

    # -- answering --

    def _refuse(self, answer: Answer, request: Request | None = None) -> None:
        """Answer after the requests queued before it, then close; read nothing more."""
        self._done = True
        self._deadline_at = None
        self._forget_receiving()
        answer.close = True
        if self._transport is not None:
            self._transport.pause_reading()
        self._enqueue(_Queued(request, answer))

    def _forget_receiving(self) -> None:
        """The request whose body was arriving will not be complete: nothing to answer, it is finished."""
        receiving, self._receiving = self._receiving, None
        if receiving is not None:
            receiving.body = []
            self._release(receiving)
            if receiving.request is not None:
                self._server.app.finished(receiving.request)

    def _enqueue(self, queued: _Queued) -> None:
        self._queue.append(queued)
        self._pause_if_full()
        if self._answering is None:
            self._answering = asyncio.get_running_loop().create_task(self._answer_queued())

    async def _answer_queued(self) -> None:
        app = self._server.app
        try:
            while self._queue:
                queued = self._queue[0]
                request, answer = queued.request, queued.answer
                if answer is None:
                    assert request is not None
                    answer = await app.answer(request)
                if not self._writable.is_set():  # the client has not read what was written before
                    try:
                        await asyncio.wait_for(self._writable.wait(), self._server.idle_timeout_s)
                    except TimeoutError:
                        log.debug("closing connection from %s: it read nothing for %.0f s", self._client,
                                  self._server.idle_timeout_s)  # fmt: skip
                        self._done = True
                        assert self._transport is not None
                        self._transport.abort()  # what is buffered would never go: drop it, and the answer below
                self._queue.popleft()
                close = answer.close or app.closing or (request is not None and not request.keep_alive)
                try:
                    self._write(request, answer, close)
                finally:
                    self._release(queued)
                    if request is not None:
                        app.finished(request)
                if close:
                    if queued.answer is not None:  # refused from its head: the client may still be sending
                        self._linger_close()
                    else:
                        self.close()
                    break
                self._resume_if_room()
            if self._eof:
                self.close()  # every answer due is written
        finally:
            self._answering = None
            for queued in self._queue:  # the connection closed: nobody hears the rest
                self._release(queued)
                if queued.request is not None:
                    app.finished(queued.request)
            self._queue.clear()
            self._arm_idle_timer()

    def _write(self, request: Request | None, answer: Answer, close: bool) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return  # the client left: the answer has nobody to go to
        try:
            phrase = HTTPStatus(answer.status).phrase
        except ValueError:
            phrase = ""
        lines = [f"HTTP/1.1 {answer.status} {phrase}", "Server: llog", f"Date: {self._server.date()}"]
        lines += [f"{n}: {v}" for n, v in answer.headers if n.lower() not in ("content-length", "connection")]
        lines.append(f"Content-Length: {len(answer.body)}")
        if close:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        body = b"" if request is not None and request.method == "HEAD" else answer.body
        if len(body) <= SMALL_BODY:
            transport.write(head + body)
        else:
            transport.write(head)
            transport.write(body)

    def _arm_idle_timer(self) -> None:
        """Note activity now; idle for ``idle_timeout_s`` from here, and nothing to answer, the connection closes.

        One timer per connection, put off only when it fires: a new timer for every request received and
        answered (and a cancelled one left in the loop's heap) was 7% of the loop's samples at 32 clients.
        """
        if self._transport is None:
            return
        loop = asyncio.get_running_loop()
        self._active_at = loop.time()
        if self._idle is None and not self._done:
            self._idle = loop.call_at(self._active_at + self._server.idle_timeout_s, self._idle_timeout)

    def _idle_timeout(self) -> None:
        self._idle = None
        if self._done or self._answering is not None or self._queue:
            return  # an answer's end notes activity and arms the timer again
        loop = asyncio.get_running_loop()
        due = self._active_at + self._server.idle_timeout_s
        if loop.time() < due:
            self._idle = loop.call_at(due, self._idle_timeout)
            return
        log.debug("closing connection from %s: idle for %.0f s", self._client, self._server.idle_timeout_s)
        self.close()
