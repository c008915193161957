"""The read path (docs/PROTOCOL.md, "Read"; docs/SEQUENTIAL_APPEND.md).

1. read ``meta/control``: the partition exists; a CAS partition's high
   watermark is ``sequence_counter - 1``, a sequential one's is read from its
   sequence's highest key (``llog.protocol.index.PartitionIndex``);
2. resolve the batch holding an offset: Oxia CEILING on the entry key of the
   offset (``index/{offset}``, or the position in its generation's sequence),
   checked for our prefix and for actually covering the offset (an entry that
   does not may be a stale key over a compacted range that does,
   ``PartitionIndex.covering``); in a CAS partition else ``meta/control.pending``;
3. fetch the batch (an S3 range GET for a slice of a shared blob; an object
   gone since the lookup is looked up again, ``refetch``);
4. decode ``bytes-batch-v1``, checking the record count against the index.

An offset in a LOST entry (a range a rebuild from S3 could not recover,
docs/RECOVERY.md) has no batch: reading it raises ``RecordsLost``, which
names the range and the offset to continue at.

Scans walk the index forward in pages and re-resolve point-wise when the
index changes under them (compaction), so they see each offset exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import NamedTuple

from llog.errors import BlobNotFound, InconsistentReadState, InvalidArgument, OffsetOutOfRange, RecordsLost
from llog.format.codec import Headers, RecordBatch, decode_batch
from llog.format.kv.control import ControlRecord
from llog.format.kv.index import EntryType, IndexedBatch
from llog.protocol.index import PartitionIndex
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.topics import TopicLayouts
from llog.store.fetch import batch_bytes
from llog.store.storage import Storage

SCAN_PAGE = 256
# Index entries per read when looking for a time: the first page is small (the answer is often near the
# log start, and a page costs its whole length to decode), each next one four times larger up to the last.
TIME_SCAN_PAGES = (16, 64, 256, 1024)
EARLIEST = "earliest"
LATEST = "latest"


class LogRecord(NamedTuple):
    """A record read back from the log, with its offset.

    A named tuple, not a dataclass: a consume answer builds thousands of them, and a tuple is built in
    about a third of the time a frozen dataclass's ``__init__`` takes."""

    offset: int
    value: bytes
    key: bytes | None
    headers: Headers
    timestamp_ms: int


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    log_start: int
    high_watermark: int
    control: ControlRecord
    index: PartitionIndex


@dataclass(frozen=True)
class TimestampOffset:
    """Where a timestamp falls in a partition (Kafka's ListOffsets).

    ``offset`` is the first offset whose record timestamp is at or after the
    asked time (``timestamp_ms`` is that record's), the log start for
    ``earliest`` and ``high_watermark + 1`` for ``latest``; None when no record
    is that late. ``batches_read`` counts the batches fetched to find it (at
    most one, plus one per index entry written before entries carried time spans).
    """

    topic: str
    partition: int
    offset: int | None
    timestamp_ms: int | None
    log_start: int
    high_watermark: int
    batches_read: int = 0


class LogReader:
    """Reads partitions; safe to share between threads. Ignores the storage's bucket: index entries carry S3 URIs."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.layouts = TopicLayouts(storage.oxia, root=storage.root)  # each partition's incarnation

    @classmethod
    def from_env(cls) -> LogReader:
        return cls(Storage.from_env(writes_objects=False))

    def close(self) -> None:
        self.storage.close()

    def __enter__(self) -> LogReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _metadata(self, topic: str, partition: int) -> PartitionMetadata:
        return PartitionMetadata(self.storage.oxia, self.layouts.keys(topic, partition))

    # --- state -----------------------------------------------------------------

    def partition_info(self, topic: str, partition: int) -> PartitionInfo:
        index = PartitionIndex.load(self._metadata(topic, partition))
        control = index.control
        return PartitionInfo(topic, partition, control.log_start_offset, index.high_watermark(), control, index)

    def tail(
        self,
        topic: str,
        partition: int,
        start_offset: int,
        *,
        page: int,
        control: ControlRecord | None = None,
        fresh: bool = False,
    ) -> tuple[PartitionInfo, list[IndexedBatch] | None]:
        """``partition_info``, and the batches from ``start_offset`` when the scan that found them proves the rest.

        A sequential partition's high watermark costs a read of its sequence's
        tail. A reader at the tail need not pay it: one index scan from the entry
        ending at or after ``start_offset - 1`` that returns fewer than ``page + 1``
        contiguous entries, the first covering ``start_offset - 1``, has read every
        entry up to the tail, so its last entry ends at the high watermark (only the
        one before ``start_offset``: the reader is at the tail). A long-poll woken by
        an append then reads control and one page, two reads instead of three. A
        full page's batches are returned too, with the tail read for the high
        watermark. Anything the scan does not prove (a gap, nothing before
        ``start_offset``, a CAS partition, whose high watermark is in control) is
        answered as ``partition_info`` does, with None for the batches (``batches``
        reads them). ``control``: a control record the caller believes current
        (a long-poll no notification about it has reached since it read it),
        used instead of reading it again for the scan; when the scan proves
        nothing, control is read afresh for the answer, unless ``fresh`` says the
        caller has just read it (several partitions' records in one request).
        """
        meta = self._metadata(topic, partition)
        reused = control is not None and not fresh
        index = PartitionIndex(meta, control) if control is not None else PartitionIndex.load(meta)
        control = index.control
        if index.sequential and start_offset > control.log_start_offset:
            scanned = index.scan(start_offset - 1, limit=page + 1)
            contiguous = bool(scanned) and scanned[0].covers(start_offset - 1)
            if contiguous and all(b.start_offset == a.end_offset + 1 for a, b in pairwise(scanned)):
                batches = [b for b in scanned if b.end_offset >= start_offset]
                # A short page reached the tail; a full one (a reader catching up) still serves its
                # batches, and only the high watermark is read.
                high_watermark = scanned[-1].end_offset if len(scanned) <= page else None
                if high_watermark is None and not reused:
                    high_watermark = index.high_watermark()
                if high_watermark is not None:
                    info = PartitionInfo(topic, partition, control.log_start_offset, high_watermark, control, index)
                    return info, batches
        if reused:
            index = PartitionIndex.load(meta)
            control = index.control
        return PartitionInfo(topic, partition, control.log_start_offset, index.high_watermark(), control, index), None

    def high_watermark(self, topic: str, partition: int) -> int:
        """The last committed offset; 0 for an empty partition."""
        return self.partition_info(topic, partition).high_watermark

    # --- resolution and fetch --------------------------------------------------

    def resolve(self, topic: str, partition: int, offset: int) -> IndexedBatch:
        """The batch (index entry or pending append) that holds ``offset``."""
        return self._resolve(PartitionIndex.load(self._metadata(topic, partition)), offset)

    def _resolve(self, index: PartitionIndex, offset: int, high_watermark: int | None = None) -> IndexedBatch:
        """The batch holding ``offset``. A CAS partition's range is checked first; a sequential one's
        high watermark costs a read, so there it is read only when no entry covers the offset."""
        self._check_range(index, offset, high_watermark)
        # Two rounds: the index can move between reading control and the lookup
        # (a pending append materialized, compaction replaced entries).
        for _ in range(2):
            batch = index.covering(offset)
            if batch is not None:
                return batch
            if index.sequential:
                self._check_range(index, offset, index.high_watermark())
            index = PartitionIndex.load(index.meta)
            self._check_range(index, offset)  # retention may have moved the log start past it meanwhile
        keys = index.meta.keys
        raise InconsistentReadState(
            f"no index entry or pending append covers offset {offset} of "
            f"{keys.topic}/{keys.partition} (high watermark {index.high_watermark()})"
        )

    @staticmethod
    def _check_range(index: PartitionIndex, offset: int, high_watermark: int | None = None) -> None:
        """``offset`` must be in ``[log start, high watermark]``.

        Without ``high_watermark``, a CAS partition's comes from ``meta/control``;
        a sequential partition's costs a read, so only the log start is checked.
        """
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise InvalidArgument(f"offset must be an integer, got {offset!r}")
        control = index.control
        if high_watermark is None and not index.sequential:
            high_watermark = control.high_watermark
        if offset < control.log_start_offset or (high_watermark is not None and offset > high_watermark):
            shown = index.high_watermark() if high_watermark is None else high_watermark
            keys = index.meta.keys
            raise OffsetOutOfRange(keys.topic, keys.partition, offset, control.log_start_offset, shown)

    def fetch(self, batch: IndexedBatch) -> RecordBatch:
        """Decode the batch: its inline copy, else a range GET for shared-blob slices, else a whole GET."""
        return decode_batch(batch_bytes(self.storage.blobs, batch.entry.ref), expected_count=batch.entry.msg_count)

    def offset_for_timestamp(self, topic: str, partition: int, timestamp_ms: int | str) -> TimestampOffset:
        """The first offset whose record timestamp is ``>= timestamp_ms`` (or ``"earliest"``, ``"latest"``).

        Timestamps need not grow with offsets: the answer is the first such
        record in offset order, as a scan would find it. Compacted entries
        carry the greatest timestamp from the log start through their end,
        which never decreases, so the compacted part of the log is bisected
        (``_skip_compacted``: about log2(compacted entries) reads); from there
        index entries are read forward until one's time span reaches the time,
        then that one batch. An entry without a time span (written by an older
        version) is fetched and read instead.
        """
        info = self.partition_info(topic, partition)
        found = TimestampOffset(topic, partition, None, None, info.log_start, info.high_watermark)
        if timestamp_ms == EARLIEST:
            return replace(found, offset=info.log_start)
        if timestamp_ms == LATEST:
            return replace(found, offset=info.high_watermark + 1)
        if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, int):
            raise InvalidArgument(
                f"timestamp must be an integer (ms), {EARLIEST!r} or {LATEST!r}, got {timestamp_ms!r}"
            )
        if info.high_watermark < info.log_start:
            return found  # empty
        batches_read = 0
        start = self._skip_compacted(info, timestamp_ms)
        for batch in self._iter_batches(info.index, start, info.high_watermark, TIME_SCAN_PAGES):
            span = batch.entry.ref.times
            if batch.entry.type is EntryType.LOST or (span is not None and span.max_ms < timestamp_ms):
                continue  # no record there is that late (a LOST range has none)
            try:
                records = self.fetch(batch)
            except BlobNotFound:
                batch, records = self.refetch(topic, partition, batch.start_offset)
            batches_read += 1
            first = max(batch.start_offset, info.log_start)
            for offset in range(first, min(batch.end_offset, info.high_watermark) + 1):
                record_ts = records.timestamp_ms(offset - batch.start_offset)
                if record_ts >= timestamp_ms:
                    return replace(found, offset=offset, timestamp_ms=record_ts, batches_read=batches_read)
        return replace(found, batches_read=batches_read)

    @staticmethod
    def _skip_compacted(info: PartitionInfo, timestamp_ms: int) -> int:
        """An offset no record before which is as late as ``timestamp_ms``: where a time scan may start.

        Bisects the compacted ranges below the compaction cursor on their
        ``log_max_timestamp_ms``: the first range whose value reaches the time
        holds the answer, or (when retention removed a later record than any
        kept) lies before it. Stops at a range without the value.
        """
        # Every offset below ``low`` is proven earlier than the time; a stop (a range without the value, or
        # one retention removed meanwhile) keeps that bound, and a finished search ends with low at the range.
        low = info.log_start
        high = min(info.index.meta.cursor().offset - 1, info.high_watermark)
        while low <= high:
            batch = info.index.covering((low + high) // 2)
            log_max = None if batch is None else batch.entry.log_max_timestamp_ms
            if batch is None or log_max is None:
                break
            if log_max >= timestamp_ms:
                high = batch.start_offset - 1
            else:
                low = batch.end_offset + 1
        return low

    # --- reads -----------------------------------------------------------------

    def read_offset(self, topic: str, partition: int, offset: int) -> LogRecord:
        batch = readable(topic, partition, self.resolve(topic, partition, offset))
        try:
            records = self.fetch(batch)
        except BlobNotFound:
            batch, records = self.refetch(topic, partition, offset)
        return record_at(records, batch.start_offset, offset)

    def refetch(self, topic: str, partition: int, offset: int) -> tuple[IndexedBatch, RecordBatch]:
        """The batch holding ``offset`` and its records, looked up afresh after its object was not found.

        Compaction may have replaced the entry and GC removed its object
        between the lookup and the GET: the offset now resolves to the
        compacted entry. A WAL entry that still resolves, its object gone, with
        a compacted entry over it is a stale key (``PartitionIndex.superseding``):
        the compacted entry holds the same records. A batch whose object went
        again since this lookup, with nothing over it, was removed by
        retention, which moves the log start past a range before it deletes
        the range's object (docs/RETENTION.md): ``OffsetOutOfRange`` then.
        """
        index = PartitionIndex.load(self._metadata(topic, partition))
        batch = readable(topic, partition, self._resolve(index, offset))
        try:
            return batch, self.fetch(batch)
        except BlobNotFound:
            over = index.superseding(batch)
            if over is None:
                self._check_range(PartitionIndex.load(index.meta), offset)
                raise
            return over, self.fetch(over)

    def read_range(self, topic: str, partition: int, start_offset: int, end_offset: int) -> list[LogRecord]:
        """Records ``start_offset`` through ``end_offset`` inclusive; both must be committed."""
        if end_offset < start_offset:
            raise InvalidArgument(f"end_offset {end_offset} is before start_offset {start_offset}")
        info = self.partition_info(topic, partition)
        self._check_range(info.index, start_offset, info.high_watermark)
        self._check_range(info.index, end_offset, info.high_watermark)
        return list(self._scan(info.index, start_offset, end_offset))

    def iter_from(self, topic: str, partition: int, start_offset: int) -> Iterator[LogRecord]:
        """Records from ``start_offset`` up to the high watermark seen when the scan starts.

        Starting at ``high_watermark + 1`` (the tail) yields nothing.
        """
        info = self.partition_info(topic, partition)
        if start_offset != info.high_watermark + 1:
            self._check_range(info.index, start_offset, info.high_watermark)
        return self._scan(info.index, start_offset, info.high_watermark)

    def batches(self, info: PartitionInfo, start_offset: int, *, page: int = SCAN_PAGE) -> Iterator[IndexedBatch]:
        """The batches holding ``start_offset`` .. ``info``'s high watermark, in order, resolved lazily.

        ``page`` index entries are read at a time: a caller that stops early asks for fewer.
        """
        return self._iter_batches(info.index, start_offset, info.high_watermark, (page,))

    def _iter_batches(self, index: PartitionIndex, start: int, last: int, page_sizes: Sequence[int] = (SCAN_PAGE,)
                      ) -> Iterator[IndexedBatch]:  # fmt: skip
        """``page_sizes``: the entries read per page, in turn; the last size is kept from then on."""
        next_offset = start
        pages = 0
        while next_offset <= last:
            page = index.scan(next_offset, limit=page_sizes[min(pages, len(page_sizes) - 1)])
            pages += 1
            # The first entry must cover next_offset; otherwise the tail is a
            # pending append, or the index moved: resolve that offset directly.
            if not page or not page[0].covers(next_offset):
                page = [self._resolve(index, next_offset, last)]
            for batch in page:
                if not batch.covers(next_offset):
                    break  # a gap further on: the next round re-resolves it
                yield batch
                next_offset = batch.end_offset + 1
                if next_offset > last:
                    return

    def _scan(self, index: PartitionIndex, start: int, last: int) -> Iterator[LogRecord]:
        keys = index.meta.keys
        next_offset = start
        for batch in self._iter_batches(index, start, last):
            if batch.end_offset < next_offset:
                continue  # already served by a wider batch found on a re-resolve
            readable(keys.topic, keys.partition, batch)
            try:
                records = self.fetch(batch)
            except BlobNotFound:
                batch, records = self.refetch(keys.topic, keys.partition, next_offset)
            stop = min(batch.end_offset, last)
            yield from records_in(records, batch.start_offset, next_offset, stop + 1)
            next_offset = stop + 1


def readable(topic: str, partition: int, batch: IndexedBatch) -> IndexedBatch:
    """``batch``; ``RecordsLost`` if it is a LOST entry (offsets a rebuild could not recover)."""
    if batch.entry.type is EntryType.LOST:
        raise RecordsLost(topic, partition, batch.start_offset, batch.end_offset)
    return batch


def record_at(batch: RecordBatch, start_offset: int, offset: int) -> LogRecord:
    """The record at ``offset`` of a batch whose first offset is ``start_offset``."""
    i = offset - start_offset
    return LogRecord(offset, batch.value(i), batch.key(i), batch.headers(i), batch.timestamp_ms(i))


def records_in(batch: RecordBatch, start_offset: int, first: int, stop: int) -> list[LogRecord]:
    """The records at offsets ``first`` to ``stop - 1`` of a batch whose first offset is ``start_offset``, taken
    out of it a column at a time (``record_at`` for each costs about three times as much)."""
    i, j = first - start_offset, stop - start_offset
    return list(
        map(LogRecord, range(first, stop), batch.values_in(i, j), batch.keys_in(i, j), batch.headers_in(i, j),
            batch.timestamps_in(i, j))
    )  # fmt: skip
