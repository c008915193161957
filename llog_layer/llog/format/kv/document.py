"""What every stored document shares: one JSON encoder, strict decoding, the field types, and the two values
several documents carry flattened into their own fields (``TimeSpan``, ``DataRef``).

A document's stored shape is a ``msgspec.Struct``: its fields are the stored names, in any order (the encoder
sorts them), and its types are checked while decoding, in C. Whatever does not hold the promised shape raises
``CorruptMetadata`` instead of being half-understood. Unknown extra fields are ignored so that newer writers
stay readable by older readers.

The shapes set ``omit_defaults``: a field the document writes only when it has a value defaults to None (or
to what its absence stands for, as ``log_start_offset``'s 1) and is left out at that default; a field it
always writes, null included, has no default or defaults to ``UNSET``, which None never equals (a document
without the field then reads as UNSET, taken as None).

The encoding is compact JSON with sorted keys: what ``json.dumps(doc, sort_keys=True, separators=(",", ":"))``
wrote before, byte for byte, for every string llog stores (all ASCII: Python's encoder escaped others as
``\\uXXXX``, this one writes them as UTF-8). Group records are the one exception to the sorted keys: they
were always written in field order (``llog.format.kv.groups``).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Annotated, TypeVar

import msgspec

from llog.errors import CorruptMetadata
from llog.format.codec import ENCODING, batch_time_span

INITIAL_OFFSET = 1

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Text = Annotated[str, msgspec.Meta(min_length=1)]

D = TypeVar("D")

encode_document = msgspec.json.Encoder(order="sorted").encode


def decode_document(decoder: msgspec.json.Decoder[D], raw: bytes, what: str) -> D:
    """``raw`` decoded strictly: a document that is not JSON or does not hold the shape raises ``CorruptMetadata``."""
    try:
        return decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise corrupt(what, exc) from None


def corrupt(what: str, exc: msgspec.DecodeError) -> CorruptMetadata:
    """``CorruptMetadata`` for a document msgspec refused: not JSON, not an object, or a field of the wrong type."""
    if not isinstance(exc, msgspec.ValidationError):
        return CorruptMetadata(f"{what} is not JSON ({exc})")
    if str(exc).startswith("Expected `object`, got"):  # a wrong type inside the document names its path
        return CorruptMetadata(f"{what} is not a JSON object")
    return CorruptMetadata(f"{what}: {exc}")


@dataclass(frozen=True)
class TimeSpan:
    """The least and greatest record timestamp (ms) of a batch.

    Index entries, ``pending``, compaction records and manifests carry it, so
    offset-for-timestamp reads index entries and then at most one batch
    (docs/RECOVERY.md, "Offset for a timestamp"). Entries written before it
    existed have none. Stored as ``min_timestamp_ms`` and ``max_timestamp_ms``
    (record timestamps are any int64, as in Kafka: before the epoch too).
    """

    min_ms: int
    max_ms: int

    def __post_init__(self) -> None:
        if self.min_ms > self.max_ms:
            raise CorruptMetadata(f"time span [{self.min_ms}, {self.max_ms}] is inverted")

    @classmethod
    def of_batch(cls, batch: bytes | bytearray | memoryview) -> TimeSpan:
        return cls(*batch_time_span(batch))

    @classmethod
    def stored(cls, low: int | None, high: int | None, what: str) -> TimeSpan | None:
        """The span of a document's ``min_timestamp_ms`` and ``max_timestamp_ms``: both or neither."""
        if low is None and high is None:
            return None
        if low is None or high is None:
            raise CorruptMetadata(f"{what} has only one of min_timestamp_ms and max_timestamp_ms")
        return cls(low, high)


@dataclass(frozen=True)
class DataRef:
    """Where a batch of records lives (an S3 URI and, for shared blobs, a byte slice) and its time span.

    Documents store its fields as their own: ``data_key``, ``encoding``, ``byte_offset``, ``byte_length``,
    ``inline`` (base64) and the time span's two fields.
    """

    data_key: str
    encoding: str = ENCODING
    byte_offset: int | None = None
    byte_length: int | None = None
    times: TimeSpan | None = None
    # A small batch's bytes, also kept here: readers and compaction take them from Oxia
    # without a GET; the slice in S3 stays, for recovery (which reads only S3) and verify.
    inline: bytes | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if (self.byte_offset is None) != (self.byte_length is None):
            raise CorruptMetadata("byte_offset and byte_length must be given together")
        if self.inline is not None and len(self.inline) != self.byte_length:
            raise CorruptMetadata(f"an inline batch of {len(self.inline)} bytes for a slice of {self.byte_length}")

    @property
    def stored_inline(self) -> str | None:
        return None if self.inline is None else base64.b64encode(self.inline).decode("ascii")


def inline_of(text: str | None, what: str) -> bytes | None:
    """A stored ``inline`` field's bytes."""
    if text is None:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise CorruptMetadata(f"{what} field 'inline' is not base64") from None
