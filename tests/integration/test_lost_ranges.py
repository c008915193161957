"""Offsets a rebuild could not recover read as lost (``RecordsLost``), not as a broken index.

The scenario is test_rebuild.py's: a partition of 30 offsets, [1, 12] compacted, GC run, then Oxia
loses its data and ``rebuild_topic`` brings back [1, 12] and writes one LOST entry over [13, 30]
(``EntryType.LOST``, no data); new appends start at 31. Every reader is then checked: the reader,
``POST /consume`` through ``llog serve``, the group consumer, offset-for-timestamp, compaction,
retention and verification.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import re
import time
import urllib.request
from typing import Any

import pytest

from llog.config import CompactorConfig, RetentionConfig, RetentionPolicy, S3Config
from llog.errors import CorruptMetadata, OffsetOutOfRange, RecordsLost
from llog.format.codec import ENCODING
from llog.format.keys import PartitionKeys
from llog.format.kv.compaction import CompactionCursor
from llog.format.kv.index import EntryType, IndexEntry
from llog.protocol.append import LogWriter
from llog.protocol.compaction import Compactor
from llog.protocol.index import PartitionIndex
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.read import LogReader
from llog.protocol.rebuild import LOG_MAX_NOTHING, rebuild_topic
from llog.protocol.retention import Retention
from llog.protocol.verify import Verifier
from llog.store.storage import Storage
from llog_client import Consumer
from tests.conftest import serve_env, start_server
from tests.integration import test_rebuild
from tests.integration.test_rebuild import RUN, LosableOxia, _append, _collect_garbage, _on, _records
from tests.protocols import CAS

oxia = test_rebuild.oxia  # the fixture: an Oxia server of the test's own, whose data can be lost

LOST = (RUN + 1, 30)  # what the rebuild cannot recover: [13, 30]
NEXT = 31
DAY_MS = 24 * 3600 * 1000


def _rebuilt(storage: Storage, oxia: LosableOxia, topic: str) -> tuple[Storage, list[tuple[int, bytes]]]:
    """test_rebuild.py's scenario on one CAS partition: the storage on the rebuilt Oxia and the original records."""
    before = _on(storage, oxia)
    _append(before, CAS, topic, 0, 10)  # offsets 1..30
    assert Compactor(before, config=CompactorConfig(max_offsets_per_run=RUN)).compact_once(topic, 0).end_offset == RUN
    original = _records(before, topic, 0, 30)
    _collect_garbage(before)
    oxia.lose_everything()
    after = _on(storage, oxia)
    [report] = rebuild_topic(after, topic, writer_config=CAS)
    assert [(r.first, r.last) for r in report.lost] == [LOST]
    assert report.next_offset == NEXT
    return after, original


LOST_MESSAGE = f"offsets [{LOST[0]}, {LOST[1]}] of "


def test_a_lost_entry_names_no_data_and_every_other_type_still_must() -> None:
    entry = IndexEntry.lost(18, 5, log_max_timestamp_ms=7)
    doc = json.loads(entry.encode())
    assert doc == {"type": "LOST", "msg_count": 18, "created_at_ms": 5, "log_max_timestamp_ms": 7}
    assert IndexEntry.decode(entry.encode()) == entry
    with pytest.raises(CorruptMetadata, match="LOST names data"):
        IndexEntry.decode(json.dumps({**doc, "data_key": "s3://bucket/key", "encoding": ENCODING}).encode())
    with pytest.raises(CorruptMetadata, match="data_key"):
        IndexEntry.decode(json.dumps({**doc, "type": "WAL"}).encode())


def test_a_lost_offset_reads_as_records_lost_naming_the_range_and_where_to_continue(
    storage: Storage, oxia: LosableOxia, topic: str
) -> None:
    after, original = _rebuilt(storage, oxia, topic)
    keys = PartitionKeys(topic, 0, after.root)
    stored = after.oxia.get(keys.index(LOST[1]), partition_key=keys.partition_key)
    assert stored is not None
    doc = json.loads(stored.value)
    assert (doc["type"], doc["msg_count"]) == ("LOST", LOST[1] - LOST[0] + 1)
    assert "data_key" not in doc  # a LOST entry names no object
    assert IndexEntry.decode(stored.value).type is EntryType.LOST

    reader = LogReader(after)
    for offset in (LOST[0], 20, LOST[1]):
        with pytest.raises(RecordsLost, match=re.escape(LOST_MESSAGE)) as lost:
            reader.read_offset(topic, 0, offset)
        assert (lost.value.topic, lost.value.partition, lost.value.first, lost.value.last) == (topic, 0, *LOST)
        assert lost.value.next_offset == NEXT
        assert not lost.value.retriable
    # A scan serves what comes before the lost range, then reports it.
    scan = reader.iter_from(topic, 0, 1)
    assert [(r.offset, r.value) for r in itertools.islice(scan, RUN)] == original[:RUN]
    with pytest.raises(RecordsLost):
        next(scan)
    with pytest.raises(RecordsLost):
        reader.read_range(topic, 0, RUN, LOST[0])

    # New records land after it; a time lookup skips the lost range to them.
    time.sleep(0.01)  # the new records' timestamps are later than every original one
    appended = LogWriter(after, config=CAS).append(topic, 0, [b"new-1", b"new-2"])
    assert appended.start_offset == NEXT
    new = reader.read_offset(topic, 0, NEXT + 1)
    assert reader.offset_for_timestamp(topic, 0, new.timestamp_ms).offset == NEXT  # one batch, one time
    assert reader.offset_for_timestamp(topic, 0, reader.read_offset(topic, 0, 1).timestamp_ms).offset == 1
    _, problems = Verifier(after).verify_partition(topic, 0)
    assert problems == []


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as response:
        doc: dict[str, Any] = json.loads(response.read())
    return doc


def test_consume_answers_records_lost_with_the_next_fetch_offset_and_a_consumer_skips_the_range(
    storage: Storage, oxia: LosableOxia, topic: str, s3_config: S3Config, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    after, original = _rebuilt(storage, oxia, topic)
    LogWriter(after, config=CAS).append(topic, 0, [b"after-1", b"after-2"])  # 31, 32
    server = start_server(monkeypatch, {**serve_env(s3_config, after.root),
                                        "LLOG_OXIA_SERVICE_ADDRESS": oxia.process.address})  # fmt: skip
    try:

        def consume(fetch_offset: int) -> dict[str, Any]:
            doc = _post(f"{server.url}/consume", {"max_wait_ms": 0, "topic_partitions": [
                {"topic": topic, "partition": 0, "fetch_offset": fetch_offset}]})  # fmt: skip
            [result] = doc["results"]
            assert isinstance(result, dict)
            return result

        lost = consume(20)
        assert (lost["ok"], lost["error_type"], lost["retriable"], lost["records"]) == (False, "RecordsLost", False, [])
        assert lost["next_fetch_offset"] == NEXT
        assert LOST_MESSAGE in lost["error"]
        before = consume(1)  # the records before the lost range, then the next fetch meets it
        assert before["ok"]
        assert [r["offset"] for r in before["records"]] == list(range(1, RUN + 1))
        assert before["next_fetch_offset"] == LOST[0]
        after_gap = consume(NEXT)
        assert [r["value"] for r in after_gap["records"]] == ["after-1", "after-2"]

        caplog.set_level(logging.WARNING, logger="llog_client.consumer")
        read: list[tuple[int, bytes]] = []
        with Consumer(server.url, "readers", [topic], enable_auto_commit=False) as consumer:
            for _ in range(20):
                read.extend((r.offset, r.value) for r in consumer.poll(timeout=0.5))
                if read and read[-1][0] == NEXT + 1:
                    break
        assert read == [*original[:RUN], (NEXT, b"after-1"), (NEXT + 1, b"after-2")]
        assert any(LOST_MESSAGE in m for m in caplog.messages), caplog.messages
    finally:
        server.shutdown()


def test_compaction_goes_on_after_the_lost_range_and_retention_removes_it_below_the_log_start(
    storage: Storage, oxia: LosableOxia, topic: str
) -> None:
    after, _ = _rebuilt(storage, oxia, topic)
    meta = PartitionMetadata(after.oxia, PartitionKeys(topic, 0, after.root))
    assert meta.cursor().offset == NEXT  # past the lost range
    writer = LogWriter(after, config=CAS)
    for i in range(3):
        writer.append(topic, 0, [f"n{i}".encode(), f"m{i}".encode()])  # 31..36
    compactor = Compactor(after)
    result = compactor.compact_once(topic, 0)
    assert (result.start_offset, result.end_offset) == (NEXT, 36)
    assert compactor.compact_once(topic, 0).outcome == "nothing_to_do"
    index = PartitionIndex.load(meta)
    lost = index.covering(LOST[0])
    assert lost is not None
    assert (lost.entry.type, lost.end_offset) == (EntryType.LOST, LOST[1])
    compacted = index.covering(NEXT)
    assert compacted is not None
    assert compacted.entry.type is EntryType.COMPACTED
    # The rebuilt entries carry the running greatest timestamp, so compaction extends it past the gap.
    assert lost.entry.log_max_timestamp_ms is not None
    assert compacted.entry.log_max_timestamp_ms is not None
    assert compacted.entry.log_max_timestamp_ms >= lost.entry.log_max_timestamp_ms
    writer.append(topic, 0, [b"tail"])  # 37: a WAL entry, so the compacted range before it is not the last
    _, problems = Verifier(after).verify_partition(topic, 0)
    assert problems == []

    late = dataclasses.replace(after, clock=lambda: time.time() + 2 * DAY_MS / 1000)
    retained = Retention(late, config=RetentionConfig(RetentionPolicy(max_age_ms=DAY_MS))).enforce(topic, 0)
    assert (retained.log_start_before, retained.log_start_after) == (1, 37)
    assert retained.ranges_removed == 3  # [1, 12], the LOST [13, 30] (no object), [31, 36]
    assert retained.objects_deleted == 2
    with pytest.raises(OffsetOutOfRange):
        LogReader(after).read_offset(topic, 0, 20)
    assert PartitionIndex.load(meta).covering(LOST[0]) is None
    assert LogReader(after).read_offset(topic, 0, 37).value == b"tail"


def test_a_compaction_moves_the_cursor_over_a_lost_range_a_rebuild_left_it_before(
    storage: Storage, oxia: LosableOxia, topic: str
) -> None:
    """A rebuild that stopped after writing meta/control leaves the cursor at the LOST entry's start."""
    after, _ = _rebuilt(storage, oxia, topic)
    meta = PartitionMetadata(after.oxia, PartitionKeys(topic, 0, after.root))
    meta.replace_cursor(CompactionCursor(LOST[0]), meta.versioned_cursor().version_id)
    LogWriter(after, config=CAS).append(topic, 0, [b"n1", b"n2"])  # 31, 32
    result = Compactor(after).compact_once(topic, 0)
    assert (result.outcome, result.start_offset, result.end_offset) == ("compacted", NEXT, NEXT + 1)
    assert meta.cursor().offset == NEXT + 2
    _, problems = Verifier(after).verify_partition(topic, 0)
    assert problems == []


def test_with_nothing_recovered_the_ranges_compacted_after_the_lost_one_still_get_a_log_max(
    storage: Storage, oxia: LosableOxia, topic: str
) -> None:
    before = _on(storage, oxia)
    _append(before, CAS, topic, 0, 4)  # 1..12, never compacted
    oxia.lose_everything()
    after = _on(storage, oxia)
    [report] = rebuild_topic(after, topic, writer_config=CAS)
    assert (report.recovered, report.next_offset) == ([], 13)
    time.sleep(0.01)  # the new records' timestamps are later than every original one
    LogWriter(after, config=CAS).append(topic, 0, [b"new-1", b"new-2"])  # 13, 14
    result = Compactor(after).compact_once(topic, 0)
    assert (result.start_offset, result.end_offset) == (13, 14)

    index = PartitionIndex.load(PartitionMetadata(after.oxia, PartitionKeys(topic, 0, after.root)))
    lost, compacted = index.covering(1), index.covering(13)
    assert lost is not None
    assert compacted is not None
    assert (lost.entry.type, lost.entry.log_max_timestamp_ms) == (EntryType.LOST, LOG_MAX_NOTHING)
    reader = LogReader(after)
    new = reader.read_offset(topic, 0, 14)
    assert compacted.entry.log_max_timestamp_ms == new.timestamp_ms
    assert reader.offset_for_timestamp(topic, 0, new.timestamp_ms).offset == 13
