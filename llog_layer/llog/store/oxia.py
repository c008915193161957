"""The Oxia adapter: ``OxiaStore``, the typed operations the protocol issues on Oxia.

Oxia is reached through ``llog.store.oxia_client`` (channels, shard routing,
sessions) over the stub generated from Oxia's own ``client.proto``
(``llog.store.oxia_proto``, scripts/generate-oxia-proto.sh), and through
``llog.store.oxia_wire`` for the hot ``Write``/``Read``/``RangeScan`` calls.
What it adds (docs/ARCHITECTURE.md, docs/PROTOCOL.md "Key order"):

* deadlines on every bounded call, and a bounded wait for the first shard
  assignments (``llog.store.oxia_client``);
* bounded retries with backoff of transient gRPC failures, mapped to
  ``OxiaUnavailable`` when they persist. Every operation the protocol issues
  is safe to repeat: conditional writes that already applied come back as
  ``VersionConflict`` and the callers re-read to find their own write;
* a ``close()`` that returns within a bound regardless of the server;
* op counters and latency totals;
* ``changes()``: one notification subscription per client, waking
  long-polling consumers when the keys they watch change (``llog.store.changes``).

The client is created lazily on first use, so constructing a store (and
importing a Lambda handler) never touches the network.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import grpc

from llog.backoff import Backoff
from llog.config import OxiaConfig
from llog.errors import InvalidArgument, LlogError, OxiaUnavailable, SessionExpired, VersionConflict
from llog.store.changes import ChangeFeed
from llog.store.metrics import OperationCounters
from llog.store.oxia_client import (
    Connections,
    NoShard,
    Sessions,
    ShardDirectory,
    StatusError,
    Stub,
    oxia_key_order,
    status_name,
)
from llog.store.oxia_proto.io.oxia.proto import v1 as pb
from llog.store.oxia_wire import (
    GetAnswer,
    PutAnswer,
    SequentialPut,
    decode_range_scan_response,
    decode_read_response,
    decode_write_response,
    encode_range_scan_request,
    encode_read_request,
    encode_write_request,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

CREATE_ONLY = -1  # as ``expected_version_id``: the record must not exist yet (Oxia's convention)

_TRANSIENT_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.INTERNAL,
    }
)
# Between retries of a transient failure: 50 ms, doubling up to 1 s (jittered).
_RETRY_BACKOFF_INITIAL_S = 0.05
_RETRY_BACKOFF_MAX_S = 1.0


class Comparison(enum.IntEnum):
    """How a get matches its key (Oxia's ``KeyComparisonType``)."""

    EQUAL = pb.KeyComparisonType.EQUAL
    CEILING = pb.KeyComparisonType.CEILING
    LOWER = pb.KeyComparisonType.LOWER


@dataclass(frozen=True)
class Versioned:
    """A record read from Oxia."""

    key: str
    value: bytes
    version_id: int


def _check_deltas(deltas: tuple[int, ...]) -> None:
    if not deltas or deltas[0] < 1 or any(d < 0 for d in deltas):
        raise InvalidArgument(f"sequence deltas must be non-negative with a positive first one: {deltas}")


class _Client:
    """One connection to an Oxia namespace: its channels, its shard directory and its sessions."""

    def __init__(self, config: OxiaConfig) -> None:
        self.connections = Connections(config.request_timeout_ms / 1000)
        try:
            self.shards = ShardDirectory(
                config.service_address, self.connections, config.namespace, config.connect_timeout_ms / 1000
            )
        except BaseException:
            self.connections.close()
            raise
        self.sessions = Sessions(self.shards, config.session_timeout_ms, config.client_identifier)

    def close(self) -> None:
        self.shards.close()
        self.sessions.close()
        self.connections.close()


class _VersionMismatch(Exception):
    """``UNEXPECTED_VERSION_ID``: a conditional write's condition failed."""


class _SessionGone(Exception):
    """``SESSION_DOES_NOT_EXIST``: an ephemeral put's session expired on the server."""


def _check(status: int, what: str) -> None:
    if status == pb.Status.OK:
        return
    if status == pb.Status.UNEXPECTED_VERSION_ID:
        raise _VersionMismatch(what)
    if status == pb.Status.SESSION_DOES_NOT_EXIST:
        raise _SessionGone(what)
    raise StatusError(status, what)


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, grpc.RpcError):
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        return code in _TRANSIENT_CODES
    return isinstance(exc, NoShard)  # the shard assignments are (re)connecting


class OxiaStore:
    """Typed, deadline-bound, retrying access to one Oxia namespace."""

    def __init__(self, config: OxiaConfig, *, counters: OperationCounters | None = None) -> None:
        self.config = config
        self.counters = counters or OperationCounters()
        self._client_lock = threading.Lock()
        self._client: _Client | None = None
        self._changes: ChangeFeed | None = None
        self._closed = False
        self._last_connect_failure: tuple[float, str] = (-float("inf"), "")

    @classmethod
    def from_env(cls) -> OxiaStore:
        return cls(OxiaConfig.from_env())

    # --- lifecycle ------------------------------------------------------------

    def _get_client(self) -> _Client:
        client = self._client
        if client is not None:
            return client
        with self._client_lock:
            if self._closed:
                raise OxiaUnavailable("the Oxia store is closed")
            if self._client is None:
                # Fail fast while a connect attempt has just failed, so a request
                # touching many partitions does not wait out one timeout each.
                failed_at, reason = self._last_connect_failure
                if time.monotonic() - failed_at < self.config.connect_timeout_ms / 1000:
                    raise OxiaUnavailable(f"{reason} (failing fast: the last attempt just failed)")
                try:
                    self._client = _Client(self.config)
                except OxiaUnavailable as exc:
                    self._last_connect_failure = (time.monotonic(), str(exc))
                    raise
                except Exception as exc:
                    reason = f"cannot connect to Oxia at {self.config.service_address}: {exc}"
                    self._last_connect_failure = (time.monotonic(), reason)
                    raise OxiaUnavailable(reason) from exc
            return self._client

    def changes(self) -> ChangeFeed:
        """This store's change feed, shared by every waiter of the process; it connects on its first watch."""
        with self._client_lock:
            if self._changes is None:
                self._changes = ChangeFeed(self._shard_stubs)
                if self._closed:
                    self._changes.close()
            return self._changes

    def _shard_stubs(self) -> list[tuple[int, Stub]]:
        """Every shard's id and stub, from the client the store's calls opened.

        Never connects: a connect attempt holds the lock ``close()`` takes, for
        up to ``connect_timeout_ms``; the feed just tries again after its backoff.
        """
        client = self._client
        if client is None:
            raise OxiaUnavailable("no Oxia client yet (the store connects on its first call)")
        return client.shards.all_shards()

    def close(self) -> None:
        """Close the client; returns within ``close_timeout_ms`` even if the client hangs."""
        with self._client_lock:
            self._closed = True
            client, self._client = self._client, None
            changes = self._changes
        if changes is not None:
            changes.close()
        if client is None:
            return
        closer = threading.Thread(target=client.close, daemon=True, name="oxia-close")
        closer.start()
        closer.join(self.config.close_timeout_ms / 1000)
        if closer.is_alive():
            log.warning("Oxia client did not close within %d ms; abandoning it", self.config.close_timeout_ms)

    def __enter__(self) -> OxiaStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- retry core -----------------------------------------------------------

    def _call(self, op: str, fn: Callable[[_Client], T], *, nbytes: int = 0, retry: bool = True) -> T:
        attempts = self.config.max_retries + 1 if retry else 1
        backoff = Backoff(_RETRY_BACKOFF_INITIAL_S, _RETRY_BACKOFF_MAX_S)
        for attempt in range(attempts):
            start = time.perf_counter()
            try:
                result = fn(self._get_client())
            except _VersionMismatch:
                self.counters.record(op, time.perf_counter() - start, nbytes=nbytes, conflict=True)
                raise VersionConflict(f"{op}: the record's version changed", ambiguous=attempt > 0) from None
            except _SessionGone:
                self.counters.record(op, time.perf_counter() - start, error=True)
                raise SessionExpired(f"{op}: the Oxia session expired") from None
            except OxiaUnavailable:
                # Connecting already waited connect_timeout_ms: fail now.
                self.counters.record(op, time.perf_counter() - start, error=True)
                raise
            except Exception as exc:
                self.counters.record(op, time.perf_counter() - start, error=True)
                if not _is_transient(exc):
                    # Anything else (a non-transient gRPC status, an unexpected Oxia
                    # status) still reaches callers as a typed error.
                    raise OxiaUnavailable(f"{op} failed: {_describe(exc)}") from exc
                if attempt + 1 >= attempts:
                    raise OxiaUnavailable(f"{op} failed after {attempts} attempts: {_describe(exc)}") from exc
            else:
                self.counters.record(op, time.perf_counter() - start, nbytes=nbytes)
                return result
            self.counters.record_retry(op)
            backoff.wait()
        raise AssertionError("unreachable")

    # --- operations -----------------------------------------------------------

    def _get(self, op: str, key: str, partition_key: str, comparison: Comparison) -> Versioned | None:
        request = pb.GetRequest(key=key, comparison_type=pb.KeyComparisonType(comparison), include_value=True)

        def run(c: _Client) -> Versioned | None:
            shard, stub = c.shards.leader(key, partition_key)
            [answer] = next(stub.read(pb.ReadRequest(shard=shard, gets=[request]))).gets
            if answer.status == pb.Status.KEY_NOT_FOUND:
                return None
            _check(answer.status, f"{op} of {key}")
            version_id = answer.version.version_id if answer.version is not None else 0
            # An empty value is left out on the wire; an EQUAL get's answer leaves out the key.
            return Versioned(answer.key if answer.key is not None else key, answer.value or b"", version_id)

        return self._call(op, run)

    def get(self, key: str, *, partition_key: str) -> Versioned | None:
        return self._get("get", key, partition_key, Comparison.EQUAL)

    def _by_shard(self, op: str, keys: Sequence[tuple[str, str]]) -> dict[int, list[int]]:
        """The indexes of ``(key, partition_key)`` pairs, by the shard that holds each (``OxiaUnavailable``
        when the shards are not known yet)."""
        try:
            directory = self._get_client().shards
            shards = [directory.leader(key, partition_key)[0] for key, partition_key in keys]
        except NoShard as exc:
            raise OxiaUnavailable(f"{op}: {_describe(exc)}") from exc
        by_shard: dict[int, list[int]] = {}
        for i, shard in enumerate(shards):
            by_shard.setdefault(shard, []).append(i)
        return by_shard

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[Versioned | None]:
        """Exact gets of ``(key, partition_key)`` pairs: one Oxia read request per shard, not one per key.

        Each answer is what ``get`` would return. Retried as ``get`` is (a read
        changes nothing; each attempt asks for the shard's leader again); a shard
        that cannot be read fails the whole call with ``OxiaUnavailable``. The
        counters record one ``get`` call per request.
        """
        if not keys:
            return []
        found: list[Versioned | None] = [None] * len(keys)
        for shard, indexes in self._by_shard("get", keys).items():
            request = encode_read_request(shard, [keys[i][0] for i in indexes])
            first = keys[indexes[0]]

            def run(c: _Client, shard: int = shard, request: bytes = request, first: tuple[str, str] = first,
                    wanted: int = len(indexes)) -> list[GetAnswer]:  # fmt: skip
                leader, stub = c.shards.leader(*first)
                if leader != shard:
                    raise OxiaUnavailable(f"get: the shard of {first[0]} changed")
                answers: list[GetAnswer] = []
                call = stub.read_bytes(request)
                try:
                    for response in call:  # the answers may come in several responses
                        answers += decode_read_response(response)
                        if len(answers) >= wanted:
                            break
                except ValueError as exc:
                    raise OxiaUnavailable(f"get: unreadable answer: {exc}") from exc
                finally:
                    call.cancel()  # the server ends the stream after the last answer; this frees it if not
                if len(answers) != wanted:
                    raise OxiaUnavailable(f"get: {len(answers)} answers to {wanted} gets")
                return answers

            for i, answer in zip(indexes, self._call("get", run), strict=True):
                if answer.status == pb.Status.OK:
                    found[i] = Versioned(keys[i][0], answer.value, answer.version_id)
                elif answer.status != pb.Status.KEY_NOT_FOUND:
                    raise OxiaUnavailable(f"get of {keys[i][0]}: status {status_name(answer.status)}")
        return found

    def get_ceiling(self, key: str, *, partition_key: str) -> Versioned | None:
        """Lowest key >= ``key`` on the partition's shard (may belong to another partition)."""
        return self._get("get_ceiling", key, partition_key, Comparison.CEILING)

    def get_lower(self, key: str, *, partition_key: str) -> Versioned | None:
        """Highest key < ``key`` on the partition's shard (may belong to another partition, or be internal)."""
        return self._get("get_lower", key, partition_key, Comparison.LOWER)

    def put_sequential(
        self, prefix_key: str, value: bytes, *, partition_key: str, deltas: tuple[int, ...]
    ) -> Versioned:
        """One Oxia sequential-key put: the server names the key (``prefix_key`` plus ``-%020d`` per delta).

        Returns the key the server chose. Never retried: a put whose answer was
        lost may have landed, and repeating it would write a second entry, so
        a transport failure reaches the caller as ``OxiaUnavailable`` with the
        outcome unknown. The first delta must be positive, and every put into
        one sequence must pass as many deltas as the keys already there have
        parts: otherwise the server fails the write *after* logging it (v0.17.1),
        which it then cannot apply on a replay either. Both are checked here, the part count by the caller.

        Sent as ``put_sequential_many`` sends a shard's puts (llog's own wire
        encoding): the generated pure-Python messages cost a third more CPU.
        """
        [written] = self.put_sequential_many([SequentialPut(prefix_key, value, partition_key, deltas)])
        if isinstance(written, LlogError):
            raise written
        return written

    def put_sequential_many(
        self, puts: Sequence[SequentialPut], *, before_each: Callable[[], None] | None = None
    ) -> list[Versioned | LlogError]:
        """Several sequential puts, one Oxia write request per shard instead of one per put.

        The server applies a shard's puts together (one log entry, one fsync).
        Each put gets its key or its error; a shard whose answer was lost gives
        each of its puts ``OxiaUnavailable``, outcome unknown, as
        ``put_sequential`` does. Never retried. ``before_each`` runs before
        each request; the ``LlogError`` it raises becomes the answer of that
        request's puts and of those not sent yet (a commit deadline). The
        counters record one ``put_sequential`` call per write request.
        """
        for put in puts:
            _check_deltas(put.deltas)
        results: list[Versioned | LlogError] = [OxiaUnavailable("not sent")] * len(puts)
        try:
            by_shard = self._by_shard("put_sequential", [(p.prefix_key, p.partition_key) for p in puts])
            directory = self._get_client().shards
        except OxiaUnavailable as exc:  # nothing was sent
            return [exc] * len(puts)
        done: set[int] = set()
        for shard, indexes in by_shard.items():
            _, stub = directory.leader(puts[indexes[0]].prefix_key, puts[indexes[0]].partition_key)
            request = encode_write_request(shard, [puts[i] for i in indexes])

            def run(_: _Client, stub: Stub = stub, request: bytes = request) -> list[PutAnswer]:
                answer = stub.write_bytes(request)
                try:
                    return decode_write_response(answer)
                except ValueError as exc:  # sent, and the answer is unreadable: the outcome is unknown
                    raise OxiaUnavailable(f"put_sequential: unreadable answer: {exc}") from exc

            nbytes = sum(len(puts[i].value) for i in indexes)
            try:
                if before_each is not None:
                    before_each()
            except LlogError as exc:
                return [results[i] if i in done else exc for i in range(len(puts))]
            try:
                answers = self._call("put_sequential", run, nbytes=nbytes, retry=False)
                if len(answers) != len(indexes):
                    raise OxiaUnavailable(f"put_sequential: {len(answers)} answers to {len(indexes)} puts")
            except LlogError as exc:
                for i in indexes:
                    results[i] = exc
                done.update(indexes)
                continue
            done.update(indexes)
            for i, answer in zip(indexes, answers, strict=True):
                if answer.status == pb.Status.OK and answer.key is not None:
                    results[i] = Versioned(answer.key, puts[i].value, answer.version_id)
                else:
                    results[i] = OxiaUnavailable(
                        f"put_sequential of {puts[i].prefix_key}: status {status_name(answer.status)}"
                    )
        return results

    def put(
        self,
        key: str,
        value: bytes,
        *,
        partition_key: str,
        expected_version_id: int | None = None,
        ephemeral: bool = False,
    ) -> int:
        """Write ``value``; with ``expected_version_id`` (or ``CREATE_ONLY``) it is a compare-and-set.

        Returns the new version id; raises ``VersionConflict`` when the condition fails.
        """

        def run(c: _Client) -> int:
            shard, stub = c.shards.leader(key, partition_key)
            request = pb.PutRequest(
                key=key, value=value, partition_key=partition_key, expected_version_id=expected_version_id
            )
            session = c.sessions.get(shard) if ephemeral else None
            if session is not None:
                request.session_id, request.client_identity = session.session_id, session.identity
            [answer] = stub.write(pb.WriteRequest(shard=shard, puts=[request])).puts
            try:
                _check(answer.status, f"put of {key}")
            except _SessionGone:
                if session is not None:
                    c.sessions.discard(session)
                raise
            return answer.version.version_id if answer.version is not None else 0

        return self._call("put", run, nbytes=len(value))

    def delete(self, key: str, *, partition_key: str, expected_version_id: int | None = None) -> bool:
        """Delete ``key``; False if it did not exist. ``VersionConflict`` if the version differs."""
        request = pb.DeleteRequest(key=key, expected_version_id=expected_version_id)

        def run(c: _Client) -> bool:
            shard, stub = c.shards.leader(key, partition_key)
            [answer] = stub.write(pb.WriteRequest(shard=shard, deletes=[request])).deletes
            if answer.status == pb.Status.KEY_NOT_FOUND:
                return False
            _check(answer.status, f"delete of {key}")
            return True

        return self._call("delete", run)

    def delete_range(self, min_key_inclusive: str, max_key_exclusive: str, *, partition_key: str) -> None:
        request = pb.DeleteRangeRequest(start_inclusive=min_key_inclusive, end_exclusive=max_key_exclusive)

        def run(c: _Client) -> None:
            shard, stub = c.shards.leader(partition_key, partition_key)
            [answer] = stub.write(pb.WriteRequest(shard=shard, delete_ranges=[request])).delete_ranges
            _check(answer.status, f"delete_range of [{min_key_inclusive}, {max_key_exclusive})")

        self._call("delete_range", run)

    def range_scan(
        self, min_key_inclusive: str, max_key_exclusive: str, *, partition_key: str, limit: int | None = None
    ) -> list[Versioned]:
        """Up to ``limit`` records in ``[min, max)`` on the partition's shard, in Oxia key order.

        Materialised as a list so the whole scan sits inside one deadline and
        one retry scope (a half-consumed stream cannot be retried).
        """

        def run(c: _Client) -> list[Versioned]:
            shard, stub = c.shards.leader(partition_key, partition_key)
            call = stub.range_scan_bytes(encode_range_scan_request(shard, min_key_inclusive, max_key_exclusive))
            found: list[Versioned] = []
            try:
                for response in call:  # the records may come in several responses
                    wanted = None if limit is None else limit - len(found)
                    found += [Versioned(r.key, r.value, r.version_id)
                              for r in decode_range_scan_response(response, wanted)]  # fmt: skip
                    if limit is not None and len(found) >= limit:
                        break
            except ValueError as exc:
                raise OxiaUnavailable(f"range_scan: unreadable answer: {exc}") from exc
            finally:
                call.cancel()  # the server ends the stream after the last record; this stops it early
            return found

        return self._call("range_scan", run)

    def list_keys(
        self, min_key_inclusive: str, max_key_exclusive: str, *, partition_key: str | None = None
    ) -> list[str]:
        """Keys in ``[min, max)``, in Oxia's key order; without ``partition_key`` across every shard."""
        request = pb.ListRequest(start_inclusive=min_key_inclusive, end_exclusive=max_key_exclusive)

        def run(c: _Client) -> list[str]:
            shards = c.shards.all_shards() if partition_key is None else [c.shards.leader(partition_key, None)]
            keys: list[str] = []
            for shard, stub in shards:
                request.shard = shard
                for answer in stub.list(request):
                    keys += answer.keys
            if len(shards) > 1:
                keys.sort(key=oxia_key_order)
            return keys

        return self._call("list", run)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, grpc.RpcError) and callable(getattr(exc, "code", None)):
        details = exc.details() if callable(getattr(exc, "details", None)) else ""
        return f"{exc.code().name}: {details}"
    return f"{type(exc).__name__}: {exc}"
