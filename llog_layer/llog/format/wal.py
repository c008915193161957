"""The ``LLS1`` shared WAL blob: one S3 object carrying batches of several partitions.

Layout (docs/FORMAT.md)::

    b"LLS1" | header length (u32, big-endian) | JSON header | bodies

The JSON header lists, per partition, ``topic``, ``partition``, ``msg_count``,
``encoding``, ``body_offset`` and ``body_length``. ``body_offset`` is absolute
(from the first byte of the blob), so the index entry's ``byte_offset`` and
``byte_length`` are exactly an S3 range GET.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llog.errors import CorruptSharedBlob, InvalidArgument
from llog.format.codec import ENCODING
from llog.format.keys import validate_partition, validate_topic

MAGIC = b"LLS1"
VERSION = 1
PREAMBLE = struct.Struct(">4sI")
MAX_HEADER_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class BlobSlice:
    """Where one partition's batch sits inside a shared blob."""

    topic: str
    partition: int
    msg_count: int
    byte_offset: int
    byte_length: int
    encoding: str = ENCODING


@dataclass(frozen=True)
class PartitionBody:
    """Input to ``build_shared_blob``: one partition's encoded batch."""

    topic: str
    partition: int
    msg_count: int
    body: bytes


_HEADER_JSON = json.JSONEncoder(separators=(",", ":"))


def build_shared_blob(bodies: Sequence[PartitionBody], *, now_ms: int | None = None) -> tuple[bytes, list[BlobSlice]]:
    """Pack partition bodies into one blob; return it with each body's absolute slice."""
    if any(b.msg_count < 1 for b in bodies):
        raise InvalidArgument("every partition body in a shared blob needs at least one record")
    entries: list[dict[str, Any]] = [
        {"topic": b.topic, "partition": b.partition, "msg_count": b.msg_count, "encoding": ENCODING,
         "body_offset": 0, "body_length": len(b.body)}
        for b in bodies
    ]  # fmt: skip
    doc = {"version": VERSION, "created_at_ms": int(time.time() * 1000) if now_ms is None else now_ms,
           "partitions": entries}  # fmt: skip
    # Absolute offsets depend on the header's length, which depends on the
    # offsets' digits: iterate to the fixed point (two or three rounds).
    header_len = 0
    while True:
        pos = PREAMBLE.size + header_len
        for entry in entries:
            entry["body_offset"] = pos
            pos += entry["body_length"]
        header = _HEADER_JSON.encode(doc).encode("utf-8")
        if len(header) == header_len:
            break
        header_len = len(header)
    blob = b"".join([PREAMBLE.pack(MAGIC, len(header)), header, *(b.body for b in bodies)])
    slices = [BlobSlice(b.topic, b.partition, b.msg_count, e["body_offset"], e["body_length"])
              for b, e in zip(bodies, entries, strict=True)]  # fmt: skip
    return blob, slices


def _int_field(entry: dict[str, Any], name: str) -> int:
    value = entry.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CorruptSharedBlob(f"shared blob header field {name!r} is not a non-negative integer")
    return value


def header_length(prefix: bytes | memoryview) -> int:
    """Bytes of preamble plus JSON header, from the blob's first 8 bytes."""
    view = memoryview(prefix)
    if len(view) < PREAMBLE.size:
        raise CorruptSharedBlob("shared blob is shorter than its preamble")
    magic, header_len = PREAMBLE.unpack_from(view, 0)
    if magic != MAGIC:
        raise CorruptSharedBlob(f"not an LLS1 shared blob (magic {bytes(magic)!r})")
    if header_len > MAX_HEADER_BYTES:
        raise CorruptSharedBlob(f"shared blob header length {header_len} exceeds the blob format's limit "
                                f"of {MAX_HEADER_BYTES} bytes")
    return int(PREAMBLE.size + header_len)


def parse_shared_blob_header(blob: bytes | memoryview, *, total_size: int | None = None) -> list[BlobSlice]:
    """Read and validate a blob's header: every slice must lie inside the blob.

    ``blob`` is the whole blob, or (with ``total_size``, the object's size) a
    prefix of it that holds at least the header: garbage collection reads
    only that much.
    """
    view = memoryview(blob)
    size = len(view) if total_size is None else total_size
    end = header_length(view)
    if end > min(len(view), size):
        raise CorruptSharedBlob(f"shared blob header length {end - PREAMBLE.size} exceeds the blob")
    header_len = end - PREAMBLE.size
    try:
        doc = json.loads(bytes(view[PREAMBLE.size : PREAMBLE.size + header_len]))
    except (ValueError, RecursionError) as exc:  # bad JSON or UTF-8, overlong integers, deep nesting
        raise CorruptSharedBlob(f"shared blob header is not JSON ({type(exc).__name__})") from None
    version = doc.get("version") if isinstance(doc, dict) else None
    if type(version) is not int or version != VERSION or not isinstance(doc.get("partitions"), list):
        raise CorruptSharedBlob("shared blob header has an unsupported shape or version")
    body_start = PREAMBLE.size + header_len
    slices = []
    for entry in doc["partitions"]:
        if not isinstance(entry, dict):
            raise CorruptSharedBlob("shared blob header entry is not an object")
        try:
            topic = validate_topic(entry.get("topic"))
            partition = validate_partition(entry.get("partition"))
        except ValueError as exc:
            raise CorruptSharedBlob(f"shared blob header names an invalid partition: {exc}") from None
        s = BlobSlice(
            topic,
            partition,
            _int_field(entry, "msg_count"),
            _int_field(entry, "body_offset"),
            _int_field(entry, "body_length"),
            str(entry.get("encoding") or ""),
        )
        if not s.encoding or s.msg_count < 1:
            raise CorruptSharedBlob(f"shared blob entry of {topic}/{partition} needs an encoding and records")
        if s.byte_offset < body_start or s.byte_offset + s.byte_length > size:
            raise CorruptSharedBlob(f"shared blob slice of {topic}/{partition} lies outside the blob")
        slices.append(s)
    return slices
