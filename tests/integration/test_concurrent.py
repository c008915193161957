"""The concurrent harness: the protocol's actions all at once on a real Oxia (docs/RELIABILITY.md).

The model-based machines (``test_model*.py``) run one action at a time. Here
every actor runs on its own thread at the same time, for ``LLOG_CONCURRENT_SECONDS``
per protocol (``make soak`` runs it longer), each with writers of its own, as
separate processes would:

* plain writers: shared appends to one or two of the first three partitions, some crashing at a
  writer crash point (the crashed writer is replaced, as a restarted process);
  the first one's Oxia writes lose their answers now and then (``LossyOxia``), its reservations more often;
* a stale recoverer (CAS): a writer held after its reservation while another append finishes it and the
  compactor compacts both, which then writes its index entry again and dies before its stale check, leaving
  docs/PROTOCOL.md's residual stale key; it reads the partition through once GC deleted the key's object;
* idempotent producers: numbered batches per partition (alone on the fourth), retried until answered;
  some attempts crash at a writer or producer crash point, and some *pause*
  (the attempt is held at a crash point on a thread of its own while the
  producer, taking its answer as lost, retries through another writer; the
  producers' and compactors' wall clock jumps past the paused claim's deadline
  and margin meanwhile, so its claim is taken over; then the paused attempt
  goes on);
* an idempotent producer in an OS process of its own (``tests/concurrent_worker.py``,
  one at a time), which the harness stops with SIGSTOP at random moments, mid-append
  or not, for past every timeout: meanwhile the clock jumps past its claim's deadline
  and margin (the process reads the harness's skew from a file, so it sees the jump
  once resumed), the harness retries its unanswered batch through a writer of its own
  (the takeover runs), and GC's grace passes; then SIGCONT. Now and then it is killed
  with SIGKILL instead, and replaced (a new producer id); its unanswered attempt is
  unknown. The harness records its attempts as it reads them from its stdout: each
  call before the attempt begins (the process waits for a go-ahead), each answer after;
* a fencer: fence, then unfence, one partition at a time;
* a compactor, crashing at its crash points now and then (a compactor paused by a
  crash point resumes through the next one);
* two garbage collectors at once, with retention by size, crashing or pausing past the reclaim claim's lease at
  ``reclaim.after_lease_check`` now and then, and a reclaimer whose paused runs wait until the name lives again
  and took a produce on the partition they are about to delete;
* readers: reads from random offsets and of the high watermark, and an auditor that tails every partition;
* a second topic's life: created (explicitly, or implicitly by its first produce), produced to through produce
  services that cache its record, deleted, reclaimed by those two collectors, created again, over and over, with
  the reclaim delay and the topic caches shortened in proportion (``topics.RECLAIM_DELAY_MS``, the produce
  service's TTLs and that of ``topics.TopicLayouts``), so that the run sees several lives; an explicit life is
  grown now and then, a fencer fences and unfences its partitions (its unfences meet the deletes), and two
  members of a consumer group read it from their committed offsets and commit;
* a configurer: changes the tags and retention (``TopicRegistry.configure``) of topics that are created, grown
  and deleted meanwhile, and checks that no configure undoes a grow or a delete;
* a produce service shared by request threads, as ``llog serve``'s HTTP threads share one: rounds of first produces
  at once to a topic that has no record (a new name, or one deleted and reclaimed since), which they create, and
  produces to the second topic; its reads of a topic record are late now and then (``LateOxia``), and its writer
  trusts a topic's folder longer than the others (``SERVED_LAYOUTS_SLOWER``);
* a backer-up: backs the first topic up, restores the backup into a root of its own, checks the copy, and runs
  the copy's compaction and GC with retention.

Every append, fence, unfence and read is recorded with the time of its call and
of its answer (``tests/concurrency.py``). Every record read (by the auditor, the
readers, the final read) is kept with its offset: an offset must read the same
every time, and a record must be at one offset only, also after retention
removed one copy. At the end the harness checks that
every acknowledged record is readable exactly once at the offset it was given
(unless retention removed it), that no produce to the second topic is acknowledged
between a delete's answer and the end of that topic's reclaim, that every record
acknowledged in one life of it reads back until that life's delete, that every record acknowledged in a served
round's topic reads back at its offset (and none of its produces failed but for an unavailable store), that no
batch of an idempotent producer is in the log twice, that nothing refused or crashed before its commit is readable,
that a consumer group never resumes from an offset that skips records it did not read, that a restored copy
holds the acknowledged records, that ``llog verify`` finds no problem, and that each partition's history is
linearizable (Porcupine, through ``llog-lincheck``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import itertools
import json
import os
import queue
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import pytest

from llog.config import CompactorConfig, GcConfig, RetentionConfig, RetentionPolicy, WriterConfig
from llog.errors import (
    AppendConflict,
    AppendOutcomeUnknown,
    BlobNotFound,
    CommitDeadlineExceeded,
    ConditionalAppendUnsupported,
    InvalidPartition,
    InvalidPartitionCount,
    LogFenced,
    NotPartitionOwner,
    OffsetMismatch,
    OffsetOutOfRange,
    OxiaUnavailable,
    PartitionNotInitialized,
    SequenceInFlight,
    StaleGeneration,
    StorageUnavailable,
    TopicDeleted,
    UnknownMember,
    UnknownTopic,
    VersionConflict,
)
from llog.format.codec import Record
from llog.format.keys import RegistryKeys, S3Location
from llog.format.kv.control import AppendProtocol
from llog.protocol import faults, topics
from llog.protocol.append import AppendResult, LogWriter, SharedAppendGroup
from llog.protocol.backup import BackupLayout, back_up_topics, restore_backup
from llog.protocol.catalog import LogCatalog
from llog.protocol.compaction import Compactor
from llog.protocol.faults import FaultHook
from llog.protocol.gc import GarbageCollector, GcReport
from llog.protocol.groups import GroupCoordinator, OffsetCommit
from llog.protocol.producers import CLAIM_MARGIN_MS
from llog.protocol.read import LogReader, LogRecord
from llog.protocol.topics import TopicConfig, TopicLayouts, TopicRecord, TopicRegistry
from llog.protocol.verify import ProblemKind, Verifier
from llog.service import produce
from llog.service.groups import GroupService
from llog.service.produce import ProduceEntry, ProduceService
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from tests.concurrency import History, Operation, check_linearizable, lincheck_binary
from tests.concurrent_worker import Settings
from tests.conftest import BUCKET, ROOT, OxiaServer
from tests.faults import HARNESS, SimulatedCrash, report_run
from tests.integration.test_model import COMPACTOR_CRASH_POINTS, WRITER_CRASH_POINTS
from tests.integration.test_model_sequential import SEQUENTIAL_CRASH_POINTS

pytestmark = pytest.mark.oxia

SECONDS = float(os.environ.get("LLOG_CONCURRENT_SECONDS", "15"))
CHECK_SECONDS = max(60, int(SECONDS))  # how long llog-lincheck may search before the check counts as not made
PARTITIONS = (0, 1, 2, 3)
# Plain and conditional writers keep off the last partition: there only idempotent producers append, so a fence
# and unfence often leaves the generation opened since empty when a producer's writer, which missed them, commits.
SHARED_PARTITIONS = PARTITIONS[:-1]
TOPIC = "c"
COMMIT_DELAY_MS = 1_000
GRACE_MS = 3 * COMMIT_DELAY_MS  # GC's grace exceeds twice the commit delay (writers' and compactors')
# A compactor references its object no later than this after its PUT (its default, a minute, is past GC's grace).
CATCH_UP = CompactorConfig(max_offsets_per_run=500, max_commit_delay_ms=COMMIT_DELAY_MS)
PLAIN_WRITERS = 2
PRODUCERS = 2
READERS = 2
COLLECTORS = 2
CRASH_CHANCE = 0.1
PRODUCER_CRASH_CHANCE = 0.25  # an attempt that dies leaves a claim for the takeover that follows a clock jump
PAUSE_CHANCE = 0.08
PRODUCERS_ONLY_FENCES = 0.4  # of the fencer's turns, on the producers-only partition (and a quarter of the rest)
MIGRATE_CHANCE = 0.1  # of a fencer's turn on a CAS partition
NEVER_MIGRATED = 0  # a partition the CAS run keeps on CAS throughout (its reservations, the stale recoverer)
LIFE_TOPIC = "life"
LIFE_PRODUCERS = 2
# One produce service shared by request threads, as llog serve's HTTP threads share one (Run.served_producer): each
# round sends SERVED_FIRST_PRODUCES requests to a topic it creates and SERVED_LIFE_PRODUCES to the second topic at once.
SERVED_TOPIC = "served-"
SERVED_PARTITIONS = 2
SERVED_FIRST_PRODUCES = 4
SERVED_RECORDS = 3  # produced by each of those requests' threads, one after the other (the first ones create it)
SERVED_LIFE_PRODUCES = 2
SERVED_CLIENT = LIFE_PRODUCERS  # its produces to the second topic, after the life producers'
LATE_READ_CHANCE = 0.5  # of the served service's reads of a topic record (LateOxia)
LATE_READ_S = 0.5  # at most
# The served process trusts a topic's folder (its writer's TopicLayouts) for TOPIC_CACHE_TTL_MS on a clock this many
# times slower: 3 s, as a real process's 10 s outlast its Oxia calls of milliseconds, where the harness's load makes
# them take a tenth of a second (a round's topic is created again only once reclaimed, 4 s after its delete at least).
SERVED_LAYOUTS_SLOWER = 10
# A life's topic is reclaimed GRACE_MS + RECLAIM_DELAY_MS after its delete; the produce services trust a record they
# read for TOPIC_CACHE_TTL_MS and forget partitions not confirmed for STALE_TOPIC_MS (<= the reclaim delay); every
# TopicLayouts (writers', the reader's) trusts a life's folder for TOPIC_CACHE_TTL_MS too.
RECLAIM_DELAY_MS = 1_000
TOPIC_CACHE_TTL_MS = 300
# A CAS run migrates partitions to the sequential protocol as it goes: its writers may meet either's points.
APPEND_CRASH_POINTS = tuple(
    dict.fromkeys((*WRITER_CRASH_POINTS, *SEQUENTIAL_CRASH_POINTS, faults.WRITER_AFTER_DEADLINE_CHECK))
)
PRODUCER_CRASH_POINTS = (*APPEND_CRASH_POINTS, faults.PRODUCER_AFTER_CLAIM, faults.PRODUCER_AFTER_COMMIT)
FENCE_CRASH_POINTS = (faults.WRITER_AFTER_FENCE_MARKER, faults.WRITER_AFTER_INDEX_WRITE)
CLAIM_JUMP_S = (CLAIM_MARGIN_MS + 2 * COMMIT_DELAY_MS) / 1000  # past a claim's deadline and margin
PAUSE_POINTS = (faults.WRITER_AFTER_BLOB_PUT, faults.PRODUCER_AFTER_CLAIM, faults.WRITER_AFTER_DEADLINE_CHECK)
LOST_ANSWER_CHANCE = 0.02  # of a lossy writer's Oxia write (LossyOxia)
LOST_CONTROL_ANSWER_CHANCE = 0.06  # of a lossy writer's compare-and-set of the first topic's meta/control
LOST_ANSWER_DELAY_S = 1.0
CONTROL_KEY = re.compile(rf"{TOPIC}/partitions/(\d+)/meta/control")  # the first topic's (legacy folders)
CATCH_UP_CHANCE = 0.25  # of a compactor run
# A reclaim run's claim lease, shortened as the reclaim delay is: a collector paused at its lease check (up to
# 1.2 * GRACE_MS) outlives it, and another run takes the topic over.
RECLAIM_LEASE_MS = 2_000
RECLAIM_POINTS = (faults.RECLAIM_AFTER_LEASE_CHECK,)
RECLAIMER_PAUSE_CHANCE = 0.3  # of a reclaimer run; it pauses past the lease, so another run takes the topic over
RECLAIM_PAUSE_S = 2 * RECLAIM_LEASE_MS / 1000  # at least: past the claim's lease, and on till the name lives again
RELIVED_WAIT_S = 10.0  # at most, for the name's next life to take a produce on the partition the run pauses at
CONFIGURED_TOPIC = "configured"  # the configurer's topics, one name per life
GROW_CHANCE = 0.3  # of a life of the explicit kind, before its delete
BACKUP_EVERY_S = (2.0, 5.0)
GROUP = "g"
GROUP_CONSUMERS = 2
GROUP_SESSION_MS = 3_000
REJOIN_CHANCE = 0.05  # of a consumer's step: it reads its committed offsets again, as a restarted member would
PROCESS_CLIENT = 400  # the history's client of a process producer's attempts (401: its retries while stopped)
PROCESS_TURNS_S = (1.0, 3.0)  # between a process producer's stops and kills
# A dead process's request still in flight lands (or is dropped with its connection) within this.
KILLED_REQUEST_BOUND_S = 10.0
KILL_CHANCE = 0.25  # of a turn: the process is killed (SIGKILL) and replaced, rather than stopped (SIGSTOP)
# Errors that say "not now" and change nothing: the actor goes on.
RETRIABLE = (AppendConflict, SequenceInFlight, StorageUnavailable)
# What a produce to a topic nobody deletes may fail with: a lost Oxia or S3 answer, a commit slowed past its deadline.
PRODUCE_UNAVAILABLE = (*RETRIABLE, AppendOutcomeUnknown, CommitDeadlineExceeded)


class JumpingClock:
    """The wall clock plus a skew that only grows: a minute passing in an instant, for the producers and compactors.

    It jumps only while no idempotent attempt is in flight (``attempt``), so that to every attempt the jump is
    time that passed between attempts, never clock skew between hosts beyond ``CLAIM_MARGIN_MS`` (which the
    protocol assumes away, docs/IDEMPOTENCE.md). A paused attempt is not counted: its pause is real, past its
    commit deadline. The skew is also written to ``skew_file`` at every jump, for the clocks of the producer
    processes (``tests/concurrent_worker.py``).
    """

    def __init__(self, skew_file: Path) -> None:
        self._skew = 0.0
        self._in_flight = 0
        self._quiet = threading.Condition()
        self.skew_file = skew_file
        self._write_skew()

    def _write_skew(self) -> None:
        partial = self.skew_file.with_name(f"{self.skew_file.name}.partial")
        partial.write_text(repr(self._skew))
        partial.replace(self.skew_file)  # a process reads the old skew or the new one, never half of it

    def __call__(self) -> float:
        return time.time() + self._skew

    @contextlib.contextmanager
    def attempt(self) -> Iterator[None]:
        with self._quiet:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._quiet:
                self._in_flight -= 1
                self._quiet.notify_all()

    def jump(self, seconds: float) -> bool:
        """Jump once no attempt is in flight (False if none was quiet within a few seconds)."""
        with self._quiet:
            if not self._quiet.wait_for(lambda: self._in_flight == 0, timeout=5):
                return False
            self._skew += seconds
            self._write_skew()
            return True


class LossyOxia:
    """The Oxia store of some writers, whose writes lose their answer now and then (``chance``), as when a
    connection drops: half of them before the server applied the write, half after. The caller gets
    ``OxiaUnavailable`` and cannot tell which happened, or, for a compare-and-set retried as the store retries
    it, an ambiguous ``VersionConflict``: an append must answer "outcome unknown" or find its own write, never
    a wrong "not written" (docs/PROTOCOL.md, "Ambiguous failures")."""

    WRITES = frozenset({"put", "put_sequential", "put_sequential_many", "delete", "delete_range"})

    def __init__(
        self,
        store: OxiaStore,
        chance: Callable[[str, str], float],
        count: Callable[[str], None],
        meanwhile: Callable[[str], None],
    ) -> None:
        self._store = store
        self._chance = chance  # of losing the answer to a write, by the call's name and key
        self._count = count
        self._meanwhile = meanwhile  # what goes on elsewhere while a compare-and-set's answer is lost (its key)

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._store, name)
        if name not in self.WRITES:
            return found

        def lossy(*args: Any, **kwargs: Any) -> Any:
            if random.random() >= self._chance(name, args[0] if args else ""):
                return found(*args, **kwargs)
            applied = random.random() < 0.5
            if applied:
                found(*args, **kwargs)
                time.sleep(random.uniform(0, LOST_ANSWER_DELAY_S))  # a call that hit its deadline: others go on
                if name == "put" and kwargs.get("expected_version_id") is not None and random.random() < 0.8:
                    # The store's own retry of a compare-and-set whose answer it lost (``OxiaStore``): it fails
                    # on the version the first attempt wrote, and says the conflict may be its own doing.
                    self._meanwhile(args[0])
                    try:
                        return found(*args, **kwargs)
                    except VersionConflict as conflict:
                        self._count("Oxia answers lost, then the retry conflicted (ambiguous)")
                        raise VersionConflict(str(conflict), ambiguous=True) from None
            self._count(f"Oxia answers lost ({name}, {'after' if applied else 'before'} it applied)")
            raise OxiaUnavailable(f"{name}: the harness lost its answer")

        return lossy


class LateOxia:
    """The Oxia store of the served produce service (``Run.served_producer``), whose reads of a topic record are
    late now and then (``LATE_READ_CHANCE``, up to ``LATE_READ_S``), as a slow network or a retry makes them: half
    are sent late, so a read that began first is answered after one that began later, half are answered late, so
    a read served before a concurrent produce created the topic is answered after it. The process must keep to
    the newer record."""

    def __init__(self, store: OxiaStore, root: str, count: Callable[[str], None]) -> None:
        self._store = store
        self._topics = RegistryKeys(root).topics_prefix
        self._count = count

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._store, name)
        if name != "get":
            return found

        def late(key: str, **kwargs: Any) -> Any:
            if not key.startswith(self._topics) or random.random() >= LATE_READ_CHANCE:
                return found(key, **kwargs)
            delay = random.uniform(0, LATE_READ_S)
            if random.random() < 0.5:
                self._count("served topic reads sent late")
                time.sleep(delay)
                return found(key, **kwargs)
            self._count("served topic reads answered late")
            answer = found(key, **kwargs)
            time.sleep(delay)
            return answer

        return late


class ArmedHook:
    """A writer's fault hook that crashes it once, at the point it is armed with, and is harmless otherwise.

    The writer that dies is the one that was appending, with what it had cached (its open generations), as a
    process that dies does; the actor then goes on with a new writer, as a restarted process."""

    def __init__(self) -> None:
        self.point: str | None = None

    def arm(self, point: str) -> str:
        self.point = point
        return point

    def __call__(self, reached: str) -> None:
        if reached == self.point:
            self.point = None
            HARNESS[f"concurrent: crashes at {reached}"] += 1
            raise SimulatedCrash(reached)


@dataclass
class Appended:
    """An append as the harness knows it: what the batch holds, and what its answers said."""

    partition: int
    batch: str
    values: list[bytes]
    acked_at: int | None = None  # the start offset of its (first) acknowledgement
    duplicates: list[int] = field(default_factory=list)  # the start offsets of later duplicate answers
    maybe: bool = False  # an attempt's outcome is unknown
    producer: bool = False


@dataclass
class ProduceAck:
    """A produce through a produce service that was acknowledged (to the second topic, or a served round's)."""

    value: bytes
    partition: int
    offset: int
    called: float
    answered: float


@dataclass
class Life:
    """One life of the second topic: from its create (or first produce) to the end of its reclaim."""

    explicit: bool
    began: float
    deleting: str | None = None  # the topic id of the record its delete was called on
    delete_called: float = float("inf")
    deleted: float = float("inf")  # when the delete answered
    reclaimed: float = float("inf")  # when its record was seen gone


@dataclass
class ConfiguredLives:
    """The topics the configurer works on: the current name, and when each one's grow and delete answered."""

    name: str | None = None
    grown: dict[str, float] = field(default_factory=dict)
    deleted: dict[str, float] = field(default_factory=dict)


class ProducerProcess:
    """One process of ``tests.concurrent_worker``: its stdout, read line by line by a thread of its own, and the
    attempt it was let begin and has not answered yet."""

    def __init__(self, settings: Settings, stderr: Path) -> None:
        self.stderr = stderr
        with stderr.open("w") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.concurrent_worker"], cwd=ROOT, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=err, text=True,
            )  # fmt: skip
        self._lines: queue.Queue[str | None] = queue.Queue()  # None: its stdout ended
        self.ended = False
        self.producer_id = ""
        self.in_flight: tuple[Appended, Operation, int] | None = None  # the batch, its call, its sequence number
        self.counted = contextlib.ExitStack()  # holds the clock's ``attempt`` while it counts the attempt in flight
        self.resumed = False  # the attempt in flight was stopped, and resumed
        self.send(json.dumps(dataclasses.asdict(settings)))
        threading.Thread(target=self._read, name="producer process stdout", daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def next_line(self, timeout: float) -> dict[str, Any] | None:
        """Its next line (``queue.Empty`` if none came within ``timeout``), or None once its stdout ended."""
        line = None if self.ended else self._lines.get(timeout=timeout)
        self.ended = line is None
        return None if line is None else json.loads(line)

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # it died: its stdout ends, and says so
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()

    def stderr_tail(self) -> str:
        return self.stderr.read_text()[-2_000:]


class Run:
    """One run of every actor at once, and what it recorded."""

    def __init__(self, oxia: OxiaStore, blobs: BlobStore, protocol: AppendProtocol, server: OxiaServer) -> None:
        self.server = server
        self.restarts: list[tuple[float, float]] = []  # (start, end) of each Oxia restart, time.monotonic()
        self.root = f"concurrent-{uuid.uuid4().hex[:12]}"
        self.files = tempfile.TemporaryDirectory(prefix="llog-concurrent-")  # removed with the run
        self.clock = JumpingClock(Path(self.files.name) / "skew")
        self.storage = Storage(oxia, blobs, BUCKET, self.root)
        self.skewed = dataclasses.replace(self.storage, clock=self.clock)
        self.lossy = cast(
            OxiaStore, LossyOxia(oxia, self._lost_answer_chance, self._count, self._compact_meanwhile)
        )
        self.config = WriterConfig(append_protocol=protocol, max_commit_delay_ms=COMMIT_DELAY_MS)
        self.history = History()
        self.tally: Counter[str] = Counter()
        self.configured = ConfiguredLives()
        self.failures: list[str] = []
        self.appended: dict[str, Appended] = {}
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._serial = 0
        self.log_reader = LogReader(self.storage)
        self.lives: list[Life] = []
        self._wall_ahead = time.time() - time.monotonic()  # a record's wall-clock times on the monotonic clock
        self.life_acks: list[ProduceAck] = []
        self.unchecked_rounds: dict[str, list[ProduceAck]] = {}  # a served round's topic: its acks, until checked
        self.group_read: set[bytes] = set()  # values the consumer group has read
        self.actors: Counter[str] = Counter()  # actors of each kind
        self.acting: Counter[str] = Counter()  # actors at work, by kind
        self._kind = threading.local()  # the kind of the actor on this thread (``Run._forever``)
        self.overlaps: Counter[str] = Counter()  # "a + b": steps of kind a begun while one of kind b was under way
        # Each record of the first topic read by the auditor or a reader, at its offsets, and each offset's record:
        # what retention removes before the end was still seen (``Run.audit``).
        self.seen: dict[bytes, set[tuple[int, int]]] = {}
        self.read_at: dict[tuple[int, int], bytes] = {}
        self.stale_batches: list[Appended] = []  # the stale recoverer's batches left under a stale key
        writer = self._writer()
        for partition in PARTITIONS:
            writer.initialize_partition(TOPIC, partition)

    # --- helpers -------------------------------------------------------------------

    def _writer(self, hook: FaultHook | None = None, *, skewed: bool = False, lossy: bool = False) -> LogWriter:
        storage = self.skewed if skewed else self.storage
        if lossy:
            storage = dataclasses.replace(storage, oxia=self.lossy)
        return LogWriter(storage, config=self.config, fault_hook=hook)

    def _next(self, prefix: str) -> str:
        with self._lock:
            self._serial += 1
            return f"{prefix}{self._serial}"

    def _count(self, what: str) -> None:
        with self._lock:
            self.tally[what] += 1

    def _fail(self, what: str) -> None:
        with self._lock:
            self.failures.append(what)

    def audit(self, partition: int, records: list[LogRecord], by: str) -> None:
        """Records of the first topic just read: an offset must read as the same record every time."""
        with self._lock:
            for record in records:
                first = self.read_at.setdefault((partition, record.offset), record.value)
                if first != record.value:
                    self.failures.append(f"{by}: offset {record.offset} of {TOPIC}/{partition} read as "
                                         f"{first!r}, later as {record.value!r}")  # fmt: skip
                self.seen.setdefault(record.value, set()).add((partition, record.offset))

    def _batch(self, partition: int, prefix: str, *, producer: bool = False, records: int = 0) -> Appended:
        """A new batch of ``records`` records (1 to 3, drawn, by default)."""
        batch = self._next(prefix)
        values = [b"%s#%d" % (batch.encode(), k) for k in range(records or random.randint(1, 3))]
        appended = Appended(partition, batch, values, producer=producer)
        with self._lock:
            self.appended[batch] = appended
        return appended

    def _call(self, appended: Appended, client: int) -> Operation:
        return self.history.call(
            f"{TOPIC}/{appended.partition}", client, kind="append", batch=appended.batch, count=len(appended.values)
        )

    def _answer(
        self, appended: Appended, op: Operation, result: AppendResult | BaseException, *, alone: bool = True
    ) -> str:
        """Record an attempt's answer; returns the outcome (ok, unknown, failed, fenced).

        ``alone``: the batch was its append's only group. A crash after the deadline check of one group's
        commit stops that commit only; the other groups' commits (on the writer's other threads) go on.
        """
        if isinstance(result, SimulatedCrash):
            nothing_sent = result.point == faults.WRITER_AFTER_BLOB_PUT or (
                alone and result.point == faults.WRITER_AFTER_DEADLINE_CHECK
            )
            outcome = "failed" if nothing_sent else "unknown"
        elif isinstance(result, BaseException):
            outcome = "unknown"
        elif result.ok:
            assert result.start_offset is not None
            self.history.answer(op, "ok", start=result.start_offset, duplicate=result.duplicate)
            with self._lock:
                if result.duplicate or appended.acked_at is not None:
                    appended.duplicates.append(result.start_offset)
                else:
                    appended.acked_at = result.start_offset
            return "ok"
        elif isinstance(result.error, LogFenced):
            outcome = "fenced"
        elif isinstance(result.error, CommitDeadlineExceeded | SequenceInFlight):
            outcome = "failed"  # nothing of this attempt was committed
        elif isinstance(result.error, AppendOutcomeUnknown | StorageUnavailable | AppendConflict):
            outcome = "unknown"
        else:
            self._fail(f"append of {appended.batch} failed: {result.error!r}")
            outcome = "unknown"
        if outcome == "unknown":
            appended.maybe = True
        self.history.answer(op, outcome)
        return outcome

    def _hook(self, points: tuple[str, ...], chance: float) -> tuple[FaultHook | None, str | None]:
        """A hook that crashes at one of ``points`` (drawn), with ``chance``; else None."""
        if random.random() >= chance:
            return None, None
        armed = ArmedHook()
        return armed, armed.arm(random.choice(points))

    def _pause(
        self, points: tuple[str, ...], who: str, lasts: tuple[float, ...] = (0.2, 1.0, 1.2 * GRACE_MS / 1000)
    ) -> tuple[FaultHook, str]:
        """A hook that stalls its caller at one of ``points`` for one of ``lasts`` seconds (by default up to past
        GC's grace): a process stopped and resumed."""
        point = random.choice(points)
        seconds = random.choice(lasts)

        def pause(reached: str) -> None:
            if reached == point:
                self._count(f"{who} pauses at {point}")
                time.sleep(seconds)

        return pause, point

    def _lost_answer_chance(self, call: str, key: str) -> float:
        """A first-topic reservation's (or other ``meta/control`` compare-and-set's) answer is lost more often:
        its judgement after the loss is where a reservation could land twice (docs/PROTOCOL.md)."""
        if call == "put" and CONTROL_KEY.fullmatch(key.removeprefix(f"{self.root}/")):
            return LOST_CONTROL_ANSWER_CHANCE
        return LOST_ANSWER_CHANCE

    def _compact_meanwhile(self, key: str) -> None:
        """While a writer's reservation (a compare-and-set of the first topic's ``meta/control``) has lost its
        answer, the partition's compactor catches up: it finishes the reservation and compacts its entry, so the
        writer's judgement of its own reservation meets evidence that compaction rewrote (docs/PROTOCOL.md)."""
        found = CONTROL_KEY.fullmatch(key.removeprefix(f"{self.root}/"))
        if found is not None and self._catch_up(int(found[1])):
            self._count("compactions while a reservation's answer was lost")

    def _catch_up(self, partition: int) -> bool:
        """A compaction of the first topic's ``partition`` up to its tail (a pending append finished first);
        False if it could not run."""
        try:
            Compactor(self.skewed, config=CATCH_UP).compact_once(TOPIC, partition)
        except (*RETRIABLE, CommitDeadlineExceeded):  # its object is left for GC
            return False
        return True

    @contextlib.contextmanager
    def _acting(self, kind: str) -> Iterator[None]:
        """An actor of ``kind`` at work (a step, but for its rests, ``Run._idle``): counted with each kind of
        actor at work when it begins, so the report says which pairs of actions ran at once, and how often."""
        with self._lock:
            for other, at_work in self.acting.items():
                if at_work:
                    self.overlaps[" + ".join(sorted((kind, other)))] += 1
            self.acting[kind] += 1
        try:
            yield
        finally:
            with self._lock:
                self.acting[kind] -= 1

    def _idle(self, seconds: float) -> bool:
        """An actor's rest between actions (not counted as at work); True once the run is stopping."""
        kind = self._kind.name
        with self._lock:
            self.acting[kind] -= 1
        try:
            return self.stop.wait(seconds)
        finally:
            with self._lock:
                self.acting[kind] += 1

    def _forever(self, name: str, step: Callable[[], None]) -> Callable[[], None]:
        kind = name.rstrip("0123456789 ")
        with self._lock:
            self.actors[kind] += 1

        def loop() -> None:
            self._kind.name = kind
            while not self.stop.is_set():
                try:
                    with self._acting(kind):
                        step()
                except RETRIABLE as exc:
                    self._count(f"{name}: {type(exc).__name__}")
                except Exception as exc:  # every other error fails the run, after every actor stopped
                    self._fail(f"{name}: {exc!r}")
                    self.stop.set()

        return loop

    # --- actors ----------------------------------------------------------------------

    def plain_writer(self, client: int) -> Callable[[], None]:
        lossy = client == 0  # the first writer's Oxia answers are lost now and then
        hook = ArmedHook()
        writer = self._writer(hook, lossy=lossy)

        def step() -> None:
            nonlocal hook, writer
            partitions = random.sample(SHARED_PARTITIONS, random.randint(1, 2))
            batches = [self._batch(p, f"w{client}-") for p in partitions]
            point = hook.arm(random.choice(APPEND_CRASH_POINTS)) if random.random() < CRASH_CHANCE else None
            ops = [self._call(b, client) for b in batches]
            try:
                results: list[AppendResult | BaseException] = list(
                    writer.append_shared([SharedAppendGroup(TOPIC, b.partition, [Record(v) for v in b.values])
                                          for b in batches])
                )  # fmt: skip
            except SimulatedCrash as crash:
                results = [crash] * len(batches)
                self._count(f"writer crashes at {point}")
                hook = ArmedHook()
                writer = self._writer(hook, lossy=lossy)  # the process restarts, with nothing cached
            except StorageUnavailable as lost:  # a step before the commits, or a store lost: outcomes unknown
                results = [lost] * len(batches)
            hook.point = None  # a point the append never reached
            for batch, op, result in zip(batches, ops, results, strict=True):
                self._count(f"plain append {self._answer(batch, op, result, alone=len(batches) == 1)}")

        return self._forever(f"writer {client}", step)

    def stale_recoverer(self) -> Callable[[], None]:
        """docs/PROTOCOL.md's residual stale key, made on purpose (CAS): a writer stalls after its reservation
        while another writer's append finishes it and the compactor compacts both, then writes its WAL index
        entry again inside the compacted range and dies before its stale check. Its batch is not inlined, so a
        read that lands on the key goes to its WAL object, which GC deletes after its grace as nothing references
        it. Once past that grace the actor reads the partition through: every offset must read as it read before
        (``llog verify`` reports the key as ``stale_entry``, as documented, until retention removes it)."""
        config = dataclasses.replace(self.config, inline_batch_max_bytes=0)
        finisher = self._writer()

        def step() -> None:
            on_cas = [p for p in SHARED_PARTITIONS if not self.log_reader.partition_info(TOPIC, p).control.sequential]
            if not on_cas:  # the fencer migrated them all
                self._idle(1.0)
                return
            partition = random.choice(on_cas)
            appended = self._batch(partition, "s-")
            stalled: list[bool] = []

            def finish_and_compact() -> bool:
                after = self._batch(partition, "s-after-", records=1)
                op = self._call(after, 151)
                [result] = finisher.append_shared([SharedAppendGroup(TOPIC, partition, [Record(after.values[0])])])
                self._answer(after, op, result)
                return result.ok and self._catch_up(partition)

            def stall_then_die(reached: str) -> None:
                if reached == faults.WRITER_AFTER_RESERVE and not stalled:
                    stalled.append(finish_and_compact())
                elif reached == faults.WRITER_AFTER_INDEX_WRITE and stalled:
                    HARNESS[f"concurrent: crashes at {reached}"] += 1
                    raise SimulatedCrash(reached)

            writer = LogWriter(self.storage, config=config, fault_hook=stall_then_die)
            op = self._call(appended, 150)
            result: AppendResult | BaseException
            try:
                records = [Record(v) for v in appended.values]
                [result] = writer.append_shared([SharedAppendGroup(TOPIC, partition, records)])
            except (SimulatedCrash, StorageUnavailable) as ended:
                result = ended
            outcome = self._answer(appended, op, result)
            if not (stalled and stalled[0] and isinstance(result, SimulatedCrash)):
                self._count(f"stale recoverer append {outcome} (no stale key)")
                return
            self._count("stale keys left by a recoverer that died before its check")
            with self._lock:
                self.stale_batches.append(appended)
            if self._idle(2 * GRACE_MS / 1000):
                return
            info = self.log_reader.partition_info(TOPIC, partition)
            try:
                read = list(self.log_reader.iter_from(TOPIC, partition, info.log_start))
            except OffsetOutOfRange:
                self._count("stale recoverer reads overtaken by retention")
                return
            self.audit(partition, read, "stale recoverer")
            self._count("partitions read through past a stale key's grace")

        return self._forever("stale recoverer", step)

    def conditional_writer(self) -> Callable[[], None]:
        """Appends only at the offset after the high watermark it read (CAS partitions; sequential ones refuse)."""
        writer = self._writer()

        def step() -> None:
            partition = random.choice(SHARED_PARTITIONS)
            expect = self.log_reader.high_watermark(TOPIC, partition) + random.choice((1, 1, 1, 2))
            batch = self._batch(partition, "k")
            op = self.history.call(
                f"{TOPIC}/{partition}", 150, kind="append", batch=batch.batch, count=len(batch.values), expect=expect
            )
            group = SharedAppendGroup(TOPIC, partition, [Record(v) for v in batch.values], expected_offset=expect)
            result = writer.append_shared([group])[0]
            if isinstance(result.error, OffsetMismatch):
                self.history.answer(op, "mismatch")
                self._count("conditional append mismatch")
            elif isinstance(result.error, ConditionalAppendUnsupported):
                self.history.answer(op, "failed")
                self._count("conditional append refused (sequential)")
            else:
                self._count(f"conditional append {self._answer(batch, op, result)}")
            self._idle(random.uniform(0.01, 0.05))

        return self._forever("conditional writer", step)

    def clock_jumper(self) -> Callable[[], None]:
        """Now and then a minute passes: claims of attempts that died expire, and are taken over."""

        def step() -> None:
            if not self._idle(random.uniform(1.0, 3.0)) and self.clock.jump(CLAIM_JUMP_S):
                self._count("clock jumps")

        return self._forever("clock", step)

    def restarter(self, seconds: float) -> Callable[[], None]:
        """Restarts the Oxia server (SIGTERM or SIGKILL) every minute, or once in a shorter run."""
        interval = min(seconds / 2, 60)

        def run() -> None:
            while not self.stop.wait(interval):
                kill = random.random() < 0.5
                self.restarts.append((time.monotonic(), float("inf")))
                self.server.restart(kill=kill)
                self.restarts[-1] = (self.restarts[-1][0], time.monotonic())
                self._count("Oxia restarts after SIGKILL" if kill else "Oxia restarts after SIGTERM")

        return run

    def _during_restart(self, began: float) -> bool:
        """Whether a step that began at ``began`` may have met an Oxia restart (or the reconnect after it)."""
        return any(start - 60 <= began <= end + 10 for start, end in self.restarts)

    def producer(self, client: int) -> Callable[[], None]:
        """An idempotent producer: one batch in flight per partition, retried until it is answered."""
        hook = ArmedHook()
        writer = self._writer(hook, skewed=True, lossy=True)
        pid = self._writer().producers.issue().producer_id
        sequence = dict.fromkeys(PARTITIONS, 0)
        unanswered: dict[int, Appended] = {}

        def attempt(
            appender: LogWriter, batch: Appended, seq: int, *, paused: bool = False
        ) -> tuple[Operation, AppendResult | BaseException]:
            op = self._call(batch, client)
            group = SharedAppendGroup(TOPIC, batch.partition, [Record(v) for v in batch.values], pid, 0, seq)
            with contextlib.nullcontext() if paused else self.clock.attempt():
                try:
                    return op, appender.append_shared([group])[0]
                except (SimulatedCrash, StorageUnavailable) as crash:
                    return op, crash

        def step() -> None:
            nonlocal hook, writer
            partition = random.choice(PARTITIONS)
            batch = unanswered.get(partition) or self._batch(partition, f"p{client}-", producer=True)
            unanswered[partition] = batch
            seq = sequence[partition]
            if random.random() < PAUSE_CHANCE:
                self._paused_attempt(
                    lambda: attempt(writer, batch, seq), lambda w: attempt(w, batch, seq, paused=True), batch
                )
                return
            if random.random() < PRODUCER_CRASH_CHANCE:
                hook.arm(random.choice(PRODUCER_CRASH_POINTS))
            op, result = attempt(writer, batch, seq)
            hook.point = None  # a point the attempt never reached
            if isinstance(result, SimulatedCrash):
                hook = ArmedHook()
                writer = self._writer(hook, skewed=True, lossy=True)  # the process restarts, with nothing cached
            outcome = self._answer(batch, op, result)
            self._count(f"idempotent append {outcome}")
            if isinstance(result, AppendResult) and isinstance(result.error, SequenceInFlight):
                time.sleep(0.05)
            if outcome == "ok":
                del unanswered[partition]
                sequence[partition] += len(batch.values)

        return self._forever(f"producer {client}", step)

    def _paused_attempt(
        self,
        retry: Callable[[], tuple[Operation, AppendResult | BaseException]],
        attempt: Callable[[LogWriter], tuple[Operation, AppendResult | BaseException]],
        batch: Appended,
    ) -> None:
        """An attempt held at a crash point past its commit deadline while the clock jumps past its claim's margin
        and the producer retries (a process stopped with SIGSTOP, then resumed)."""
        point = random.choice(PAUSE_POINTS)
        reached, resume = threading.Event(), threading.Event()

        def pause(at: str) -> None:
            if at == point:
                reached.set()
                resume.wait(10)

        outcome: list[str] = []

        def paused() -> None:
            op, result = attempt(self._writer(pause, skewed=True))
            outcome.append(self._answer(batch, op, result))

        thread = threading.Thread(target=paused, name="paused attempt")
        thread.start()
        if reached.wait(5):
            paused_at = time.monotonic()
            self._count(f"pauses at {point}")
            # Everyone else's clock passes the paused claim's deadline and margin: it may be taken over, and the
            # producer, which took the attempt's answer as lost, retries through another writer meanwhile.
            if self.clock.jump(CLAIM_JUMP_S):
                self._count("clock jumps")
            self._count(f"retries during a pause {self._answer(batch, *retry())}")
            # A pause is longer than every timeout for the paused process too: past its commit deadline.
            time.sleep(max(0.0, paused_at + 1.1 * COMMIT_DELAY_MS / 1000 - time.monotonic()))
        resume.set()
        thread.join()
        self._count(f"paused idempotent append {outcome[0] if outcome else 'crashed'}")

    def process_producer(self) -> Callable[[], None]:
        """An idempotent producer in an OS process of its own (``tests/concurrent_worker.py``), stopped with SIGSTOP
        at random moments (mid-append too) past every timeout and resumed with SIGCONT; now and then killed with
        SIGKILL and replaced by a new process (with a new producer id, as a producer that lost its state)."""
        incarnations = itertools.count(1)
        worker = self._start_producer_process(next(incarnations))
        next_turn = time.monotonic() + random.uniform(*PROCESS_TURNS_S)

        def step() -> None:
            nonlocal worker, next_turn
            try:
                line = worker.next_line(timeout=min(0.5, max(0.0, next_turn - time.monotonic())))
            except queue.Empty:
                if time.monotonic() < next_turn:
                    return
                if worker.producer_id and random.random() < KILL_CHANCE:  # (one still starting is left alone)
                    self._kill_producer_process(worker)
                    worker = self._start_producer_process(next(incarnations))
                elif worker.producer_id:
                    self._stop_producer_process(worker)
                next_turn = time.monotonic() + random.uniform(*PROCESS_TURNS_S)
                return
            if line is None:
                raise RuntimeError(f"a producer process exited by itself ({worker.process.wait()}): "
                                   f"{worker.stderr_tail()}")  # fmt: skip
            self._producer_process_line(worker, line)

        loop = self._forever("producer process", step)

        def run() -> None:
            try:
                loop()
            finally:
                self._end_producer_process(worker)

        return run

    def _start_producer_process(self, incarnation: int) -> ProducerProcess:
        settings = Settings(
            oxia=dataclasses.asdict(self.storage.oxia.config), s3=dataclasses.asdict(self.storage.blobs.config),
            bucket=BUCKET, root=self.root, topic=TOPIC, partitions=list(PARTITIONS), prefix=f"proc{incarnation}-",
            skew_file=str(self.clock.skew_file), append_protocol=self.config.append_protocol.value,
            max_commit_delay_ms=self.config.max_commit_delay_ms,
        )  # fmt: skip
        self._count("producer processes started")
        return ProducerProcess(settings, Path(self.files.name) / f"producer-{incarnation}.stderr")

    def _producer_process_line(self, worker: ProducerProcess, line: dict[str, Any]) -> None:
        """Record what the process said, at the time the harness reads it: a call before the attempt begins (it
        waits for its ``go``), an answer after it ended."""
        if "producer" in line:
            worker.producer_id = str(line["producer"])
        elif "call" in line:
            batch, values = line["call"], [v.encode() for v in line["values"]]
            with self._lock:
                appended = self.appended.setdefault(batch, Appended(line["partition"], batch, values, producer=True))
            op = self._call(appended, PROCESS_CLIENT)
            worker.counted.enter_context(self.clock.attempt())
            worker.in_flight = (appended, op, line["seq"])
            worker.send("go")
        else:
            assert worker.in_flight is not None, line
            appended, op, _ = worker.in_flight
            worker.in_flight = None
            worker.counted.close()
            outcome = self._answer(appended, op, self._process_result(appended, line))
            self._count(f"{'resumed ' if worker.resumed else ''}process idempotent append {outcome}")
            worker.resumed = False

    @staticmethod
    def _process_result(appended: Appended, line: dict[str, Any]) -> AppendResult:
        """A process's answer as the append gave it to the process (its error rebuilt as one of the class it named,
        so that ``_answer`` judges it as it judges the threads' answers)."""
        count = len(appended.values)
        if "error" not in line:
            start, duplicate = line["start"], line["duplicate"]
            return AppendResult(TOPIC, appended.partition, count, start_offset=start, duplicate=duplicate)
        module, name = line["error"]
        kind = getattr(importlib.import_module(module), name)
        error = kind.__new__(kind)
        BaseException.__init__(error, line["message"])
        return AppendResult(TOPIC, appended.partition, count, error=error)

    def _stop_producer_process(self, worker: ProducerProcess) -> None:
        """SIGSTOP, past every timeout: the clock jumps past its claim's deadline and margin, the producer retries
        its batch through another writer (the takeover runs), and GC's grace passes on the real clock (the
        collectors may delete what it wrote and has not committed); then SIGCONT."""
        stopped = time.monotonic()
        worker.process.send_signal(signal.SIGSTOP)
        worker.counted.close()  # a stopped attempt is not in flight: time passes for it, as the jump says
        self._count("producer process stops (SIGSTOP)")
        HARNESS["concurrent: producer process stops (SIGSTOP)"] += 1
        try:
            if self.clock.jump(CLAIM_JUMP_S):
                self._count("clock jumps")
            if worker.in_flight is not None:
                self._retry_while_stopped(worker, *worker.in_flight)
            time.sleep(max(0.0, stopped + 1.2 * GRACE_MS / 1000 - time.monotonic()))
        finally:
            if worker.in_flight is not None:
                worker.counted.enter_context(self.clock.attempt())
                worker.resumed = True
            worker.process.send_signal(signal.SIGCONT)

    def _retry_while_stopped(self, worker: ProducerProcess, appended: Appended, _: Operation, seq: int) -> None:
        group = SharedAppendGroup(
            TOPIC, appended.partition, [Record(v) for v in appended.values], worker.producer_id, 0, seq
        )
        op = self._call(appended, PROCESS_CLIENT + 1)
        with self.clock.attempt():
            result = self._writer(skewed=True).append_shared([group])[0]
        self._count(f"retries while a producer process is stopped {self._answer(appended, op, result)}")

    def _kill_producer_process(self, worker: ProducerProcess) -> None:
        """SIGKILL at a random moment; the answers it printed before it died are recorded."""
        worker.process.kill()
        self._count("producer process kills (SIGKILL)")
        HARNESS["concurrent: producer process kills (SIGKILL)"] += 1
        self._drain_producer_process(worker)

    def _end_producer_process(self, worker: ProducerProcess) -> None:
        """At the run's end: its stdin closes, so it exits once its attempt in flight is answered."""
        assert worker.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            worker.process.stdin.close()
        self._drain_producer_process(worker)

    def _drain_producer_process(self, worker: ProducerProcess) -> None:
        """Record the answers it printed until its stdout ended; calls it was never let begin are not recorded. An
        attempt its death left unanswered is unknown until ``KILLED_REQUEST_BOUND_S`` after its death: a request it
        sent may still arrive meanwhile (another writer may finish a reservation it made, but the reservation
        itself, the commit, came before)."""
        died = time.monotonic_ns()
        while True:
            try:
                line = worker.next_line(timeout=60)
            except queue.Empty:
                self._fail("a producer process did not end within 60 s of being told to")
                worker.process.kill()
                continue
            if line is None:
                break
            if "answer" in line:
                self._producer_process_line(worker, line)
        worker.process.wait()
        worker.counted.close()
        if worker.in_flight is not None:
            appended, op, _ = worker.in_flight
            appended.maybe = True
            op.output = {"outcome": "unknown"}
            op.returned = died + int(KILLED_REQUEST_BOUND_S * 1e9)
            self._count("process idempotent append killed in flight")

    def fencer(self) -> Callable[[], None]:
        """Fences and unfences one partition at a time, the producers-only one more often than the others: there
        a producer whose writer cached the generation before the fence claims and commits in the next one."""
        writer = self._writer()

        def until_done(action: Callable[[str, int], object], partition: int) -> None:
            while True:
                try:
                    action(TOPIC, partition)
                    return
                except RETRIABLE:
                    if self.stop.is_set():
                        raise
                    time.sleep(0.01)

        def step() -> None:
            partition = PARTITIONS[-1] if random.random() < PRODUCERS_ONLY_FENCES else random.choice(PARTITIONS)
            cas = self.config.append_protocol is AppendProtocol.CAS and partition != NEVER_MIGRATED
            if cas and random.random() < MIGRATE_CHANCE:
                until_done(writer.migrate_to_sequential, partition)  # one way; offsets go on where they were
                self._count("migrations")
                return
            op = self.history.call(f"{TOPIC}/{partition}", 100, kind="fence")
            hook, point = self._hook(FENCE_CRASH_POINTS, CRASH_CHANCE)
            try:
                until_done(self._writer(hook).fence if hook else writer.fence, partition)
            except SimulatedCrash:
                self.history.answer(op, "unknown")  # the unfence below finishes the fence first
                self._count(f"fencer crashes at {point}")
            else:
                self.history.answer(op, "ok")
                self._count("fences")
            self._idle(random.uniform(0.01, 0.2))
            op = self.history.call(f"{TOPIC}/{partition}", 100, kind="unfence")
            until_done(writer.unfence, partition)
            self.history.answer(op, "ok")
            self._count("unfences")
            self._idle(random.uniform(0.1, 0.5))

        return self._forever("fencer", step)

    def compactor(self) -> Callable[[], None]:
        """Small runs; now and then one that catches up to the tail, so entries are compacted while their
        writers may still be judging a lost answer."""
        small = dataclasses.replace(CATCH_UP, max_offsets_per_run=8)

        def step() -> None:
            partition = random.choice(PARTITIONS)
            config = CATCH_UP if random.random() < CATCH_UP_CHANCE else small
            hook, point = self._hook(COMPACTOR_CRASH_POINTS, 2 * CRASH_CHANCE)
            if hook is None and random.random() < PAUSE_CHANCE:
                hook, point = self._pause(COMPACTOR_CRASH_POINTS, "compactor")
            try:
                Compactor(self.skewed, config=config, fault_hook=hook).compact_once(TOPIC, partition)
                self._count("compactions")
            except SimulatedCrash:
                self._count(f"compactor crashes at {point}")
            except CommitDeadlineExceeded:  # paused or slowed past it: its object is left for GC
                self._count(f"compactions past their commit deadline{f' (paused at {point})' if point else ''}")
            self._idle(random.uniform(0.02, 0.1))

        return self._forever("compactor", step)

    def collector(self, number: int) -> Callable[[], None]:
        """GC with retention by size; now and then a run crashes, or pauses past its reclaim claim's lease, at
        its lease check (then another run takes the deleted topic over, and the name may live again)."""
        retention = RetentionConfig(topics={TOPIC: RetentionPolicy(max_bytes=2_000)})
        config = GcConfig(grace_ms=GRACE_MS, retention=retention)

        def step() -> None:
            began = time.monotonic()
            hook, point = self._hook(RECLAIM_POINTS, CRASH_CHANCE)
            if hook is None and random.random() < PAUSE_CHANCE:
                hook, point = self._pause(RECLAIM_POINTS, "collector")
            try:
                report = GarbageCollector(self.storage, config=config, fault_hook=hook).collect()
            except SimulatedCrash:
                self._count(f"gc crashes at {point}")
                return
            self._count("gc runs")
            if report.errors and self._during_restart(began):
                self._count("gc runs with errors during an Oxia restart")
            elif report.errors:
                self._fail(f"gc {number}: {report.errors}")
            self._idle(random.uniform(0.1, 0.6))

        return self._forever(f"collector {number}", step)

    def reclaimer(self) -> Callable[[], None]:
        """GC's reclaim step alone, run often (as a collector's first step; the collectors run it too), so that
        the second topic lives more lives and reclaim runs overlap. Now and then a run dies at its lease check,
        or pauses there past its claim's lease on a thread of its own while the reclaimer goes on: its next runs
        take the topic over and finish, the name lives again and is produced to, then the paused run resumes."""
        config = GcConfig(grace_ms=GRACE_MS)
        registry = TopicRegistry(self.storage.oxia, root=self.root)
        paused: list[threading.Thread] = []

        def reclaim(hook: FaultHook | None, point: str | None, only: str | None = None) -> None:
            """A reclaim run of every deleted topic, or of ``only``."""
            report, began = GcReport(), time.monotonic()
            try:
                records = {topic: r for topic, r in registry.records().items() if only in (None, topic)}
                GarbageCollector(self.storage, config=config, fault_hook=hook).reclaim_deleted_topics(records, report)
            except SimulatedCrash:
                self._count(f"reclaimer crashes at {point}")
                return
            except RETRIABLE as exc:
                self._count(f"reclaimer: {type(exc).__name__}")
                return
            self._count("reclaim runs")
            if report.errors and not self._during_restart(began):
                self._fail(f"reclaimer: {report.errors}")

        def pause_until_relived(reached: str) -> None:
            """Past the claim's lease, and on until the name's next life took a produce to the partition this
            run is about to delete (its first in order: 0): what a run that deleted by name would destroy. The
            paused run reclaims the second topic alone (not a served round's)."""
            if reached != faults.RECLAIM_AFTER_LEASE_CHECK:
                return
            began = time.monotonic()
            self._count(f"reclaimer pauses at {reached}")
            self.stop.wait(RECLAIM_PAUSE_S)
            while time.monotonic() < began + RELIVED_WAIT_S and not self.stop.wait(0.05):
                with self._lock:
                    relived = any(a.called > began and a.partition == 0 for a in self.life_acks)
                if relived:
                    self._count("reclaim runs paused until the name lived again")
                    return

        def step() -> None:
            if random.random() < RECLAIMER_PAUSE_CHANCE and not any(t.is_alive() for t in paused):
                hook, point = pause_until_relived, faults.RECLAIM_AFTER_LEASE_CHECK
                paused.append(threading.Thread(target=reclaim, args=(hook, point, LIFE_TOPIC), name="paused reclaim"))
                paused[-1].start()
            else:
                reclaim(*self._hook(RECLAIM_POINTS, CRASH_CHANCE))
            if self._idle(random.uniform(0.05, 0.2)):
                for thread in paused:
                    thread.join()

        return self._forever("reclaimer", step)

    def reader(self, client: int) -> Callable[[], None]:
        def step() -> None:
            partition = random.choice(PARTITIONS)
            if random.random() < 0.3:
                op = self.history.call(f"{TOPIC}/{partition}", 200 + client, kind="read", **{"from": 1})
                high = self.log_reader.high_watermark(TOPIC, partition)
                self.history.answer(op, "ok", records=[], high=high)
                return
            start = random.randint(1, max(1, self.log_reader.high_watermark(TOPIC, partition)))
            op = self.history.call(f"{TOPIC}/{partition}", 200 + client, kind="read", **{"from": start})
            try:
                records = list(self.log_reader.iter_from(TOPIC, partition, start))
            except OffsetOutOfRange:
                self.history.answer(op, "failed")
                self._count("reads below the log start")
                return
            offsets = [r.offset for r in records]
            if offsets != list(range(start, start + len(records))):
                self._fail(f"a read of {TOPIC}/{partition} from {start} returned offsets {offsets}")
            self.audit(partition, records, f"reader {client}")
            self.history.answer(op, "ok", records=[r.value.split(b"#")[0].decode() for r in records])
            self._count("reads")

        return self._forever(f"reader {client}", step)

    def auditor(self) -> Callable[[], None]:
        """Tails every partition of the first topic, as a consumer that keeps up would, so that a record written
        twice, or an offset that reads differently later, is seen even when retention removes it before the end
        (``Run.check`` counts every record seen, not only the final read's)."""
        next_offset = dict.fromkeys(PARTITIONS, 1)

        def step() -> None:
            for partition in PARTITIONS:
                try:
                    records = list(
                        itertools.islice(self.log_reader.iter_from(TOPIC, partition, next_offset[partition]), 1_000)
                    )
                except OffsetOutOfRange:  # retention went past what the auditor had read: those go unaudited
                    self._count("audit gaps (retention ahead of the auditor)")
                    next_offset[partition] = self.log_reader.partition_info(TOPIC, partition).log_start
                    continue
                self.audit(partition, records, "auditor")
                if records:
                    next_offset[partition] = records[-1].offset + 1
                    with self._lock:
                        self.tally["records audited"] += len(records)
            self._idle(0.05)

        return self._forever("auditor", step)

    def life_producer(self, client: int) -> Callable[[], None]:
        """Produces one record at a time to the second topic through a produce service of its own."""
        service = ProduceService(self._writer())

        def step() -> None:
            self._idle(self._produce_to_life(service, client))

        return self._forever(f"life producer {client}", step)

    def _produce_to_life(self, service: ProduceService, client: int) -> float:
        """One record produced to the second topic through ``service``; how long its producer rests after it."""
        life = self.lives[-1] if self.lives else None
        partitions = 3 if life is None or life.explicit else 4  # an explicit life's third one, once grown
        partition = random.randrange(partitions)
        value = self._next(f"l{client}-").encode()
        called = time.monotonic()
        try:
            [result] = service.produce([ProduceEntry(LIFE_TOPIC, partition, [value])])
        except UnknownTopic:
            self._count("life produce refused (no such topic)")
            return 0.02
        except InvalidPartition:
            self._count("life produce refused (a partition not grown yet)")
            return 0.0
        answered = time.monotonic()
        if result.ok:
            assert result.start_offset is not None
            with self._lock:
                self.life_acks.append(ProduceAck(value, partition, result.start_offset, called, answered))
            self._count("life produce ok")
        else:
            self._count(f"life produce {type(result.error).__name__}")
        return 0.01

    def served_producer(self) -> Callable[[], None]:
        """A produce service shared by request threads, as ``llog serve``'s HTTP threads share one. Each round
        sends its requests at once: first produces to a topic that has no record (a new name, or an earlier
        round's, deleted and reclaimed since), which create it, and produces to the second topic (checked with
        its lives). Then every record acknowledged in the round's topic must read back at its offset, and the
        topic is deleted (the collectors reclaim it, and a later round creates it again)."""
        late = cast(OxiaStore, LateOxia(self.storage.oxia, self.root, self._count))
        writer = LogWriter(dataclasses.replace(self.storage, oxia=late), config=self.config)
        writer.layouts = TopicLayouts(late, root=self.root, clock=lambda: time.monotonic() / SERVED_LAYOUTS_SLOWER)
        service = ProduceService(writer)
        registry = TopicRegistry(self.storage.oxia, root=self.root, writer_config=self.config)
        threads = ThreadPoolExecutor(SERVED_FIRST_PRODUCES + SERVED_LIFE_PRODUCES, thread_name_prefix="served")
        numbers = itertools.count()
        deleted: deque[str] = deque()  # the rounds' topics, deleted, oldest first

        def next_topic() -> str:
            if deleted and registry.get(deleted[0]) is None:  # reclaimed: the name lives again
                self._count("served topics created again")
                return deleted.popleft()
            return f"{SERVED_TOPIC}{next(numbers)}"

        def step() -> None:
            topic = next_topic()
            with self._lock:
                self.unchecked_rounds[topic] = []
            requests: list[Future[Any]] = [
                threads.submit(self._produce_to_round, service, topic) for _ in range(SERVED_FIRST_PRODUCES)
            ]
            requests += [threads.submit(self._produce_to_life, service, SERVED_CLIENT)
                         for _ in range(SERVED_LIFE_PRODUCES)]  # fmt: skip
            errors = [error for error in (request.exception() for request in requests) if error is not None]
            if errors:
                raise errors[0]  # its round is checked with the next one
            for checked in list(self.unchecked_rounds):  # an Oxia restart may have left an earlier one unchecked
                for violation in self._check_round(checked):
                    self._fail(violation)
                with self._lock:
                    del self.unchecked_rounds[checked]
                with contextlib.suppress(UnknownTopic):  # no produce got as far as creating it
                    registry.delete(checked)
                deleted.append(checked)
            self._count("served rounds checked")

        loop = self._forever("served producer", step)

        def run() -> None:
            try:
                loop()
            finally:
                threads.shutdown()

        return run

    def _produce_to_round(self, service: ProduceService, topic: str) -> None:
        """Records produced one at a time through ``service`` to a served round's ``topic``, which the round's
        first produces create (the later ones append while a late read may still be answered); nobody deletes it
        before the round is checked, so only an unavailable store may fail them."""
        partition = random.randrange(SERVED_PARTITIONS)
        for _ in range(SERVED_RECORDS):
            value = self._next("n").encode()
            called = time.monotonic()
            [result] = service.produce([ProduceEntry(topic, partition, [value])])
            if result.ok:
                assert result.start_offset is not None
                with self._lock:
                    self.unchecked_rounds[topic].append(
                        ProduceAck(value, partition, result.start_offset, called, time.monotonic())
                    )
                self._count("served produces ok")
            elif isinstance(result.error, PRODUCE_UNAVAILABLE):
                self._count(f"served produces {type(result.error).__name__}")
            else:
                self._fail(f"served: a produce to the round's {topic}/{partition} failed: {result.error!r}")

    def _check_round(self, topic: str) -> list[str]:
        """Every record acknowledged in a served round's ``topic`` reads back at its offset."""
        with self._lock:
            acks = list(self.unchecked_rounds[topic])
        return [
            f"served: {ack.value!r} was acknowledged at {topic}/{ack.partition} offset {ack.offset} in the round that "
            f"created the topic, which reads {found!r} there"
            for ack, found in self._misread(topic, acks)
        ]

    def life(self) -> Callable[[], None]:
        """Creates the second topic (or lets a produce create it), deletes it, waits for its reclaim; again.

        Each step acts on the record as it finds it, so a step that met an Oxia restart is finished by the next:
        a delete that met one may have taken effect (its compare-and-set did, a fence did not answer), and the
        life may even be reclaimed before the next step reads the record.
        """
        registry = TopicRegistry(self.storage.oxia, root=self.root, writer_config=self.config)

        def step() -> None:
            record = registry.get(LIFE_TOPIC)
            record_id = None if record is None else record.topic_id
            life = self.lives[-1] if self.lives else None
            if life is not None and life.deleted == float("inf") and life.deleting not in (None, record_id):
                life.deleted = time.monotonic()  # and reclaimed since: when is not known, so no window is checked
                self._count("life deletes that lost their answer, seen reclaimed")
            if life is not None and life.deleted < float("inf") and (record is None or not record.deleted):
                # Reclaimed; a produce may have begun the next life already (then its record is the reclaim's end).
                now = time.monotonic()
                life.reclaimed = now if record is None else min(now, record.created_at_ms / 1000 - self._wall_ahead)
                self._count("lives reclaimed")
                if record is not None:
                    self.lives.append(Life(False, life.reclaimed))
                    self._count("lives (implicit)")
                    return
            if record is None and (life is None or life.deleted < float("inf")):
                explicit = random.random() < 0.5
                life = Life(explicit, time.monotonic())
                self.lives.append(life)
                if explicit:
                    try:
                        registry.create(LIFE_TOPIC, 2, TopicConfig(self.config.append_protocol))
                    except InvalidPartitionCount:  # a produce to a higher partition began it implicitly first
                        life.explicit = False
                self._count(f"lives ({'explicit' if life.explicit else 'implicit'})")
                self._idle(random.uniform(0.5, 2.0))
                return
            assert life is not None
            live_of_two = record is not None and not record.deleted and not record.implicit and record.partitions == 2
            if live_of_two and random.random() < GROW_CHANCE:
                registry.grow(LIFE_TOPIC, 3)
                self._count("lives grown")
                self._idle(random.uniform(0.3, 1.0))
                return
            if record is None or not record.deleted or life.deleted == float("inf"):
                if record is None or not record.deleted:
                    self._check_life(life)
                else:  # its delete took effect but did not answer: again, to fence what that one may not have
                    self._count("life deletes that lost their answer, repeated")
                life.delete_called = min(life.delete_called, time.monotonic())
                life.deleting = None if record is None else record.topic_id
                try:
                    registry.delete(LIFE_TOPIC)
                except UnknownTopic:  # implicit, and nothing was produced to it yet: its next produce begins a life
                    life.deleted = life.reclaimed = time.monotonic()
                    self.lives.append(Life(False, life.deleted))
                    return
                life.deleted = min(life.deleted, time.monotonic())
                return
            self._idle(0.1)  # deleted: waiting for a collector to reclaim it

        return self._forever("life", step)

    def configured_lives(self) -> Callable[[], None]:
        """Topics of their own for the configurer: each created, grown, deleted (a new name each time, so no
        life waits for its reclaim), while the configurer changes their tags and retention."""
        registry = TopicRegistry(self.storage.oxia, root=self.root, writer_config=self.config)
        lives = itertools.count()

        def step() -> None:
            name = f"{CONFIGURED_TOPIC}-{next(lives)}"
            self.configured.name = name
            try:
                registry.create(name, 2, TopicConfig(self.config.append_protocol))
                self._idle(random.uniform(0.05, 0.3))
                registry.grow(name, 3)
                self.configured.grown[name] = time.monotonic()
                self._idle(random.uniform(0.05, 0.3))
                registry.delete(name)
                self.configured.deleted[name] = time.monotonic()
                self._count("configured lives")
            except OxiaUnavailable:  # the next life takes another name; this one is left as it is
                self._count("configured lives cut short by an Oxia restart")

        return self._forever("configured lives", step)

    def life_configurer(self) -> Callable[[], None]:
        """Changes the tags and retention of ``configured_lives``' topic (``TopicRegistry.configure``, as the
        Kinesis API's tag and retention calls do) while it is created, grown and deleted, pausing between its read
        of the record and its write now and then, as a process may: no configure may undo a grow or a delete
        (read after it answered: fewer partitions, or an active record). Its retention is far longer than the
        run."""
        registry = TopicRegistry(self.storage.oxia, root=self.root, writer_config=self.config)
        configured = self.configured

        def observe(name: str, record: TopicRecord | None, read_at: float, when: str) -> None:
            if record is None:
                return
            if not record.deleted and configured.deleted.get(name, float("inf")) < read_at:
                self._fail(f"configure: {name} read active {when}, after its delete answered")
            if record.partitions < 3 and configured.grown.get(name, float("inf")) < read_at:
                self._fail(f"configure: {name} read with {record.partitions} partitions {when}, after its grow "
                           "to 3 answered")  # fmt: skip

        def change(record: TopicRecord) -> TopicRecord:
            if random.random() < PAUSE_CHANCE * 3:
                time.sleep(random.uniform(0.01, 0.2))  # paused between the read and the compare-and-set
            tags = dict(record.tags) | {f"t{random.randrange(4)}": str(random.randrange(1000))}
            retention_ms = random.choice([None, 30 * 24 * 3_600_000])
            return replace(record, config=replace(record.config, retention_ms=retention_ms),
                           tags=tuple(sorted(tags.items())))  # fmt: skip

        def step() -> None:
            name = configured.name
            if name is None:
                self._idle(0.05)
                return
            read_at = time.monotonic()
            try:
                record = registry.configure(name, change)
            except UnknownTopic:
                self._count("configures refused (deleted)")
            else:
                self._count("configures")
                observe(name, record, read_at, "as configured")
            read_at = time.monotonic()
            observe(name, registry.get(name), read_at, "after a configure")
            self._idle(random.uniform(0.0, 0.02))

        return self._forever("configurer", step)

    def life_fencer(self) -> Callable[[], None]:
        """Fences and unfences the second topic's partitions, or only unfences one (as an operator would), so
        that unfences meet the topic's deletes: no unfence may reopen a deleted topic's partition."""
        writer = self._writer()
        gone = (UnknownTopic, PartitionNotInitialized, TopicDeleted)

        def step() -> None:
            partition = random.randrange(3)
            try:
                if random.random() < 0.5:
                    writer.fence(LIFE_TOPIC, partition)
                    self._idle(random.uniform(0.01, 0.1))
                writer.unfence(LIFE_TOPIC, partition)
                self._count("life unfences")
            except gone as exc:
                self._count(f"life fences and unfences refused: {type(exc).__name__}")
            self._idle(random.uniform(0.1, 0.3))

        return self._forever("life fencer", step)

    def _check_life(self, life: Life) -> None:
        """Every record acknowledged in this life reads back at its offset (the life is not deleted yet)."""
        with self._lock:
            acks = [a for a in self.life_acks if a.called >= life.began]
        for ack, found in self._misread(LIFE_TOPIC, acks):
            self._fail(
                f"life: {ack.value!r} was acknowledged at {LIFE_TOPIC}/{ack.partition} offset {ack.offset} in "
                f"this life, which reads {found!r} there ({self._timeline(ack)})"
            )
        self._count("life records checked")

    def _misread(self, topic: str, acks: list[ProduceAck]) -> list[tuple[ProduceAck, bytes | None]]:
        """The acknowledged produces to ``topic`` that do not read back at their offset, with what reads there."""
        read: dict[int, dict[int, bytes]] = {}
        misread = []
        for ack in acks:
            if ack.partition not in read:
                try:
                    records = self.log_reader.iter_from(topic, ack.partition, 1)
                except PartitionNotInitialized:
                    records = iter(())
                read[ack.partition] = {r.offset: r.value for r in records}
            found = read[ack.partition].get(ack.offset)
            if found != ack.value:
                misread.append((ack, found))
        return misread

    def _timeline(self, ack: ProduceAck) -> str:
        """When the acknowledged produce ran, beside the lives and the Oxia restarts (seconds, monotonic)."""
        lives = [(round(li.began, 2), round(li.deleted, 2), round(li.reclaimed, 2)) for li in self.lives]
        restarts = [(round(a, 2), round(b, 2)) for a, b in self.restarts]
        return f"called {ack.called:.2f}, answered {ack.answered:.2f}; lives {lives}; Oxia restarts {restarts}"

    def _check_lives(self) -> list[str]:
        """No produce was acknowledged between a life's delete answering and its reclaim ending."""
        violations = []
        for life in self.lives:
            for ack in self.life_acks:
                if life.deleted < ack.called and ack.answered < life.reclaimed:
                    violations.append(
                        f"delete: {ack.value!r} was acknowledged at {LIFE_TOPIC}/{ack.partition} offset {ack.offset}, "
                        f"after the topic's delete answered and before its reclaim ended ({self._timeline(ack)})"
                    )
        return violations

    def backer_up(self) -> Callable[[], None]:
        """Backs the topic up, restores the backup into a root of its own, and checks the copy: every record
        there that the original acknowledged is the one acknowledged at that offset. Then the copy's compaction
        and GC run, with retention that removes nearly everything: they must delete none of the original's
        objects, which the copy's restored entries name: the original is read through right after (and the
        original's end checks and ``llog verify`` see it too)."""
        copies = 0
        retention = RetentionConfig(topics={TOPIC: RetentionPolicy(max_bytes=1)})

        def step() -> None:
            nonlocal copies
            if self._idle(random.uniform(*BACKUP_EVERY_S)):
                return
            began = time.monotonic()
            report = back_up_topics(self.storage, [TOPIC], keep=2)
            if report.errors:
                if not self._during_restart(began):
                    self._fail(f"backup: {report.errors}")
                return
            self._count("backups")
            copies += 1
            copy = dataclasses.replace(self.storage, root=f"{self.root}-copy{copies}")
            source, destination = BackupLayout(self.root).prefix, BackupLayout(copy.root).prefix
            for obj in self.storage.blobs.list(BUCKET, f"{source}{report.backup_id}/"):  # an operator copies it over
                body = self.storage.blobs.get(S3Location(BUCKET, obj.key))
                self.storage.blobs.put(S3Location(BUCKET, destination + obj.key[len(source) :]), body)
            restore_backup(copy, report.backup_id)
            self._count("restores into another root")
            with self._lock:
                acked = {(a.partition, offset): value for a in self.appended.values() if a.acked_at is not None
                         for offset, value in enumerate(a.values, start=a.acked_at)}  # fmt: skip
            reader = LogReader(copy)
            for partition in PARTITIONS:
                info = reader.partition_info(TOPIC, partition)
                try:
                    records = list(reader.iter_from(TOPIC, partition, info.log_start))
                except (BlobNotFound, OffsetOutOfRange):  # the original's retention and GC removed a range since
                    self._count("restored ranges the original removed since")
                    continue
                for record in records:
                    wanted = acked.get((partition, record.offset))
                    if wanted is not None and wanted != record.value:
                        self._fail(
                            f"restore: offset {record.offset} of {TOPIC}/{partition} was acknowledged as {wanted!r}, "
                            f"the copy of backup {report.backup_id} reads {record.value!r}"
                        )
                try:
                    Compactor(copy).compact_once(TOPIC, partition)
                except BlobNotFound:  # read above, then compacted away and collected by the original since
                    self._count("copy compactions that met an object the original removed since")
            GarbageCollector(copy, config=GcConfig(grace_ms=1, retention=retention)).collect()
            self._count("copies checked, compacted and collected")
            for partition in PARTITIONS:
                start = self.log_reader.partition_info(TOPIC, partition).log_start
                try:
                    self.audit(partition, list(self.log_reader.iter_from(TOPIC, partition, start)), "backup")
                except OffsetOutOfRange:
                    self._count("original reads after a copy's GC overtaken by retention")

        return self._forever("backup", step)

    def group_consumer(self, client: int) -> Callable[[], None]:
        """A member of one consumer group reading the second topic, from its committed offsets, and committing.

        Whenever it (re)joins and a committed offset ``C`` is applied to a partition, every record below ``C``
        that the partition holds must have been read by the group before (values are unique over all lives): an
        offset committed in an earlier life of the topic, applied to this one, would skip records silently.
        """
        coordinator = GroupCoordinator(self.storage.oxia, root=self.root)
        service = GroupService(coordinator, LogCatalog(self.storage.oxia, root=self.root))
        reader = LogReader(self.storage)
        member: str | None = None
        generation = 0
        positions: dict[int, int] = {}

        def join() -> None:
            nonlocal member, generation, positions
            try:
                joined = coordinator.join(GROUP, [LIFE_TOPIC], session_timeout_ms=GROUP_SESSION_MS, member_id=member)
            except UnknownMember:
                member = None
                return
            except UnknownTopic:  # between two lives
                self._count("group joins refused (no such topic)")
                return
            member, generation = joined.member_id, joined.generation
            identity = coordinator.topic_identity(LIFE_TOPIC)
            committed = {o["partition"]: o["committed"] for o in service.describe(GROUP)["offsets"]
                         if o["topic"] == LIFE_TOPIC}  # fmt: skip
            positions = {}
            for partition in joined.assignment.get(LIFE_TOPIC, []):
                position = committed.get(partition) or 1
                self._check_committed(partition, position, identity, reader, coordinator)
                positions[partition] = position
            self._count("group joins")

        def step() -> None:
            nonlocal member
            if member is None or not positions or random.random() < REJOIN_CHANCE:
                join()
                self._idle(0.2)
                return
            partition = random.choice(sorted(positions))
            try:
                records = list(itertools.islice(reader.iter_from(LIFE_TOPIC, partition, positions[partition]), 5))
            except (UnknownTopic, PartitionNotInitialized, TopicDeleted, OffsetOutOfRange) as gone:
                self._count(f"group reads: {type(gone).__name__}")
                positions.clear()  # rejoin
                return
            with self._lock:
                self.group_read.update(r.value for r in records)
            if not records:
                self._idle(0.05)
                return
            positions[partition] = records[-1].offset + 1
            commit = OffsetCommit(LIFE_TOPIC, partition, positions[partition])
            try:
                coordinator.commit(GROUP, member, generation, [commit])
                self._count("group commits")
            except (StaleGeneration, NotPartitionOwner, UnknownMember, UnknownTopic) as refused:
                self._count(f"group commits refused: {type(refused).__name__}")
                positions.clear()  # rejoin

        return self._forever(f"group consumer {client}", step)

    def _check_committed(
        self, partition: int, position: int, identity: str | None, reader: LogReader, coordinator: GroupCoordinator
    ) -> None:
        """The group's committed ``position`` in the topic's life ``identity`` skips no record it never read."""
        if position <= 1:
            return
        try:
            info = reader.partition_info(LIFE_TOPIC, partition)
            below = list(reader.iter_from(LIFE_TOPIC, partition, info.log_start)) if info.high_watermark else []
        except (UnknownTopic, PartitionNotInitialized, TopicDeleted, OffsetOutOfRange):
            return  # deleted meanwhile
        if coordinator.topic_identity(LIFE_TOPIC) != identity:
            return  # another life began meanwhile: what was read is not the life the offset was judged in
        with self._lock:
            skipped = [r for r in below if r.offset < position and r.value not in self.group_read]
        if skipped or position > info.high_watermark + 1:
            self._fail(
                f"groups: {GROUP} resumes {LIFE_TOPIC}/{partition} at {position} (high watermark "
                f"{info.high_watermark}), skipping {[(r.offset, r.value) for r in skipped][:5]} it never read"
            )
        self._count("group offsets checked")

    # --- the run and its checks --------------------------------------------------------

    def run(self, seconds: float) -> None:
        actors = [self.plain_writer(i) for i in range(PLAIN_WRITERS)]
        actors += [self.producer(i) for i in range(PRODUCERS)] + [self.process_producer()]
        actors += [self.conditional_writer(), self.fencer(), self.compactor(), self.clock_jumper()]
        actors += [self.restarter(seconds)]
        actors += [self.collector(i) for i in range(COLLECTORS)] + [self.reclaimer()]
        actors += [self.reader(i) for i in range(READERS)] + [self.auditor()]
        if self.config.append_protocol is AppendProtocol.CAS:  # a sequential append reserves nothing
            actors += [self.stale_recoverer()]
        actors += [self.life()] + [self.life_producer(i) for i in range(LIFE_PRODUCERS)] + [self.served_producer()]
        actors += [self.group_consumer(i) for i in range(GROUP_CONSUMERS)] + [self.backer_up(), self.life_fencer()]
        actors += [self.configured_lives(), self.life_configurer()]
        threads = [threading.Thread(target=actor, name=f"actor {i}") for i, actor in enumerate(actors)]
        for thread in threads:
            thread.start()
        self.stop.wait(seconds)
        self.stop.set()
        stopped = time.monotonic()
        for thread in threads:
            thread.join(120)
            assert not thread.is_alive(), f"{thread.name} did not stop"
        self.tally["seconds stopping"] = round(time.monotonic() - stopped)
        kinds = sorted(self.actors)
        pairs = [" + ".join((a, b)) for a, b in itertools.combinations_with_replacement(kinds, 2)
                 if a != b or self.actors[a] > 1]  # fmt: skip
        self.tally["actor pairs"] = len(pairs)
        self.tally["actor pairs at work at once"] = sum(1 for pair in pairs if self.overlaps[pair])
        for pair in pairs:
            if not self.overlaps[pair]:
                self.tally[f"actor pairs never at work at once: {pair}"] = 1

    def _resolve_unknown_outcomes(self, in_log: dict[bytes, list[tuple[int, int]]], starts: dict[int, int]) -> None:
        """Settle, from the records read (``in_log``: each record's offsets, wherever a read found it), appends
        whose outcome was unknown, before the history is checked: without it, the dozens of appends an Oxia
        restart leaves unknown make the checker try every subset and order of them (minutes for a few hundred
        operations).

        An append's records land after every append acknowledged before its call; if that one ends at or past
        the final log start, they would be in the final read, so a batch not there took no effect ("failed").
        A plain batch (one attempt per batch) found there took effect at the offset it is found at ("ok"; the
        checker still judges that offset against everything else). An idempotent batch found there is left
        unknown: which of its attempts committed it is not known.
        """
        acked: dict[str, list[tuple[int, int]]] = {}  # partition -> (answered at, end offset), acknowledged
        for op in self.history.operations:
            if op.input["kind"] == "append" and op.output.get("outcome") == "ok" and op.returned:
                end = op.output["start"] + op.input["count"] - 1
                acked.setdefault(op.partition, []).append((op.returned, end))
        for op in self.history.operations:
            if op.input["kind"] != "append" or op.output.get("outcome") != "unknown":
                continue
            appended = self.appended.get(op.input["batch"])
            if appended is None:
                continue
            found = in_log.get(appended.values[0])
            before = max((end for answered, end in acked.get(op.partition, []) if answered < op.call), default=0)
            if not found and before + 1 >= starts[appended.partition]:
                op.output = {"outcome": "failed"}
                self._count("unknown outcomes settled as not written")
            elif found and not appended.producer:
                op.output = {"outcome": "ok", "start": found[0][1]}
                self._count("unknown outcomes settled as written")

    def check(self) -> None:
        """Every check of the end state; each violation is named by the check that found it.

        A record counts where it was ever read (the auditor's, the readers' and the final reads): a batch
        written twice is found even when retention removed one copy before the end.
        """
        assert not self.failures, "\n".join(self.failures)
        violations: list[str] = []
        writer = self._writer()
        for partition in PARTITIONS:
            writer.unfence(TOPIC, partition)  # the fencer may have stopped between a fence and its unfence
            op = self.history.call(f"{TOPIC}/{partition}", 300, kind="unfence")
            self.history.answer(op, "ok")
            info = self.log_reader.partition_info(TOPIC, partition)
            op = self.history.call(f"{TOPIC}/{partition}", 300, kind="read", **{"from": info.log_start})
            records = list(self.log_reader.iter_from(TOPIC, partition, info.log_start))
            self.history.answer(op, "ok", records=[r.value.split(b"#")[0].decode() for r in records])
            if [r.offset for r in records] != list(range(info.log_start, info.high_watermark + 1)):
                violations.append(f"offsets: {TOPIC}/{partition} does not read back contiguously")
            self.audit(partition, records, "the final read")
            self.tally["records in the log"] += len(records)
        violations += self.failures  # an offset the final read found changed
        in_log = {value: sorted(where) for value, where in self.seen.items()}
        self.tally["records seen"] = len(in_log)
        for value, where in in_log.items():
            if len(where) > 1:
                violations.append(f"exactly once: {value!r} was read at {len(where)} offsets: {where}")
        starts = {p: self.log_reader.partition_info(TOPIC, p).log_start for p in PARTITIONS}
        for appended in self.appended.values():
            found = [in_log.get(v) for v in appended.values]
            if appended.acked_at is not None:
                for offset, places in enumerate(found, start=appended.acked_at):
                    if (places or offset >= starts[appended.partition]) and places != [(appended.partition, offset)]:
                        violations.append(
                            f"acknowledged: {appended.batch} was acknowledged at offset {offset} of partition "
                            f"{appended.partition}; the log has it at {places}"
                        )
                if any(d != appended.acked_at for d in appended.duplicates):
                    violations.append(
                        f"duplicates: {appended.batch} was acknowledged at {appended.acked_at}, "
                        f"its retries were answered with {appended.duplicates}"
                    )
            elif not appended.maybe and any(found):
                violations.append(f"invented: {appended.batch} was never committed, yet the log has it at {found}")
        violations += self._check_lives()
        for topic in self.unchecked_rounds:  # an Oxia restart, or the run's end, left it unchecked
            violations += self._check_round(topic)
        report = Verifier(self.storage, grace_ms=GRACE_MS).verify()
        stale_keys = {where for a in self.stale_batches for where in self.seen.get(a.values[0], ())}
        problems = [p for p in report.problems
                    if not (p.kind is ProblemKind.STALE_ENTRY and (p.partition, p.offset) in stale_keys)]  # fmt: skip
        self.tally["stale keys llog verify reported"] = len(report.problems) - len(problems)
        if problems or report.problem_count > len(report.problems):
            violations.append(f"llog verify: {report.to_json()}")
        self._resolve_unknown_outcomes(in_log, starts)
        saved = Path(f"{os.environ.get('LLOG_CONCURRENT_HISTORY') or tempfile.gettempdir() + '/llog-history'}"
                     f"-{self.root}.json")  # fmt: skip
        began = time.monotonic()
        result = check_linearizable(self.history, saved=saved, timeout_s=CHECK_SECONDS)
        self.tally["seconds checking linearizability"] = round(time.monotonic() - began)
        if result.detail == "Unknown":
            # Porcupine's search gave up: the run's other checks stand, this one is counted as not made, and
            # the history is kept (docs/RELIABILITY.md).
            self.tally["histories the checker gave up on"] += 1
            print(f"llog-lincheck gave up after {CHECK_SECONDS} s on {saved}")
        elif not result.linearizable:
            violations.append(f"linearizability: a partition's history is not linearizable; the history: {saved}")
        elif not os.environ.get("LLOG_CONCURRENT_HISTORY"):
            saved.unlink()
        assert not violations, "\n".join(violations)
        if result.linearizable:
            self.tally["operations checked linearizable"] += result.operations
            HARNESS["concurrent: histories checked linearizable"] += result.partitions
        for name, count in self.history.counts().items():
            HARNESS[f"concurrent: {name}"] += count


def shorten_lives(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reclaim delay, its claim's lease and the topic caches, shortened so that a run sees several lives."""
    monkeypatch.setattr(topics, "RECLAIM_DELAY_MS", RECLAIM_DELAY_MS)
    monkeypatch.setattr(topics, "RECLAIM_LEASE_MS", RECLAIM_LEASE_MS)
    monkeypatch.setattr(produce, "STALE_TOPIC_MS", RECLAIM_DELAY_MS)
    monkeypatch.setattr(produce, "TOPIC_CACHE_TTL_MS", TOPIC_CACHE_TTL_MS)
    # Every process's TopicLayouts (the harness's reader among them) resolves a life's folder for as long.
    monkeypatch.setattr(topics, "TOPIC_CACHE_TTL_MS", TOPIC_CACHE_TTL_MS)


@pytest.mark.timeout(int(SECONDS) + CHECK_SECONDS + 180)  # the run, stopping its actors, the checker
@pytest.mark.parametrize("protocol", [AppendProtocol.CAS, AppendProtocol.SEQUENTIAL], ids=lambda p: p.value)
def test_every_action_at_once_keeps_every_acknowledged_record(
    oxia_server: OxiaServer, oxia_store: OxiaStore, blob_store: BlobStore, protocol: AppendProtocol,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lincheck_binary()  # skipped (or failed, in CI) before the run when the checker is missing
    shorten_lives(monkeypatch)
    run = Run(oxia_store, blob_store, protocol, oxia_server)
    run.run(SECONDS)
    try:
        run.check()
    finally:
        report_run(run.tally, f"concurrent ({protocol.value})")
        for pair, count in run.overlaps.items():
            HARNESS[f"concurrent ({protocol.value}): actions begun while another was at work: {pair}"] += count
