"""Stored documents, byte for byte: every kind of document in ``llog.format.kv`` encodes to the bytes committed
here and decodes back to an equal value, so a change of the codecs cannot change what is stored or stop stored
data from being read (docs/PROTOCOL.md, "Oxia records"; docs/FORMAT.md). The bytes were captured from the
hand-written ``json`` codecs these replaced."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from llog.format.codec import ENCODING
from llog.format.kv.access_keys import AccessKeyRecord, IteratorKeyRecord
from llog.format.kv.compaction import CompactedRange, CompactionCursor, CompactionRecord, CompactionState
from llog.format.kv.control import AppendProtocol, ControlRecord, Generation, LogState, PendingAppend
from llog.format.kv.document import DataRef, TimeSpan
from llog.format.kv.groups import GroupDocument
from llog.format.kv.index import EntryType, FenceMarker, IndexEntry, ProducerTag, decode_sequence_value
from llog.format.kv.namespace import NamespaceRecord
from llog.format.kv.producers import InFlightClaim, ProducerBatch, ProducerRecord, ProducerState
from llog.protocol.groups import GroupState, Member

P = "0190c8a2-7b3e-7c41-9a52-3f6d1e2b4c5d"
NOW = 1_760_000_000_000
SHARED = DataRef(
    "s3://bucket/llog/wal-shared/0190c8a2-7b3e-7c41-9a52-000000000001",
    ENCODING,
    177,
    4,
    TimeSpan(1_760_000_000_000, 1_760_000_000_450),
    b"\x00\xffab",
)
PLAIN = DataRef("s3://bucket/llog/orders/partitions/0/data/compacted/9a")
SLICE = DataRef("s3://bucket/llog/wal-shared/x", ENCODING, 0, 104, TimeSpan(-5, 7))
TAG = ProducerTag(P, 2, 10, 12)
PENDING = PendingAppend("a-1", 10, 11, 2, SHARED, NOW, EntryType.WAL, TAG)

DOCUMENTS: dict[str, tuple[Any, Callable[[bytes], Any]]] = {
    "control_empty": (ControlRecord(), ControlRecord.decode),
    "control_cas_pending": (ControlRecord(LogState.OPEN, 12, PENDING, 3), ControlRecord.decode),
    "control_cas_pending_plain": (
        ControlRecord(LogState.OPEN, 12, PendingAppend("a-2", 10, 12, 3, PLAIN, NOW)),
        ControlRecord.decode,
    ),
    "control_sequential": (
        ControlRecord(
            LogState.OPEN,
            40,
            None,
            5,
            AppendProtocol.SEQUENTIAL,
            (Generation(0, 0, 10), Generation(1, 10, 20, True), Generation(2, 20)),
        ),
        ControlRecord.decode,
    ),
    "control_deleted": (
        ControlRecord(LogState.FENCED, 40, None, 1, AppendProtocol.SEQUENTIAL, (Generation(1, 0, 39),), True),
        ControlRecord.decode,
    ),
    "index_wal_shared": (IndexEntry(EntryType.WAL, 2, SHARED, NOW, "a-1", producer=TAG), IndexEntry.decode),
    "index_wal_slice": (IndexEntry(EntryType.WAL, 3, SLICE, NOW, "a-3"), IndexEntry.decode),
    "index_compacted": (
        IndexEntry(
            EntryType.COMPACTED,
            100,
            DataRef(PLAIN.data_key, times=TimeSpan(1, 9)),
            NOW,
            data_bytes=4096,
            log_max_timestamp_ms=9,
        ),
        IndexEntry.decode,
    ),
    "index_compacted_plain": (IndexEntry(EntryType.COMPACTED, 100, PLAIN, NOW), IndexEntry.decode),
    "index_lost": (IndexEntry.lost(7, NOW, 12), IndexEntry.decode),
    "sequence_entry": (IndexEntry(EntryType.WAL, 3, SLICE, NOW, "a-3"), decode_sequence_value),
    "fence_marker": (FenceMarker("f-1", NOW), decode_sequence_value),
    "fence_marker_roll": (FenceMarker("f-2", NOW, roll=True), decode_sequence_value),
    "compaction_cursor": (CompactionCursor(101), CompactionCursor.decode),
    "compaction_minimal": (
        CompactionRecord("c-1", CompactionState.WRITING_COMPACTED_INDEX, 1, 100, 100, PLAIN.data_key, NOW),
        CompactionRecord.decode,
    ),
    "compaction_full": (
        CompactionRecord(
            "c-2",
            CompactionState.DELETING_OLD,
            1,
            100,
            100,
            PLAIN.data_key,
            NOW,
            ENCODING,
            91,
            4096,
            TimeSpan(-3, 9),
            9,
        ),
        CompactionRecord.decode,
    ),
    "manifest": (CompactedRange("orders", 2, 11, 20, PLAIN.data_key, "c-2", NOW), CompactedRange.decode),
    "manifest_times": (
        CompactedRange("orders", 2, 11, 20, PLAIN.data_key, "c-2", NOW, ENCODING, TimeSpan(1, 2)),
        CompactedRange.decode,
    ),
    "producer_state_fresh": (ProducerState(0), ProducerState.decode),
    "producer_state_old": (
        ProducerState(2, (ProducerBatch(10, 12, 4, 6),), InFlightClaim("c", 13, 14, 100, 200, 7), 50, 60),
        ProducerState.decode,
    ),
    "producer_state_digests": (
        ProducerState(
            2,
            (ProducerBatch(8, 9, 2, 3), ProducerBatch(10, 12, 4, 6, 5)),
            InFlightClaim("c", 13, 14, 100, 200, 7, 0xFFFFFFFF),
            50,
            60,
        ),
        ProducerState.decode,
    ),
    "producer_record": (ProducerRecord(3, NOW, NOW + 5), ProducerRecord.decode),
    "namespace": (NamespaceRecord(P, NOW), NamespaceRecord.decode),
    "access_key": (
        AccessKeyRecord("ingest", b"\x01\xffsealed", ("orders-*", "audit"), True, False, True, NOW),
        AccessKeyRecord.decode,
    ),
    "iterator_key": (IteratorKeyRecord(b"\x00" * 4, NOW), IteratorKeyRecord.decode),
}

GOLDEN: dict[str, bytes] = {
    "control_empty": b'{"log_state":"OPEN","pending":null,"sequence_counter":1}',
    "control_cas_pending": (
        b'{"log_start_offset":3,"log_state":"OPEN","pending":{"append_id":"a-1","byte_length":4,"byte_offs'
        b'et":177,"created_at_ms":1760000000000,"data_key":"s3://bucket/llog/wal-shared/0190c8a2-7b3e-7c41'
        b'-9a52-000000000001","encoding":"bytes-batch-v1","end_offset":11,"entry_type":"WAL","inline":"AP9'
        b'hYg==","max_timestamp_ms":1760000000450,"min_timestamp_ms":1760000000000,"msg_count":2,"producer'
        b'":{"epoch":2,"first":10,"id":"0190c8a2-7b3e-7c41-9a52-3f6d1e2b4c5d","last":12},"start_offset":10'
        b'},"sequence_counter":12}'
    ),
    "control_cas_pending_plain": (
        b'{"log_state":"OPEN","pending":{"append_id":"a-2","byte_length":null,"byte_offset":null,"created_'
        b'at_ms":1760000000000,"data_key":"s3://bucket/llog/orders/partitions/0/data/compacted/9a","encodi'
        b'ng":"bytes-batch-v1","end_offset":12,"entry_type":"WAL","msg_count":3,"start_offset":10},"sequen'
        b'ce_counter":12}'
    ),
    "control_sequential": (
        b'{"append_protocol":"sequential","generations":[{"base":0,"end":10,"generation":0},{"base":10,"en'
        b'd":20,"generation":1,"rolled":true},{"base":20,"end":null,"generation":2}],"log_start_offset":5,'
        b'"log_state":"OPEN","pending":null,"sequence_counter":40}'
    ),
    "control_deleted": (
        b'{"append_protocol":"sequential","generations":[{"base":0,"end":39,"generation":1}],"log_state":"'
        b'FENCED","pending":null,"sequence_counter":40,"topic_deleted":true}'
    ),
    "index_wal_shared": (
        b'{"append_id":"a-1","byte_length":4,"byte_offset":177,"created_at_ms":1760000000000,"data_key":"s'
        b'3://bucket/llog/wal-shared/0190c8a2-7b3e-7c41-9a52-000000000001","encoding":"bytes-batch-v1","in'
        b'line":"AP9hYg==","max_timestamp_ms":1760000000450,"min_timestamp_ms":1760000000000,"msg_count":2'
        b',"producer":{"epoch":2,"first":10,"id":"0190c8a2-7b3e-7c41-9a52-3f6d1e2b4c5d","last":12},"type":'
        b'"WAL"}'
    ),
    "index_wal_slice": (
        b'{"append_id":"a-3","byte_length":104,"byte_offset":0,"created_at_ms":1760000000000,"data_key":"s'
        b'3://bucket/llog/wal-shared/x","encoding":"bytes-batch-v1","max_timestamp_ms":7,"min_timestamp_ms'
        b'":-5,"msg_count":3,"type":"WAL"}'
    ),
    "index_compacted": (
        b'{"created_at_ms":1760000000000,"data_bytes":4096,"data_key":"s3://bucket/llog/orders/partitions/'
        b'0/data/compacted/9a","encoding":"bytes-batch-v1","log_max_timestamp_ms":9,"max_timestamp_ms":9,"'
        b'min_timestamp_ms":1,"msg_count":100,"type":"COMPACTED"}'
    ),
    "index_compacted_plain": (
        b'{"created_at_ms":1760000000000,"data_key":"s3://bucket/llog/orders/partitions/0/data/compacted/9'
        b'a","encoding":"bytes-batch-v1","msg_count":100,"type":"COMPACTED"}'
    ),
    "index_lost": b'{"created_at_ms":1760000000000,"log_max_timestamp_ms":12,"msg_count":7,"type":"LOST"}',
    "sequence_entry": (
        b'{"append_id":"a-3","byte_length":104,"byte_offset":0,"created_at_ms":1760000000000,"data_key":"s'
        b'3://bucket/llog/wal-shared/x","encoding":"bytes-batch-v1","max_timestamp_ms":7,"min_timestamp_ms'
        b'":-5,"msg_count":3,"type":"WAL"}'
    ),
    "fence_marker": b'{"created_at_ms":1760000000000,"fence_id":"f-1","type":"FENCE"}',
    "fence_marker_roll": b'{"created_at_ms":1760000000000,"fence_id":"f-2","roll":true,"type":"FENCE"}',
    "compaction_cursor": b'{"offset":101}',
    "compaction_minimal": (
        b'{"compaction_id":"c-1","created_at_ms":1760000000000,"data_key":"s3://bucket/llog/orders/partiti'
        b'ons/0/data/compacted/9a","encoding":"bytes-batch-v1","end_offset":100,"msg_count":100,"start_off'
        b'set":1,"state":"WRITING_COMPACTED_INDEX"}'
    ),
    "compaction_full": (
        b'{"compaction_id":"c-2","created_at_ms":1760000000000,"data_bytes":4096,"data_key":"s3://bucket/l'
        b'log/orders/partitions/0/data/compacted/9a","encoding":"bytes-batch-v1","end_offset":100,"last_so'
        b'urce_start_offset":91,"log_max_timestamp_ms":9,"max_timestamp_ms":9,"min_timestamp_ms":-3,"msg_c'
        b'ount":100,"start_offset":1,"state":"DELETING_OLD"}'
    ),
    "manifest": (
        b'{"compaction_id":"c-2","created_at_ms":1760000000000,"data_key":"s3://bucket/llog/orders/partiti'
        b'ons/0/data/compacted/9a","encoding":"bytes-batch-v1","end_offset":20,"format":"llog-compacted-ra'
        b'nge-v1","partition":2,"record_count":10,"start_offset":11,"topic":"orders"}'
    ),
    "manifest_times": (
        b'{"compaction_id":"c-2","created_at_ms":1760000000000,"data_key":"s3://bucket/llog/orders/partiti'
        b'ons/0/data/compacted/9a","encoding":"bytes-batch-v1","end_offset":20,"format":"llog-compacted-ra'
        b'nge-v1","max_timestamp_ms":2,"min_timestamp_ms":1,"partition":2,"record_count":10,"start_offset"'
        b':11,"topic":"orders"}'
    ),
    "producer_state_fresh": b'{"batches":[],"epoch":0,"in_flight":null,"touched_at_ms":0,"validated_at_ms":0}',
    "producer_state_old": (
        b'{"batches":[[10,12,4,6]],"epoch":2,"in_flight":{"claim_id":"c","claimed_at_ms":100,"commit_by_ms'
        b'":200,"first":13,"last":14,"search_from_offset":7},"touched_at_ms":60,"validated_at_ms":50}'
    ),
    "producer_state_digests": (
        b'{"batches":[[8,9,2,3],[10,12,4,6]],"digests":[null,5],"epoch":2,"in_flight":{"claim_id":"c","cla'
        b'imed_at_ms":100,"commit_by_ms":200,"digest":4294967295,"first":13,"last":14,"search_from_offset"'
        b':7},"touched_at_ms":60,"validated_at_ms":50}'
    ),
    "producer_record": b'{"created_at_ms":1760000000000,"epoch":3,"touched_at_ms":1760000000005}',
    "namespace": b'{"created_at_ms":1760000000000,"namespace_id":"0190c8a2-7b3e-7c41-9a52-3f6d1e2b4c5d"}',
    "access_key": (
        b'{"admin":true,"created_at_ms":1760000000000,"name":"ingest","read":true,"sealed_secret":"Af9zZWFsZWQ=",'
        b'"streams":["orders-*","audit"],"write":false}'
    ),
    "iterator_key": b'{"created_at_ms":1760000000000,"sealed_key":"AAAAAA=="}',
}

# Documents as older versions wrote them (fields absent, former names): they read as these values.
LEGACY: list[tuple[bytes, Callable[[bytes], Any], Any]] = [
    (b'{"log_state":"OPEN","sequence_counter":5}', ControlRecord.decode, ControlRecord(sequence_counter=5)),
    (
        b'{"append_protocol":"seed","log_state":"OPEN","pending":null,"sequence_counter":5}',
        ControlRecord.decode,
        ControlRecord(sequence_counter=5),
    ),
    (
        b'{"log_state":"OPEN","pending":{"append_id":"a","byte_length":null,"byte_offset":null,"created_at_ms":1,'
        b'"data_key":"s3://b/k","encoding":"bytes-batch-v1","end_offset":2,"msg_count":2,"start_offset":1},'
        b'"sequence_counter":3}',
        ControlRecord.decode,
        ControlRecord(LogState.OPEN, 3, PendingAppend("a", 1, 2, 2, DataRef("s3://b/k"), 1)),
    ),
    (
        b'{"append_id":"a","byte_length":null,"byte_offset":null,"created_at_ms":1,"data_bytes":null,'
        b'"data_key":"s3://b/k","encoding":"bytes-batch-v1","msg_count":2,"producer":null,"type":"WAL"}',
        IndexEntry.decode,
        IndexEntry(EntryType.WAL, 2, DataRef("s3://b/k"), 1, "a"),
    ),
    (
        b'{"batches":[[1,2,3,4]],"epoch":1,"in_flight":null,"touched_at_ms":0,"validated_at_ms":0}',
        ProducerState.decode,
        ProducerState(1, (ProducerBatch(1, 2, 3, 4),)),
    ),
]


def test_every_document_kind_has_golden_bytes() -> None:
    assert DOCUMENTS.keys() == GOLDEN.keys()


@pytest.mark.parametrize("name", DOCUMENTS)
def test_documents_encode_to_the_golden_bytes(name: str) -> None:
    value, _ = DOCUMENTS[name]
    assert value.encode() == GOLDEN[name]


@pytest.mark.parametrize("name", DOCUMENTS)
def test_golden_bytes_decode_to_the_documents(name: str) -> None:
    value, decode = DOCUMENTS[name]
    assert decode(GOLDEN[name]) == value


@pytest.mark.parametrize(("raw", "decode", "value"), LEGACY)
def test_documents_older_versions_wrote_still_read(raw: bytes, decode: Callable[[bytes], Any], value: Any) -> None:
    assert decode(raw) == value


GROUP_STATES = {
    "group_empty": GroupState(),
    "group": GroupState(
        3,
        {
            "m-2": Member(["orders", "audit"], 30000, 1760000030000, {"orders": [2, 0], "audit": [0]}),
            "m-1": Member(["orders"], 10000, 1760000010000, {"orders": [1]}),
        },
        {"orders": [0, 1, 2], "audit": [0, 3]},
        {"orders": {2: 40, 0: 42, 1: 7}, "audit": {3: 1}},
        NOW,
        {"orders": P},
    ),
}

# Group records are written in field order, not sorted (llog.format.kv.groups).
GROUP_GOLDEN = {
    "group_empty": b'{"generation":0,"members":{},"partitions":{},"offsets":{},"offset_topics":{},"touched_at_ms":0}',
    "group": (
        b'{"generation":3,"members":{"m-1":{"topics":["orders"],"session_timeout_ms":10000,"expires_at_ms":'
        b'1760000010000,"assignment":{"orders":[1]}},"m-2":{"topics":["orders","audit"],"session_timeout_ms":'
        b'30000,"expires_at_ms":1760000030000,"assignment":{"orders":[2,0],"audit":[0]}}},"partitions":'
        b'{"audit":[0,3],"orders":3},"offsets":{"audit":{"3":1},"orders":{"0":42,"1":7,"2":40}},"offset_topics":'
        b'{"orders":"0190c8a2-7b3e-7c41-9a52-3f6d1e2b4c5d"},"touched_at_ms":1760000000000}'
    ),
}


@pytest.mark.parametrize("name", GROUP_STATES)
def test_group_records_encode_to_the_golden_bytes_and_back(name: str) -> None:
    state = GROUP_STATES[name]
    assert state.document().encode() == GROUP_GOLDEN[name]
    assert GroupState.of(GroupDocument.decode(GROUP_GOLDEN[name], "g")) == state


def test_a_group_record_from_before_topic_identities_still_reads() -> None:
    raw = b'{"generation":1,"members":{},"partitions":{"orders":2},"offsets":{"orders":{"1":5}},"touched_at_ms":9}'
    assert GroupState.of(GroupDocument.decode(raw, "g")) == GroupState(1, {}, {"orders": [0, 1]}, {"orders": {1: 5}}, 9)
