"""The compaction planner, compaction worker and GC handlers, driven by their events/ samples."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from functions.common.telemetry import LocalContext
from functions.compaction_planner import app as planner_app
from functions.compaction_worker import app as worker_app
from functions.gc import app as gc_app
from llog.errors import ConfigurationError, OxiaUnavailable
from llog.protocol.append import LogWriter
from llog.protocol.gc import GarbageCollector
from llog.protocol.read import LogReader
from llog.store.queue import TaskQueue
from tests.conftest import BUCKET
from tests.functions.conftest import Env

EVENTS = Path(__file__).resolve().parents[2] / "events"


def event(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((EVENTS / f"{name}.json").read_text())
    return doc


def task_event(topic: str, partition: int) -> dict[str, Any]:
    doc = event("compaction_task")
    doc["Records"][0]["body"] = json.dumps({"topic": topic, "partition": partition, "lag": 1})
    return doc


@pytest.fixture(autouse=True)
def _fresh_environment() -> Iterator[None]:
    for module in (planner_app, worker_app, gc_app):
        module.reset()
    yield
    for module in (planner_app, worker_app, gc_app):
        module.reset()


@pytest.fixture
def queue_url(monkeypatch: pytest.MonkeyPatch, s3_env: Env) -> str:
    sqs = boto3.client("sqs", endpoint_url=s3_env.s3.endpoint_url, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    url: str = sqs.create_queue(QueueName=f"compaction-{s3_env.root}")["QueueUrl"]
    monkeypatch.setenv("LLOG_COMPACTION_QUEUE_URL", url)
    for name, value in {"AWS_ENDPOINT_URL_SQS": s3_env.s3.endpoint_url or "", "AWS_DEFAULT_REGION": "us-east-1",
                        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)
    return url


def emf_metrics(out: str) -> dict[str, tuple[str, str]]:
    """Metric name -> (namespace, service) of the EMF documents a handler printed."""
    found = {}
    for line in out.splitlines():
        if line.startswith('{"_aws"'):
            doc = json.loads(line)
            for directive in doc["_aws"]["CloudWatchMetrics"]:
                for metric in directive["Metrics"]:
                    found[metric["Name"]] = (directive["Namespace"], doc["service"])
    return found


def received(url: str, s3_env: Env) -> list[dict[str, Any]]:
    sqs = boto3.client("sqs", endpoint_url=s3_env.s3.endpoint_url, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"]) for m in messages]


# --- without Oxia ---------------------------------------------------------------------


def test_a_poison_message_is_reported_as_a_batch_item_failure(
    dead_oxia_env: Env, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    poison = event("compaction_task_poison")
    response = worker_app.handler(poison, LocalContext("llog-compaction-worker"))
    assert response == {"batchItemFailures": [{"itemIdentifier": poison["Records"][0]["messageId"]}]}
    assert emf_metrics(capsys.readouterr().out)["Latency"] == ("llog", "compaction_worker")


def test_a_task_with_oxia_down_fails_its_item_so_sqs_retries_it(dead_oxia_env: Env) -> None:
    task = event("compaction_task")
    response = worker_app.handler(task, LocalContext("llog-compaction-worker"))
    assert response["batchItemFailures"] == [{"itemIdentifier": task["Records"][0]["messageId"]}]


def test_the_planner_fails_loudly_with_oxia_down(dead_oxia_env: Env, queue_url: str) -> None:
    with pytest.raises(OxiaUnavailable):
        planner_app.handler(event("compaction_schedule"), LocalContext("llog-compaction-planner"))


def test_the_planner_needs_its_queue(dead_oxia_env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLOG_COMPACTION_QUEUE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="LLOG_COMPACTION_QUEUE_URL"):
        TaskQueue.from_env()


def test_the_task_queue_sends_in_batches_of_ten(dead_oxia_env: Env, queue_url: str) -> None:
    bodies = [json.dumps({"topic": "t", "partition": p, "lag": 1}) for p in range(23)]
    assert TaskQueue.from_env().send(bodies) == 23
    got: list[dict[str, Any]] = []
    for _ in range(10):
        got += received(queue_url, dead_oxia_env)
        if len(got) == 23:
            break
    assert sorted(m["partition"] for m in got) == list(range(23))


# --- with Oxia --------------------------------------------------------------------------


@pytest.mark.oxia
def test_planner_enqueues_and_worker_compacts(
    oxia_env: Env, queue_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    writer = LogWriter.from_env()
    topic = "orders"
    writer.initialize_partition(topic, 0)
    for i in range(3):
        writer.append(topic, 0, [f"r{i}".encode()])

    summary = planner_app.handler(event("compaction_schedule"), LocalContext("llog-compaction-planner"))
    assert summary["enqueued"] >= 1
    assert {"topic": topic, "partition": 0, "lag": 3} in received(queue_url, oxia_env)
    # infra/observability.py's compaction-lag alarm reads this metric of this service
    assert emf_metrics(capsys.readouterr().out)["MaxCompactionLag"] == ("llog", "compaction_planner")

    response = worker_app.handler(task_event(topic, 0), LocalContext("llog-compaction-worker"))
    assert response == {"batchItemFailures": []}
    claims = worker_app._claims.peek()
    assert claims is not None
    assert claims.root == oxia_env.root  # claims live under LLOG_ROOT_PREFIX too
    reader = LogReader.from_env()
    assert [r.value for r in reader.iter_from(topic, 0, 1)] == [b"r0", b"r1", b"r2"]
    assert reader.partition_info(topic, 0).high_watermark == 3
    assert emf_metrics(capsys.readouterr().out)["RecordsCompacted"] == ("llog", "compaction_worker")
    writer.close()
    reader.close()


@pytest.mark.oxia
def test_gc_handler_reports_what_it_did(
    oxia_env: Env, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    report = gc_app.handler(event("gc_schedule"), LocalContext("llog-gc"))
    assert set(report) >= {"wal_blobs_deleted", "compacted_deleted", "errors", "warnings", "wal_unreadable_kept",
                           "topics_reclaimed", "producers_expired"}  # fmt: skip
    emitted = emf_metrics(capsys.readouterr().out)
    for name in ("GcErrors", "TopicsReclaimed", "ProducersExpired"):
        assert emitted[name] == ("llog", "gc"), name
    assert BUCKET


GC_STEPS = ("reclaim_deleted_topics", "enforce_retention", "collect_wal", "collect_compacted", "expire_producers")


def recorded_steps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The GC steps a run goes through, in order (each still runs)."""
    steps: list[str] = []

    def recording(name: str) -> Any:
        step = getattr(GarbageCollector, name)

        def run(self: GarbageCollector, *args: Any, **kwargs: Any) -> Any:
            steps.append(name)
            return step(self, *args, **kwargs)

        return run

    for name in GC_STEPS:
        monkeypatch.setattr(GarbageCollector, name, recording(name))
    return steps


@pytest.mark.oxia
def test_the_frequent_gc_schedule_runs_the_wal_step_alone(
    oxia_env: Env, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    steps = recorded_steps(monkeypatch)
    gc_app.handler(event("gc_wal_schedule"), LocalContext("llog-gc"))
    assert steps == ["collect_wal"]
    assert {"WalBlobsSeen", "WalBlobsDeleted", "WalBlobsReferenced"} <= set(emf_metrics(capsys.readouterr().out))

    steps.clear()
    gc_app.handler(event("gc_schedule"), LocalContext("llog-gc"))
    assert steps == list(GC_STEPS)
