"""Unit tests of the ``bytes-batch-v1`` batch format (llog/format/codec.py).

The layout checks below re-derive the byte layout independently of the
decoder (header, then 8-byte aligned sections), so a decoder that merely
agrees with its own encoder would not pass them.
"""

from __future__ import annotations

import struct
import time
from array import array
from collections.abc import Sequence
from typing import Any

import google_crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llog.errors import BatchTooLarge, CorruptBatch, CorruptData, InvalidArgument, LlogError
from llog.format import codec
from llog.format.codec import (
    CRC_POSITION,
    ENCODING,
    FLAG_HEADERS,
    FLAG_KEY_NULLS,
    FLAG_KEYS,
    HEADER_SIZE,
    MAGIC,
    VERSION,
    Record,
    RecordBatch,
    batch_record_count,
    check_records,
    decode_batch,
    decode_headers,
    encode_batch,
    encode_headers,
    records_bytes,
    values_only,
)
from tests.conftest import fuzz_examples

NOW = 1_700_000_000_123
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# The 32-byte header of docs/FORMAT.md, spelled out here rather than taken from the codec.
HEADER = struct.Struct("<4sHHIIQII")  # magic, version, flags, count, body_length, reserved u64, reserved u32, crc32c
HEADER_FIELDS = ("magic", "version", "flags", "count", "body_length", "reserved", "reserved2", "crc")
SPEC_HEADER_SIZE, SPEC_CRC_AT = 32, 28

FUZZ = settings(max_examples=fuzz_examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- helpers -------------------------------------------------------------------


def expected(records: Sequence[Record | bytes], now_ms: int = NOW) -> list[Record]:
    """What decoding must return: bytes values, tuple headers, default timestamps filled in."""
    out = []
    for r in records:
        rec = r if isinstance(r, Record) else Record(r)
        out.append(
            Record(
                bytes(rec.value),
                None if rec.key is None else bytes(rec.key),
                tuple((name, bytes(value)) for name, value in rec.headers),
                now_ms if rec.timestamp_ms is None else rec.timestamp_ms,
            )
        )
    return out


def read_all(batch: RecordBatch) -> list[Record]:
    """Touch every accessor of every record (decode is lazy per record)."""
    out = []
    for i in range(len(batch)):
        rec = batch.record(i)
        assert rec == Record(batch.value(i), batch.key(i), batch.headers(i), batch.timestamp_ms(i))
        out.append(rec)
    return out


def roundtrip(records: Sequence[Record | bytes], now_ms: int = NOW) -> list[Record]:
    return read_all(decode_batch(encode_batch(records, now_ms=now_ms), expected_count=len(records)))


def reseal(data: bytes | bytearray) -> bytes:
    """Recompute the CRC32C after editing a batch, so only structural checks can catch the edit."""
    head = bytes(data[:SPEC_CRC_AT])
    crc = google_crc32c.extend(google_crc32c.value(head), bytes(data[SPEC_HEADER_SIZE:]))
    return head + struct.pack("<I", crc) + bytes(data[SPEC_HEADER_SIZE:])


def with_header(data: bytes, **fields: int | bytes) -> bytes:
    """Replace header fields (magic, version, flags, count, body_length, reserved) and reseal."""
    values = dict(zip(HEADER_FIELDS, HEADER.unpack_from(data, 0), strict=True))
    values.update(fields)
    return reseal(HEADER.pack(*(values[n] for n in HEADER_FIELDS)) + data[SPEC_HEADER_SIZE:])


Section = tuple[str, int, int]  # name, start, length (without padding)


def layout(data: bytes) -> list[Section]:
    """Walk the sections of a batch per the format description, independently of RecordBatch."""
    magic, version, flags, count, body_length, reserved, reserved2, crc = HEADER.unpack_from(data, 0)
    assert (magic, version, reserved, reserved2) == (b"LLBB", 1, 0, 0)
    assert body_length == len(data) - SPEC_HEADER_SIZE
    assert crc == google_crc32c.extend(google_crc32c.value(data[:SPEC_CRC_AT]), data[SPEC_HEADER_SIZE:])
    sections: list[Section] = []
    pos = SPEC_HEADER_SIZE

    def add(name: str, size: int) -> int:
        nonlocal pos
        start = pos
        sections.append((name, start, size))
        pos = start + size + (-size % 8)
        return start

    def column(name: str) -> None:
        start = add(f"{name}_offsets", 4 * (count + 1))
        offsets = struct.unpack_from(f"<{count + 1}i", data, start)
        add(name, offsets[-1])

    add("timestamps", 8 * count)
    column("values")
    if flags & FLAG_KEYS:
        if flags & FLAG_KEY_NULLS:
            add("key_validity", (count + 7) // 8)
        column("keys")
    if flags & FLAG_HEADERS:
        column("headers")
    assert pos == len(data)
    return sections


def section(data: bytes, name: str) -> bytes:
    for n, start, size in layout(data):
        if n == name:
            return data[start : start + size]
    raise KeyError(name)


def offsets_of(data: bytes, name: str) -> list[int]:
    raw = section(data, f"{name}_offsets")
    return list(struct.unpack(f"<{len(raw) // 4}i", raw))


MIXED = [
    Record(b"v0", key=b"k0", headers=(("h", b"1"),), timestamp_ms=10),
    Record(b"", key=None, headers=(), timestamp_ms=None),
    Record(b"value-two", key=b"", headers=(("\u00fcnicode-\u6f22", b"\x00\xff"), ("h", b"")), timestamp_ms=-5),
    Record(b"\x00" * 9, key=b"key-3", timestamp_ms=INT64_MAX),
    Record(b"x", key=None, headers=(("dup", b"a"), ("dup", b"b")), timestamp_ms=INT64_MIN),
]


# --- round trips ---------------------------------------------------------------


def test_plain_bytes_are_records_without_key_or_headers():
    assert roundtrip([b"a", b"bc"]) == [Record(b"a", None, (), NOW), Record(b"bc", None, (), NOW)]


def test_single_record():
    data = encode_batch([Record(b"only", key=b"k", headers=(("a", b"b"),), timestamp_ms=7)])
    batch = decode_batch(data, expected_count=1)
    assert len(batch) == 1
    assert list(batch) == [Record(b"only", b"k", (("a", b"b"),), 7)]
    assert batch.nbytes == len(data)


@pytest.mark.parametrize(
    "records",
    [
        pytest.param([Record(b"a", key=b"k1"), Record(b"b", key=b"k2")], id="all-keys"),
        pytest.param([Record(b"a"), Record(b"b")], id="no-keys"),
        pytest.param([Record(b"a", key=b"k1"), Record(b"b"), Record(b"c", key=b"k3")], id="mixed-keys"),
        pytest.param([Record(b"a", key=b""), Record(b"b", key=b"")], id="empty-keys-are-not-none"),
        pytest.param([Record(b"a"), Record(b"b", key=b"")], id="none-and-empty-key"),
        pytest.param(MIXED, id="mixed-everything"),
    ],
)
def test_keys_round_trip(records):
    assert roundtrip(records) == expected(records)


@pytest.mark.parametrize(
    ("records", "flags"),
    [
        ([Record(b"a"), Record(b"b")], 0),
        ([Record(b"a", key=b"x"), Record(b"b", key=b"")], FLAG_KEYS),
        ([Record(b"a", key=b"x"), Record(b"b")], FLAG_KEYS | FLAG_KEY_NULLS),
        ([Record(b"a", headers=(("h", b""),)), Record(b"b")], FLAG_HEADERS),
        ([Record(b"a", headers=()), Record(b"b", key=None)], 0),
        (MIXED, FLAG_KEYS | FLAG_KEY_NULLS | FLAG_HEADERS),
    ],
)
def test_flags_mark_the_optional_sections(records, flags):
    data = encode_batch(records, now_ms=NOW)
    assert HEADER.unpack_from(data, 0)[2] == flags
    names = {name for name, _, _ in layout(data)}
    assert ("keys" in names) == bool(flags & FLAG_KEYS)
    assert ("key_validity" in names) == bool(flags & FLAG_KEY_NULLS)
    assert ("headers" in names) == bool(flags & FLAG_HEADERS)


def test_key_validity_bitmap_marks_present_keys_lsb_first():
    keys = [b"k" if i % 3 == 0 else None for i in range(20)]
    data = encode_batch([Record(b"v", key=k) for k in keys], now_ms=NOW)
    bitmap = section(data, "key_validity")
    assert len(bitmap) == 3
    assert [(bitmap[i >> 3] >> (i & 7)) & 1 for i in range(20)] == [int(k is not None) for k in keys]
    assert [decode_batch(data).key(i) for i in range(20)] == keys


@pytest.mark.parametrize(
    "headers",
    [
        (),
        (("", b""),),
        (("name", b"value"),),
        (("\u00fc\u00f1\u00ee\u00e7\u00f8d\u00e9 \U0001f600", b"\x00\x01\xfe\xff"),),
        (("a", b"1"), ("a", b"2"), ("b", b"")),
        tuple((f"h{i}", bytes([i % 256]) * i) for i in range(300)),
    ],
    ids=["empty", "empty-name-value", "simple", "unicode-binary", "duplicates", "many"],
)
def test_headers_round_trip(headers):
    records = [Record(b"v", headers=headers), Record(b"w")]
    assert roundtrip(records) == expected(records)


def test_headers_given_as_list_decode_as_tuple():
    records = [Record(b"v", headers=[("a", b"b")])]  # type: ignore[arg-type]
    assert roundtrip(records)[0].headers == (("a", b"b"),)


@pytest.mark.parametrize("timestamp", [0, 1, -1, NOW, INT64_MIN, INT64_MAX, 2**40 + 7])
def test_explicit_timestamps_round_trip(timestamp):
    assert roundtrip([Record(b"v", timestamp_ms=timestamp)], now_ms=123)[0].timestamp_ms == timestamp


def test_missing_timestamps_take_now_ms():
    records = [Record(b"a"), Record(b"b", timestamp_ms=5), Record(b"c")]
    assert [r.timestamp_ms for r in roundtrip(records, now_ms=42)] == [42, 5, 42]


def test_default_now_ms_is_the_current_time():
    before = int(time.time() * 1000)
    data = encode_batch([b"v"])
    after = int(time.time() * 1000)
    assert before <= decode_batch(data).timestamp_ms(0) <= after


def test_empty_values():
    records: list[Record | bytes] = [b"", b"", Record(b"", key=b"")]
    assert roundtrip(records) == expected(records)
    assert offsets_of(encode_batch(records, now_ms=NOW), "values") == [0, 0, 0, 0]


def test_bytearray_and_memoryview_inputs_decode_as_bytes():
    # Record is annotated with bytes; the encoder also accepts bytearray and memoryview.
    ba, mv, mv2, ba2 = bytearray(b"ba"), memoryview(b"mv"), memoryview(b"xyz"), bytearray(b"k")
    records = [Record(ba, key=mv), Record(mv2, key=ba2)]  # type: ignore[arg-type]
    out = roundtrip(records)
    assert out == [Record(b"ba", b"mv", (), NOW), Record(b"xyz", b"k", (), NOW)]
    assert all(type(r.value) is bytes and type(r.key) is bytes for r in out)


def test_many_records():
    n = 10_000
    records = [
        Record(
            i.to_bytes(4, "little") * (i % 7),
            key=None if i % 5 == 0 else str(i).encode(),
            headers=(("i", str(i).encode()),) if i % 3 == 0 else (),
            timestamp_ms=None if i % 2 else i * 1000,
        )
        for i in range(n)
    ]
    data = encode_batch(records, now_ms=NOW)
    batch = decode_batch(data, expected_count=n)
    assert len(batch) == n
    assert list(batch) == expected(records)
    assert batch.value(n - 1) == records[n - 1].value
    assert len(data) % 8 == 0


@pytest.mark.parametrize("source", [bytes, bytearray, memoryview])
def test_decode_accepts_bytes_bytearray_and_memoryview(source):
    data = encode_batch(MIXED, now_ms=NOW)
    assert read_all(decode_batch(source(data))) == expected(MIXED)


def test_decode_a_slice_of_a_larger_buffer_without_copying():
    data = encode_batch(MIXED, now_ms=NOW)
    blob = b"prefix--" + data + b"suffix"
    view = memoryview(blob)[8 : 8 + len(data)]
    assert read_all(decode_batch(view)) == expected(MIXED)


def test_encoding_is_deterministic():
    assert encode_batch(MIXED, now_ms=NOW) == encode_batch(list(MIXED), now_ms=NOW)
    assert ENCODING == "bytes-batch-v1"


# --- byte layout ----------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 17])
@pytest.mark.parametrize("size", [0, 1, 3, 8, 13])
def test_every_section_starts_on_an_8_byte_boundary(n, size):
    records = [
        Record(b"v" * (size + i), key=None if i % 2 else b"k" * i, headers=(("h", b"x" * i),) if i % 3 else ())
        for i in range(n)
    ]
    data = encode_batch(records, now_ms=NOW)
    assert len(data) % 8 == 0
    sections = layout(data)
    assert all(start % 8 == 0 for _, start, _ in sections)
    for _, start, size_ in sections:  # padding is zeros
        assert data[start + size_ : start + size_ + (-size_ % 8)] == bytes(-size_ % 8)


def test_header_fields_and_crc():
    data = encode_batch(MIXED, now_ms=NOW)
    magic, version, flags, count, body_length, reserved, reserved2, crc = HEADER.unpack_from(data, 0)
    assert HEADER_SIZE == HEADER.size == 32
    assert (magic, version, count, body_length) == (b"LLBB", 1, len(MIXED), len(data) - 32)
    assert (reserved, reserved2) == (0, 0)
    assert crc == google_crc32c.value(data[:28] + data[32:])


def test_worked_example_of_the_format_document():
    data = encode_batch([Record(b"a", timestamp_ms=1000), Record(b"bc", key=b"k", timestamp_ms=5)])
    assert len(data) == 104
    assert HEADER.unpack_from(data, 0)[:7] == (b"LLBB", 1, FLAG_KEYS | FLAG_KEY_NULLS, 2, 72, 0, 0)
    assert data[32:48] == struct.pack("<2q", 1000, 5)
    assert data[48:64] == struct.pack("<3i", 0, 1, 3) + bytes(4)
    assert data[64:72] == b"abc" + bytes(5)
    assert data[72:80] == b"\x02" + bytes(7)
    assert data[80:96] == struct.pack("<3i", 0, 0, 1) + bytes(4)
    assert data[96:104] == b"k" + bytes(7)


def test_sections_hold_arrow_compatible_columns():
    data = encode_batch(MIXED, now_ms=NOW)
    want = expected(MIXED)
    ts = section(data, "timestamps")
    assert list(struct.unpack(f"<{len(MIXED)}q", ts)) == [r.timestamp_ms for r in want]
    value_offsets = offsets_of(data, "values")
    assert value_offsets[0] == 0
    assert section(data, "values") == b"".join(r.value for r in want)
    assert [value_offsets[i + 1] - value_offsets[i] for i in range(len(MIXED))] == [len(r.value) for r in want]
    assert section(data, "keys") == b"".join(r.key or b"" for r in want)
    header_bytes = [encode_headers(r.headers) for r in want]
    assert section(data, "headers") == b"".join(header_bytes)
    assert offsets_of(data, "headers")[-1] == sum(map(len, header_bytes))


# --- count cross-check -------------------------------------------------------------


@pytest.mark.parametrize("count", [0, 2, 4, 10**9])
def test_expected_count_mismatch_is_corrupt(count):
    data = encode_batch([b"a", b"b", b"c"], now_ms=NOW)
    with pytest.raises(CorruptBatch, match=f"holds 3 records, its index entry says {count}"):
        decode_batch(data, expected_count=count)


def test_batch_record_count_reads_the_header_and_encoded_returns_the_batch_s_bytes():
    data = encode_batch([b"a", b"b", b"c"], now_ms=1)
    assert batch_record_count(data) == 3
    with pytest.raises(CorruptBatch, match="shorter than its"):
        batch_record_count(data[:10])
    assert decode_batch(data).encoded() is data  # opened from exactly these bytes: no copy
    inside = decode_batch(memoryview(b"pad" + data + b"pad")[3 : 3 + len(data)]).encoded()
    assert type(inside) is bytes  # opened from a view: a copy of the batch alone
    assert inside == data


def test_checksum_false_opens_without_the_crc_and_keeps_every_other_check():
    data = bytearray(encode_batch([b"abc", b"de"], now_ms=1))
    data[-8] ^= 0xFF  # the first value's first byte: only the CRC can tell
    with pytest.raises(CorruptBatch, match="checksum mismatch"):
        decode_batch(bytes(data))
    assert decode_batch(bytes(data), checksum=False).value(0) != b"abc"  # opened: the CRC was not read
    with pytest.raises(CorruptBatch, match="magic"):
        decode_batch(b"XXXX" + bytes(data[4:]), checksum=False)
    with pytest.raises(CorruptBatch, match="shorter than its"):
        decode_batch(bytes(data[:10]), checksum=False)


def test_expected_count_match():
    assert len(decode_batch(encode_batch([b"a", b"b", b"c"]), expected_count=3)) == 3


# --- corruption --------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_batch() -> bytes:
    records = [
        Record(b"abc", key=b"k", headers=(("h", b"v"),), timestamp_ms=1),
        Record(b"", key=None, timestamp_ms=2),
        Record(b"defgh", key=b"", headers=(("\u00fc", b"\xff"),), timestamp_ms=3),
    ]
    return encode_batch(records, now_ms=NOW)


def decode_and_read(data: bytes | bytearray) -> list[Record]:
    return read_all(decode_batch(data))


@pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF])
def test_every_single_byte_flip_is_detected(small_batch, mask):
    assert len(small_batch) > HEADER_SIZE + 64  # every section is present
    for pos in range(len(small_batch)):
        damaged = bytearray(small_batch)
        damaged[pos] ^= mask
        with pytest.raises(CorruptBatch):
            decode_and_read(damaged)


def test_every_truncation_is_detected(small_batch):
    for length in range(len(small_batch)):
        with pytest.raises(CorruptBatch):
            decode_and_read(small_batch[:length])


@pytest.mark.parametrize("extra", [b"\x00", bytes(8), b"garbage"])
def test_appended_bytes_are_detected(small_batch, extra):
    with pytest.raises(CorruptBatch, match="header says"):
        decode_batch(small_batch + extra)


@pytest.mark.parametrize("data", [b"", b"LLBB", bytes(31)])
def test_shorter_than_header(data):
    with pytest.raises(CorruptBatch, match="shorter than its 32-byte header"):
        decode_batch(data)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"magic": b"LLBA"}, "not a bytes-batch-v1 batch"),
        ({"magic": b"\x00\x00\x00\x00"}, "not a bytes-batch-v1 batch"),
        ({"version": 0}, "unsupported batch version 0"),
        ({"version": 2}, "unsupported batch version 2"),
        ({"flags": 0x8}, "unknown batch flags 0x8"),
        ({"flags": 0x8000}, "unknown batch flags 0x8000"),
        ({"count": 0}, "record count 0 is invalid"),
        ({"count": 2**31}, "record count 2147483648 is invalid"),
        ({"count": 4}, "section is truncated|trailing bytes|offsets are invalid"),
        ({"count": 2**31 - 2}, "section is truncated"),
        ({"count": 2}, "trailing bytes|offsets are invalid"),
        ({"body_length": 0}, "header says 0"),
    ],
)
def test_hostile_header_with_valid_crc(small_batch, fields, message):
    with pytest.raises(CorruptBatch, match=message):
        decode_and_read(with_header(small_batch, **fields))


def test_key_nulls_flag_without_keys_is_corrupt():
    data = encode_batch([b"a", b"b"], now_ms=NOW)
    with pytest.raises(CorruptBatch, match="key nulls without keys"):
        decode_batch(with_header(data, flags=FLAG_KEY_NULLS))


@pytest.mark.parametrize("flags", [0, FLAG_KEYS, FLAG_HEADERS, FLAG_KEYS | FLAG_HEADERS, FLAG_KEYS | FLAG_KEY_NULLS])
def test_flags_that_disagree_with_the_sections_are_corrupt(small_batch, flags):
    assert HEADER.unpack_from(small_batch, 0)[2] == FLAG_KEYS | FLAG_KEY_NULLS | FLAG_HEADERS
    with pytest.raises(CorruptBatch):
        decode_and_read(with_header(small_batch, flags=flags))


def test_crc_field_itself_is_checked(small_batch):
    damaged = bytearray(small_batch)
    damaged[CRC_POSITION : CRC_POSITION + 4] = bytes(4)
    with pytest.raises(CorruptBatch, match="checksum mismatch"):
        decode_batch(damaged)


def hostile_offset_values(offsets: list[int], i: int, data_len: int) -> list[int]:
    """Values for offsets[i] that are out of bounds or break monotonicity.

    (``offsets[N]`` may grow into its own padding: that is a different but
    well-formed batch, so the smallest hostile end lies past the padding.)
    """
    padded = data_len + (-data_len % 8)
    values = [-1, -(2**31), 2**31 - 1, padded + 1, padded + 8]
    if i > 0 and offsets[i - 1] > 0:
        values.append(offsets[i - 1] - 1)  # before the previous offset
    if i + 1 < len(offsets):
        values.append(offsets[i + 1] + 1)  # after the next offset
    return [v for v in values if v != offsets[i]]


@pytest.mark.parametrize("column", ["values", "keys", "headers"])
def test_hostile_offsets_with_valid_crc_are_corrupt(column):
    records = [
        Record(b"abcd", key=b"k0", headers=(("a", b"1"),)),
        Record(b"efghij", key=b"k11", headers=(("bb", b"22"),)),
        Record(b"klm", key=b"k222", headers=(("ccc", b"333"),)),
    ]
    data = encode_batch(records, now_ms=NOW)
    (_, start, _), (_, _, data_len) = [s for s in layout(data) if s[0] in (f"{column}_offsets", column)]
    offsets = offsets_of(data, column)
    assert offsets == sorted(offsets)
    assert (offsets[0], offsets[-1]) == (0, data_len)
    cases = 0
    for i in range(len(offsets)):
        for bad in hostile_offset_values(offsets, i, data_len):
            edited = bytearray(data)
            struct.pack_into("<i", edited, start + 4 * i, bad)
            with pytest.raises(CorruptBatch):
                decode_and_read(reseal(edited))
            cases += 1
    assert cases >= 20


def non_monotonic_batch() -> RecordBatch:
    """Three values whose offsets are [0, 10, 8, 12]: record 1 is out of bounds, 0 and 2 are not."""
    data = encode_batch([b"aaaa", b"bbbb", b"cccc"], now_ms=NOW)
    start = next(s for n, s, _ in layout(data) if n == "values_offsets")
    edited = bytearray(data)
    struct.pack_into("<i", edited, start + 4, 10)
    return decode_batch(reseal(edited))


def test_non_monotonic_offset_fails_on_access_not_on_other_records():
    batch = non_monotonic_batch()
    with pytest.raises(CorruptBatch, match="value offsets of record 1 are out of bounds"):
        batch.value(1)
    assert batch.value(2) == b"cccc"


def test_corrupt_header_bytes_with_valid_crc_fail_on_access():
    data = encode_batch([Record(b"a", headers=(("name", b"v"),)), Record(b"b")], now_ms=NOW)
    _, start, size = next(s for s in layout(data) if s[0] == "headers")
    edited = bytearray(data)
    struct.pack_into("<H", edited, start, 7)  # claims 7 headers, holds 1
    batch = decode_batch(reseal(edited))
    assert batch.value(0) == b"a"
    assert batch.headers(1) == ()
    with pytest.raises(CorruptBatch, match="record headers"):
        batch.headers(0)
    with pytest.raises(CorruptBatch):
        batch.record(0)


@pytest.mark.parametrize("index", [-1, 3, 2**40])
@pytest.mark.parametrize("accessor", ["value", "key", "headers", "timestamp_ms", "record"])
def test_out_of_range_index_is_index_error(small_batch, index, accessor):
    batch = decode_batch(small_batch)
    with pytest.raises(IndexError, match=f"record {index} is outside a batch of 3"):
        getattr(batch, accessor)(index)


def test_corrupt_batch_is_corrupt_data_and_llog_error():
    assert issubclass(CorruptBatch, CorruptData)
    assert issubclass(CorruptBatch, LlogError)
    assert not CorruptBatch.retriable


# --- invalid input to encode -----------------------------------------------------------


def test_empty_batch_is_invalid():
    with pytest.raises(InvalidArgument, match="at least one record"):
        encode_batch([])


@pytest.mark.parametrize("value", ["text", 1, None, [b"a"], 1.5])
def test_non_bytes_value_is_invalid(value):
    with pytest.raises(InvalidArgument, match="record value must be bytes"):
        encode_batch([Record(b"ok"), Record(value)])


@pytest.mark.parametrize("key", ["text", 1, [b"a"]])
def test_non_bytes_key_is_invalid(key):
    with pytest.raises(InvalidArgument, match="record key must be bytes or None"):
        encode_batch([Record(b"v", key=key)])


@pytest.mark.parametrize("timestamp", [2**63, INT64_MIN - 1, 1.5, "1", 10**30, True])
def test_timestamp_must_be_int64(timestamp):
    with pytest.raises(InvalidArgument, match="64-bit integer"):
        encode_batch([Record(b"v", timestamp_ms=timestamp)])


@pytest.mark.parametrize("now_ms", [2**63, 0.5])
def test_now_ms_must_be_int64_when_used(now_ms):
    with pytest.raises(InvalidArgument, match="64-bit integer"):
        encode_batch([b"v"], now_ms=now_ms)


def test_too_many_headers_on_one_record():
    headers = tuple(("h", b"") for _ in range(65536))
    with pytest.raises(BatchTooLarge, match="65536 headers"):
        encode_batch([Record(b"v", headers=headers)])
    assert len(decode_headers(encode_headers(headers[:65535]))) == 65535


def test_header_name_too_long():
    with pytest.raises(BatchTooLarge, match="header name exceeds 65535 bytes"):
        encode_headers((("\u00fc" * 32768, b""),))  # 65536 UTF-8 bytes


def test_section_size_limit(monkeypatch):
    monkeypatch.setattr(codec, "MAX_SECTION_BYTES", 10)
    assert roundtrip([b"12345", b"67890"]) == expected([b"12345", b"67890"])
    with pytest.raises(BatchTooLarge, match="values total 11 bytes"):
        encode_batch([b"12345", b"678901"])
    with pytest.raises(BatchTooLarge, match="keys total 11 bytes"):
        encode_batch([Record(b"v", key=b"12345678901")])
    assert issubclass(BatchTooLarge, InvalidArgument)


def test_record_count_limit(monkeypatch):
    monkeypatch.setattr(codec, "MAX_RECORDS", 2)
    with pytest.raises(BatchTooLarge, match="at most 2 records"):
        encode_batch([b"a", b"b", b"c"])


# --- record headers encoding -----------------------------------------------------------


def test_encode_headers_layout():
    assert encode_headers(()) == b"\x00\x00"
    assert encode_headers((("a", b"xy"),)) == b"\x01\x00" + b"\x01\x00" + b"\x02\x00\x00\x00" + b"a" + b"xy"
    assert encode_headers((("\u00fc", b""),)) == b"\x01\x00\x02\x00\x00\x00\x00\x00\xc3\xbc"


@pytest.mark.parametrize(
    "headers",
    [(), (("", b""),), (("k", b"v"), ("k", b"w")), (("\u6f22\u5b57", bytes(range(256))),)],
)
def test_headers_encoding_round_trip(headers):
    assert decode_headers(encode_headers(headers)) == headers
    assert decode_headers(memoryview(encode_headers(headers))) == headers


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "truncated"),
        (b"\x01", "truncated"),
        (b"\x01\x00", "malformed"),  # one header promised, no entry
        (b"\x01\x00\x05\x00\x00\x00\x00\x00ab", "truncated"),  # name longer than the rest
        (b"\x01\x00\x01\x00\x05\x00\x00\x00a", "truncated"),  # value longer than the rest
        (b"\x01\x00\x01\x00\x00\x00\x00\x00\xff", "malformed"),  # name is not UTF-8
        (b"\x01\x00\x03\x00\x00\x00\x00\x00\xed\xa0\x80", "malformed"),  # UTF-8 of a surrogate
        (b"\x00\x00\x00", "trailing bytes"),
        (b"\x01\x00\x01\x00\x00\x00\x00\x00ax", "trailing bytes"),
    ],
)
def test_corrupt_header_bytes(raw, message):
    with pytest.raises(CorruptBatch, match=message):
        decode_headers(raw)


def test_every_truncation_of_encoded_headers_is_corrupt():
    raw = encode_headers((("name", b"value"), ("\u00fc", b"\x00")))
    for length in range(len(raw)):
        with pytest.raises(CorruptBatch):
            decode_headers(raw[:length])


# --- properties -----------------------------------------------------------------------

header_lists = st.lists(st.tuples(st.text(max_size=6), st.binary(max_size=8)), max_size=3).map(tuple)
record_strategy = st.builds(
    Record,
    value=st.binary(max_size=24),
    key=st.none() | st.binary(max_size=8),
    headers=header_lists,
    timestamp_ms=st.none() | st.integers(INT64_MIN, INT64_MAX),
)
records_strategy = st.lists(record_strategy, min_size=1, max_size=8)


@FUZZ
@given(records=records_strategy, now_ms=st.integers(INT64_MIN, INT64_MAX))
def test_property_round_trip(records, now_ms):
    data = encode_batch(records, now_ms=now_ms)
    assert len(data) % 8 == 0
    assert roundtrip(records, now_ms=now_ms) == expected(records, now_ms)


def decode_fully_or_corrupt(data: bytes) -> None:
    """The only acceptable outcomes: every record readable, or CorruptBatch."""
    try:
        batch = decode_batch(data)
        for rec in read_all(batch):
            assert type(rec.value) is bytes
            assert rec.key is None or type(rec.key) is bytes
            assert isinstance(rec.timestamp_ms, int)
    except CorruptBatch:
        pass


@FUZZ
@given(data=st.binary(max_size=300))
def test_property_arbitrary_bytes_only_raise_corrupt_batch(data):
    with pytest.raises(CorruptBatch):
        decode_batch(data)


@FUZZ
@given(
    flags=st.integers(0, 7),
    count=st.one_of(st.integers(0, 12), st.integers(0, 2**32 - 1)),
    body=st.binary(max_size=400),
)
def test_property_arbitrary_body_with_valid_header_and_crc(flags, count, body):
    # The header checks pass, so the decoder has to survive whatever the body holds.
    decode_fully_or_corrupt(reseal(HEADER.pack(MAGIC, VERSION, flags, count, len(body), 0, 0, 0) + body))


@FUZZ
@given(records=st.lists(record_strategy, min_size=1, max_size=5), data=st.data())
def test_property_mutated_body_with_valid_crc(records, data):
    encoded = bytearray(encode_batch(records, now_ms=NOW))
    body_len = len(encoded) - HEADER_SIZE
    start = data.draw(st.integers(HEADER_SIZE, len(encoded) - 1), label="start")
    patch = data.draw(st.binary(min_size=1, max_size=min(16, len(encoded) - start)), label="patch")
    encoded[start : start + len(patch)] = patch
    assert len(encoded) - HEADER_SIZE == body_len
    decode_fully_or_corrupt(reseal(encoded))


@FUZZ
@given(raw=st.binary(max_size=64))
def test_property_decode_headers_is_strict_and_canonical(raw):
    try:
        headers = decode_headers(raw)
    except CorruptBatch:
        return
    assert encode_headers(headers) == raw


@FUZZ
@given(headers=header_lists)
def test_property_headers_round_trip(headers):
    assert decode_headers(encode_headers(headers)) == headers


def per_record(batch: RecordBatch, start: int, stop: int) -> tuple[list[Any], ...]:
    """What the bulk accessors must return for records ``start`` to ``stop - 1``, read one by one."""
    indexes = range(start, stop)
    return (
        [batch.value(i) for i in indexes],
        [batch.key(i) for i in indexes],
        [batch.headers(i) for i in indexes],
        [batch.timestamp_ms(i) for i in indexes],
        [records_bytes([batch.record(i)]) for i in indexes],
    )


def in_bulk(batch: RecordBatch, start: int, stop: int) -> tuple[list[Any], ...]:
    return (
        batch.values_in(start, stop),
        batch.keys_in(start, stop),
        batch.headers_in(start, stop),
        batch.timestamps_in(start, stop),
        batch.sizes_in(start, stop),
    )


def fitting_one_by_one(batch: RecordBatch, start: int, room: int) -> tuple[int, int]:
    count = size = 0
    for i in range(start, len(batch)):
        nbytes = records_bytes([batch.record(i)])
        if size + nbytes > room:
            break
        count, size = count + 1, size + nbytes
    return count, size


@FUZZ
@given(records=records_strategy, data=st.data())
def test_property_bulk_accessors_agree_with_the_per_record_ones(records, data):
    encoded = encode_batch(records, now_ms=NOW)
    as_view = data.draw(st.booleans(), label="opened from a memoryview")
    batch = decode_batch(memoryview(encoded) if as_view else encoded)
    start = data.draw(st.integers(0, len(records)), label="start")
    stop = data.draw(st.integers(start, len(records)), label="stop")
    assert in_bulk(batch, start, stop) == per_record(batch, start, stop)
    assert in_bulk(batch, 0, len(records)) == per_record(batch, 0, len(records))  # after the range: cached headers
    room = data.draw(st.integers(-1, 200), label="room")
    assert batch.fitting(start, room) == fitting_one_by_one(batch, start, room)


@FUZZ
@given(records=st.lists(record_strategy, min_size=1, max_size=5), data=st.data())
def test_property_bulk_accessors_on_a_mutated_body_agree_or_refuse(records, data):
    encoded = bytearray(encode_batch(records, now_ms=NOW))
    at = data.draw(st.integers(HEADER_SIZE, len(encoded) - 1), label="at")
    patch = data.draw(st.binary(min_size=1, max_size=min(16, len(encoded) - at)), label="patch")
    encoded[at : at + len(patch)] = patch
    try:
        batch = decode_batch(reseal(encoded))
    except CorruptBatch:
        return
    start = data.draw(st.integers(0, len(batch)), label="start")
    stop = data.draw(st.integers(start, len(batch)), label="stop")
    try:
        expected_fields = per_record(batch, start, stop)
    except CorruptBatch:
        with pytest.raises(CorruptBatch):  # whatever a record of the range fails on, the range fails on
            in_bulk(batch, start, stop)
        return
    try:
        assert in_bulk(batch, start, stop) == expected_fields
    except CorruptBatch:
        # Stricter only where a record reads without it: the offsets of a null key are checked in bulk.
        assert any(k is None for k in expected_fields[1])


def test_bulk_accessors_check_the_offsets_of_their_range_only():
    batch = non_monotonic_batch()
    with pytest.raises(CorruptBatch, match="value offsets of records 0 to 2 are out of bounds"):
        batch.values_in()
    with pytest.raises(CorruptBatch, match="value offsets of records 1 to 1 are out of bounds"):
        batch.sizes_in(1, 2)
    assert batch.values_in(2) == [b"cccc"]
    assert batch.values_in(3) == []


@pytest.mark.parametrize(("start", "stop"), [(-1, 2), (0, 4), (2, 1), (4, None)])
@pytest.mark.parametrize("accessor", ["values_in", "keys_in", "headers_in", "timestamps_in", "sizes_in"])
def test_a_range_outside_the_batch_is_index_error(small_batch, start, stop, accessor):
    batch = decode_batch(small_batch)
    with pytest.raises(IndexError, match="outside a batch of 3"):
        getattr(batch, accessor)(start, stop)


def test_fitting_decodes_the_headers_of_the_records_that_may_fit_only(monkeypatch):
    batch = decode_batch(encode_batch([Record(b"v" * 10, headers=(("h", b"x"),)) for _ in range(1000)], now_ms=NOW))
    decoded: list[object] = []
    real = codec.decode_headers

    def counted(raw: bytes | memoryview) -> codec.Headers:
        decoded.append(raw)
        return real(raw)

    monkeypatch.setattr(codec, "decode_headers", counted)

    assert batch.fitting(5, 30) == (2, 24)  # 12 bytes each: value 10, header name 1 and value 1

    assert len(decoded) == 3  # the 3 records whose values fit in 30 bytes, not the other 992
    assert batch.headers_in(5, 7) == [(("h", b"x"),)] * 2
    assert len(decoded) == 3  # taking them reuses those decoded to size them


# --- regressions: bugs found by these tests, now fixed -------------------------------


@pytest.mark.parametrize("field", ["value", "key"])
def test_multi_byte_memoryview_is_rejected_or_encoded_whole(field):
    view = memoryview(array("h", [0x4142]))  # 1 item, 2 bytes
    kwargs: dict[str, Any] = {"value": b"v", field: view}
    try:
        data = encode_batch([Record(**kwargs)], now_ms=NOW)
    except InvalidArgument:
        return
    assert getattr(decode_batch(data), field)(0) == bytes(view)  # actual: b"B", silently truncated


@pytest.mark.parametrize(
    "headers",
    [(("name", "text-not-bytes"),), ((1, b"v"),), (("\ud800", b"v"),)],
    ids=["str-value", "int-name", "surrogate-name"],
)
def test_invalid_headers_are_invalid_argument(headers):
    # encode_batch validates values and keys but not headers; malformed headers
    # escape as TypeError / AttributeError / UnicodeEncodeError.
    with pytest.raises(InvalidArgument):
        encode_batch([Record(b"v", headers=headers)])


def test_columns_expose_the_arrow_layout_of_each_section():
    batch = decode_batch(encode_batch([
        Record(b"ab", key=b"k", headers=(("h", b"1"),), timestamp_ms=5),
        Record(b"", timestamp_ms=6),
        Record(b"cde", key=b"", timestamp_ms=7),
    ]))
    columns = batch.columns()
    assert columns.count == 3
    assert list(columns.timestamps) == [5, 6, 7]
    assert (list(columns.values.offsets), bytes(columns.values.data)) == ([0, 2, 2, 5], b"abcde")
    assert columns.keys is not None
    assert columns.keys.validity is not None
    assert bytes(columns.keys.validity) == bytes([0b101])  # LSB first, as in Arrow
    assert columns.headers is not None
    assert columns.headers.offsets[0] == 0
    plain = decode_batch(encode_batch([b"x"])).columns()
    assert (plain.keys, plain.headers) == (None, None)


def test_importing_llog_does_not_need_the_oxia_client():
    import subprocess
    import sys

    code = (
        "import sys, llog; from llog.format.codec import decode_batch; "
        "assert 'oxia' not in sys.modules; print(llog.LogWriter)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "llog.protocol.append.LogWriter" in done.stdout


def test_plain_bytes_records_encode_as_records_with_a_value_alone():
    """The all-bytes fast path writes exactly what the general path writes for the same records."""
    values = [b"a", b"", b"\x00\xff" * 300, "日本".encode()]
    fast = encode_batch(values, now_ms=1_700_000_000_000)
    assert fast == encode_batch([Record(v) for v in values], now_ms=1_700_000_000_000)
    assert fast == encode_batch([*values[:-1], Record(values[-1])], now_ms=1_700_000_000_000)  # mixed: general path
    batch = decode_batch(fast)
    assert [(r.value, r.key, r.headers, r.timestamp_ms) for r in batch] == [
        (v, None, (), 1_700_000_000_000) for v in values
    ]


def test_values_alone_are_told_counted_and_checked_without_a_python_step_per_record():
    values: list[Record | bytes] = [b"a", b"bc", b""]
    assert values_only(values)
    assert not values_only([*values, Record(b"d")])
    assert not values_only([*values, bytearray(b"d")])  # type: ignore[list-item]
    assert not values_only([])
    assert records_bytes(values) == 3
    check_records(values)
    with pytest.raises(InvalidArgument, match="record value must be bytes"):
        check_records([*values, Record("text")])  # type: ignore[arg-type]
    assert decode_batch(encode_batch(values, now_ms=1)).value(1) == b"bc"


def test_records_bytes_counts_values_keys_and_headers_and_check_records_checks_only_records():
    records: list[Record | bytes] = [b"abc", Record(b"v", b"key", (("h", b"xy"),)), Record(b"", None)]
    assert records_bytes(records) == 3 + (1 + 3 + 1 + 2) + 0
    check_records(records)
    with pytest.raises(InvalidArgument, match="record value must be bytes"):
        check_records([b"ok", Record("text")])  # type: ignore[arg-type]
