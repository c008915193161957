"""Unit tests of the JSON documents stored in Oxia (llog/format/kv/)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from llog.config import append_protocol_from_env
from llog.errors import CorruptData, CorruptMetadata
from llog.format.codec import ENCODING
from llog.format.kv.compaction import CompactionCursor, CompactionRecord, CompactionState
from llog.format.kv.control import AppendProtocol, ControlRecord, LogState, PendingAppend
from llog.format.kv.document import INITIAL_OFFSET, DataRef
from llog.format.kv.groups import GroupDocument
from llog.format.kv.index import EntryType, IndexedBatch, IndexEntry, decode_sequence_value

NOW = 1_760_000_000_000
SHARED_REF = DataRef("s3://bucket/llog/wal-shared/0f3e", ENCODING, 177, 104)
COMPACTED_REF = DataRef("s3://bucket/llog/orders/partitions/0/data/compacted/9a")

PENDING = PendingAppend(append_id="a-1", start_offset=10, end_offset=11, msg_count=2, ref=SHARED_REF, created_at_ms=NOW)
CONTROL = ControlRecord(LogState.OPEN, 12, PENDING)
INDEX_ENTRY = IndexEntry(EntryType.WAL, 2, SHARED_REF, NOW, "a-1")
COMPACTION = CompactionRecord(
    compaction_id="c-1",
    state=CompactionState.WRITING_COMPACTED_INDEX,
    start_offset=1,
    end_offset=100,
    msg_count=100,
    data_key=COMPACTED_REF.data_key,
    created_at_ms=NOW,
    last_source_start_offset=91,
)

PENDING_FIELDS = {
    "append_id",
    "start_offset",
    "end_offset",
    "msg_count",
    "entry_type",
    "data_key",
    "encoding",
    "byte_offset",
    "byte_length",
    "created_at_ms",
}
INDEX_FIELDS = {"type", "msg_count", "data_key", "encoding", "byte_offset", "byte_length", "created_at_ms"}


def pending_read(doc: Any) -> PendingAppend | None:
    """``doc`` read as the ``pending`` of a ``meta/control`` record."""
    return ControlRecord.decode(
        json.dumps({"log_state": "OPEN", "sequence_counter": 2**40, "pending": doc}).encode()
    ).pending


def doc_of(raw: bytes) -> dict[str, Any]:
    doc = json.loads(raw)
    assert isinstance(doc, dict)
    return doc


def raw_of(doc: Any) -> bytes:
    return json.dumps(doc).encode()


# --- round trips and the documented field names ---------------------------------------------------


def test_control_defaults():
    c = ControlRecord()
    assert (c.log_state, c.sequence_counter, c.pending) == (LogState.OPEN, INITIAL_OFFSET, None)
    assert INITIAL_OFFSET == 1
    assert c.high_watermark == 0
    assert c.encode() == b'{"log_state":"OPEN","pending":null,"sequence_counter":1}'
    assert ControlRecord.decode(c.encode()) == c


@pytest.mark.parametrize(
    "control",
    [
        ControlRecord(),
        ControlRecord(LogState.FENCED, 5),
        CONTROL,
        ControlRecord(LogState.OPEN, 3, PendingAppend("x", 1, 2, 2, COMPACTED_REF, 0, EntryType.COMPACTED)),
        ControlRecord(LogState.OPEN, 2**62, PendingAppend("y", 2**62 - 1, 2**62 - 1, 1, SHARED_REF, NOW)),
    ],
)
def test_control_round_trip(control):
    assert ControlRecord.decode(control.encode()) == control


def test_control_field_names():
    doc = doc_of(CONTROL.encode())
    assert set(doc) == {"log_state", "sequence_counter", "pending"}
    assert (doc["log_state"], doc["sequence_counter"]) == ("OPEN", 12)
    assert doc["pending"] == {
        "append_id": "a-1",
        "start_offset": 10,
        "end_offset": 11,
        "msg_count": 2,
        "entry_type": "WAL",
        "data_key": "s3://bucket/llog/wal-shared/0f3e",
        "encoding": "bytes-batch-v1",
        "byte_offset": 177,
        "byte_length": 104,
        "created_at_ms": NOW,
    }
    assert set(doc["pending"]) == PENDING_FIELDS


def test_control_marks_a_deleted_topics_partition_only_when_set_and_reads_older_records_as_not_deleted():
    marked = ControlRecord(LogState.FENCED, 5, topic_deleted=True)
    assert doc_of(marked.encode())["topic_deleted"] is True
    assert ControlRecord.decode(marked.encode()) == marked
    assert "topic_deleted" not in doc_of(ControlRecord(LogState.FENCED, 5).encode())  # as written before the mark
    assert ControlRecord.decode(b'{"log_state":"FENCED","sequence_counter":5,"pending":null}').topic_deleted is False
    with pytest.raises(CorruptMetadata, match="deleted topic is OPEN"):
        ControlRecord.decode(b'{"log_state":"OPEN","sequence_counter":5,"pending":null,"topic_deleted":true}')
    with pytest.raises(CorruptMetadata, match="bool.*topic_deleted"):
        ControlRecord.decode(b'{"log_state":"FENCED","sequence_counter":5,"pending":null,"topic_deleted":1}')


def test_pending_without_byte_range_keeps_null_fields():
    pending = PendingAppend("x", 1, 1, 1, COMPACTED_REF, NOW)
    assert set(pending.to_json()) == PENDING_FIELDS
    assert (pending.to_json()["byte_offset"], pending.to_json()["byte_length"]) == (None, None)
    assert pending_read(pending.to_json()) == pending


def test_control_decodes_the_protocol_document_example():
    raw = b"""{"log_state": "OPEN", "sequence_counter": 12,
     "pending": {"append_id": "a-1", "start_offset": 10, "end_offset": 11, "msg_count": 2,
                 "entry_type": "WAL", "data_key": "s3://bucket/llog/wal-shared/0f3e",
                 "encoding": "bytes-batch-v1", "byte_offset": 177, "byte_length": 104,
                 "created_at_ms": 1760000000000}}"""
    assert ControlRecord.decode(raw) == CONTROL
    assert ControlRecord.decode(raw).high_watermark == 11


@pytest.mark.parametrize(("counter", "hwm"), [(1, 0), (2, 1), (12, 11), (2**63, 2**63 - 1)])
def test_high_watermark(counter, hwm):
    assert ControlRecord(sequence_counter=counter).high_watermark == hwm


def test_with_changes():
    fenced = CONTROL.with_changes(log_state=LogState.FENCED, pending=None)
    assert fenced == ControlRecord(LogState.FENCED, 12, None)
    assert CONTROL.pending is PENDING  # the original is unchanged


def test_pending_entry_type_defaults_to_wal():
    doc = PENDING.to_json()
    del doc["entry_type"]
    assert pending_read(doc) == PENDING
    doc["entry_type"] = None
    assert pending_read(doc) == PENDING


def test_pending_covers_and_index_entry():
    assert [PENDING.covers(o) for o in (9, 10, 11, 12)] == [False, True, True, False]
    assert PENDING.index_entry() == IndexEntry(EntryType.WAL, 2, SHARED_REF, NOW, "a-1")


@pytest.mark.parametrize(
    "entry",
    [
        INDEX_ENTRY,
        IndexEntry(EntryType.WAL, 1, SHARED_REF, 0),
        IndexEntry(EntryType.COMPACTED, 100, COMPACTED_REF, NOW),
        IndexEntry(EntryType.COMPACTED, 5, DataRef("s3://b/k", "other-encoding"), NOW, "x"),
    ],
)
def test_index_entry_round_trip(entry):
    assert IndexEntry.decode(entry.encode()) == entry


def test_index_entry_field_names():
    doc = doc_of(INDEX_ENTRY.encode())
    assert set(doc) == INDEX_FIELDS | {"append_id"}
    assert doc == {
        "type": "WAL",
        "msg_count": 2,
        "data_key": "s3://bucket/llog/wal-shared/0f3e",
        "encoding": "bytes-batch-v1",
        "byte_offset": 177,
        "byte_length": 104,
        "created_at_ms": NOW,
        "append_id": "a-1",
    }
    assert set(doc_of(IndexEntry(EntryType.WAL, 2, SHARED_REF, NOW).encode())) == INDEX_FIELDS


def test_compacted_index_entry_has_no_byte_range():
    doc = doc_of(IndexEntry(EntryType.COMPACTED, 3, COMPACTED_REF, NOW).encode())
    assert set(doc) == {"type", "msg_count", "data_key", "encoding", "created_at_ms"}
    assert doc["type"] == "COMPACTED"


def test_index_entry_decodes_the_protocol_document_example():
    raw = b"""{"type": "WAL", "msg_count": 2, "data_key": "s3://bucket/llog/wal-shared/0f3e",
     "encoding": "bytes-batch-v1", "byte_offset": 177, "byte_length": 104,
     "created_at_ms": 1760000000000, "append_id": "a-1"}"""
    assert IndexEntry.decode(raw) == INDEX_ENTRY


def test_encoding_is_canonical_json():
    for raw in (CONTROL.encode(), INDEX_ENTRY.encode(), COMPACTION.encode(), CompactionCursor(7).encode()):
        assert raw == json.dumps(json.loads(raw), separators=(",", ":"), sort_keys=True).encode()


@pytest.mark.parametrize(
    ("end", "count", "start"),
    [(1, 1, 1), (11, 2, 10), (100, 100, 1), (2**40, 10, 2**40 - 9)],
)
def test_indexed_batch_range(end, count, start):
    batch = IndexedBatch(end, IndexEntry(EntryType.WAL, count, SHARED_REF, NOW))
    assert batch.start_offset == start == end - count + 1
    assert batch.covers(start)
    assert batch.covers(end)
    assert not batch.covers(start - 1)
    assert not batch.covers(end + 1)
    assert all(batch.covers(o) for o in range(start, min(end, start + 50) + 1))


def test_compaction_cursor():
    assert CompactionCursor(42).encode() == b'{"offset":42}'
    assert CompactionCursor.decode(CompactionCursor(42).encode()) == CompactionCursor(42)
    assert CompactionCursor.decode(CompactionCursor(INITIAL_OFFSET).encode()) == CompactionCursor(INITIAL_OFFSET)


@pytest.mark.parametrize(
    "record",
    [
        COMPACTION,
        CompactionRecord("c", CompactionState.DELETING_OLD, 5, 9, 5, "s3://b/k", NOW),
        CompactionRecord("c", CompactionState.UPDATING_CURSOR, 5, 9, 5, "s3://b/k", NOW, "enc", 0),
    ],
)
def test_compaction_record_round_trip(record):
    assert CompactionRecord.decode(record.encode()) == record


def test_compaction_record_field_names():
    doc = doc_of(COMPACTION.encode())
    assert doc == {
        "compaction_id": "c-1",
        "state": "WRITING_COMPACTED_INDEX",
        "start_offset": 1,
        "end_offset": 100,
        "msg_count": 100,
        "data_key": COMPACTED_REF.data_key,
        "encoding": "bytes-batch-v1",
        "created_at_ms": NOW,
        "last_source_start_offset": 91,
    }
    without = CompactionRecord("c", CompactionState.DELETING_OLD, 1, 2, 2, "s3://b/k", NOW)
    assert "last_source_start_offset" not in doc_of(without.encode())


@pytest.mark.parametrize(
    ("state", "started"),
    [
        (CompactionState.WRITING_COMPACTED_INDEX, False),
        (CompactionState.DELETING_OLD, True),
        (CompactionState.UPDATING_CURSOR, True),
    ],
)
def test_compaction_index_deletions_started(state, started):
    record = CompactionRecord("c", state, 10, 20, 11, "s3://b/k", NOW)
    assert record.index_deletions_started is started
    assert [record.covers(o) for o in (9, 10, 20, 21)] == [False, True, True, False]


def test_data_ref_defaults():
    ref = DataRef("s3://b/k")
    assert (ref.encoding, ref.byte_offset, ref.byte_length, ref.inline) == (ENCODING, None, None, None)


def test_an_inline_batch_round_trips_as_base64_and_is_absent_otherwise():
    inline_ref = DataRef("s3://b/k", ENCODING, 177, 4, inline=b"\x00\xffab")
    entry = IndexEntry(EntryType.WAL, 2, inline_ref, NOW)
    assert doc_of(entry.encode())["inline"] == "AP9hYg=="
    assert IndexEntry.decode(entry.encode()) == entry
    assert "inline" not in doc_of(INDEX_ENTRY.encode())
    pending = PendingAppend("a", 1, 2, 2, inline_ref, NOW)
    assert pending_read(json.loads(json.dumps(pending.to_json()))) == pending


@pytest.mark.parametrize(
    ("inline", "message"),
    [
        ("not base64!", "'inline' is not base64"),
        ("AP9h", "inline batch of 3 bytes for a slice of 4"),
        (7, r"got `int` - at `\$.inline`"),
    ],
)
def test_a_bad_inline_batch_is_corrupt_metadata(inline, message):
    doc = doc_of(IndexEntry(EntryType.WAL, 2, DataRef("s3://b/k", ENCODING, 0, 4, inline=b"abcd"), NOW).encode())
    doc["inline"] = inline
    with pytest.raises(CorruptMetadata, match=message):
        IndexEntry.decode(raw_of(doc))


# --- unknown extra fields are ignored -----------------------------------------------------------


def add_extras(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["future_field"] = {"nested": [1, 2, 3]}
    doc["another"] = None
    if isinstance(doc.get("pending"), dict):
        doc["pending"]["future"] = "x"
    return doc


@pytest.mark.parametrize(
    ("value", "decode"),
    [
        (CONTROL, ControlRecord.decode),
        (ControlRecord(), ControlRecord.decode),
        (INDEX_ENTRY, IndexEntry.decode),
        (COMPACTION, CompactionRecord.decode),
        (CompactionCursor(3), CompactionCursor.decode),
    ],
)
def test_unknown_fields_are_ignored(value, decode):
    assert decode(raw_of(add_extras(doc_of(value.encode())))) == value


# --- malformed documents ---------------------------------------------------------------------------

DECODERS: list[Callable[[bytes], object]] = [
    ControlRecord.decode,
    IndexEntry.decode,
    CompactionCursor.decode,
    CompactionRecord.decode,
]


@pytest.mark.parametrize("decode", DECODERS)
@pytest.mark.parametrize("raw", [b"", b"{", b"not json", b"\xff\xfe\xfd", b"\x80"])
def test_not_json(decode, raw):
    with pytest.raises(CorruptMetadata, match="is not JSON"):
        decode(raw)


@pytest.mark.parametrize("decode", DECODERS)
def test_trailing_bytes_are_corrupt_metadata(decode):
    with pytest.raises(CorruptMetadata):
        decode(b'{"a":1}x')


@pytest.mark.parametrize("decode", DECODERS)
@pytest.mark.parametrize("raw", [b"[]", b'"text"', b"1", b"null", b"true", b'[{"log_state":"OPEN"}]'])
def test_not_an_object(decode, raw):
    with pytest.raises(CorruptMetadata, match="is not a JSON object"):
        decode(raw)


DELETE = object()


def mutated(value: Any, path: tuple[str, ...], new: Any) -> bytes:
    doc = doc_of(value.encode())
    target = doc
    for part in path[:-1]:
        target = target[part]
    if new is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = new
    return raw_of(doc)


BAD_INTS = [DELETE, None, -1, True, False, 1.5, 2.0, "5", [5], {"n": 5}]
BAD_STRS = [DELETE, None, "", 5, True, ["x"], {"x": 1}]


def bad_docs() -> list[Any]:
    cases: list[Any] = []

    def add(name: str, value: Any, path: tuple[str, ...], bads: list[Any], decode: Callable[[bytes], object]) -> None:
        for bad in bads:
            label = "delete" if bad is DELETE else repr(bad)
            cases.append(pytest.param(decode, mutated(value, path, bad), id=f"{name}.{'.'.join(path)}={label}"))

    add("control", CONTROL, ("log_state",), [DELETE, None, "open", "CLOSED", "", 1, True], ControlRecord.decode)
    add("control", CONTROL, ("sequence_counter",), [*BAD_INTS, 0], ControlRecord.decode)
    add("control", CONTROL, ("pending",), ["x", 1, True, False, [], [PENDING.to_json()]], ControlRecord.decode)
    for name in ("start_offset", "end_offset", "msg_count", "created_at_ms"):
        add("control", CONTROL, ("pending", name), BAD_INTS, ControlRecord.decode)
    for name in ("byte_offset", "byte_length"):
        add("control", CONTROL, ("pending", name), [-1, True, 1.5, "5"], ControlRecord.decode)
    for name in ("append_id", "data_key", "encoding"):
        add("control", CONTROL, ("pending", name), BAD_STRS, ControlRecord.decode)
    add("control", CONTROL, ("pending", "entry_type"), ["", 5, True], ControlRecord.decode)
    add("control", CONTROL, ("pending", "msg_count"), [0, 1, 3], ControlRecord.decode)  # range holds 2
    add("control", CONTROL, ("pending", "end_offset"), [9, 10, 12], ControlRecord.decode)
    add("control", CONTROL, ("pending", "start_offset"), [9, 11, 12], ControlRecord.decode)

    add("index", INDEX_ENTRY, ("type",), [DELETE, None, "wal", "BOGUS", "", 1], IndexEntry.decode)
    add("index", INDEX_ENTRY, ("msg_count",), [*BAD_INTS, 0], IndexEntry.decode)
    add("index", INDEX_ENTRY, ("created_at_ms",), BAD_INTS, IndexEntry.decode)
    for name in ("byte_offset", "byte_length"):
        add("index", INDEX_ENTRY, (name,), [-1, True, 1.5, "5", [1]], IndexEntry.decode)
    for name in ("data_key", "encoding"):
        add("index", INDEX_ENTRY, (name,), BAD_STRS, IndexEntry.decode)
    add("index", INDEX_ENTRY, ("append_id",), ["", 5, True, ["x"]], IndexEntry.decode)

    add("cursor", CompactionCursor(5), ("offset",), BAD_INTS, CompactionCursor.decode)

    add("compaction", COMPACTION, ("state",), [DELETE, None, "DONE", "", 1], CompactionRecord.decode)
    for name in ("start_offset", "end_offset", "msg_count", "created_at_ms"):
        add("compaction", COMPACTION, (name,), BAD_INTS, CompactionRecord.decode)
    add("compaction", COMPACTION, ("last_source_start_offset",), [-1, True, 1.5, "5"], CompactionRecord.decode)
    for name in ("compaction_id", "data_key", "encoding"):
        add("compaction", COMPACTION, (name,), BAD_STRS, CompactionRecord.decode)
    return cases


@pytest.mark.parametrize(("decode", "raw"), bad_docs())
def test_malformed_documents_are_corrupt_metadata(decode, raw):
    with pytest.raises(CorruptMetadata):
        decode(raw)


@pytest.mark.parametrize(
    ("decode", "raw", "message"),
    [
        (
            ControlRecord.decode,
            mutated(CONTROL, ("log_state",), "CLOSED"),
            "Invalid enum value 'CLOSED' - at `\\$.log_state`",
        ),
        (ControlRecord.decode, mutated(CONTROL, ("sequence_counter",), 0), "sequence_counter 0 is below 1"),
        (
            ControlRecord.decode,
            mutated(CONTROL, ("sequence_counter",), True),
            "Expected `int`, got `bool` - at `\\$.sequence_counter`",
        ),
        (ControlRecord.decode, mutated(CONTROL, ("pending", "msg_count"), 3), r"range \[10, 11\] does not hold 3"),
        (
            ControlRecord.decode,
            mutated(CONTROL, ("pending",), "x"),
            "meta/control: Expected `object \\| null`, got `str` - at `\\$.pending`",
        ),
        (IndexEntry.decode, mutated(INDEX_ENTRY, ("type",), "BOGUS"), "Invalid enum value 'BOGUS' - at `\\$.type`"),
        (IndexEntry.decode, mutated(INDEX_ENTRY, ("msg_count",), 0), "msg_count 0"),
        (
            IndexEntry.decode,
            mutated(INDEX_ENTRY, ("data_key",), ""),
            "Expected `str` of length >= 1 - at `\\$.data_key`",
        ),
        (CompactionRecord.decode, mutated(COMPACTION, ("state",), "DONE"), "Invalid enum value 'DONE'"),
        (
            CompactionCursor.decode,
            mutated(CompactionCursor(1), ("offset",), -1),
            "Expected `int` >= 0 - at `\\$.offset`",
        ),
    ],
)
def test_corrupt_metadata_messages(decode, raw, message):
    with pytest.raises(CorruptMetadata, match=message):
        decode(raw)


def test_a_pending_that_is_not_an_object_is_corrupt_metadata():
    docs: tuple[object, ...] = ([], "x", 5)
    for doc in docs:
        with pytest.raises(CorruptMetadata, match="pending"):
            pending_read(doc)


def test_corrupt_metadata_is_corrupt_data():
    assert issubclass(CorruptMetadata, CorruptData)
    assert not CorruptMetadata.retriable


# --- regressions: bugs found by these tests, now fixed ------------------------------------


@pytest.mark.parametrize("entry_type", ["BOGUS", "wal"])
def test_unknown_pending_entry_type_is_corrupt_metadata(entry_type):
    with pytest.raises(CorruptMetadata):
        ControlRecord.decode(mutated(CONTROL, ("pending", "entry_type"), entry_type))


@pytest.mark.parametrize("decode", DECODERS)
@pytest.mark.parametrize(
    "raw",
    [b"[" * 100_000 + b"]" * 100_000, b'{"sequence_counter":' + b"1" * 5000 + b"}"],
    ids=["deeply-nested", "huge-integer"],
)
def test_hostile_json_is_corrupt_metadata(decode, raw):
    with pytest.raises(CorruptMetadata):
        decode(raw)


def test_a_compacted_range_manifest_round_trips_and_rejects_what_it_cannot_trust():
    from llog.format.kv.compaction import CompactedRange, CompactionRecord, CompactionState

    record = CompactionRecord("c1", CompactionState.DELETING_OLD, 11, 20, 10, "s3://b/k", 123)
    manifest = CompactedRange.of("orders", 2, record)
    assert (manifest.start_offset, manifest.end_offset, manifest.record_count) == (11, 20, 10)
    assert CompactedRange.decode(manifest.encode()) == manifest
    doc = json.loads(manifest.encode())
    for field, value in [("format", "v0"), ("record_count", 9), ("start_offset", -1), ("data_key", "")]:
        with pytest.raises(CorruptMetadata):
            CompactedRange.decode(json.dumps({**doc, field: value}).encode())
    with pytest.raises(CorruptMetadata):
        CompactedRange("orders", 2, 0, 5, "s3://b/k", "c", 1)  # offsets start at 1


def test_control_carries_the_log_start_and_writers_keep_it():
    from llog.format.kv.control import ControlRecord

    plain = ControlRecord(sequence_counter=5)
    assert b"log_start_offset" not in plain.encode()  # absent means 1: records written before retention read the same
    assert ControlRecord.decode(plain.encode()).log_start_offset == 1
    truncated = ControlRecord(sequence_counter=50, log_start_offset=21)
    assert ControlRecord.decode(truncated.encode()) == truncated
    assert truncated.with_changes(sequence_counter=60).log_start_offset == 21  # what a writer's CAS writes
    for start in (0, 51):
        with pytest.raises(CorruptMetadata, match="log_start_offset"):
            ControlRecord.decode(
                json.dumps(
                    {"log_state": "OPEN", "sequence_counter": 50, "pending": None, "log_start_offset": start}
                ).encode()
            )


def test_compacted_entries_and_records_carry_the_object_size():
    from llog.format.kv.compaction import CompactionRecord, CompactionState
    from llog.format.kv.document import DataRef
    from llog.format.kv.index import EntryType, IndexEntry

    entry = IndexEntry(EntryType.COMPACTED, 3, DataRef("s3://b/k"), 1, data_bytes=4096)
    assert IndexEntry.decode(entry.encode()) == entry
    record = CompactionRecord("c", CompactionState.WRITING_COMPACTED_INDEX, 1, 3, 3, "s3://b/k", 1, data_bytes=4096)
    assert CompactionRecord.decode(record.encode()) == record


def test_the_former_protocol_name_seed_is_read_as_cas() -> None:
    assert AppendProtocol("seed") is AppendProtocol.CAS
    assert append_protocol_from_env({"LLOG_APPEND_PROTOCOL": "seed"}) is AppendProtocol.CAS
    stored = json.dumps({"log_state": "OPEN", "sequence_counter": 3, "append_protocol": "seed"}).encode()
    control = ControlRecord.decode(stored)
    assert control.protocol is AppendProtocol.CAS
    assert b"append_protocol" not in control.encode()  # CAS is the default, not written


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"type":"FENCE","created_at_ms":1}', "fence marker: Object missing required field `fence_id`"),
        (b'{"type":"FENCE","fence_id":"f","created_at_ms":1,"roll":"yes"}', r"fence marker: .* `\$.roll`"),
        (b'{"type":"BOGUS","msg_count":1,"created_at_ms":1}', "sequence entry: Invalid enum value 'BOGUS'"),
        (b"[]", "sequence entry is not a JSON object"),
        (b"{", "sequence entry is not JSON"),
    ],
)
def test_a_bad_sequence_value_is_corrupt_metadata_named_for_what_it_claims_to_be(raw, message):
    with pytest.raises(CorruptMetadata, match=message):
        decode_sequence_value(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"generation":"3","members":{},"partitions":{},"offsets":{},"touched_at_ms":0}',
        b'{"generation":3,"members":{},"partitions":{"t":-1},"offsets":{},"touched_at_ms":0}',
        b'{"generation":3,"members":{},"partitions":{},"offsets":{"t":{"x":1}},"touched_at_ms":0}',
        b'{"generation":3,"members":{"m":{"topics":["t"]}},"partitions":{},"offsets":{},"touched_at_ms":0}',
        b'{"generation":3,"members":{},"partitions":{},"offsets":{}}',
    ],
)
def test_a_malformed_group_record_is_corrupt_metadata(raw):
    with pytest.raises(CorruptMetadata, match="the record of group 'g'"):
        GroupDocument.decode(raw, "g")
