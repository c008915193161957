"""Rebuild from S3 (``llog.protocol.rebuild``, docs/RECOVERY.md "Rebuild from S3") after Oxia loses its data.

Each test runs its own Oxia server on a temporary directory, writes and
compacts part of a topic, lets GC run, then stops the server, deletes its
data directory and starts it empty: what the rebuild brings back must read
byte for byte at the original offsets, new appends must land above every
offset the old log used, and the reported loss must be exactly the tail that
was neither compacted nor backed up.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest

from devserver.devstack import OxiaProcess, find_oxia_binary
from llog import cli
from llog.config import CompactorConfig, OxiaConfig, S3Config, WriterConfig
from llog.errors import NamespaceNotEmpty, RecordsLost
from llog.format.keys import PartitionKeys
from llog.format.kv.control import AppendProtocol
from llog.protocol import rebuild
from llog.protocol.append import LogWriter, SharedAppendGroup
from llog.protocol.backup import BackupReport, back_up_topics
from llog.protocol.catalog import LogCatalog
from llog.protocol.compaction import Compactor
from llog.protocol.faults import PRODUCER_AFTER_CLAIM
from llog.protocol.gc import GarbageCollector
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.namespace import adopt_namespace
from llog.protocol.read import LogReader
from llog.protocol.rebuild import LostRange, RebuildReport, RecoveredRange, rebuild_topic
from llog.protocol.topics import TopicConfig, TopicRegistry
from llog.service.produce import ProduceEntry, ProduceService
from llog.store.oxia import OxiaStore
from llog.store.storage import Storage
from tests.conftest import TOOLS_BIN, moto_s3_env, set_env
from tests.protocols import CAS

SEQUENTIAL = WriterConfig(append_protocol=AppendProtocol.SEQUENTIAL)
BATCH = 3  # records per append
RUN = 12  # offsets one compaction run takes: [1, 12] is compacted, the rest is not


class LosableOxia:
    """An Oxia server of the test's own whose data can be lost."""

    def __init__(self, process: OxiaProcess) -> None:
        self.process = process
        self.store = OxiaStore(self.config)

    @property
    def config(self) -> OxiaConfig:
        return OxiaConfig(self.process.address, request_timeout_ms=3_000, connect_timeout_ms=5_000,
                          close_timeout_ms=3_000)  # fmt: skip

    def lose_everything(self) -> None:
        """Stop the server, delete its data directory, start it empty (same address)."""
        self.store.close()
        self.process.stop()
        shutil.rmtree(self.process.data_dir)
        self.process.start()
        self.store = OxiaStore(self.config)


@pytest.fixture
def oxia(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[LosableOxia]:
    request.getfixturevalue("oxia_server")  # skips (or fails) as the suite does without Oxia
    binary = find_oxia_binary([TOOLS_BIN])
    if binary is None:
        pytest.skip("no oxia binary to start a server of the test's own")
    process = OxiaProcess(binary, tmp_path_factory.mktemp("oxia-lost"))
    process.start()
    losable = LosableOxia(process)
    try:
        yield losable
    finally:
        losable.store.close()
        process.stop()


def _on(storage: Storage, oxia: LosableOxia) -> Storage:
    return dataclasses.replace(storage, oxia=oxia.store)


def _append(storage: Storage, config: WriterConfig, topic: str, partition: int, batches: int) -> None:
    writer = LogWriter(storage, config=config)
    writer.initialize_partition(topic, partition)
    for _ in range(batches):
        hw = LogReader(storage).high_watermark(topic, partition)
        result = writer.append(topic, partition, [f"{topic}/{partition}@{hw + 1 + i}".encode() for i in range(BATCH)])
        assert result.ok, result.error


def _records(storage: Storage, topic: str, partition: int, last: int) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for r in LogReader(storage).read_range(topic, partition, 1, last)]


def _collect_garbage(storage: Storage) -> None:
    """A GC run that finds every object old enough: the compacted ranges' WAL blobs go."""
    late = dataclasses.replace(storage, clock=lambda: time.time() + 2 * 24 * 3600)
    report = GarbageCollector(late).collect()
    assert report.errors == []
    assert report.wal_blobs_deleted > 0


def test_rebuild_recovers_the_compacted_ranges_and_reports_the_uncompacted_tail_lost(
    storage: Storage, oxia: LosableOxia, topic: str
) -> None:
    before = _on(storage, oxia)
    for partition in range(3):
        _append(before, SEQUENTIAL, topic, partition, 10)  # offsets 1..30
    compactor = Compactor(before, config=CompactorConfig(max_offsets_per_run=RUN))
    for partition in range(2):  # partition 2 is never compacted
        assert compactor.compact_once(topic, partition).end_offset == RUN
    original = {p: _records(before, topic, p, 30) for p in range(3)}
    _collect_garbage(before)
    # A writer that lives through the loss, holding partition 0's generation 1 in its cache.
    stale_store = OxiaStore(oxia.config)
    stale = LogWriter(dataclasses.replace(storage, oxia=stale_store), config=SEQUENTIAL)
    stale.initialize_partition(topic, 0)
    assert stale.append(topic, 0, [b"stale-before"]).start_offset == 31

    oxia.lose_everything()
    after = _on(storage, oxia)
    reports = {r.partition: r for r in rebuild_topic(after, topic, writer_config=SEQUENTIAL)}
    # Its next append lands past the fence marker rebuild put into generation 1 and follows meta/control.
    try:
        assert stale.append(topic, 0, [b"stale-after"]).start_offset == reports[0].next_offset
    finally:
        stale_store.close()

    assert sorted(reports) == [0, 1, 2]
    for partition in range(2):
        report = reports[partition]
        last = 31 if partition == 0 else 30  # the stale writer's record
        assert report.protocol == "sequential"
        assert report.recovered == [RecoveredRange(1, RUN, "manifest")]
        assert [(r.first, r.last) for r in report.lost] == [(RUN + 1, last)]
        assert report.next_offset == last + 1
        assert _records(after, topic, partition, RUN) == original[partition][:RUN]
        with pytest.raises(RecordsLost) as lost:
            LogReader(after).read_offset(topic, partition, RUN + 1)
        assert (lost.value.first, lost.value.last, lost.value.next_offset) == (RUN + 1, last, last + 1)
    assert reports[2].recovered == []
    assert [(r.first, r.last) for r in reports[2].lost] == [(1, 30)]
    assert json.loads(json.dumps([r.to_json() for r in reports.values()]))[2]["next_offset"] == 31

    # New appends land above every offset the old log used, and compaction goes on from there.
    writer = LogWriter(after, config=CAS)  # follows the partition's own (sequential) protocol
    for partition in range(3):
        first = reports[partition].next_offset + (1 if partition == 0 else 0)  # after the stale writer's
        appended = writer.append(topic, partition, [b"new-1", b"new-2"])
        assert (appended.start_offset, appended.end_offset) == (first, first + 1)
        assert LogReader(after).read_offset(topic, partition, first + 1).value == b"new-2"
        assert Compactor(after).compact_once(topic, partition).start_offset == reports[partition].next_offset
    with pytest.raises(NamespaceNotEmpty):
        rebuild_topic(after, topic)


def test_rebuild_through_the_cli_recovers_up_to_the_backup_taken_after_more_appends(
    storage: Storage, oxia: LosableOxia, topic: str, s3_config: S3Config, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    before = _on(storage, oxia)
    for partition in range(2):
        _append(before, CAS, topic, partition, 10)  # 1..30
        Compactor(before, config=CompactorConfig(max_offsets_per_run=RUN)).compact_once(topic, partition)
        _append(before, CAS, topic, partition, 5)  # 31..45
    backup = back_up_topics(before, [topic], keep=2)
    assert backup.ok, backup.errors
    for partition in range(2):
        _append(before, CAS, topic, partition, 3)  # 46..54: acknowledged after the backup, lost with Oxia
    original = {p: _records(before, topic, p, 54) for p in range(2)}
    _collect_garbage(before)

    oxia.lose_everything()
    set_env(monkeypatch, {**moto_s3_env(s3_config, storage.root), "LLOG_OXIA_SERVICE_ADDRESS": oxia.process.address,
                          "LLOG_APPEND_PROTOCOL": "sequential"})  # fmt: skip
    assert cli.main(["rebuild", "--topic", topic]) == 0
    printed = {r["partition"]: r for r in json.loads(capsys.readouterr().out)}

    after = _on(storage, oxia)
    for partition in range(2):
        report = printed[partition]
        assert report["protocol"] == "cas"  # as the backup says, not as LLOG_APPEND_PROTOCOL would
        assert report["backup_id"] == backup.backup_id
        assert [(r["start"], r["end"]) for r in report["recovered"]] == [(1, RUN), (RUN + 1, 45)]
        assert [(r["first"], r["last"]) for r in report["lost"]] == [(46, 54)]
        assert report["next_offset"] == 55
        assert _records(after, topic, partition, 45) == original[partition][:45]
        # The recovered WAL entries were compacted so that the cursor could move over the lost range.
        meta = PartitionMetadata(after.oxia, PartitionKeys(topic, partition, after.root))
        assert meta.cursor().offset == 55
        appended = LogWriter(after, config=CAS).append(topic, partition, [b"after-rebuild"])
        assert appended.start_offset == 55
    assert cli.main(["rebuild", "--topic", topic]) == 1
    assert "NamespaceNotEmpty" in capsys.readouterr().err


def test_rebuild_reserves_offsets_when_no_gc_ran_and_never_reuses_one(
    storage: Storage, oxia: LosableOxia, topic: str
) -> None:
    """Without GC, the compacted range's WAL blobs still exist: they are counted too, so the lost range is
    longer than the real loss, never shorter."""
    before = _on(storage, oxia)
    _append(before, CAS, topic, 0, 4)  # 1..12
    Compactor(before).compact_once(topic, 0)
    _append(before, CAS, topic, 0, 2)  # 13..18
    oxia.lose_everything()
    after = _on(storage, oxia)
    [report] = rebuild_topic(after, topic, writer_config=CAS)
    assert report.recovered == [RecoveredRange(1, 12, "manifest")]
    assert report.unplaced_wal_records == 18
    assert report.lost == [LostRange(13, 30, report.lost[0].reason)]
    assert report.next_offset == 31
    assert LogWriter(after, config=CAS).append(topic, 0, [b"x"]).start_offset == 31


def _rebuilt_once(storage: Storage, oxia: LosableOxia, topic: str) -> tuple[Storage, RebuildReport]:
    """Offsets 1..30, the first RUN compacted; Oxia lost, the topic rebuilt (RUN+1..30 lost), the namespace
    adopted and GC run (the lost range's WAL blobs: nothing references them any more)."""
    before = _on(storage, oxia)
    _append(before, CAS, topic, 0, 10)  # 1..30
    Compactor(before, config=CompactorConfig(max_offsets_per_run=RUN)).compact_once(topic, 0)
    _collect_garbage(before)
    oxia.lose_everything()
    first = _on(storage, oxia)
    [report] = rebuild_topic(first, topic, writer_config=CAS)
    assert [(r.first, r.last) for r in report.lost] == [(RUN + 1, 30)]
    assert adopt_namespace(first).adopted
    _collect_garbage(first)
    return first, report


def test_a_rebuild_from_a_backup_taken_after_an_earlier_rebuild_keeps_its_lost_range_lost(
    storage: Storage, oxia: LosableOxia, topic: str
) -> None:
    first, _ = _rebuilt_once(storage, oxia, topic)
    _append(first, CAS, topic, 0, 2)  # 31..36
    assert back_up_topics(first, [topic], keep=2).ok

    oxia.lose_everything()
    second = _on(storage, oxia)
    [again] = rebuild_topic(second, topic, writer_config=CAS)
    assert [(r.first, r.last) for r in again.lost] == [(RUN + 1, 30)]
    assert again.lost[0].reason.startswith(f"lost before backup {again.backup_id}")
    assert again.recovered == [RecoveredRange(1, RUN, "manifest"), RecoveredRange(31, 36, f"backup {again.backup_id}")]
    assert (again.unplaced_wal_records, again.next_offset) == (0, 37)
    reader = LogReader(second)
    with pytest.raises(RecordsLost) as lost:
        reader.read_offset(topic, 0, 20)
    assert (lost.value.first, lost.value.last) == (RUN + 1, 30)
    assert [r.offset for r in reader.read_range(topic, 0, 31, 36)] == list(range(31, 37))


def test_a_slice_committed_after_the_backup_counts_though_the_backup_references_its_blob(
    storage: Storage, oxia: LosableOxia, topic: str
) -> None:
    """One blob holds two slices of the partition, committed one after the other (a plain group, then an
    idempotent one, as llog serve batches them); the backup, taken between the two commits, references the
    blob through the first slice only. The second slice's offsets are not assigned again."""
    before = _on(storage, oxia)
    backups: list[BackupReport] = []

    def back_up_between_the_commits(point: str) -> None:
        if point == PRODUCER_AFTER_CLAIM and not backups:
            backups.append(back_up_topics(before, [topic], keep=2))

    writer = LogWriter(before, config=CAS, fault_hook=back_up_between_the_commits)
    writer.initialize_partition(topic, 0)
    producer = writer.producers.issue()
    plain, idempotent = writer.append_shared([
        SharedAppendGroup(topic, 0, [b"a1", b"a2", b"a3"]),
        SharedAppendGroup(topic, 0, [b"b1", b"b2", b"b3"], producer.producer_id, producer.epoch, 0),
    ])  # fmt: skip
    assert [(r.start_offset, r.end_offset) for r in (plain, idempotent)] == [(1, 3), (4, 6)]
    assert plain.wal_uri == idempotent.wal_uri
    [backup] = backups
    assert backup.ok
    assert [p.high_watermark for p in backup.topics[topic]] == [3]

    oxia.lose_everything()
    after = _on(storage, oxia)
    [report] = rebuild_topic(after, topic, writer_config=CAS)
    assert report.recovered == [RecoveredRange(1, 3, f"backup {backup.backup_id}")]
    assert report.unplaced_wal_records == 3
    assert [(r.first, r.last) for r in report.lost] == [(4, 6)]
    assert report.next_offset == 7
    assert LogWriter(after, config=CAS).append(topic, 0, [b"new"]).start_offset == 7


def test_a_second_loss_after_a_rebuild_keeps_its_lost_range_and_reuses_no_acknowledged_offset(
    storage: Storage, oxia: LosableOxia, topic: str
) -> None:
    """The rebuild backs the topic up, so its LOST entry and next offset survive a second loss of Oxia
    (with no backup taken meanwhile), after GC removed the lost range's WAL blobs."""
    first, report = _rebuilt_once(storage, oxia, topic)
    assert report.rebuilt_backup_id is not None
    assert report.notes == []
    writer = LogWriter(first, config=CAS)
    acknowledged = [writer.append(topic, 0, [b"x", b"y"]) for _ in range(3)]  # 31..36, not compacted
    assert [(a.start_offset, a.end_offset) for a in acknowledged] == [(31, 32), (33, 34), (35, 36)]

    oxia.lose_everything()
    second = _on(storage, oxia)
    [again] = rebuild_topic(second, topic, writer_config=CAS)
    assert again.backup_id == report.rebuilt_backup_id
    assert again.recovered == [RecoveredRange(1, RUN, "manifest")]
    assert [(r.first, r.last) for r in again.lost] == [(RUN + 1, 30), (31, 36)]
    assert (again.unplaced_wal_records, again.next_offset) == (6, 37)
    with pytest.raises(RecordsLost) as lost:
        LogReader(second).read_offset(topic, 0, 33)
    assert (lost.value.first, lost.value.last, lost.value.next_offset) == (31, 36, 37)
    assert LogWriter(second, config=CAS).append(topic, 0, [b"z"]).start_offset == 37


def test_a_rebuilt_topic_with_an_id_keeps_its_folders_and_gets_a_record_that_says_so(
    storage: Storage, oxia: LosableOxia, topic: str
) -> None:
    """No backup: S3's folders name the topic's id, and the rebuild writes a record with it (an implicit topic
    of that id), so every component finds the rebuilt partitions where they are, and the next produce too."""
    before = _on(storage, oxia)
    record, _ = TopicRegistry(before.oxia, root=before.root).create(topic, 2, TopicConfig(AppendProtocol.SEQUENTIAL))
    assert record.keys_include_id
    service = ProduceService(LogWriter(before))
    for i in range(4):
        assert all(r.ok for r in service.produce([ProduceEntry(topic, p, [f"{p}-{i}".encode()]) for p in (0, 1)]))
    compactor = Compactor(before)
    for partition in (0, 1):
        assert compactor.compact_once(topic, partition).end_offset == 4
    original = {p: _records(before, topic, p, 4) for p in (0, 1)}
    _collect_garbage(before)

    oxia.lose_everything()
    after = _on(storage, oxia)
    reports = rebuild_topic(after, topic, writer_config=SEQUENTIAL)

    assert [(r.partition, r.recovered) for r in reports] == [(p, [RecoveredRange(1, 4, "manifest")]) for p in (0, 1)]
    rebuilt = TopicRegistry(after.oxia, root=after.root).get(topic)
    assert rebuilt is not None
    assert (rebuilt.topic_id, rebuilt.keys_include_id, rebuilt.partition_numbers) == (record.topic_id, True, [0, 1])
    for partition in (0, 1):
        assert _records(after, topic, partition, 4) == original[partition]
    (appended,) = ProduceService(LogWriter(after)).produce([ProduceEntry(topic, 1, [b"new"])])
    assert (appended.ok, appended.start_offset) == (True, 5)
    assert LogReader(after).read_offset(topic, 1, 5).value == b"new"


def test_a_registration_while_a_rebuild_has_no_topic_record_yet_does_not_hide_the_rebuilt_partitions(
    storage: Storage, oxia: LosableOxia, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rebuild writes each partition's registry entry before the topic record; a library writer (the legacy
    folder, in force while no record is) registers partition 0 meanwhile, replacing its entry. Once the
    rebuild's record is in force its partitions are registered again, so discovery finds them."""
    before = _on(storage, oxia)
    record, _ = TopicRegistry(before.oxia, root=before.root).create(topic, 2, TopicConfig(AppendProtocol.CAS))
    service = ProduceService(LogWriter(before))
    for i in range(2):
        assert all(r.ok for r in service.produce([ProduceEntry(topic, p, [f"{p}-{i}".encode()]) for p in (0, 1)]))
    for partition in (0, 1):
        assert Compactor(before).compact_once(topic, partition).end_offset == 2
    oxia.lose_everything()
    after = _on(storage, oxia)
    write = rebuild._write

    def then_a_library_writer(*args: Any) -> None:
        write(*args)
        LogWriter(after, config=CAS).initialize_partition(topic, 0)

    monkeypatch.setattr(rebuild, "_write", then_a_library_writer)
    rebuild_topic(after, topic, writer_config=CAS)
    assert LogCatalog(after.oxia, root=after.root).partitions()[topic] == [
        record.partition_keys(p, after.root) for p in (0, 1)
    ]
