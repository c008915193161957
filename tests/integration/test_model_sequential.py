"""The model-based reliability harness (tests/integration/test_model.py) on the sequential append protocol.

Two machines reuse every rule and invariant of ``LogMachine``:

* ``SequentialMachine``: partitions created sequential (docs/SEQUENTIAL_APPEND.md); writer crashes at the
  sequential path's points (after the blob PUT, after the sequential put) and fences that die after placing
  their marker, next to everything the CAS machine does (shared appends, compaction and its crashes,
  fence and unfence, garbage collection with retention, clock jumps, reads);
* ``MigratingMachine``: CAS partitions that a rule migrates, one way, at any point: CAS and sequential
  appends, crashes and recoveries on both sides of the switch.

The harness reads the state through ``PartitionIndex``: the live high watermark (a sequential partition's
``meta/control`` does not move on appends) and the valid entries of every generation. A fence is in force
from its first marker on, so a partition whose open generation ends in a marker counts as fenced even before
the fence (or whoever finishes it) seals the generation in ``meta/control``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import rule

from llog.config import WriterConfig
from llog.format.keys import PartitionKeys
from llog.format.kv.control import AppendProtocol, LogState
from llog.format.kv.index import IndexedBatch
from llog.protocol import faults
from llog.protocol.append import LogWriter
from llog.protocol.faults import FaultHook
from llog.protocol.index import PartitionIndex
from llog.protocol.metadata import PartitionMetadata, VersionedControl
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from tests.faults import SimulatedCrash, crash_at
from tests.integration.test_model import (
    COUNTS,
    PARTITIONS,
    WRITER_CRASH_POINTS,
    WRITERS,
    DrawnGroup,
    LogMachine,
    groups_strategy,
    replay_soak_2026_11_23,
    run_machine,
)

pytestmark = pytest.mark.oxia

SEQUENTIAL_CRASH_POINTS = (faults.WRITER_AFTER_BLOB_PUT, faults.WRITER_AFTER_SEQUENCE_PUT)


class LiveView(PartitionMetadata):
    """What the harness checks against, for partitions of either protocol.

    ``control()`` reports the live next offset (``high watermark + 1``) and, in a sequential partition,
    FENCED as soon as the open generation ends in a fence marker; ``scan_index`` yields the valid entries of
    every generation.
    """

    def _index(self) -> PartitionIndex:
        return PartitionIndex.load(PartitionMetadata(self.oxia, self.keys))

    def control(self) -> VersionedControl:
        current = super().control()
        index = PartitionIndex(PartitionMetadata(self.oxia, self.keys), current.record)
        record = replace(current.record, sequence_counter=index.high_watermark() + 1)
        if record.sequential and record.current_generation.end is None:
            tail = index.meta.sequence_tail(record.current_generation.number)
            if tail is not None and tail.void:
                record = replace(record, log_state=LogState.FENCED)
        return VersionedControl(record, current.version_id)

    def scan_index(self, from_offset: int, *, limit: int | None = None) -> list[IndexedBatch]:
        return self._index().scan(from_offset, limit=limit)


class SequentialMachine(LogMachine):
    protocol = AppendProtocol.SEQUENTIAL

    def _writer(self, hook: FaultHook | None = None) -> LogWriter:
        config = WriterConfig(append_protocol=self.protocol)
        return LogWriter(self.storage, config=config, fault_hook=hook)

    def _meta(self, partition: int) -> PartitionMetadata:
        return LiveView(self.oxia, PartitionKeys(self.topic, partition, self.root))

    @rule(point=st.sampled_from(SEQUENTIAL_CRASH_POINTS), groups=groups_strategy)
    def crash_during_sequential_append(self, point: str, groups: list[DrawnGroup]) -> None:
        LogMachine.crash_during_append(self, point, groups)

    @rule(partition=st.sampled_from(PARTITIONS))
    def crash_during_fence(self, partition: int) -> None:
        """A fence that dies after its marker: the partition is fenced from the marker on."""
        try:
            self._writer(crash_at(faults.WRITER_AFTER_FENCE_MARKER)).fence(self.topic, partition)
        except SimulatedCrash:
            COUNTS.crashes += 1
        self.model.fenced.add(partition)


class MigratingMachine(SequentialMachine):
    protocol = AppendProtocol.CAS

    @rule(point=st.sampled_from(WRITER_CRASH_POINTS + SEQUENTIAL_CRASH_POINTS), groups=groups_strategy)
    def crash_during_sequential_append(self, point: str, groups: list[DrawnGroup]) -> None:
        LogMachine.crash_during_append(self, point, groups)

    @rule(partition=st.sampled_from(PARTITIONS), writer=st.integers(0, WRITERS - 1))
    def migrate(self, partition: int, writer: int) -> None:
        migrated = self.writers[writer].migrate_to_sequential(self.topic, partition)
        assert migrated.sequential


def test_the_sequential_protocol_keeps_every_acknowledged_record(oxia_store: OxiaStore, blob_store: BlobStore) -> None:
    run_machine(SequentialMachine, oxia_store, blob_store)


def test_migrating_partitions_keep_every_acknowledged_record(oxia_store: OxiaStore, blob_store: BlobStore) -> None:
    run_machine(MigratingMachine, oxia_store, blob_store)


def test_soak_2026_11_23_retention_next_to_an_unfinished_compaction(
    oxia_store: OxiaStore, blob_store: BlobStore
) -> None:
    replay_soak_2026_11_23(SequentialMachine(oxia_store, blob_store))


def test_soak_2026_11_23_with_a_migration_after_the_compactor_died(
    oxia_store: OxiaStore, blob_store: BlobStore
) -> None:
    """The compacted range stays in generation 0 (CAS keys); the later append goes to generation 1."""
    machine = MigratingMachine(oxia_store, blob_store)
    replay_soak_2026_11_23(machine, between=lambda: machine.migrate(partition=0, writer=1))


def test_the_machines_have_the_harness_rules_and_their_own() -> None:
    """Needs no Oxia: the subclasses keep every rule and invariant of the harness and add theirs."""
    base = {r.function.__name__ for r in LogMachine.setup_state().rules}
    for machine, extra in (
        (SequentialMachine, {"crash_during_sequential_append", "crash_during_fence"}),
        (MigratingMachine, {"crash_during_sequential_append", "crash_during_fence", "migrate"}),
    ):
        state = machine.setup_state()
        assert {r.function.__name__ for r in state.rules} == base | extra
        assert len(state.invariants) == len(LogMachine.setup_state().invariants)
