"""The read path (docs/PROTOCOL.md, "Read"; docs/SEQUENTIAL_APPEND.md).

1. read ``meta/control``: the partition exists; a CAS partition's high
   watermark is ``sequence_counter - 1``, a sequential one's is read from its
   sequence's highest key (``llog.protocol.index.PartitionIndex``);
2. resolve the batch holding an offset: Oxia CEILING on the entry key of the
   offset (``index/{offset}``, or the position in its generation's sequence),
   checked for our prefix and for actually covering the offset; in a CAS
   partition else ``meta/control.pending``;
3. fetch the batch (an S3 range GET for a slice of a shared blob);
4. decode ``bytes-batch-v1``, checking the record count against the index.

Scans walk the index forward in pages and re-resolve point-wise when the
index changes under them (compaction), so they see each offset exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from llog.errors import BlobNotFound, InconsistentReadState, InvalidArgument, OffsetOutOfRange
from llog.format.codec import Headers, RecordBatch, decode_batch
from llog.format.documents import ControlRecord, IndexedBatch
from llog.format.keys import PartitionKeys
from llog.protocol.index import PartitionIndex
from llog.protocol.metadata import PartitionMetadata
from llog.store.fetch import fetch_ref
from llog.store.storage import Storage

SCAN_PAGE = 256


@dataclass(frozen=True, slots=True)
class LogRecord:
    """A record read back from the log, with its offset."""

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


class LogReader:
    """Reads partitions; safe to share between threads. Ignores the storage's bucket: index entries carry S3 URIs."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

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
        return PartitionMetadata(self.storage.oxia, PartitionKeys(topic, partition, self.storage.root))

    # --- state -----------------------------------------------------------------

    def partition_info(self, topic: str, partition: int) -> PartitionInfo:
        index = PartitionIndex.load(self._metadata(topic, partition))
        control = index.control
        return PartitionInfo(topic, partition, control.log_start_offset, index.high_watermark(), control, index)

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
        """Download and decode the batch: a range GET for shared-blob slices, else a whole GET."""
        data = fetch_ref(self.storage.blobs, batch.entry.ref)
        return decode_batch(data, expected_count=batch.entry.msg_count)

    # --- reads -----------------------------------------------------------------

    def read_offset(self, topic: str, partition: int, offset: int) -> LogRecord:
        batch = self.resolve(topic, partition, offset)
        try:
            records = self.fetch(batch)
        except BlobNotFound:
            # Compaction may have replaced the entry and GC removed its object
            # between our lookup and our GET: look the offset up once more.
            batch = self.resolve(topic, partition, offset)
            records = self.fetch(batch)
        return record_at(records, batch.start_offset, offset)

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
        return self._iter_batches(info.index, start_offset, info.high_watermark, page)

    def _iter_batches(self, index: PartitionIndex, start: int, last: int, page_size: int = SCAN_PAGE
                      ) -> Iterator[IndexedBatch]:  # fmt: skip
        next_offset = start
        while next_offset <= last:
            page = index.scan(next_offset, limit=page_size)
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
        next_offset = start
        for batch in self._iter_batches(index, start, last):
            if batch.end_offset < next_offset:
                continue  # already served by a wider batch found on a re-resolve
            try:
                records = self.fetch(batch)
            except BlobNotFound:  # see read_offset
                batch = self._resolve(PartitionIndex.load(index.meta), next_offset)
                records = self.fetch(batch)
            stop = min(batch.end_offset, last)
            for offset in range(next_offset, stop + 1):
                yield record_at(records, batch.start_offset, offset)
            next_offset = stop + 1


def record_at(batch: RecordBatch, start_offset: int, offset: int) -> LogRecord:
    """The record at ``offset`` of a batch whose first offset is ``start_offset``."""
    i = offset - start_offset
    return LogRecord(offset, batch.value(i), batch.key(i), batch.headers(i), batch.timestamp_ms(i))
