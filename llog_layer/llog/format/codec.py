"""The ``bytes-batch-v1`` record batch format (byte layout in docs/FORMAT.md).

A batch stores N records column by column: a fixed header, then sections of
timestamps, value offsets and value bytes, and optionally keys and headers in
the same offsets-plus-bytes shape. Offsets are Arrow-compatible (int32, N+1
entries, starting at 0), so a decoder never loops over records in Python: it
checks the header, the CRC32C and the section bounds once, then serves record
``i`` by slicing. Arrow (Spark jobs) can wrap the same buffers without copying.

All integers are little-endian; every section starts on an 8-byte boundary.
"""

from __future__ import annotations

import struct
import sys
import time
from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate, repeat
from operator import add, le, sub
from typing import Literal, cast

# crc32c (not google-crc32c) because it reads any buffer: the check runs on
# the received bytes in place instead of on a copy of the body.
from crc32c import crc32c

from llog.errors import BatchTooLarge, CorruptBatch, InvalidArgument

ENCODING = "bytes-batch-v1"
MAGIC = b"LLBB"
VERSION = 1
HEADER = struct.Struct("<4sHHIIQII")  # magic, version, flags, count, body_length, reserved (12 bytes), crc32c
HEADER_SIZE = HEADER.size  # 32
CRC_POSITION = HEADER_SIZE - 4

FLAG_KEYS = 0x1  # key offsets and key bytes are present
FLAG_KEY_NULLS = 0x2  # a validity bitmap marks which records have a key
FLAG_HEADERS = 0x4  # header offsets and header bytes are present
_KNOWN_FLAGS = FLAG_KEYS | FLAG_KEY_NULLS | FLAG_HEADERS

MAX_RECORDS = 2**31 - 2
MAX_SECTION_BYTES = 2**31 - 1  # int32 offsets
_HEADER_ENTRY = struct.Struct("<HI")  # name length, value length
_LITTLE_ENDIAN = sys.byteorder == "little"

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class Record:
    """One record: payload bytes plus optional key, headers and timestamp (ms since epoch)."""

    value: bytes
    key: bytes | None = None
    headers: Headers = ()
    timestamp_ms: int | None = None


def _pad(n: int) -> int:
    return -n % 8


_PADDING = tuple(bytes(_pad(n)) for n in range(8))  # the zeros after a section of n bytes (mod 8)


def _int_array(typecode: Literal["i", "q"], data: memoryview | bytes) -> memoryview | array[int]:
    """View little-endian integers without copying (copy + swap on big-endian hosts)."""
    if _LITTLE_ENDIAN:
        return memoryview(data).cast("B").cast(typecode)
    swapped = array(typecode, bytes(data))
    swapped.byteswap()
    return swapped


def _offsets(lengths: Sequence[int], what: str) -> bytes:
    ends = list(accumulate(lengths, initial=0))
    if ends[-1] > MAX_SECTION_BYTES:
        raise BatchTooLarge(f"{what} total {ends[-1]} bytes exceeds the {MAX_SECTION_BYTES}-byte limit of a batch")
    offsets = array("i", ends)
    if not _LITTLE_ENDIAN:
        offsets.byteswap()
    return offsets.tobytes()


def encode_headers(headers: Headers) -> bytes:
    """Encode one record's headers: u16 count, then (u16 name len, u32 value len, name, value)*."""
    if len(headers) > 0xFFFF:
        raise BatchTooLarge(f"a record has {len(headers)} headers; at most 65535 are allowed")
    parts = [struct.pack("<H", len(headers))]
    for name, value in headers:
        raw_name = name.encode("utf-8")
        if len(raw_name) > 0xFFFF:
            raise BatchTooLarge("a header name exceeds 65535 bytes")
        parts.append(_HEADER_ENTRY.pack(len(raw_name), len(value)))
        parts.append(raw_name)
        parts.append(_as_bytes(value))
    return b"".join(parts)


def headers_bytes(headers: Headers) -> int:
    """The bytes of the headers' names and values."""
    return sum(len(name) + len(value) for name, value in headers)


def decode_headers(raw: bytes | memoryview) -> Headers:
    """Inverse of ``encode_headers``; raises ``CorruptBatch`` on malformed input."""
    view = memoryview(raw)
    if len(view) < 2:
        raise CorruptBatch("record headers are truncated")
    (count,) = struct.unpack_from("<H", view, 0)
    pos = 2
    out = []
    try:
        for _ in range(count):
            name_len, value_len = _HEADER_ENTRY.unpack_from(view, pos)
            pos += _HEADER_ENTRY.size
            end = pos + name_len + value_len
            if end > len(view):
                raise CorruptBatch("record headers are truncated")
            name = bytes(view[pos : pos + name_len]).decode("utf-8")
            out.append((name, bytes(view[pos + name_len : end])))
            pos = end
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptBatch(f"record headers are malformed: {exc}") from None
    if pos != len(view):
        raise CorruptBatch("record headers have trailing bytes")
    return tuple(out)


def check_record(record: Record) -> None:
    """Raise ``InvalidArgument`` unless the record's fields have encodable types and ranges."""
    if not isinstance(record.value, (bytes, bytearray, memoryview)):
        raise InvalidArgument(f"record value must be bytes, got {type(record.value).__name__}")
    if record.key is not None and not isinstance(record.key, (bytes, bytearray, memoryview)):
        raise InvalidArgument(f"record key must be bytes or None, got {type(record.key).__name__}")
    ts = record.timestamp_ms
    if ts is not None and (isinstance(ts, bool) or not isinstance(ts, int) or not -(2**63) <= ts < 2**63):
        raise InvalidArgument(f"record timestamp_ms must be a 64-bit integer, got {ts!r}")
    if not isinstance(record.headers, (tuple, list)):
        raise InvalidArgument(f"record headers must be a sequence of (name, value) pairs, got {record.headers!r}")
    for header in record.headers:
        if not isinstance(header, (tuple, list)) or len(header) != 2:
            raise InvalidArgument(f"a record header must be a (name, value) pair, got {header!r}")
        name, value = header
        if not isinstance(name, str) or not isinstance(value, (bytes, bytearray, memoryview)):
            raise InvalidArgument(
                f"a record header must be (str, bytes), got ({type(name).__name__}, {type(value).__name__})"
            )
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgument(f"header name {name!r} is not valid Unicode") from None


def values_only(records: Sequence[Record | bytes]) -> bool:
    """Whether every record is a plain ``bytes`` value, as most produced records are: told by ``map`` in C,
    with no Python step per record (the records of a 100 KB request are looked at several times)."""
    return set(map(type, records)) == {bytes}


def check_records(records: Sequence[Record | bytes]) -> None:
    """``check_record`` over a batch's records; a plain ``bytes`` record (a value alone) is always valid."""
    if values_only(records):
        return
    for record in records:
        if type(record) is not bytes:
            check_record(record if isinstance(record, Record) else Record(record))


def records_bytes(records: Sequence[Record | bytes]) -> int:
    """The bytes of the records' values, keys and header names and values: what a producer sent."""
    if values_only(records):
        return sum(map(len, cast("Sequence[bytes]", records)))
    total = 0
    for record in records:
        if type(record) is bytes:
            total += len(record)
        elif isinstance(record, Record):
            total += len(record.value) + len(record.key or b"") + headers_bytes(record.headers)
        else:
            total += len(record)
    return total


_DIGEST_RECORD = struct.Struct("<BqiI")  # flags (1: key, 2: timestamp), timestamp, key length, value length


def records_digest(records: Sequence[Record | bytes]) -> int:
    """A CRC-32C of the records as the producer sent them: values, keys, headers, explicit timestamps.

    An idempotent producer's state remembers it per batch (docs/IDEMPOTENCE.md), so that a retry is
    told from another batch under the same sequences. A record without a timestamp digests the same
    in every attempt (the append time is not part of it), and a ``Record`` with a value alone the
    same as its ``bytes``. Values alone take one CRC over their lengths and one over their bytes,
    with no Python step per record.
    """
    recs = None if values_only(records) else [r if isinstance(r, Record) else Record(r) for r in records]
    if recs is None or all(r.key is None and not r.headers and r.timestamp_ms is None for r in recs):
        values = cast("Sequence[bytes]", records) if recs is None else [_as_bytes(r.value) for r in recs]
        return crc32c(b"".join(values), value=crc32c(_offsets(list(map(len, values)), "values")))
    crc = crc32c(b"records")  # sets these apart from the values-alone form
    for record in recs:
        key = b"" if record.key is None else _as_bytes(record.key)
        value = _as_bytes(record.value)
        flags = (record.key is not None) | (record.timestamp_ms is not None) << 1
        head = _DIGEST_RECORD.pack(flags, record.timestamp_ms or 0, len(key), len(value))
        crc = crc32c(value, value=crc32c(key, value=crc32c(head, value=crc)))
        crc = crc32c(encode_headers(record.headers), value=crc)
    return crc


def _timestamps(values: list[int]) -> array[int]:
    try:
        return array("q", values)
    except (OverflowError, TypeError) as exc:
        raise InvalidArgument(f"record timestamps must be 64-bit integers: {exc}") from None


def _as_bytes(data: bytes | bytearray | memoryview) -> bytes:
    # len() of a memoryview counts items, not bytes: normalise before measuring.
    return data if type(data) is bytes else bytes(data)


def encode_batch(records: Sequence[Record | bytes], *, now_ms: int | None = None) -> bytes:
    """Encode records into one ``bytes-batch-v1`` batch.

    Plain ``bytes`` are records without key or headers. Records without a
    timestamp get ``now_ms`` (default: the current time).
    """
    count = len(records)
    if count == 0:
        raise InvalidArgument("a batch needs at least one record")
    if count > MAX_RECORDS:
        raise BatchTooLarge(f"a batch holds at most {MAX_RECORDS} records")
    default_ts = int(time.time() * 1000) if now_ms is None else now_ms
    flags = 0
    extra: list[bytes] = []  # the key and header sections
    if values_only(records):
        # Values alone (a produce request's plain records): nothing to check, no keys, no headers.
        values = cast("Sequence[bytes]", records)
        timestamps = _timestamps([default_ts]) * count
    else:
        recs = [r if isinstance(r, Record) else Record(r) for r in records]
        for r in recs:
            check_record(r)
        values = [_as_bytes(r.value) for r in recs]
        timestamps = _timestamps([default_ts if r.timestamp_ms is None else r.timestamp_ms for r in recs])
        keys = [None if r.key is None else _as_bytes(r.key) for r in recs]
        if any(k is not None for k in keys):
            flags |= FLAG_KEYS
            key_bytes = [b"" if k is None else k for k in keys]
            if any(k is None for k in keys):
                flags |= FLAG_KEY_NULLS
                bitmap = bytearray((count + 7) // 8)
                for i, k in enumerate(keys):
                    if k is not None:
                        bitmap[i >> 3] |= 1 << (i & 7)
                extra.append(bytes(bitmap))
            extra.append(_offsets([len(k) for k in key_bytes], "keys"))
            extra.append(b"".join(key_bytes))
        if any(r.headers for r in recs):
            flags |= FLAG_HEADERS
            encoded = [encode_headers(r.headers) for r in recs]
            extra.append(_offsets([len(h) for h in encoded], "headers"))
            extra.append(b"".join(encoded))
    if not _LITTLE_ENDIAN:
        timestamps.byteswap()
    sections = [timestamps.tobytes(), _offsets(list(map(len, values)), "values"), b"".join(values), *extra]

    # The checksum is taken over the sections where they lie, so that they and the header are joined in one
    # copy, not two: a flush of a few MB pays for each copy of its bytes (docs/PERFORMANCE_NOTES.md).
    body_parts = []
    for section in sections:
        body_parts.append(section)
        if padding := _PADDING[len(section) & 7]:
            body_parts.append(padding)
    head = HEADER.pack(MAGIC, VERSION, flags, count, sum(map(len, body_parts)), 0, 0, 0)[:CRC_POSITION]
    crc = crc32c(head)
    for part in body_parts:
        crc = crc32c(part, value=crc)
    return b"".join([head, struct.pack("<I", crc), *body_parts])


class _Column:
    """An offsets + bytes section pair; ``get(i)`` checks bounds on every access.

    When the batch arrived as ``bytes``, ``get`` slices that object directly
    (``source``, with the section at ``base``): one allocation per record
    instead of a memoryview and a copy of it, about 3x faster for 1 KiB values.
    """

    __slots__ = ("base", "data", "name", "offsets", "source")

    def __init__(
        self, offsets: memoryview | array[int], data: memoryview, name: str, source: bytes | None, base: int
    ) -> None:
        self.offsets = offsets
        self.data = data
        self.name = name
        self.source = source
        self.base = base

    def get(self, i: int) -> bytes:
        start, end = self.offsets[i], self.offsets[i + 1]
        if not 0 <= start <= end <= len(self.data):
            raise CorruptBatch(f"{self.name} offsets of record {i} are out of bounds")
        if self.source is not None:
            return self.source[self.base + start : self.base + end]
        return bytes(self.data[start:end])

    def _bounds(self, start: int, stop: int, base: int = 0) -> tuple[list[int], list[int]]:
        """Where records ``start`` to ``stop - 1`` begin and end (plus ``base``), checked at once, in C."""
        offsets: list[int] = self.offsets[start : stop + 1].tolist()
        if base:
            offsets = list(map(add, offsets, repeat(base)))
        begins, ends = offsets[:-1], offsets[1:]
        if begins and not (begins[0] >= base and ends[-1] <= base + len(self.data) and all(map(le, begins, ends))):
            raise CorruptBatch(f"{self.name} offsets of records {start} to {stop - 1} are out of bounds")
        return begins, ends

    def get_range(self, start: int, stop: int) -> list[bytes]:
        """``get(i)`` for ``start <= i < stop``, each slice cut in C: no Python step per record."""
        if self.source is None:
            begins, ends = self._bounds(start, stop)
            return [bytes(self.data[b:e]) for b, e in zip(begins, ends, strict=True)]
        begins, ends = self._bounds(start, stop, self.base)
        return list(map(self.source.__getitem__, map(slice, begins, ends)))

    def lengths(self, start: int, stop: int) -> list[int]:
        """``len(get(i))`` for ``start <= i < stop``, from the offsets alone."""
        begins, ends = self._bounds(start, stop)
        return list(map(sub, ends, begins))


@dataclass(frozen=True, slots=True)
class BinaryColumn:
    """An Arrow ``binary`` layout: ``count + 1`` int32 offsets into ``data``, optional LSB validity bitmap."""

    offsets: Sequence[int]
    data: memoryview
    validity: memoryview | None = None


@dataclass(frozen=True, slots=True)
class BatchColumns:
    """The raw sections of a batch, for building columnar (Arrow) arrays without copying.

    ``timestamps`` holds ``count`` int64 milliseconds. ``headers``, when present,
    holds each record's headers encoded as by :func:`encode_headers`.
    """

    count: int
    timestamps: Sequence[int]
    values: BinaryColumn
    keys: BinaryColumn | None
    headers: BinaryColumn | None


class RecordBatch:
    """A decoded batch: validated once, records served by index without copying the batch."""

    __slots__ = ("_count", "_decoded_headers", "_headers", "_key_validity", "_keys", "_raw", "_timestamps", "_values")

    def __init__(self, data: bytes | bytearray | memoryview, *, checksum: bool = True) -> None:
        raw = memoryview(data).cast("B")
        source = data if type(data) is bytes else None
        if len(raw) < HEADER_SIZE:
            raise CorruptBatch(f"batch is {len(raw)} bytes, shorter than its {HEADER_SIZE}-byte header")
        magic, version, flags, count, body_length, _reserved, _reserved2, crc = HEADER.unpack_from(raw, 0)
        if magic != MAGIC:
            raise CorruptBatch(f"not a {ENCODING} batch (magic {bytes(magic)!r})")
        if version != VERSION:
            raise CorruptBatch(f"unsupported batch version {version}")
        if flags & ~_KNOWN_FLAGS:
            raise CorruptBatch(f"unknown batch flags {flags:#x}")
        if body_length != len(raw) - HEADER_SIZE:
            raise CorruptBatch(f"batch body is {len(raw) - HEADER_SIZE} bytes, header says {body_length}")
        actual = crc32c(raw[HEADER_SIZE:], value=crc32c(raw[:CRC_POSITION])) if checksum else crc
        if actual != crc:
            raise CorruptBatch(f"batch checksum mismatch (stored {crc:#010x}, computed {actual:#010x})")
        if count == 0 or count > MAX_RECORDS:
            raise CorruptBatch(f"batch record count {count} is invalid")
        self._raw = raw
        self._count = int(count)
        pos = HEADER_SIZE

        def take(size: int, what: str) -> memoryview:
            nonlocal pos
            end = pos + size
            if end + _pad(size) > len(raw):
                raise CorruptBatch(f"batch {what} section is truncated")
            section = raw[pos:end]
            pos = end + _pad(size)
            return section

        def column(name: str) -> _Column:
            offsets = _int_array("i", take(4 * (count + 1), f"{name} offsets"))
            if offsets[0] != 0 or offsets[count] < 0:
                raise CorruptBatch(f"batch {name} offsets are invalid")
            base = pos
            return _Column(offsets, take(offsets[count], name), name, source, base)

        self._timestamps = _int_array("q", take(8 * count, "timestamp"))
        self._values = column("value")
        self._key_validity: memoryview | None = None
        self._keys: _Column | None = None
        if flags & FLAG_KEYS:
            if flags & FLAG_KEY_NULLS:
                self._key_validity = take((count + 7) // 8, "key validity")
            self._keys = column("key")
        elif flags & FLAG_KEY_NULLS:
            raise CorruptBatch("batch flags mark key nulls without keys")
        self._headers = column("header") if flags & FLAG_HEADERS else None
        self._decoded_headers: tuple[int, list[Headers]] | None = None  # the last range decoded, from its start
        if pos != len(raw):
            raise CorruptBatch(f"batch has {len(raw) - pos} trailing bytes")

    def __len__(self) -> int:
        return self._count

    def _check(self, i: int) -> int:
        if not 0 <= i < self._count:
            raise IndexError(f"record {i} is outside a batch of {self._count}")
        return i

    def value(self, i: int) -> bytes:
        return self._values.get(self._check(i))

    def timestamp_ms(self, i: int) -> int:
        return int(self._timestamps[self._check(i)])

    def key(self, i: int) -> bytes | None:
        self._check(i)
        if self._keys is None:
            return None
        if self._key_validity is not None and not (self._key_validity[i >> 3] >> (i & 7)) & 1:
            return None
        return self._keys.get(i)

    def headers(self, i: int) -> Headers:
        self._check(i)
        return () if self._headers is None else decode_headers(self._headers.get(i))

    def record(self, i: int) -> Record:
        return Record(self.value(i), self.key(i), self.headers(i), self.timestamp_ms(i))

    # Records ``start`` to ``stop - 1`` (``stop`` defaults to the end) at once: what ``value(i)`` and the
    # others give one by one, for a reader taking many records, at a fraction of the per-record cost.

    def _stop(self, start: int, stop: int | None) -> int:
        stop = self._count if stop is None else stop
        if not 0 <= start <= stop <= self._count:
            raise IndexError(f"records {start} to {stop - 1} are outside a batch of {self._count}")
        return stop

    def values_in(self, start: int = 0, stop: int | None = None) -> list[bytes]:
        return self._values.get_range(start, self._stop(start, stop))

    def keys_in(self, start: int = 0, stop: int | None = None) -> list[bytes | None]:
        stop = self._stop(start, stop)
        if self._keys is None:
            return [None] * (stop - start)
        keys: list[bytes | None] = list(self._keys.get_range(start, stop))
        validity = self._key_validity
        if validity is not None:
            for i in range(start, stop):
                if not (validity[i >> 3] >> (i & 7)) & 1:
                    keys[i - start] = None
        return keys

    def headers_in(self, start: int = 0, stop: int | None = None) -> list[Headers]:
        stop = self._stop(start, stop)
        if self._headers is None:
            return [()] * (stop - start)
        # A reader sizes the records it may take (``fitting``), then takes them: decoded once for both.
        cached = self._decoded_headers
        if cached is not None and cached[0] <= start and stop <= cached[0] + len(cached[1]):
            return cached[1][start - cached[0] : stop - cached[0]]
        decoded = list(map(decode_headers, self._headers.get_range(start, stop)))
        self._decoded_headers = (start, decoded)
        return decoded

    def timestamps_in(self, start: int = 0, stop: int | None = None) -> list[int]:
        timestamps: list[int] = self._timestamps[start : self._stop(start, stop)].tolist()
        return timestamps

    def sizes_in(self, start: int = 0, stop: int | None = None, *, headers: bool = True) -> list[int]:
        """Each record's value, key and header bytes (names and values): what a producer sent, as
        ``records_bytes`` counts it. The values are measured from their offsets, not copied; without
        ``headers``, the headers are left out (and not decoded)."""
        stop = self._stop(start, stop)
        sizes = self._values.lengths(start, stop)
        if self._keys is not None:
            sizes = [n + (0 if k is None else len(k)) for n, k in zip(sizes, self.keys_in(start, stop), strict=True)]
        if headers and self._headers is not None:
            sizes = list(map(add, sizes, map(headers_bytes, self.headers_in(start, stop))))
        return sizes

    def fitting(self, start: int, room: int) -> tuple[int, int]:
        """How many records from ``start`` on fit in ``room`` bytes (``sizes_in``), and their bytes.

        Headers are decoded only for the records that fit without them: a reader taking a few records
        of a large batch does not decode the rest."""
        sizes = self.sizes_in(start, headers=False)
        if self._headers is not None:
            may_fit = bisect_right(list(accumulate(sizes)), room)
            sizes = list(map(add, sizes[:may_fit], map(headers_bytes, self.headers_in(start, start + may_fit))))
        totals = list(accumulate(sizes, initial=0))
        count = bisect_right(totals, room, lo=1) - 1
        return count, totals[count]

    def __iter__(self) -> Iterator[Record]:
        return (self.record(i) for i in range(self._count))

    @property
    def nbytes(self) -> int:
        return len(self._raw)

    def encoded(self) -> bytes:
        """The batch's bytes: the ``bytes`` it was opened from, if it was opened from exactly those, else a copy
        (a batch opened from a view into a larger buffer, such as a whole S3 object, would keep all of it)."""
        source = self._raw.obj
        if type(source) is bytes and len(source) == len(self._raw):
            return source
        return bytes(self._raw)

    def columns(self) -> BatchColumns:
        """The sections as checked when the batch was opened (header, CRC, section bounds).

        Each column's first offset is 0 and its last is its data length; that the
        offsets between never decrease is left to the consumer, which checks it in
        bulk (Arrow: ``Array.validate(full=True)``) instead of per record here.
        """

        def binary(column: _Column, validity: memoryview | None = None) -> BinaryColumn:
            return BinaryColumn(column.offsets, column.data, validity)

        return BatchColumns(
            self._count,
            self._timestamps,
            binary(self._values),
            None if self._keys is None else binary(self._keys, self._key_validity),
            None if self._headers is None else binary(self._headers),
        )


def batch_record_count(batch: bytes | bytearray | memoryview) -> int:
    """The record count in an encoded batch's header. For batches this process just encoded: no CRC check."""
    if len(batch) < HEADER_SIZE:
        raise CorruptBatch(f"batch is {len(batch)} bytes, shorter than its {HEADER_SIZE}-byte header")
    return int(HEADER.unpack_from(batch, 0)[3])


def batch_time_span(batch: bytes | bytearray | memoryview) -> tuple[int, int]:
    """The least and greatest record timestamp of an encoded batch, read from its timestamp section alone.

    For batches this process just encoded (the writer, the compactor): it does
    not check the CRC. Raises ``CorruptBatch`` on a batch too short to hold it.
    """
    raw = memoryview(batch).cast("B")
    if len(raw) < HEADER_SIZE:
        raise CorruptBatch(f"batch is {len(raw)} bytes, shorter than its {HEADER_SIZE}-byte header")
    count = HEADER.unpack_from(raw, 0)[3]
    if count == 0 or len(raw) < HEADER_SIZE + 8 * count:
        raise CorruptBatch(f"batch of {count} records has no room for its timestamps")
    timestamps = _int_array("q", raw[HEADER_SIZE : HEADER_SIZE + 8 * count])
    return min(timestamps), max(timestamps)


def decode_batch(
    data: bytes | bytearray | memoryview, *, expected_count: int | None = None, checksum: bool = True
) -> RecordBatch:
    """Validate and open a batch; ``expected_count`` cross-checks the index entry.

    ``checksum=False`` skips the CRC32C (every other check stays), for bytes this process checked or
    encoded itself, such as a cache's.
    """
    batch = RecordBatch(data, checksum=checksum)
    if expected_count is not None and len(batch) != expected_count:
        raise CorruptBatch(f"batch holds {len(batch)} records, its index entry says {expected_count}")
    return batch
