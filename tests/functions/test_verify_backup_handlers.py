"""The scheduled verify and backup handlers, driven by their events/ samples on a real Oxia server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from functions.backup import app as backup_app
from functions.common.telemetry import LocalContext
from functions.verify import app as verify_app
from llog.errors import NamespaceMismatch
from llog.format.keys import S3Location
from llog.format.kv.namespace import NamespaceKeys
from llog.protocol.append import LogWriter
from llog.protocol.backup import backup_ids
from llog.protocol.namespace import check_namespace
from llog.store.storage import Storage
from tests.conftest import BUCKET
from tests.functions.conftest import Env
from tests.functions.test_scheduled_handlers import emf_metrics

EVENTS = Path(__file__).resolve().parents[2] / "events"

pytestmark = pytest.mark.oxia

CONTEXT = LocalContext("llog-verify", timeout_ms=900_000)  # the deployed timeout: time for every partition


def event(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((EVENTS / f"{name}.json").read_text())
    return doc


def emf_values(out: str) -> dict[str, float]:
    """Metric name -> value of the EMF documents a handler printed."""
    found = {}
    for line in out.splitlines():
        if line.startswith('{"_aws"'):
            doc = json.loads(line)
            for directive in doc["_aws"]["CloudWatchMetrics"]:
                for metric in directive["Metrics"]:
                    value = doc[metric["Name"]]
                    found[metric["Name"]] = value[0] if isinstance(value, list) else value
    return found


@pytest.fixture(autouse=True)
def _fresh_environment() -> Iterator[None]:
    for module in (verify_app, backup_app):
        module.reset()
    yield
    for module in (verify_app, backup_app):
        module.reset()


@pytest.fixture
def records(oxia_env: Env, monkeypatch: pytest.MonkeyPatch) -> Iterator[LogWriter]:
    """Two partitions of ``orders`` with three records each; metrics printed as EMF."""
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    writer = LogWriter.from_env()
    for partition in (0, 1):
        writer.initialize_partition("orders", partition)
        writer.append("orders", partition, [b"a", b"b", b"c"])
    yield writer
    writer.close()


def test_verify_reports_no_problem_then_the_damaged_key(
    records: LogWriter, oxia_env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = verify_app.handler(event("verify_schedule"), CONTEXT)

    assert (summary["ok"], summary["partitions_verified"], summary["problem_count"]) == (True, 2, 0)
    out = capsys.readouterr().out
    # infra/observability.py's alarm reads VerifyProblems of this service
    assert emf_metrics(out)["VerifyProblems"] == ("llog", "verify")
    assert (emf_values(out)["VerifyProblems"], emf_values(out)["PartitionsVerified"]) == (0, 2)

    storage = Storage.from_env()
    blob = next(storage.blobs.list(BUCKET, f"{oxia_env.root}/wal-shared/")).key  # one partition's append
    storage.blobs.delete(BUCKET, [blob])
    storage.close()
    summary = verify_app.handler(event("verify_schedule"), CONTEXT)

    assert summary["ok"] is False
    assert {(p["kind"], p["key"]) for p in summary["problems"]} == {("object_missing", S3Location(BUCKET, blob).uri)}
    assert emf_values(capsys.readouterr().out)["VerifyProblems"] == 1


def test_backup_backs_up_every_partition(records: LogWriter, capsys: pytest.CaptureFixture[str]) -> None:
    summary = backup_app.handler(event("backup_schedule"), LocalContext("llog-backup"))

    assert summary["errors"] == []
    assert [(p["partition"], p["high_watermark"]) for p in summary["topics"]["orders"]] == [(0, 3), (1, 3)]
    out = capsys.readouterr().out
    assert emf_metrics(out)["BackupErrors"] == ("llog", "backup")
    assert (emf_values(out)["BackupCompleted"], emf_values(out)["PartitionsBackedUp"]) == (1, 2)


def test_backup_refuses_when_oxia_lost_its_state_and_counts_an_error(
    records: LogWriter, oxia_env: Env, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    storage = Storage.from_env()
    try:
        check_namespace(storage)
        keys = NamespaceKeys(storage.root)
        assert storage.oxia.delete(keys.record, partition_key=keys.partition_key)  # as if Oxia's data was lost
        with pytest.raises(NamespaceMismatch, match="No backup was written"):
            backup_app.handler(event("backup_schedule"), LocalContext("llog-backup"))
        assert backup_ids(storage) == []  # nothing written, nothing pruned
    finally:
        storage.close()
    assert emf_values(capsys.readouterr().out)["BackupErrors"] == 1
    [refusal] = [r for r in caplog.records if r.getMessage().startswith("backup refused")]
    assert refusal.levelname == "ERROR"
    assert getattr(refusal, "error_type", None) == "NamespaceMismatch"
