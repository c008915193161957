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
  works); reading pauses while more than ``MAX_PIPELINED`` wait, and an
  answer waits while the client has not read the ones before it (at most
  ``idle_timeout_s``: then the connection closes).
- The application sees each request's head first (``check_head``) and may
  refuse it there: the answer goes out without the body being read, and the
  connection closes after it.
- A malformed request, or one whose head exceeds ``MAX_HEAD_BYTES``, is
  answered 400 and its connection closed.
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
from collections.abc import Awaitable, Coroutine, Sequence
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

    def malformed(self, reason: str) -> Answer:
        """The answer to bytes that are not an HTTP/1.1 request."""


class HttpServer:
    """Listens on ``(host, port)`` from construction (so a busy port fails at once); serves in ``serve``."""

    def __init__(self, host: str, port: int, app: Application, *, backlog: int, idle_timeout_s: float) -> None:
        self.app = app
        self.idle_timeout_s = idle_timeout_s
        self._backlog = backlog
        self._socket = socket.create_server((host, port), backlog=backlog)  # SO_REUSEADDR: restarts rebind at once
        self._socket.setblocking(False)
        self.address: tuple[str, int] = self._socket.getsockname()[:2]
        self._connections: set[_Connection] = set()
        self._all_closed: asyncio.Event | None = None
        self._accepting: set[asyncio.Task[object]] = set()  # connections accepted, their transports not made yet
        self._date = (0, "")

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
        self._connections.add(connection)

    def closed(self, connection: _Connection) -> None:
        self._connections.discard(connection)
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


class _Connection(asyncio.Protocol):
    """One client connection: httptools feeds the callbacks; a task answers the queued requests in order."""

    def __init__(self, server: HttpServer) -> None:
        self._server = server
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
            self._refuse(self._server.app.malformed(f"malformed HTTP request: {exc}"))
        if was_in_head and self._in_head and begun == self._begun and not self._done:
            # All of it is one head, which llhttp keeps until its end: bounded (give or take the read it began in).
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse(self._server.app.malformed(f"the request line and headers exceed {MAX_HEAD_BYTES} bytes"))
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
            self._refuse(self._server.app.malformed("protocol upgrades (the Upgrade header) are not supported"))
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
        if refusal is not None:
            self._refuse(refusal, request)
            return
        self._receiving = _Queued(request)
        expects = (request.header("Expect") or "").lower() == "100-continue" and request.version == "1.1"
        if expects and not self._queue and self._answering is None and self._transport is not None:
            # curl asks before sending a large body (over 1 MB), and waits a second for this if it never comes.
            # (Behind earlier answers still to be written it would come first: then the client waits.)
            self._transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        if self._receiving is not None:
            self._receiving.body.append(body)

    def on_message_complete(self) -> None:
        queued, self._receiving = self._receiving, None
        if queued is None or queued.request is None:  # refused from its head
            return
        if queued.request.header("content-length") is not None:
            queued.request.body = b"".join(queued.body)
        queued.body = []
        self._enqueue(queued)

    # -- answering --

    def _refuse(self, answer: Answer, request: Request | None = None) -> None:
        """Answer after the requests queued before it, then close; read nothing more."""
        self._done = True
        self._forget_receiving()
        answer.close = True
        if self._transport is not None:
            self._transport.pause_reading()
        self._enqueue(_Queued(request, answer))

    def _forget_receiving(self) -> None:
        """The request whose body was arriving will not be complete: nothing to answer, it is finished."""
        receiving, self._receiving = self._receiving, None
        if receiving is not None and receiving.request is not None:
            self._server.app.finished(receiving.request)

    def _enqueue(self, queued: _Queued) -> None:
        self._queue.append(queued)
        if len(self._queue) >= MAX_PIPELINED and self._transport is not None and not self._paused:
            self._paused = True
            self._transport.pause_reading()
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
                    if request is not None:
                        app.finished(request)
                if close:
                    if queued.answer is not None:  # refused from its head: the client may still be sending
                        self._linger_close()
                    else:
                        self.close()
                    break
                if self._paused and len(self._queue) < MAX_PIPELINED and not self._done:
                    self._paused = False
                    assert self._transport is not None
                    self._transport.resume_reading()
            if self._eof:
                self.close()  # every answer due is written
        finally:
            self._answering = None
            for queued in self._queue:  # the connection closed: nobody hears the rest
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
