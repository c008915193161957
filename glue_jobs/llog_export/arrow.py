"""``bytes-batch-v1`` to Arrow: one compacted object becomes one Arrow record batch.

The codec's value and key sections already have Arrow's binary layout (int32
offsets from 0, LSB validity bitmap), so they are wrapped, not copied; Arrow
then validates every offset in C++ (``validate(full=True)``). Headers, an
optional per-record encoding, are parsed with array operations, one round
per header position rather than a loop per record. Timestamps are any
int64 milliseconds; one outside the years 1-9999 (a producer's mistake) exports
as ``NULL`` in the ``unknown`` date partition rather than stopping the export.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from llog.errors import CorruptBatch
from llog.format.codec import BinaryColumn, RecordBatch

MS_PER_DAY = 86_400_000
EPOCH = dt.date(1970, 1, 1)
MIN_TIMESTAMP_MS = int(dt.datetime(1, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)
MAX_TIMESTAMP_MS = int(dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=dt.UTC).timestamp() * 1000)
UNKNOWN_DATE = "unknown"  # the date partition of records whose timestamp no calendar date can hold
_UNKNOWN_DAY = np.iinfo(np.int64).min

HEADER_TYPE = pa.struct([pa.field("name", pa.string(), nullable=False), pa.field("value", pa.binary(), nullable=False)])

# Row layout of the exported table; ``topic`` and ``date`` (yyyy-MM-dd, UTC) become partition directories.
SCHEMA = pa.schema(
    [
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),  # NULL when outside years 1-9999
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary(), nullable=False),
        pa.field("headers", pa.list_(HEADER_TYPE), nullable=False),
        pa.field("topic_id", pa.string()),  # the topic's incarnation; NULL for the legacy folder (docs/FORMAT.md)
        pa.field("topic", pa.string(), nullable=False),
        pa.field("date", pa.string(), nullable=False),
    ]
)

# The same layout as a Spark DDL string (mapInArrow's output schema).
SPARK_SCHEMA = (
    "partition INT, offset BIGINT, timestamp TIMESTAMP, key BINARY, value BINARY, "
    "headers ARRAY<STRUCT<name: STRING, value: BINARY>>, topic_id STRING, topic STRING, date STRING"
)


def _binary(column: BinaryColumn, count: int) -> pa.Array:
    validity = None if column.validity is None else pa.py_buffer(column.validity)
    array = pa.Array.from_buffers(
        pa.binary(), count, [validity, pa.py_buffer(column.offsets), pa.py_buffer(column.data)]
    )
    try:
        array.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise CorruptBatch(f"batch column is not a valid binary array: {exc}") from None
    return array


Int64s = npt.NDArray[np.int64]


def _u16(data: npt.NDArray[np.uint8], at: Int64s) -> Int64s:
    """Little-endian uint16 at each position of ``at``."""
    value: Int64s = data[at].astype(np.int64) | (data[at + 1].astype(np.int64) << 8)
    return value


def _u32(data: npt.NDArray[np.uint8], at: Int64s) -> Int64s:
    value: Int64s = _u16(data, at) | (_u16(data, at + 2) << 16)
    return value


def _gather(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[pa.Buffer, pa.Buffer]:
    """Arrow offsets and bytes of the slices ``data[starts[i] : starts[i] + lengths[i]]``, concatenated."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    picks = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1], dtype=np.int64)
    return pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data[picks])


def _headers(column: BinaryColumn | None, count: int) -> pa.Array:
    """Each record's headers as a list of structs, parsed with array operations.

    Instead of a loop per record, one round per header position: round ``j``
    reads the ``j``-th header of every record that has more than ``j``, so a
    batch costs as many rounds as its longest header list. Every length is
    checked against its record's end.
    """
    if column is None:
        return pa.ListArray.from_arrays(pa.array(np.zeros(count + 1, dtype=np.int32)), pa.array([], HEADER_TYPE))
    _binary(column, count)  # offsets are valid: every record slice lies inside the section
    data = np.frombuffer(column.data, dtype=np.uint8)
    offsets = np.asarray(column.offsets, dtype=np.int64)
    starts, ends = offsets[:-1], offsets[1:]
    if np.any(ends - starts < 2):
        raise CorruptBatch("record headers are truncated")
    counts = _u16(data, starts)
    cursor = starts + 2
    rounds: list[tuple[np.ndarray, ...]] = []
    active = np.flatnonzero(counts)
    while active.size:
        at, end = cursor[active], ends[active]
        if np.any(at + 6 > end):
            raise CorruptBatch("a record header entry is truncated")
        name_lengths, value_lengths = _u16(data, at), _u32(data, at + 2)
        value_starts = at + 6 + name_lengths
        cursor[active] = value_starts + value_lengths
        if np.any(cursor[active] > end):
            raise CorruptBatch("a record header overruns its record")
        rounds.append((active, at + 6, name_lengths, value_starts, value_lengths))
        active = active[counts[active] > len(rounds)]
    if np.any(cursor != ends):
        raise CorruptBatch("record headers have trailing bytes")
    if rounds:
        records, name_starts, name_lengths, value_starts, value_lengths = (
            np.concatenate(c) for c in zip(*rounds, strict=True)
        )
        positions = np.concatenate([np.full(len(r[0]), j) for j, r in enumerate(rounds)])
        order = np.lexsort((positions, records))  # record by record, headers in their order
        name_starts, name_lengths = name_starts[order], name_lengths[order]
        value_starts, value_lengths = value_starts[order], value_lengths[order]
    else:
        name_starts = name_lengths = value_starts = value_lengths = np.zeros(0, dtype=np.int64)
    entries = len(name_starts)
    names = pa.Array.from_buffers(pa.string(), entries, [None, *_gather(data, name_starts, name_lengths)])
    values = pa.Array.from_buffers(pa.binary(), entries, [None, *_gather(data, value_starts, value_lengths)])
    try:
        names.validate(full=True)  # UTF-8
    except pa.ArrowInvalid as exc:
        raise CorruptBatch(f"a record header name is not UTF-8: {exc}") from None
    list_offsets = np.zeros(count + 1, dtype=np.int32)
    np.cumsum(counts, out=list_offsets[1:])
    return pa.ListArray.from_arrays(
        pa.array(list_offsets), pa.StructArray.from_arrays([names, values], fields=list(HEADER_TYPE))
    )


def _timestamps_and_dates(millis: np.ndarray) -> tuple[pa.Array, pa.Array]:
    """Microsecond UTC timestamps and ``yyyy-MM-dd`` dates; ``NULL`` and ``unknown`` outside years 1-9999."""
    valid = (millis >= MIN_TIMESTAMP_MS) & (millis <= MAX_TIMESTAMP_MS)
    all_valid = bool(valid.all())
    micros = millis * 1000 if all_valid else np.where(valid, millis, 0) * 1000
    timestamps = pa.array(micros, pa.timestamp("us", tz="UTC"), mask=None if all_valid else ~valid)
    # A batch spans few days: format each distinct day once, then gather (strftime per row is ~50x slower).
    days = millis // MS_PER_DAY if all_valid else np.where(valid, millis // MS_PER_DAY, _UNKNOWN_DAY)
    distinct, positions = np.unique(days, return_inverse=True)
    names = [UNKNOWN_DATE if d == _UNKNOWN_DAY else (EPOCH + dt.timedelta(days=int(d))).isoformat() for d in distinct]
    dates = pa.array(names, pa.string()).take(pa.array(positions.astype(np.int32)))
    return timestamps, dates


def batch_to_arrow(
    batch: RecordBatch, *, topic: str, partition: int, first_offset: int, topic_id: str | None = None
) -> pa.RecordBatch:
    """The rows of one decoded batch whose first record has offset ``first_offset``."""
    columns = batch.columns()
    count = columns.count
    timestamps, dates = _timestamps_and_dates(np.asarray(columns.timestamps, dtype=np.int64))
    keys = pa.nulls(count, pa.binary()) if columns.keys is None else _binary(columns.keys, count)
    return pa.RecordBatch.from_arrays(
        [
            pa.repeat(pa.scalar(partition, pa.int32()), count),
            pa.array(np.arange(first_offset, first_offset + count, dtype=np.int64)),
            timestamps,
            keys,
            _binary(columns.values, count),
            _headers(columns.headers, count),
            pa.repeat(pa.scalar(topic_id, pa.string()), count),
            pa.repeat(pa.scalar(topic, pa.string()), count),
            dates,
        ],
        schema=SCHEMA,
    )
