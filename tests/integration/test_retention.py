"""Retention on a real Oxia server and moto S3: truncation by age and size, reads, consume, crashes, GC."""

from __future__ import annotations

import dataclasses
import time

import pytest

from llog.config import CompactorConfig, GcConfig, RetentionConfig, RetentionPolicy
from llog.errors import BlobNotFound, OffsetOutOfRange
from llog.format.keys import PartitionKeys, S3Location
from llog.format.kv.index import IndexedBatch
from llog.protocol.append import LogWriter, SharedAppendGroup
from llog.protocol.compaction import Compactor, compact_until_caught_up
from llog.protocol.gc import GarbageCollector
from llog.protocol.index import PartitionIndex
from llog.protocol.manifest import ManifestStore
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.read import LogReader
from llog.protocol.retention import Retention, RetentionResult
from llog.service.consume import ConsumeRequest, ConsumeService, FetchPartition, PartitionFetch
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from tests.conftest import BUCKET

pytestmark = pytest.mark.oxia

DAY_MS = 86_400_000


def compacted_log(writer: LogWriter, storage: Storage, topic: str, ranges: int = 4) -> list[str]:
    """``ranges`` compacted ranges of 5 records each (offsets 1-5, 6-10, ...), plus a WAL tail of 1; their objects."""
    writer.initialize_partition(topic, 0)
    compactor = Compactor(storage, config=CompactorConfig(max_offsets_per_run=5))
    for i in range(ranges * 5):
        writer.append(topic, 0, [f"r{i + 1}".encode()])
    results = compact_until_caught_up(compactor, topic, 0, budget_s=60)
    writer.append(topic, 0, [b"tail"])
    index = entries(storage, topic)
    assert [b.end_offset for b in index][:ranges] == [5 * (i + 1) for i in range(ranges)]
    assert len([r for r in results if r.outcome == "compacted"]) == ranges
    return [b.entry.ref.data_key for b in index[:ranges]]


def entries(storage: Storage, topic: str) -> list[IndexedBatch]:
    """Partition 0's index entries, whatever its append protocol."""
    return PartitionIndex.load(PartitionMetadata(storage.oxia, PartitionKeys(topic, 0, storage.root))).scan(1)


def retention(storage: Storage, topic: str, policy: RetentionPolicy, *, ahead_ms: int = 0) -> Retention:
    config = RetentionConfig(topics={topic: policy})
    return Retention(dataclasses.replace(storage, clock=lambda: time.time() + ahead_ms / 1000), config=config)


def test_age_truncates_whole_compacted_ranges_and_reads_below_the_start_fail_clearly(
    writer: LogWriter, reader: LogReader, blob_store: BlobStore, topic: str, root: str, storage: Storage
) -> None:
    objects = compacted_log(writer, storage, topic)
    daily = RetentionPolicy(max_age_ms=DAY_MS)
    assert retention(storage, topic, daily).enforce(topic, 0).ranges_removed == 0

    result = retention(storage, topic, daily, ahead_ms=2 * DAY_MS).enforce(topic, 0)

    # every compacted range is old, but [16, 20] is the last compacted one before the WAL tail: the tail
    # entry is last, so ranges up to 20 may go
    assert (result.log_start_before, result.log_start_after, result.ranges_removed) == (1, 21, 4)
    assert reader.partition_info(topic, 0).log_start == 21
    with pytest.raises(OffsetOutOfRange, match=r"readable offsets are \[21, 21\]"):
        reader.read_offset(topic, 0, 20)
    assert [r.value for r in reader.iter_from(topic, 0, 21)] == [b"tail"]
    for key in objects:
        with pytest.raises(BlobNotFound):
            blob_store.head(S3Location.parse(key))
    manifests = ManifestStore(blob_store, bucket=BUCKET, root=root)
    assert manifests.log_start(PartitionKeys(topic, 0, root)) == 21
    assert list(manifests.spans(PartitionKeys(topic, 0, root))) == []


def test_size_keeps_the_newest_ranges_within_the_budget_and_consume_reports_the_log_start(
    writer: LogWriter, reader: LogReader, topic: str, storage: Storage
) -> None:
    compacted_log(writer, storage, topic)
    sizes = [b.entry.data_bytes or b.entry.ref.byte_length or 0 for b in entries(storage, topic)]
    budget = sum(sizes[-3:])  # the last two compacted ranges and the WAL tail fit

    result = retention(storage, topic, RetentionPolicy(max_bytes=budget)).enforce(topic, 0)

    assert result.log_start_after == 11
    consume = ConsumeService(reader)

    def fetch_from(offset: int) -> PartitionFetch:
        request = ConsumeRequest([FetchPartition(topic, 0, offset, 1 << 20)], max_wait_ms=0, min_bytes=1,
                                 max_bytes=1 << 20)  # fmt: skip
        [result] = consume.consume(request)
        return result

    fetch = fetch_from(11)
    assert (fetch.log_start_offset, fetch.records[0].value) == (11, b"r11")
    below = fetch_from(3)
    assert isinstance(below.error, OffsetOutOfRange)
    assert below.log_start_offset == 11


def test_a_truncation_that_died_after_moving_the_log_start_is_finished_by_the_next_run(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, blob_store: BlobStore, topic: str, root: str,
    storage: Storage
) -> None:
    objects = compacted_log(writer, storage, topic, ranges=2)
    meta = PartitionMetadata(oxia_store, PartitionKeys(topic, 0, root))
    control = meta.control()
    meta.replace_control(control.record.with_changes(log_start_offset=6), control.version_id)  # step 1 only

    result = retention(storage, topic, RetentionPolicy()).enforce(topic, 0)

    assert (result.log_start_after, result.ranges_removed, result.objects_deleted) == (6, 1, 1)
    assert [b.end_offset for b in entries(storage, topic)] == [10, 11]
    with pytest.raises(BlobNotFound):
        blob_store.head(S3Location.parse(objects[0]))
    assert next(reader.iter_from(topic, 0, 6)).value == b"r6"


def test_writers_keep_appending_and_the_log_start_survives_their_updates(
    writer: LogWriter, reader: LogReader, topic: str, storage: Storage
) -> None:
    compacted_log(writer, storage, topic, ranges=2)
    retention(storage, topic, RetentionPolicy(max_age_ms=1), ahead_ms=1000).enforce(topic, 0)
    assert reader.partition_info(topic, 0).log_start == 11
    writer.append(topic, 0, [b"later"])
    info = reader.partition_info(topic, 0)
    assert (info.log_start, info.high_watermark) == (11, 12)


def test_garbage_collection_applies_retention_from_its_configuration(
    writer: LogWriter, oxia_store: OxiaStore, topic: str, root: str, storage: Storage
) -> None:
    compacted_log(writer, storage, topic, ranges=2)
    config = GcConfig(grace_ms=3_600_000, retention=RetentionConfig(topics={topic: RetentionPolicy(max_age_ms=1)}))
    gc = GarbageCollector(dataclasses.replace(storage, clock=lambda: time.time() + 10), config=config)

    report = gc.collect()

    assert report.retention_partitions_truncated >= 1
    assert PartitionMetadata(oxia_store, PartitionKeys(topic, 0, root)).control().record.log_start_offset == 11


def test_an_age_limit_reads_the_index_only_up_to_the_first_entry_it_keeps(
    writer: LogWriter, topic: str, storage: Storage
) -> None:
    """What a run reads grows with what expired since the last one, not with the length of the log."""
    compacted_log(writer, storage, topic, ranges=2)  # [1, 5] and [6, 10] compacted, 11 a WAL entry
    writer.append_shared([SharedAppendGroup(topic, 0, [b"x"])] * 200)  # many more WAL entries
    daily = RetentionPolicy(max_age_ms=DAY_MS)
    counters = storage.oxia.counters

    def index_reads(run: Retention) -> tuple[RetentionResult, dict[str, int]]:
        before = counters.snapshot()
        result = run.enforce(topic, 0)
        after = counters.snapshot()
        reads = {op: after[op].calls - (before[op].calls if op in before else 0) for op in ("get_ceiling", "range_scan")
                 if op in after}  # fmt: skip
        return result, {op: n for op, n in reads.items() if n}

    # Nothing old enough: the first entry, a young compacted range, decides alone (one single-record lookup).
    result, reads = index_reads(retention(storage, topic, daily))
    assert (result.log_start_after, reads) == (1, {"get_ceiling": 1})
    # Both ranges expired: then one index read, which stops at the first WAL entry.
    result, reads = index_reads(retention(storage, topic, daily, ahead_ms=2 * DAY_MS))
    assert (result.log_start_after, result.ranges_removed) == (11, 2)
    assert reads == {"get_ceiling": 1, "range_scan": 1}
    # A size limit needs the size of everything kept: the whole index, up to the empty read that ends it.
    everything = sum(b.entry.data_bytes or b.entry.ref.byte_length or 0 for b in entries(storage, topic))
    result, reads = index_reads(retention(storage, topic, RetentionPolicy(max_bytes=everything)))
    assert (result.log_start_after, reads) == (11, {"range_scan": 2})


def test_a_read_that_retention_overtakes_between_its_lookups_is_out_of_range_not_inconsistent(
    writer: LogWriter, reader: LogReader, topic: str, storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader found no entry for the offset, and retention moved the log start past it before the reader
    looked again: the offset is below the log start (``OffsetOutOfRange``), not a hole in the index (found by
    the concurrent harness: ``InconsistentReadState`` with the high watermark far above)."""
    compacted_log(writer, storage, topic)
    covering = PartitionIndex.covering
    overtaken: list[int] = []

    def retention_runs_first(index: PartitionIndex, offset: int) -> IndexedBatch | None:
        if not overtaken:
            overtaken.append(offset)
            retention(storage, topic, RetentionPolicy(max_age_ms=DAY_MS), ahead_ms=2 * DAY_MS).enforce(topic, 0)
        return covering(index, offset)

    monkeypatch.setattr(PartitionIndex, "covering", retention_runs_first)
    with pytest.raises(OffsetOutOfRange, match=r"readable offsets are \[21, 21\]"):
        reader.read_offset(topic, 0, 7)
    assert overtaken == [7]
