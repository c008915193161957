"""The Oxia operation counts of bench/cost_model.py, measured on the real code against a real Oxia server.

Each test runs one modelled unit of work, uncontended and in the steady
state the model describes, and counts what it costs:

* client side, the ``OxiaStore`` operations (``llog.store.metrics.OperationCounters``;
  reads and writes as ``bench/stack.py`` classifies them). A conditional
  write that finds another version (``conflicts``) is a write like any other;
* server side, the WAL appends of the Oxia server (its Prometheus metric
  ``oxia_server_wal_append_latency_milliseconds_count``) and the sessions it
  created and closed. Every Oxia write is one WAL append, and so are a
  failed compare-and-set, a session's creation and its close: that is what
  the model's EFS line charges for. The counters are server-wide, so this
  module runs an Oxia server of its own, where nothing else writes; with
  ``LLOG_TEST_OXIA_ADDRESS`` (or no binary) it uses the session's server and
  leaves the server-side checks out.

Each figure is then compared with the model's constant (``inputs.Code`` for what
both append protocols share, ``inputs.CAS`` / ``inputs.SEQUENTIAL`` for what differs),
for both protocols. docs/COST.md ("Operation counts and where they come from")
names the test behind each figure.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bench.cost import inputs, operations
from bench.stack import READ_OPS, WRITE_OPS, stats_diff
from devserver.devstack import OxiaProcess, find_oxia_binary
from llog.config import CompactorConfig, GcConfig, OxiaConfig, RetentionConfig, RetentionPolicy, WriterConfig
from llog.format.keys import PartitionKeys
from llog.format.kv.control import AppendProtocol
from llog.protocol.append import LogWriter, SharedAppendGroup
from llog.protocol.catalog import LogCatalog
from llog.protocol.claims import CompactorClaims
from llog.protocol.compaction import Compactor
from llog.protocol.gc import GarbageCollector
from llog.protocol.namespace import check_namespace
from llog.protocol.read import LogReader
from llog.protocol.retention import Retention
from llog.service.compaction import CompactionTask, plan_compaction, run_compaction_task
from llog.service.consume import MAX_BATCHES_PER_PARTITION, ConsumeRequest, ConsumeService, FetchPartition
from llog.service.produce import ProduceService
from llog.store.metrics import OperationCounters
from llog.store.oxia import OxiaStore
from llog.store.storage import Storage
from tests.conftest import TOOLS_BIN

pytestmark = pytest.mark.oxia

C = inputs.Code()
PROTOCOLS = pytest.mark.parametrize("protocol", inputs.PROTOCOLS, ids=[p.name for p in inputs.PROTOCOLS])
DAY_S = 86_400


# --- counting -------------------------------------------------------------------------------------


class ServerMetrics:
    """The Prometheus metrics of one Oxia server, summed over shards."""

    WAL_APPENDS = "oxia_server_wal_append_latency_milliseconds_count"
    SESSIONS_CREATED = "oxia_server_sessions_created_count_total"
    SESSIONS_CLOSED = "oxia_server_sessions_closed_count_total"

    def __init__(self, url: str) -> None:
        self.url = url

    @classmethod
    def from_log(cls, log_path: Path, timeout_s: float = 10.0) -> ServerMetrics:
        """The server logs where it serves its metrics (its port is a free one)."""
        deadline = time.monotonic() + timeout_s
        while True:
            text = log_path.read_text(errors="replace") if log_path.exists() else ""
            found = re.search(r"metrics at http://[^:/\s]+:(\d+)/metrics", text)
            if found:
                return cls(f"http://127.0.0.1:{found.group(1)}/metrics")  # bound to loopback (OxiaProcess)
            if time.monotonic() > deadline:
                raise AssertionError(f"the Oxia server did not log its metrics address in {log_path}")
            time.sleep(0.1)

    def read(self) -> dict[str, float]:
        with urllib.request.urlopen(self.url, timeout=5) as response:
            text = response.read().decode()
        totals: dict[str, float] = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            name = re.split(r"[{ ]", line, maxsplit=1)[0]
            if name in (self.WAL_APPENDS, self.SESSIONS_CREATED, self.SESSIONS_CLOSED):
                totals[name] = totals.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
        return totals


@dataclass(frozen=True)
class Server:
    config: OxiaConfig
    metrics: ServerMetrics | None  # None: a shared server, whose counters others move too


@dataclass
class Count:
    """What one block of work cost in Oxia."""

    ops: dict[str, int] = field(default_factory=dict)  # OxiaStore operations by name
    conflicts: int = 0  # conditional writes that found another version
    wal_appends: int | None = None  # the server's WAL appends meanwhile (None: not measured)
    sessions_created: int | None = None
    sessions_closed: int | None = None

    @property
    def reads(self) -> int:
        return sum(n for op, n in self.ops.items() if op in READ_OPS)

    @property
    def writes(self) -> int:
        return sum(n for op, n in self.ops.items() if op in WRITE_OPS)

    @property
    def wal_writes_expected(self) -> int:
        """One WAL append per write, per session created and per session closed."""
        return self.writes + (self.sessions_created or 0) + (self.sessions_closed or 0)


@contextmanager
def counting(store: OxiaStore, server: Server) -> Iterator[Count]:
    """Count ``store``'s operations (and the server's WAL appends) during the block."""
    count = Count()
    before = store.counters.snapshot()
    server_before = server.metrics.read() if server.metrics else {}
    yield count
    diff = stats_diff(before, store.counters.snapshot())
    assert all(s.errors == 0 and s.retries == 0 for s in diff.values()), diff  # uncontended, nothing failed
    count.ops = {op: s.calls for op, s in diff.items() if s.calls}
    assert set(count.ops) <= READ_OPS | WRITE_OPS, count.ops
    count.conflicts = sum(s.conflicts for s in diff.values())
    if server.metrics is not None:
        _count_on_the_server(count, server.metrics, server_before)
        assert count.wal_appends == count.wal_writes_expected, count


def _count_on_the_server(count: Count, metrics: ServerMetrics, before: dict[str, float]) -> None:
    """The server's WAL appends and sessions since ``before``, once it has reported at least the block's writes."""

    def read() -> None:
        now = metrics.read()
        count.wal_appends, count.sessions_created, count.sessions_closed = (
            int(now.get(name, 0) - before.get(name, 0))
            for name in (metrics.WAL_APPENDS, metrics.SESSIONS_CREATED, metrics.SESSIONS_CLOSED)
        )

    deadline = time.monotonic() + 5
    read()
    while (count.wal_appends or 0) < count.wal_writes_expected and time.monotonic() < deadline:
        time.sleep(0.05)
        read()
    time.sleep(0.2)  # and anything the block caused that is still on its way
    read()


# --- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """An Oxia server of this module's own, so that its WAL counters move only with what a test does."""

    def config(address: str) -> OxiaConfig:
        return OxiaConfig(address, request_timeout_ms=3_000, connect_timeout_ms=5_000, close_timeout_ms=3_000)

    binary = find_oxia_binary([TOOLS_BIN])
    if binary is None or os.environ.get("LLOG_TEST_OXIA_ADDRESS"):
        shared = request.getfixturevalue("oxia_server")  # skips (or fails) as the suite does without Oxia
        yield Server(config(shared.address), None)
        return
    process = OxiaProcess(binary, tmp_path_factory.mktemp("oxia-counts"))
    process.start()
    try:
        yield Server(config(process.address), ServerMetrics.from_log(process.log_path))
    finally:
        process.stop()


@pytest.fixture
def oxia_store(server: Server) -> Iterator[OxiaStore]:
    """This module's server, in place of the session's: ``storage`` and what is built on it talk to it."""
    with OxiaStore(server.config) as oxia:
        yield oxia


def new_writer(storage: Storage, protocol: inputs.ProtocolOxia) -> LogWriter:
    return LogWriter(storage, config=WriterConfig(append_protocol=AppendProtocol(protocol.name)))


def fill(writer: LogWriter, topic: str, partition: int, appends: int) -> None:
    writer.initialize_partition(topic, partition)
    for i in range(appends):
        writer.append(topic, partition, [f"r{i}".encode()])


def clock_at(offset_s: float) -> Callable[[], float]:
    return lambda: time.time() + offset_s


# --- produce --------------------------------------------------------------------------------------


@PROTOCOLS
def test_a_produce_request_after_the_writers_first_costs_the_protocols_operations(
    server: Server, oxia_store: OxiaStore, topic: str, protocol: inputs.ProtocolOxia, storage: Storage
) -> None:
    service = ProduceService(new_writer(storage, protocol))  # what the produce Lambda runs
    group = SharedAppendGroup(topic, 0, [b"x" * 1_000])
    service.produce([group])  # creates the partition; the writer's first append to it

    with counting(oxia_store, server) as count:
        (result,) = service.produce([group])
    assert result.ok
    assert result.start_offset == 2

    assert (count.reads, count.writes, count.conflicts) == (protocol.produce_reads, protocol.produce_writes, 0)
    if protocol is inputs.CAS:  # read control; CAS control (reserve), create the index entry, CAS control (clear)
        assert count.ops == {"get": 1, "put": 3}
    else:  # one sequential put into the cached open generation
        assert count.ops == {"put_sequential": 1}


@PROTOCOLS
def test_a_client_batched_request_of_small_records_costs_what_a_one_record_request_does(
    server: Server, oxia_store: OxiaStore, topic: str, protocol: inputs.ProtocolOxia, storage: Storage
) -> None:
    """The model's row for 1 KB records batched to 256 KB requests (the client's default, issue 16): the Oxia
    operations of a produce request do not grow with its records, and its one WAL blob fits the modelled bytes."""
    service = ProduceService(new_writer(storage, protocol))
    batch = SharedAppendGroup(topic, 0, [b"x" * inputs.CLIENT_RECORD_BYTES] * inputs.CLIENT_BATCH_RECORDS)
    service.produce([batch])  # creates the partition; the writer's first append to it
    puts_before = storage.blobs.counters.snapshot()["put"]

    with counting(oxia_store, server) as count:
        (result,) = service.produce([batch])
    assert result.ok
    assert result.start_offset == inputs.CLIENT_BATCH_RECORDS + 1  # offsets start at 1

    assert (count.reads, count.writes, count.conflicts) == (protocol.produce_reads, protocol.produce_writes, 0)
    put = storage.blobs.counters.snapshot()["put"]
    assert put.calls - puts_before.calls == 1
    batched = dataclasses.replace(inputs.Assumptions(), records_per_request=inputs.CLIENT_BATCH_RECORDS)
    assert (
        inputs.CLIENT_BATCH_BYTES
        < put.bytes - puts_before.bytes
        <= operations.wal_blob_bytes(inputs.CLIENT_BATCH_BYTES, batched)
    )


@PROTOCOLS
def test_a_writers_first_produce_request_to_an_existing_partition_also_initializes_it(
    server: Server, oxia_store: OxiaStore, topic: str, protocol: inputs.ProtocolOxia, storage: Storage
) -> None:
    group = SharedAppendGroup(topic, 0, [b"x" * 1_000])
    ProduceService(new_writer(storage, protocol)).produce([group])  # another environment created it
    cold = ProduceService(new_writer(storage, protocol))  # a cold Lambda environment's service

    with counting(oxia_store, server) as count:
        (result,) = cold.produce([group])
    assert result.ok
    assert result.start_offset == 2

    # ProduceService initializes each partition on the first request it sees for it: it reads the registry
    # entry, which names the partition's folder already (no write), then two create-only puts (cursor, control)
    # find the records there. Each is a WAL append all the same.
    first = C.produce_first_oxia_writes
    assert count.conflicts == first == 2
    assert count.reads == protocol.produce_reads + protocol.produce_first_reads + C.produce_first_oxia_reads
    assert count.writes == protocol.produce_writes + first
    # The registry entry and the topic's record (read once, then cached): + 2 gets.
    assert C.produce_first_oxia_reads == 2
    if protocol is inputs.CAS:
        assert count.ops == {"put": 2 + 3, "get": 2 + 1}
    else:  # the first append reads control to find the open generation
        assert count.ops == {"put": 2, "get": 2 + 1, "put_sequential": 1}


@PROTOCOLS
def test_an_idempotent_produce_request_costs_a_state_read_a_next_offset_read_and_two_cas_more(
    server: Server, oxia_store: OxiaStore, topic: str, protocol: inputs.ProtocolOxia, storage: Storage
) -> None:
    now = time.time()
    # The wall clock stands still: the partition's state vouches for the producer's epoch (it was confirmed
    # within llog.protocol.producers.REVALIDATE_AFTER_MS), as on a producer's common path.
    service = ProduceService(new_writer(dataclasses.replace(storage, clock=lambda: now), protocol))
    producer = service.producer(None)

    def group(sequence: int) -> SharedAppendGroup:
        return SharedAppendGroup(topic, 0, [b"x" * 1_000], producer.producer_id, producer.epoch, sequence)

    service.produce([group(0)])  # creates the partition and the producer's state there (validated once)
    with counting(oxia_store, server) as count:
        (result,) = service.produce([group(1)])
    assert (result.ok, result.start_offset, result.duplicate) == (True, 2, False)
    expected = (protocol.idempotent_produce_reads, protocol.idempotent_produce_writes, 0)
    assert (count.reads, count.writes, count.conflicts) == expected
    if protocol is inputs.CAS:  # state, control; claim, reserve, index entry, clear pending, finalize
        assert count.ops == {"get": 2, "put": 5}
    else:  # state, control, the sequence's tail; claim, the sequential put, finalize
        assert count.ops == {"get": 2, "get_lower": 1, "put": 2, "put_sequential": 1}

    with counting(oxia_store, server) as retry:
        (duplicate,) = service.produce([group(1)])
    assert (duplicate.start_offset, duplicate.duplicate) == (2, True)
    assert retry.ops == {"get": 1}  # a retry of a remembered batch reads the state and writes nothing


# --- consume --------------------------------------------------------------------------------------


@PROTOCOLS
def test_a_consume_request_of_one_partition_reads_what_the_protocol_says(
    server: Server, oxia_store: OxiaStore, topic: str, protocol: inputs.ProtocolOxia, storage: Storage
) -> None:
    fill(new_writer(storage, protocol), topic, 0, MAX_BATCHES_PER_PARTITION + 1)
    service = ConsumeService(LogReader(storage))  # the consume Lambda's: no tail cache
    request = ConsumeRequest([FetchPartition(topic, 0, 1, C.consume_fetch_bytes)], max_wait_ms=0, min_bytes=1,
                             max_bytes=50 * C.consume_fetch_bytes)  # fmt: skip
    with counting(oxia_store, server) as first:
        service.consume(request)
    # The first request of a process (and one per topic every TOPIC_CACHE_TTL_MS) also reads the topic's record:
    # which folder its partitions are in (llog.protocol.topics.TopicLayouts).
    assert first.reads == protocol.consume_reads + 1

    with counting(oxia_store, server) as count:
        (fetched,) = service.consume(request)
    assert len(fetched.records) == C.consume_max_batches == 64  # a full request: one batch per produce request

    assert (count.reads, count.writes) == (protocol.consume_reads, 0)
    if protocol is inputs.CAS:  # control (high watermark), one index page
        assert count.ops == {"get": 1, "range_scan": 1}
    else:  # control, the sequence's tail (high watermark), one page of the sequence
        assert count.ops == {"get": 1, "get_lower": 1, "range_scan": 1}


# --- compaction -----------------------------------------------------------------------------------


@PROTOCOLS
def test_a_worker_invocation_costs_its_own_operations_plus_those_of_each_compacted_object(
    server: Server, root: str, topic: str, protocol: inputs.ProtocolOxia, storage: Storage
) -> None:
    writer = new_writer(storage, protocol)
    fill(writer, topic, 0, 4)  # two objects' worth (max_offsets_per_run=2 below)
    fill(writer, topic, 1, 6)  # three objects' worth
    # The steady state: a partition's first compacted range reads no previous one (its log max timestamp).
    for partition in (0, 1):
        Compactor(storage, config=CompactorConfig(max_offsets_per_run=2)).compact_once(topic, partition)

    def invocation(partition: int, objects: int) -> Count:
        """One worker invocation in Lambda: an Oxia client (and session) of its own, gone at the end."""
        with OxiaStore(server.config, counters=OperationCounters()) as oxia:
            compactor = Compactor(
                dataclasses.replace(storage, oxia=oxia), config=CompactorConfig(max_offsets_per_run=2)
            )
            claims = CompactorClaims(oxia, f"worker-{uuid.uuid4().hex[:8]}", root=root)
            with counting(oxia, server) as count:
                outcome = run_compaction_task(CompactionTask(topic, partition, 2 * objects), compactor, claims,
                                              budget_s=60)  # fmt: skip
                oxia.close()  # the session ends with the invocation (closed here; in Lambda it expires)
        assert outcome.outcome == "caught_up"
        assert [r.outcome for r in outcome.runs] == ["compacted"] * objects  # the last one reached the tail
        return count

    one, two = invocation(0, 1), invocation(1, 2)

    per_object = (two.reads - one.reads, two.writes - one.writes)
    per_invocation = (one.reads - per_object[0], one.writes - per_object[1])
    # A compacted object: the claim check, compact_once's 16 reads; 7 writes (record, end key, two state
    # changes, delete_range, cursor, record deleted).
    assert per_object == (C.compaction_oxia_reads, C.compaction_oxia_writes) == (17, 7)
    # An invocation reads nothing of its own (it stops at the range that reached the index's tail, without an
    # empty pass); the claim and its release are OxiaStore writes, ...
    assert per_invocation == (C.worker_oxia_reads, 2) == (0, 2)
    # ... and the session the ephemeral claim needs is created and closed: two more WAL appends.
    sessions = 2
    for count in (one, two):
        if count.wal_appends is not None:  # measured on the server (counting() checked the sum)
            assert (count.sessions_created, count.sessions_closed) == (1, 1)
            assert count.wal_appends == count.writes + sessions
    assert per_invocation[1] + sessions == C.worker_oxia_writes == 4
    # the claim check, compact_once 13, a ceiling read of the previous compacted entry, an index scan and a
    # scan of the producer states; the claim and 5 puts of the compaction; its record's and the claim's deletes
    assert one.ops == {
        "get": 1 + 13,
        "get_ceiling": 1,
        "range_scan": 2,
        "put": 1 + 5,
        "delete": 1 + 1,
        "delete_range": 1,
    }


# --- the planner ----------------------------------------------------------------------------------


@PROTOCOLS
def test_a_planner_tick_lists_the_registry_once_and_reads_each_partition(
    server: Server, oxia_store: OxiaStore, root: str, topic: str, protocol: inputs.ProtocolOxia, storage: Storage
) -> None:
    partitions = 3
    writer = new_writer(storage, protocol)
    for partition in range(partitions):
        fill(writer, topic, partition, 1)

    with counting(oxia_store, server) as count:
        plan = plan_compaction(LogCatalog(oxia_store, root=root), min_lag=1, max_delay_ms=0)
    assert (plan.partitions_seen, len(plan.tasks)) == (partitions, partitions)

    assert C.planner_oxia_reads_per_tick == 2  # one scan of the registry, one of the topic records
    assert count.reads == C.planner_oxia_reads_per_tick + partitions * protocol.planner_reads_per_partition
    assert count.writes == 0
    # Per partition: one scan of its meta/ records; a sequential one's high watermark is its sequence's tail.
    # The registry is scanned with its values: each entry names its partition's folder.
    tails = partitions if protocol is inputs.SEQUENTIAL else 0
    assert count.ops == {"range_scan": 2 + partitions} | ({"get_lower": tails} if tails else {})


# --- garbage collection ---------------------------------------------------------------------------


@PROTOCOLS
@pytest.mark.parametrize("retention", [True, False], ids=["retention", "keep-everything"])
def test_a_gc_run_lists_the_registry_once_and_reads_each_partition(
    server: Server, oxia_store: OxiaStore, topic: str, protocol: inputs.ProtocolOxia, retention: bool,
    storage: Storage
) -> None:  # fmt: skip
    """The steady state of a partition GC visits every hour: an old compacted range for retention to remove
    (compacted three days ago), a younger one, WAL entries not compacted yet, and WAL blobs and compacted
    objects past the grace period (GC's clock runs 25 hours ahead) for it to judge."""
    partitions = 3
    # The steady state: a run more than a grace ago created the namespace identity; every blob is judged unread.
    check_namespace(dataclasses.replace(storage, clock=clock_at(-2 * DAY_S)))
    writer = new_writer(storage, protocol)
    old = Compactor(dataclasses.replace(storage, clock=clock_at(-3 * DAY_S)))
    young = Compactor(storage)
    for partition in range(partitions):
        fill(writer, topic, partition, 2)
        assert old.compact_once(topic, partition).outcome == "compacted"  # offsets 1-2
        for i in range(2):
            writer.append(topic, partition, [f"s{i}".encode()])
        assert young.compact_once(topic, partition).outcome == "compacted"  # offsets 3-4
        for i in range(2):
            writer.append(topic, partition, [f"t{i}".encode()])  # offsets 5-6: WAL entries
    policy = RetentionPolicy(max_age_ms=2 * DAY_S * 1000) if retention else RetentionPolicy()
    gc = GarbageCollector(dataclasses.replace(storage, clock=clock_at(25 * 3600)),
                          config=GcConfig(retention=RetentionConfig(policy)))  # fmt: skip

    with counting(oxia_store, server) as count:
        report = gc.collect()
    assert report.errors == []
    assert report.wal_blobs_deleted == 4 * partitions  # those of the compacted offsets 1-4
    assert (report.wal_judged_unread, report.wal_headers_read) == (4 * partitions, 0)
    judged = 1 if retention else 2  # compacted objects judged per partition (retention deleted the old one)
    assert report.compacted_seen == judged * partitions
    assert report.compacted_deleted == 0
    assert report.retention_partitions_truncated == (partitions if retention else 0)

    if retention:
        per_partition = (C.gc_oxia_reads_per_partition, C.gc_oxia_writes_per_partition)
    else:
        per_partition = (C.gc_oxia_reads_per_partition_keeping_everything,
                         C.gc_oxia_writes_per_partition_keeping_everything)  # fmt: skip
    # The namespace identity (a get: the guard, llog.protocol.namespace, and again before the WAL blobs are
    # deleted; none before the compacted objects: none is deleted), the topic records and the producer ids (a
    # scan each) and one scan of the registry (with its values: each entry names its partition's folder).
    assert ("list" not in count.ops, C.gc_oxia_reads_per_run) == (True, 5)
    # + 1 read per compacted object judged (the index entry it should be named by)
    assert count.reads == C.gc_oxia_reads_per_run + partitions * (per_partition[0] + judged)
    assert count.writes == partitions * per_partition[1]


def test_retention_under_a_size_limit_reads_one_more_index_page_per_1024_entries(
    server: Server, oxia_store: OxiaStore, topic: str, storage: Storage
) -> None:
    """A size limit needs the size of everything kept; an age limit reads only up to the first entry it keeps."""
    entries = C.index_page + 1
    writer = new_writer(storage, inputs.SEQUENTIAL)  # one Oxia write an entry: quick to fill
    writer.initialize_partition(topic, 0)
    results = writer.append_shared([SharedAppendGroup(topic, 0, [b"x"])] * entries)  # one blob, many entries
    assert all(r.ok for r in results)
    by_size = Retention(storage, config=RetentionConfig(RetentionPolicy(max_bytes=2**40)))
    by_age = Retention(storage, config=RetentionConfig(RetentionPolicy(max_age_ms=DAY_S * 1000)))

    keys = PartitionKeys(topic, 0, storage.root)  # as GC passes them, from the partition's registry entry
    with counting(oxia_store, server) as count:
        result = by_size.enforce_partition(keys)
    assert result.log_start_after == result.log_start_before  # nothing compacted: nothing to remove
    # control; the index page by page until an empty one; the cursor and meta/compaction (retention's bound)
    pages = math.ceil(entries / C.index_page) + 1
    assert pages == 3
    assert count.ops == {"get": 3, "range_scan": pages}
    assert count.writes == 0

    with counting(oxia_store, server) as count:
        by_age.enforce_partition(keys)
    # control; the first entry, one lookup; a WAL entry first: the cursor and meta/compaction, the bound below which
    # it could be a stale key over a compacted range (docs/RETENTION.md); it is not, so no index page
    assert count.ops == {"get": 3, "get_ceiling": 1}
    assert count.writes == 0
