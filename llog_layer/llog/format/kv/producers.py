"""Idempotent producers' documents (``llog.protocol.producers``, docs/IDEMPOTENCE.md).

* ``{root}/__catalog/producers/{producer_id}`` (``ProducerKeys``, on the catalogue's shard): an issued
  producer id, ``ProducerRecord``.
* ``{base}/producers/{producer_id}`` (``PartitionKeys.producer_state``): one producer's state in one
  partition, ``ProducerState``::

      {"epoch": 2, "batches": [[10, 12, 4, 6]], "digests": [5], "in_flight": null,
       "validated_at_ms": …, "touched_at_ms": …}
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from llog.errors import CorruptMetadata
from llog.format.keys import DEFAULT_ROOT_PREFIX, validate_producer_id, validate_root_prefix
from llog.format.kv.document import NonNegative, Text, decode_document, encode_document


@dataclass(frozen=True)
class ProducerKeys:
    """Keys of issued producer ids: ``{root}/__catalog/producers/{producer_id}``, on the catalogue's shard."""

    root: str = DEFAULT_ROOT_PREFIX
    partition_key = "__catalog"

    def __post_init__(self) -> None:
        validate_root_prefix(self.root)

    @property
    def prefix(self) -> str:
        return f"{self.root}/__catalog/producers/"

    @property
    def scan_end(self) -> str:
        """Exclusive end of every producer id's key (``~`` sorts after every id character)."""
        return f"{self.prefix}~"

    def producer(self, producer_id: str) -> str:
        return f"{self.prefix}{validate_producer_id(producer_id)}"


class ProducerRecord(msgspec.Struct, frozen=True, gc=False):
    """``{root}/__catalog/producers/{producer_id}``: an issued producer id, its current epoch, its last use."""

    epoch: NonNegative
    created_at_ms: NonNegative
    touched_at_ms: NonNegative

    def encode(self) -> bytes:
        return encode_document(self)

    @classmethod
    def decode(cls, raw: bytes) -> ProducerRecord:
        return decode_document(_RECORD, raw, "producer record")


_RECORD = msgspec.json.Decoder(ProducerRecord)


@dataclass(frozen=True)
class ProducerBatch:
    """A batch an idempotent producer committed to a partition: its sequences, the offsets it got, and the
    digest of its records (``codec.records_digest``; None when the state stored none). Stored as
    ``[first, last, start, end]``, its digest beside it in the state's ``digests`` (``ProducerState``)."""

    first_sequence: int
    last_sequence: int
    start_offset: int
    end_offset: int
    digest: int | None = None


class InFlightClaim(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """A producer's batch claimed for a partition, whose commit may or may not have happened yet.

    ``commit_by_ms`` is the claimer's wall-clock time of its commit deadline:
    its commit is never sent later. ``search_from_offset`` is the partition's
    next offset before the claim: the batch, if it committed, lies at or after it.
    ``digest`` is the batch's (``ProducerBatch``), None (absent) in a claim stored before claims had one.
    """

    claim_id: Text
    first_sequence: NonNegative = msgspec.field(name="first")
    last_sequence: NonNegative = msgspec.field(name="last")
    claimed_at_ms: NonNegative
    commit_by_ms: NonNegative
    search_from_offset: NonNegative
    digest: NonNegative | None = None


class _StoredProducerState(msgspec.Struct, omit_defaults=True, gc=False):
    epoch: NonNegative
    batches: list[tuple[NonNegative, NonNegative, NonNegative, NonNegative]]
    validated_at_ms: NonNegative
    touched_at_ms: NonNegative
    in_flight: InFlightClaim | None | UnsetType = UNSET  # always written, null without one
    # Beside the batches, so that a version from before digests reads the state (and drops them when it
    # writes it: its batches then match by sequences alone, as they did). Absent when no batch has one.
    digests: list[NonNegative | None] | None = None


_STATE = msgspec.json.Decoder(_StoredProducerState)


@dataclass(frozen=True)
class ProducerState:
    """``{base}/producers/{producer_id}``: one idempotent producer's state in one partition.

    ``batches`` are its last few committed batches of ``epoch``, oldest first, stored
    with their digests in a list of their own (``digests``, absent when none has one);
    ``in_flight`` a batch claimed and not yet recorded. ``validated_at_ms`` is
    when the producer's registry record was last checked (the check is
    repeated when it is stale), ``touched_at_ms`` when this state was last written.
    """

    epoch: int
    batches: tuple[ProducerBatch, ...] = ()
    in_flight: InFlightClaim | None = None
    validated_at_ms: int = 0
    touched_at_ms: int = 0

    def encode(self) -> bytes:
        batches = self.batches
        digests = [b.digest for b in batches]
        return encode_document(
            _StoredProducerState(
                self.epoch,
                [(b.first_sequence, b.last_sequence, b.start_offset, b.end_offset) for b in batches],
                self.validated_at_ms,
                self.touched_at_ms,
                self.in_flight,
                digests if any(d is not None for d in digests) else None,
            )
        )

    @classmethod
    def decode(cls, raw: bytes) -> ProducerState:
        what = "producer state"
        doc = decode_document(_STATE, raw, what)
        digests = [None] * len(doc.batches) if doc.digests is None else doc.digests
        if len(digests) != len(doc.batches):
            raise CorruptMetadata(f"{what} has {len(doc.batches)} batches and {len(digests)} digests")
        return cls(
            doc.epoch,
            tuple(ProducerBatch(*batch, digest) for batch, digest in zip(doc.batches, digests, strict=True)),
            None if doc.in_flight is UNSET else doc.in_flight,
            doc.validated_at_ms,
            doc.touched_at_ms,
        )

    def with_changes(self, **changes: Any) -> ProducerState:
        return replace(self, **changes)
