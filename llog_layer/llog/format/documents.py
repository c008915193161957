"""The JSON documents llog stores: in Oxia (docs/PROTOCOL.md, "Oxia records") and the
compacted-range manifests in S3 (docs/FORMAT.md, "Manifests").

Each type parses strictly: a record that does not hold the promised shape
raises ``CorruptMetadata`` instead of being half-understood. Unknown extra
fields are ignored so that newer writers stay readable by older readers.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field, replace
from enum import Enum
from itertools import compress, repeat
from operator import is_not
from typing import Any, TypeVar

from llog.errors import CorruptMetadata
from llog.format.codec import ENCODING, batch_time_span

INITIAL_OFFSET = 1

E = TypeVar("E", bound=Enum)


class LogState(str, Enum):
    OPEN = "OPEN"
    FENCED = "FENCED"


class EntryType(str, Enum):
    WAL = "WAL"
    COMPACTED = "COMPACTED"
    # Offsets whose records are gone: written by a rebuild from S3 over the range it could not recover
    # (llog.protocol.rebuild). It names no data (``NO_DATA``); a read there is ``RecordsLost``.
    LOST = "LOST"


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

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"generation": self.number, "base": self.base, "end": self.end}
        if self.rolled:
            doc["rolled"] = True
        return doc

    @classmethod
    def from_json(cls, doc: Any, what: str) -> Generation:
        if not isinstance(doc, dict):
            raise CorruptMetadata(f"{what} has a generation that is not an object: {doc!r}")
        rolled = doc.get("rolled", False)
        if not isinstance(rolled, bool):
            raise CorruptMetadata(f"{what} generation field 'rolled' is not a boolean: {rolled!r}")
        end = _int(doc, "end", what, optional=True)
        generation = cls(_int(doc, "generation", what), _int(doc, "base", what), end, rolled)
        if generation.end is not None and generation.end < generation.base:
            raise CorruptMetadata(f"{what} generation {generation.number} ends at {generation.end} before its base")
        if rolled and end is None:
            raise CorruptMetadata(f"{what} generation {generation.number} is rolled but not sealed")
        return generation


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


def _load(raw: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # bad JSON or UTF-8, overlong integers, deep nesting
        raise CorruptMetadata(f"{what} is not JSON ({type(exc).__name__})") from None
    if not isinstance(doc, dict):
        raise CorruptMetadata(f"{what} is not a JSON object")
    return doc


def _enum(kind: type[E], value: Any, what: str, name: str) -> E:
    try:
        return kind(value)
    except ValueError:
        raise CorruptMetadata(f"{what} has an unknown {name} {value!r}") from None


def _data_ref(doc: dict[str, Any], what: str) -> DataRef:
    return DataRef(
        data_key=_str(doc, "data_key", what),
        encoding=_str(doc, "encoding", what),
        byte_offset=_int(doc, "byte_offset", what, optional=True),
        byte_length=_int(doc, "byte_length", what, optional=True),
        times=TimeSpan.from_doc(doc, what),
        inline=_inline(doc, what),
    )


def _inline(doc: dict[str, Any], what: str) -> bytes | None:
    text = _str(doc, "inline", what, optional=True)
    if text is None:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise CorruptMetadata(f"{what} field 'inline' is not base64") from None


def _ref_fields(ref: DataRef) -> dict[str, Any]:
    """A ``DataRef`` as the flat fields of the documents that hold one; without a time span, none of its fields."""
    fields: dict[str, Any] = {
        "data_key": ref.data_key,
        "encoding": ref.encoding,
        "byte_offset": ref.byte_offset,
        "byte_length": ref.byte_length,
    }
    if ref.inline is not None:  # absent otherwise: documents without one read as they always did
        fields["inline"] = base64.b64encode(ref.inline).decode("ascii")
    return fields | TimeSpan.optional_fields(ref.times)


_JSON = json.JSONEncoder(separators=(",", ":"), sort_keys=True)  # one encoder: json.dumps with options builds one


def _dump(doc: dict[str, Any]) -> bytes:
    return _JSON.encode(doc).encode("utf-8")


def _dump_present(doc: dict[str, Any]) -> bytes:
    """``_dump`` leaving out the optional fields that are None: they are absent from the stored document."""
    present = map(is_not, doc.values(), repeat(None))  # in C, as compress is: no Python step per field
    return _dump(dict(compress(doc.items(), present)))


def _int(doc: dict[str, Any], name: str, what: str, *, optional: bool = False, signed: bool = False) -> Any:
    value = doc.get(name)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or (value < 0 and not signed):
        kind = "an integer" if signed else "a non-negative integer"
        raise CorruptMetadata(f"{what} field {name!r} is not {kind}: {value!r}")
    return value


def _str(doc: dict[str, Any], name: str, what: str, *, optional: bool = False) -> Any:
    value = doc.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise CorruptMetadata(f"{what} field {name!r} is not a string: {value!r}")
    return value


@dataclass(frozen=True)
class TimeSpan:
    """The least and greatest record timestamp (ms) of a batch.

    Index entries, ``pending``, compaction records and manifests carry it, so
    offset-for-timestamp reads index entries and then at most one batch
    (docs/RECOVERY.md, "Offset for a timestamp"). Entries written before it
    existed have none.
    """

    min_ms: int
    max_ms: int

    def __post_init__(self) -> None:
        if self.min_ms > self.max_ms:
            raise CorruptMetadata(f"time span [{self.min_ms}, {self.max_ms}] is inverted")

    @classmethod
    def of_batch(cls, batch: bytes | bytearray | memoryview) -> TimeSpan:
        return cls(*batch_time_span(batch))

    def fields(self) -> dict[str, int]:
        return {"min_timestamp_ms": self.min_ms, "max_timestamp_ms": self.max_ms}

    @staticmethod
    def optional_fields(span: TimeSpan | None) -> dict[str, int]:
        return {} if span is None else span.fields()

    @classmethod
    def from_doc(cls, doc: dict[str, Any], what: str) -> TimeSpan | None:
        # Record timestamps are any int64, as in Kafka: before the epoch too.
        low = _int(doc, "min_timestamp_ms", what, optional=True, signed=True)
        high = _int(doc, "max_timestamp_ms", what, optional=True, signed=True)
        if low is None and high is None:
            return None
        if low is None or high is None:
            raise CorruptMetadata(f"{what} has only one of min_timestamp_ms and max_timestamp_ms")
        return cls(low, high)


@dataclass(frozen=True)
class DataRef:
    """Where a batch of records lives (an S3 URI and, for shared blobs, a byte slice) and its time span."""

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


NO_DATA = DataRef("")
"""The ``ref`` of a LOST index entry: no object (its stored document has none of the data fields)."""


@dataclass(frozen=True)
class ProducerTag:
    """Which idempotent producer batch an entry holds: ``(producer, epoch, first and last sequence)``.

    Stored in the batch's index entry (or sequence entry, or CAS ``pending``), so
    a later attempt can find out whether an earlier one committed
    (``llog.protocol.producers``).
    """

    producer_id: str
    epoch: int
    first_sequence: int
    last_sequence: int

    def to_json(self) -> dict[str, Any]:
        return {"id": self.producer_id, "epoch": self.epoch, "first": self.first_sequence, "last": self.last_sequence}

    @classmethod
    def from_json(cls, doc: Any, what: str) -> ProducerTag | None:
        if doc is None:
            return None
        what = f"{what} producer tag"
        if not isinstance(doc, dict):
            raise CorruptMetadata(f"{what} is not an object")
        tag = cls(_str(doc, "id", what), _int(doc, "epoch", what), _int(doc, "first", what), _int(doc, "last", what))
        if tag.last_sequence < tag.first_sequence:
            raise CorruptMetadata(f"{what} ends before it starts")
        return tag


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

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "append_id": self.append_id,
            "start_offset": self.start_offset,
            "end_offset": self.end_offset,
            "msg_count": self.msg_count,
            "entry_type": self.entry_type.value,
            **_ref_fields(self.ref),
            "created_at_ms": self.created_at_ms,
        }
        if self.producer is not None:  # absent otherwise: appends without a producer store what they always did
            doc["producer"] = self.producer.to_json()
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> PendingAppend:
        what = "meta/control.pending"
        if not isinstance(doc, dict):
            raise CorruptMetadata(f"{what} is not an object")
        pending = cls(
            append_id=_str(doc, "append_id", what),
            start_offset=_int(doc, "start_offset", what),
            end_offset=_int(doc, "end_offset", what),
            msg_count=_int(doc, "msg_count", what),
            ref=_data_ref(doc, what),
            created_at_ms=_int(doc, "created_at_ms", what),
            entry_type=_enum(EntryType, "WAL" if doc.get("entry_type") is None else doc["entry_type"], what, "type"),
            producer=ProducerTag.from_json(doc.get("producer"), what),
        )
        if pending.msg_count < 1 or pending.end_offset - pending.start_offset + 1 != pending.msg_count:
            raise CorruptMetadata(
                f"{what} range [{pending.start_offset}, {pending.end_offset}] does not hold {pending.msg_count} records"
            )
        return pending

    def index_entry(self) -> IndexEntry:
        return IndexEntry(
            self.entry_type, self.msg_count, self.ref, self.created_at_ms, self.append_id, producer=self.producer
        )

    def covers(self, offset: int) -> bool:
        return self.start_offset <= offset <= self.end_offset


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
        doc: dict[str, Any] = {
            "log_state": self.log_state.value,
            "sequence_counter": self.sequence_counter,
            "pending": None if self.pending is None else self.pending.to_json(),
        }
        if self.log_start_offset != INITIAL_OFFSET:
            doc["log_start_offset"] = self.log_start_offset
        if self.protocol is not AppendProtocol.CAS:
            doc["append_protocol"] = self.protocol.value
            doc["generations"] = [g.to_json() for g in self.generations]
        if self.topic_deleted:
            doc["topic_deleted"] = True
        return _dump(doc)

    @classmethod
    def decode(cls, raw: bytes) -> ControlRecord:
        what = "meta/control"
        doc = _load(raw, what)
        state = _enum(LogState, doc.get("log_state"), what, "log_state")
        counter = _int(doc, "sequence_counter", what)
        if counter < INITIAL_OFFSET:
            raise CorruptMetadata(f"{what} sequence_counter {counter} is below {INITIAL_OFFSET}")
        pending = None if doc.get("pending") is None else PendingAppend.from_json(doc["pending"])
        log_start = _int(doc, "log_start_offset", what, optional=True)
        log_start = INITIAL_OFFSET if log_start is None else log_start
        protocol = _enum(AppendProtocol, doc.get("append_protocol") or "cas", what, "append_protocol")
        generations: tuple[Generation, ...] = ()
        if protocol is AppendProtocol.SEQUENTIAL:
            raw_generations = doc.get("generations")
            if not isinstance(raw_generations, list):
                raise CorruptMetadata(f"{what} of a sequential partition has no generations list")
            generations = tuple(Generation.from_json(g, what) for g in raw_generations)
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
        topic_deleted = doc.get("topic_deleted", False)
        if not isinstance(topic_deleted, bool):
            raise CorruptMetadata(f"{what} topic_deleted must be true or false, not {topic_deleted!r}")
        if topic_deleted and state is not LogState.FENCED:
            raise CorruptMetadata(f"{what}: the partition of a deleted topic is {state.value}, not FENCED")
        return cls(state, counter, pending, log_start, protocol, generations, topic_deleted)

    def with_changes(self, **changes: Any) -> ControlRecord:
        return replace(self, **changes)


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

    def encode(self) -> bytes:
        return _dump_present(
            {
                "producer": None if self.producer is None else self.producer.to_json(),
                "type": self.type.value,
                "msg_count": self.msg_count,
                **({} if self.type is EntryType.LOST else _ref_fields(self.ref)),
                "created_at_ms": self.created_at_ms,
                "append_id": self.append_id,
                "data_bytes": self.data_bytes,
                "log_max_timestamp_ms": self.log_max_timestamp_ms,
            }
        )

    @classmethod
    def lost(cls, msg_count: int, created_at_ms: int, log_max_timestamp_ms: int | None = None) -> IndexEntry:
        """A LOST entry over ``msg_count`` offsets (``log_max_timestamp_ms``: as a COMPACTED entry's, if known)."""
        return cls(EntryType.LOST, msg_count, NO_DATA, created_at_ms, log_max_timestamp_ms=log_max_timestamp_ms)

    @classmethod
    def decode(cls, raw: bytes) -> IndexEntry:
        return cls.from_doc(_load(raw, "index entry"))

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> IndexEntry:
        what = "index entry"
        entry_type = _enum(EntryType, doc.get("type"), what, "type")
        msg_count = _int(doc, "msg_count", what)
        if msg_count < 1:
            raise CorruptMetadata(f"{what} has msg_count {msg_count}")
        lost = entry_type is EntryType.LOST
        if lost and doc.get("data_key") is not None:
            raise CorruptMetadata(f"{what} of type LOST names data {doc['data_key']!r}")
        return cls(
            type=entry_type,
            msg_count=msg_count,
            ref=NO_DATA if lost else _data_ref(doc, what),
            created_at_ms=_int(doc, "created_at_ms", what),
            append_id=_str(doc, "append_id", what, optional=True),
            data_bytes=_int(doc, "data_bytes", what, optional=True),
            producer=ProducerTag.from_json(doc.get("producer"), what),
            log_max_timestamp_ms=_int(doc, "log_max_timestamp_ms", what, optional=True, signed=True),
        )


@dataclass(frozen=True)
class ProducerBatch:
    """A batch an idempotent producer committed to a partition: its sequences, the offsets it got, and the
    digest of its records (``codec.records_digest``; None when the state stored none). The digest is stored
    beside the batch, in the state's ``digests`` (``ProducerState``)."""

    first_sequence: int
    last_sequence: int
    start_offset: int
    end_offset: int
    digest: int | None = None

    def to_json(self) -> list[int]:
        return [self.first_sequence, self.last_sequence, self.start_offset, self.end_offset]

    @classmethod
    def from_json(cls, doc: Any, what: str, digest: int | None = None) -> ProducerBatch:
        if not (isinstance(doc, list) and len(doc) == 4):
            raise CorruptMetadata(f"{what} has a batch that is not [first, last, start, end]: {doc!r}")
        fields = dict(zip(("first", "last", "start", "end"), doc, strict=True))
        first, last, start, end = (_int(fields, name, what) for name in fields)
        return cls(first, last, start, end, digest)


@dataclass(frozen=True)
class InFlightClaim:
    """A producer's batch claimed for a partition, whose commit may or may not have happened yet.

    ``commit_by_ms`` is the claimer's wall-clock time of its commit deadline:
    its commit is never sent later. ``search_from_offset`` is the partition's
    next offset before the claim: the batch, if it committed, lies at or after it.
    ``digest`` is the batch's (``ProducerBatch``), None in a claim stored before claims had one.
    """

    claim_id: str
    first_sequence: int
    last_sequence: int
    claimed_at_ms: int
    commit_by_ms: int
    search_from_offset: int
    digest: int | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "claim_id": self.claim_id,
            "first": self.first_sequence,
            "last": self.last_sequence,
            "claimed_at_ms": self.claimed_at_ms,
            "commit_by_ms": self.commit_by_ms,
            "search_from_offset": self.search_from_offset,
        }
        if self.digest is not None:
            doc["digest"] = self.digest
        return doc

    @classmethod
    def from_json(cls, doc: Any, what: str) -> InFlightClaim | None:
        if doc is None:
            return None
        if not isinstance(doc, dict):
            raise CorruptMetadata(f"{what} in_flight is not an object")
        return cls(
            _str(doc, "claim_id", what),
            _int(doc, "first", what),
            _int(doc, "last", what),
            _int(doc, "claimed_at_ms", what),
            _int(doc, "commit_by_ms", what),
            _int(doc, "search_from_offset", what),
            _int(doc, "digest", what, optional=True),
        )


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
        doc: dict[str, Any] = {
            "epoch": self.epoch,
            "batches": [b.to_json() for b in self.batches],
            "in_flight": None if self.in_flight is None else self.in_flight.to_json(),
            "validated_at_ms": self.validated_at_ms,
            "touched_at_ms": self.touched_at_ms,
        }
        if any(b.digest is not None for b in self.batches):
            doc["digests"] = [b.digest for b in self.batches]
        return _dump(doc)

    @classmethod
    def decode(cls, raw: bytes) -> ProducerState:
        what = "producer state"
        doc = _load(raw, what)
        batches = doc.get("batches")
        if not isinstance(batches, list):
            raise CorruptMetadata(f"{what} has no batches list")
        # Beside the batches, so that a version from before digests reads the state (and drops them when it
        # writes it: its batches then match by sequences alone, as they did).
        digests = doc.get("digests")
        if digests is None:
            digests = [None] * len(batches)
        if not isinstance(digests, list) or len(digests) != len(batches):
            raise CorruptMetadata(f"{what} has {len(batches)} batches and digests {digests!r}")
        return cls(
            epoch=_int(doc, "epoch", what),
            batches=tuple(
                ProducerBatch.from_json(b, what, _int({"digest": d}, "digest", what, optional=True))
                for b, d in zip(batches, digests, strict=True)
            ),
            in_flight=InFlightClaim.from_json(doc.get("in_flight"), what),
            validated_at_ms=_int(doc, "validated_at_ms", what),
            touched_at_ms=_int(doc, "touched_at_ms", what),
        )

    def with_changes(self, **changes: Any) -> ProducerState:
        return replace(self, **changes)


@dataclass(frozen=True)
class ProducerRecord:
    """``{root}/__catalog/producers/{producer_id}``: an issued producer id, its current epoch, its last use."""

    epoch: int
    created_at_ms: int
    touched_at_ms: int

    def encode(self) -> bytes:
        return _dump({"epoch": self.epoch, "created_at_ms": self.created_at_ms, "touched_at_ms": self.touched_at_ms})

    @classmethod
    def decode(cls, raw: bytes) -> ProducerRecord:
        what = "producer record"
        doc = _load(raw, what)
        return cls(_int(doc, "epoch", what), _int(doc, "created_at_ms", what), _int(doc, "touched_at_ms", what))


@dataclass(frozen=True)
class NamespaceRecord:
    """The namespace identity (``llog.protocol.namespace``): ``{root}/__catalog/namespace`` in Oxia and
    ``{root}/__catalog/namespace.json`` in S3 hold the same document."""

    namespace_id: str
    created_at_ms: int

    def encode(self) -> bytes:
        return _dump({"namespace_id": self.namespace_id, "created_at_ms": self.created_at_ms})

    @classmethod
    def decode(cls, raw: bytes, what: str = "namespace record") -> NamespaceRecord:
        doc = _load(raw, what)
        return cls(_str(doc, "namespace_id", what), _int(doc, "created_at_ms", what))


FENCE_MARKER = "FENCE"


@dataclass(frozen=True)
class FenceMarker:
    """A fence marker in a sequential partition's sequence (docs/SEQUENTIAL_APPEND.md).

    It takes no offset; every key after it carries a nonzero fence count,
    which makes the entries there void. ``roll``: put by a takeover's roll,
    which seals the generation and opens the next one without fencing the log
    (docs/SEQUENTIAL_APPEND.md, "Roll").
    """

    fence_id: str
    created_at_ms: int
    roll: bool = False

    def encode(self) -> bytes:
        doc: dict[str, Any] = {"type": FENCE_MARKER, "fence_id": self.fence_id, "created_at_ms": self.created_at_ms}
        if self.roll:
            doc["roll"] = True
        return _dump(doc)


def decode_sequence_value(raw: bytes) -> IndexEntry | FenceMarker:
    """The value of a sequence key: an index entry, or a fence marker."""
    doc = _load(raw, "sequence entry")
    if doc.get("type") == FENCE_MARKER:
        what = "fence marker"
        roll = doc.get("roll", False)
        if not isinstance(roll, bool):
            raise CorruptMetadata(f"{what} field 'roll' is not a boolean: {roll!r}")
        return FenceMarker(_str(doc, "fence_id", what), _int(doc, "created_at_ms", what), roll)
    return IndexEntry.from_doc(doc)


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


@dataclass(frozen=True)
class CompactionCursor:
    """``meta/compaction-cursor``: the first offset not yet compacted."""

    offset: int = INITIAL_OFFSET

    def encode(self) -> bytes:
        return _dump({"offset": self.offset})

    @classmethod
    def decode(cls, raw: bytes) -> CompactionCursor:
        return cls(_int(_load(raw, "meta/compaction-cursor"), "offset", "meta/compaction-cursor"))


class CompactionState(str, Enum):
    WRITING_COMPACTED_INDEX = "WRITING_COMPACTED_INDEX"
    DELETING_OLD = "DELETING_OLD"
    UPDATING_CURSOR = "UPDATING_CURSOR"


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
        return _dump_present(
            {
                "compaction_id": self.compaction_id,
                "state": self.state.value,
                "start_offset": self.start_offset,
                "end_offset": self.end_offset,
                "msg_count": self.msg_count,
                "data_key": self.data_key,
                "encoding": self.encoding,
                "created_at_ms": self.created_at_ms,
                "last_source_start_offset": self.last_source_start_offset,
                "data_bytes": self.data_bytes,
                "log_max_timestamp_ms": self.log_max_timestamp_ms,
                **TimeSpan.optional_fields(self.times),
            }
        )

    @classmethod
    def decode(cls, raw: bytes) -> CompactionRecord:
        what = "meta/compaction"
        doc = _load(raw, what)
        state = _enum(CompactionState, doc.get("state"), what, "state")
        return cls(
            compaction_id=_str(doc, "compaction_id", what),
            state=state,
            start_offset=_int(doc, "start_offset", what),
            end_offset=_int(doc, "end_offset", what),
            msg_count=_int(doc, "msg_count", what),
            data_key=_str(doc, "data_key", what),
            created_at_ms=_int(doc, "created_at_ms", what),
            encoding=_str(doc, "encoding", what),
            last_source_start_offset=_int(doc, "last_source_start_offset", what, optional=True),
            data_bytes=_int(doc, "data_bytes", what, optional=True),
            times=TimeSpan.from_doc(doc, what),
            log_max_timestamp_ms=_int(doc, "log_max_timestamp_ms", what, optional=True, signed=True),
        )


END_OFFSET_METADATA = "llog-end-offset"


def compacted_object_metadata(start: int, end: int) -> dict[str, str]:
    """S3 user metadata of a compacted object: lets GC find the index key that should reference it (docs/GC.md)."""
    return {"llog-start-offset": str(start), END_OFFSET_METADATA: str(end)}


MANIFEST_FORMAT = "llog-compacted-range-v1"


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
        return _dump(
            {
                "format": MANIFEST_FORMAT,
                "topic": self.topic,
                "partition": self.partition,
                "start_offset": self.start_offset,
                "end_offset": self.end_offset,
                "record_count": self.record_count,
                "data_key": self.data_key,
                "encoding": self.encoding,
                "compaction_id": self.compaction_id,
                "created_at_ms": self.created_at_ms,
                **TimeSpan.optional_fields(self.times),
            }
        )

    @classmethod
    def decode(cls, raw: bytes, what: str = "manifest") -> CompactedRange:
        doc = _load(raw, what)
        if doc.get("format") != MANIFEST_FORMAT:
            raise CorruptMetadata(f"{what} has an unknown format {doc.get('format')!r}")
        decoded = cls(
            topic=_str(doc, "topic", what),
            partition=_int(doc, "partition", what),
            start_offset=_int(doc, "start_offset", what),
            end_offset=_int(doc, "end_offset", what),
            data_key=_str(doc, "data_key", what),
            compaction_id=_str(doc, "compaction_id", what),
            created_at_ms=_int(doc, "created_at_ms", what),
            encoding=_str(doc, "encoding", what),
            times=TimeSpan.from_doc(doc, what),
        )
        if _int(doc, "record_count", what) != decoded.record_count:
            raise CorruptMetadata(f"{what} record_count disagrees with its offsets")
        return decoded
