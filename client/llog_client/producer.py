"""The producer: batches records per partition and sends them in few, large ``POST /produce`` requests.

``send`` only queues a record and returns a future; a background sender thread closes a
partition's batch when it holds at least ``batch_bytes`` of records (as JSON; so a full batch is
one request of at least that size, which is what makes the server's writes large) or
``max_request_records`` records, when its oldest record has waited ``linger_ms``, or on
``flush``/``close``, and packs ready batches of
several partitions into one request (at most ``max_request_bytes``, ``max_request_partitions``
entries, ``max_request_records`` records: the server's limits), with up to
``max_in_flight_requests`` requests at once and one batch in flight per partition, so the records
of a partition are written in the order they were sent.

Routing is Kafka's: an explicit ``partition`` wins, a key goes to ``partition_for_key(key,
partitions)`` with the topic's partition count from ``GET /topics/{topic}`` (cached for
``metadata_max_age_ms``, dropped on ``InvalidPartition``; a topic the server does not know counts
one partition, which the first write creates), and records without a key stick to one partition
per batch, moving round-robin when that batch is full.

Idempotence (the default): ``POST /producers`` gives the producer an id and epoch; each batch
carries the ``sequence`` of its first record in its partition, fixed when the batch is put in its
first request (from then on it takes no records: a ``send`` starts the next batch), and every
retry resends the same batch under the same id, epoch and sequence, which the server
answers with the original offsets (``"duplicate": true``) if it already wrote it. So a retry never
duplicates. Once an attempt got no answer that says whether it was written (no answer, a 5xx, a
gateway's bare status, a retriable error), the batch is *unresolved*: only an answer for it (ok, or
duplicate) resolves it, so its retries go in requests of their own (a refusal of the request is then
about it alone), and no later refusal is taken as "not written". An unresolved batch that fails for
good (a non-retriable answer, or ``delivery_timeout_ms``) fails with ``OutcomeUnknownError`` (its
``last_error`` says what the last attempt met) and the producer takes a new id, as Kafka's producer
bumps its epoch: its sequence is never given to another batch. A batch refused by llog at every
attempt (a 4xx with an ``error_type``, or a retriable refusal that writes nothing of the attempt:
``REFUSED_UNWRITTEN``) was not written, and the next batch takes its sequence. The
producer never turns idempotence off by itself: a server without ``POST /producers`` (404) fails the
batches waiting for an id (``IdempotenceUnavailable``) and later batches ask again.

A future fails with the typed error (``llog_client.errors``) when its batch failed for good: a
non-retriable error, or retriable errors (API Gateway's 429 among them) until
``delivery_timeout_ms``, retried after a jittered exponential backoff. ``close(timeout)`` that times
out aborts the requests under way and fails every pending future, leaving nothing running; once
``close`` began, ``send`` raises (one waiting for buffer space too). A future never succeeds
for a record the server did not acknowledge.
"""

from __future__ import annotations

import json
import logging
import random
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from llog_client.auth import Auth
from llog_client.errors import InvalidRequestError, LlogClientError, NotFoundError, OutcomeUnknownError, error_from
from llog_client.partitioner import partition_for_key
from llog_client.transport import Transport, backoff, path
from llog_client.wire import as_bytes, encode_bytes

logger = logging.getLogger("llog_client.producer")

# The server's defaults (docs/HTTP_API.md, "Limits"): LLOG_MAX_REQUEST_BYTES is 6 MiB, the JSON
# envelope of a request is small, so 5 MiB of records leave room.
MAX_REQUEST_BYTES = 5 * 1024 * 1024
MAX_REQUEST_PARTITIONS = 100
MAX_REQUEST_RECORDS = 10_000
TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
RESERVED_TOPICS = frozenset({".", "..", "wal-shared", "__catalog"})
MAX_PARTITION = 2**31 - 1
UNKNOWN_IDENTITY_ERRORS = ("ProducerFenced", "UnknownProducer", "OutOfOrderSequence")
THROTTLED = 429  # API Gateway's throttling: answered before the request reaches llog
# Retriable refusals llog answers before anything of the attempt is written (docs/HTTP_API.md): its batcher
# was full, or an earlier attempt of this producer holds the partition's claim (docs/IDEMPOTENCE.md).
REFUSED_UNWRITTEN = ("BackPressureRejected", "SequenceInFlight")

TopicPartition = tuple[str, int]
Headers = Mapping[str, bytes | bytearray | memoryview | str]
Data = bytes | bytearray | memoryview | str


def _check_destination(topic: str, partition: int | None) -> None:
    """The server's rules for topic names and partitions, checked before a record is queued.

    A request the server refuses (400) fails every batch in it, not only the bad one.
    """
    if not isinstance(topic, str) or not TOPIC_NAME.fullmatch(topic) or topic in RESERVED_TOPICS:
        raise ValueError(f"invalid topic {topic!r}: expected 1-249 characters from [A-Za-z0-9._-], not reserved")
    if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int)
                                  or not 0 <= partition <= MAX_PARTITION):  # fmt: skip
        raise ValueError(f"invalid partition {partition!r}: expected an integer in [0, {MAX_PARTITION}]")


@dataclass(frozen=True)
class RecordMetadata:
    """Where a record was written: its topic, partition and offset (offsets start at 1)."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class _Identity:
    producer_id: str
    producer_epoch: int


@dataclass
class _Batch:
    topic: str
    partition: int
    created: float
    deadline: float
    records: list[str] = field(default_factory=list)  # each record's JSON
    futures: list[Future[RecordMetadata]] = field(default_factory=list)
    size: int = 0
    identity: _Identity | None = None
    sequence: int | None = None  # fixed when first put in a request, kept by every retry
    attempts: int = 0  # the requests it was put in (counted by _collect under the lock: it takes no record after)
    unresolved: bool = False  # an attempt got no answer that says whether it was written
    retry_at: float = 0.0
    last_error: LlogClientError | None = None
    exclusive: bool = False  # from send_batch: takes no other records
    expected_offset: int | None = None  # a conditional batch: written at this offset or not at all

    def entry(self) -> str:
        head: dict[str, Any] = {"topic": self.topic, "partition": self.partition}
        if self.sequence is not None:
            head["sequence"] = self.sequence
        if self.expected_offset is not None:
            head["expected_offset"] = self.expected_offset
        return json.dumps(head)[:-1] + ',"records":[' + ",".join(self.records) + "]}"


@dataclass
class _Partition:
    batches: deque[_Batch] = field(default_factory=deque)
    in_flight: bool = False


class Producer:
    """Sends records to llog; see the module docstring for batching, routing and guarantees."""

    def __init__(
        self,
        url: str | None = None,
        auth: Auth | None = None,
        *,
        batch_bytes: int = 256 * 1024,
        linger_ms: float = 5.0,
        idempotent: bool = True,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        max_request_partitions: int = MAX_REQUEST_PARTITIONS,
        max_request_records: int = MAX_REQUEST_RECORDS,
        max_in_flight_requests: int = 4,
        buffer_bytes: int = 64 * 1024 * 1024,
        max_block_ms: float = 60_000,
        delivery_timeout_ms: float = 120_000,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 1_000,
        request_timeout_ms: float = 30_000,
        metadata_max_age_ms: float = 300_000,
    ) -> None:
        if batch_bytes < 1 or max_request_bytes < batch_bytes:
            raise ValueError(f"need 1 <= batch_bytes <= max_request_bytes, got {batch_bytes}, {max_request_bytes}")
        self.transport = Transport(url, auth, read_timeout_s=request_timeout_ms / 1000,
                                   max_connections=max_in_flight_requests)  # fmt: skip
        self.batch_bytes = batch_bytes
        self.linger_s = linger_ms / 1000
        self.idempotent = idempotent
        self.max_request_bytes = max_request_bytes
        self.max_request_partitions = max_request_partitions
        self.max_request_records = max_request_records
        self.buffer_bytes = buffer_bytes
        self.max_block_s = max_block_ms / 1000
        self.delivery_timeout_s = delivery_timeout_ms / 1000
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.retry_backoff_max_s = retry_backoff_max_ms / 1000
        self.metadata_max_age_s = metadata_max_age_ms / 1000

        self._lock = threading.Condition()
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._sticky: dict[str, int] = {}
        self._metadata: dict[str, tuple[int, float]] = {}
        self._metadata_lock = threading.Lock()
        self._identity: _Identity | None = None
        self._identity_error: LlogClientError | None = None  # why the last POST /producers failed
        self._identity_failures = 0
        self._sequences: dict[TopicPartition, int] = {}
        self._buffered = 0
        self._unfinished = 0  # records queued or in flight
        self._flushing = 0
        self._closing = False
        self._closed = False
        self._free_workers = max_in_flight_requests
        self._workers = ThreadPoolExecutor(max_in_flight_requests, thread_name_prefix="llog-producer-request")
        self._sender = threading.Thread(target=self._run, name="llog-producer-sender", daemon=True)
        self._sender.start()

    # -- the caller's side --

    def send(
        self,
        topic: str,
        value: Data,
        key: Data | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Future[RecordMetadata]:
        """Queue one record; the future gives its :class:`RecordMetadata` once the server acknowledged it."""
        future: Future[RecordMetadata] = Future()
        future.set_running_or_notify_cancel()  # a queued record cannot be taken back
        _check_destination(topic, partition)
        key_bytes = None if key is None else as_bytes(key)
        document: dict[str, Any] = {"value": encode_bytes(as_bytes(value))}
        if key_bytes is not None:
            document["key"] = encode_bytes(key_bytes)
        if headers:
            document["headers"] = {str(name): encode_bytes(as_bytes(data)) for name, data in headers.items()}
        if timestamp_ms is not None:
            document["timestamp_ms"] = int(timestamp_ms)
        record = json.dumps(document, separators=(",", ":"))
        if len(record) > self.max_request_bytes:
            future.set_exception(self._too_large(len(record)))
            return future
        count = None
        if partition is None:
            try:
                count = self.partition_count(topic)
            except LlogClientError as exc:
                future.set_exception(exc)
                return future
            if key_bytes is not None:
                partition = partition_for_key(key_bytes, count)
        with self._lock:
            if self._closing:
                raise RuntimeError("the producer is closed")
            if not self._lock.wait_for(lambda: self._buffered + len(record) <= self.buffer_bytes or not self._buffered,
                                       timeout=self.max_block_s):  # fmt: skip
                raise TimeoutError(f"the producer's buffer ({self.buffer_bytes} bytes) stayed full for max_block_ms")
            if self._closing:  # closed while this waited: no sender may be left to send the record
                raise RuntimeError("the producer is closed")
            if partition is None:
                assert count is not None
                partition = self._sticky_partition(topic, count)
            self._append(topic, partition, record, future)
            self._lock.notify_all()
        return future

    def send_batch(
        self, topic: str, partition: int, values: Sequence[Data], *, expected_offset: int | None = None
    ) -> list[Future[RecordMetadata]]:
        """Queue ``values`` as one batch of their own: written together, in one request.

        With ``expected_offset`` it is a conditional append: written only if the partition's next
        offset is ``expected_offset``; otherwise every future fails with
        :class:`~llog_client.errors.OffsetMismatchError` (its ``next_offset`` is the partition's).
        Retries of a conditional batch are safe with idempotence (the server recognises its sequence).
        """
        _check_destination(topic, partition)
        if not values:
            raise ValueError("a batch needs at least one value")
        records = [json.dumps({"value": encode_bytes(as_bytes(value))}, separators=(",", ":")) for value in values]
        futures: list[Future[RecordMetadata]] = [Future() for _ in records]
        for future in futures:
            future.set_running_or_notify_cancel()
        size = sum(len(record) + 1 for record in records)
        if size > self.max_request_bytes or len(records) > self.max_request_records:
            for future in futures:
                future.set_exception(self._too_large(size))
            return futures
        with self._lock:
            if self._closing:
                raise RuntimeError("the producer is closed")
            now = time.monotonic()
            batch = _Batch(topic, partition, created=now, deadline=now + self.delivery_timeout_s,
                           records=records, futures=list(futures), size=size, exclusive=True,
                           expected_offset=expected_offset)  # fmt: skip
            self._partitions.setdefault((topic, partition), _Partition()).batches.append(batch)
            self._buffered += size - len(records)  # as _append counts: the records without separators
            self._unfinished += len(records)
            self._lock.notify_all()
        return futures

    def _too_large(self, size: int) -> InvalidRequestError:
        return InvalidRequestError(
            f"{size} bytes of records (as JSON) are over max_request_bytes ({self.max_request_bytes})",
            error_type="RecordTooLarge",
        )

    def partition_count(self, topic: str) -> int:
        """The topic's partition count (``GET /topics/{topic}``), cached; 1 for a topic the server does not know."""
        with self._metadata_lock:
            cached = self._metadata.get(topic)
            if cached is not None and time.monotonic() - cached[1] < self.metadata_max_age_s:
                return cached[0]
            try:
                _, description = self.transport.request("GET", path("topics", topic))
                count = int(description["partitions"])
            except NotFoundError:
                count = 1  # not created yet: a write to partition 0 creates it, as Kafka's auto-creation would
            self._metadata[topic] = (max(count, 1), time.monotonic())
            return max(count, 1)

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until every queued record is acknowledged or failed."""
        with self._lock:
            self._flushing += 1
            self._lock.notify_all()
            try:
                if not self._lock.wait_for(lambda: self._unfinished == 0, timeout=timeout):
                    raise TimeoutError(f"flush: {self._unfinished} records not acknowledged within {timeout} s")
            finally:
                self._flushing -= 1

    def close(self, timeout: float | None = None) -> None:
        """Flush, then stop the sender; further ``send`` calls raise.

        If records are still unacknowledged after ``timeout`` seconds, the requests under way are
        aborted and every pending future fails: with ``OutcomeUnknownError`` for records that were
        sent, with a ``ProducerClosed`` error for records never sent. Nothing is left running, and
        then ``TimeoutError`` is raised.
        """
        with self._lock:
            if self._closed:
                return
            self._closing = True
            self._lock.notify_all()
        try:
            self.flush(timeout)
        except TimeoutError:
            self._stop(abort=True)
            raise
        self._stop(abort=False)

    def _stop(self, *, abort: bool) -> None:
        with self._lock:
            self._closed = True  # the sender stops, and no batch is retried from now on
            if abort:
                closed = LlogClientError("the producer was closed before this batch was acknowledged",
                                         error_type="ProducerClosed")  # fmt: skip
                self._fail_queued(closed, lambda batch: True)
            self._lock.notify_all()
        if abort:
            self.transport.abort()  # the requests in flight fail now, their batches as of unknown outcome
        self._sender.join()
        self._workers.shutdown(wait=True)
        self.transport.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- queueing (under self._lock) --

    def _sticky_partition(self, topic: str, count: int) -> int:
        current = self._sticky.get(topic)
        if current is None or current >= count:
            current = random.randrange(count)
        queue = self._partitions.get((topic, current))
        if queue is not None and queue.batches and self._is_full(queue.batches[-1]):
            current = (current + 1) % count  # the batch is full: the next one goes to the next partition
        self._sticky[topic] = current
        return current

    def _is_full(self, batch: _Batch) -> bool:
        if batch.exclusive:
            return True
        return batch.size >= self.batch_bytes or len(batch.records) >= self.max_request_records

    def _append(self, topic: str, partition: int, record: str, future: Future[RecordMetadata]) -> None:
        queue = self._partitions.setdefault((topic, partition), _Partition())
        last = queue.batches[-1] if queue.batches else None
        # A batch put in a request is sealed: that request and every retry carry exactly its records.
        if last is None or last.attempts or self._is_full(last) or last.size + len(record) > self.max_request_bytes:
            now = time.monotonic()
            last = _Batch(topic, partition, created=now, deadline=now + self.delivery_timeout_s)
            queue.batches.append(last)
        last.records.append(record)
        last.futures.append(future)
        last.size += len(record) + 1
        self._buffered += len(record)
        self._unfinished += 1

    def _is_ready(self, batch: _Batch, now: float) -> bool:
        if batch.attempts:
            return now >= batch.retry_at
        queue = self._partitions[(batch.topic, batch.partition)]
        more_behind = len(queue.batches) > 1
        lingered = now - batch.created >= self.linger_s
        return self._is_full(batch) or more_behind or lingered or bool(self._flushing) or self._closing

    # -- the sender thread --

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                need_identity = self.idempotent and self._identity is None and self._unfinished > 0
            if need_identity and not self._init_identity():
                self._identity_failures += 1
                delay = backoff(self._identity_failures, self.retry_backoff_s, self.retry_backoff_max_s)
                with self._lock:
                    self._lock.wait_for(lambda: self._closed, timeout=delay)
            with self._lock:
                self._expire(time.monotonic())
                request = self._collect(time.monotonic()) if self._free_workers else None
                if request is None:
                    self._lock.wait(timeout=self._next_wakeup(time.monotonic()))
                    continue
                self._free_workers -= 1
            self._workers.submit(self._send_request, request)

    def _next_wakeup(self, now: float) -> float:
        times = [
            batch.retry_at if batch.attempts else batch.created + self.linger_s
            for queue in self._partitions.values()
            if queue.batches and not queue.in_flight
            for batch in (queue.batches[0],)
        ]
        return max(0.001, min(times) - now) if times and self._free_workers else 1.0

    def _expire(self, now: float) -> None:
        """Fail the queued batches whose delivery timeout passed (not sent, or waiting for a retry)."""
        for queue in self._partitions.values():
            while queue.batches and not queue.in_flight and queue.batches[0].deadline <= now:
                batch = queue.batches.popleft()
                why = f" (POST /producers failed: {self._identity_error})" if self._identity_error else ""
                error = batch.last_error or LlogClientError(
                    f"{batch.topic}/{batch.partition}: not sent within delivery_timeout_ms{why}", error_type="Timeout"
                )
                self._finish(batch, error=error)

    def _fail_queued(self, error: LlogClientError, which: Callable[[_Batch], bool]) -> None:
        """Fail the batches not in flight for which ``which`` is true (an unresolved one as of unknown outcome)."""
        for queue in self._partitions.values():
            waiting = list(queue.batches)[1:] if queue.in_flight else list(queue.batches)
            for batch in filter(which, waiting):
                queue.batches.remove(batch)
                self._finish(batch, error=error)

    def _collect(self, now: float) -> list[_Batch] | None:
        """Ready batches (one per partition not in flight) for one request, marked in flight."""
        chosen: list[_Batch] = []
        size = records = 0
        for queue in self._partitions.values():
            if queue.in_flight or not queue.batches or not self._is_ready(queue.batches[0], now):
                continue
            batch = queue.batches[0]
            if not batch.attempts and self.idempotent and self._identity is None:
                continue  # waits for POST /producers
            # One request carries one producer identity: a retry keeps the one it was first sent with.
            identity = batch.identity if batch.attempts else self._identity if self.idempotent else None
            if chosen and (
                batch.unresolved  # its retry goes alone: a refusal of the request is then about this batch
                or chosen[0].unresolved
                or size + batch.size > self.max_request_bytes
                or records + len(batch.records) > self.max_request_records
                or len(chosen) >= self.max_request_partitions
                or identity != chosen[0].identity
            ):
                continue
            if not batch.attempts:
                self._seal(batch)
            # Counted here, under the lock: from now on _append starts a new batch, so the request carries
            # exactly the records of the sequence range just fixed.
            batch.attempts += 1
            queue.in_flight = True
            chosen.append(batch)
            size += batch.size
            records += len(batch.records)
        return chosen or None

    def _seal(self, batch: _Batch) -> None:
        """Fix the batch's producer identity and sequence before its first attempt."""
        if not self.idempotent or self._identity is None:
            return
        key = (batch.topic, batch.partition)
        batch.identity = self._identity
        batch.sequence = self._sequences.get(key, 0)
        self._sequences[key] = batch.sequence + len(batch.records)

    def _init_identity(self) -> bool:
        """``POST /producers`` (outside the lock). False when it failed: the sender asks again after a backoff.

        A server without the route (llog's own 404 ``NotFound``: a version without idempotent
        producers, or a task of one behind the same URL) fails the batches waiting for an id with an
        ``IdempotenceUnavailable`` error at once, rather than wait out their delivery timeout or send
        them without idempotence; later batches ask again. The producer never turns idempotence off
        by itself: ``idempotent=False`` does.
        """
        try:
            _, answer = self.transport.request("POST", "/producers", {})
            identity = _Identity(str(answer["producer_id"]), int(answer["producer_epoch"]))
        except NotFoundError as exc:
            if exc.error_type != "NotFound":  # the route exists and refused: keep trying
                return self._identity_failed(exc)
            unavailable = LlogClientError(
                f"llog at {self.transport.url} has no POST /producers ({exc}): an idempotent producer cannot send "
                "there; Producer(idempotent=False) produces without idempotence (a retried batch may then be "
                "written twice)", error_type="IdempotenceUnavailable", status=exc.status,
            )  # fmt: skip
            logger.error("%s", unavailable)
            with self._lock:
                self._fail_queued(unavailable, lambda batch: not batch.attempts)
            return self._identity_failed(unavailable)
        except (LlogClientError, KeyError, TypeError, ValueError) as exc:
            error = exc if isinstance(exc, LlogClientError) else LlogClientError(f"bad answer: {exc!r}")
            return self._identity_failed(error)
        with self._lock:
            self._identity = identity
            self._identity_error = None
            self._identity_failures = 0
            self._sequences.clear()
        return True

    def _identity_failed(self, error: LlogClientError) -> bool:
        logger.warning("POST /producers failed, will retry: %s", error)
        with self._lock:
            self._identity_error = error
        return False

    # -- a request (on a worker thread) --

    def _body(self, batches: list[_Batch]) -> bytes:
        head = ""
        identity = batches[0].identity
        if identity is not None:
            head = json.dumps({"producer_id": identity.producer_id, "producer_epoch": identity.producer_epoch})
            head = head[1:-1] + ","
        return ("{" + head + '"topic_partitions":[' + ",".join(b.entry() for b in batches) + "]}").encode("utf-8")

    def _send_request(self, batches: list[_Batch]) -> None:
        try:
            outcomes = self._outcomes(batches)
        except Exception as exc:  # a bug must fail the futures, not hang them
            logger.exception("produce request failed unexpectedly")
            outcomes = [LlogClientError(f"unexpected client error: {exc!r}", error_type="ClientError")] * len(batches)
        with self._lock:
            for batch, outcome in zip(batches, outcomes, strict=True):
                self._partitions[(batch.topic, batch.partition)].in_flight = False
                if isinstance(outcome, LlogClientError):
                    self._retry_or_fail(batch, outcome)
                else:
                    self._partitions[(batch.topic, batch.partition)].batches.popleft()
                    self._finish(batch, start_offset=outcome)
            self._free_workers += 1
            self._lock.notify_all()

    def _outcomes(self, batches: list[_Batch]) -> list[int | LlogClientError]:
        """Per batch: its first offset, or the error it failed with."""
        try:
            status, document = self.transport.exchange("POST", "/produce", self._body(batches))
        except LlogClientError as exc:
            return [exc] * len(batches)
        results = document.get("results") if isinstance(document, dict) else None
        if not isinstance(results, list) or len(results) != len(batches):
            error = error_from(document if isinstance(document, dict) else {}, status)
            return [error] * len(batches)
        outcomes: list[int | LlogClientError] = []
        for batch, result in zip(batches, results, strict=True):
            if (result.get("topic"), result.get("partition")) != (batch.topic, batch.partition):
                outcomes.append(LlogClientError(
                    f"{batch.topic}/{batch.partition}: the server answered for {result.get('topic')}/"
                    f"{result.get('partition')} in its place", error_type="UnexpectedResult",
                ))  # fmt: skip
            elif result.get("ok") and result.get("count") == len(batch.records):
                outcomes.append(int(result["start_offset"]))
            elif result.get("ok"):
                outcomes.append(LlogClientError(
                    f"{batch.topic}/{batch.partition}: the server acknowledged {result.get('count')} records of a"
                    f" batch of {len(batch.records)}", error_type="UnexpectedResult",
                ))  # fmt: skip
            else:
                outcomes.append(error_from(result, status))
        return outcomes

    # -- outcomes (under self._lock) --

    def _retry_or_fail(self, batch: _Batch, error: LlogClientError) -> None:
        now = time.monotonic()
        if not _not_written(error):
            batch.unresolved = True  # until an answer for this batch (ok or duplicate) resolves it
        if error.error_type == "InvalidPartition":
            with self._metadata_lock:
                self._metadata.pop(batch.topic, None)
        if error.retriable and now < batch.deadline and not self._closed:
            batch.retry_at = now + backoff(batch.attempts, self.retry_backoff_s, self.retry_backoff_max_s)
            batch.last_error = error
            logger.info("retrying %s/%s (attempt %d): %s", batch.topic, batch.partition, batch.attempts + 1, error)
            return
        self._partitions[(batch.topic, batch.partition)].batches.popleft()
        self._finish(batch, error=error)

    def _finish(self, batch: _Batch, *, start_offset: int | None = None, error: LlogClientError | None = None) -> None:
        """Resolve the batch's futures. A failed batch whose outcome is unknown (an attempt got no answer that
        says it was not written: ``unresolved``) fails with :class:`OutcomeUnknownError`, whatever its last
        attempt met, and its sequence is never given to another batch: the producer takes a new id."""
        if error is not None and batch.unresolved:
            error = OutcomeUnknownError(
                f"{batch.topic}/{batch.partition}: {len(batch.records)} records may or may not have been written "
                f"(an attempt got no answer that says; the last one met {error})", last_error=error,
            )  # fmt: skip
        if error is not None and batch.sequence is not None and batch.identity == self._identity:
            key = (batch.topic, batch.partition)
            if not batch.unresolved and error.error_type not in UNKNOWN_IDENTITY_ERRORS:
                self._sequences[key] = batch.sequence  # not written: the next batch takes its sequence
            else:
                self._identity = None  # this partition's sequence is unknown now: start over with a new id
        for index, future in enumerate(batch.futures):
            try:
                if error is not None:
                    future.set_exception(error)
                else:
                    assert start_offset is not None
                    future.set_result(RecordMetadata(batch.topic, batch.partition, start_offset + index))
            except InvalidStateError:  # pragma: no cover - futures are never cancellable (set running)
                pass
        self._buffered -= sum(len(record) for record in batch.records)
        self._unfinished -= len(batch.records)
        self._lock.notify_all()


def _not_written(error: LlogClientError) -> bool:
    """Whether ``error`` says the attempt was not written: a refusal llog itself answered (a 4xx with an
    ``error_type``, or one of ``REFUSED_UNWRITTEN``), or API Gateway's throttling (429: the request
    never reached llog). Other retriable errors, a 5xx or a gateway's other bare statuses (a 502 or
    504 while the function may still be appending) say nothing either way."""
    status = error.status
    return (
        status == THROTTLED
        or error.error_type in REFUSED_UNWRITTEN
        or (
            not error.retriable
            and status is not None
            and 400 <= status < 500
            and not error.error_type.startswith("HTTP")
        )
    )
