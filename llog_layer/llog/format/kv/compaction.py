"""Compaction's documents: ``{base}/meta/compaction-cursor`` and ``{base}/meta/compaction`` in Oxia
(``PartitionKeys.compaction_cursor``, ``PartitionKeys.compaction``), and in S3 the compacted objects'
metadata (``{base}/data/compacted/{uuid}``) and the compacted-range manifests
(``{base}/manifests/{start:020d}-{end:020d}.json``, ``PartitionKeys.manifest_key``; docs/FORMAT.md, "Manifests").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import msgspec

from llog.errors import CorruptMetadata
from llog.format.codec import ENCODING
from llog.format.kv.document import NonNegative, Text, TimeSpan, decode_document, encode_document


class CompactionCursor(msgspec.Struct, frozen=True, gc=False):
    """``meta/compaction-cursor``: the first offset not yet compacted (``INITIAL_OFFSET`` before any)."""

    offset: NonNegative

    def encode(self) -> bytes:
        return encode_document(self)

    @classmethod
    def decode(cls, raw: bytes) -> CompactionCursor:
        return decode_document(_CURSOR, raw, "meta/compaction-cursor")


_CURSOR = msgspec.json.Decoder(CompactionCursor)


class CompactionState(str, Enum):
    WRITING_COMPACTED_INDEX = "WRITING_COMPACTED_INDEX"
    DELETING_OLD = "DELETING_OLD"
    UPDATING_CURSOR = "UPDATING_CURSOR"


class _StoredCompaction(msgspec.Struct, omit_defaults=True, gc=False):
    compaction_id: Text
    state: CompactionState
    start_offset: NonNegative
    end_offset: NonNegative
    msg_count: NonNegative
    data_key: Text
    encoding: Text
    created_at_ms: NonNegative
    last_source_start_offset: NonNegative | None = None
    data_bytes: NonNegative | None = None
    log_max_timestamp_ms: int | None = None
    min_timestamp_ms: int | None = None
    max_timestamp_ms: int | None = None


_COMPACTION = msgspec.json.Decoder(_StoredCompaction)


@dataclass(frozen=True)
class CompactionRecord:
    """``meta/compaction``: the authoritative record of an in-flight compaction."""

    compaction_id: str
    state: CompactionState
    start_offset: int
    end_offset: int
    msg_count: int
    data_key: str
    created_at_ms: int
    encoding: str = ENCODING
    last_source_start_offset: int | None = None
    data_bytes: int | None = None
    times: TimeSpan | None = None  # of the compacted batch; None in records written before time spans
    log_max_timestamp_ms: int | None = None  # for the COMPACTED entry (IndexEntry.log_max_timestamp_ms)

    @property
    def index_deletions_started(self) -> bool:
        """True once the end key is COMPACTED and lower keys may be (or have been) deleted."""
        return self.state in (CompactionState.DELETING_OLD, CompactionState.UPDATING_CURSOR)

    def covers(self, offset: int) -> bool:
        return self.start_offset <= offset <= self.end_offset

    def encode(self) -> bytes:
        times = self.times
        return encode_document(
            _StoredCompaction(
                self.compaction_id,
                self.state,
                self.start_offset,
                self.end_offset,
                self.msg_count,
                self.data_key,
                self.encoding,
                self.created_at_ms,
                self.last_source_start_offset,
                self.data_bytes,
                self.log_max_timestamp_ms,
                None if times is None else times.min_ms,
                None if times is None else times.max_ms,
            )
        )

    @classmethod
    def decode(cls, raw: bytes) -> CompactionRecord:
        what = "meta/compaction"
        doc = decode_document(_COMPACTION, raw, what)
        return cls(
            doc.compaction_id, doc.state, doc.start_offset, doc.end_offset, doc.msg_count, doc.data_key,
            doc.created_at_ms, doc.encoding, doc.last_source_start_offset, doc.data_bytes,
            TimeSpan.stored(doc.min_timestamp_ms, doc.max_timestamp_ms, what), doc.log_max_timestamp_ms,
        )  # fmt: skip


END_OFFSET_METADATA = "llog-end-offset"


def compacted_object_metadata(start: int, end: int) -> dict[str, str]:
    """S3 user metadata of a compacted object: lets GC find the index key that should reference it (docs/GC.md)."""
    return {"llog-start-offset": str(start), END_OFFSET_METADATA: str(end)}


MANIFEST_FORMAT = "llog-compacted-range-v1"


class _StoredManifest(msgspec.Struct, omit_defaults=True, gc=False):
    format: str
    topic: Text
    partition: NonNegative
    start_offset: NonNegative
    end_offset: NonNegative
    record_count: NonNegative
    data_key: Text
    encoding: Text
    compaction_id: Text
    created_at_ms: NonNegative
    min_timestamp_ms: int | None = None
    max_timestamp_ms: int | None = None


_MANIFEST = msgspec.json.Decoder(_StoredManifest)


@dataclass(frozen=True)
class CompactedRange:
    """A manifest: one committed compacted object and the offsets it holds.

    Compaction publishes it only after the range's COMPACTED index entry is
    written (the commit point), so a manifest never names an orphaned object.
    """

    topic: str
    partition: int
    start_offset: int
    end_offset: int
    data_key: str
    compaction_id: str
    created_at_ms: int
    encoding: str = ENCODING
    times: TimeSpan | None = None

    def __post_init__(self) -> None:
        if not 0 < self.start_offset <= self.end_offset:
            raise CorruptMetadata(f"manifest range [{self.start_offset}, {self.end_offset}] is invalid")

    @property
    def record_count(self) -> int:
        return self.end_offset - self.start_offset + 1

    @classmethod
    def of(cls, topic: str, partition: int, record: CompactionRecord) -> CompactedRange:
        return cls(
            topic,
            partition,
            record.start_offset,
            record.end_offset,
            record.data_key,
            record.compaction_id,
            record.created_at_ms,
            record.encoding,
            record.times,
        )

    def encode(self) -> bytes:
        times = self.times
        return encode_document(
            _StoredManifest(
                MANIFEST_FORMAT,
                self.topic,
                self.partition,
                self.start_offset,
                self.end_offset,
                self.record_count,
                self.data_key,
                self.encoding,
                self.compaction_id,
                self.created_at_ms,
                None if times is None else times.min_ms,
                None if times is None else times.max_ms,
            )
        )

    @classmethod
    def decode(cls, raw: bytes, what: str = "manifest") -> CompactedRange:
        doc = decode_document(_MANIFEST, raw, what)
        if doc.format != MANIFEST_FORMAT:
            raise CorruptMetadata(f"{what} has an unknown format {doc.format!r}")
        decoded = cls(
            doc.topic, doc.partition, doc.start_offset, doc.end_offset, doc.data_key, doc.compaction_id,
            doc.created_at_ms, doc.encoding, TimeSpan.stored(doc.min_timestamp_ms, doc.max_timestamp_ms, what),
        )  # fmt: skip
        if doc.record_count != decoded.record_count:
            raise CorruptMetadata(f"{what} record_count disagrees with its offsets")
        return decoded
