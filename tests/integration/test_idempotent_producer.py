"""Idempotent producers and conditional appends (llog.protocol.producers, docs/IDEMPOTENCE.md), on both protocols.

A retry of a batch whose answer was lost, or whose writer died at any step,
commits it exactly once; an old epoch is fenced; a gap is refused. Time moves
by an injected wall clock: a claim is taken over once the clock passes its
commit deadline and margin.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, cast

import pytest

from llog.config import WriterConfig
from llog.errors import (
    AppendOutcomeUnknown,
    ConditionalAppendUnsupported,
    OffsetMismatch,
    OutOfOrderSequence,
    UnknownProducer,
    VersionConflict,
)
from llog.format.codec import Record
from llog.format.keys import PartitionKeys, new_object_id
from llog.format.kv.control import AppendProtocol, ControlRecord
from llog.protocol.append import AppendResult, LogWriter, SharedAppendGroup
from llog.protocol.compaction import Compactor
from llog.protocol.faults import (
    PRODUCER_AFTER_CLAIM,
    PRODUCER_AFTER_COMMIT,
    WRITER_AFTER_BLOB_PUT,
    WRITER_AFTER_DEADLINE_CHECK,
    WRITER_AFTER_INDEX_WRITE,
    WRITER_AFTER_RESERVE,
    WRITER_AFTER_SEQUENCE_PUT,
)
from llog.protocol.gc import GarbageCollector
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.producers import CLAIM_MARGIN_MS, REVALIDATE_AFTER_MS, read_state
from llog.protocol.read import LogReader
from llog.store.oxia import OxiaStore
from llog.store.storage import Storage
from server.batching import BatchingProducer, _Pending
from server.serve import LlogServer
from tests.faults import SimulatedCrash, crash_at
from tests.integration.test_http_server import call_json

pytestmark = pytest.mark.oxia

PROTOCOLS = pytest.mark.parametrize("protocol", [AppendProtocol.CAS, AppendProtocol.SEQUENTIAL], ids=["cas", "seq"])
COMMIT_DELAY_MS = 60_000


class Clock:
    """A wall clock the test moves forward."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance_past_claims(self) -> None:
        self.now += (COMMIT_DELAY_MS + CLAIM_MARGIN_MS) / 1000 + 1


@pytest.fixture
def clock(storage: Storage) -> Clock:
    return Clock(storage.clock())


@pytest.fixture
def timed(storage: Storage, clock: Clock) -> Storage:
    return dataclasses.replace(storage, clock=clock)


def writer_for(storage: Storage, protocol: AppendProtocol, **kwargs: object) -> LogWriter:
    config = WriterConfig(append_protocol=protocol, max_commit_delay_ms=COMMIT_DELAY_MS)
    return LogWriter(storage, config=config, **kwargs)  # type: ignore[arg-type]


def produce(
    writer: LogWriter,
    topic: str,
    records: Sequence[Record | bytes],
    producer: tuple[str, int] | None,
    sequence: int | None,
    *,
    partition: int = 0,
    expected_offset: int | None = None,
) -> AppendResult:
    pid, epoch = producer if producer is not None else (None, None)
    group = SharedAppendGroup(topic, partition, records, pid, epoch, sequence, expected_offset)
    (result,) = writer.append_shared([group])
    return result


def values(storage: Storage, topic: str, partition: int = 0) -> list[bytes]:
    return [r.value for r in LogReader(storage).iter_from(topic, partition, 1)]


def new_producer(writer: LogWriter) -> tuple[str, int]:
    issued = writer.producers.issue()
    return issued.producer_id, issued.epoch


@PROTOCOLS
def test_a_retry_after_a_lost_answer_returns_the_original_offsets_and_writes_nothing(
    timed: Storage, topic: str, protocol: AppendProtocol
) -> None:
    writer = writer_for(timed, protocol)
    writer.initialize_partition(topic, 0)
    producer = new_producer(writer)
    first = produce(writer, topic, [b"a", b"b"], producer, 0)
    assert (first.ok, first.start_offset, first.end_offset, first.duplicate) == (True, 1, 2, False)
    retry = produce(writer, topic, [b"a", b"b"], producer, 0)  # the server wrote it, the client never heard
    assert (retry.ok, retry.start_offset, retry.end_offset, retry.duplicate) == (True, 1, 2, True)
    assert produce(writer, topic, [b"c"], producer, 2).start_offset == 3
    assert produce(writer, topic, [b"c"], producer, 2).duplicate
    assert produce(writer, topic, [b"a", b"b"], producer, 0).start_offset == 1  # still remembered
    assert values(timed, topic) == [b"a", b"b", b"c"]


@PROTOCOLS
def test_only_the_last_five_batches_are_remembered(timed: Storage, topic: str, protocol: AppendProtocol) -> None:
    writer = writer_for(timed, protocol)
    writer.initialize_partition(topic, 0)
    producer = new_producer(writer)
    for seq in range(6):
        assert produce(writer, topic, [b"%d" % seq], producer, seq).start_offset == seq + 1
    assert produce(writer, topic, [b"5"], producer, 5).duplicate
    assert produce(writer, topic, [b"1"], producer, 1).duplicate
    old = produce(writer, topic, [b"0"], producer, 0)  # too old to be told apart from a gap
    assert isinstance(old.error, OutOfOrderSequence)
    assert values(timed, topic) == [b"%d" % seq for seq in range(6)]


@PROTOCOLS
def test_a_gap_a_changed_retry_an_unknown_id_and_an_old_epoch_are_refused(
    timed: Storage, topic: str, protocol: AppendProtocol
) -> None:
    writer = writer_for(timed, protocol)
    writer.initialize_partition(topic, 0)
    producer = new_producer(writer)
    produce(writer, topic, [b"a"], producer, 0)
    assert produce(writer, topic, [b"c"], producer, 2).error_type == "OutOfOrderSequence"  # 1 is missing
    assert produce(writer, topic, [b"a", b"x"], producer, 0).error_type == "OutOfOrderSequence"  # not the same batch
    assert produce(writer, topic, [b"a"], (new_object_id(), 0), 0).error_type == "UnknownProducer"
    assert produce(writer, topic, [b"a"], (producer[0], 1), 1).error_type == "UnknownProducer"  # never issued

    bumped = writer.producers.bump(producer[0])
    assert bumped.epoch == 1
    assert produce(writer, topic, [b"b"], (producer[0], 1), 0).start_offset == 2  # a new epoch starts anywhere
    assert produce(writer, topic, [b"z"], producer, 1).error_type == "ProducerFenced"
    writer.initialize_partition(topic, 1)
    assert produce(writer, topic, [b"z"], producer, 1, partition=1).error_type == "ProducerFenced"  # via registry
    assert values(timed, topic) == [b"a", b"b"]
    assert values(timed, topic, 1) == []


@PROTOCOLS
def test_a_bump_fences_the_old_epoch_where_the_new_one_has_not_written_yet(
    timed: Storage, clock: Clock, topic: str, protocol: AppendProtocol
) -> None:
    writer = writer_for(timed, protocol)
    writer.initialize_partition(topic, 0)
    producer = new_producer(writer)
    assert produce(writer, topic, [b"a"], producer, 0).ok
    writer.producers.bump(producer[0])
    clock.now += REVALIDATE_AFTER_MS / 1000 + 0.001  # the partition's state no longer vouches for epoch 0
    assert produce(writer, topic, [b"zombie"], producer, 1).error_type == "ProducerFenced"
    assert values(timed, topic) == [b"a"]


def test_a_producer_expires_when_idle(timed: Storage, clock: Clock, topic: str) -> None:
    writer = writer_for(timed, AppendProtocol.SEQUENTIAL)
    writer.initialize_partition(topic, 0)
    producer = new_producer(writer)
    assert produce(writer, topic, [b"a"], producer, 0).ok
    clock.now += writer.config.producer_expiry_ms / 1000 + 1
    assert produce(writer, topic, [b"b"], producer, 1).error_type == "UnknownProducer"
    with pytest.raises(UnknownProducer):
        writer.producers.bump(producer[0])


def test_idle_producer_ids_and_states_are_deleted_and_active_ones_kept(
    timed: Storage, clock: Clock, topic: str
) -> None:
    """GC deletes idle ids; compaction deletes idle states without a claim. Neither grows with producers gone."""
    writer = writer_for(timed, AppendProtocol.SEQUENTIAL)
    writer.initialize_partition(topic, 0)
    idle, active = new_producer(writer), new_producer(writer)
    assert produce(writer, topic, [b"a"], idle, 0).ok
    clock.now += writer.config.producer_expiry_ms / 1000 / 2 + 1
    assert produce(writer, topic, [b"b"], active, 0).ok  # the active producer touches its id and its state
    clock.now += writer.config.producer_expiry_ms / 1000 / 2 + 1  # the idle one is past its expiry now
    meta = PartitionMetadata(timed.oxia, PartitionKeys(topic, 0, timed.root))
    assert read_state(meta, idle[0]).state is not None

    report = GarbageCollector(timed).collect()
    assert report.producers_expired == 1
    with pytest.raises(UnknownProducer):
        writer.producers.bump(idle[0])
    assert writer.producers.bump(active[0]).epoch == 1

    assert Compactor(timed).compact_once(topic, 0).outcome == "compacted"
    assert read_state(meta, idle[0]).state is None
    assert read_state(meta, active[0]).state is not None
    assert produce(writer, topic, [b"c"], idle, 1).error_type == "UnknownProducer"


@PROTOCOLS
def test_attempts_of_one_batch_racing_from_several_writers_commit_it_once(
    timed: Storage, topic: str, protocol: AppendProtocol
) -> None:
    writers = [writer_for(timed, protocol) for _ in range(4)]
    writers[0].initialize_partition(topic, 0)
    producer = new_producer(writers[0])
    produce(writers[0], topic, [b"a"], producer, 0)
    start = threading.Barrier(len(writers))

    def attempt(writer: LogWriter) -> AppendResult:
        start.wait()
        return produce(writer, topic, [b"b", b"c"], producer, 1)

    with ThreadPoolExecutor(len(writers)) as pool:
        results = list(pool.map(attempt, writers))
    committed = [r for r in results if r.ok]
    assert committed  # the claim's winner commits (the others see its claim or its batch)
    assert {(r.start_offset, r.end_offset) for r in committed} == {(2, 3)}
    assert sum(not r.duplicate for r in committed) == 1
    assert {r.error_type for r in results if not r.ok} <= {"SequenceInFlight"}
    retry = produce(writers[1], topic, [b"b", b"c"], producer, 1)
    assert (retry.start_offset, retry.duplicate) == (2, True)
    assert values(timed, topic) == [b"a", b"b", b"c"]


# (protocol, crash point, whether the batch had committed when the writer died)
CRASHES = [
    (AppendProtocol.CAS, WRITER_AFTER_BLOB_PUT, False),
    (AppendProtocol.CAS, PRODUCER_AFTER_CLAIM, False),
    (AppendProtocol.CAS, WRITER_AFTER_DEADLINE_CHECK, False),
    (AppendProtocol.CAS, WRITER_AFTER_RESERVE, True),
    (AppendProtocol.CAS, WRITER_AFTER_INDEX_WRITE, True),
    (AppendProtocol.CAS, PRODUCER_AFTER_COMMIT, True),
    (AppendProtocol.SEQUENTIAL, WRITER_AFTER_BLOB_PUT, False),
    (AppendProtocol.SEQUENTIAL, PRODUCER_AFTER_CLAIM, False),
    (AppendProtocol.SEQUENTIAL, WRITER_AFTER_DEADLINE_CHECK, False),
    (AppendProtocol.SEQUENTIAL, WRITER_AFTER_SEQUENCE_PUT, True),
    (AppendProtocol.SEQUENTIAL, PRODUCER_AFTER_COMMIT, True),
]


@pytest.mark.parametrize(("protocol", "point", "committed"), CRASHES, ids=[f"{p.value}-{c}" for p, c, _ in CRASHES])
def test_a_retry_after_a_crash_at_any_step_commits_the_batch_exactly_once(
    timed: Storage, clock: Clock, topic: str, protocol: AppendProtocol, point: str, committed: bool
) -> None:
    writer = writer_for(timed, protocol)
    writer.initialize_partition(topic, 0)
    producer = new_producer(writer)
    produce(writer, topic, [b"a"], producer, 0)
    with pytest.raises(SimulatedCrash):
        produce(writer_for(timed, protocol, fault_hook=crash_at(point)), topic, [b"b", b"c"], producer, 1)
    claimed = point != WRITER_AFTER_BLOB_PUT
    if claimed:
        # Until the dead attempt's deadline has passed nobody can tell whether it commits: retry later.
        assert produce(writer, topic, [b"b", b"c"], producer, 1).error_type == "SequenceInFlight"
        clock.advance_past_claims()
    retry = produce(writer, topic, [b"b", b"c"], producer, 1)
    assert (retry.ok, retry.start_offset, retry.end_offset) == (True, 2, 3)
    assert retry.duplicate is committed
    assert produce(writer, topic, [b"d"], producer, 3).start_offset == 4
    assert values(timed, topic) == [b"a", b"b", b"c", b"d"]


@PROTOCOLS
@pytest.mark.parametrize("compacted_while", ["young", "expired"])
def test_compaction_between_a_claim_and_its_takeover_causes_no_duplicate(
    timed: Storage, clock: Clock, topic: str, protocol: AppendProtocol, compacted_while: str
) -> None:
    writer = writer_for(timed, protocol)
    writer.initialize_partition(topic, 0)
    producer = new_producer(writer)
    produce(writer, topic, [b"a"], producer, 0)
    with pytest.raises(SimulatedCrash):
        produce(writer_for(timed, protocol, fault_hook=crash_at(PRODUCER_AFTER_COMMIT)), topic, [b"b"], producer, 1)
    produce(writer, topic, [b"x"], None, None)  # another producer's record after the tagged one
    meta = PartitionMetadata(timed.oxia, PartitionKeys(topic, 0, timed.root))
    compactor = Compactor(timed)
    if compacted_while == "young":
        # The claim may still need its tag: compaction stops before the claim's search offset.
        result = compactor.compact_once(topic, 0)
        assert (result.outcome, result.end_offset) == ("compacted", 1)
        assert compactor.compact_once(topic, 0).outcome == "nothing_to_do"
        clock.advance_past_claims()
    else:
        clock.advance_past_claims()
        # The compactor takes the expired claim over itself (the tag is found), then compacts everything.
        result = compactor.compact_once(topic, 0)
        assert (result.outcome, result.start_offset, result.end_offset) == ("compacted", 1, 3)
        state = read_state(meta, producer[0]).state
        assert state is not None
        assert state.in_flight is None
        assert [(b.first_sequence, b.start_offset) for b in state.batches] == [(0, 1), (1, 2)]
    retry = produce(writer, topic, [b"b"], producer, 1)
    assert (retry.start_offset, retry.duplicate) == (2, True)
    assert values(timed, topic) == [b"a", b"b", b"x"]


def test_conditional_appends_on_a_cas_partition(timed: Storage, topic: str) -> None:
    writer = writer_for(timed, AppendProtocol.CAS)
    writer.initialize_partition(topic, 0)
    assert produce(writer, topic, [b"a", b"b"], None, None, expected_offset=1).start_offset == 1
    mismatch = produce(writer, topic, [b"c"], None, None, expected_offset=1)
    assert isinstance(mismatch.error, OffsetMismatch)
    assert mismatch.error.next_offset == 3
    assert produce(writer, topic, [b"c"], None, None, expected_offset=3).start_offset == 3
    # With a producer: a retry of an appended conditional batch answers with its offsets.
    producer = new_producer(writer)
    assert produce(writer, topic, [b"d"], producer, 0, expected_offset=4).start_offset == 4
    retry = produce(writer, topic, [b"d"], producer, 0, expected_offset=4)
    assert (retry.start_offset, retry.duplicate) == (4, True)
    refused = produce(writer, topic, [b"e"], producer, 1, expected_offset=4)
    assert isinstance(refused.error, OffsetMismatch)
    assert produce(writer, topic, [b"e"], producer, 1, expected_offset=5).start_offset == 5  # the claim was released
    assert values(timed, topic) == [b"a", b"b", b"c", b"d", b"e"]


def test_conditional_appends_are_refused_on_a_sequential_partition_before_anything_is_written(
    timed: Storage, topic: str
) -> None:
    writer = writer_for(timed, AppendProtocol.SEQUENTIAL)
    writer.initialize_partition(topic, 0)
    wal_before = [o.key for o in timed.blobs.list(timed.bucket, f"{timed.root}/wal-shared/")]
    refused = produce(writer, topic, [b"a"], None, None, expected_offset=1)
    assert isinstance(refused.error, ConditionalAppendUnsupported)
    assert [o.key for o in timed.blobs.list(timed.bucket, f"{timed.root}/wal-shared/")] == wal_before
    assert values(timed, topic) == []
    # Beside other groups (llog serve's batcher merges requests): only the refused one fails.
    plain, conditional = writer.append_shared(
        [SharedAppendGroup(topic, 0, [b"b"]), SharedAppendGroup(topic, 0, [b"c"], expected_offset=2)]
    )
    assert (plain.ok, plain.start_offset) == (True, 1)
    assert isinstance(conditional.error, ConditionalAppendUnsupported)
    assert values(timed, topic) == [b"b"]


def test_a_producer_state_sits_where_no_index_or_meta_scan_sees_it(timed: Storage, topic: str) -> None:
    writer = writer_for(timed, AppendProtocol.CAS)
    writer.initialize_partition(topic, 0)
    producer = new_producer(writer)
    produce(writer, topic, [b"a"], producer, 0)
    meta = PartitionMetadata(timed.oxia, PartitionKeys(topic, 0, timed.root))
    assert [b.end_offset for b in meta.scan_index(1)] == [1]
    assert meta.snapshot().control is not None
    keys = meta.keys
    found = timed.oxia.list_keys(keys.producer_states_prefix, keys.producer_states_scan_end,
                                 partition_key=keys.partition_key)  # fmt: skip
    assert found == [keys.producer_state(producer[0])]


# --- llog serve -------------------------------------------------------------------------------------------


def test_the_batcher_keeps_an_idempotent_group_apart_and_in_its_place(timed: Storage, topic: str) -> None:
    """Calls flushed together: plain records of other calls merge per partition, an idempotent batch stays whole,
    and plain records that arrived after it commit after it."""
    writer = writer_for(timed, AppendProtocol.SEQUENTIAL)
    writer.initialize_partition(topic, 0)
    pid, epoch = new_producer(writer)
    batcher = BatchingProducer(writer)
    calls = [
        [SharedAppendGroup(topic, 0, [b"a1", b"a2"])],
        [SharedAppendGroup(topic, 0, [b"b1"], pid, epoch, 0)],
        [SharedAppendGroup(topic, 0, [b"c1"])],
        [SharedAppendGroup(topic, 0, [b"d1"])],
    ]
    futures: list[Future[list[AppendResult]]] = [Future() for _ in calls]
    batch = [_Pending(groups, 1, 0.0, future) for groups, future in zip(calls, futures, strict=True)]
    batcher._write(batch)
    results = [future.result()[0] for future in futures]
    assert [(r.start_offset, r.end_offset, r.duplicate) for r in results] == [
        (1, 2, False), (3, 3, False), (4, 4, False), (5, 5, False)
    ]  # fmt: skip
    (retry,) = batcher.append_shared(calls[1])
    assert (retry.start_offset, retry.duplicate) == (3, True)
    assert values(timed, topic) == [b"a1", b"a2", b"b1", b"c1", b"d1"]


def test_idempotent_produce_through_llog_serve(live_server: LlogServer, topic: str) -> None:
    status, issued = call_json(live_server, "POST", "/producers", "{}")
    assert status == 200, issued
    body = {
        "producer_id": issued["producer_id"],
        "producer_epoch": issued["producer_epoch"],
        "topic_partitions": [{"topic": topic, "partition": 0, "records": ["a", "b"], "sequence": 0}],
    }
    answers = [call_json(live_server, "POST", "/produce", json.dumps(body)) for _ in range(3)]
    assert [status for status, _ in answers] == [200, 200, 200]
    results = [doc["results"][0] for _, doc in answers]
    assert [(r["start_offset"], r["end_offset"], r.get("duplicate", False)) for r in results] == [
        (1, 2, False), (1, 2, True), (1, 2, True)
    ]  # fmt: skip
    consume = {"topic_partitions": [{"topic": topic, "partition": 0, "fetch_offset": 1}]}
    status, consumed = call_json(live_server, "POST", "/consume", json.dumps(consume))
    assert [r["value"] for r in consumed["results"][0]["records"]] == ["a", "b"]


def test_a_batch_a_writer_commits_after_a_fence_and_unfence_it_did_not_see_is_found_by_the_takeover(
    timed: Storage, clock: Clock, topic: str
) -> None:
    """The claim's search offset is a lower bound read from fresh state, never from the writer's cached generation:
    that generation's tail is the fence marker, one past where the batch lands in the generation opened since."""
    other = writer_for(timed, AppendProtocol.SEQUENTIAL)
    other.initialize_partition(topic, 0)
    producer = new_producer(other)
    dying = writer_for(timed, AppendProtocol.SEQUENTIAL, fault_hook=crash_at(PRODUCER_AFTER_COMMIT))
    assert produce(dying, topic, [b"a"], None, None).start_offset == 1  # it caches generation 1
    other.fence(topic, 0)
    other.unfence(topic, 0)
    with pytest.raises(SimulatedCrash):
        produce(dying, topic, [b"b"], producer, 0)
    meta = PartitionMetadata(timed.oxia, PartitionKeys(topic, 0, timed.root))
    state = read_state(meta, producer[0]).state
    assert state is not None
    assert state.in_flight is not None
    assert state.in_flight.search_from_offset == 2
    # Compaction leaves the tag the claim needs alone.
    assert Compactor(timed).compact_once(topic, 0).end_offset == 1
    clock.advance_past_claims()
    retry = produce(other, topic, [b"b"], producer, 0)
    assert (retry.ok, retry.start_offset, retry.end_offset, retry.duplicate) == (True, 2, 2, True)
    assert values(timed, topic) == [b"a", b"b"]


@PROTOCOLS
def test_a_commit_sent_by_a_writer_paused_past_its_claims_takeover_fails_or_is_void(
    timed: Storage, clock: Clock, topic: str, protocol: AppendProtocol
) -> None:
    """A process paused (SIGSTOP) between its deadline check and its commit request, for longer than every timeout:
    the takeover, which records "not committed", first makes that request fail (CAS: meta/control's version moved)
    or void (sequential: the generation is rolled), so the retry that follows commits the batch exactly once."""
    other = writer_for(timed, protocol)
    other.initialize_partition(topic, 0)
    producer = new_producer(other)
    assert produce(other, topic, [b"a"], None, None).start_offset == 1
    commit_delay_ms = 1_000  # room for the steps before the pause on a loaded machine
    paused = False

    def pause_past_the_takeover(point: str) -> None:
        nonlocal paused
        if point != WRITER_AFTER_DEADLINE_CHECK or paused:
            return
        paused = True
        time.sleep(commit_delay_ms / 1000 + 0.1)  # the writer's own deadline passes while it is stopped
        clock.advance_past_claims()
        Compactor(timed).compact_once(topic, 0)  # meets the expired claim: takes it over ("not committed")
        state = read_state(PartitionMetadata(timed.oxia, PartitionKeys(topic, 0, timed.root)), producer[0]).state
        assert state is not None
        assert state.in_flight is None
        assert state.batches == ()

    config = WriterConfig(append_protocol=protocol, max_commit_delay_ms=commit_delay_ms)
    late = LogWriter(timed, config=config, fault_hook=pause_past_the_takeover)
    resumed = produce(late, topic, [b"b"], producer, 0)
    assert paused
    assert resumed.error_type == "CommitDeadlineExceeded"
    # The partition stays open for everyone: a writer that still holds the rolled generation re-targets.
    assert produce(other, topic, [b"c"], None, None).start_offset == 2
    retry = produce(other, topic, [b"b"], producer, 0)
    assert (retry.ok, retry.start_offset, retry.end_offset, retry.duplicate) == (True, 3, 3, False)
    assert produce(other, topic, [b"b"], producer, 0).duplicate
    assert values(timed, topic) == [b"a", b"c", b"b"]


class LosesTheReservationsAnswer:
    """An Oxia store whose first reservation (a CAS of ``meta/control`` that records a pending append) applies but
    comes back as the adapter's retry of a lost answer does: an ambiguous ``VersionConflict``; ``meanwhile`` runs
    between the two, as others would while the answer is lost."""

    def __init__(self, store: OxiaStore, control_key: str, meanwhile: Callable[[], None]) -> None:
        self._store = store
        self._control_key = control_key
        self._meanwhile = meanwhile
        self.lost = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def put(self, key: str, value: bytes, **kwargs: Any) -> int:
        version = self._store.put(key, value, **kwargs)
        if not self.lost and key == self._control_key and ControlRecord.decode(value).pending is not None:
            self.lost = True
            self._meanwhile()
            raise VersionConflict("put: the record's version changed", ambiguous=True)
        return version


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_a_reservation_whose_answer_was_lost_and_whose_entry_was_compacted_is_not_reserved_again(
    timed: Storage, topic: str, idempotent: bool
) -> None:
    """While the answer to a reservation that applied is lost, another writer finishes it and compaction rewrites its
    index entry: the append can no longer prove it landed. It must not reserve again (the batch would be in the log
    twice): it is AppendOutcomeUnknown. An idempotent batch never gets there: compaction stops before its claim's
    search offset while the claim is live, so the entry stays and proves the reservation landed."""
    other = writer_for(timed, AppendProtocol.CAS)
    other.initialize_partition(topic, 0)
    assert produce(other, topic, [b"a"], None, None).start_offset == 1
    producer = new_producer(other) if idempotent else None

    def others_finish_and_compact() -> None:
        assert produce(other, topic, [b"x"], None, None).start_offset == 3  # finishes ours (offset 2) first
        Compactor(timed).compact_once(topic, 0)

    keys = PartitionKeys(topic, 0, timed.root)
    losing = LosesTheReservationsAnswer(timed.oxia, keys.control, others_finish_and_compact)
    lossy = writer_for(dataclasses.replace(timed, oxia=cast(OxiaStore, losing)), AppendProtocol.CAS)
    result = produce(lossy, topic, [b"b"], producer, None if producer is None else 0)
    assert losing.lost
    assert values(timed, topic) == [b"a", b"b", b"x"]
    if idempotent:
        assert (result.ok, result.start_offset, result.duplicate) == (True, 2, False)
    else:
        assert isinstance(result.error, AppendOutcomeUnknown)


@PROTOCOLS
def test_another_batch_under_a_remembered_sequence_range_is_refused_not_answered_with_its_offsets(
    timed: Storage, topic: str, protocol: AppendProtocol
) -> None:
    """A duplicate is the same records, not only the same sequences: the state remembers each batch's digest."""
    writer = writer_for(timed, protocol)
    writer.initialize_partition(topic, 0)
    producer = new_producer(writer)
    keyed = [Record(b"a", key=b"k", headers=(("h", b"1"),)), Record(b"b", timestamp_ms=5)]
    assert produce(writer, topic, keyed, producer, 0).start_offset == 1
    for other in (
        [Record(b"a", key=b"k", headers=(("h", b"1"),)), Record(b"c", timestamp_ms=5)],  # another value
        [Record(b"a", key=b"K", headers=(("h", b"1"),)), Record(b"b", timestamp_ms=5)],  # another key
        [Record(b"a", key=b"k"), Record(b"b", timestamp_ms=5)],  # no header
        [Record(b"a", key=b"k", headers=(("h", b"1"),)), Record(b"b")],  # no timestamp
        [b"a", b"b"],
    ):
        refused = produce(writer, topic, other, producer, 0)
        assert refused.error_type == "OutOfOrderSequence", other
        assert "other records" in str(refused.error)
    retry = produce(writer, topic, keyed, producer, 0)
    assert (retry.start_offset, retry.duplicate) == (1, True)
    assert values(timed, topic) == [b"a", b"b"]


@PROTOCOLS
def test_a_taken_over_claim_remembers_its_batchs_digest(
    timed: Storage, clock: Clock, topic: str, protocol: AppendProtocol
) -> None:
    writer = writer_for(timed, protocol)
    writer.initialize_partition(topic, 0)
    producer = new_producer(writer)
    with pytest.raises(SimulatedCrash):
        produce(writer_for(timed, protocol, fault_hook=crash_at(PRODUCER_AFTER_COMMIT)), topic, [b"a"], producer, 0)
    clock.advance_past_claims()
    assert produce(writer, topic, [b"x"], producer, 0).error_type == "OutOfOrderSequence"  # found committed: "a"
    retry = produce(writer, topic, [b"a"], producer, 0)
    assert (retry.start_offset, retry.duplicate) == (1, True)
    assert values(timed, topic) == [b"a"]


def test_a_producer_state_written_without_digests_still_answers_duplicates_by_sequences(
    timed: Storage, topic: str
) -> None:
    """A state stored before batches had digests (FORMAT.md): its batches match any retry of the same range."""
    writer = writer_for(timed, AppendProtocol.CAS)
    writer.initialize_partition(topic, 0)
    producer = new_producer(writer)
    produce(writer, topic, [b"a"], producer, 0)
    meta = PartitionMetadata(timed.oxia, PartitionKeys(topic, 0, timed.root))
    key = meta.keys.producer_state(producer[0])
    stored = timed.oxia.get(key, partition_key=meta.keys.partition_key)
    assert stored is not None
    document = json.loads(stored.value)
    assert len(document.pop("digests")) == len(document["batches"]) == 1
    timed.oxia.put(key, json.dumps(document).encode(), partition_key=meta.keys.partition_key)
    assert read_state(meta, producer[0]).state.batches[0].digest is None  # type: ignore[union-attr]
    old = produce(writer, topic, [b"x"], producer, 0)
    assert (old.start_offset, old.duplicate) == (1, True)
    assert produce(writer, topic, [b"b"], producer, 1).start_offset == 2
    written = timed.oxia.get(key, partition_key=meta.keys.partition_key)
    assert written is not None
    assert json.loads(written.value)["digests"][0] is None  # the old batch keeps none; the new one has its own
    assert read_state(meta, producer[0]).state.batches[-1].digest is not None  # type: ignore[union-attr]
