"""Unit tests of the ``LLS1`` shared WAL blob (llog/format/wal.py)."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llog.errors import CorruptData, CorruptSharedBlob, InvalidArgument
from llog.format import wal
from llog.format.codec import ENCODING, Record, decode_batch, encode_batch
from llog.format.wal import MAGIC, BlobSlice, PartitionBody, build_shared_blob, parse_shared_blob_header
from tests.conftest import fuzz_examples

NOW = 1_760_000_000_000
PREAMBLE = struct.Struct(">4sI")  # docs/FORMAT.md: magic, header length (u32 big-endian)


def body_for(partition: int, n: int, size: int = 5) -> PartitionBody:
    records = [Record(bytes([partition % 256]) * size + i.to_bytes(2, "big"), key=b"k%d" % i) for i in range(n)]
    return PartitionBody("orders", partition, n, encode_batch(records, now_ms=NOW))


def split(blob: bytes) -> tuple[int, dict[str, Any], bytes]:
    """(header length, parsed JSON header, bodies) read per the format description."""
    magic, header_len = PREAMBLE.unpack_from(blob, 0)
    assert magic == b"LLS1"
    return header_len, json.loads(blob[8 : 8 + header_len]), blob[8 + header_len :]


def check_blob(blob: bytes, slices: list[BlobSlice], bodies: list[PartitionBody]) -> None:
    """Every invariant a reader relies on."""
    header_len, header, rest = split(blob)
    assert parse_shared_blob_header(blob) == slices
    assert parse_shared_blob_header(memoryview(blob)) == slices
    assert rest == b"".join(b.body for b in bodies)
    assert len(slices) == len(bodies) == len(header["partitions"])
    pos = 8 + header_len  # offsets are absolute and the bodies are contiguous, in header order
    for s, b, entry in zip(slices, bodies, header["partitions"], strict=True):
        assert (s.topic, s.partition, s.msg_count, s.encoding) == (b.topic, b.partition, b.msg_count, ENCODING)
        assert (s.byte_offset, s.byte_length) == (pos, len(b.body))
        assert (entry["body_offset"], entry["body_length"]) == (pos, len(b.body))
        assert blob[s.byte_offset : s.byte_offset + s.byte_length] == b.body
        pos += len(b.body)
    assert pos == len(blob)


def craft(doc: Any, bodies: bytes = b"", *, header_len: int | None = None, magic: bytes = MAGIC) -> bytes:
    raw = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    return PREAMBLE.pack(magic, len(raw) if header_len is None else header_len) + raw + bodies


AUTO = "<first body byte>"


def entry(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "topic": "orders",
        "partition": 0,
        "msg_count": 1,
        "encoding": ENCODING,
        "body_offset": AUTO,
        "body_length": 4,
    }
    base.update(changes)
    return base


def crafted_blob(entries: list[dict[str, Any]], bodies: bytes = b"body", version: Any = 1) -> bytes:
    """A hand-built blob; ``AUTO`` offsets point at the first body byte (a fixed point, as in the writer)."""
    start = 0
    while True:
        parts = [{**e, "body_offset": start} if e["body_offset"] == AUTO else e for e in entries]
        raw = json.dumps({"version": version, "created_at_ms": NOW, "partitions": parts}).encode()
        if 8 + len(raw) == start:
            return craft(raw, bodies)
        start = 8 + len(raw)


# --- round trips ---------------------------------------------------------------------


def test_one_partition_round_trip():
    body = body_for(0, 3)
    blob, slices = build_shared_blob([body], now_ms=NOW)
    check_blob(blob, slices, [body])
    s = slices[0]
    batch = decode_batch(blob[s.byte_offset : s.byte_offset + s.byte_length], expected_count=s.msg_count)
    assert [batch.key(i) for i in range(3)] == [b"k0", b"k1", b"k2"]


def test_many_partitions_round_trip():
    bodies = [body_for(p, n=1 + p % 4, size=p * 7) for p in range(40)]
    bodies.append(PartitionBody("other-topic", 7, 2, encode_batch([b"x", b"y"], now_ms=NOW)))
    blob, slices = build_shared_blob(bodies, now_ms=NOW)
    check_blob(blob, slices, bodies)
    for s, b in zip(slices, bodies, strict=True):
        batch = decode_batch(
            memoryview(blob)[s.byte_offset : s.byte_offset + s.byte_length], expected_count=s.msg_count
        )
        assert list(batch) == list(decode_batch(b.body))


def test_header_document():
    bodies = [body_for(0, 2), body_for(3, 1)]
    blob, slices = build_shared_blob(bodies, now_ms=NOW)
    header_len, header, _ = split(blob)
    assert header == {
        "version": 1,
        "created_at_ms": NOW,
        "partitions": [
            {
                "topic": "orders",
                "partition": p,
                "msg_count": b.msg_count,
                "encoding": "bytes-batch-v1",
                "body_offset": s.byte_offset,
                "body_length": len(b.body),
            }
            for p, b, s in zip((0, 3), bodies, slices, strict=True)
        ],
    }
    assert slices[0].byte_offset == 8 + header_len
    assert blob[:4] == b"LLS1"
    assert blob[4:8] == header_len.to_bytes(4, "big")


def test_created_at_defaults_to_now():
    blob, _ = build_shared_blob([body_for(0, 1)])
    assert split(blob)[1]["created_at_ms"] > NOW - 10**12


def test_bodies_without_records_are_rejected():
    with pytest.raises(InvalidArgument, match="at least one record"):
        build_shared_blob([body_for(1, 1), PartitionBody("a", 0, 0, b"")], now_ms=NOW)


# --- the header-length fixed point -------------------------------------------------------
#
# The header holds absolute offsets, whose digit count depends on the header's own
# length. Vary the header length one byte at a time (topic length, created_at_ms
# digits) with bodies that push later offsets past 10^3, 10^4 and 10^5.

BOUNDARY_SIZES = [0, 1, 9, 90, 900, 9_000, 90_000, 1]


def fixed_point_cases() -> list[tuple[int, int]]:
    return [(t, d) for t in range(1, 30) for d in range(1, 14)]


def test_header_length_fixed_point_across_digit_boundaries():
    payloads = {size: b"\xab" * size for size in BOUNDARY_SIZES}
    first_offsets: set[int] = set()
    all_offsets: set[int] = set()
    for topic_len, digits in fixed_point_cases():
        topic = "t" * topic_len
        bodies = [PartitionBody(topic, i, 1, payloads[size]) for i, size in enumerate(BOUNDARY_SIZES)]
        blob, slices = build_shared_blob(bodies, now_ms=10**digits - 1)
        check_blob(blob, slices, bodies)
        first_offsets.add(slices[0].byte_offset)
        all_offsets.update(s.byte_offset for s in slices)
    # The scan really crossed the boundaries: first offsets on both sides of 1000,
    # and later offsets of each digit count from 3 to 6.
    assert min(first_offsets) < 1000 < max(first_offsets)
    assert any(995 <= o <= 999 for o in first_offsets)
    assert any(1002 <= o <= 1010 for o in first_offsets)
    assert {len(str(o)) for o in all_offsets} >= {3, 4, 5, 6}


@pytest.mark.parametrize("n", [1, 9, 10, 11, 99, 100, 101])
def test_many_small_bodies(n):
    bodies = [PartitionBody("p", i, 1, bytes([i % 256]) * (i % 13)) for i in range(n)]
    blob, slices = build_shared_blob(bodies, now_ms=NOW)
    check_blob(blob, slices, bodies)


# --- corrupt blobs ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def good_blob() -> bytes:
    return build_shared_blob([body_for(0, 2), body_for(1, 3)], now_ms=NOW)[0]


@pytest.mark.parametrize("blob", [b"", b"LLS1", b"LLS1\x00\x00\x00"])
def test_shorter_than_preamble(blob):
    with pytest.raises(CorruptSharedBlob, match="shorter than its preamble"):
        parse_shared_blob_header(blob)


@pytest.mark.parametrize("magic", [b"LLS2", b"LLBB", b"lls1", bytes(4)])
def test_wrong_magic(good_blob, magic):
    with pytest.raises(CorruptSharedBlob, match="not an LLS1 shared blob"):
        parse_shared_blob_header(magic + good_blob[4:])


def test_a_batch_is_not_a_blob():
    with pytest.raises(CorruptSharedBlob, match="not an LLS1"):
        parse_shared_blob_header(body_for(0, 1).body)


def test_header_length_beyond_blob(good_blob):
    header_len = PREAMBLE.unpack_from(good_blob, 0)[1]
    for bad in (len(good_blob) - 8 + 1, 2**32 - 1):
        with pytest.raises(CorruptSharedBlob, match=f"header length {bad} exceeds the blob"):
            parse_shared_blob_header(good_blob[:4] + struct.pack(">I", bad) + good_blob[8:])
    with pytest.raises(CorruptSharedBlob, match="exceeds the blob"):
        parse_shared_blob_header(good_blob[: 8 + header_len - 1])


def test_header_length_limit(monkeypatch, good_blob):
    header_len = PREAMBLE.unpack_from(good_blob, 0)[1]
    monkeypatch.setattr(wal, "MAX_HEADER_BYTES", header_len - 1)
    with pytest.raises(CorruptSharedBlob, match="exceeds the blob"):
        parse_shared_blob_header(good_blob)


def test_every_truncation_is_rejected(good_blob):
    for length in range(len(good_blob)):
        with pytest.raises(CorruptSharedBlob):
            parse_shared_blob_header(good_blob[:length])


@pytest.mark.parametrize(
    "header",
    [b"", b"not json", b"{", b'{"version": 1,', b"\x80\x81\x82", b"\xff" * 4, b'{"version": 1}garbage'],
)
def test_non_json_header(header):
    with pytest.raises(CorruptSharedBlob, match="not JSON"):
        parse_shared_blob_header(craft(header))


@pytest.mark.parametrize(
    "doc",
    [
        [],
        "text",
        1,
        None,
        {},
        {"partitions": []},
        {"version": 2, "partitions": []},
        {"version": 0, "partitions": []},
        {"version": "1", "partitions": []},
        {"version": 1},
        {"version": 1, "partitions": {}},
        {"version": 1, "partitions": None},
    ],
)
def test_unsupported_shape_or_version(doc):
    with pytest.raises(CorruptSharedBlob, match="unsupported shape or version"):
        parse_shared_blob_header(craft(doc))


def test_crafted_blob_helper_is_valid():
    blob = crafted_blob([entry()])
    (s,) = parse_shared_blob_header(blob)
    assert blob[s.byte_offset : s.byte_offset + s.byte_length] == b"body"


def test_version_of_a_built_blob_is_checked(good_blob):
    header_len, header, bodies = split(good_blob)
    header["version"] = 2
    raw = json.dumps(header, separators=(",", ":")).encode()
    assert len(raw) == header_len
    with pytest.raises(CorruptSharedBlob, match="unsupported shape or version"):
        parse_shared_blob_header(craft(raw, bodies))


@pytest.mark.parametrize("item", [[], "x", 1, None])
def test_entry_not_an_object(item):
    with pytest.raises(CorruptSharedBlob, match="not an object"):
        parse_shared_blob_header(craft({"version": 1, "partitions": [item]}))


@pytest.mark.parametrize("topic", ["", "a/b", "a b", "\u00fc", ".", "..", "wal-shared", "x" * 250, None, 5, ["orders"]])
def test_invalid_topic_in_header(topic):
    with pytest.raises(CorruptSharedBlob, match="invalid partition"):
        parse_shared_blob_header(crafted_blob([entry(topic=topic)]))


def test_missing_topic_in_header():
    e = entry()
    del e["topic"]
    with pytest.raises(CorruptSharedBlob, match="invalid partition"):
        parse_shared_blob_header(crafted_blob([e]))


@pytest.mark.parametrize("partition", [-1, 2**31, True, "0", 1.0, None])
def test_invalid_partition_in_header(partition):
    with pytest.raises(CorruptSharedBlob, match="invalid partition"):
        parse_shared_blob_header(crafted_blob([entry(partition=partition)]))


@pytest.mark.parametrize("field", ["msg_count", "body_offset", "body_length"])
@pytest.mark.parametrize("value", [-1, True, False, 1.5, "4", None, [4]])
def test_non_integer_fields(field, value):
    with pytest.raises(CorruptSharedBlob, match=f"field '{field}' is not a non-negative integer"):
        parse_shared_blob_header(crafted_blob([entry(**{field: value})]))


def test_slice_before_the_bodies_is_rejected():
    # An offset that points into the preamble or the JSON header.
    for offset in (0, 7, 8, 20):
        with pytest.raises(CorruptSharedBlob, match="lies outside the blob"):
            parse_shared_blob_header(crafted_blob([entry(body_offset=offset, body_length=1)]))


@pytest.mark.parametrize("length", [5, 100, 2**40])
def test_slice_past_the_end_is_rejected(length):
    with pytest.raises(CorruptSharedBlob, match="slice of orders/0 lies outside the blob"):
        parse_shared_blob_header(crafted_blob([entry(body_length=length)], bodies=b"body"))


def test_slice_past_the_end_of_a_built_blob(good_blob):
    with pytest.raises(CorruptSharedBlob, match="lies outside the blob"):
        parse_shared_blob_header(good_blob[:-1])


def test_one_bad_entry_rejects_the_whole_header():
    with pytest.raises(CorruptSharedBlob):
        parse_shared_blob_header(crafted_blob([entry(), entry(partition=1, topic="a/b")]))


def test_unknown_header_fields_are_ignored():
    e = entry(future_field={"x": 1})
    blob = crafted_blob([e])
    (s,) = parse_shared_blob_header(blob)
    assert (s.topic, s.partition, s.msg_count, s.byte_length, s.encoding) == ("orders", 0, 1, 4, ENCODING)


def test_corrupt_shared_blob_is_corrupt_data():
    assert issubclass(CorruptSharedBlob, CorruptData)


# --- regressions: bugs found by these tests, now fixed --------------------------------


@pytest.mark.parametrize(
    "header",
    [b"[" * 100_000 + b"]" * 100_000, b'{"version":' + b"1" * 5000 + b',"partitions":[]}'],
    ids=["deeply-nested", "huge-integer"],
)
def test_hostile_json_header_is_corrupt(header):
    # json.loads raises RecursionError / ValueError (int digit limit) here.
    with pytest.raises(CorruptSharedBlob):
        parse_shared_blob_header(craft(header))


@pytest.mark.parametrize("version", [True, 1.0])
def test_version_must_be_the_integer_1(version):
    with pytest.raises(CorruptSharedBlob, match="unsupported shape or version"):
        parse_shared_blob_header(crafted_blob([entry()], version=version))


# --- fuzzing: whatever the bytes, a clear error or slices inside the blob -----


def slices_or_corrupt(blob: bytes) -> list[BlobSlice] | None:
    """Parse; ``None`` for a ``CorruptSharedBlob``. Any other exception fails the test."""
    try:
        slices = parse_shared_blob_header(blob)
    except CorruptSharedBlob:
        return None
    body_start = wal.header_length(blob)
    for s in slices:
        assert body_start <= s.byte_offset <= s.byte_offset + s.byte_length <= len(blob)
        assert s.msg_count >= 1
    return slices


def read_slices(blob: bytes, slices: list[BlobSlice]) -> None:
    """What a reader does next: each slice is a batch, or the batch codec says it is corrupt."""
    for s in slices:
        try:
            batch = decode_batch(memoryview(blob)[s.byte_offset : s.byte_offset + s.byte_length],
                                 expected_count=s.msg_count)  # fmt: skip
        except CorruptData:
            continue
        assert len(batch) == s.msg_count


@settings(max_examples=fuzz_examples(300), deadline=None)
@given(st.binary(max_size=512))
def test_arbitrary_bytes_are_a_blob_or_corrupt(blob):
    slices = slices_or_corrupt(blob)
    if slices is not None:
        read_slices(blob, slices)


@settings(max_examples=fuzz_examples(300), deadline=None)
@given(st.data())
def test_damaged_blobs_are_detected_or_stay_inside_the_blob(data):
    blob = bytearray(build_shared_blob([body_for(0, 2), body_for(1, 3, size=9)], now_ms=NOW)[0])
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(blob) - 1))
        blob[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(blob)))
    damaged = bytes(blob[:cut])
    slices = slices_or_corrupt(damaged)
    if slices is not None:
        read_slices(damaged, slices)


@settings(max_examples=fuzz_examples(200), deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
        max_leaves=30,
    )
)
def test_hostile_json_headers_are_corrupt_or_valid(doc):
    slices = slices_or_corrupt(craft({"version": 1, "partitions": [doc]}, b"x" * 64))
    for s in slices or []:
        assert s.encoding
