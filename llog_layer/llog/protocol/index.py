"""One partition's sparse index, whatever its append protocol (docs/SEQUENTIAL_APPEND.md).

A **CAS** partition keeps every entry at ``index/{end_offset}``. A
**sequential** partition keeps its entries in *generations*: generation
``g >= 1`` is one Oxia sequence ``seq/{g}/e-{position}-{fences}`` whose
valid entries (fence count 0) end at ``base + position``; generation 0, when
present, is the CAS index the partition had before its migration. The
generations and their offset ranges are listed in ``meta/control``.

``PartitionIndex`` answers offset questions over both: the high watermark,
the entry covering an offset (CEILING), forward scans, the entry ending at an
offset (with its key and version, for compaction's compare-and-set), and the
key ranges compaction and retention delete. Reader, compactor, garbage
collector and retention use it, so they work on partitions of either kind
without knowing which.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from llog.errors import CorruptMetadata
from llog.format.keys import format_offset
from llog.format.kv.control import CAS_GENERATION, ControlRecord, Generation, PendingAppend, generation_of
from llog.format.kv.index import EntryType, IndexedBatch
from llog.protocol.metadata import PartitionMetadata, SequenceRecord

Probe = Callable[[int], tuple[int, bool] | None]


def last_valid_position(lo: int, hi: int, probe: Probe) -> int:
    """The highest position in ``[lo, hi]`` whose key is valid (fence count 0).

    Preconditions: the answer is at least ``lo`` (``lo`` was a valid key's
    position at some time, or is 0: none known); no valid key lies above
    ``hi``. ``probe(x)`` returns ``(position, valid)`` of the first key at or
    after position ``x`` (None: no key there). Valid
    keys all precede the first fence marker, so "the first key at or after
    ``x`` is valid" holds for small ``x`` and fails beyond the last valid key:
    a binary search over it takes ``O(log(hi - lo))`` probes, and compaction
    having deleted keys in between does not matter (the last valid key is an
    end key and is never deleted).
    """
    while lo < hi:
        x = (lo + hi + 1) // 2
        found = probe(x)
        if found is not None and found[1]:
            lo = found[0]
        else:
            hi = x - 1
    return lo


@dataclass(frozen=True)
class LocatedEntry:
    """An index entry with the Oxia key and version it is stored under."""

    batch: IndexedBatch
    key: str
    version_id: int


class CasSegment:
    """``index/{end_offset}``: the whole index of a CAS partition, or generation 0 of a migrated one."""

    generation: int | None = None
    base = 0

    def __init__(self, meta: PartitionMetadata, end: int | None = None) -> None:
        self.meta = meta
        self.end = end

    def _within(self, batch: IndexedBatch | None) -> IndexedBatch | None:
        return batch if batch is not None and (self.end is None or batch.end_offset <= self.end) else None

    def ceiling(self, offset: int) -> IndexedBatch | None:
        return self._within(self.meta.index_ceiling(offset))

    def scan(self, from_offset: int, limit: int | None) -> list[IndexedBatch]:
        batches = self.meta.scan_index(from_offset, limit=limit)
        return [b for b in batches if self.end is None or b.end_offset <= self.end]

    def locate(self, end_offset: int) -> LocatedEntry | None:
        found = self.meta.index_entry(end_offset)
        return None if found is None else LocatedEntry(found[0], self.key_of(end_offset), found[1])

    def key_of(self, end_offset: int) -> str:
        return self.meta.keys.index(end_offset)

    def delete_entries(self, start_offset: int, end_offset: int) -> None:
        self.meta.delete_keys(self.meta.keys.index(start_offset), self.meta.keys.index(end_offset))

    def range_below(self, log_start: int, read_through: int) -> tuple[str, str] | None:
        """The keys of the entries ending before ``log_start``; ``read_through`` does not bound them:
        ``index/`` keys hold no counter (a CAS partition's is ``meta/control``)."""
        keys = self.meta.keys
        upto = log_start if self.end is None else min(log_start, self.end + 1)
        return f"{keys.index_prefix}{format_offset(0)}", keys.index(upto)

    def last_offset(self, control: ControlRecord) -> int:
        return control.high_watermark if self.end is None else self.end


class SequenceSegment:
    """Generation ``g >= 1`` of a sequential partition: one Oxia sequence; offsets ``base + position``."""

    def __init__(self, meta: PartitionMetadata, generation: Generation) -> None:
        self.meta = meta
        self.generation: int | None = generation.number
        self.number = generation.number
        self.base = generation.base
        self.end = generation.end

    def _batch(self, record: SequenceRecord | None) -> IndexedBatch | None:
        batch = None if record is None else record.batch(self.base)
        return batch if batch is not None and (self.end is None or batch.end_offset <= self.end) else None

    def ceiling(self, offset: int) -> IndexedBatch | None:
        return self._batch(self.meta.sequence_ceiling(self.number, offset - self.base))

    def scan(self, from_offset: int, limit: int | None) -> list[IndexedBatch]:
        batches = []
        for record in self.meta.scan_sequence(self.number, max(from_offset - self.base, 0), limit=limit):
            batch = self._batch(record)
            if batch is None:
                break  # a fence marker: nothing valid follows in this generation
            batches.append(batch)
        return batches

    def locate(self, end_offset: int) -> LocatedEntry | None:
        record = self.meta.sequence_entry(self.number, end_offset - self.base)
        batch = self._batch(record)
        return None if batch is None or record is None else LocatedEntry(batch, record.raw_key, record.version_id)

    def key_of(self, end_offset: int) -> str:
        return self.meta.keys.sequence_key(self.number, end_offset - self.base)

    def delete_entries(self, start_offset: int, end_offset: int) -> None:
        """Delete the keys of entries ending in ``[start_offset, end_offset)``; never the generation's tail."""
        self.meta.delete_keys(self.meta.keys.sequence_position(self.number, start_offset - self.base),
                              self.key_of(end_offset))

    def range_below(self, log_start: int, read_through: int) -> tuple[str, str] | None:
        """The keys of the entries ending before ``log_start`` (None: none), never the sequence's counter.

        In a sealed generation the fence marker (and whatever landed after it)
        stays: it is the counter that keeps late puts void. A generation the
        table calls open is cleared no further than ``read_through``, the last
        entry read below ``log_start``: valid keys, all below any fence marker.
        The log start alone is no bound there: with a stale table, another
        retention run may have moved it past the generation, fenced since, and
        the range would take its marker (then a writer still holding the
        generation would land at a valid key of an empty sequence).
        """
        keys = self.meta.keys
        upto = min(log_start, read_through + 1) if self.end is None else min(log_start, self.end + 1)
        if upto <= self.base + 1:
            return None
        return keys.sequence_position(self.number, 0), keys.sequence_position(self.number, upto - self.base)

    def last_valid_position(self, lo: int = 0) -> int:
        """The position of the generation's last valid key (0: none), read from its tail.

        One read when the tail is valid; after a fence marker landed, a binary
        search from ``lo`` (a known valid position, or 0).
        """
        tail = self.meta.sequence_tail(self.number)
        if tail is None:
            return 0
        if not tail.void:
            return tail.key.position

        def probe(position: int) -> tuple[int, bool] | None:
            found = self.meta.sequence_ceiling(self.number, position)
            return None if found is None else (found.key.position, not found.void)

        return last_valid_position(lo, tail.key.position - 1, probe)

    def last_offset(self, control: ControlRecord) -> int:
        return self.end if self.end is not None else self.base + self.last_valid_position()


Segment = CasSegment | SequenceSegment


STALE_KEYS_PAGE = 16  # entries read past a stale key looking for the compacted entry over it (and other stale keys)


class PartitionIndex:
    """Offset-based access to one partition's index, as of one read of ``meta/control``.

    The offset ranges of generations never change once assigned, so a
    slightly stale control record only means not seeing a newer generation.
    """

    def __init__(self, meta: PartitionMetadata, control: ControlRecord) -> None:
        self.meta = meta
        self.control = control
        self.segments: list[Segment]
        if control.sequential:
            self.segments = [
                CasSegment(meta, g.end) if g.number == CAS_GENERATION else SequenceSegment(meta, g)
                for g in control.generations
            ]
        else:
            self.segments = [CasSegment(meta)]

    @classmethod
    def load(cls, meta: PartitionMetadata) -> PartitionIndex:
        return cls(meta, meta.control().record)

    @property
    def sequential(self) -> bool:
        return self.control.sequential

    @property
    def pending(self) -> PendingAppend | None:
        return self.control.pending

    def segment_for(self, offset: int) -> Segment | None:
        if not self.control.sequential:
            return self.segments[0]
        generation = generation_of(self.control.generations, offset)
        if generation is None:
            return None
        return self.segments[self.control.generations.index(generation)]

    # --- reads -----------------------------------------------------------------

    def high_watermark(self) -> int:
        """The last readable offset: ``meta/control`` for CAS partitions, the sequence's tail otherwise."""
        return self.segments[-1].last_offset(self.control)

    def ceiling(self, offset: int) -> IndexedBatch | None:
        """The first entry ending at or after ``offset`` within ``offset``'s generation."""
        segment = self.segment_for(offset)
        return None if segment is None else segment.ceiling(offset)

    def covering(self, offset: int) -> IndexedBatch | None:
        """The entry (or, in a CAS partition, the pending append) holding ``offset``.

        An entry found above ``offset`` can be a stale key over a compacted range that holds ``offset``
        (``superseding``): then that range.
        """
        batch = self.ceiling(offset)
        if batch is not None and not batch.covers(offset):
            batch = self.superseding(batch)  # one more read, only where entries overlap
        if batch is not None and batch.covers(offset):
            return batch
        pending = self.control.pending
        if pending is not None and pending.covers(offset):
            return IndexedBatch(pending.end_offset, pending.index_entry())
        return None

    def superseding(self, batch: IndexedBatch) -> IndexedBatch | None:
        """The COMPACTED entry after WAL entry ``batch`` if it holds all of ``batch``'s offsets, else None.

        Entries overlap so only while a compaction deletes the keys below its
        end key, or where a party re-created such a key and died before its
        stale check (docs/PROTOCOL.md, "Why index entries are only ever
        created, and the stale-key check"). Either way the compacted entry
        holds the same records (I3), and GC may have deleted the WAL entry's
        blob: nothing below the compaction cursor counts as its reference.
        """
        if batch.entry.type is not EntryType.WAL:
            return None
        # Other stale keys may lie between it and the compacted entry (each a party that died before its check).
        following = self.scan(batch.end_offset + 1, limit=STALE_KEYS_PAGE)
        after = next((b for b in following if b.entry.type is not EntryType.WAL), None)
        if after is None or after.entry.type is not EntryType.COMPACTED or after.start_offset > batch.start_offset:
            return None
        return after

    def scan(self, from_offset: int, *, limit: int | None = None) -> list[IndexedBatch]:
        """Valid entries ending at or after ``from_offset``, in offset order, across generations."""
        batches: list[IndexedBatch] = []
        for segment in self.segments:
            if segment.end is not None and segment.end < from_offset:
                continue
            remaining = None if limit is None else limit - len(batches)
            batches.extend(segment.scan(max(from_offset, segment.base + 1), remaining))
            if limit is not None and len(batches) >= limit:
                break
        return batches

    def iter(self, from_offset: int, *, page: int = 1024) -> Iterator[IndexedBatch]:
        """Every valid entry ending at or after ``from_offset``, fetched ``page`` at a time."""
        while batches := self.scan(from_offset, limit=page):
            yield from batches
            from_offset = batches[-1].end_offset + 1

    def locate(self, end_offset: int) -> LocatedEntry | None:
        """The valid entry ending exactly at ``end_offset``, with its key and version."""
        segment = self.segment_for(end_offset)
        return None if segment is None else segment.locate(end_offset)

    # --- keys for compaction and retention ---------------------------------------

    def key_of(self, end_offset: int) -> str:
        """The key an entry ending at ``end_offset`` is stored under."""
        segment = self.segment_for(end_offset)
        if segment is None:
            raise CorruptMetadata(f"offset {end_offset} is in no generation of {self.meta.keys.base}")
        return segment.key_of(end_offset)

    def delete_entries(self, start_offset: int, end_offset: int) -> None:
        """Delete the entries ending in ``[start_offset, end_offset)`` (one generation: a compacted range)."""
        segment = self.segment_for(end_offset)
        if segment is None or segment is not self.segment_for(start_offset):
            raise CorruptMetadata(
                f"[{start_offset}, {end_offset}] is not within one generation of {self.meta.keys.base}"
            )
        segment.delete_entries(start_offset, end_offset)

    def ranges_below(self, log_start: int, *, read_through: int) -> list[tuple[str, str]]:
        """The key ranges ``[min, max)`` holding the entries ending before ``log_start``, per generation.

        ``read_through`` is the end of the last entry below ``log_start`` the
        caller read through this index. This generation table may be older
        than the log start (set by another retention run through a newer one),
        so a generation it calls open is cleared only up to ``read_through``.
        """
        ranges = []
        for segment in self.segments:
            if segment.base + 1 < log_start:
                found = segment.range_below(log_start, read_through)
                if found is not None:
                    ranges.append(found)
        return ranges

    def delete_below(self, log_start: int, *, read_through: int) -> None:
        """Delete every entry ending before ``log_start`` (retention); never a generation's counter."""
        for min_key, max_key in self.ranges_below(log_start, read_through=read_through):
            self.meta.delete_keys(min_key, max_key)
