"""The three Lambda handlers on events/ samples, with S3 (moto) and without a reachable Oxia.

Everything here runs without an Oxia server: request validation (400, 404,
405, 413 with JSON error bodies; nothing written), and an unreachable Oxia
(``LLOG_OXIA_SERVICE_ADDRESS`` at a closed loopback port) answered with
per-partition ``OxiaUnavailable`` or 503, never a 500.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from functions.admin import app as admin_app
from functions.common import names
from functions.consume import app as consume_app
from functions.produce import app as produce_app
from llog.config import LAMBDA_PAYLOAD_LIMIT
from tests.functions.conftest import EVENTS, Env, invoke, load_event

ROOT = Path(__file__).resolve().parents[2]

EXAMPLE_PRODUCE = {
    "topic_partitions": [
        {"topic": "orders", "partition": 0, "records": ["alpha", "beta"]},
        {"topic": "orders", "partition": 1, "records": [{"base64": "AAE="}]},
    ]
}


def assert_error(answer, status: int, error_type: str) -> None:
    assert answer.status == status, answer.body
    assert set(answer.body) == {"error", "error_type", "retriable"}
    assert answer.body["error_type"] == error_type
    assert isinstance(answer.body["error"], str)
    assert answer.body["error"]


# --- the events/ samples -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "function", "status", "error_type"),
    [
        ("produce_invalid_json", "produce", 400, "InvalidRequest"),
        ("produce_empty_topic_partitions", "produce", 400, "InvalidRequest"),
        ("produce_invalid_partition", "produce", 400, "InvalidRequest"),
        ("produce_invalid_topic", "produce", 400, "InvalidTopicName"),
        ("produce_invalid_base64", "produce", 400, "InvalidRequest"),
        ("produce_empty_records", "produce", 400, "InvalidRequest"),
        ("produce_wrong_method", "produce", 405, "MethodNotAllowed"),
        ("consume_invalid_fetch_offset", "consume", 400, "InvalidRequest"),
        ("consume_max_wait_too_long", "consume", 400, "LimitExceeded"),
        ("partition_status_invalid_partition", "admin", 400, "InvalidPartition"),
        ("unknown_path", "admin", 404, "NotFound"),
    ],
)
def test_invalid_sample_events_are_rejected_and_write_nothing(dead_oxia_env: Env, event, function, status, error_type):
    answer = invoke(function, load_event(event))

    assert_error(answer, status, error_type)
    assert answer.body["retriable"] is False
    assert dead_oxia_env.objects() == 0
    # Rejected before any storage client was even created.
    for module in (produce_app, consume_app, admin_app):
        assert module._service.peek() is None


def test_every_api_gateway_sample_event_has_the_rest_proxy_shape():
    events = {p.stem: json.loads(p.read_text()) for p in EVENTS.glob("*.json")}
    api = {name: event for name, event in events.items() if "httpMethod" in event}  # not SQS/EventBridge samples
    expected = {"produce", "consume", "health", "topics", "partition_status", "fence", "unfence", "unknown_path"}
    assert expected <= set(api)
    for name, event in sorted(api.items()):
        assert {
            "resource", "path", "httpMethod", "headers", "multiValueHeaders", "queryStringParameters",
            "pathParameters", "requestContext", "body", "isBase64Encoded",
        } <= set(event), name
        assert {"requestId", "stage", "identity", "resourcePath", "httpMethod"} <= set(event["requestContext"]), name
        assert event["requestContext"]["path"] == f"/{event['requestContext']['stage']}{event['path']}"
        if event["body"] is not None and not event["isBase64Encoded"] and name != "produce_invalid_json":
            json.loads(event["body"])


def test_the_example_produce_event_is_the_example_request():
    event = load_event("produce")
    assert json.loads(event["body"]) == EXAMPLE_PRODUCE
    assert json.loads(base64.b64decode(load_event("produce_base64_body")["body"])) == EXAMPLE_PRODUCE


# --- Oxia unreachable: clear per-partition errors or 503, never 500 ---------------------------


def test_produce_with_oxia_down_is_409_with_per_partition_oxia_unavailable(dead_oxia_env: Env):
    start = time.monotonic()
    answer = invoke("produce", load_event("produce"))

    assert answer.status == 409
    assert answer.body["success_count"] == 0
    assert answer.body["error_count"] == 2
    for result, (partition, count) in zip(answer.body["results"], [(0, 2), (1, 1)], strict=True):
        assert result["ok"] is False
        assert (result["topic"], result["partition"], result["count"]) == ("orders", partition, count)
        assert result["error_type"] == "OxiaUnavailable"
        assert result["retriable"] is True
        assert "start_offset" not in result
    assert dead_oxia_env.objects() == 0, "partitions could not be initialized: no blob was written"
    assert time.monotonic() - start < 5


def test_a_base64_encoded_body_is_decoded(dead_oxia_env: Env):
    answer = invoke("produce", load_event("produce_base64_body"))
    assert answer.status == 409
    assert [r["error_type"] for r in answer.body["results"]] == ["OxiaUnavailable", "OxiaUnavailable"]


def test_a_body_marked_base64_that_is_not_is_400(dead_oxia_env: Env):
    event = load_event("produce_base64_body")
    event["body"] = "{not base64}"
    assert_error(invoke("produce", event), 400, "InvalidRequest")


def test_consume_with_oxia_down_reports_each_partition(dead_oxia_env: Env):
    answer = invoke("consume", load_event("consume"))

    assert answer.status == 200
    assert [(r["partition"], r["ok"], r["error_type"], r["retriable"]) for r in answer.body["results"]] == [
        (0, False, "OxiaUnavailable", True),
        (1, False, "OxiaUnavailable", True),
    ]
    assert all(r["records"] == [] and r["high_watermark"] is None for r in answer.body["results"])


@pytest.mark.parametrize("event", ["topics", "partition_status", "fence", "unfence"])
def test_admin_routes_with_oxia_down_are_503(dead_oxia_env: Env, event):
    answer = invoke("admin", load_event(event))
    assert_error(answer, 503, "OxiaUnavailable")
    assert answer.body["retriable"] is True
    assert answer.headers["Retry-After"] == "1"


def test_health_answers_without_touching_storage(dead_oxia_env: Env):
    answer = invoke("admin", load_event("health"))

    assert answer.status == 200
    body = answer.body
    assert body["status"] == "ok"
    assert body["function_name"] == "llog-admin"
    assert body["broker_id"] == f"llog-admin/{body['instance_id']}"
    assert (body["host"], body["port"]) == (None, None)
    assert isinstance(body["started_at_ms"], int)
    assert body["started_at_ms"] <= time.time() * 1000
    assert admin_app._service.peek() is None


def test_a_later_request_retries_a_store_that_failed(dead_oxia_env: Env, monkeypatch):
    first = invoke("admin", load_event("topics"))
    time.sleep(0.35)  # past LLOG_OXIA_CONNECT_TIMEOUT_MS: the next call tries to connect again
    second = invoke("admin", load_event("topics"))
    assert (first.status, second.status) == (503, 503)
    assert "failing fast" not in second.body["error"]
    service = admin_app._service.peek()
    assert service is not None
    # The topic listing's first read: the scan of the topic records (each registry entry is then judged by
    # the id its topic's record names).
    assert service.oxia.counters.snapshot()["range_scan"].errors == 2


# --- 404 / 405 / 413 ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("function", "method", "path", "allow"),
    [
        ("produce", "GET", "/produce", "POST"),
        ("produce", "PUT", "/produce", "POST"),
        ("consume", "DELETE", "/consume", "POST"),
        ("admin", "POST", "/health", "GET"),
        ("admin", "DELETE", "/topics", "GET, POST"),
        ("admin", "PUT", "/topics/orders/partitions/0", "GET"),
        ("admin", "GET", "/topics/orders/partitions/0/fence", "POST"),
        ("admin", "GET", "/topics/orders/partitions/0/unfence", "POST"),
        # Behind the HTTP API a route's other methods reach the admin function (infra/http_api.py).
        ("admin", "GET", "/produce", "POST"),
        ("admin", "PUT", "/groups/g/join", "POST"),
    ],
)
def test_wrong_method_is_405_with_allow(dead_oxia_env: Env, function, method, path, allow):
    event = load_event("health", path=path)
    event["httpMethod"] = method
    answer = invoke(function, event)
    assert_error(answer, 405, "MethodNotAllowed")
    assert answer.headers["Allow"] == allow


@pytest.mark.parametrize("function", ["produce", "consume", "admin"])
@pytest.mark.parametrize("path", ["/", "/nope", "/produce/extra", "/topics/orders/x", "/topics/a/partitions/0/x"])
def test_unknown_paths_are_404_json_on_every_function(dead_oxia_env: Env, function, path):
    answer = invoke(function, load_event("unknown_path", path=path))
    assert_error(answer, 404, "NotFound")
    assert path in answer.body["error"]


def test_a_body_over_the_lambda_payload_limit_is_413(dead_oxia_env: Env):
    records = ["x" * 1000] * (LAMBDA_PAYLOAD_LIMIT // 1000 + 1)
    body = json.dumps({"topic_partitions": [{"topic": "orders", "partition": 0, "records": records}]})
    assert len(body) > LAMBDA_PAYLOAD_LIMIT
    answer = invoke("produce", load_event("produce", raw_body=body))
    assert_error(answer, 413, "PayloadTooLarge")
    assert dead_oxia_env.objects() == 0


def test_the_request_limit_follows_its_variable(dead_oxia_env: Env, monkeypatch):
    monkeypatch.setenv("LLOG_MAX_REQUEST_BYTES", "64")
    answer = invoke("consume", load_event("consume"))
    assert_error(answer, 413, "PayloadTooLarge")
    assert "64 bytes" in answer.body["error"]


@pytest.mark.parametrize(
    ("body", "error_type"),
    [
        ({"topic_partitions": [{"topic": "orders", "partition": 0, "records": ["a"]}] * 101}, "LimitExceeded"),
        ({"topic_partitions": [{"topic": "", "partition": 0, "records": ["a"]}]}, "InvalidTopicName"),
        ({"topic_partitions": [{"topic": "..", "partition": 0, "records": ["a"]}]}, "InvalidTopicName"),
        ({"topic_partitions": [{"topic": "orders", "partition": 2**31, "records": ["a"]}]}, "InvalidPartition"),
        ({"topic_partitions": [{"topic": "orders", "partition": True, "records": ["a"]}]}, "InvalidRequest"),
        ({"topic_partitions": [{"topic": "orders", "partition": 0, "records": [{"value": "a", "x": 1}]}]},
         "InvalidRequest"),
        ({"topic_partitions": [{"topic": "t", "partition": 0, "records": [{"value": "a", "timestamp_ms": 2**64}]}]},
         "InvalidRequest"),
        ([1, 2], "InvalidRequest"),
        ({"topic_partitions": [{"topic": "or\x00ders", "partition": 0, "records": ["a"]}]}, "InvalidTopicName"),
        ({"topic_partitions": [{"topic": "or\nders", "partition": 0, "records": ["a"]}]}, "InvalidTopicName"),
        ({"topic_partitions": [{"topic": "a/b", "partition": 0, "records": ["a"]}]}, "InvalidTopicName"),
        ({"topic_partitions": [{"topic": "x" * 250, "partition": 0, "records": ["a"]}]}, "InvalidTopicName"),
        ({"topic_partitions": [{"topic": "orders", "partition": -1, "records": ["a"]}]}, "InvalidRequest"),
        ({"topic_partitions": [{"topic": "orders", "partition": 1.5, "records": ["a"]}]}, "InvalidRequest"),
        ({"topic_partitions": [{"topic": "orders", "partition": 0, "records": []}]}, "InvalidRequest"),
    ],
)
def test_produce_validation_rules_through_the_handler(dead_oxia_env: Env, body, error_type):
    assert_error(invoke("produce", load_event("produce", body=body)), 400, error_type)
    assert produce_app._service.peek() is None
    assert dead_oxia_env.objects() == 0


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "[" * 50_000,
        '{"topic_partitions": [{"topic": "orders", "partition": ' + "9" * 5000 + ', "records": ["a"]}]}',
        '{"topic_partitions": [{"topic": "orders", "partition": 0, "records": ["\ud800"]}]}',
        '{"topic_partitions": [{"topic": "orders", "partition": 0, "records": ["\\ud800"]}]}',
        "\x00",
    ],
)
def test_hostile_bodies_are_400_not_500(dead_oxia_env: Env, raw):
    assert_error(invoke("produce", load_event("produce", raw_body=raw)), 400, "InvalidRequest")
    assert_error(invoke("consume", load_event("consume", raw_body=raw)), 400, "InvalidRequest")


def test_a_header_name_that_is_not_unicode_is_400_and_writes_nothing(dead_oxia_env: Env):
    record = '{"value": "v", "headers": {"\\ud800": "x"}}'
    body = '{"topic_partitions": [{"topic": "orders", "partition": 0, "records": [' + record + "]}]}"
    answer = invoke("produce", load_event("produce", raw_body=body))
    assert_error(answer, 400, "InvalidRequest")
    assert dead_oxia_env.objects() == 0


@pytest.mark.parametrize(
    ("body", "error_type"),
    [
        ({"topic_partitions": [{"topic": "orders", "partition": 0, "fetch_offset": 1}] * 2}, "InvalidRequest"),
        ({"topic_partitions": [{"topic": "orders", "partition": 0, "fetch_offset": 1}], "max_wait_ms": -1},
         "InvalidRequest"),
        ({"topic_partitions": [{"topic": "orders", "partition": 0, "fetch_offset": 1, "partition_max_bytes": 0}]},
         "InvalidRequest"),
        ({"topic_partitions": []}, "InvalidRequest"),
        ({"topic_partitions": [{"topic": "a/b", "partition": 0, "fetch_offset": 1}]}, "InvalidTopicName"),
        ({"topic_partitions": [{"topic": "\x1b[31m", "partition": 0, "fetch_offset": 1}]}, "InvalidTopicName"),
        ({"topic_partitions": [{"topic": "orders", "partition": -1, "fetch_offset": 1}]}, "InvalidRequest"),
        ({"topic_partitions": [{"topic": "orders", "partition": 0, "fetch_offset": -1}]}, "InvalidRequest"),
        ({"topic_partitions": [{"topic": "orders", "partition": 0, "fetch_offset": 2**64}]}, "InvalidRequest"),
        ({"topic_partitions": [{"topic": "orders", "partition": 0, "fetch_offset": "1"}]}, "InvalidRequest"),
    ],
)
def test_consume_validation_rules_through_the_handler(dead_oxia_env: Env, body, error_type):
    assert_error(invoke("consume", load_event("consume", body=body)), 400, error_type)
    assert consume_app._service.peek() is None


@pytest.mark.parametrize(
    "item",
    [
        {"topic": "orders", "partition": 0},
        {"topic": "orders", "partition": 0, "timestamp_ms": "yesterday"},
        {"topic": "orders", "partition": 0, "timestamp_ms": -1},
        {"topic": "orders", "partition": 0, "timestamp_ms": 1.5},
        {"topic": "orders", "partition": 0, "timestamp_ms": True},
        {"topic": "orders", "partition": 0, "timestamp_ms": 1, "fetch_offset": 1},
        {"topic": "orders", "partition": -1, "timestamp_ms": 1},
    ],
)
def test_offsets_validation_rules_through_the_handler(dead_oxia_env: Env, item):
    answer = invoke("consume", load_event("offsets", body={"topic_partitions": [item]}))
    assert_error(answer, 400, "InvalidRequest")
    assert consume_app._service.peek() is None


@pytest.mark.parametrize(
    ("path", "error_type"),
    [
        ("/topics/wal-shared/partitions/0", "InvalidTopicName"),
        ("/topics/a%2Fb/partitions/0", "InvalidTopicName"),
        ("/topics/%2E%2E/partitions/0", "InvalidTopicName"),
        ("/topics/orders/partitions/2147483648", "InvalidPartition"),
        ("/topics/orders/partitions/99999999999999999999", "InvalidPartition"),
        ("/topics/orders/partitions/+1", "InvalidPartition"),
        ("/topics/orders/partitions/1.0", "InvalidPartition"),
        ("/topics/orders/partitions/0x1", "InvalidPartition"),
    ],
)
def test_admin_path_parameters_are_validated(dead_oxia_env: Env, path, error_type):
    answer = invoke("admin", load_event("partition_status", path=path))
    assert_error(answer, 400, error_type)
    fence = load_event("fence", path=f"{path}/fence")
    assert_error(invoke("admin", fence), 400, error_type)
    assert admin_app._service.peek() is None


# --- configuration, lifecycle, injection ----------------------------------------------------------


def test_missing_configuration_is_a_500_naming_the_variable_and_is_retried(dead_oxia_env: Env, monkeypatch):
    address = os.environ["LLOG_OXIA_SERVICE_ADDRESS"]
    monkeypatch.delenv("LLOG_OXIA_SERVICE_ADDRESS")
    answer = invoke("produce", load_event("produce"))
    assert_error(answer, 500, "ConfigurationError")
    assert "LLOG_OXIA_SERVICE_ADDRESS" in answer.body["error"]
    assert produce_app._service.peek() is None  # a failed creation is not cached

    monkeypatch.setenv("LLOG_OXIA_SERVICE_ADDRESS", address)
    assert invoke("produce", load_event("produce")).status == 409  # now created; Oxia is just down


def test_services_are_created_once_per_environment(dead_oxia_env: Env):
    invoke("produce", load_event("produce"))
    service = produce_app._service.peek()
    assert service is not None
    invoke("produce", load_event("produce"))
    assert produce_app._service.peek() is service


def test_the_consume_function_keeps_compacted_objects_and_no_tail(dead_oxia_env: Env, monkeypatch):
    monkeypatch.setenv("LLOG_CONSUME_OBJECT_CACHE_BYTES", "1048576")
    invoke("consume", load_event("consume"))
    service = consume_app._service.peek()
    assert service is not None
    assert service.tail_cache is None  # it never sees the produce function's appends
    assert service.object_cache is not None
    assert service.object_cache.max_bytes == 1048576


def test_an_injected_service_is_used_and_not_closed_by_reset(dead_oxia_env: Env):
    closed = []

    class Recording:
        def produce_groups(self, entries):
            from llog.protocol.append import AppendResult

            groups = list(entries)
            return groups, [AppendResult(g.topic, g.partition, len(g.records), 1, len(g.records), "k", "s3://b/k")
                            for g in groups]

        def close(self):
            closed.append(True)

    produce_app.set_service(Recording())  # type: ignore[arg-type]
    answer = invoke("produce", load_event("produce"))
    assert answer.status == 200
    assert [r["end_offset"] for r in answer.body["results"]] == [2, 1]
    produce_app.reset()
    assert closed == []


def test_concurrent_invocations_do_not_mix_requests(dead_oxia_env: Env):
    """llog serve calls handlers from many threads: each must answer its own request."""
    cases = [
        (load_event("produce_invalid_partition"), "topic_partitions[0].partition"),
        (load_event("produce_invalid_base64"), "base64 is not valid"),
        (load_event("produce_invalid_topic"), "orders/../audit"),
        (load_event("produce_empty_records"), "records: expected `array` of length >= 1"),
    ]
    failures: list[str] = []

    def worker(event, expected: str) -> None:
        for _ in range(25):
            answer = invoke("produce", event)
            if answer.status != 400 or expected not in answer.body["error"]:
                failures.append(f"{expected!r} -> {answer.status} {answer.body}")

    threads = [threading.Thread(target=worker, args=case) for case in cases for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert failures == []


def test_emf_metrics_are_emitted_per_invocation(dead_oxia_env: Env, capsys, monkeypatch):
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    capsys.readouterr()
    invoke("produce", load_event("produce"))
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    documents = {m["Name"]: doc for doc in lines for d in doc["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}
    assert {"Latency", "RecordsProduced", "BytesProduced", "Errors"} <= set(documents)
    assert all(d["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "llog" for d in lines)
    assert documents["Latency"]["service"] == "produce"
    assert documents["RecordsProduced"]["RecordsProduced"] in (0.0, [0.0])
    assert documents["Errors"]["error_type"] == "OxiaUnavailable"
    assert documents["Errors"]["Errors"] in (2.0, [2.0])


def test_the_correlation_id_is_the_api_gateway_request_id(dead_oxia_env: Env, caplog):
    event = load_event("produce_invalid_json")
    answer = invoke("produce", event)
    request_id = event["requestContext"]["requestId"]
    assert answer.headers["X-Request-Id"] == request_id
    (record,) = [r for r in caplog.records if r.name == "produce"]
    entry = json.loads(produce_app.telemetry.logger.registered_formatter.format(record))
    assert (entry["correlation_id"], entry["service"], entry["error_type"]) == (request_id, "produce", "InvalidRequest")


# --- cold start ---------------------------------------------------------------------------------------


# What a handler's import (the Lambda init phase) leaves for the first request that needs it.
STORAGE_MODULES = ("oxia", "grpc", "llog.store.oxia", "boto3", "s3transfer", "botocore.session", "botocore.client")
TRACING_MODULES = ("aws_xray_sdk", "aws_xray_sdk.core")


def loaded_modules(code: str, *, lambda_env: bool) -> set[str]:
    """The modules of STORAGE_MODULES and TRACING_MODULES loaded after ``code`` ran in a fresh interpreter.

    ``lambda_env``: as in Lambda (``LAMBDA_TASK_ROOT`` set, so Powertools traces); else as in tests and
    ``llog serve``. No ``LLOG_*`` or ``AWS_*`` configuration either way.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLOG_", "AWS_", "LAMBDA_", "POWERTOOLS_"))}
    if lambda_env:
        env.update(LAMBDA_TASK_ROOT=str(ROOT), AWS_LAMBDA_FUNCTION_NAME="llog-admin", AWS_REGION="us-east-1")
    modules = STORAGE_MODULES + TRACING_MODULES
    probe = f"{code}\nimport sys\nprint('loaded:', *(m for m in {modules!r} if m in sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    return set(result.stdout.splitlines()[-1].split()[1:])  # after the EMF lines of an invocation


@pytest.mark.parametrize("lambda_env", [False, True], ids=["local", "lambda"])
def test_importing_a_handler_creates_no_service_and_loads_no_client_library(lambda_env: bool):
    """Import (the Lambda init phase) reads no configuration, touches no network and loads neither
    the storage clients' modules nor the X-Ray SDK: the first request that needs them does."""
    handlers = ", ".join(f"functions.{name}.app" for name in names.FUNCTIONS)
    code = (
        f"import {handlers}\n"
        "import functions.produce.app as p, functions.consume.app as c, functions.admin.app as a\n"
        "assert p._service.peek() is None and c._service.peek() is None and a._service.peek() is None"
    )
    assert loaded_modules(code, lambda_env=lambda_env) == set()


@pytest.mark.parametrize("lambda_env", [False, True], ids=["local", "lambda"])
def test_the_first_invocation_creates_the_tracer_in_lambda_only_and_health_needs_no_storage(lambda_env: bool):
    code = (
        "import json\n"
        "import functions.admin.app as a\n"
        "from functions.common.telemetry import LocalContext\n"
        f"event = json.load(open({str(EVENTS / 'health.json')!r}))\n"
        "assert a.handler(event, LocalContext('llog-admin'))['statusCode'] == 200"
    )
    loaded = loaded_modules(code, lambda_env=lambda_env)
    assert loaded.isdisjoint(("oxia", "grpc", "llog.store.oxia", "boto3", "s3transfer", "botocore.session"))
    # In Lambda the Tracer loads the X-Ray SDK, which patches botocore (botocore.client) to trace S3 and SQS calls.
    assert loaded == ({*TRACING_MODULES, "botocore.client"} if lambda_env else set())


# --- the invoke runner ------------------------------------------------------------------------------


def test_the_invoke_runner_prints_the_response(dead_oxia_env: Env, capsys):
    from devserver import invoke as runner

    assert runner.main(["produce", str(EVENTS / "produce_invalid_partition.json")]) == 0
    out = capsys.readouterr().out
    printed = json.loads(out[out.index('{\n  "statusCode"'):])
    assert printed["statusCode"] == 400
    assert printed["body"]["error_type"] == "InvalidRequest"
    assert printed["headers"]["Content-Type"] == "application/json"


def test_llog_invoke_runs_a_handler_on_an_event_file(dead_oxia_env: Env, capsys):
    from llog.cli import main

    assert main(["invoke", "admin", str(EVENTS / "unknown_path.json")]) == 0
    out = capsys.readouterr().out
    assert json.loads(out[out.index('{\n  "statusCode"'):])["statusCode"] == 404


def test_the_invoke_runner_rejects_a_missing_event_file(dead_oxia_env: Env, tmp_path):
    from devserver import invoke as runner

    assert runner.main(["admin", str(tmp_path / "missing.json")]) == 2


def test_local_stack_defaults_only_fill_unset_variables():
    from devserver.invoke import LOCAL_STACK, apply_local_defaults

    env = {"LLOG_S3_BUCKET": "mine", "LLOG_OXIA_SERVICE_ADDRESS": ""}
    applied = apply_local_defaults(env)
    assert env["LLOG_S3_BUCKET"] == "mine"
    assert env["LLOG_OXIA_SERVICE_ADDRESS"] == LOCAL_STACK["LLOG_OXIA_SERVICE_ADDRESS"]
    assert "LLOG_S3_BUCKET" not in applied
