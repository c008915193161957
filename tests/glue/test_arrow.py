"""bytes-batch-v1 to Arrow: the columns, out-of-range timestamps, corrupt offsets."""

from __future__ import annotations

import struct

import google_crc32c
import pytest

from llog.codec import CRC_POSITION, HEADER_SIZE, Record, decode_batch, encode_batch
from llog.errors import CorruptBatch
from llog_export.arrow import SCHEMA, UNKNOWN_DATE, batch_to_arrow


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
    # re-seal the checksum, as a buggy writer would have: only the offsets are wrong
    crc = google_crc32c.extend(google_crc32c.value(bytes(raw[:CRC_POSITION])), bytes(raw[HEADER_SIZE:]))
    struct.pack_into("<I", raw, CRC_POSITION, crc)
    with pytest.raises(CorruptBatch, match="binary array"):
        batch_to_arrow(decode_batch(bytes(raw)), topic="t", partition=0, first_offset=1)
