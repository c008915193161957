"""Model-based test of the whole protocol on a real Oxia server and moto S3 (docs/RELIABILITY.md).

A Hypothesis state machine interleaves appends from two writers to three
partitions (single and shared multi-partition appends), reads, compaction
steps, crashes at every named crash point of the writer and the compactor
(the crashed component's remaining steps never run; a different writer or
compactor recovers), fence and unfence, garbage collection and retention,
with a clock that jumps forward. After every step it checks the stored state
against a model of what was acknowledged:

* every acknowledged record reads back at its offset with its exact value,
  key, headers and timestamp, until retention moves the log start past it;
* offsets are unique and contiguous from the log start to the high watermark,
  every one of them covered by exactly one index entry (or the pending append),
  and no two entries overlap (except the sources of an unfinished compaction
  under its COMPACTED end key);
* the compaction cursor never passes the next offset, the log start never
  passes the cursor and never moves back; a fenced partition accepts no append;
* nothing is readable that was never acknowledged or left pending by a crash,
  and an append rejected as fenced or crashed before its reservation never
  appears;
* garbage collection never deletes an object that an index entry at or above
  the log start, a pending append or an unfinished compaction that will write
  or publish it references, and retention never removes a range (or deletes
  the object) of a compaction whose ``meta/compaction`` record still exists;
* at the end of each run, ``llog verify`` finds no problem in any partition.

``make test`` runs a bounded number of examples; ``make soak`` raises them with
``LLOG_MODEL_EXAMPLES`` and ``LLOG_MODEL_STEPS``. A failing example prints a
``@reproduce_failure`` blob; keep it as a regression test below the machine.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from llog.config import GcConfig, RetentionConfig, RetentionPolicy
from llog.errors import LogFenced
from llog.format.codec import Record
from llog.format.keys import PartitionKeys, S3Location
from llog.format.kv.compaction import CompactionState
from llog.format.kv.control import LogState
from llog.format.kv.index import EntryType, IndexedBatch
from llog.protocol import faults
from llog.protocol.append import LogWriter, SharedAppendGroup
from llog.protocol.compaction import Compactor
from llog.protocol.faults import FaultHook
from llog.protocol.gc import GarbageCollector
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.namespace import check_namespace
from llog.protocol.read import LogReader, LogRecord
from llog.protocol.verify import Verifier
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from tests.conftest import BUCKET
from tests.faults import SimulatedCrash, crash_at
from tests.protocols import CAS

pytestmark = pytest.mark.oxia

EXAMPLES = int(os.environ.get("LLOG_MODEL_EXAMPLES", "8"))
STEPS = int(os.environ.get("LLOG_MODEL_STEPS", "30"))
PARTITIONS = (0, 1, 2)
WRITERS = 2
GRACE_MS = 60 * 60 * 1000
WRITER_CRASH_POINTS = (faults.WRITER_AFTER_BLOB_PUT, faults.WRITER_AFTER_RESERVE, faults.WRITER_AFTER_INDEX_WRITE)
COMPACTOR_CRASH_POINTS = (
    faults.COMPACTOR_AFTER_BLOB_PUT,
    faults.COMPACTOR_AFTER_RECORD,
    faults.COMPACTOR_AFTER_END_KEY,
    faults.COMPACTOR_AFTER_MANIFEST,
    faults.COMPACTOR_AFTER_DELETE,
    faults.COMPACTOR_AFTER_CURSOR,
)


@dataclass(frozen=True)
class Expected:
    """A record as the model knows it; values are unique, so a value names its record."""

    value: bytes
    key: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


@dataclass
class Model:
    acked: dict[int, dict[int, Expected]] = field(default_factory=lambda: {p: {} for p in PARTITIONS})
    # Crashed after the reservation may have committed: readable later or never, but only once.
    maybe: dict[bytes, tuple[int, Expected]] = field(default_factory=dict)
    # Rejected (fenced) or crashed before any reservation: must never be readable.
    never: set[bytes] = field(default_factory=set)
    fenced: set[int] = field(default_factory=set)
    log_start: dict[int, int] = field(default_factory=lambda: dict.fromkeys(PARTITIONS, 1))


@dataclass
class Counts:
    """What a run did, for the soak report."""

    steps: int = 0
    appends: int = 0
    records: int = 0
    crashes: int = 0
    compactions: int = 0
    gc_runs: int = 0
    gc_judged_unread: int = 0  # WAL blobs judged from the references alone
    gc_headers_read: int = 0  # WAL blobs judged by their headers (written before the namespace's identity)
    reads: int = 0
    partitions_verified: int = 0  # by the final ``llog verify`` of each run, which found no problem


COUNTS = Counts()

DrawnRecord = tuple[bytes, bytes | None, list[tuple[str, bytes]], int | None]
DrawnGroup = tuple[int, list[DrawnRecord]]

records_strategy = st.lists(
    st.tuples(
        st.binary(max_size=64),
        st.none() | st.binary(max_size=16),
        st.lists(st.tuples(st.sampled_from(["h", "trace", "é"]), st.binary(max_size=8)), max_size=2),
        st.none() | st.integers(min_value=0, max_value=2**40),
    ),
    min_size=1,
    max_size=5,
)
groups_strategy = st.lists(
    st.tuples(st.sampled_from(PARTITIONS), records_strategy), min_size=1, max_size=3, unique_by=lambda g: g[0]
)


class LogMachine(RuleBasedStateMachine):
    def __init__(self, oxia: OxiaStore, blobs: BlobStore) -> None:
        super().__init__()
        self.oxia = oxia
        self.blobs = blobs
        # A root of its own: the collector and retention see only this example's objects.
        self.root = f"model-{uuid.uuid4().hex[:12]}"
        self.storage = Storage(oxia, blobs, BUCKET, self.root, clock=self._clock)
        self.topic = "t"
        self.now = time.time()
        self.serial = 0
        self.model = Model()
        self.writers = [self._writer() for _ in range(WRITERS)]
        self.reader = LogReader(self.storage)

    def _clock(self) -> float:
        return self.now

    def _writer(self, hook: FaultHook | None = None) -> LogWriter:
        return LogWriter(self.storage, config=CAS, fault_hook=hook)

    def _compactor(self, hook: FaultHook | None = None) -> Compactor:
        return Compactor(self.storage, fault_hook=hook)

    def _meta(self, partition: int) -> PartitionMetadata:
        return PartitionMetadata(self.oxia, PartitionKeys(self.topic, partition, self.root))

    def _records(self, drawn: list[DrawnRecord]) -> list[Record]:
        records = []
        for value, key, headers, timestamp in drawn:
            self.serial += 1
            # A unique prefix makes every value name its record.
            records.append(Record(b"%d:" % self.serial + value, key, tuple(headers), timestamp))
        return records

    def _expected(self, record: Record) -> Expected:
        timestamp = int(self.now * 1000) if record.timestamp_ms is None else record.timestamp_ms
        return Expected(record.value, record.key, tuple(record.headers), timestamp)

    # --- rules -----------------------------------------------------------------

    @initialize(namespace_first=st.booleans())
    def create_partitions(self, namespace_first: bool = False) -> None:
        # The namespace's identity more than a grace before the blobs: the collector judges every blob from the
        # references alone. Else its first run creates it ahead of them: judged by their headers.
        if namespace_first:  # a grace before the real clock the blobs are named by
            check_namespace(dataclasses.replace(self.storage, clock=lambda: time.time() - 2 * GRACE_MS / 1000))
        for partition in PARTITIONS:
            assert self.writers[0].initialize_partition(self.topic, partition)

    @rule(writer=st.integers(0, WRITERS - 1), groups=groups_strategy)
    def append(self, writer: int, groups: list[DrawnGroup]) -> None:
        batches = [(p, self._records(drawn)) for p, drawn in groups]
        results = self.writers[writer].append_shared([SharedAppendGroup(self.topic, p, recs) for p, recs in batches])
        COUNTS.appends += 1
        for (partition, records), result in zip(batches, results, strict=True):
            COUNTS.records += len(records)
            if partition in self.model.fenced:
                assert isinstance(result.error, LogFenced), f"a fenced partition accepted an append: {result}"
                self.model.never.update(r.value for r in records)
                continue
            assert result.ok, f"append to open partition {partition} failed: {result.error!r}"
            assert result.start_offset is not None
            assert result.end_offset is not None
            assert result.end_offset - result.start_offset + 1 == len(records)
            acked = self.model.acked[partition]
            for offset, record in enumerate(records, start=result.start_offset):
                assert offset not in acked, f"offset {offset} of partition {partition} acknowledged twice"
                acked[offset] = self._expected(record)

    @rule(point=st.sampled_from(WRITER_CRASH_POINTS), groups=groups_strategy)
    def crash_during_append(self, point: str, groups: list[DrawnGroup]) -> None:
        batches = [(p, self._records(drawn)) for p, drawn in groups]
        doomed = self._writer(crash_at(point))
        try:
            doomed.append_shared([SharedAppendGroup(self.topic, p, recs) for p, recs in batches])
        except SimulatedCrash:
            COUNTS.crashes += 1
        for partition, records in batches:
            fate_unknown = point != faults.WRITER_AFTER_BLOB_PUT and partition not in self.model.fenced
            for record in records:
                if fate_unknown:
                    self.model.maybe[record.value] = (partition, self._expected(record))
                else:
                    self.model.never.add(record.value)

    @rule(partition=st.sampled_from(PARTITIONS))
    def compact(self, partition: int) -> None:
        self._compactor().compact_once(self.topic, partition)
        COUNTS.compactions += 1

    @rule(partition=st.sampled_from(PARTITIONS), point=st.sampled_from(COMPACTOR_CRASH_POINTS))
    def crash_during_compaction(self, partition: int, point: str) -> None:
        try:
            self._compactor(crash_at(point)).compact_once(self.topic, partition)
        except SimulatedCrash:
            COUNTS.crashes += 1

    @rule(partition=st.sampled_from(PARTITIONS), writer=st.integers(0, WRITERS - 1))
    def fence(self, partition: int, writer: int) -> None:
        assert self.writers[writer].fence(self.topic, partition).log_state is LogState.FENCED
        self.model.fenced.add(partition)

    @precondition(lambda self: bool(self.model.fenced))
    @rule(data=st.data())
    def unfence(self, data: st.DataObject) -> None:
        partition = data.draw(st.sampled_from(sorted(self.model.fenced)))
        assert self.writers[0].unfence(self.topic, partition).log_state is LogState.OPEN
        self.model.fenced.discard(partition)

    @rule(ms=st.integers(1, 2 * GRACE_MS))
    def advance_clock(self, ms: int) -> None:
        self.now += ms / 1000

    @rule(max_bytes=st.none() | st.integers(1, 4096))
    def collect_garbage(self, max_bytes: int | None) -> None:
        retention = RetentionConfig(topics={self.topic: RetentionPolicy(max_bytes=max_bytes)})
        # The collector's clock is ahead by more than the grace: every unreferenced object looks old.
        ahead = self.now + 2 * GRACE_MS / 1000
        config = GcConfig(grace_ms=GRACE_MS, retention=retention)
        collector = GarbageCollector(dataclasses.replace(self.storage, clock=lambda: ahead), config=config)
        report = collector.collect()
        COUNTS.gc_runs += 1
        COUNTS.gc_judged_unread += report.wal_judged_unread
        COUNTS.gc_headers_read += report.wal_headers_read
        assert not report.errors, report.errors
        for partition in PARTITIONS:
            start = self._meta(partition).control().record.log_start_offset
            assert start >= self.model.log_start[partition], "the log start moved back"
            self.model.log_start[partition] = start
            for offset in [o for o in self.model.acked[partition] if o < start]:
                del self.model.acked[partition][offset]
        self._check_references()

    @rule(partition=st.sampled_from(PARTITIONS))
    def read_everything(self, partition: int) -> None:
        self._check_reads(partition)

    @rule(partition=st.sampled_from(PARTITIONS), data=st.data())
    def read_one(self, partition: int, data: st.DataObject) -> None:
        acked = self.model.acked[partition]
        if not acked:
            return
        offset = data.draw(st.sampled_from(sorted(acked)))
        record = self.reader.read_offset(self.topic, partition, offset)
        COUNTS.reads += 1
        assert (record.offset, self._as_expected(record)) == (offset, acked[offset])

    # --- checks ----------------------------------------------------------------

    @staticmethod
    def _as_expected(record: LogRecord) -> Expected:
        return Expected(record.value, record.key, tuple(record.headers), record.timestamp_ms)

    def _check_reads(self, partition: int) -> None:
        control = self._meta(partition).control().record
        start, high = control.log_start_offset, control.sequence_counter - 1
        acked = self.model.acked[partition]
        assert not acked or max(acked) <= high, "an acknowledged offset is above the high watermark"
        records = list(self.reader.iter_from(self.topic, partition, start)) if high >= start else []
        COUNTS.reads += 1
        assert [r.offset for r in records] == list(range(start, high + 1))
        for record in records:
            got = self._as_expected(record)
            assert got.value not in self.model.never, f"never-acknowledged record read at {record.offset}"
            if record.offset in acked:
                assert got == acked[record.offset], f"offset {record.offset} of partition {partition} changed"
                continue
            # Not acknowledged: it must be a crashed append's record, seen here for the first time.
            assert got.value in self.model.maybe, f"invented record at offset {record.offset}: {got.value!r}"
            owner, expected = self.model.maybe.pop(got.value)
            assert (owner, got) == (partition, expected)
            acked[record.offset] = got

    def _referenced_locations(self, partition: int) -> list[str]:
        """The objects a reader, a compactor or the export can still be led to.

        * every index entry from the log start (entries below it are unreadable leftovers);
        * the pending append, which any writer or compactor materializes;
        * the object of ``meta/compaction`` while finishing the record writes or publishes it: in
          ``WRITING_COMPACTED_INDEX`` if its range starts at the cursor (resuming writes the end key; a
          record that does not is dropped), and in ``DELETING_OLD`` (resuming republishes the manifest).
          In ``UPDATING_CURSOR`` finishing only moves the cursor and deletes the record: the object is
          reached through its end key, counted above while the range is at or above the log start.
        """
        meta = self._meta(partition)
        control = meta.control().record
        uris = [b.entry.ref.data_key for b in meta.scan_index(control.log_start_offset)]
        if control.pending is not None:
            uris.append(control.pending.ref.data_key)
        compaction = meta.compaction()
        if compaction is not None and (
            compaction.state is CompactionState.DELETING_OLD
            or (
                compaction.state is CompactionState.WRITING_COMPACTED_INDEX
                and compaction.start_offset == meta.cursor().offset
            )
        ):
            uris.append(compaction.data_key)
        return uris

    def _check_references(self) -> None:
        for partition in PARTITIONS:
            for uri in self._referenced_locations(partition):
                self._head(uri)  # raises if the collector deleted a referenced object
            # docs/GC.md and docs/RETENTION.md: neither GC nor retention touches a running compaction's
            # range or object (in any state), until a compactor has finished or dropped the record.
            meta = self._meta(partition)
            compaction = meta.compaction()
            if compaction is not None:
                start = meta.control().record.log_start_offset
                assert start <= compaction.start_offset, f"the log start {start} passed a running {compaction}"
                self._head(compaction.data_key)

    def _head(self, uri: str) -> None:
        self.blobs.head(S3Location.parse(uri) if uri.startswith("s3://") else S3Location(BUCKET, uri))

    @invariant()
    def index_is_consistent(self) -> None:
        COUNTS.steps += 1
        for partition in PARTITIONS:
            meta = self._meta(partition)
            control = meta.control().record
            cursor = meta.cursor().offset
            assert control.log_start_offset <= cursor <= control.sequence_counter, (
                f"log start {control.log_start_offset}, cursor {cursor}, next offset {control.sequence_counter}"
            )
            assert (control.log_state is LogState.FENCED) == (partition in self.model.fenced)
            entries = _live_entries(meta.scan_index(1), meta, control.log_start_offset)
            ranges = [(b.start_offset, b.end_offset) for b in entries]
            pending = control.pending
            if pending is not None and (pending.start_offset, pending.end_offset) not in ranges:
                ranges.append((pending.start_offset, pending.end_offset))
            ranges.sort()
            # Retention truncates at range boundaries, so the first live range starts at the log start.
            expected_next = control.log_start_offset
            for start, end in ranges:
                assert start == expected_next, (
                    f"partition {partition}: range {start}..{end} after offset {expected_next - 1} "
                    + ("leaves a gap" if start > expected_next else "overlaps")
                )
                expected_next = end + 1
            assert expected_next == control.sequence_counter, (
                f"partition {partition}: the index ends at {expected_next - 1}, "
                f"the high watermark is {control.sequence_counter - 1}"
            )

    def teardown(self) -> None:
        # Whatever was left pending must be readable after recovery, like everything acknowledged.
        for partition in PARTITIONS:
            self._check_reads(partition)
        # Whatever state the run left (crashed compactions, pending appends, fences, truncations), verification
        # finds no damage in it (docs/RECOVERY.md, "Verify a partition").
        report = Verifier(self.storage, grace_ms=GRACE_MS).verify()
        assert report.problems == [], report.problems
        COUNTS.partitions_verified += len(report.partitions)


def _live_entries(entries: list[IndexedBatch], meta: PartitionMetadata, log_start: int) -> list[IndexedBatch]:
    """Entries that must not overlap: an unfinished compaction's sources under its end key are allowed."""
    compaction = meta.compaction()
    by_end = {b.end_offset: b for b in entries}
    if compaction is not None:
        end = by_end.get(compaction.end_offset)
        if end is not None and end.entry.type is EntryType.COMPACTED:
            entries = [
                b
                for b in entries
                if b is end or not (compaction.start_offset <= b.start_offset and b.end_offset < compaction.end_offset)
            ]
    return [b for b in entries if b.end_offset >= log_start]


def run_machine(machine: type[LogMachine], oxia: OxiaStore, blobs: BlobStore) -> None:
    """Run ``machine`` on these stores with the bounded (or ``make soak``) settings; report the counts."""

    class OnTheseStores(machine):  # type: ignore[valid-type,misc]
        def __init__(self) -> None:
            super().__init__(oxia, blobs)

    run_state_machine_as_test(
        OnTheseStores,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            print_blob=True,
        ),
    )
    report = os.environ.get("LLOG_MODEL_REPORT")  # make soak's summary: the counts of every machine so far
    if report:
        Path(report).write_text(json.dumps(asdict(COUNTS)))


def test_the_protocol_keeps_every_acknowledged_record(oxia_store: OxiaStore, blob_store: BlobStore) -> None:
    run_machine(LogMachine, oxia_store, blob_store)


def replay_soak_2026_11_23(machine: LogMachine, between: Callable[[], None] | None = None) -> None:
    """The first real-Oxia soak's failure, shrunk to five steps (tests/integration/test_retention_races.py).

    A compactor dies at ``compactor.after_cursor`` (``meta/compaction`` stays in ``UPDATING_CURSOR``), a
    later append makes its range not the last entry, and GC applies a size limit of one byte. ``between``
    runs after the crash, before the later append (a migration, say).
    """
    machine.create_partitions()
    machine.index_is_consistent()
    machine.append(writer=0, groups=[(0, [(b"a", None, [], None), (b"b", None, [], None)])])
    machine.index_is_consistent()
    machine.crash_during_compaction(partition=0, point=faults.COMPACTOR_AFTER_CURSOR)
    machine.index_is_consistent()
    if between is not None:
        between()
        machine.index_is_consistent()
    machine.append(writer=0, groups=[(0, [(b"c", None, [], None)])])
    machine.index_is_consistent()
    machine.collect_garbage(max_bytes=1)
    machine.index_is_consistent()
    machine.compact(partition=0)  # finishes the record
    machine.index_is_consistent()
    machine.collect_garbage(max_bytes=1)  # now the range goes
    machine.index_is_consistent()
    assert machine.model.log_start[0] == 3
    machine.teardown()


def test_soak_2026_11_23_retention_next_to_an_unfinished_compaction(
    oxia_store: OxiaStore, blob_store: BlobStore
) -> None:
    replay_soak_2026_11_23(LogMachine(oxia_store, blob_store))
