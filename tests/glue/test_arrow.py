"""bytes-batch-v1 to Arrow: the columns, out-of-range timestamps, corrupt offsets."""

from __future__ import annotations

import struct

import google_crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llog.errors import CorruptBatch
from llog.format.codec import CRC_POSITION, HEADER_SIZE, Record, decode_batch, encode_batch
from llog_export.arrow import SCHEMA, UNKNOWN_DATE, batch_to_arrow
from tests.conftest import fuzz_examples


def test_rows_carry_every_field_and_the_offsets_of_the_range() -> None:
    batch = decode_batch(
        encode_batch(
            [
                Record(b"\x00\xff", key=b"k", headers=(("a", b"1"), ("a", b"2")), timestamp_ms=0),
                Record(b"", timestamp_ms=86_400_000 - 1),
                Record(b"z", key=b"", timestamp_ms=86_400_000),
            ]
        )
    )
    rows = batch_to_arrow(batch, topic="orders", partition=7, first_offset=41).to_pylist()

    assert [(r["offset"], r["partition"], r["topic"], r["date"]) for r in rows] == [
        (41, 7, "orders", "1970-01-01"),
        (42, 7, "orders", "1970-01-01"),
        (43, 7, "orders", "1970-01-02"),
    ]
    assert [(r["key"], r["value"]) for r in rows] == [(b"k", b"\x00\xff"), (None, b""), (b"", b"z")]
    assert rows[0]["headers"] == [{"name": "a", "value": b"1"}, {"name": "a", "value": b"2"}]
    assert rows[1]["headers"] == []
    assert rows[2]["timestamp"].isoformat() == "1970-01-02T00:00:00+00:00"


def test_a_timestamp_no_calendar_date_holds_exports_as_null_in_the_unknown_partition() -> None:
    batch = decode_batch(
        encode_batch(
            [
                Record(b"a", timestamp_ms=2**63 - 1),
                Record(b"b", timestamp_ms=-(2**63)),
                Record(b"c", timestamp_ms=-1),
            ]
        )
    )
    table = batch_to_arrow(batch, topic="t", partition=0, first_offset=1)
    assert table.schema == SCHEMA
    rows = table.to_pylist()
    assert [(r["timestamp"], r["date"]) for r in rows[:2]] == [(None, UNKNOWN_DATE), (None, UNKNOWN_DATE)]
    assert rows[2]["date"] == "1969-12-31"


def test_offsets_that_go_backwards_are_a_corrupt_batch_not_garbage_rows() -> None:
    raw = bytearray(encode_batch([b"abc", b"de", b"f"]))
    value_offsets = HEADER_SIZE + 8 * 3  # after three int64 timestamps
    struct.pack_into("<ii", raw, value_offsets + 4, 5, 2)  # 0, 5, 2, 6: ends right, but decreases
    # re-sealed, as a buggy writer would have: only the offsets are wrong
    with pytest.raises(CorruptBatch, match="binary array"):
        batch_to_arrow(decode_batch(reseal(raw)), topic="t", partition=0, first_offset=1)


header_lists = st.lists(st.tuples(st.text(max_size=8), st.binary(max_size=12)).map(tuple), max_size=4).map(tuple)


@settings(max_examples=fuzz_examples(150), deadline=None)
@given(st.lists(header_lists, min_size=1, max_size=20))
def test_vectorised_header_parsing_agrees_with_the_codec(headers: list[tuple[tuple[str, bytes], ...]]) -> None:
    batch = decode_batch(encode_batch([Record(b"v", headers=h, timestamp_ms=1) for h in headers]))
    rows = batch_to_arrow(batch, topic="t", partition=0, first_offset=1).to_pylist()
    assert [[(e["name"], e["value"]) for e in r["headers"]] for r in rows] == [
        list(batch.headers(i)) for i in range(len(batch))
    ]


def reseal(raw: bytearray) -> bytes:
    crc = google_crc32c.extend(google_crc32c.value(bytes(raw[:CRC_POSITION])), bytes(raw[HEADER_SIZE:]))
    struct.pack_into("<I", raw, CRC_POSITION, crc)
    return bytes(raw)


@settings(max_examples=fuzz_examples(300), deadline=None)
@given(st.lists(header_lists, min_size=1, max_size=6), st.data())
def test_damaged_header_bytes_are_a_corrupt_batch_or_parse_exactly_as_the_codec_does(
    headers: list[tuple[tuple[str, bytes], ...]], data: st.DataObject
) -> None:
    headers = [(("x", b"1"),), *headers]  # at least one header, so the section exists
    raw = bytearray(encode_batch([Record(b"v", headers=h, timestamp_ms=1) for h in headers]))
    columns = decode_batch(bytes(raw)).columns()
    assert columns.headers is not None
    section = columns.headers.data
    start = len(raw) - len(section) - (-len(section) % 8)  # the header bytes are the last section
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(section) - 1))
        raw[start + i] = data.draw(st.integers(0, 255))
    batch = decode_batch(reseal(raw))
    try:
        expected = [list(batch.headers(i)) for i in range(len(batch))]
    except CorruptBatch:
        expected = None
    try:
        rows = batch_to_arrow(batch, topic="t", partition=0, first_offset=1).to_pylist()
    except CorruptBatch:
        assert expected is None
        return
    assert [[(e["name"], e["value"]) for e in r["headers"]] for r in rows] == expected
