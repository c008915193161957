"""Back up and restore (``llog.protocol.backup``, docs/RECOVERY.md "Back up and restore") on a real Oxia and moto S3.

A topic of each append protocol is written (compacted in part, with a
consumer group's committed offsets and an idempotent producer's state),
backed up from the session's Oxia server and restored, under the same root
and bucket, into a fresh Oxia server of this module's own: reads, group
offsets and the producer's dedupe must come back the same.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import pytest

from devserver.devstack import OxiaProcess, find_oxia_binary
from llog import cli
from llog.client.reader import LogReader
from llog.client.writer import AppendResult, LogWriter, SharedAppendGroup
from llog.config import OxiaConfig, S3Config, WriterConfig
from llog.errors import BackupNotFound, NamespaceNotEmpty
from llog.format.documents import AppendProtocol
from llog.protocol.backup import (
    BackupLayout,
    back_up_topics,
    backup_ids,
    complete_backups,
    restore_backup,
)
from llog.protocol.compaction import Compactor
from llog.protocol.gc import GarbageCollector
from llog.protocol.groups import GroupCoordinator, OffsetCommit
from llog.protocol.topics import TopicConfig, TopicRegistry
from llog.store.oxia import OxiaStore
from llog.store.storage import Storage
from tests.conftest import TOOLS_BIN, moto_s3_env, set_env
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
