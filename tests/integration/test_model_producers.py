"""The model-based reliability harness (tests/integration/test_model.py) with an idempotent producer.

``ProducerMachine`` (CAS partitions) and ``SequentialProducerMachine`` keep every rule and invariant of their
harness and add a producer that numbers its batches per partition (docs/IDEMPOTENCE.md): it sends the next
batch, dies at any step of an idempotent append (the protocol's crash points and the producer's own), and
retries a batch whose answer it never got, with a different writer, until it gets one. Next to everything
else (other writers, compaction and its crashes, fences, GC and retention, clock jumps), the harness checks
that a retried batch is in the log exactly once, at the offsets the retry answers, and that a batch refused
as fenced never appears.
"""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from llog.errors import LogFenced, SequenceInFlight
from llog.format.codec import Record
from llog.protocol import faults
from llog.protocol.append import AppendResult, SharedAppendGroup
from llog.protocol.producers import CLAIM_MARGIN_MS
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from tests.faults import SimulatedCrash, crash_at
from tests.integration.test_model import (
    COUNTS,
    PARTITIONS,
    WRITER_CRASH_POINTS,
    WRITERS,
    DrawnRecord,
    LogMachine,
    records_strategy,
    run_machine,
)
from tests.integration.test_model_sequential import SEQUENTIAL_CRASH_POINTS, SequentialMachine

pytestmark = pytest.mark.oxia

PRODUCER_CRASH_POINTS = (faults.PRODUCER_AFTER_CLAIM, faults.PRODUCER_AFTER_COMMIT)


class ProducerMachine(LogMachine):
    crash_points: tuple[str, ...] = WRITER_CRASH_POINTS + PRODUCER_CRASH_POINTS

    def __init__(self, oxia: OxiaStore, blobs: BlobStore) -> None:
        super().__init__(oxia, blobs)
        issued = self.writers[0].producers.issue()
        self.producer = (issued.producer_id, issued.epoch)
        self.next_sequence = dict.fromkeys(PARTITIONS, 0)
        # A batch sent whose answer was lost (its writer died): the producer retries it before anything else.
        self.unanswered: dict[int, list[Record]] = {}

    def _group(self, partition: int, records: list[Record]) -> SharedAppendGroup:
        pid, epoch = self.producer
        return SharedAppendGroup(self.topic, partition, records, pid, epoch, self.next_sequence[partition])

    def _answered(self, partition: int, records: list[Record], result: AppendResult) -> None:
        """The model after the producer got an answer for its batch."""
        if isinstance(result.error, SequenceInFlight):
            assert partition in self.unanswered, "only a retry can meet an earlier attempt's claim"
            return  # the dead attempt's deadline has not passed: retry later
        self.unanswered.pop(partition, None)
        if isinstance(result.error, LogFenced):
            assert partition in self.model.fenced, f"an open partition refused a batch: {result}"
            for record in records:  # nothing of it committed, and nothing ever will
                self.model.maybe.pop(record.value, None)
                self.model.never.add(record.value)
            return
        assert result.ok, f"idempotent append to partition {partition} failed: {result.error!r}"
        assert partition not in self.model.fenced or result.duplicate, "a fenced partition accepted a batch"
        assert result.start_offset is not None
        assert result.end_offset is not None
        assert result.end_offset - result.start_offset + 1 == len(records)
        acked = self.model.acked[partition]
        for offset, record in enumerate(records, start=result.start_offset):
            # A crashed attempt's record, if that attempt committed it, carries the crashed append's time.
            known = self.model.maybe.pop(record.value, None)
            if offset < self.model.log_start[partition]:
                continue  # a duplicate answer for offsets retention has removed since
            if offset in acked:  # read back already: the dead attempt had committed it
                assert result.duplicate, f"offset {offset} of partition {partition} acknowledged twice"
                assert acked[offset].value == record.value
            else:
                assert all(e.value != record.value for e in acked.values()), f"{record.value!r} is in the log twice"
                acked[offset] = known[1] if result.duplicate and known is not None else self._expected(record)
        self.next_sequence[partition] += len(records)

    @precondition(lambda self: len(self.unanswered) < len(PARTITIONS))
    @rule(writer=st.integers(0, WRITERS - 1), partition=st.sampled_from(PARTITIONS), drawn=records_strategy)
    def produce_idempotently(self, writer: int, partition: int, drawn: list[DrawnRecord]) -> None:
        if partition in self.unanswered:
            return  # one batch in flight per partition: the producer retries that one first
        records = self._records(drawn)
        (result,) = self.writers[writer].append_shared([self._group(partition, records)])
        COUNTS.appends += 1
        COUNTS.records += len(records)
        self._answered(partition, records, result)

    @rule(partition=st.sampled_from(PARTITIONS), data=st.data(), drawn=records_strategy)
    def crash_during_idempotent_append(self, partition: int, data: st.DataObject, drawn: list[DrawnRecord]) -> None:
        if partition in self.unanswered:
            return
        point = data.draw(st.sampled_from(self.crash_points))
        records = self._records(drawn)
        for record in records:  # committed or not, once at most
            self.model.maybe[record.value] = (partition, self._expected(record))
        try:
            (result,) = self._writer(crash_at(point)).append_shared([self._group(partition, records)])
        except SimulatedCrash:
            COUNTS.crashes += 1
            self.unanswered[partition] = records
            return
        self.unanswered[partition] = records  # no crash (a fenced partition refused it before): an answer
        self._answered(partition, records, result)

    @precondition(lambda self: bool(self.unanswered))
    @rule(writer=st.integers(0, WRITERS - 1), data=st.data(), after_the_deadline=st.booleans())
    def retry_unanswered(self, writer: int, data: st.DataObject, after_the_deadline: bool) -> None:
        partition = data.draw(st.sampled_from(sorted(self.unanswered)))
        records = self.unanswered[partition]
        if after_the_deadline:  # the dead attempt's claim can be taken over now
            self.now += (self.writers[writer].config.max_commit_delay_ms + CLAIM_MARGIN_MS) / 1000 + 1
        (result,) = self.writers[writer].append_shared([self._group(partition, records)])
        self._answered(partition, records, result)


class SequentialProducerMachine(ProducerMachine, SequentialMachine):
    crash_points = SEQUENTIAL_CRASH_POINTS + PRODUCER_CRASH_POINTS


def test_an_idempotent_producer_writes_each_batch_once_on_cas_partitions(
    oxia_store: OxiaStore, blob_store: BlobStore
) -> None:
    run_machine(ProducerMachine, oxia_store, blob_store)


def test_an_idempotent_producer_writes_each_batch_once_on_sequential_partitions(
    oxia_store: OxiaStore, blob_store: BlobStore
) -> None:
    run_machine(SequentialProducerMachine, oxia_store, blob_store)
