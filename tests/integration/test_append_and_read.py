"""The append and read protocols on a real Oxia server and moto S3."""

from __future__ import annotations

import dataclasses

import pytest

from llog.config import S3Config, WriterConfig
from llog.errors import (
    CorruptBatch,
    CorruptData,
    InvalidArgument,
    LogFenced,
    OffsetOutOfRange,
    PartitionNotInitialized,
)
from llog.format.codec import Record, encode_batch
from llog.format.keys import PartitionKeys, S3Location
from llog.format.kv.compaction import CompactionCursor
from llog.format.kv.control import AppendProtocol, ControlRecord, LogState
from llog.protocol.append import LogWriter, SharedAppendGroup
from llog.protocol.compaction import Compactor, compact_until_caught_up
from llog.protocol.index import PartitionIndex
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.read import LogReader
from llog.protocol.verify import ProblemKind, verify
from llog.store.fetch import fetch_ref
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from tests.protocols import CAS_S3_ONLY

pytestmark = pytest.mark.oxia


def control_of(oxia: OxiaStore, root: str, topic: str, partition: int) -> ControlRecord:
    keys = PartitionKeys(topic, partition, root)
    found = oxia.get(keys.control, partition_key=keys.partition_key)
    assert found is not None
    return ControlRecord.decode(found.value)


def test_initialize_partition_is_idempotent(writer: LogWriter, oxia_store: OxiaStore, topic: str, root: str) -> None:
    assert writer.initialize_partition(topic, 0) is True
    assert writer.initialize_partition(topic, 0) is False

    keys = PartitionKeys(topic, 0, root)
    assert control_of(oxia_store, root, topic, 0) == ControlRecord(LogState.OPEN, 1, None)
    cursor = oxia_store.get(keys.compaction_cursor, partition_key=keys.partition_key)
    assert cursor is not None
    assert CompactionCursor.decode(cursor.value) == CompactionCursor(1)


def test_offsets_start_at_one_and_are_contiguous(writer: LogWriter, reader: LogReader, topic: str) -> None:
    writer.initialize_partition(topic, 0)
    assert reader.high_watermark(topic, 0) == 0

    ranges = [(r.start_offset, r.end_offset) for r in (writer.append(topic, 0, [b"x"] * n) for n in (1, 3, 2, 5))]

    assert ranges == [(1, 1), (2, 4), (5, 6), (7, 11)]
    assert reader.high_watermark(topic, 0) == 11


def test_a_batch_of_n_ending_at_e_is_indexed_at_e(
    writer: LogWriter, oxia_store: OxiaStore, topic: str, root: str
) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a", b"b"])
    result = writer.append(topic, 0, [b"c", b"d", b"e"])

    keys = PartitionKeys(topic, 0, root)
    assert result.index_key == f"{root}/{topic}/partitions/0/index/00000000000000000005"
    assert (result.start_offset, result.end_offset, result.count) == (3, 5, 3)
    scanned = oxia_store.range_scan(keys.index_prefix, keys.index_scan_end, partition_key=keys.partition_key)
    assert [r.key for r in scanned] == [keys.index(2), keys.index(5)]
    assert control_of(oxia_store, root, topic, 0).pending is None


def test_every_offset_reads_back_exact_bytes_keys_headers_timestamps(
    writer: LogWriter, reader: LogReader, topic: str
) -> None:
    writer.initialize_partition(topic, 0)
    records = [
        Record(b"plain"),
        Record(b"\x00\xff\x80 binary", key=b"k1", headers=(("trace", b"\x01\x02"), ("ü-name", b"")), timestamp_ms=7),
        Record(b"", key=b"", timestamp_ms=-5),
        Record("unicodé ✓".encode(), key=None, headers=(("h", b"v"),), timestamp_ms=2**62),
    ]
    writer.append(topic, 0, records[:2])
    writer.append(topic, 0, records[2:])

    for offset, expected in enumerate(records, start=1):
        got = reader.read_offset(topic, 0, offset)
        assert (got.offset, got.value, got.key, got.headers) == (offset, expected.value, expected.key, expected.headers)
        if expected.timestamp_ms is not None:
            assert got.timestamp_ms == expected.timestamp_ms
    assert [r.value for r in reader.read_range(topic, 0, 2, 4)] == [r.value for r in records[1:]]
    assert [r.offset for r in reader.iter_from(topic, 0, 1)] == [1, 2, 3, 4]


def test_one_shared_blob_serves_several_partitions_by_range_get(storage: Storage, s3_config, topic: str) -> None:
    writer = LogWriter(storage, config=CAS_S3_ONLY)
    other = f"{topic}-b"
    for t, p in ((topic, 0), (topic, 1), (other, 0)):
        writer.initialize_partition(t, p)
    results = writer.append_shared(
        [
            SharedAppendGroup(topic, 0, [b"p0-a", b"p0-b"]),
            SharedAppendGroup(topic, 1, [b"p1-a"]),
            SharedAppendGroup(other, 0, [b"o-a", b"o-b", b"o-c"]),
        ]
    )
    assert all(r.ok for r in results)
    assert len({r.wal_uri for r in results}) == 1
    assert results[0].wal_uri is not None
    assert "/wal-shared/" in results[0].wal_uri

    reader = LogReader(dataclasses.replace(storage, blobs=BlobStore(s3_config)))  # counters of its own
    assert reader.read_offset(topic, 1, 1).value == b"p1-a"
    assert [r.value for r in reader.read_range(other, 0, 1, 3)] == [b"o-a", b"o-b", b"o-c"]
    assert reader.read_offset(topic, 0, 2).value == b"p0-b"

    ops = reader.storage.blobs.counters.snapshot()
    assert ops["range_get"].calls == 3
    assert "get" not in ops  # never the whole shared blob


def test_partition_not_initialized(writer: LogWriter, reader: LogReader, topic: str) -> None:
    with pytest.raises(PartitionNotInitialized):
        reader.read_offset(topic, 0, 1)
    (result,) = writer.append_shared([SharedAppendGroup(topic, 0, [b"a"])])
    assert result.error_type == "PartitionNotInitialized"


@pytest.mark.parametrize("offset", [0, -1, 3, 10**6])
def test_offsets_outside_the_log_are_out_of_range(
    writer: LogWriter, reader: LogReader, topic: str, offset: int
) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a", b"b"])
    with pytest.raises(OffsetOutOfRange, match=r"readable offsets are \[1, 2\]"):
        reader.read_offset(topic, 0, offset)


def test_scans(writer: LogWriter, reader: LogReader, topic: str) -> None:
    writer.initialize_partition(topic, 0)
    assert list(reader.iter_from(topic, 0, 1)) == []  # the tail of an empty log
    for i in range(300):  # more batches than one index scan page
        writer.append(topic, 0, [f"r{i}".encode()])

    assert [r.value for r in reader.iter_from(topic, 0, 1)] == [f"r{i}".encode() for i in range(300)]
    assert [r.offset for r in reader.iter_from(topic, 0, 299)] == [299, 300]
    assert list(reader.iter_from(topic, 0, 301)) == []
    with pytest.raises(OffsetOutOfRange):
        list(reader.iter_from(topic, 0, 302))
    with pytest.raises(InvalidArgument):
        reader.read_range(topic, 0, 5, 4)
    with pytest.raises(OffsetOutOfRange):
        reader.read_range(topic, 0, 299, 301)


def test_fenced_log_rejects_appends_until_unfenced(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, topic: str, root: str
) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"before"])

    assert writer.fence(topic, 0).log_state is LogState.FENCED
    assert writer.fence(topic, 0).log_state is LogState.FENCED  # idempotent
    with pytest.raises(LogFenced):
        writer.append(topic, 0, [b"rejected"])
    assert reader.read_offset(topic, 0, 1).value == b"before"
    assert control_of(oxia_store, root, topic, 0).sequence_counter == 2

    writer.unfence(topic, 0)
    assert writer.append(topic, 0, [b"after"]).start_offset == 2


def test_corrupted_blob_is_a_clear_error(storage: Storage, reader: LogReader, blob_store: BlobStore,
                                         topic: str) -> None:  # fmt: skip
    writer = LogWriter(storage, config=CAS_S3_ONLY)
    writer.initialize_partition(topic, 0)
    result = writer.append(topic, 0, [b"a" * 100])
    assert result.wal_uri is not None
    location = S3Location.parse(result.wal_uri)
    original = blob_store.get(location)

    damaged = bytearray(original)
    damaged[-10] ^= 0xFF
    blob_store.put(location, bytes(damaged))
    with pytest.raises(CorruptBatch, match="checksum"):
        reader.read_offset(topic, 0, 1)

    blob_store.put(location, original[:-20])  # shorter than the index entry's slice
    with pytest.raises(CorruptData, match="returned"):
        reader.read_offset(topic, 0, 1)

    blob_store.put(location, b"garbage")
    with pytest.raises(CorruptData, match="shorter than the requested range"):
        reader.read_offset(topic, 0, 1)


# --- small batches kept in their index entries (LLOG_INLINE_BATCH_MAX_BYTES) ----------------------


@pytest.mark.parametrize("protocol", [AppendProtocol.CAS, AppendProtocol.SEQUENTIAL])
def test_a_small_batch_is_read_from_its_index_entry_and_a_large_one_from_s3(
    storage: Storage, s3_config: S3Config, topic: str, protocol: AppendProtocol
) -> None:
    writer = LogWriter(storage, config=WriterConfig(append_protocol=protocol, inline_batch_max_bytes=1024))
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"small"])  # a 56-byte batch
    writer.append(topic, 0, [b"x" * 1000])  # 1,048 bytes: over the limit
    reader = LogReader(dataclasses.replace(storage, blobs=BlobStore(s3_config)))  # counters of its own

    small, large = PartitionIndex.load(reader._metadata(topic, 0)).scan(1)
    assert small.entry.ref.inline is not None
    assert small.entry.ref.inline == fetch_ref(storage.blobs, small.entry.ref)  # the very bytes of the slice
    assert large.entry.ref.inline is None

    assert reader.read_offset(topic, 0, 1).value == b"small"
    assert reader.storage.blobs.counters.total_calls() == 0
    assert reader.read_offset(topic, 0, 2).value == b"x" * 1000
    assert reader.storage.blobs.counters.snapshot()["range_get"].calls == 1


def test_compaction_and_verify_take_inline_batches(storage: Storage, s3_config: S3Config, topic: str) -> None:
    writer = LogWriter(storage)
    writer.initialize_partition(topic, 0)
    for i in range(3):
        writer.append(topic, 0, [f"r{i}".encode()])
    assert verify(storage, [topic]).problems == []

    counted = dataclasses.replace(storage, blobs=BlobStore(s3_config))
    compact_until_caught_up(Compactor(counted), topic, 0, budget_s=60)
    ops = counted.blobs.counters.snapshot()
    assert "get" not in ops  # the WAL slices came from their entries
    assert "range_get" not in ops
    assert [r.value for r in LogReader(storage).read_range(topic, 0, 1, 3)] == [b"r0", b"r1", b"r2"]


def test_verify_finds_an_inline_copy_that_is_not_the_slice(storage: Storage, topic: str) -> None:
    writer = LogWriter(storage)
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a" * 50])
    (batch,) = PartitionIndex.load(PartitionMetadata(storage.oxia, PartitionKeys(topic, 0, storage.root))).scan(1)
    ref = batch.entry.ref
    assert ref.inline is not None
    assert ref.byte_offset is not None
    # Another valid batch of the same size and count in the slice: it decodes, but is not the entry's copy.
    location = S3Location.parse(ref.data_key)
    blob = storage.blobs.get(location)
    other = encode_batch([b"b" * 50])
    assert len(other) == len(ref.inline)
    storage.blobs.put(location, blob[: ref.byte_offset] + other + blob[ref.byte_offset + len(other) :])

    report = verify(storage, [topic])

    assert [(p.kind, p.key) for p in report.problems] == [(ProblemKind.INLINE_MISMATCH, ref.data_key)]
