"""Typed access to one partition's Oxia records (control, cursor, compaction, GC watermark, index).

Writer, reader, compactor, retention and GC talk to Oxia through this class, so JSON
parsing, partition keys and the prefix checks every CEILING lookup needs
live in one place.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from llog.errors import CorruptMetadata, InvalidArgument, LlogError, PartitionNotInitialized, VersionConflict
from llog.format.keys import SEQUENCE_PARTS, PartitionKeys, SequenceKey
from llog.format.kv.compaction import CompactionCursor, CompactionRecord
from llog.format.kv.control import AppendProtocol, ControlRecord, Generation
from llog.format.kv.document import INITIAL_OFFSET
from llog.format.kv.index import FenceMarker, IndexedBatch, IndexEntry, decode_sequence_value
from llog.protocol.registry import PartitionRegistry
from llog.store.oxia import CREATE_ONLY, OxiaStore, Versioned
from llog.store.oxia_wire import SequentialPut

APPEND_DELTAS_FENCES = 0  # an append leaves the fence count as it is
FENCE_DELTAS = (1, 1)  # a fence marker takes one position and counts one more fence


_recording = threading.local()  # .writes: the set this thread's commit-key writes go to (None: not recording)

KeyVersion = tuple[str, int]
"""A write to Oxia: the key written and the version id it got. Version ids are counted per shard (the same id
is given on every shard), so only the pair names one write."""


@contextlib.contextmanager
def recording_commit_writes() -> Iterator[set[KeyVersion]]:
    """This thread's writes to partitions' commit keys (``meta/control``, the ``seq/`` folder: what consumers
    are notified of) inside the block, each as (key, version id). The writer reports each partition's with its
    committed batch, so that a cache tells the notifications of its own process's writes from others'
    (``llog.service.tail_cache``). A write whose answer was lost is not among them."""
    outer: set[KeyVersion] | None = getattr(_recording, "writes", None)
    writes: set[KeyVersion] = set()
    _recording.writes = writes
    try:
        yield writes
    finally:
        _recording.writes = outer
        if outer is not None:
            outer |= writes


def _wrote_commit_key(key: str, version_id: int) -> None:
    writes: set[KeyVersion] | None = getattr(_recording, "writes", None)
    if writes is not None:
        writes.add((key, version_id))


@dataclass(frozen=True)
class CommitWrites:
    """What a commit reports to its listener: the partition's commit keys (``PartitionKeys.commit_keys``, which
    a cache follows) and the commit's writes to them, each as (key, version id)."""

    commit_keys: tuple[str, ...]
    writes: frozenset[KeyVersion]

    @classmethod
    def of(cls, keys: PartitionKeys, recorded: Iterable[KeyVersion]) -> CommitWrites:
        """The writes among ``recorded`` (several partitions' when their puts went in one Oxia write) to the
        commit keys of the partition ``keys``."""
        control, folder = keys.commit_keys
        return cls(keys.commit_keys, frozenset(w for w in recorded if w[0] == control or w[0].startswith(folder)))


@dataclass(frozen=True)
class VersionedControl:
    record: ControlRecord
    version_id: int


@dataclass(frozen=True)
class VersionedCompaction:
    record: CompactionRecord
    version_id: int


@dataclass(frozen=True)
class VersionedCursor:
    cursor: CompactionCursor
    version_id: int | None  # None: no cursor stored (it reads as the initial one)


@dataclass(frozen=True)
class MetaSnapshot:
    """A partition's ``meta/`` records as one range scan found them."""

    control: ControlRecord | None  # None: not initialized (yet)
    cursor: CompactionCursor
    compaction: CompactionRecord | None
    gc_watermark: str | None


@dataclass(frozen=True)
class SequenceRecord:
    """One key of a sequential partition's sequence, parsed: an entry or a fence marker."""

    key: SequenceKey
    raw_key: str
    value: IndexEntry | FenceMarker
    version_id: int

    @property
    def void(self) -> bool:
        """Past a fence marker (or a marker itself): never part of the log."""
        return self.key.fences > 0

    def batch(self, base: int) -> IndexedBatch | None:
        """The index entry as a batch at offsets ``base + position``; None for markers and void entries."""
        if self.void or not isinstance(self.value, IndexEntry):
            return None
        return IndexedBatch(base + self.key.position, self.value, self.key.generation)


class PartitionMetadata:
    def __init__(self, oxia: OxiaStore, keys: PartitionKeys) -> None:
        self.oxia = oxia
        self.keys = keys

    @property
    def _pk(self) -> str:
        return self.keys.partition_key

    # --- meta/control ----------------------------------------------------------

    def control(self) -> VersionedControl:
        found = self.oxia.get(self.keys.control, partition_key=self._pk)
        if found is None:
            raise PartitionNotInitialized(self.keys.topic, self.keys.partition)
        return VersionedControl(ControlRecord.decode(found.value), found.version_id)

    def replace_control(self, record: ControlRecord, expected_version_id: int) -> int:
        """Compare-and-set ``meta/control``; raises ``VersionConflict``."""
        version_id = self.oxia.put(
            self.keys.control, record.encode(), partition_key=self._pk, expected_version_id=expected_version_id
        )
        _wrote_commit_key(self.keys.control, version_id)
        return version_id

    def create(self, protocol: AppendProtocol = AppendProtocol.CAS) -> bool:
        """Register the partition, then create the cursor, then the control record, each only if absent.

        The control record is the partition's existence marker, so it comes
        last: a crash before it leaves a partition that is simply not
        initialized yet, and registered, so discovery never misses an
        initialized partition (``llog.protocol.registry``). Returns True if this call
        created ``meta/control``. The protocol is fixed here (or by a later
        one-way migration): whoever creates the record first decides it for
        every writer.
        """
        PartitionRegistry(self.oxia, root=self.keys.root).register(self.keys)
        self._create(self.keys.compaction_cursor, CompactionCursor(INITIAL_OFFSET).encode())
        control = ControlRecord()
        if protocol is AppendProtocol.SEQUENTIAL:
            control = ControlRecord(protocol=protocol, generations=(Generation(1, 0),))
        return self._create(self.keys.control, control.encode())

    def _create(self, key: str, value: bytes) -> bool:
        try:
            self.oxia.put(key, value, partition_key=self._pk, expected_version_id=CREATE_ONLY)
        except VersionConflict:
            return False
        return True

    # --- every meta/ record at once ----------------------------------------------

    def snapshot(self) -> MetaSnapshot:
        """Control, cursor, compaction and GC watermark in one Oxia call: a scan of the ``meta/`` level.

        The records share the partition key and one key depth, so ``[meta/, meta/~)``
        holds exactly them (docs/PROTOCOL.md, "Key order"); keys are matched
        exactly all the same. For readers that need a partition's state, not an
        order between its reads: the compactor and retention, whose safety rests
        on reading the cursor before ``meta/compaction``, read them one by one.
        """
        prefix = f"{self.keys.base}/meta/"  # the folder of keys.control, keys.compaction_cursor, ...
        found = {r.key: r.value for r in self.oxia.range_scan(prefix, f"{prefix}~", partition_key=self._pk)}
        control = found.get(self.keys.control)
        cursor = found.get(self.keys.compaction_cursor)
        compaction = found.get(self.keys.compaction)
        return MetaSnapshot(
            control=None if control is None else ControlRecord.decode(control),
            cursor=CompactionCursor(INITIAL_OFFSET) if cursor is None else CompactionCursor.decode(cursor),
            compaction=None if compaction is None else CompactionRecord.decode(compaction),
            gc_watermark=self._gc_watermark(found.get(self.keys.gc_watermark)),
        )

    # --- compaction state ------------------------------------------------------

    def cursor(self) -> CompactionCursor:
        return self.versioned_cursor().cursor

    def versioned_cursor(self) -> VersionedCursor:
        found = self.oxia.get(self.keys.compaction_cursor, partition_key=self._pk)
        if found is None:
            return VersionedCursor(CompactionCursor(INITIAL_OFFSET), None)
        return VersionedCursor(CompactionCursor.decode(found.value), found.version_id)

    def replace_cursor(self, cursor: CompactionCursor, expected_version_id: int | None) -> int:
        """Compare-and-set ``meta/compaction-cursor`` (``None``: create it); raises ``VersionConflict``."""
        return self.oxia.put(
            self.keys.compaction_cursor,
            cursor.encode(),
            partition_key=self._pk,
            expected_version_id=CREATE_ONLY if expected_version_id is None else expected_version_id,
        )

    def compaction(self) -> CompactionRecord | None:
        found = self.versioned_compaction()
        return None if found is None else found.record

    def versioned_compaction(self) -> VersionedCompaction | None:
        found = self.oxia.get(self.keys.compaction, partition_key=self._pk)
        return None if found is None else VersionedCompaction(CompactionRecord.decode(found.value), found.version_id)

    def create_compaction(self, record: CompactionRecord) -> bool:
        """Create ``meta/compaction`` only if absent; False if a compaction is already recorded."""
        return self._create(self.keys.compaction, record.encode())

    def replace_compaction(self, record: CompactionRecord, expected_version_id: int) -> int:
        """Compare-and-set ``meta/compaction``; raises ``VersionConflict``."""
        return self.oxia.put(
            self.keys.compaction, record.encode(), partition_key=self._pk, expected_version_id=expected_version_id
        )

    def delete_compaction(self, expected_version_id: int) -> None:
        """Delete ``meta/compaction`` only if it is still that version; raises ``VersionConflict``."""
        self.oxia.delete(self.keys.compaction, partition_key=self._pk, expected_version_id=expected_version_id)

    # --- GC's watermark (docs/GC.md) ----------------------------------------------

    def _gc_watermark(self, value: bytes | None) -> str | None:
        """The last compacted object GC judged, or None: none yet, or unreadable (judging again is only slower)."""
        try:
            after = None if value is None else json.loads(value)["after"]
        except (ValueError, KeyError, TypeError):
            after = None
        return after if isinstance(after, str) and after.startswith(self.keys.compacted_prefix) else None

    def set_gc_watermark(self, judged: str) -> None:
        self.oxia.put(self.keys.gc_watermark, json.dumps({"after": judged}).encode(), partition_key=self._pk)

    # --- index -----------------------------------------------------------------

    def _batch(self, key: str, value: bytes) -> IndexedBatch | None:
        end = self.keys.parse_index_key(key)
        if end is None:
            return None
        try:
            return IndexedBatch(end, IndexEntry.decode(value))
        except CorruptMetadata as exc:
            raise CorruptMetadata(f"{key}: {exc}") from None

    def index_ceiling(self, offset: int) -> IndexedBatch | None:
        """The first index entry whose end offset is >= ``offset``, if it belongs to this partition."""
        found = self.oxia.get_ceiling(self.keys.index(offset), partition_key=self._pk)
        return None if found is None else self._batch(found.key, found.value)

    def index_entry(self, end_offset: int) -> tuple[IndexedBatch, int] | None:
        found = self.oxia.get(self.keys.index(end_offset), partition_key=self._pk)
        if found is None:
            return None
        batch = self._batch(found.key, found.value)
        return None if batch is None else (batch, found.version_id)

    def scan_index(self, from_offset: int, *, limit: int | None = None) -> list[IndexedBatch]:
        """Index entries with end offset >= ``from_offset``, in offset order."""
        records = self.oxia.range_scan(
            self.keys.index(from_offset), self.keys.index_scan_end, partition_key=self._pk, limit=limit
        )
        batches = (self._batch(r.key, r.value) for r in records)
        return [b for b in batches if b is not None]

    def create_index_entry(self, end_offset: int, entry: IndexEntry) -> int | None:
        """Write the entry only if its key is absent; the new version, or None if it existed.

        A conflict after a retried attempt may be our own earlier write: then
        the entry found carries our ``append_id`` and counts as created.
        """
        try:
            return self.oxia.put(
                self.keys.index(end_offset), entry.encode(), partition_key=self._pk, expected_version_id=CREATE_ONLY
            )
        except VersionConflict as conflict:
            if conflict.ambiguous and entry.append_id is not None:
                found = self.index_entry(end_offset)
                if found is not None and found[0].entry.append_id == entry.append_id:
                    return found[1]
            return None

    def replace_entry(self, key: str, entry: IndexEntry, expected_version_id: int) -> int:
        """Compare-and-set the entry at ``key``, an index or sequence key; raises ``VersionConflict``.

        Never creates a key, so in a sequence it never moves the counter.
        """
        return self.oxia.put(key, entry.encode(), partition_key=self._pk, expected_version_id=expected_version_id)

    def delete_index_entry(self, end_offset: int, *, expected_version_id: int) -> bool:
        """Delete the entry only if it is still the version we wrote."""
        try:
            return self.oxia.delete(
                self.keys.index(end_offset), partition_key=self._pk, expected_version_id=expected_version_id
            )
        except VersionConflict:
            return False

    def delete_keys(self, min_key: str, max_key: str) -> None:
        """Delete this partition's keys in ``[min_key, max_key)``: index or sequence entries (compaction, retention)."""
        self.oxia.delete_range(min_key, max_key, partition_key=self._pk)

    # --- sequences (sequential partitions, docs/SEQUENTIAL_APPEND.md) -----------

    def _sequence_record(self, generation: int, found: Versioned | None) -> SequenceRecord | None:
        if found is None:
            return None
        key = self.keys.parse_sequence_key(generation, found.key)
        if key is None:
            return None  # a lookup past the sequence returns other keys of the shard
        try:
            value = decode_sequence_value(found.value)
        except CorruptMetadata as exc:
            raise CorruptMetadata(f"{found.key}: {exc}") from None
        return SequenceRecord(key, found.key, value, found.version_id)

    def append_to_sequence(self, generation: int, value: bytes, deltas: tuple[int, int]) -> SequenceKey:
        """One sequential put into ``generation``: the server picks the key. The only write of an append.

        Raises ``OxiaUnavailable`` when the answer is lost (the put may have landed).
        """
        put = self._sequence_put(generation, value, deltas)
        written = self.oxia.put_sequential(
            put.prefix_key, put.value, partition_key=put.partition_key, deltas=put.deltas
        )
        return self._landed(generation, written)

    def _sequence_put(self, generation: int, value: bytes, deltas: tuple[int, int]) -> SequentialPut:
        if len(deltas) != SEQUENCE_PARTS:
            raise InvalidArgument(f"a put into a sequence passes exactly {SEQUENCE_PARTS} deltas, not {deltas}")
        return SequentialPut(self.keys.sequence_prefix(generation), value, self._pk, deltas)

    def _landed(self, generation: int, written: Versioned) -> SequenceKey:
        key = self.keys.parse_sequence_key(generation, written.key)
        if key is None:
            raise CorruptMetadata(f"Oxia named a sequential key {written.key!r} outside generation {generation}")
        _wrote_commit_key(written.key, written.version_id)
        return key

    def sequence_tail(self, generation: int) -> SequenceRecord | None:
        """The highest key of the generation's sequence: its counter (None: nothing appended yet)."""
        found = self.oxia.get_lower(self.keys.sequence_upper_bound(generation), partition_key=self._pk)
        return self._sequence_record(generation, found)

    def sequence_ceiling(self, generation: int, position: int) -> SequenceRecord | None:
        """The first key of the generation at or after ``position``."""
        found = self.oxia.get_ceiling(self.keys.sequence_position(generation, position), partition_key=self._pk)
        return self._sequence_record(generation, found)

    def scan_sequence(self, generation: int, from_position: int, *, limit: int | None = None) -> list[SequenceRecord]:
        """Keys of the generation from ``from_position`` on, in order."""
        found = self.oxia.range_scan(
            self.keys.sequence_position(generation, from_position),
            self.keys.sequence_scan_end(generation),
            partition_key=self._pk,
            limit=limit,
        )
        records = (self._sequence_record(generation, r) for r in found)
        return [r for r in records if r is not None]

    def sequence_entry(self, generation: int, position: int) -> SequenceRecord | None:
        """The valid (fence count 0) key at ``position``, if there is one."""
        found = self.oxia.get(self.keys.sequence_key(generation, position), partition_key=self._pk)
        return self._sequence_record(generation, found)


@dataclass(frozen=True)
class SequenceAppend:
    """One partition's put of ``append_to_sequences``."""

    meta: PartitionMetadata
    generation: int
    value: bytes
    deltas: tuple[int, int]


def append_to_sequences(
    oxia: OxiaStore, appends: list[SequenceAppend], *, before_each: Callable[[], None] | None = None
) -> list[SequenceKey | LlogError]:
    """``append_to_sequence`` for several partitions at once: one Oxia write request per shard.

    Each append gets its key or its error (``OxiaUnavailable``: the put may have landed);
    ``before_each`` runs before each request (``OxiaStore.put_sequential_many``).
    """
    puts = [a.meta._sequence_put(a.generation, a.value, a.deltas) for a in appends]
    results: list[SequenceKey | LlogError] = []
    for append, written in zip(appends, oxia.put_sequential_many(puts, before_each=before_each), strict=True):
        if isinstance(written, LlogError):
            results.append(written)
            continue
        try:
            results.append(append.meta._landed(append.generation, written))
        except CorruptMetadata as exc:
            results.append(exc)
    return results
