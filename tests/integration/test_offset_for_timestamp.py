"""Offset for a timestamp (Kafka's ListOffsets) on a real Oxia: index entries carry time spans.

The lookup must agree with a brute-force scan of the records (the first offset
whose timestamp is at or after the asked time), whatever the order of the
timestamps, across WAL and compacted entries of both append protocols, and
read at most one batch for entries that carry time spans.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.stack import READ_OPS, stats_diff
from llog.config import CompactorConfig, WriterConfig
from llog.format.codec import Record
from llog.format.keys import PartitionKeys
from llog.format.kv.document import DataRef
from llog.format.kv.index import IndexEntry
from llog.protocol.append import LogWriter
from llog.protocol.compaction import Compactor
from llog.protocol.index import PartitionIndex
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.read import EARLIEST, LATEST, LogReader
from llog.store.storage import Storage
from tests.conftest import fuzz_examples
from tests.protocols import CAS

HOUR_MS = 3_600_000
BASE_MS = 1_795_000_000_000

# Batches of records with timestamps spread over six hours: mostly growing, sometimes out of order.
batches_strategy = st.lists(
    st.lists(st.integers(min_value=-HOUR_MS, max_value=6 * HOUR_MS), min_size=1, max_size=5), min_size=1, max_size=12
)


def brute_force(timestamps: list[int], target: int) -> int | None:
    """The first offset (1-based) whose timestamp is >= target, by reading every record."""
    return next((offset for offset, ts in enumerate(timestamps, start=1) if ts >= target), None)


@pytest.mark.parametrize("config", [CAS, WriterConfig()], ids=["cas", "sequential"])
@settings(max_examples=fuzz_examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=batches_strategy,
    compactions=st.integers(min_value=0, max_value=6),
    offsets_per_compaction=st.integers(min_value=1, max_value=12),
    queries=st.lists(st.integers(min_value=-HOUR_MS, max_value=7 * HOUR_MS), min_size=1, max_size=8),
)
def test_lookup_agrees_with_a_scan(
    storage: Storage,
    config: WriterConfig,
    batches: list[list[int]],
    compactions: int,
    offsets_per_compaction: int,
    queries: list[int],
) -> None:
    topic = f"ts-{uuid.uuid4().hex[:10]}"
    writer = LogWriter(storage, config=config)
    writer.initialize_partition(topic, 0)
    timestamps: list[int] = []
    for batch in batches:
        writer.append(topic, 0, [Record(f"v{len(timestamps) + i}".encode(), timestamp_ms=BASE_MS + ts)
                                 for i, ts in enumerate(batch)])  # fmt: skip
        timestamps.extend(BASE_MS + ts for ts in batch)
    compactor = Compactor(storage, config=CompactorConfig(max_offsets_per_run=offsets_per_compaction))
    for _ in range(compactions):  # several compacted ranges, bisected; the rest stays WAL entries, scanned
        compactor.compact_once(topic, 0)
    reader = LogReader(storage)
    assert [r.timestamp_ms for r in reader.iter_from(topic, 0, 1)] == timestamps
    for query in queries:
        target = BASE_MS + query
        found = reader.offset_for_timestamp(topic, 0, target)
        expected = brute_force(timestamps, target)
        assert found.offset == expected, (target, timestamps)
        assert found.timestamp_ms == (None if expected is None else timestamps[expected - 1])
        assert found.batches_read <= 1
    assert reader.offset_for_timestamp(topic, 0, EARLIEST).offset == 1
    assert reader.offset_for_timestamp(topic, 0, LATEST).offset == len(timestamps) + 1


def test_entries_and_manifests_carry_time_spans(storage: Storage, topic: str) -> None:
    writer = LogWriter(storage, config=CAS)
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [Record(b"a", timestamp_ms=BASE_MS + 5), Record(b"b", timestamp_ms=BASE_MS + 2)])
    writer.append(topic, 0, [Record(b"c", timestamp_ms=BASE_MS + 9)])
    meta = PartitionMetadata(storage.oxia, PartitionKeys(topic, 0, storage.root))
    spans = [(b.entry.ref.times.min_ms, b.entry.ref.times.max_ms) for b in PartitionIndex.load(meta).scan(1)
             if b.entry.ref.times is not None]  # fmt: skip
    assert spans == [(BASE_MS + 2, BASE_MS + 5), (BASE_MS + 9, BASE_MS + 9)]
    compactor = Compactor(storage)
    compactor.compact_once(topic, 0)
    (compacted,) = PartitionIndex.load(meta).scan(1)
    assert compacted.entry.ref.times is not None
    assert (compacted.entry.ref.times.min_ms, compacted.entry.ref.times.max_ms) == (BASE_MS + 2, BASE_MS + 9)
    (manifest,) = compactor.manifests.ranges(meta.keys)
    assert manifest.times == compacted.entry.ref.times


def test_bisecting_compacted_ranges_reads_few_entries(storage: Storage, topic: str) -> None:
    """64 compacted ranges then a WAL tail: a lookup reads about log2(64) entries, not all of them."""
    writer = LogWriter(storage, config=CAS)
    writer.initialize_partition(topic, 0)
    for i in range(64):
        writer.append(topic, 0, [Record(b"c", timestamp_ms=BASE_MS + 10 * i)])
    compactor = Compactor(storage, config=CompactorConfig(max_offsets_per_run=1))
    for _ in range(64):
        compactor.compact_once(topic, 0)
    writer.append(topic, 0, [Record(b"w", timestamp_ms=BASE_MS + 5)])  # out of order, in the WAL tail
    reader = LogReader(storage)
    stats = storage.oxia.counters
    for target, expected in ((BASE_MS + 401, 42), (BASE_MS, 1), (BASE_MS + 631, None), (BASE_MS + 630, 64)):
        before = stats.snapshot()
        found = reader.offset_for_timestamp(topic, 0, target)
        reads = sum(s.calls for op, s in stats_diff(before, stats.snapshot()).items() if op in READ_OPS)
        assert (found.offset, found.batches_read) == (expected, 0 if expected is None else 1)
        assert reads <= 12, reads  # control, cursor, ~7 bisection probes, one index page


def test_entries_without_time_spans_are_read_instead(storage: Storage, topic: str) -> None:
    """An index entry written before time spans existed: the lookup fetches its batch (the documented fallback)."""
    writer = LogWriter(storage, config=CAS)
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [Record(b"old", timestamp_ms=BASE_MS + 1)])
    writer.append(topic, 0, [Record(b"new", timestamp_ms=BASE_MS + 7)])
    meta = PartitionMetadata(storage.oxia, PartitionKeys(topic, 0, storage.root))
    first = PartitionIndex.load(meta).locate(1)
    assert first is not None
    old = IndexEntry.decode(first.batch.entry.encode())
    ref = DataRef(old.ref.data_key, old.ref.encoding, old.ref.byte_offset, old.ref.byte_length)
    stripped = IndexEntry(old.type, old.msg_count, ref, old.created_at_ms, old.append_id)
    meta.replace_entry(first.key, stripped, first.version_id)
    found = LogReader(storage).offset_for_timestamp(topic, 0, BASE_MS + 5)
    assert (found.offset, found.timestamp_ms, found.batches_read) == (2, BASE_MS + 7, 2)


def test_a_range_retention_removes_mid_bisection_does_not_skip_the_answer(
    storage: Storage, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ranges [1-10] ... [41-50]; the answer is offset 15. When [1-10] disappears while the bisection probes
    below a range that reaches the time (retention, racing the lookup), the lookup still reads from the bound
    it proved, not from that range."""
    writer = LogWriter(storage, config=CAS)
    writer.initialize_partition(topic, 0)
    stamps = [BASE_MS + (100 if offset == 15 else offset) for offset in range(1, 51)]
    for first in range(0, 50, 10):
        writer.append(topic, 0, [Record(b"r", timestamp_ms=ts) for ts in stamps[first : first + 10]])
    compactor = Compactor(storage, config=CompactorConfig(max_offsets_per_run=10))
    for _ in range(5):
        compactor.compact_once(topic, 0)
    covering = PartitionIndex.covering
    monkeypatch.setattr(
        PartitionIndex, "covering", lambda index, offset: None if offset <= 10 else covering(index, offset)
    )
    found = LogReader(storage).offset_for_timestamp(topic, 0, BASE_MS + 60)
    assert (found.offset, found.timestamp_ms) == (15, BASE_MS + 100)
