"""A partition's index: ``{base}/index/{end_offset:020d}`` (CAS partitions) and the sequence entries
``{base}/seq/{generation:010d}/e-{position:020d}-{fences:020d}`` of sequential ones (docs/SEQUENTIAL_APPEND.md),
whose values are index entries or fence markers. The keys: ``PartitionKeys.index``, ``PartitionKeys.sequence_key``.

An index entry holds a batch of ``msg_count`` records ending at the offset its key implies::

    {"type": "WAL", "msg_count": 2, "data_key": "s3://bucket/llog/wal-shared/…", "encoding": "bytes-batch-v1",
     "byte_offset": 177, "byte_length": 104, "min_timestamp_ms": …, "max_timestamp_ms": …,
     "created_at_ms": …, "append_id": "…"}

Every field after ``created_at_ms`` is absent when it has no value.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import msgspec

from llog.errors import CorruptMetadata
from llog.format.kv.document import (
    DataRef,
    NonNegative,
    Text,
    TimeSpan,
    corrupt,
    decode_document,
    encode_document,
    inline_of,
)


class EntryType(str, Enum):
    WAL = "WAL"
    COMPACTED = "COMPACTED"
    # Offsets whose records are gone: written by a rebuild from S3 over the range it could not recover
    # (llog.protocol.rebuild). It names no data (``NO_DATA``); a read there is ``RecordsLost``.
    LOST = "LOST"


NO_DATA = DataRef("")
"""The ``ref`` of a LOST index entry: no object (its stored document has none of the data fields)."""


class ProducerTag(msgspec.Struct, frozen=True, gc=False):
    """Which idempotent producer batch an entry holds: ``(producer, epoch, first and last sequence)``.

    Stored in the batch's index entry (or sequence entry, or CAS ``pending``) as ``producer``, so
    a later attempt can find out whether an earlier one committed (``llog.protocol.producers``).
    """

    producer_id: Text = msgspec.field(name="id")
    epoch: NonNegative
    first_sequence: NonNegative = msgspec.field(name="first")
    last_sequence: NonNegative = msgspec.field(name="last")

    def __post_init__(self) -> None:
        if self.last_sequence < self.first_sequence:
            raise CorruptMetadata(f"producer tag {self.first_sequence}..{self.last_sequence} ends before it starts")


class _StoredIndexEntry(msgspec.Struct, omit_defaults=True, gc=False):
    type: EntryType
    msg_count: NonNegative
    created_at_ms: NonNegative
    data_key: Text | None = None  # none in a LOST entry
    encoding: Text | None = None
    byte_offset: NonNegative | None = None
    byte_length: NonNegative | None = None
    inline: Text | None = None
    min_timestamp_ms: int | None = None
    max_timestamp_ms: int | None = None
    append_id: Text | None = None
    data_bytes: NonNegative | None = None
    producer: ProducerTag | None = None
    log_max_timestamp_ms: int | None = None


_INDEX_ENTRY = msgspec.json.Decoder(_StoredIndexEntry)


@dataclass(frozen=True)
class IndexEntry:
    """``index/{end_offset}``: a batch of ``msg_count`` records ending at the key's offset.

    A LOST entry (``lost``) holds the offsets a rebuild could not recover: ``ref`` is ``NO_DATA``.
    """

    type: EntryType
    msg_count: int
    ref: DataRef
    created_at_ms: int
    append_id: str | None = None
    data_bytes: int | None = None  # COMPACTED: the object's size, for size-based retention
    producer: ProducerTag | None = None  # WAL: the idempotent producer's tag, if it had one
    # COMPACTED: the greatest record timestamp from the log start through this entry's end; it never
    # decreases from one compacted entry to the next, so a time lookup bisects them (llog.protocol.read).
    log_max_timestamp_ms: int | None = None

    @classmethod
    def lost(cls, msg_count: int, created_at_ms: int, log_max_timestamp_ms: int | None = None) -> IndexEntry:
        """A LOST entry over ``msg_count`` offsets (``log_max_timestamp_ms``: as a COMPACTED entry's, if known)."""
        return cls(EntryType.LOST, msg_count, NO_DATA, created_at_ms, log_max_timestamp_ms=log_max_timestamp_ms)

    def encode(self) -> bytes:
        if self.type is EntryType.LOST:  # it stores none of the data fields
            doc = _StoredIndexEntry(self.type, self.msg_count, self.created_at_ms)
        else:
            ref, times = self.ref, self.ref.times
            doc = _StoredIndexEntry(
                self.type,
                self.msg_count,
                self.created_at_ms,
                data_key=ref.data_key,
                encoding=ref.encoding,
                byte_offset=ref.byte_offset,
                byte_length=ref.byte_length,
                inline=ref.stored_inline,
                min_timestamp_ms=None if times is None else times.min_ms,
                max_timestamp_ms=None if times is None else times.max_ms,
            )
        doc.append_id = self.append_id
        doc.data_bytes = self.data_bytes
        doc.producer = self.producer
        doc.log_max_timestamp_ms = self.log_max_timestamp_ms
        return encode_document(doc)

    @classmethod
    def decode(cls, raw: bytes) -> IndexEntry:
        return cls._of(decode_document(_INDEX_ENTRY, raw, "index entry"))

    @classmethod
    def _of(cls, doc: _StoredIndexEntry) -> IndexEntry:
        what = "index entry"
        if doc.msg_count < 1:
            raise CorruptMetadata(f"{what} has msg_count {doc.msg_count}")
        if doc.type is EntryType.LOST:
            if doc.data_key is not None:
                raise CorruptMetadata(f"{what} of type LOST names data {doc.data_key!r}")
            ref = NO_DATA
        else:
            if doc.data_key is None or doc.encoding is None:
                raise CorruptMetadata(f"{what} of type {doc.type.value} has no data_key and encoding")
            ref = DataRef(
                doc.data_key, doc.encoding, doc.byte_offset, doc.byte_length,
                TimeSpan.stored(doc.min_timestamp_ms, doc.max_timestamp_ms, what), inline_of(doc.inline, what),
            )  # fmt: skip
        return cls(
            doc.type, doc.msg_count, ref, doc.created_at_ms, doc.append_id, doc.data_bytes, doc.producer,
            doc.log_max_timestamp_ms,
        )  # fmt: skip


FENCE_MARKER = "FENCE"


class FenceMarker(msgspec.Struct, frozen=True, gc=False, omit_defaults=True, tag_field="type", tag=FENCE_MARKER):
    """A fence marker in a sequential partition's sequence (docs/SEQUENTIAL_APPEND.md).

    It takes no offset; every key after it carries a nonzero fence count,
    which makes the entries there void. ``roll``: put by a takeover's roll,
    which seals the generation and opens the next one without fencing the log
    (docs/SEQUENTIAL_APPEND.md, "Roll"). Stored as ``{"type": "FENCE", ...}``.
    """

    fence_id: Text
    created_at_ms: NonNegative
    roll: bool = False

    def encode(self) -> bytes:
        return encode_document(self)


class _Kind(msgspec.Struct, gc=False):
    type: object = None


_FENCE_MARKER = msgspec.json.Decoder(FenceMarker)
_KIND = msgspec.json.Decoder(_Kind)


def decode_sequence_value(raw: bytes) -> IndexEntry | FenceMarker:
    """The value of a sequence key: an index entry, or (rarely: once per fence) a fence marker."""
    try:
        return IndexEntry._of(_INDEX_ENTRY.decode(raw))
    except msgspec.DecodeError as exc:
        if decode_document(_KIND, raw, "sequence entry").type != FENCE_MARKER:
            raise corrupt("sequence entry", exc) from None
    return decode_document(_FENCE_MARKER, raw, "fence marker")


@dataclass(frozen=True)
class IndexedBatch:
    """An index entry together with the offset range its key implies.

    ``generation`` is the sequence generation holding it (None: the CAS ``index/``).
    """

    end_offset: int
    entry: IndexEntry
    generation: int | None = None

    @property
    def start_offset(self) -> int:
        return self.end_offset - self.entry.msg_count + 1

    def covers(self, offset: int) -> bool:
        return self.start_offset <= offset <= self.end_offset
