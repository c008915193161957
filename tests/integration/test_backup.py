"""Back up and restore (``llog.protocol.backup``, docs/RECOVERY.md "Back up and restore") on a real Oxia and moto S3.

A topic of each append protocol is written (compacted in part, with a
consumer group's committed offsets and an idempotent producer's state),
backed up from the session's Oxia server and restored, under the same root
and bucket, into a fresh Oxia server of this module's own: reads, group
offsets and the producer's dedupe must come back the same. One test restores
into another root of the same server instead, and runs that root's retention,
compaction and GC against the original's objects.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from devserver.devstack import OxiaProcess, find_oxia_binary
from llog import cli
from llog.config import CompactorConfig, GcConfig, OxiaConfig, RetentionConfig, RetentionPolicy, S3Config, WriterConfig
from llog.errors import BackupNotFound, NamespaceMismatch, NamespaceNotEmpty
from llog.format.keys import PartitionKeys, S3Location
from llog.format.kv.control import AppendProtocol
from llog.format.kv.producers import ProducerState
from llog.protocol import backup
from llog.protocol.append import AppendResult, LogWriter, SharedAppendGroup
from llog.protocol.backup import (
    BackupLayout,
    RestoreReport,
    back_up_topics,
    backup_ids,
    complete_backups,
    live_keys,
    read_partition_snapshot,
    restore_backup,
)
from llog.protocol.catalog import LogCatalog
from llog.protocol.compaction import Compactor, compact_until_caught_up
from llog.protocol.gc import GarbageCollector
from llog.protocol.groups import GroupCoordinator, OffsetCommit
from llog.protocol.index import PartitionIndex
from llog.protocol.namespace import check_namespace, read_namespace
from llog.protocol.read import LogReader
from llog.protocol.topics import TopicConfig, TopicRecord, TopicRegistry
from llog.service.produce import ProduceEntry, ProduceService
from llog.store.oxia import OxiaStore
from llog.store.storage import Storage
from tests.conftest import BUCKET, TOOLS_BIN, moto_s3_env, set_env
from tests.protocols import CAS

SEQUENTIAL = WriterConfig(append_protocol=AppendProtocol.SEQUENTIAL)


@pytest.fixture(scope="module")
def fresh_oxia(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[OxiaConfig]:
    """An empty Oxia server of this module's own: where backups are restored."""
    request.getfixturevalue("oxia_server")  # skips (or fails) as the suite does without Oxia
    binary = find_oxia_binary([TOOLS_BIN])
    if binary is None:
        pytest.skip("no oxia binary to start a second server")
    process = OxiaProcess(binary, tmp_path_factory.mktemp("oxia-restore"))
    process.start()
    try:
        yield OxiaConfig(process.address, request_timeout_ms=3_000, connect_timeout_ms=5_000, close_timeout_ms=3_000)
    finally:
        process.stop()


@pytest.fixture
def target(storage: Storage, fresh_oxia: OxiaConfig) -> Iterator[Storage]:
    """The test's root and bucket on the fresh server."""
    with OxiaStore(fresh_oxia) as oxia:
        yield dataclasses.replace(storage, oxia=oxia)


def _write(storage: Storage, topic: str) -> tuple[list[str], SharedAppendGroup, AppendResult]:
    """Two topics (sequential, explicit; CAS, implicit), compacted in part, a group and an idempotent producer."""
    sequential_topic, cas_topic = f"{topic}-seq", f"{topic}-cas"
    TopicRegistry(storage.oxia, root=storage.root).create(sequential_topic, 3, TopicConfig(AppendProtocol.SEQUENTIAL))
    seq_writer, cas_writer = LogWriter(storage, config=SEQUENTIAL), LogWriter(storage, config=CAS)
    for p in range(2):
        cas_writer.initialize_partition(cas_topic, p)
    for i in range(6):
        seq_writer.append_shared([SharedAppendGroup(sequential_topic, p, [f"s{p}-{i}-{j}".encode() for j in range(3)])
                                  for p in range(3)])  # fmt: skip
        cas_writer.append_shared([SharedAppendGroup(cas_topic, p, [f"c{p}-{i}".encode()] * 2) for p in range(2)])
    compactor = Compactor(storage)
    compactor.compact_once(sequential_topic, 0)
    compactor.compact_once(cas_topic, 1)
    seq_writer.append(sequential_topic, 0, [b"after-compaction"])
    producer = cas_writer.producers.issue()
    batch = SharedAppendGroup(cas_topic, 0, [b"idem-1", b"idem-2"], producer.producer_id, producer.epoch, 0)
    first = cas_writer.append_shared([batch])[0]
    assert first.ok
    assert not first.duplicate
    groups = GroupCoordinator(storage.oxia, root=storage.root)
    joined = groups.join("billing", [sequential_topic])
    groups.commit("billing", joined.member_id, joined.generation, [
        OffsetCommit(sequential_topic, p, 4 + p) for p in joined.assignment[sequential_topic]
    ])  # fmt: skip
    return [sequential_topic, cas_topic], batch, first


def _contents(storage: Storage, topics: list[str]) -> dict[tuple[str, int], list[tuple[int, bytes]]]:
    reader = LogReader(storage)
    found = {}
    for topic in topics:
        for partition in range(3 if topic.endswith("seq") else 2):
            info = reader.partition_info(topic, partition)
            found[(topic, partition)] = [(r.offset, r.value) for r in reader.iter_from(topic, partition, 1)]
            assert info.high_watermark == len(found[(topic, partition)])
    return found


def test_a_backup_restores_every_topic_group_and_producer_into_a_fresh_oxia(
    storage: Storage, target: Storage, topic: str
) -> None:
    topics, batch, first = _write(storage, topic)
    report = back_up_topics(storage, now_ms=1_760_000_000_000, keep=3)
    assert report.ok, report.errors
    assert sorted(report.topics) == sorted(topics)
    assert json.loads(json.dumps(report.to_json()))["backup_id"] == report.backup_id

    restored = restore_backup(target)
    assert restored.backup_id == report.backup_id
    assert restored.groups_restored == 1
    assert restored.producers_restored == 1
    assert _contents(target, topics) == _contents(storage, topics)
    assert TopicRegistry(target.oxia, root=target.root).get(topics[0]) == TopicRegistry(
        storage.oxia, root=storage.root
    ).get(topics[0])
    before = GroupCoordinator(storage.oxia, root=storage.root).describe("billing")
    after = GroupCoordinator(target.oxia, root=target.root).describe("billing")
    assert after.offsets == before.offsets
    assert after.generation == before.generation

    # The idempotent producer's state came back: a retry of its batch is a duplicate at the same offsets.
    retry = LogWriter(target, config=CAS).append_shared([batch])[0]
    assert retry.ok
    assert retry.duplicate
    assert (retry.start_offset, retry.end_offset) == (first.start_offset, first.end_offset)

    # Both protocols keep appending after the restored end, and compaction goes on.
    for t, partition in ((topics[0], 0), (topics[1], 1)):
        hw = LogReader(target).high_watermark(t, partition)
        appended = LogWriter(target, config=SEQUENTIAL).append(t, partition, [b"new"])
        assert appended.start_offset == hw + 1
        Compactor(target).compact_once(t, partition)
        assert LogReader(target).read_offset(t, partition, hw + 1).value == b"new"


def test_a_copy_restored_into_another_root_never_deletes_the_original_roots_objects(
    storage: Storage, topic: str
) -> None:
    """Restored entries name the original root's objects; retention, compaction and GC under the copy's root
    delete only objects under that root, so the original keeps every record (docs/RECOVERY.md)."""
    writer = LogWriter(storage, config=CAS)
    writer.initialize_partition(topic, 0)
    for i in range(10):
        writer.append(topic, 0, [f"r{i + 1}".encode()])
    compact_until_caught_up(Compactor(storage, config=CompactorConfig(max_offsets_per_run=5)), topic, 0, budget_s=60)
    writer.append(topic, 0, [b"tail-1"])
    writer.append(topic, 0, [b"tail-2"])  # a WAL tail the copy compacts (its blobs are the original's)
    original = [(r.offset, r.value) for r in LogReader(storage).iter_from(topic, 0, 1)]
    backup_id = back_up_topics(storage, [topic], keep=3).backup_id

    copy = dataclasses.replace(storage, root=f"{storage.root}-copy")
    source, destination = BackupLayout(storage.root).prefix, BackupLayout(copy.root).prefix
    for obj in storage.blobs.list(BUCKET, f"{source}{backup_id}/"):  # an operator copies the backup over
        body = storage.blobs.get(S3Location(BUCKET, obj.key))
        storage.blobs.put(S3Location(BUCKET, destination + obj.key[len(source) :]), body)
    restore_backup(copy, backup_id)
    objects = {o.key for o in storage.blobs.list(BUCKET, f"{storage.root}/")}
    assert [(r.offset, r.value) for r in LogReader(copy).iter_from(topic, 0, 1)] == original

    # Under the copy's root: compact the tail, then retention (everything older than 1 ms) and GC with no grace.
    compact_until_caught_up(Compactor(copy), topic, 0, budget_s=60)
    LogWriter(copy, config=CAS).append(topic, 0, [b"copy-only"])  # the last entry stays: ranges below it go
    late = dataclasses.replace(copy, clock=lambda: copy.clock() + 10 * 24 * 3600)
    config = GcConfig(grace_ms=1, retention=RetentionConfig(topics={topic: RetentionPolicy(max_age_ms=1)}))
    report = GarbageCollector(late, config=config).collect()
    assert report.retention_ranges_removed == 3, report  # the original's two ranges and the copy's own
    assert report.retention_objects_deleted == 1  # the copy's own object; the original's two stay
    assert LogReader(copy).partition_info(topic, 0).log_start == len(original) + 1

    assert objects - {o.key for o in storage.blobs.list(BUCKET, f"{storage.root}/")} == set()
    assert [(r.offset, r.value) for r in LogReader(storage).iter_from(topic, 0, 1)] == original


def test_restore_refuses_a_live_namespace_and_writes_nothing(storage: Storage, topic: str) -> None:
    writer = LogWriter(storage, config=CAS)
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a"])
    report = back_up_topics(storage, [topic], keep=3)
    with pytest.raises(NamespaceNotEmpty, match="refusing to restore over live state"):
        restore_backup(storage, report.backup_id)
    with pytest.raises(BackupNotFound):
        restore_backup(storage, "no-such-backup")
    assert LogReader(storage).high_watermark(topic, 0) == 1


def test_the_cli_backs_up_and_refuses_to_restore_over_live_state(
    storage: Storage, topic: str, s3_config: S3Config, oxia_config: OxiaConfig, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    set_env(monkeypatch, {**moto_s3_env(s3_config, storage.root),
                          "LLOG_OXIA_SERVICE_ADDRESS": oxia_config.service_address})  # fmt: skip
    writer = LogWriter(storage, config=CAS)
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a", b"b"])
    assert cli.main(["backup", "--topic", topic]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["topics"][topic][0]["high_watermark"] == 2
    assert cli.main(["restore", "--topic", topic]) == 1
    assert "NamespaceNotEmpty" in capsys.readouterr().err


def test_old_backups_are_pruned_and_gc_never_touches_backups(storage: Storage, topic: str) -> None:
    writer = LogWriter(storage, config=CAS)
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a"])
    made = [back_up_topics(storage, [topic], now_ms=1_760_000_000_000 + i, keep=2).backup_id for i in range(4)]
    assert [s.backup_id for s in complete_backups(storage)] == made[:1:-1]
    assert backup_ids(storage) == made[2:]
    # GC with no grace at all judges every object it lists; backups are not among them.
    late = dataclasses.replace(storage, clock=lambda: storage.clock() + 10 * 24 * 3600)
    GarbageCollector(late).collect()
    layout = BackupLayout(storage.root)
    assert [o.key for o in storage.blobs.list(storage.bucket, layout.summary(made[-1]))] == [layout.summary(made[-1])]


def test_a_backup_of_an_oxia_that_lost_its_state_is_refused_and_prunes_nothing(
    storage: Storage, target: Storage, topic: str
) -> None:
    """The scheduled backup against an empty Oxia (same root and bucket) would write a backup of nothing and,
    after ``keep`` runs, prune every real one: the namespace guard refuses it first."""
    writer = LogWriter(storage, config=CAS)
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a"])
    check_namespace(storage)  # GC's first run created the identity in both stores
    good = back_up_topics(storage, keep=1).backup_id
    for _ in range(2):
        with pytest.raises(NamespaceMismatch, match="No backup was written"):
            back_up_topics(target, keep=1)
    assert backup_ids(storage) == [good]
    assert read_namespace(target).oxia is None  # the check is read-only: it created nothing


def test_pruning_keeps_the_newest_backup_of_each_partition_whatever_its_age(storage: Storage, topic: str) -> None:
    writer = LogWriter(storage, config=CAS)
    other = f"{topic}-other"
    for name in (topic, other):
        writer.initialize_partition(name, 0)
        writer.append(name, 0, [b"a"])
    first = back_up_topics(storage, [topic, other], now_ms=1_760_000_000_000, keep=1).backup_id
    both = back_up_topics(storage, [topic, other], now_ms=1_760_000_000_001, keep=1)
    assert both.deleted_backups == [first]  # a newer backup holds each of its partitions
    later = [back_up_topics(storage, [other], now_ms=1_760_000_000_002 + i, keep=1) for i in range(3)]
    # Backups without `topic` (as an emptied or partial Oxia would give) never delete its last copy.
    assert backup_ids(storage) == [both.backup_id, later[-1].backup_id]
    assert [r.deleted_backups for r in later] == [[], [later[0].backup_id], [later[1].backup_id]]
    assert complete_backups(storage)[1].topics == {topic: [0], other: [0]}


def test_a_producer_state_read_after_the_high_watermark_is_cut_back_to_it(
    storage: Storage, target: Storage, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idempotent batch finalized between the snapshot's high watermark and its scan of ``producers/``: its
    entry is left out, so the restored state must not remember it (a retry would be a false duplicate)."""
    writer = LogWriter(storage, config=CAS)
    writer.initialize_partition(topic, 0)
    producer = writer.producers.issue()
    before = SharedAppendGroup(topic, 0, [b"kept"], producer.producer_id, producer.epoch, 0)
    assert writer.append_shared([before])[0].ok
    late = SharedAppendGroup(topic, 0, [b"late-1", b"late-2"], producer.producer_id, producer.epoch, 1)
    landed: list[AppendResult] = []

    class AppendsAfterReadingTheHighWatermark(PartitionIndex):
        def high_watermark(self) -> int:
            hw = super().high_watermark()
            if not landed:
                landed.append(writer.append_shared([late])[0])
            return hw

    monkeypatch.setattr(backup, "PartitionIndex", AppendsAfterReadingTheHighWatermark)
    report = back_up_topics(storage, [topic], keep=3)
    monkeypatch.undo()
    assert report.ok, report.errors
    assert report.topics[topic][0].high_watermark == 1
    assert (landed[0].start_offset, landed[0].end_offset) == (2, 3)
    snapshot = read_partition_snapshot(storage, report.backup_id, topic, 0)
    keys = PartitionKeys(topic, 0, storage.root)
    state = ProducerState.decode(snapshot.value(storage.root, keys.producer_state(producer.producer_id)) or b"")
    assert [(b.start_offset, b.end_offset) for b in state.batches] == [(1, 1)]

    restore_backup(target, report.backup_id)
    target_writer = LogWriter(target, config=CAS)
    assert target_writer.append_shared([before])[0].duplicate  # remembered below the high watermark
    retry = target_writer.append_shared([late])[0]
    assert retry.ok
    assert not retry.duplicate  # not in the restored log: committed now, once
    assert (retry.start_offset, retry.end_offset) == (2, 3)
    assert [r.value for r in LogReader(target).iter_from(topic, 0, 1)] == [b"kept", b"late-1", b"late-2"]
    assert target_writer.append_shared([late])[0].duplicate


def test_restore_in_place_refuses_when_s3_holds_ranges_compacted_after_the_backup(
    storage: Storage, target: Storage, topic: str
) -> None:
    writer = LogWriter(storage, config=CAS)
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a", b"b"])
    report = back_up_topics(storage, [topic], keep=3)
    writer.append(topic, 0, [b"acknowledged after the backup"])
    assert Compactor(storage).compact_once(topic, 0).end_offset == 3  # its manifest names [1, 3]
    with pytest.raises(NamespaceNotEmpty, match="compacted after it"):
        restore_backup(target, report.backup_id)  # an empty Oxia, the same root: offset 3 would be reused
    assert live_keys(target.oxia, target.root, topic, [PartitionKeys(topic, 0, target.root)]) == []  # nothing written


def _back_up_a_topic_with_an_id(storage: Storage, topic: str) -> tuple[TopicRecord, str]:
    record, _ = TopicRegistry(storage.oxia, root=storage.root).create(topic, 2, TopicConfig(AppendProtocol.CAS))
    assert record.keys_include_id
    writer = LogWriter(storage, config=CAS)
    for p in range(2):
        writer.append(topic, p, [f"r{p}".encode()])
    return record, back_up_topics(storage, [topic], keep=3).backup_id


def _restore_with(monkeypatch: pytest.MonkeyPatch, target: Storage, backup_id: str, meanwhile: Callable[[], object]
                  ) -> RestoreReport:  # fmt: skip
    """Restore ``backup_id``, running ``meanwhile`` once the partitions are written, before the topic record."""
    restore_partition = backup.restore_partition

    def then_meanwhile(*args: Any) -> int:
        written = restore_partition(*args)
        meanwhile()
        return written

    monkeypatch.setattr(backup, "restore_partition", then_meanwhile)
    return restore_backup(target, backup_id)


def test_a_registration_while_a_restore_has_no_topic_record_yet_does_not_hide_the_restored_partitions(
    storage: Storage, target: Storage, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Restore writes each partition's registry entry before the topic record. A writer that registers the name's
    partition meanwhile (a library writer without topic records: the legacy folder, in force while no record
    is) replaces the restored entry; once the restore's record is in force, its partitions are registered
    again: discovery (compaction, GC, verify, backup) finds them in the restored folder."""
    record, backup_id = _back_up_a_topic_with_an_id(storage, topic)
    _restore_with(monkeypatch, target, backup_id, lambda: LogWriter(target, config=CAS).initialize_partition(topic, 0))
    assert LogCatalog(target.oxia, root=target.root).partitions()[topic] == [
        record.partition_keys(p, target.root) for p in range(2)
    ]
    assert [[r.value for r in LogReader(target).iter_from(topic, p, 1)] for p in range(2)] == [[b"r0"], [b"r1"]]


def test_a_restore_whose_topic_record_another_process_wrote_meanwhile_fails(
    storage: Storage, target: Storage, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A produce while a restore has no topic record yet creates the name's implicit topic (another id):
    the restore's record is not written, and the restore says so (NamespaceNotEmpty), not success."""
    _, backup_id = _back_up_a_topic_with_an_id(storage, topic)
    produce = ProduceService(LogWriter(target, config=CAS))
    with pytest.raises(NamespaceNotEmpty, match="appeared while restoring"):
        _restore_with(monkeypatch, target, backup_id, lambda: produce.produce([ProduceEntry(topic, 1, [b"new"])]))
