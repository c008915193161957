"""``llog verify`` on a real Oxia server and moto S3: healthy partitions pass, each kind of damage is found."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator

import pytest

from llog.cli import main
from llog.config import CompactorConfig, GcConfig, OxiaConfig, RetentionConfig, RetentionPolicy, S3Config, WriterConfig
from llog.errors import UnknownTopic
from llog.format.keys import PartitionKeys, S3Location, shared_wal_prefix
from llog.format.kv.compaction import CompactionCursor
from llog.format.kv.control import AppendProtocol
from llog.format.kv.index import EntryType, IndexedBatch
from llog.protocol.append import LogWriter, SharedAppendGroup
from llog.protocol.compaction import Compactor, compact_until_caught_up
from llog.protocol.faults import (
    COMPACTOR_AFTER_BLOB_PUT,
    COMPACTOR_AFTER_END_KEY,
    COMPACTOR_AFTER_MANIFEST,
    COMPACTOR_AFTER_RECORD,
    WRITER_AFTER_RESERVE,
)
from llog.protocol.gc import GarbageCollector
from llog.protocol.index import PartitionIndex
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.retention import Retention
from llog.protocol.topics import TopicConfig, TopicRegistry
from llog.protocol.verify import ProblemKind, Verifier, VerifyReport
from llog.store.storage import Storage
from tests.conftest import BUCKET, moto_s3_env, set_env
from tests.faults import SimulatedCrash, crash_at
from tests.protocols import CAS

pytestmark = pytest.mark.oxia

DAY_MS = 86_400_000
SEQUENTIAL = WriterConfig()


@pytest.fixture(params=["cas", "sequential"])
def any_writer(request: pytest.FixtureRequest, storage: Storage) -> LogWriter:
    """A writer whose new partitions use the protocol of the test's parameter."""
    return LogWriter(storage, config=CAS if request.param == "cas" else SEQUENTIAL)


def fill(writer: LogWriter, topic: str, batches: int = 6, partitions: int = 2) -> None:
    """``batches`` shared appends of 2 records to each of ``partitions`` partitions (one WAL blob each)."""
    for p in range(partitions):
        writer.initialize_partition(topic, p)
    for i in range(batches):
        writer.append_shared(
            [SharedAppendGroup(topic, p, [f"{p}-{i}-a".encode(), f"{p}-{i}-b".encode()]) for p in range(partitions)]
        )


def compact(storage: Storage, topic: str, partition: int = 0, *, per_run: int = 4) -> None:
    compact_until_caught_up(
        Compactor(storage, config=CompactorConfig(max_offsets_per_run=per_run)), topic, partition, budget_s=60
    )


def entries(storage: Storage, topic: str, partition: int = 0) -> list[IndexedBatch]:
    return index(storage, topic, partition).scan(1)


def index(storage: Storage, topic: str, partition: int = 0) -> PartitionIndex:
    return PartitionIndex.load(meta(storage, topic, partition))


def meta(storage: Storage, topic: str, partition: int = 0) -> PartitionMetadata:
    return PartitionMetadata(storage.oxia, PartitionKeys(topic, partition, storage.root))


def verify(storage: Storage, topic: str | None = None, **options: object) -> VerifyReport:
    return Verifier(storage, **options).verify(None if topic is None else [topic])  # type: ignore[arg-type]


def kinds(report: VerifyReport) -> set[ProblemKind]:
    return {p.kind for p in report.problems}


def assert_healthy(report: VerifyReport, partitions: int) -> None:
    assert report.problems == [], report.problems
    assert report.ok
    assert len(report.partitions) == partitions
    for s in report.partitions:
        assert s.records == s.high_watermark - s.log_start + 1  # counts add up
        assert s.cursor <= s.high_watermark + 1


# --- healthy partitions ---------------------------------------------------------------------


def test_a_healthy_log_passes_before_and_after_compaction_and_retention(
    any_writer: LogWriter, storage: Storage, topic: str
) -> None:
    fill(any_writer, topic)
    report = verify(storage, topic)
    assert_healthy(report, 2)
    assert [(s.partition, s.records, s.entries, s.objects_checked) for s in report.partitions] == [
        (0, 12, 6, 6), (1, 12, 6, 6)
    ]  # fmt: skip
    assert sum(s.bytes_read for s in report.partitions) > 0

    compact(storage, topic)  # ranges [1, 4], [5, 8], [9, 12]
    any_writer.append(topic, 0, [b"tail"])
    report = verify(storage, topic)
    assert_healthy(report, 2)
    first = report.partitions[0]
    assert (first.compacted_ranges, first.manifests, first.cursor, first.high_watermark) == (3, 3, 13, 13)

    policy = RetentionConfig(topics={topic: RetentionPolicy(max_age_ms=DAY_MS)})
    assert Retention(later(storage), config=policy).enforce(topic, 0).log_start_after == 13
    report = verify(storage, topic)
    assert_healthy(report, 2)
    assert (report.partitions[0].log_start, report.partitions[0].records) == (13, 1)


def test_every_registered_topic_is_verified_without_a_name(any_writer: LogWriter, storage: Storage) -> None:
    fill(any_writer, "orders", batches=2, partitions=1)
    fill(any_writer, "payments", batches=2, partitions=3)
    any_writer.initialize_partition("empty", 0)

    report = verify(storage)

    assert_healthy(report, 5)
    assert [(s.topic, s.partition) for s in report.partitions] == [
        ("empty", 0), ("orders", 0), ("payments", 0), ("payments", 1), ("payments", 2)
    ]  # fmt: skip
    assert report.to_json()["partitions_verified"] == 5


def test_the_report_names_the_incarnation_it_verified(writer: LogWriter, storage: Storage, topic: str) -> None:
    """A topic's id is in each partition's summary (none for a topic without a record, from before topic ids)."""
    record, _ = TopicRegistry(storage.oxia, root=storage.root).create(topic, 1, TopicConfig(AppendProtocol.SEQUENTIAL))
    writer.append(topic, 0, [b"a"])
    writer.initialize_partition(f"{topic}-legacy", 0)

    summaries = {s.topic: s for s in verify(storage).partitions}

    assert record.topic_id is not None
    assert summaries[topic].topic_id == record.topic_id
    assert summaries[f"{topic}-legacy"].topic_id is None
    assert [p["topic_id"] for p in verify(storage).to_json()["partitions"]] == [record.topic_id, None]


def test_an_unknown_topic_or_partition_is_an_error(writer: LogWriter, storage: Storage, topic: str) -> None:
    writer.initialize_partition(topic, 0)
    with pytest.raises(UnknownTopic):
        Verifier(storage).verify(["nope"])
    with pytest.raises(UnknownTopic):
        Verifier(storage).verify([topic], partition=1)


# --- what a concurrent writer leaves is not damage -----------------------------------------------


@pytest.mark.parametrize(
    "point", [COMPACTOR_AFTER_BLOB_PUT, COMPACTOR_AFTER_RECORD, COMPACTOR_AFTER_END_KEY, COMPACTOR_AFTER_MANIFEST]
)
def test_a_compaction_in_flight_is_not_damage(any_writer: LogWriter, storage: Storage, topic: str, point: str) -> None:
    fill(any_writer, topic, partitions=1)
    with pytest.raises(SimulatedCrash):
        Compactor(storage, fault_hook=crash_at(point)).compact_once(topic, 0)
    if point in (COMPACTOR_AFTER_END_KEY, COMPACTOR_AFTER_MANIFEST):
        assert entries(storage, topic)[0].entry.type is EntryType.WAL  # the lower keys are still there

    report = verify(storage, topic)

    assert_healthy(report, 1)
    # the compacted object is referenced by the record (or, before it, young): never an orphan yet
    assert report.partitions[0].orphans == 0


def later(storage: Storage) -> Storage:
    """``storage`` two days on: past retention's day and GC's grace."""
    return dataclasses.replace(storage, clock=lambda: time.time() + 2 * DAY_MS / 1000)


def interleave(monkeypatch: pytest.MonkeyPatch, action: Callable[[], object]) -> None:
    """Index scans read pages of 2 entries, and ``action`` runs once, between the first two pages."""
    original = PartitionIndex.iter
    ran: list[bool] = []

    def paged(self: PartitionIndex, from_offset: int, *, page: int = 1024) -> Iterator[IndexedBatch]:
        for i, batch in enumerate(original(self, from_offset, page=2)):
            yield batch
            if i == 1 and not ran:
                ran.append(True)
                action()

    monkeypatch.setattr(PartitionIndex, "iter", paged)


def test_a_compaction_and_gc_between_pages_of_the_scan_are_not_damage(
    any_writer: LogWriter, storage: Storage, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(any_writer, topic, partitions=1)  # entries [1, 2] .. [11, 12], one WAL blob each

    def compact_and_collect() -> None:
        compact(storage, topic, per_run=6)  # [1, 6] straddles the page boundary at 4
        GarbageCollector(later(storage), config=GcConfig(grace_ms=DAY_MS)).collect()  # their blobs go

    interleave(monkeypatch, compact_and_collect)
    report = verify(storage, topic)

    assert_healthy(report, 1)
    assert list(storage.blobs.list(BUCKET, shared_wal_prefix(storage.root))) == []
    assert [b.entry.type for b in entries(storage, topic)] == [EntryType.COMPACTED] * 2


def test_retention_between_pages_of_the_scan_is_not_damage(
    any_writer: LogWriter, storage: Storage, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(any_writer, topic, partitions=1)
    compact(storage, topic)  # [1, 4], [5, 8], [9, 12]
    any_writer.append(topic, 0, [b"tail"])
    policy = RetentionConfig(topics={topic: RetentionPolicy(max_age_ms=DAY_MS)})

    interleave(monkeypatch, lambda: Retention(later(storage), config=policy).enforce(topic, 0))
    report = verify(storage, topic)

    assert report.problems == []  # the gap [9, 12] and the objects and manifests below 13 were retention's
    assert report.partitions[0].records == 9  # [1, 8] read before, [13] after the truncation
    assert index(storage, topic).control.log_start_offset == 13


def test_a_pending_cas_append_covers_its_offsets(writer: LogWriter, storage: Storage, topic: str) -> None:
    fill(writer, topic, batches=2, partitions=1)
    with pytest.raises(SimulatedCrash):
        LogWriter(storage, config=CAS, fault_hook=crash_at(WRITER_AFTER_RESERVE)).append(topic, 0, [b"pending"])

    report = verify(storage, topic)

    assert_healthy(report, 1)
    assert (report.partitions[0].high_watermark, report.partitions[0].entries) == (5, 3)


def test_orphaned_compacted_objects_are_counted_not_reported(writer: LogWriter, storage: Storage, topic: str) -> None:
    fill(writer, topic, partitions=1)
    with pytest.raises(SimulatedCrash):
        Compactor(storage, fault_hook=crash_at(COMPACTOR_AFTER_BLOB_PUT)).compact_once(topic, 0)
    compact(storage, topic)  # commits its own object: the first one stays unreferenced

    young = verify(storage, topic).partitions[0]
    report = verify(storage, topic, grace_ms=0)

    assert_healthy(report, 1)
    assert (young.orphans, young.young_unreferenced) == (0, 1)
    assert (report.partitions[0].orphans, report.orphans) == (1, 1)


# --- damage ------------------------------------------------------------------------------------


def test_a_deleted_object_is_found(any_writer: LogWriter, storage: Storage, topic: str) -> None:
    fill(any_writer, topic, partitions=1)
    victim = entries(storage, topic)[2].entry.ref.data_key
    storage.blobs.delete(BUCKET, [S3Location.parse(victim).key])

    report = verify(storage, topic)

    assert [(p.kind, p.key, p.offset) for p in report.problems] == [(ProblemKind.OBJECT_MISSING, victim, 5)]
    assert report.partitions[0].problems == 1


def test_a_truncated_wal_blob_is_found(any_writer: LogWriter, storage: Storage, topic: str) -> None:
    fill(any_writer, topic)  # each blob holds a slice of partition 0, then one of partition 1
    victim = entries(storage, topic, 1)[0].entry.ref
    location = S3Location.parse(victim.data_key)
    assert victim.byte_offset is not None
    assert victim.byte_length is not None
    storage.blobs.put(location, storage.blobs.get(location)[: victim.byte_offset + victim.byte_length // 2])

    report = verify(storage, topic)

    assert [(p.kind, p.key, p.partition) for p in report.problems] == [
        (ProblemKind.RANGE_OUTSIDE_OBJECT, victim.data_key, 1)
    ]


def test_a_truncated_compacted_object_is_found(any_writer: LogWriter, storage: Storage, topic: str) -> None:
    fill(any_writer, topic, partitions=1)
    compact(storage, topic)
    victim = entries(storage, topic)[1].entry.ref.data_key
    location = S3Location.parse(victim)
    storage.blobs.put(location, storage.blobs.get(location)[:-8])

    report = verify(storage, topic)

    assert {(p.kind, p.key) for p in report.problems} == {
        (ProblemKind.OBJECT_MISMATCH, victim), (ProblemKind.CORRUPT_BATCH, victim)
    }  # fmt: skip


@pytest.mark.parametrize("compacted", [False, True])
def test_a_flipped_byte_fails_the_crc(any_writer: LogWriter, storage: Storage, topic: str, compacted: bool) -> None:
    fill(any_writer, topic, partitions=1)
    if compacted:
        compact(storage, topic)
    victim = entries(storage, topic)[0].entry.ref
    location = S3Location.parse(victim.data_key)
    data = bytearray(storage.blobs.get(location))
    data[(victim.byte_offset or 0) + 40] ^= 0x01  # inside the batch body
    storage.blobs.put(location, bytes(data), metadata=storage.blobs.head(location).metadata)

    report = verify(storage, topic)

    assert [(p.kind, p.key) for p in report.problems] == [(ProblemKind.CORRUPT_BATCH, victim.data_key)]
    assert "checksum" in report.problems[0].detail
    # reading no data sees nothing wrong with it: sizes and ranges are intact
    assert verify(storage, topic, read_data=False).ok


def test_a_missing_index_entry_is_a_gap(any_writer: LogWriter, storage: Storage, topic: str) -> None:
    fill(any_writer, topic, partitions=1)
    victim = entries(storage, topic)[2]  # offsets [5, 6]
    index_ = index(storage, topic)
    key = index_.key_of(victim.end_offset)
    storage.oxia.delete(key, partition_key=f"{topic}:0")

    report = verify(storage, topic)

    assert [(p.kind, p.offset) for p in report.problems] == [(ProblemKind.INDEX_GAP, 5)]
    assert "[5, 6]" in report.problems[0].detail
    assert report.problems[0].key == index_.key_of(8)  # the entry after the gap
    assert report.partitions[0].records == 10


def test_a_deleted_manifest_and_a_stray_one_break_the_chain(
    any_writer: LogWriter, storage: Storage, topic: str
) -> None:
    fill(any_writer, topic, partitions=1)
    compact(storage, topic)  # [1, 4], [5, 8], [9, 12]
    keys = PartitionKeys(topic, 0, storage.root)
    storage.blobs.delete(BUCKET, [keys.manifest_key(5, 8)])
    stray = keys.manifest_key(13, 20)
    storage.blobs.put(S3Location(BUCKET, stray), storage.blobs.get(S3Location(BUCKET, keys.manifest_key(9, 12))))

    report = verify(storage, topic)

    assert [(p.kind, p.key) for p in report.problems] == [
        (ProblemKind.MANIFEST_UNINDEXED, stray), (ProblemKind.MANIFEST_MISSING, keys.manifest_key(5, 8))
    ]  # fmt: skip


def test_a_manifest_naming_another_object_is_found(writer: LogWriter, storage: Storage, topic: str) -> None:
    fill(writer, topic, partitions=1)
    compact(storage, topic)
    keys = PartitionKeys(topic, 0, storage.root)
    first = S3Location(BUCKET, keys.manifest_key(1, 4))
    doc = json.loads(storage.blobs.get(first))
    doc["data_key"] = entries(storage, topic)[1].entry.ref.data_key
    storage.blobs.put(first, json.dumps(doc).encode())

    report = verify(storage, topic)

    assert [(p.kind, p.key) for p in report.problems] == [(ProblemKind.MANIFEST_MISMATCH, first.key)]


def test_a_cursor_beyond_the_watermark_is_found(any_writer: LogWriter, storage: Storage, topic: str) -> None:
    fill(any_writer, topic, partitions=1)
    cursor = meta(storage, topic).versioned_cursor()
    meta(storage, topic).replace_cursor(CompactionCursor(20), cursor.version_id)

    report = verify(storage, topic)

    found = kinds(report)
    assert ProblemKind.CURSOR_BEYOND_WATERMARK in found
    assert ProblemKind.UNCOMPACTED_BELOW_CURSOR in found  # it also claims the WAL entries compacted
    assert report.problems[0].key == PartitionKeys(topic, 0, storage.root).compaction_cursor


def test_a_log_start_inside_an_entry_and_past_the_cursor_is_found(
    writer: LogWriter, storage: Storage, topic: str
) -> None:
    fill(writer, topic, partitions=1)
    control = meta(storage, topic).control()
    meta(storage, topic).replace_control(control.record.with_changes(log_start_offset=4), control.version_id)

    report = verify(storage, topic)

    assert {(p.kind, p.key) for p in report.problems} == {
        (ProblemKind.LOG_START_NOT_AT_BOUNDARY, index(storage, topic).key_of(4)),  # the entry [3, 4]
        (ProblemKind.LOG_START_BEYOND_CURSOR, PartitionKeys(topic, 0, storage.root).control),
    }


def test_overlapping_entries_are_found(writer: LogWriter, storage: Storage, topic: str) -> None:
    fill(writer, topic, partitions=1)
    second = entries(storage, topic)[1]  # [3, 4]; one more at 5 claims [4, 5]
    assert meta(storage, topic).create_index_entry(5, second.entry) is not None

    report = verify(storage, topic)

    # [4, 5] overlaps [3, 4], and [5, 6] overlaps it
    assert [(p.kind, p.offset) for p in report.problems] == [
        (ProblemKind.INDEX_OVERLAP, 4),
        (ProblemKind.INDEX_OVERLAP, 5),
    ]


def test_a_stale_key_below_a_compacted_range_is_found(writer: LogWriter, storage: Storage, topic: str) -> None:
    fill(writer, topic, partitions=1)
    stale = entries(storage, topic)[0]  # [1, 2]: a lower key of the compacted range [1, 4]
    compact(storage, topic)
    # a stalled writer re-creates its entry after compaction deleted it, and dies before its stale-key check
    assert meta(storage, topic).create_index_entry(stale.end_offset, stale.entry) is not None

    report = verify(storage, topic)

    assert [(p.kind, p.offset) for p in report.problems] == [(ProblemKind.STALE_ENTRY, 1)]


# --- the command line ---------------------------------------------------------------------------


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, s3_config: S3Config, root: str, oxia_config: OxiaConfig) -> None:
    set_env(monkeypatch, moto_s3_env(s3_config, root))
    monkeypatch.setenv("LLOG_OXIA_SERVICE_ADDRESS", oxia_config.service_address)


def test_the_command_line_exits_non_zero_and_names_the_damaged_key(
    cli_env: None, writer: LogWriter, storage: Storage, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(writer, topic)
    assert main(["verify", "--topic", topic]) == 0
    assert "2 partition(s) verified, 0 problem(s)" in capsys.readouterr().out

    victim = entries(storage, topic, 1)[3].entry.ref.data_key
    storage.blobs.delete(BUCKET, [S3Location.parse(victim).key])

    assert main(["verify", "--topic", topic, "--partition", "1"]) == 1
    out = capsys.readouterr().out
    assert "object_missing" in out
    assert victim in out
    assert main(["verify", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert (doc["ok"], doc["partitions_verified"], doc["problems"][0]["key"]) == (False, 2, victim)
    assert main(["verify", "--topic", "nope"]) == 1
    assert "UnknownTopic" in capsys.readouterr().err
