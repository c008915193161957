"""The namespace guard (``llog.protocol.namespace``): GC refuses to run against an Oxia that lost its state.

Without it, GC on a new, empty Oxia would find every shared WAL blob unreferenced and delete them
all before a rebuild could use them. Each test checks what is deleted, not just that GC raised.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any, cast

import pytest

from functions.common.telemetry import LocalContext
from functions.gc import app as gc_app
from llog import cli
from llog.config import CompactorConfig, S3Config
from llog.errors import BlobNotFound, NamespaceMismatch
from llog.format.keys import PartitionKeys, S3Location, shared_wal_prefix
from llog.format.kv.namespace import NamespaceKeys, NamespaceRecord
from llog.protocol.compaction import Compactor
from llog.protocol.gc import GarbageCollector, GcReport, PartitionId
from llog.protocol.namespace import NamespaceState, adopt_namespace, check_namespace, read_namespace
from llog.protocol.read import LogReader
from llog.protocol.rebuild import rebuild_topic
from llog.store.oxia import CREATE_ONLY, OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from tests.conftest import OxiaServer, moto_s3_env, set_env
from tests.integration import test_rebuild
from tests.integration.test_rebuild import RUN, LosableOxia, _append, _on, _records
from tests.protocols import CAS

oxia = test_rebuild.oxia  # the fixture: an Oxia server of the test's own, whose data can be lost
LATE_S = 2 * 24 * 3600  # GC's clock this far ahead: every object is past the grace period


def _late(storage: Storage) -> Storage:
    return dataclasses.replace(storage, clock=lambda: time.time() + LATE_S)


def _wal_blobs(storage: Storage) -> list[str]:
    return sorted(o.key for o in storage.blobs.list(storage.bucket, shared_wal_prefix(storage.root)))


def _compacted_log(storage: Storage, topic: str) -> None:
    """Offsets 1..30 of a CAS partition, [1, 12] compacted: the four WAL blobs of [1, 12] are garbage."""
    _append(storage, CAS, topic, 0, 10)
    assert Compactor(storage, config=CompactorConfig(max_offsets_per_run=RUN)).compact_once(topic, 0).end_offset == RUN


def _delete_oxia_record(storage: Storage) -> None:
    keys = NamespaceKeys(storage.root)
    assert storage.oxia.delete(keys.record, partition_key=keys.partition_key)


def test_gc_on_a_fresh_root_creates_the_identity_in_both_stores_and_keeps_it(storage: Storage) -> None:
    assert read_namespace(storage) == NamespaceState(None, None)
    GarbageCollector(storage).collect()
    state = read_namespace(storage)
    assert state.oxia is not None
    assert state.oxia == state.s3
    keys = NamespaceKeys(storage.root)
    stored = storage.blobs.get(S3Location(storage.bucket, keys.object_key))
    assert set(json.loads(stored)) == {"namespace_id", "created_at_ms"}
    assert keys.record == f"{storage.root}/__catalog/namespace"
    GarbageCollector(storage).collect()
    assert read_namespace(storage) == state  # one identity for the life of the namespace


class _BetweenItsReads:
    """A storage's Oxia or blob store that runs ``meanwhile`` once, right after the first namespace read it
    serves: another run's steps between this run's two reads."""

    def __init__(self, store: Any, meanwhile: list[Callable[[], object]]) -> None:
        self._store, self._meanwhile = store, meanwhile

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self._store.get(*args, **kwargs)
        finally:
            while self._meanwhile:
                self._meanwhile.pop()()


def test_two_first_gc_runs_at_once_agree_on_one_identity(storage: Storage) -> None:
    """Run B creates the identity (Oxia, then S3) between run A's two reads of it: A must not take S3's copy
    for one Oxia lacks (found by the concurrent harness: two collectors starting on a fresh root)."""
    meanwhile: list[Callable[[], object]] = [lambda: check_namespace(storage)]  # run B, whole
    run_a = dataclasses.replace(
        storage,
        oxia=cast(OxiaStore, _BetweenItsReads(storage.oxia, meanwhile)),
        blobs=cast(BlobStore, _BetweenItsReads(storage.blobs, meanwhile)),
    )
    record = check_namespace(run_a)
    assert not meanwhile  # run B ran between A's reads
    assert read_namespace(storage) == NamespaceState(record, record)


def test_an_oxia_record_without_its_s3_copy_gets_one(storage: Storage) -> None:
    """A run that died between the two writes (Oxia first), or an upgrade: the next run writes S3's copy."""
    record = check_namespace(storage)
    storage.blobs.delete(storage.bucket, [NamespaceKeys(storage.root).object_key])
    assert check_namespace(storage) == record
    assert read_namespace(storage).s3 == record


def test_gc_deletes_nothing_while_oxia_lacks_the_identity_and_runs_again_once_adopted(
    storage: Storage, topic: str, capsys: pytest.CaptureFixture[str], s3_config: S3Config,
    monkeypatch: pytest.MonkeyPatch, oxia_server: OxiaServer,
) -> None:  # fmt: skip
    _compacted_log(storage, topic)
    record = check_namespace(storage)
    _delete_oxia_record(storage)  # as if Oxia's data was lost; the rest of this root's state stays
    blobs = _wal_blobs(storage)
    assert len(blobs) == 10

    gc = GarbageCollector(_late(storage))
    with pytest.raises(NamespaceMismatch, match="lost or replaced") as refused:
        gc.collect()
    assert (refused.value.s3_id, refused.value.oxia_id) == (record.namespace_id, None)
    for step in ("llog rebuild", "llog adopt-namespace"):
        assert step in str(refused.value)
    assert _wal_blobs(storage) == blobs  # nothing deleted
    assert read_namespace(storage).oxia is None  # and nothing created in Oxia

    set_env(monkeypatch, {**moto_s3_env(s3_config, storage.root),
                          "LLOG_OXIA_SERVICE_ADDRESS": oxia_server.address})  # fmt: skip
    assert cli.main(["gc"]) == 1
    assert "NamespaceMismatch" in capsys.readouterr().err
    assert cli.main(["adopt-namespace"]) == 0
    assert json.loads(capsys.readouterr().out) == {"namespace_id": record.namespace_id, "adopted": True}
    assert adopt_namespace(storage).adopted is False  # already there: nothing to do

    report = gc.collect()
    assert report.wal_blobs_deleted == 4  # the blobs of the compacted [1, 12]
    assert len(_wal_blobs(storage)) == 6
    assert [r.offset for r in LogReader(storage).read_range(topic, 0, 1, 30)] == list(range(1, 31))


def test_an_oxia_of_another_namespace_is_refused_by_gc_and_by_adopt(storage: Storage) -> None:
    check_namespace(storage)
    _delete_oxia_record(storage)
    keys = NamespaceKeys(storage.root)
    other = NamespaceRecord("another-namespace", 1)
    storage.oxia.put(keys.record, other.encode(), partition_key=keys.partition_key, expected_version_id=CREATE_ONLY)
    with pytest.raises(NamespaceMismatch, match="another-namespace") as refused:
        GarbageCollector(storage).collect()
    assert refused.value.oxia_id == "another-namespace"
    with pytest.raises(NamespaceMismatch, match="refusing to adopt"):
        adopt_namespace(storage)
    assert read_namespace(storage).oxia == other


def test_adopt_without_an_identity_in_s3_refuses(storage: Storage) -> None:
    with pytest.raises(BlobNotFound, match="nothing|no namespace identity"):
        adopt_namespace(storage)
    assert read_namespace(storage).oxia is None


def test_after_losing_oxia_gc_waits_for_rebuild_and_adopt_then_keeps_what_the_rebuilt_index_references(
    storage: Storage, oxia: LosableOxia, topic: str
) -> None:
    before = _on(storage, oxia)
    _compacted_log(before, topic)
    original = _records(before, topic, 0, 30)
    GarbageCollector(_late(before)).collect()  # creates the identity, deletes the four blobs of [1, 12]
    blobs = _wal_blobs(before)
    assert len(blobs) == 6

    oxia.lose_everything()  # a new, empty Oxia at the same address: same bucket, same root
    after = _on(storage, oxia)
    gc = GarbageCollector(_late(after))
    with pytest.raises(NamespaceMismatch):
        gc.collect()
    assert _wal_blobs(after) == blobs  # what the rebuild needs is still there

    [report] = rebuild_topic(after, topic, writer_config=CAS)
    assert report.unplaced_wal_records == 18  # it counted the six blobs GC did not delete
    assert report.next_offset == 31
    with pytest.raises(NamespaceMismatch):
        gc.collect()  # rebuilt, not adopted yet: other topics may still need their blobs
    assert adopt_namespace(after).adopted

    collected: GcReport = gc.collect()
    assert collected.errors == []
    assert collected.wal_blobs_deleted == 6  # slices of the lost range: no entry references them
    assert collected.compacted_deleted == 0  # the rebuilt index references the compacted [1, 12]
    assert _records(after, topic, 0, RUN) == original[:RUN]


def test_the_gc_function_fails_the_invocation_and_counts_an_error_when_oxia_lost_its_state(
    storage: Storage, s3_config: S3Config, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    oxia_server: OxiaServer, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    check_namespace(storage)
    _delete_oxia_record(storage)
    set_env(monkeypatch, {**moto_s3_env(s3_config, storage.root),
                          "LLOG_OXIA_SERVICE_ADDRESS": oxia_server.address})  # fmt: skip
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    gc_app.reset()
    try:
        with pytest.raises(NamespaceMismatch):
            gc_app.handler({"source": "aws.scheduler", "detail": {}}, LocalContext("llog-gc"))
    finally:
        gc_app.reset()
    out = capsys.readouterr().out
    metrics = [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]
    assert [doc["GcErrors"] for doc in metrics if "GcErrors" in doc] == [[1.0]], out
    [refusal] = [r for r in caplog.records if r.getMessage().startswith("garbage collection refused")]
    assert refusal.levelname == "ERROR"
    assert getattr(refusal, "error_type", None) == "NamespaceMismatch"
    assert "llog adopt-namespace" in refusal.getMessage()


def _lose_oxia_during_the_run(storage: Storage, topic: str) -> None:
    """Oxia's state goes while GC reads references: the identity and every key of the partition."""
    _delete_oxia_record(storage)
    keys = PartitionKeys(topic, 0, storage.root)
    for start, end in keys.oxia_ranges:
        storage.oxia.delete_range(start, end, partition_key=keys.partition_key)


def test_gc_checks_the_namespace_again_before_deleting_wal_blobs(
    storage: Storage, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Oxia lost after the run's first check: its lookups find no partition, which reads as "no reference";
    the check before the deletes stops the run with every WAL blob still there."""
    _compacted_log(storage, topic)
    check_namespace(storage)
    blobs = _wal_blobs(storage)
    references = GarbageCollector._references
    lost: list[bool] = []

    def losing_oxia_first(self: GarbageCollector, pid: PartitionId, cache: dict[PartitionId, set[str]]) -> set[str]:
        if not lost:
            lost.append(True)
            _lose_oxia_during_the_run(storage, topic)
        return references(self, pid, cache)

    monkeypatch.setattr(GarbageCollector, "_references", losing_oxia_first)
    with pytest.raises(NamespaceMismatch, match="stopped before deleting"):
        GarbageCollector(_late(storage)).collect()
    assert lost
    assert _wal_blobs(storage) == blobs


def test_gc_checks_the_namespace_again_before_deleting_compacted_objects(
    storage: Storage, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _compacted_log(storage, topic)
    check_namespace(storage)
    compacted = sorted(o.key for o in storage.blobs.list(storage.bucket, PartitionKeys(topic, 0, storage.root)
                                                          .compacted_prefix))  # fmt: skip
    assert len(compacted) == 1

    def judged_unreferenced_as_oxia_goes(self: GarbageCollector, index: object, location: S3Location) -> bool:
        _delete_oxia_record(storage)  # the index read a moment ago came from an Oxia that is now gone
        return False

    monkeypatch.setattr(GarbageCollector, "collect_wal", lambda self, *args, **kwargs: None)
    monkeypatch.setattr(GarbageCollector, "_compacted_referenced", judged_unreferenced_as_oxia_goes)
    with pytest.raises(NamespaceMismatch, match="stopped before deleting"):
        GarbageCollector(_late(storage)).collect()
    assert sorted(o.key for o in storage.blobs.list(storage.bucket, PartitionKeys(topic, 0, storage.root)
                                                    .compacted_prefix)) == compacted  # fmt: skip
