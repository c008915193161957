"""The concurrent harness's edges: the client, two ``llog serve`` tasks and their deaths (docs/RELIABILITY.md).

``test_concurrent.py`` runs the protocol's actions at once in one process. This run puts, for
``LLOG_CONCURRENT_SECONDS`` (``make soak`` runs it longer), what stands between them and a user at
the same time, on the session's real Oxia and moto S3:

* two real ``llog serve`` processes on the same root, their tail caches on (``tests/serve_tasks.py``);
  a killer SIGKILLs one of them now and then and starts it again on the same port, so that clients
  see refused and lost connections, and answers that never come;
* idempotent producers: the Python client's ``Producer`` (the SDK users run, docs/CLIENT.md), each
  pointed at one task, with its own retries; each future's offset (acknowledged) or error is recorded;
* long-polling consumers through both tasks: the client's ``Consumer`` (a group of its own each; one
  of them slow, so that retention overtakes it), each checking as it reads that its offsets are
  contiguous from where it started and that a jump is one the client said it made (the
  ``OffsetOutOfRange`` reset it logs, to the log start retention moved);
* retention: a compactor and a collector (GC with retention by size) in the test process;
* a second topic's lives: created with two partitions through one task, produced to by a
  ``Producer`` of that life, deleted through one task while raw HTTP long-polls
  (``max_wait_ms`` > 0) wait on it through both, reclaimed by the collector, created again.
  The serve processes run with the topic caches' bounds shortened as the reclaim delay is
  (``test_concurrent.py`` does so in its process; ``LLOG_TEST_CONSTANTS`` in theirs).

At the end: every acknowledged record is read exactly once, at its acknowledged offset (unless
retention removed it), wherever it was read (consumers, pollers, the final read); no offset reads as
two records (so no future resolved with offsets that hold another batch's records); no record whose
send failed with a "not written" error is in the log; each consumer read every acknowledged record
from where it started to the end, in order, but for the ranges it was told retention removed; no
poll of the second topic sent after a delete answered (at once through the task that deleted, after
the re-check bound through the other) returned a record of the deleted life, and every poll
answered within its wait (a generous bound: a stall, never a slow machine); and final consumes
through both tasks answer as a consume service without a cache (the consume Lambda's) does.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import os
import random
import re
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest

from llog.api.native.contract import consume_response, parse_consume_request
from llog.config import CompactorConfig, GcConfig, Limits, RetentionConfig, RetentionPolicy, S3Config
from llog.errors import LlogError, StorageUnavailable
from llog.protocol import topics
from llog.protocol.compaction import Compactor
from llog.protocol.gc import GarbageCollector
from llog.protocol.read import LogReader
from llog.protocol.topics import TopicRegistry
from llog.service import consume
from llog.service.consume import ConsumeService
from llog.store.storage import Storage
from llog_client import Consumer, Producer
from llog_client.consumer import Record
from llog_client.errors import LlogClientError, OutcomeUnknownError
from llog_client.producer import RecordMetadata
from tests.conftest import OxiaServer, serve_env
from tests.faults import report_run
from tests.serve_tasks import CONSTANTS_ENV, ServeTask, post_json

pytestmark = pytest.mark.oxia

SECONDS = float(os.environ.get("LLOG_CONCURRENT_SECONDS", "15"))
TOPIC = "edges"
PARTITIONS = (0, 1, 2)
LIFE_TOPIC = "edges-life"
LIFE_PARTITIONS = (0, 1)
PRODUCERS_PER_TASK = 1
COMMIT_DELAY_MS = 1_000  # the serve processes' writers'
GRACE_MS = 3 * COMMIT_DELAY_MS  # GC's grace exceeds twice the commit delay
# As in test_concurrent.py: a deleted topic is reclaimed GRACE_MS + RECLAIM_DELAY_MS after its delete, and every
# process trusts a topic record for TOPIC_CACHE_TTL_MS and a partition not confirmed for STALE_TOPIC_MS at most.
RECLAIM_DELAY_MS = 1_000
TOPIC_CACHE_TTL_MS = 300
# A retry of a batch whose attempt died holding the partition's claim (its task killed mid-append) is answered
# SequenceInFlight until the claim's commit deadline plus this margin has passed (docs/IDEMPOTENCE.md): a minute by
# default, for clock skew between hosts and Oxia's retries of a late commit request (3 x 5 s by default). On one
# host, 20 s cover the retries.
CLAIM_MARGIN_MS = 20_000
SHORT_LIVES = {
    "llog.protocol.producers:CLAIM_MARGIN_MS": CLAIM_MARGIN_MS,
    "llog.protocol.topics:TOPIC_CACHE_TTL_MS": TOPIC_CACHE_TTL_MS,
    "llog.service.produce:TOPIC_CACHE_TTL_MS": TOPIC_CACHE_TTL_MS,
    "llog.service.produce:STALE_TOPIC_MS": RECLAIM_DELAY_MS,
    "llog.service.tail_cache:STALE_TOPIC_MS": RECLAIM_DELAY_MS,
}
RETENTION_BYTES = 2_000  # per partition of the first topic
KILL_EVERY_S = (1.0, 3.0)
POLL_WAIT_MS = 1_000  # each long poll's max_wait_ms
# A poll answered later than its wait plus this stalled: far beyond a loaded machine's delays, short of forever.
STALL_S = 30.0
# After a delete answered through one task, the other answers from its cache for at most the re-check bound
# (llog/service/consume.py's RECHECK_S, docs/HTTP_API.md) past its last confirming read of Oxia; that read may
# itself have been under way when the delete committed: a second more for it.
OTHER_TASK_BOUND_S = consume.RECHECK_S + 1.0
# A process reads a topic's record (its folder, or that it has none) at most TOPIC_CACHE_TTL_MS before it answers from
# it: a second more for a read under way when the create answered.
CREATE_KNOWN_S = TOPIC_CACHE_TTL_MS / 1000 + 1.0
DELIVERY_TIMEOUT_MS = 90_000  # a producer's batch is retried this long: across any number of kills
CATCH_UP_S = 120.0  # at the end, for the consumers to read to the final high watermarks
SAME_ANSWER_S = 10.0  # for a task's cache to learn the last changes before its answer is compared
SLOW_CONSUMER_PAUSE_S = 1.0


@dataclass
class Sent:
    """A record a producer sent, and what its future resolved with."""

    value: bytes
    partition: int
    future: Future[RecordMetadata]
    offset: int | None = None  # acknowledged there
    error: LlogClientError | None = None


@dataclass
class Life:
    """One life of the second topic: created, produced to, deleted (times on time.monotonic())."""

    number: int
    created: float
    acked: dict[bytes, tuple[int, int]] = field(default_factory=dict)  # value -> (partition, offset)
    delete_called: float = float("inf")
    deleted_by: int | None = None  # the task whose answer to the delete was 200
    delete_answered: float = float("inf")
    gone_until: float = float("-inf")  # the next create's last refused attempt (TopicDeleted) was sent: still deleted


@dataclass
class Poll:
    """A raw long-poll of the second topic: sent, answered (times on time.monotonic())."""

    task: int
    partition: int
    fetch_offset: int
    sent: float
    answered: float
    status: int
    body: Any


def life_of(value: bytes) -> int:
    """The life of the second topic a record was produced in: its value is ``L<life>-<serial>``."""
    return int(value.split(b"-")[0].removeprefix(b"L"))


class ConsumerLog(logging.Handler):
    """What the client's consumers and producers log: a consumer's resets past an ``OffsetOutOfRange``
    (the client's word that it skipped records), and retries."""

    RESET = re.compile(r"^group (\S+): OffsetOutOfRange: .*; reading (\S+)/(\d+) from (\d+)$", re.DOTALL)

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.guard = threading.Lock()  # not Handler.lock, which handle() holds around emit
        self.resets: dict[tuple[str, int], list[int]] = {}  # (group, partition) -> offsets reset to
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        with self.guard:
            found = self.RESET.match(message)
            if found and found.group(2) == TOPIC:
                self.resets.setdefault((found.group(1), int(found.group(3))), []).append(int(found.group(4)))
                self.counts["consumer resets past OffsetOutOfRange"] += 1
            elif record.name == "llog_client.producer" and message.startswith("retrying"):
                self.counts["producer retries"] += 1
            elif record.name == "llog_client.consumer" and "retrying in" in message:
                self.counts["consumer retries"] += 1


@contextlib.contextmanager
def client_logs() -> Iterator[ConsumerLog]:
    handler = ConsumerLog()
    loggers = [logging.getLogger("llog_client.consumer"), logging.getLogger("llog_client.producer")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.INFO)
        lg.addHandler(handler)
    try:
        yield handler
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.removeHandler(handler)
            lg.setLevel(level)


class Edges:
    """One run of the edges at once, and what it recorded."""

    def __init__(self, tasks: list[ServeTask], storage: Storage, logs: ConsumerLog) -> None:
        self.tasks = tasks
        self.storage = storage
        self.logs = logs
        self.reader = LogReader(storage)
        self.uncached = ConsumeService(LogReader(storage))
        self.tally: Counter[str] = Counter()
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.drained = threading.Event()  # the producers are closed: every future resolved
        self.final_high: dict[int, int] = {}
        self._lock = threading.Lock()
        self._serial = 0
        self.sent: list[Sent] = []
        # Each record read anywhere (consumers, pollers, the final read), at its (partition, offset); each offset's
        # record: an offset that reads as two records, or a record at two offsets, is found however it was read.
        self.seen: dict[tuple[str, bytes], set[tuple[int, int]]] = {}
        self.read_at: dict[tuple[str, int, int], bytes] = {}
        # Per consumer (its group) and partition: the offset it started at, and the records it read, in order.
        self.started: dict[tuple[str, int], int] = {}
        self.consumed: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
        self.lives: list[Life] = []
        self.polls: list[Poll] = []
        self.last_refused = float("-inf")  # when the lifer's last request refused as one to try again was sent

    # --- helpers -------------------------------------------------------------------

    def _count(self, what: str, n: int = 1) -> None:
        with self._lock:
            self.tally[what] += n

    def _fail(self, what: str) -> None:
        with self._lock:
            self.failures.append(what)

    def _value(self, prefix: str) -> bytes:
        with self._lock:
            self._serial += 1
            return f"{prefix}-{self._serial}".encode()

    def _saw(self, topic: str, partition: int, offset: int, value: bytes, by: str) -> None:
        with self._lock:
            first = self.read_at.setdefault((topic, partition, offset), value)
            if first != value:
                self.failures.append(f"{by}: offset {offset} of {topic}/{partition} read as {first!r}, "
                                     f"later as {value!r}")  # fmt: skip
            self.seen.setdefault((topic, value), set()).add((partition, offset))

    def _forever(self, name: str, step: Callable[[], None]) -> Callable[[], None]:
        def loop() -> None:
            while not self.stop.is_set():
                try:
                    step()
                except Exception as exc:  # every error fails the run, after every actor stopped
                    self._fail(f"{name}: {exc!r}")
                    self.stop.set()

        return loop

    # --- actors ----------------------------------------------------------------------

    def killer(self) -> Callable[[], None]:
        """SIGKILLs one task now and then, and starts it again on its port at once."""

        def step() -> None:
            if not self.stop.wait(random.uniform(*KILL_EVERY_S)):
                self.tasks[random.randrange(len(self.tasks))].restart()
                self._count("serve kills (SIGKILL) and restarts")

        return self._forever("killer", step)

    def producer(self, client: int, task: int) -> Callable[[], None]:
        """Sends one to three records at a time to random partitions through one task, not waiting for them."""
        producer = Producer(self.tasks[task].url, linger_ms=5, delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
                            request_timeout_ms=10_000, retry_backoff_ms=50, retry_backoff_max_ms=500)  # fmt: skip
        prefix = f"p{client}"

        def run() -> None:
            try:
                while not self.stop.is_set():
                    for _ in range(random.randint(1, 3)):
                        partition = random.choice(PARTITIONS)
                        value = self._value(prefix)
                        sent = Sent(value, partition, producer.send(TOPIC, value, partition=partition))
                        with self._lock:
                            self.sent.append(sent)
                    self.stop.wait(random.uniform(0.01, 0.05))
            except Exception as exc:
                self._fail(f"producer {client}: {exc!r}")
                self.stop.set()
            finally:
                producer.close(timeout=DELIVERY_TIMEOUT_MS / 1000 + 30)

        return run

    def consumer(self, task: int, *, slow: bool = False) -> Callable[[], None]:
        """A group of its own through one task: reads every partition, long-polling at the tail; checks as it reads
        that each partition's offsets follow on from where it started, but for a reset the client logged."""
        group = f"g{task}{'-slow' if slow else ''}-{uuid.uuid4().hex[:6]}"
        expected: dict[int, int] = {}

        def assigned(partitions: list[tuple[str, int]]) -> None:
            for topic, partition in partitions:
                start = consumer.position(topic, partition)
                with self._lock:
                    if (group, partition) in self.started:
                        self.failures.append(f"consumer {group}: {topic}/{partition} assigned again, at {start}")
                    self.started.setdefault((group, partition), start)
                    self.consumed.setdefault((group, partition), [])
                expected[partition] = start

        consumer = Consumer(self.tasks[task].url, group, [TOPIC], on_assign=assigned, retry_backoff_ms=50,
                            retry_backoff_max_ms=500, partition_max_bytes=256 if slow else None)  # fmt: skip

        def caught_up() -> bool:
            return bool(self.final_high) and all(p in expected and expected[p] > self.final_high[p] for p in PARTITIONS)

        def took(record: Record) -> None:
            partition = record.partition
            if record.offset != expected[partition]:
                with self.logs.guard:
                    resets = self.logs.resets.get((group, partition), [])
                if record.offset < expected[partition] or record.offset not in resets:
                    self._fail(f"consumer {group}: {TOPIC}/{partition} read {record.offset} after "
                               f"{expected[partition] - 1}; the client logged no reset to it ({resets})")  # fmt: skip
                with self._lock:
                    self.consumed[(group, partition)].append((-1, b""))  # a gap the client reported
            expected[partition] = record.offset + 1
            with self._lock:
                self.consumed[(group, partition)].append((record.offset, record.value))
            self._saw(TOPIC, partition, record.offset, record.value, f"consumer {group}")

        def run() -> None:
            began = time.monotonic()
            try:
                while not (self.drained.is_set() and caught_up()):
                    if self.drained.is_set() and time.monotonic() - began > SECONDS + CATCH_UP_S:
                        self._fail(f"consumer {group} did not catch up: at {expected}, ends {self.final_high}")
                        return
                    records = consumer.poll(POLL_WAIT_MS / 1000)
                    self._count("consumer polls answered with records" if records else "consumer polls answered empty")
                    for record in records:
                        took(record)
                    if slow and not self.stop.is_set():
                        self.stop.wait(SLOW_CONSUMER_PAUSE_S)
            except Exception as exc:
                self._fail(f"consumer {group}: {exc!r}")
                self.stop.set()
            finally:
                consumer.close()

        return run

    def collector(self) -> Callable[[], None]:
        """Compacts the first topic and runs GC with retention by size (which also reclaims the deleted lives)."""
        config = GcConfig(grace_ms=GRACE_MS, retention=RetentionConfig(
            topics={TOPIC: RetentionPolicy(max_bytes=RETENTION_BYTES)}))  # fmt: skip
        compactor = Compactor(self.storage, config=CompactorConfig(max_offsets_per_run=500,
                                                                   max_commit_delay_ms=COMMIT_DELAY_MS))  # fmt: skip

        def step() -> None:
            for partition in PARTITIONS:
                with contextlib.suppress(StorageUnavailable):
                    compactor.compact_once(TOPIC, partition)
            report = GarbageCollector(self.storage, config=config).collect()
            if report.errors:
                self._fail(f"gc: {report.errors}")
            self._count("gc runs")
            self.stop.wait(random.uniform(0.2, 0.5))

        return self._forever("collector", step)

    def lifer(self) -> Callable[[], None]:
        """The second topic's lives: create through a task, produce (a ``Producer`` of the life), give the pollers
        time to wait at the tail, delete through a task, wait for the reclaim (the create is refused till then)."""

        def step() -> None:
            created = self._until_answered(random.randrange(len(self.tasks)), "POST", "/topics",
                                           {"topic": LIFE_TOPIC, "partitions": len(LIFE_PARTITIONS)},
                                           ok=(200, 201), again=("TopicDeleted",))  # fmt: skip
            if created is None:
                return
            if self.lives and self.lives[-1].delete_answered < self.last_refused:
                self.lives[-1].gone_until = self.last_refused
            life = Life(len(self.lives) + 1, time.monotonic())
            with self._lock:
                self.lives.append(life)
            self._count("lives")
            with Producer(self.tasks[random.randrange(len(self.tasks))].url, linger_ms=5,
                          delivery_timeout_ms=DELIVERY_TIMEOUT_MS, retry_backoff_ms=50,
                          retry_backoff_max_ms=500) as producer:  # fmt: skip
                for _ in range(random.randint(2, 6)):
                    partition = random.choice(LIFE_PARTITIONS)
                    value = self._value(f"L{life.number}")
                    future = producer.send(LIFE_TOPIC, value, partition=partition)
                    producer.flush()
                    try:
                        life.acked[value] = (partition, future.result().offset)
                        self._count("life records acknowledged")
                    except LlogClientError as exc:
                        self._count(f"life produce errors: {exc.error_type}")
                    self.stop.wait(random.uniform(0.1, 0.4))
            self.stop.wait(random.uniform(0.5, 1.5))  # the pollers wait at the tail
            task = random.randrange(len(self.tasks))
            life.delete_called = time.monotonic()
            if self._until_answered(task, "DELETE", f"/topics/{LIFE_TOPIC}", None, ok=(200,)) is not None:
                life.deleted_by, life.delete_answered = task, time.monotonic()
                self._count("lives deleted")

        return self._forever("lifer", step)

    def _until_answered(
        self, task: int, method: str, path: str, doc: Any, *, ok: tuple[int, ...], again: tuple[str, ...] = ()
    ) -> Any:
        """The request through ``task`` until it is answered ``ok`` (its body), retried while the task is down
        or the answer's error is one of ``again``; None if the run stopped first."""
        while not self.stop.is_set():
            sent = time.monotonic()
            request = urllib.request.Request(
                self.tasks[task].url + path, method=method, headers={"Content-Type": "application/json"},
                data=None if doc is None else json.dumps(doc).encode(),
            )  # fmt: skip
            try:
                with urllib.request.urlopen(request, timeout=30) as resp:
                    status, body = resp.status, json.loads(resp.read())
            except urllib.error.HTTPError as exc:
                status, body = exc.code, json.loads(exc.read())
            except (OSError, http.client.HTTPException):  # the task is down, or died before it answered
                self._count(f"lifer {method}: no answer")
                self.stop.wait(0.1)
                continue
            if status in ok:
                return body
            if body.get("error_type") not in again:
                raise AssertionError(f"{method} {path} through task {task}: {status} {body}")
            self.last_refused = sent  # what refused it was read after this
            self._count(f"lifer {method}: {body['error_type']}")
            self.stop.wait(0.2)
        return None

    def poller(self, task: int, partition: int) -> Callable[[], None]:
        """Raw long polls of one partition of the second topic through one task, from where the last one ended."""
        position = 1

        def step() -> None:
            nonlocal position
            doc = {"topic_partitions": [{"topic": LIFE_TOPIC, "partition": partition, "fetch_offset": position}],
                   "max_wait_ms": POLL_WAIT_MS}  # fmt: skip
            sent = time.monotonic()
            try:
                status, body = post_json(self.tasks[task].url + "/consume", doc, POLL_WAIT_MS / 1000 + STALL_S)
            except TimeoutError:
                self._fail(f"poller {task}/{partition}: no answer within {STALL_S} s past its wait")
                return
            except (OSError, http.client.HTTPException):  # the task is down, or died before it answered
                self._count("life polls: no answer (task killed)")
                self.stop.wait(0.05)
                return
            poll = Poll(task, partition, position, sent, time.monotonic(), status, body)
            with self._lock:
                self.polls.append(poll)
            if status == 404 and body.get("error_type") == "UnknownTopic":
                self._count("life polls answered 404 UnknownTopic")
                position = 1  # the next life starts again at 1
                self.stop.wait(0.02)
                return
            if status != 200:
                self._fail(f"poller {task}/{partition}: {status} {body}")
                return
            [result] = body["results"]
            if not result["ok"]:
                self._count(f"life polls answered {result['error_type']}")
                position = 1
                self.stop.wait(0.02)
                return
            records = [(r["offset"], r["value"].encode()) for r in result["records"]]
            self._count("life polls answered with records" if records else "life polls answered empty")
            offsets = [offset for offset, _ in records]
            if offsets != list(range(position, position + len(records))):
                self._fail(f"poller {task}/{partition}: from {position}, offsets {offsets}")
            for offset, value in records:  # an offset of one life of the topic reads as one record
                self._saw(f"{LIFE_TOPIC} life {life_of(value)}", partition, offset, value, f"poller {task}")
            if records:
                position = records[-1][0] + 1

        return self._forever(f"poller {task}/{partition}", step)

    # --- the run and its checks --------------------------------------------------------

    def run(self, seconds: float) -> None:
        producers = [self.producer(2 * t + i, t) for t in range(len(self.tasks)) for i in range(PRODUCERS_PER_TASK)]
        consumers = [self.consumer(t) for t in range(len(self.tasks))] + [self.consumer(1, slow=True)]
        others = [self.killer(), self.collector(), self.lifer()]
        others += [self.poller(t, p) for t in range(len(self.tasks)) for p in LIFE_PARTITIONS]
        producing = [threading.Thread(target=a, name=f"producer {i}") for i, a in enumerate(producers)]
        consuming = [threading.Thread(target=a, name=f"consumer {i}") for i, a in enumerate(consumers)]
        rest = [threading.Thread(target=a, name=f"actor {i}") for i, a in enumerate(others)]
        for thread in producing + consuming + rest:
            thread.start()
        self.stop.wait(seconds)
        self.stop.set()
        stopped = time.monotonic()
        for thread in rest + producing:  # the killer leaves both tasks up; the producers close: all resolved
            began = time.monotonic()
            thread.join(DELIVERY_TIMEOUT_MS / 1000 + 60)
            if time.monotonic() - began > 5:
                self.tally[f"seconds stopping {thread.name}"] = round(time.monotonic() - began)
            assert not thread.is_alive(), f"{thread.name} did not stop; failures: {self.failures}"
        for partition in PARTITIONS:
            self.final_high[partition] = self.reader.high_watermark(TOPIC, partition)
        self.drained.set()
        self.tally["seconds stopping the producers"] = round(time.monotonic() - stopped)
        drained = time.monotonic()
        for thread in consuming:
            thread.join(CATCH_UP_S + 60)
            assert not thread.is_alive(), f"{thread.name} did not stop"
        self.tally["seconds the consumers caught up"] = round(time.monotonic() - drained)
        with self.logs.guard:
            self.tally.update(self.logs.counts)

    def check(self) -> None:
        """Every check of the end state; each violation is named by the check that found it."""
        last = self.lives[-1] if self.lives else None
        asked = time.monotonic()
        life_record = TopicRegistry(self.storage.oxia, root=self.storage.root).get(LIFE_TOPIC)
        if last is not None and last.delete_answered < asked and life_record is not None and life_record.deleted:
            last.gone_until = asked  # deleted, not reclaimed yet when read: not created again before
        starts, unreadable = {}, []
        for partition in PARTITIONS:
            info = self.reader.partition_info(TOPIC, partition)
            starts[partition] = info.log_start
            records = list(self.reader.iter_from(TOPIC, partition, info.log_start))
            if [r.offset for r in records] != list(range(info.log_start, info.high_watermark + 1)):
                unreadable.append(f"offsets: {TOPIC}/{partition} does not read back contiguously")
            for record in records:
                self._saw(TOPIC, partition, record.offset, record.value, "the final read")
            self.tally["records in the log"] += len(records)
            self.tally["records removed by retention"] += info.log_start - 1
        violations = unreadable + self.failures  # the actors', and an offset the final read found changed
        violations += self._check_sent(starts)
        violations += self._check_consumed()
        violations += self._check_polls()
        violations += self._check_same_answers()
        assert not violations, "\n".join(violations)

    def _check_sent(self, starts: dict[int, int]) -> list[str]:
        """Each acknowledged record is in the log once, at its offset (unless retention removed it); no record
        whose send failed as not written is; a record of unknown outcome is at one offset at most."""
        violations = []
        for sent in self.sent:
            assert sent.future.done()
            try:
                sent.offset = sent.future.result().offset
                self.tally["records acknowledged"] += 1
            except LlogClientError as exc:
                sent.error = exc
                if not self.tally[f"producer errors: {exc.error_type}"]:
                    print(f"first producer error {exc.error_type}: {exc}")
                self.tally[f"producer errors: {exc.error_type}"] += 1
            places = sorted(self.seen.get((TOPIC, sent.value), ()))
            if sent.offset is not None:
                at = (sent.partition, sent.offset)
                if (places or sent.offset >= starts[sent.partition]) and places != [at]:
                    violations.append(f"acknowledged: {sent.value!r} was acknowledged at {TOPIC}/{at[0]} offset "
                                      f"{at[1]}; it was read at {places}")  # fmt: skip
            elif isinstance(sent.error, OutcomeUnknownError):
                if len(places) > 1:
                    violations.append(f"exactly once: {sent.value!r} (outcome unknown) was read at {places}")
            elif places:
                violations.append(f"invented: the send of {sent.value!r} failed ({sent.error}); read at {places}")
        for (topic, value), where in self.seen.items():
            if len(where) > 1:
                violations.append(f"exactly once: {value!r} of {topic} was read at {sorted(where)}")
        return violations

    def _check_consumed(self) -> list[str]:
        """Each consumer read every acknowledged record from where it started to the end, in order, but for
        the ranges the client told it it skipped (retention had moved the log start past them)."""
        acked = {(s.partition, s.offset): s.value for s in self.sent if s.offset is not None}
        violations = []
        for (group, partition), read in self.consumed.items():
            start = self.started[(group, partition)]
            skipped: set[int] = set()
            last = start - 1
            for offset, _ in read:
                if offset == -1:
                    continue
                skipped.update(range(last + 1, offset))
                last = offset
            got = {offset: value for offset, value in read if offset != -1}
            self.tally["records consumed"] += len(got)
            self.tally["offsets consumers were told they skipped"] += len(skipped)
            for offset in range(start, self.final_high[partition] + 1):
                want = acked.get((partition, offset))
                if want is not None and offset not in skipped and got.get(offset) != want:
                    violations.append(f"consumed: {group} did not read {want!r} at {TOPIC}/{partition} offset "
                                      f"{offset} (read {got.get(offset)!r})")  # fmt: skip
        return violations

    def _check_polls(self) -> list[str]:
        """No poll of the second topic sent once a life's delete had answered returned a record of that life, and
        every record a poll returned is where that life's producer was told it is."""
        violations = []
        deleted = {life.number: life for life in self.lives}
        where = {value: (life.number, at) for life in self.lives for value, at in life.acked.items()}
        for poll in self.polls:
            late = poll.answered - poll.sent - POLL_WAIT_MS / 1000
            self.tally["life polls answered past their wait by more than a second"] += late > 1
            for life in self.lives:  # sent once the create was known to the task, answered before the delete began
                if life.created + CREATE_KNOWN_S < poll.sent and poll.answered < life.delete_called:
                    self.tally["life polls of a live topic"] += 1
                    if poll.status != 200 or not poll.body["results"][0]["ok"]:
                        violations.append(f"create: a poll through task {poll.task} sent "
                                          f"{poll.sent - life.created:.2f} s after life {life.number}'s create "
                                          f"answered was answered {poll.status} {poll.body}")  # fmt: skip
            for life in self.lives:  # sent once the delete had reached the task, answered before the name lived again
                bound = life.delete_answered + (0 if poll.task == life.deleted_by else OTHER_TASK_BOUND_S)
                if bound < poll.sent and poll.answered < life.gone_until:
                    self.tally["life polls of a deleted topic"] += 1
                    if (poll.status, poll.body.get("error_type")) != (404, "UnknownTopic"):
                        violations.append(f"delete: a poll through task {poll.task} of life {life.number}, deleted, "
                                          f"was answered {poll.status} {poll.body}")  # fmt: skip
            if poll.status != 200:
                continue
            for r in poll.body["results"][0]["records"]:
                value = r["value"].encode()
                number = life_of(value)
                life = deleted[number]
                bound = life.delete_answered + (0 if poll.task == life.deleted_by else OTHER_TASK_BOUND_S)
                if poll.sent > bound:
                    violations.append(
                        f"delete: a poll through task {poll.task} sent {poll.sent - life.delete_answered:.2f} s after "
                        f"life {number}'s delete answered (through task {life.deleted_by}) returned its {value!r}"
                    )
                if value in where and where[value][1] != (poll.partition, r["offset"]):
                    violations.append(f"life: {value!r} acknowledged at {where[value][1]}, read at "
                                      f"{(poll.partition, r['offset'])}")  # fmt: skip
        return violations

    def _check_same_answers(self) -> list[str]:
        """A few final consumes through each task answer as the consume service without a cache does."""
        limits = Limits.from_env()
        docs = []
        for partition in PARTITIONS:
            info = self.reader.partition_info(TOPIC, partition)
            for offset in (info.log_start, max(info.log_start, info.high_watermark - 5), info.high_watermark + 1):
                docs.append({"topic_partitions": [{"topic": TOPIC, "partition": partition, "fetch_offset": offset}],
                             "max_wait_ms": 100, "min_bytes": 0})  # fmt: skip
            if info.log_start > 1:
                docs.append({"topic_partitions": [{"topic": TOPIC, "partition": partition, "fetch_offset": 1}]})
        life = [{"topic": LIFE_TOPIC, "partition": p, "fetch_offset": 1} for p in LIFE_PARTITIONS]
        docs.append({"topic_partitions": life, "max_wait_ms": 100, "min_bytes": 0})

        def uncached(doc: dict[str, Any]) -> tuple[int, Any]:
            try:
                request = parse_consume_request(json.dumps(doc), limits)
                status, body = consume_response(self.uncached.consume(request))
            except LlogError as exc:
                return 0, exc.error_type
            return status, msgspec.to_builtins(body)["results"]

        def through(url: str, doc: dict[str, Any]) -> tuple[int, Any]:
            status, body = post_json(url + "/consume", doc)
            return (status, body["results"]) if status == 200 else (0, body["error_type"])

        violations = []
        for doc in docs:
            for task in self.tasks:
                deadline = time.monotonic() + SAME_ANSWER_S
                while (got := through(task.url, doc)) != (want := uncached(doc)) and time.monotonic() < deadline:
                    time.sleep(0.1)
                if got != want:
                    violations.append(f"cache: {task.url} answered {json.dumps(doc)} with {got}; uncached: {want}")
                self.tally["final consumes compared with a cacheless answer"] += 1
        return violations


@pytest.fixture
def serve_pair(s3_config: S3Config, root: str, oxia_server: OxiaServer) -> Iterator[list[ServeTask]]:
    """Two ``llog serve`` processes on the test's root, their tail caches on, the topic caches' bounds shortened."""
    env = {**os.environ, **serve_env(s3_config, root), "LLOG_OXIA_SERVICE_ADDRESS": oxia_server.address,
           "LLOG_WRITER_MAX_COMMIT_DELAY_MS": str(COMMIT_DELAY_MS), "LLOG_SERVE_ACCESS_LOG": "off",
           CONSTANTS_ENV: json.dumps(SHORT_LIVES)}  # fmt: skip
    env.pop("LLOG_TAIL_CACHE_MAX_BYTES", None)
    with ServeTask(env, module="tests.serve_tasks") as first, ServeTask(env, module="tests.serve_tasks") as second:
        yield [first, second]


@pytest.mark.timeout(int(SECONDS) + 600)  # the run, the producers' last retries, the consumers' catching up
def test_clients_serve_kills_retention_and_deletes_at_once_keep_every_acknowledged_record(
    serve_pair: list[ServeTask], storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(topics, "RECLAIM_DELAY_MS", RECLAIM_DELAY_MS)
    monkeypatch.setattr(topics, "TOPIC_CACHE_TTL_MS", TOPIC_CACHE_TTL_MS)  # the harness's reader and consume service
    assert post_json(serve_pair[0].url + "/topics", {"topic": TOPIC, "partitions": len(PARTITIONS)})[0] == 201
    with client_logs() as logs:
        run = Edges(serve_pair, storage, logs)
        try:
            run.run(SECONDS)
            run.check()
        finally:
            report_run(run.tally, "concurrent edges")
