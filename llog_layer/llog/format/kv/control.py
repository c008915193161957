"""A partition's ``{base}/meta/control`` (``PartitionKeys.control``): the log state, the next offset, the
in-flight append of a CAS partition and the generations of a sequential one (docs/PROTOCOL.md,
docs/SEQUENTIAL_APPEND.md)::

    {"log_state": "OPEN", "sequence_counter": 12,
     "pending": {"append_id": "…", "start_offset": 10, "end_offset": 11, "msg_count": 2, "entry_type": "WAL",
                 "data_key": "s3://bucket/llog/wal-shared/…", "encoding": "bytes-batch-v1",
                 "byte_offset": 177, "byte_length": 104, "created_at_ms": …}}

``log_start_offset`` is absent while it is 1; ``append_protocol`` and ``generations`` are absent in a CAS
partition's record, ``topic_deleted`` unless it is true.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from llog.errors import CorruptMetadata
from llog.format.kv.document import (
    INITIAL_OFFSET,
    DataRef,
    NonNegative,
    Text,
    TimeSpan,
    decode_document,
    encode_document,
    inline_of,
)
from llog.format.kv.index import EntryType, IndexEntry, ProducerTag


class LogState(str, Enum):
    OPEN = "OPEN"
    FENCED = "FENCED"


class AppendProtocol(str, Enum):
    """How a partition assigns offsets (docs/SEQUENTIAL_APPEND.md).

    ``cas``: a compare-and-set on ``meta/control`` per append (docs/PROTOCOL.md).
    ``sequential``: one Oxia sequential-key put per append, no CAS.

    ``seed``, the name ``cas`` had before, is still read (in ``LLOG_APPEND_PROTOCOL``,
    the stack's ``appendProtocol`` and any stored ``append_protocol``) as ``cas``.
    """

    CAS = "cas"
    SEQUENTIAL = "sequential"

    @classmethod
    def _missing_(cls, value: object) -> AppendProtocol | None:
        return cls.CAS if value == LEGACY_CAS_NAME else None


LEGACY_CAS_NAME = "seed"


CAS_GENERATION = 0
"""Generation 0 of a partition migrated to the sequential protocol: its CAS-era ``index/`` entries."""


class _StoredGeneration(msgspec.Struct, omit_defaults=True, gc=False):
    generation: NonNegative
    base: NonNegative
    end: NonNegative | None | UnsetType = UNSET  # written as null while open
    rolled: bool = False


@dataclass(frozen=True)
class Generation:
    """One stretch of a sequential partition's offsets: ``base + 1 .. end``.

    Generation ``g >= 1`` keeps its entries under its own sequence prefix,
    where an entry's key position ``p`` is the end offset ``base + p``.
    Generation 0 is the CAS index of a migrated partition. ``end`` is set
    when the generation is sealed (by a fence, a roll or the migration); only
    the last generation may be open, and the next one starts where it ended.
    ``rolled``: sealed by a takeover's roll, which opened the next generation
    in the same compare-and-set; the log was never fenced
    (docs/SEQUENTIAL_APPEND.md, "Roll").
    """

    number: int
    base: int
    end: int | None = None
    rolled: bool = False

    @property
    def sealed(self) -> bool:
        return self.end is not None

    def holds(self, offset: int) -> bool:
        return self.base < offset and (self.end is None or offset <= self.end)

    def _stored(self) -> _StoredGeneration:
        return _StoredGeneration(self.number, self.base, self.end, self.rolled)

    @classmethod
    def _of(cls, doc: _StoredGeneration, what: str) -> Generation:
        end = None if doc.end is UNSET else doc.end
        if end is not None and end < doc.base:
            raise CorruptMetadata(f"{what} generation {doc.generation} ends at {end} before its base")
        if doc.rolled and end is None:
            raise CorruptMetadata(f"{what} generation {doc.generation} is rolled but not sealed")
        return cls(doc.generation, doc.base, end, doc.rolled)


def check_generations(generations: tuple[Generation, ...], what: str = "meta/control") -> None:
    """A sequential partition's generations: numbered upwards, contiguous, only the last one open."""
    if not generations:
        raise CorruptMetadata(f"{what} of a sequential partition has no generation")
    previous: Generation | None = None
    for g in generations:
        if previous is None:
            if g.base != 0:
                raise CorruptMetadata(f"{what}: the first generation must start at offset 1")
            if g.number == CAS_GENERATION and g.end is None:
                raise CorruptMetadata(f"{what}: the CAS generation must be sealed")
        else:
            if g.number <= previous.number or g.number == CAS_GENERATION:
                raise CorruptMetadata(f"{what}: generations {previous.number}, {g.number} are out of order")
            if previous.end is None or g.base != previous.end:
                raise CorruptMetadata(f"{what}: generation {g.number} does not start where {previous.number} ended")
        previous = g
    if generations[-1].number == CAS_GENERATION:
        raise CorruptMetadata(f"{what}: a sequential partition needs a sequence generation after the CAS one")


def generation_of(generations: tuple[Generation, ...], offset: int) -> Generation | None:
    """The generation whose offsets include ``offset`` (None: before the first or past a sealed last one)."""
    for g in reversed(generations):
        if g.base < offset:
            return g if g.holds(offset) else None
    return None


class _StoredPending(msgspec.Struct, omit_defaults=True, gc=False):
    append_id: Text
    start_offset: NonNegative
    end_offset: NonNegative
    msg_count: NonNegative
    data_key: Text
    encoding: Text
    created_at_ms: NonNegative
    # Always written; absent (or null) reads as WAL and as no byte slice.
    entry_type: EntryType | None | UnsetType = UNSET
    byte_offset: NonNegative | None | UnsetType = UNSET
    byte_length: NonNegative | None | UnsetType = UNSET
    inline: Text | None = None
    min_timestamp_ms: int | None = None
    max_timestamp_ms: int | None = None
    producer: ProducerTag | None = None  # absent without a producer: such appends store what they always did


@dataclass(frozen=True)
class PendingAppend:
    """An append whose offsets are reserved but whose index entry may not exist yet."""

    append_id: str
    start_offset: int
    end_offset: int
    msg_count: int
    ref: DataRef
    created_at_ms: int
    entry_type: EntryType = EntryType.WAL
    producer: ProducerTag | None = None  # an idempotent append's tag (llog.protocol.producers)

    def _stored(self) -> _StoredPending:
        ref, times = self.ref, self.ref.times
        return _StoredPending(
            self.append_id,
            self.start_offset,
            self.end_offset,
            self.msg_count,
            ref.data_key,
            ref.encoding,
            self.created_at_ms,
            self.entry_type,
            ref.byte_offset,
            ref.byte_length,
            ref.stored_inline,
            None if times is None else times.min_ms,
            None if times is None else times.max_ms,
            self.producer,
        )

    def to_json(self) -> dict[str, Any]:
        """The stored ``pending`` as JSON values (what a partition's status shows)."""
        result: dict[str, Any] = msgspec.to_builtins(self._stored())
        return result

    @classmethod
    def _of(cls, doc: _StoredPending) -> PendingAppend:
        what = "meta/control.pending"
        if doc.msg_count < 1 or doc.end_offset - doc.start_offset + 1 != doc.msg_count:
            raise CorruptMetadata(
                f"{what} range [{doc.start_offset}, {doc.end_offset}] does not hold {doc.msg_count} records"
            )
        byte_offset = None if doc.byte_offset is UNSET else doc.byte_offset
        byte_length = None if doc.byte_length is UNSET else doc.byte_length
        times = TimeSpan.stored(doc.min_timestamp_ms, doc.max_timestamp_ms, what)
        ref = DataRef(doc.data_key, doc.encoding, byte_offset, byte_length, times, inline_of(doc.inline, what))
        entry_type = EntryType.WAL if doc.entry_type is UNSET or doc.entry_type is None else doc.entry_type
        return cls(
            doc.append_id, doc.start_offset, doc.end_offset, doc.msg_count, ref, doc.created_at_ms, entry_type,
            doc.producer,
        )  # fmt: skip

    def index_entry(self) -> IndexEntry:
        return IndexEntry(
            self.entry_type, self.msg_count, self.ref, self.created_at_ms, self.append_id, producer=self.producer
        )

    def covers(self, offset: int) -> bool:
        return self.start_offset <= offset <= self.end_offset


class _StoredControl(msgspec.Struct, omit_defaults=True, gc=False):
    log_state: LogState
    sequence_counter: NonNegative
    pending: _StoredPending | None | UnsetType = UNSET  # always written, null without one
    log_start_offset: NonNegative | None = INITIAL_OFFSET
    append_protocol: AppendProtocol | None = AppendProtocol.CAS
    generations: list[_StoredGeneration] | None = None  # a sequential partition's
    topic_deleted: bool = False


_CONTROL = msgspec.json.Decoder(_StoredControl)


@dataclass(frozen=True)
class ControlRecord:
    """``meta/control``: the log state, the next offset and the in-flight append.

    A sequential partition (``protocol``) also lists its ``generations``; its
    appends never touch this record, so there ``sequence_counter`` is the next
    offset as of the last write of the record (initialisation, migration,
    fence, unfence): a lower bound. ``llog.protocol.index.PartitionIndex`` gives the
    live high watermark of either kind.

    ``topic_deleted``: the partition's topic was deleted; set with ``FENCED`` by the delete's fence
    (``TopicRegistry.delete``), never cleared, and an unfence refuses the partition (``UnknownTopic``).
    Absent in records written before it (and in every other record): not deleted.
    """

    log_state: LogState = LogState.OPEN
    sequence_counter: int = INITIAL_OFFSET
    pending: PendingAppend | None = None
    # The first readable offset: retention moves it forward (docs/RETENTION.md), nothing moves it back.
    log_start_offset: int = INITIAL_OFFSET
    protocol: AppendProtocol = AppendProtocol.CAS
    generations: tuple[Generation, ...] = ()
    topic_deleted: bool = False

    @property
    def high_watermark(self) -> int:
        """The last readable offset (0 when the log is empty); a lower bound for sequential partitions."""
        return self.sequence_counter - 1

    @property
    def sequential(self) -> bool:
        return self.protocol is AppendProtocol.SEQUENTIAL

    @property
    def current_generation(self) -> Generation:
        """The generation appends go to (sequential partitions only)."""
        if not self.generations:
            raise CorruptMetadata("meta/control of a CAS partition has no generations")
        return self.generations[-1]

    def encode(self) -> bytes:
        cas = self.protocol is AppendProtocol.CAS
        return encode_document(
            _StoredControl(
                self.log_state,
                self.sequence_counter,
                None if self.pending is None else self.pending._stored(),
                self.log_start_offset,
                self.protocol,
                None if cas else [g._stored() for g in self.generations],
                self.topic_deleted,
            )
        )

    @classmethod
    def decode(cls, raw: bytes) -> ControlRecord:
        what = "meta/control"
        doc = decode_document(_CONTROL, raw, what)
        state, counter = doc.log_state, doc.sequence_counter
        if counter < INITIAL_OFFSET:
            raise CorruptMetadata(f"{what} sequence_counter {counter} is below {INITIAL_OFFSET}")
        pending = None if doc.pending is UNSET or doc.pending is None else PendingAppend._of(doc.pending)
        log_start = INITIAL_OFFSET if doc.log_start_offset is None else doc.log_start_offset
        protocol = AppendProtocol.CAS if doc.append_protocol is None else doc.append_protocol
        generations: tuple[Generation, ...] = ()
        if protocol is AppendProtocol.SEQUENTIAL:
            if doc.generations is None:
                raise CorruptMetadata(f"{what} of a sequential partition has no generations list")
            generations = tuple(Generation._of(g, what) for g in doc.generations)
            check_generations(generations, what)
            if (state is LogState.FENCED) != generations[-1].sealed:
                shape = "sealed" if generations[-1].sealed else "open"
                raise CorruptMetadata(f"{what}: log_state {state.value} with a current generation that is {shape}")
            if pending is not None:
                raise CorruptMetadata(f"{what} of a sequential partition has a pending append")
            # The counter lags the sequence here, so only the lower bound of the log start is checked.
            if log_start < INITIAL_OFFSET:
                raise CorruptMetadata(f"{what} log_start_offset {log_start} is below {INITIAL_OFFSET}")
        elif not INITIAL_OFFSET <= log_start <= counter:
            raise CorruptMetadata(f"{what} log_start_offset {log_start} is outside [1, {counter}]")
        if doc.topic_deleted and state is not LogState.FENCED:
            raise CorruptMetadata(f"{what}: the partition of a deleted topic is {state.value}, not FENCED")
        return cls(state, counter, pending, log_start, protocol, generations, doc.topic_deleted)

    def with_changes(self, **changes: Any) -> ControlRecord:
        return replace(self, **changes)
