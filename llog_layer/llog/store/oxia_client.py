"""How llog reaches Oxia: gRPC channels, shard routing and sessions over the generated ``io.oxia.proto.v1`` stub.

``llog.store.oxia_proto`` is generated from Oxia's own ``client.proto`` (v0.17.1) by
scripts/generate-oxia-proto.sh; nothing here depends on the ``oxia`` Python
client. What this module does (docs/ARCHITECTURE.md "Oxia"):

* ``Connections``: one channel per server address, every unary call (and
  ``Read``, ``List``, ``RangeScan``) bound by the request deadline, the
  long-lived streams not; reconnecting within 2 s after a server restart.
* ``ShardDirectory``: the shard assignments, streamed from the service address
  by a thread that reconnects with backoff; the constructor waits at most the
  connect timeout for the first ones. A key's shard is the one whose hash range
  holds ``xxh64(partition_key or key)``'s low 32 bits, as the Python client
  placed keys, so data written by it is found where it is.
* ``Sessions``: one session per shard, opened on the first ephemeral put there
  and kept alive every max(timeout / 10, 2 s) until it expires or is dropped.
* ``oxia_key_order``: the server's key order (``--key-sorting hierarchical``),
  to merge the answers of several shards.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import xxhash

from llog.backoff import Backoff
from llog.errors import OxiaUnavailable
from llog.store.oxia_proto.io.oxia.proto import v1 as pb
from llog.store.oxia_wire import RANGE_SCAN_METHOD, READ_METHOD, SERVICE, WRITE_METHOD

log = logging.getLogger(__name__)

_SHARD_ASSIGNMENTS_METHOD = SERVICE + "GetShardAssignments"
_NOTIFICATIONS_METHOD = SERVICE + "GetNotifications"
# Long-lived streams must not get a request deadline.
_STREAMING_METHODS = frozenset({_SHARD_ASSIGNMENTS_METHOD, _NOTIFICATIONS_METHOD, SERVICE + "GetSequenceUpdates"})
_CHANNEL_OPTIONS = [
    # Reconnect quickly after a server restart instead of gRPC's default
    # backoff of up to two minutes, during which every call fails.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2_000),
]
# Between attempts to (re)open the shard assignment stream: 100 ms doubling up to 5 s.
_ASSIGNMENTS_BACKOFF_INITIAL_S = 0.1
_ASSIGNMENTS_BACKOFF_MAX_S = 5.0
_KEEP_ALIVE_FLOOR_MS = 2_000
_INTERNAL_KEY_PREFIX = "__oxia/"


class NoShard(Exception):
    """No shard assignments (yet) for a key: transient, the assignment stream is (re)connecting."""


class StatusError(Exception):
    """An Oxia answer's status other than OK (``pb.Status``)."""

    def __init__(self, status: int, what: str) -> None:
        super().__init__(f"{what}: status {status_name(status)}")
        self.status = status


def status_name(status: int) -> str:
    try:
        return str(pb.Status(status).name)
    except ValueError:
        return str(status)


class _CallDetails(
    collections.namedtuple(
        "_CallDetails", ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")
    ),
    grpc.ClientCallDetails,  # type: ignore[misc]
):
    pass


class _DeadlineInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):  # type: ignore[misc]
    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s

    def _details(self, details: Any) -> Any:
        if details.timeout is not None or details.method in _STREAMING_METHODS:
            return details
        return _CallDetails(
            details.method,
            self._timeout_s,
            details.metadata,
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )

    def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return continuation(self._details(client_call_details), request)

    def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return continuation(self._details(client_call_details), request)


class Stub:
    """One server's calls: the sessions' through the generated stub; those llog makes often made once (the
    generated methods make a gRPC callable per call, and wrap streams in generators, which cannot be cancelled
    from another thread): ``Write``, ``Read`` and ``List`` with the generated messages, ``Write``, ``Read`` and
    ``RangeScan`` with bytes in and out (``llog.store.oxia_wire``), and the two long-lived streams."""

    def __init__(self, channel: grpc.Channel) -> None:
        generated = pb.OxiaClientStub(channel)
        self.create_session = generated.create_session
        self.keep_alive = generated.keep_alive
        self.close_session = generated.close_session
        self.write = channel.unary_unary(WRITE_METHOD, pb.WriteRequest.SerializeToString, pb.WriteResponse.FromString)
        self.read = channel.unary_stream(READ_METHOD, pb.ReadRequest.SerializeToString, pb.ReadResponse.FromString)
        self.list = channel.unary_stream(SERVICE + "List", pb.ListRequest.SerializeToString, pb.ListResponse.FromString)
        self.write_bytes = channel.unary_unary(WRITE_METHOD)
        self.read_bytes = channel.unary_stream(READ_METHOD)
        self.range_scan_bytes = channel.unary_stream(RANGE_SCAN_METHOD)
        self.notifications = channel.unary_stream(
            _NOTIFICATIONS_METHOD, pb.NotificationsRequest.SerializeToString, pb.NotificationBatch.FromString
        )
        self.shard_assignments = channel.unary_stream(
            _SHARD_ASSIGNMENTS_METHOD, pb.ShardAssignmentsRequest.SerializeToString, pb.ShardAssignments.FromString
        )


class Connections:
    """One channel and ``Stub`` per server address, with the request deadline on every bounded call."""

    def __init__(self, timeout_s: float) -> None:
        self._interceptor = _DeadlineInterceptor(timeout_s)
        self._lock = threading.Lock()
        self._channels: dict[str, tuple[grpc.Channel, Stub]] = {}
        self._closed = False

    def get(self, address: str) -> Stub:
        with self._lock:
            if self._closed:  # a channel opened now would outlive the client (a session kept alive on it)
                raise OxiaUnavailable("the Oxia client is closed")
            entry = self._channels.get(address)
            if entry is None:
                channel = grpc.insecure_channel(address, options=_CHANNEL_OPTIONS)
                entry = (channel, Stub(grpc.intercept_channel(channel, self._interceptor)))
                self._channels[address] = entry
            return entry[1]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            channels, self._channels = list(self._channels.values()), {}
        for channel, _ in channels:
            channel.close()


@dataclass(frozen=True)
class _Shard:
    shard: int
    leader: str
    min_hash: int
    max_hash: int


def _key_hash(key: str) -> int:
    return xxhash.xxh64(key).intdigest() & 0xFFFFFFFF


class ShardDirectory:
    """The namespace's shards and their leaders, kept current by the server's assignment stream."""

    def __init__(self, service_address: str, connections: Connections, namespace: str, init_timeout_s: float) -> None:
        self._service_address = service_address
        self._connections = connections
        self._namespace = namespace
        self._lock = threading.Lock()
        self._shards: list[_Shard] = []
        self._ready = threading.Event()
        self._closed = threading.Event()
        self._call: Any = None
        self._thread = threading.Thread(target=self._follow, daemon=True, name="oxia-assignments")
        self._thread.start()
        if not self._ready.wait(init_timeout_s):
            self.close()
            raise OxiaUnavailable(f"no shard assignments from Oxia at {service_address} within {init_timeout_s:.1f}s")

    def _follow(self) -> None:
        stub = self._connections.get(self._service_address)
        backoff = Backoff(_ASSIGNMENTS_BACKOFF_INITIAL_S, _ASSIGNMENTS_BACKOFF_MAX_S)
        while not self._closed.is_set():
            try:
                with self._lock:
                    if self._closed.is_set():
                        return
                    self._call = call = stub.shard_assignments(pb.ShardAssignmentsRequest(namespace=self._namespace))
                for assignments in call:
                    self._update(assignments)
                    backoff = Backoff(_ASSIGNMENTS_BACKOFF_INITIAL_S, _ASSIGNMENTS_BACKOFF_MAX_S)
            except grpc.RpcError as exc:
                if not self._closed.is_set() and exc.code() != grpc.StatusCode.CANCELLED:
                    log.warning("Oxia shard assignments failed: %s", exc)
            except Exception:  # a bad message must not end the thread silently
                log.exception("Oxia shard assignments unreadable")
            if not self._closed.is_set():
                backoff.wait()

    def _update(self, assignments: pb.ShardAssignments) -> None:
        namespace = assignments.namespaces.get(self._namespace)
        if namespace is None:
            log.warning("Oxia sent no shard assignments for namespace %r", self._namespace)
            return
        shards = []
        for a in namespace.assignments:
            hash_range = a.int32_hash_range
            if hash_range is None:
                raise ValueError(f"shard {a.shard} has no hash range")
            shards.append(_Shard(a.shard, a.leader, hash_range.min_hash_inclusive, hash_range.max_hash_inclusive))
        with self._lock:
            self._shards = shards
        self._ready.set()

    def leader(self, key: str, partition_key: str | None) -> tuple[int, Stub]:
        """The shard holding ``key`` (placed by ``partition_key`` when given) and its leader's stub."""
        h = _key_hash(partition_key or key)
        with self._lock:
            for s in self._shards:
                if s.min_hash <= h <= s.max_hash:
                    leader = s
                    break
            else:
                raise NoShard(f"no Oxia shard known for {partition_key or key}")
        return leader.shard, self._connections.get(leader.leader)

    def stub(self, shard: int) -> Stub:
        with self._lock:
            leaders = [s.leader for s in self._shards if s.shard == shard]
        if not leaders:
            raise NoShard(f"no Oxia shard {shard}")
        return self._connections.get(leaders[0])

    def all_shards(self) -> list[tuple[int, Stub]]:
        with self._lock:
            shards = list(self._shards)
        return [(s.shard, self._connections.get(s.leader)) for s in shards]

    def close(self) -> None:
        """Stop following the assignments (cancels the stream; never waits for the server)."""
        with self._lock:
            self._closed.set()
            call = self._call
        if call is not None:
            call.cancel()


class _Session:
    """One shard's session: created on the server at once, kept alive by a thread until closed or expired."""

    def __init__(self, shard: int, directory: ShardDirectory, timeout_ms: int, identity: str,
                 on_close: Callable[[_Session], None]) -> None:  # fmt: skip
        self.shard = shard
        self.identity = identity
        self._directory = directory
        self._timeout_ms = timeout_ms
        self._on_close = on_close
        self._closed = threading.Event()
        answer = directory.stub(shard).create_session(
            pb.CreateSessionRequest(shard=shard, session_timeout_ms=timeout_ms, client_identity=identity)
        )
        self.session_id: int = answer.session_id
        self._last_alive = time.monotonic()
        # At least three keep-alives per timeout: the server's deadline runs from the session's creation, which
        # the first keep-alive follows by a whole interval plus the create's answer.
        interval_ms = min(max(timeout_ms // 10, _KEEP_ALIVE_FLOOR_MS), timeout_ms // 3)
        self._thread = threading.Thread(
            target=self._keep_alive, args=(interval_ms / 1000,), daemon=True, name=f"oxia-session-{shard}"
        )
        self._thread.start()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def _keep_alive(self, interval_s: float) -> None:
        while not self._closed.wait(interval_s):
            if (time.monotonic() - self._last_alive) * 1000 > self._timeout_ms:
                log.warning("Oxia session %d of shard %d expired (no keep-alive answered)", self.session_id, self.shard)
                self.close()
                return
            try:
                self._directory.stub(self.shard).keep_alive(
                    pb.SessionHeartbeat(shard=self.shard, session_id=self.session_id)
                )
                self._last_alive = time.monotonic()
            except Exception as exc:
                log.warning("Oxia session %d keep-alive failed: %s", self.session_id, exc)

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._on_close(self)
        try:
            self._directory.stub(self.shard).close_session(
                pb.CloseSessionRequest(shard=self.shard, session_id=self.session_id)
            )
        except Exception as exc:
            log.warning("Oxia session %d did not close cleanly: %s", self.session_id, exc)


class Sessions:
    """The client's sessions, one per shard, for ephemeral records."""

    def __init__(self, directory: ShardDirectory, timeout_ms: int, identity: str | None) -> None:
        self._directory = directory
        self._timeout_ms = timeout_ms
        self._identity = identity or uuid.uuid4().hex
        self._lock = threading.Lock()
        self._by_shard: dict[int, _Session] = {}
        self._closed = False

    def get(self, shard: int) -> _Session:
        with self._lock:
            if self._closed:  # a session opened now would be kept alive until the process exits
                raise OxiaUnavailable("the Oxia client is closed")
            session = self._by_shard.get(shard)
            if session is None or session.closed:
                session = _Session(shard, self._directory, self._timeout_ms, self._identity, self._forget)
                self._by_shard[shard] = session
            return session

    def _forget(self, session: _Session) -> None:
        with self._lock:
            if self._by_shard.get(session.shard) is session:  # not a replacement opened since
                del self._by_shard[session.shard]

    def discard(self, session: _Session) -> None:
        """Drop ``session`` (the server no longer knows it) so the next ephemeral put opens a new one.

        Only that session: a late answer naming it must not close a replacement another put opened since.
        """
        with self._lock:
            if self._by_shard.get(session.shard) is session:
                del self._by_shard[session.shard]
        threading.Thread(target=session.close, daemon=True, name="oxia-session-close").start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sessions, self._by_shard = list(self._by_shard.values()), {}
        for session in sessions:
            session.close()


def oxia_key_order(key: str) -> bytes:
    """A sort key giving Oxia's order of keys (v0.17.1, ``--key-sorting hierarchical``, docs/PROTOCOL.md "Key
    order"): by the number of ``/`` (a trailing ``//`` counts once; internal ``__oxia/`` keys last), then bytewise
    with ``/`` above every other byte."""
    depth = key.count("/")
    if key.endswith("//"):
        depth -= 1
    if depth and key.startswith(_INTERNAL_KEY_PREFIX):
        depth |= 1 << 15
    return depth.to_bytes(2, "big") + key.encode().replace(b"/", b"\xff")
