"""Oxia's ``Write``, ``Read`` and ``RangeScan`` calls on the wire: the sequential puts of a multi-partition
append, the gets of a consume request for many partitions, and the scans of one partition's keys.

The generated messages (``llog.store.oxia_proto``: betterproto2, pure Python) cost about
60 µs per put to build and serialize and 40 µs per answer to parse: 1.6 ms of
a 16-partition append, more than the write itself. Only the fields those puts
use are written here (``WriteRequest.shard``, ``puts``; ``PutRequest.key``,
``value``, ``partition_key``, ``sequence_key_delta``, packed); an answer is
read for ``PutResponse.status``, ``version.version_id`` and ``key``, and
every other field is skipped, as protobuf's rules require. The same holds
for ``Read``: a ``ReadRequest`` of exact-key gets (``shard``, ``gets``;
``GetRequest.key``, ``include_value``) and its answers read for
``GetResponse.status``, ``version.version_id`` and ``value``. A ``RangeScanRequest``
(``shard``, ``start_inclusive``, ``end_exclusive``) is answered by records read for
``key``, ``value`` and ``version.version_id``, and only as many as the caller
takes: the server sends the keys up to the range's end in responses of about
2 MB, and the generated messages parsed every record of one (about 70 µs
each here), so a reader far behind a sequence's tail paid for the rest of it
to take one page. Field numbers are those of Oxia's ``client.proto``
(v0.17.1); tests/unit/test_oxia_wire.py checks both directions against the
messages generated from it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

# Oxia's own service name since v0.15 (``io.streamnative.oxia.proto`` is kept by the server only for old clients).
SERVICE = "/io.oxia.proto.v1.OxiaClient/"
WRITE_METHOD = SERVICE + "Write"
READ_METHOD = SERVICE + "Read"
RANGE_SCAN_METHOD = SERVICE + "RangeScan"

T = TypeVar("T")

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
_INT64_RANGE = 1 << 64


@dataclass(frozen=True)
class SequentialPut:
    """One sequential-key put (a ``PutRequest`` of a ``WriteRequest``): the server appends the suffix
    to ``prefix_key`` after adding ``deltas`` to the sequence's highest key."""

    prefix_key: str
    value: bytes
    partition_key: str
    deltas: tuple[int, ...]


@dataclass(frozen=True)
class PutAnswer:
    """One ``PutResponse``: its status (0 is OK), the version id and the key the server chose."""

    status: int
    version_id: int
    key: str | None


@dataclass(frozen=True)
class GetAnswer:
    """One ``GetResponse``: its status (0 is OK, 1 is KEY_NOT_FOUND), the version id and the value."""

    status: int
    version_id: int
    value: bytes


@dataclass(frozen=True)
class ScannedRecord:
    """One record of a ``RangeScanResponse`` (a ``GetResponse``): its key, value and version id."""

    key: str
    value: bytes
    version_id: int


def _varint(value: int, out: bytearray) -> None:
    if value < 0:
        value += _INT64_RANGE  # int64: ten bytes of two's complement
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _field(tag: int, data: bytes | bytearray, out: bytearray) -> None:
    out.append(tag)
    _varint(len(data), out)
    out += data


def encode_write_request(shard: int, puts: Sequence[SequentialPut]) -> bytes:
    out = bytearray(b"\x08")  # field 1 (shard), varint
    _varint(shard, out)
    for put in puts:
        message = bytearray()  # proto3: an empty string or bytes field is left out
        if put.prefix_key:
            _field(0x0A, put.prefix_key.encode(), message)  # 1: key
        if put.value:
            _field(0x12, put.value, message)  # 2: value
        _field(0x32, put.partition_key.encode(), message)  # 6: partition_key
        if put.deltas:
            packed = bytearray()
            for delta in put.deltas:
                _varint(delta, packed)
            _field(0x3A, packed, message)  # 7: sequence_key_delta, packed
        _field(0x12, message, out)  # 2: puts
    return bytes(out)


def encode_read_request(shard: int, keys: Sequence[str]) -> bytes:
    """A ``ReadRequest`` getting each of ``keys`` exactly, with its value."""
    out = bytearray(b"\x08")  # field 1 (shard), varint
    _varint(shard, out)
    for key in keys:
        message = bytearray()
        if key:
            _field(0x0A, key.encode(), message)  # 1: key
        message += b"\x10\x01"  # 2: include_value = true; comparison_type EQUAL is the default, left out
        _field(0x12, message, out)  # 2: gets
    return bytes(out)


def encode_range_scan_request(shard: int, start_inclusive: str, end_exclusive: str) -> bytes:
    """A ``RangeScanRequest`` of ``[start_inclusive, end_exclusive)`` on ``shard`` (no secondary index)."""
    out = bytearray(b"\x08")  # field 1 (shard), varint
    _varint(shard, out)
    if start_inclusive:
        _field(0x12, start_inclusive.encode(), out)  # 2: start_inclusive
    if end_exclusive:
        _field(0x1A, end_exclusive.encode(), out)  # 3: end_exclusive
    return bytes(out)


def _varint_at(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` and where the bytes after it start."""
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise ValueError("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _field_at(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """The field at ``pos``: its tag (number << 3 | wire type), its value and where the next field starts.

    The value is a varint's value, where a length-delimited field's bytes start (they end where the next
    field starts), or 0 for a fixed-width field, which nothing here reads. One call per field, with the
    one-byte tags, statuses and lengths taken without the varint loop: an answer is a dozen fields.
    """
    tag = data[pos]
    pos += 1
    if tag >= 0x80:
        tag, pos = _varint_at(data, pos - 1, end)
    wire_type = tag & 7
    if wire_type == _VARINT:
        if pos < end and data[pos] < 0x80:
            return tag, data[pos], pos + 1
        value, pos = _varint_at(data, pos, end)
        return tag, value, pos
    if wire_type == _LEN:
        if pos < end and (length := data[pos]) < 0x80:
            pos += 1
        else:
            length, pos = _varint_at(data, pos, end)
        if pos + length > end:
            raise ValueError("truncated length-delimited field")
        return tag, pos, pos + length
    if wire_type in (_FIXED64, _FIXED32):
        pos += 8 if wire_type == _FIXED64 else 4
        if pos > end:
            raise ValueError("truncated fixed-width field")
        return tag, 0, pos
    raise ValueError(f"unsupported wire type {wire_type}")


def _int64(value: int) -> int:
    return value - _INT64_RANGE if value >= 1 << 63 else value


def _version_id(data: bytes, pos: int, end: int) -> int:
    version_id = 0
    while pos < end:
        tag, value, pos = _field_at(data, pos, end)
        if tag == 0x08:  # 1: version_id, varint
            version_id = _int64(value)
    return version_id


Span = tuple[int, int]
"""Where a length-delimited field's bytes start and end."""


def _answer(data: bytes, pos: int, end: int) -> tuple[int, int, Span | None, Span | None]:
    """A ``PutResponse`` or ``GetResponse``: status (1), ``version.version_id`` (2), field 3 (the key of
    a put's answer, the value of a get's) and field 4 (a get's key), None when absent."""
    status, version_id, third, fourth = 0, 0, None, None
    while pos < end:
        tag, value, after = _field_at(data, pos, end)
        if tag == 0x08:  # 1: status, varint
            status = value
        elif tag == 0x12:  # 2: version
            version_id = _version_id(data, value, after)
        elif tag == 0x1A:  # 3
            third = (value, after)
        elif tag == 0x22:  # 4
            fourth = (value, after)
        pos = after
    return status, version_id, third, fourth


def _put_answer(data: bytes, pos: int, end: int) -> PutAnswer:
    status, version_id, key, _ = _answer(data, pos, end)
    return PutAnswer(status, version_id, None if key is None else str(data[key[0] : key[1]], "utf-8"))


def _get_answer(data: bytes, pos: int, end: int) -> GetAnswer:
    status, version_id, value, _ = _answer(data, pos, end)
    return GetAnswer(status, version_id, b"" if value is None else data[value[0] : value[1]])


def _answers(data: bytes, parse: Callable[[bytes, int, int], T], limit: int | None = None) -> list[T]:
    """Field 1 of a ``WriteResponse`` (``puts``), ``ReadResponse`` (``gets``) or ``RangeScanResponse``
    (``records``), each parsed, in order; only the first ``limit`` (default: all), the rest not read."""
    answers: list[T] = []
    pos, end = 0, len(data)
    while pos < end and (limit is None or len(answers) < limit):
        tag, value, after = _field_at(data, pos, end)
        if tag == 0x0A:  # 1, length-delimited
            answers.append(parse(data, value, after))
        pos = after
    return answers


def decode_write_response(data: bytes) -> list[PutAnswer]:
    """The ``puts`` of a ``WriteResponse``, in order; raises ``ValueError`` on bytes that are not one."""
    return _answers(data, _put_answer)


def decode_read_response(data: bytes) -> list[GetAnswer]:
    """The ``gets`` of one ``ReadResponse`` (a read's answers may come in several); raises ``ValueError``."""
    return _answers(data, _get_answer)


def _scanned_record(data: bytes, pos: int, end: int) -> ScannedRecord:
    """A ``GetResponse`` of a scan (its status is always OK): key, value and version id."""
    _, version_id, value, key = _answer(data, pos, end)
    return ScannedRecord(
        "" if key is None else str(data[key[0] : key[1]], "utf-8"),
        b"" if value is None else data[value[0] : value[1]],
        version_id,
    )


def decode_range_scan_response(data: bytes, limit: int | None = None) -> list[ScannedRecord]:
    """The first ``limit`` (default: all) ``records`` of one ``RangeScanResponse``; the bytes after them are not
    read. Raises ``ValueError`` on bytes that are not one."""
    return _answers(data, _scanned_record, limit)
