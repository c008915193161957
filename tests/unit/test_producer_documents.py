"""The idempotent producer's documents: round trips, strict parsing, and no change without a producer."""

from __future__ import annotations

import pytest

from llog.errors import CorruptMetadata, InvalidArgument
from llog.format.codec import Record, records_digest
from llog.format.keys import PartitionKeys, new_object_id, validate_producer_id
from llog.format.kv.control import ControlRecord, LogState, PendingAppend
from llog.format.kv.document import DataRef
from llog.format.kv.index import EntryType, IndexEntry, ProducerTag
from llog.format.kv.producers import InFlightClaim, ProducerBatch, ProducerKeys, ProducerRecord, ProducerState
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
    control = ControlRecord(LogState.OPEN, 4, pending)
    assert ControlRecord.decode(control.encode()) == control
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


def test_digests_are_stored_beside_the_batches_and_a_state_without_them_reads_as_before() -> None:
    claim = InFlightClaim("c", 13, 14, 100, 200, 7, digest=0xFFFFFFFF)
    state = ProducerState(2, (ProducerBatch(8, 9, 2, 3), ProducerBatch(10, 12, 4, 6, digest=5)), claim, 50, 60)
    raw = state.encode()
    assert ProducerState.decode(raw) == state
    assert b'"digests":[null,5]' in raw
    assert b"[10,12,4,6]" in raw  # a version from before digests reads the batches as it did
    old = b'{"epoch": 2, "batches": [[10, 12, 4, 6]], "in_flight": {"claim_id": "c", "first": 13, "last": 14,' \
          b' "claimed_at_ms": 100, "commit_by_ms": 200, "search_from_offset": 7}, "validated_at_ms": 0,' \
          b' "touched_at_ms": 0}'  # fmt: skip
    decoded = ProducerState.decode(old)
    assert decoded.batches[0].digest is None
    assert decoded.in_flight is not None
    assert decoded.in_flight.digest is None
    assert b"digest" not in ProducerState(2, (ProducerBatch(10, 12, 4, 6),), None).encode()
    for digests in (b"[1, 2]", b'"x"', b"[-1]"):
        with pytest.raises(CorruptMetadata):
            ProducerState.decode(b'{"epoch": 1, "batches": [[1, 1, 1, 1]], "digests": ' + digests +
                                 b', "validated_at_ms": 0, "touched_at_ms": 0}')  # fmt: skip


def test_a_records_digest_covers_what_the_producer_sent_and_not_how_it_is_held() -> None:
    assert records_digest([b"a", b"b"]) == records_digest([Record(b"a"), Record(b"b")])
    assert records_digest([b"a", Record(b"b", key=b"k")]) == records_digest([Record(b"a"), Record(b"b", key=b"k")])
    distinct: list[list[Record | bytes]] = [
        [b"ab"], [b"a", b"b"], [b"b", b"a"], [Record(b"a", key=b"")], [Record(b"a", key=b"k")],
        [Record(b"a", timestamp_ms=0)], [Record(b"a", headers=(("h", b""),))], [Record(b"", key=b"a")],
    ]  # fmt: skip
    assert len({records_digest(records) for records in distinct}) == len(distinct)


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
