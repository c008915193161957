"""The idempotent producer's documents: round trips, strict parsing, and no change without a producer."""

from __future__ import annotations

import pytest

from llog.errors import CorruptMetadata, InvalidArgument
from llog.format.documents import (
    DataRef,
    EntryType,
    IndexEntry,
    InFlightClaim,
    PendingAppend,
    ProducerBatch,
    ProducerRecord,
    ProducerState,
    ProducerTag,
)
from llog.format.keys import PartitionKeys, ProducerKeys, new_object_id, validate_producer_id
from llog.protocol.producers import MAX_REMEMBERED_BATCHES, IdempotentBatch, remembered

REF = DataRef("s3://b/llog/wal-shared/x", byte_offset=0, byte_length=10)
TAG = ProducerTag(new_object_id(), 2, 10, 12)


def test_entries_without_a_producer_encode_as_before() -> None:
    entry = IndexEntry(EntryType.WAL, 3, REF, 5, "a")
    assert b"producer" not in entry.encode()
    assert b"producer" not in PendingAppend("a", 1, 3, 3, REF, 5).index_entry().encode()
    assert "producer" not in PendingAppend("a", 1, 3, 3, REF, 5).to_json()


def test_tags_round_trip_through_entries_and_pending() -> None:
    entry = IndexEntry(EntryType.WAL, 3, REF, 5, "a", producer=TAG)
    assert IndexEntry.decode(entry.encode()) == entry
    pending = PendingAppend("a", 1, 3, 3, REF, 5, producer=TAG)
    assert PendingAppend.from_json(pending.to_json()) == pending
    assert pending.index_entry().producer == TAG


def test_producer_state_round_trips_and_parses_strictly() -> None:
    claim = InFlightClaim("c", 13, 14, 100, 200, 7)
    state = ProducerState(2, (ProducerBatch(10, 12, 4, 6),), claim, 50, 60)
    assert ProducerState.decode(state.encode()) == state
    assert ProducerRecord.decode(ProducerRecord(1, 2, 3).encode()) == ProducerRecord(1, 2, 3)
    for raw in (b'{"epoch": 1}', b'{"epoch": 1, "batches": [[1, 2]], "validated_at_ms": 0, "touched_at_ms": 0}',
                b'{"epoch": -1, "batches": [], "validated_at_ms": 0, "touched_at_ms": 0}'):  # fmt: skip
        with pytest.raises(CorruptMetadata):
            ProducerState.decode(raw)
    with pytest.raises(CorruptMetadata):
        IndexEntry.decode(b'{"type": "WAL", "msg_count": 1, "data_key": "k", "encoding": "e", "created_at_ms": 0,'
                          b' "producer": {"id": "p", "epoch": 0, "first": 5, "last": 4}}')  # fmt: skip


def test_only_the_last_batches_are_remembered() -> None:
    batches: tuple[ProducerBatch, ...] = ()
    for seq in range(MAX_REMEMBERED_BATCHES + 2):
        batches = remembered(batches, ProducerBatch(seq, seq, seq + 1, seq + 1))
    assert [b.first_sequence for b in batches] == list(range(2, MAX_REMEMBERED_BATCHES + 2))


def test_producer_ids_and_batches_are_validated() -> None:
    pid = new_object_id()
    assert validate_producer_id(pid) == pid
    keys = PartitionKeys("orders", 3, "r")
    assert keys.producer_state(pid) == f"r/orders/partitions/3/producers/{pid}"
    assert keys.producer_states_prefix < keys.producer_state(pid) < keys.producer_states_scan_end
    assert ProducerKeys("r").producer(pid) == f"r/__catalog/producers/{pid}"
    for bad in ("", "../x", pid.upper(), pid + "/x", 7):
        with pytest.raises(InvalidArgument):
            validate_producer_id(bad)
    for epoch, seq in ((-1, 0), (0, -1), (True, 0), (2**31, 0)):
        with pytest.raises(InvalidArgument):
            IdempotentBatch(pid, epoch, seq, 1)
    assert IdempotentBatch(pid, 0, 5, 3).tag == ProducerTag(pid, 0, 5, 7)
