"""Oxia's ``Write``, ``Read`` and ``RangeScan`` calls on the wire: the sequential puts of a multi-partition
append, the gets of a consume request for many partitions, and the scans of one partition's keys.

The Oxia client's generated messages (betterproto2, pure Python) cost about
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
client's own messages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

WRITE_METHOD = "/io.streamnative.oxia.proto.OxiaClient/Write"
READ_METHOD = "/io.streamnative.oxia.proto.OxiaClient/Read"
RANGE_SCAN_METHOD = "/io.streamnative.oxia.proto.OxiaClient/RangeScan"

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


class _Reader:
    """Reads fields from ``pos`` to ``end``; the loops read ``pos < end`` themselves (a call per field would
    cost as much as the field)."""

    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes | memoryview) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.end = len(self.data)

    def varint(self) -> int:
        pos = self.pos
        if pos < self.end:
            byte = self.data[pos]
            if byte < 0x80:  # a tag, a status, a short length: one byte
                self.pos = pos + 1
                return byte
        return self._long_varint()

    def _long_varint(self) -> int:
        value = shift = 0
        while True:
            if self.pos >= self.end or shift > 63:
                raise ValueError("truncated or overlong varint")
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def field(self) -> tuple[int, int]:
        pos = self.pos
        if pos < self.end and (key := self.data[pos]) < 0x80:  # field numbers below 16: a tag of one byte
            self.pos = pos + 1
        else:
            key = self._long_varint()
        return key >> 3, key & 7

    def length_delimited(self) -> memoryview:
        n = self.varint()
        end = self.pos + n
        if end > self.end:
            raise ValueError("truncated length-delimited field")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def skip(self, wire_type: int) -> None:
        if wire_type == _VARINT:
            self.varint()
        elif wire_type == _LEN:
            self.length_delimited()
        elif wire_type in (_FIXED64, _FIXED32):
            self.pos += 8 if wire_type == _FIXED64 else 4
            if self.pos > self.end:
                raise ValueError("truncated fixed-width field")
        else:
            raise ValueError(f"unsupported wire type {wire_type}")


def _int64(value: int) -> int:
    return value - _INT64_RANGE if value >= 1 << 63 else value


def _version_id(data: memoryview) -> int:
    reader, version_id = _Reader(data), 0
    while reader.pos < reader.end:
        number, wire_type = reader.field()
        if number == 1 and wire_type == _VARINT:
            version_id = _int64(reader.varint())
        else:
            reader.skip(wire_type)
    return version_id


def _answer(data: memoryview) -> tuple[int, int, memoryview | None, memoryview | None]:
    """A ``PutResponse`` or ``GetResponse``: status (1), ``version.version_id`` (2), field 3 (the key of
    a put's answer, the value of a get's) and field 4 (a get's key), None when absent."""
    reader = _Reader(data)
    status, version_id, third, fourth = 0, 0, None, None
    while reader.pos < reader.end:
        number, wire_type = reader.field()
        if number == 1 and wire_type == _VARINT:
            status = reader.varint()
        elif number == 2 and wire_type == _LEN:
            version_id = _version_id(reader.length_delimited())
        elif number == 3 and wire_type == _LEN:
            third = reader.length_delimited()
        elif number == 4 and wire_type == _LEN:
            fourth = reader.length_delimited()
        else:
            reader.skip(wire_type)
    return status, version_id, third, fourth


def _put_answer(data: memoryview) -> PutAnswer:
    status, version_id, key, _ = _answer(data)
    return PutAnswer(status, version_id, None if key is None else str(key, "utf-8"))


def _get_answer(data: memoryview) -> GetAnswer:
    status, version_id, value, _ = _answer(data)
    return GetAnswer(status, version_id, b"" if value is None else bytes(value))


def _answers(data: bytes, parse: Callable[[memoryview], T], limit: int | None = None) -> list[T]:
    """Field 1 of a ``WriteResponse`` (``puts``), ``ReadResponse`` (``gets``) or ``RangeScanResponse``
    (``records``), each parsed, in order; only the first ``limit`` (default: all), the rest not read."""
    reader = _Reader(data)
    answers: list[T] = []
    while reader.pos < reader.end and (limit is None or len(answers) < limit):
        number, wire_type = reader.field()
        if number == 1 and wire_type == _LEN:
            answers.append(parse(reader.length_delimited()))
        else:
            reader.skip(wire_type)
    return answers


def decode_write_response(data: bytes) -> list[PutAnswer]:
    """The ``puts`` of a ``WriteResponse``, in order; raises ``ValueError`` on bytes that are not one."""
    return _answers(data, _put_answer)


def decode_read_response(data: bytes) -> list[GetAnswer]:
    """The ``gets`` of one ``ReadResponse`` (a read's answers may come in several); raises ``ValueError``."""
    return _answers(data, _get_answer)


def _scanned_record(data: memoryview) -> ScannedRecord:
    """A ``GetResponse`` of a scan (its status is always OK): key, value and version id."""
    _, version_id, value, key = _answer(data)
    return ScannedRecord("" if key is None else str(key, "utf-8"), b"" if value is None else bytes(value), version_id)


def decode_range_scan_response(data: bytes, limit: int | None = None) -> list[ScannedRecord]:
    """The first ``limit`` (default: all) ``records`` of one ``RangeScanResponse``; the bytes after them are not
    read. Raises ``ValueError`` on bytes that are not one."""
    return _answers(data, _scanned_record, limit)
