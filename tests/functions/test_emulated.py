"""Every llog function, built as ``cdk synth`` builds it, runs under AWS's Lambda Runtime Interface Emulator.

Each function is started once (``emulated``) from the dev stack's synthesized template and cdk.out
(devserver/emulator.py says how, and what differs from Lambda), against the session's real Oxia and moto (S3,
the compaction queue, the KMS key of the Kinesis API's access keys), and invoked through the emulator's invoke
endpoint with what its trigger sends: API Gateway's proxy events (events/), sent to the function the template's
REST API routes them to, for every route the template has (each method with its events/ sample, each ``ANY``
with ``PUT``); EventBridge Scheduler's event for each schedule the template has; and SQS's batch of the
messages the planner really enqueued. Each function's cold start (the emulator's start of the runtime and
the handler module's import, as built) is reported at the end of the run.

Without the emulator or the runtime (``make setup``) these are skipped; ``LLOG_REQUIRE_RIE=1`` (CI) makes
that a failure. Marked ``bundling``: the layer is built with pip, as ``cdk synth`` builds it.
"""

from __future__ import annotations

import base64
import copy
import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import cbor2
import pytest

from devserver.emulator import (
    LOCAL_SERVICES,
    EmulatedFunction,
    FunctionError,
    FunctionTemplate,
    Synthesized,
    find_rie,
    find_runtime_python,
    function_environment,
    function_templates,
    lay_out,
    local_endpoints,
)
from devserver.lambda_front import RestApi
from functions.common import names
from functions.common.routes import KINESIS_PATH
from llog.api.kinesis import wire
from llog.config import S3Config
from tests.conftest import BUCKET, OxiaServer
from tests.functions.conftest import COLD_STARTS, runtime

pytestmark = pytest.mark.bundling

EVENTS = Path(__file__).resolve().parents[2] / "events"


def load_event(name: str, *, topic: str | None = None) -> dict[str, Any]:
    """An event of events/; with ``topic``, its body's topic ``orders`` renamed (each test has its own)."""
    event: dict[str, Any] = copy.deepcopy(json.loads((EVENTS / f"{name}.json").read_text()))
    if topic is not None:
        event["body"] = event["body"].replace('"orders"', json.dumps(topic))
    return event


def new_topic() -> str:
    return f"rie-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def queue_url(s3_config: S3Config) -> str:
    """The compaction queue, in the session's moto (which serves SQS too)."""
    sqs = boto3.client("sqs", endpoint_url=s3_config.endpoint_url, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    url: str = sqs.create_queue(QueueName=f"llog-rie-compaction-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    return url


@pytest.fixture(scope="session")
def emulated(
    synthesized: Synthesized,
    oxia_server: OxiaServer,
    s3_config: S3Config,
    queue_url: str,
    kms_key_arn: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, EmulatedFunction]]:
    """All the functions under the emulator, started once per session, sharing one root prefix."""
    rie, python = runtime(find_rie), runtime(find_runtime_python)
    specs = function_templates(synthesized.template, synthesized.outdir)
    assert sorted(specs) == sorted(names.FUNCTIONS)
    lambda_root = tmp_path_factory.mktemp("lambda")
    opt, tasks = lay_out(synthesized.layer_asset, specs, lambda_root)
    assert s3_config.endpoint_url is not None
    local = {
        "LLOG_OXIA_SERVICE_ADDRESS": oxia_server.address,
        "LLOG_S3_BUCKET": BUCKET,
        "LLOG_ROOT_PREFIX": f"rie-{uuid.uuid4().hex[:12]}",
        "LLOG_COMPACTION_QUEUE_URL": queue_url,
        "LLOG_KEYS_KMS_KEY_ID": kms_key_arn,
        "LLOG_KINESIS_ACCOUNT_ID": "123456789012",
    }
    # On AWS: the execution role's credentials, the region's endpoints, the VPC's Oxia.
    endpoints = local_endpoints(s3_config.endpoint_url, "us-east-1", "testing", "testing")
    started: dict[str, EmulatedFunction] = {}
    try:
        for name, spec in specs.items():
            environment = {**function_environment(spec, local), **endpoints}
            function = EmulatedFunction(spec, rie=rie, python=python, task_root=tasks[name], opt=opt,
                                        environment=environment, log=lambda_root / f"{name}.log")  # fmt: skip
            function.start()
            started[name] = function
        yield started
    finally:
        for function in started.values():
            function.stop()
            if function.cold_start is not None:
                COLD_STARTS[function.spec.name] = (function.cold_start.seconds, function.init_duration_ms())


def api_call(emulated: dict[str, EmulatedFunction], template: dict[str, Any], event: dict[str, Any]) -> Any:
    """Invoke the function the template's REST API routes ``event`` to (its method and resource); the answer."""
    methods = RestApi(template).methods
    route = (event["httpMethod"], event["resource"])
    method = methods.get(route) or methods.get(("ANY", event["resource"]))
    assert method is not None, f"the template routes no function for {route}: {sorted(methods)}"
    (function,) = [f for f in emulated.values() if f.spec.logical_id == method.function]
    event["requestContext"]["requestId"] = str(uuid.uuid4())
    response = function.invoke(event)
    raw = base64.b64decode(response["body"]) if response.get("isBase64Encoded") else response["body"].encode()
    if (response.get("headers") or {}).get("Content-Type") == wire.CBOR_CONTENT_TYPE:  # the Kinesis API's
        return response["statusCode"], cbor2.loads(raw), function.spec.name
    return response["statusCode"], json.loads(raw), function.spec.name


def schedule_events(template: dict[str, Any], spec: FunctionTemplate) -> list[dict[str, Any]]:
    """What EventBridge Scheduler sends ``spec``'s function, one event per schedule of the template: the input a
    schedule names (GC's WAL schedule), else the scheduler's own event (events/)."""
    schedules = [
        r["Properties"] for r in template["Resources"].values()
        if r["Type"] == "AWS::Scheduler::Schedule" and spec.logical_id in json.dumps(r["Properties"]["Target"])
    ]  # fmt: skip
    assert schedules, f"no schedule invokes {spec.name}"
    events = []
    for schedule in schedules:
        if "Input" in schedule["Target"]:
            events.append(json.loads(schedule["Target"]["Input"]))
            continue
        event = load_event("compaction_schedule")
        event["id"] = str(uuid.uuid4())
        event["resources"] = [f"arn:aws:scheduler:us-east-1:123456789012:schedule/default/{spec.logical_id}"]
        events.append(event)
    return events


def test_produce_then_consume_through_the_api_routes(
    emulated: dict[str, EmulatedFunction], synthesized: Synthesized
) -> None:
    template, topic = synthesized.template, new_topic()
    status, body, function = api_call(emulated, template, load_event("produce", topic=topic))
    assert (status, function) == (200, names.PRODUCE), body
    assert (body["success_count"], body["error_count"]) == (2, 0), body
    status, body, function = api_call(emulated, template, load_event("consume", topic=topic))
    assert (status, function) == (200, names.CONSUME), body
    p0, p1 = body["results"]
    assert [r["value"] for r in p0["records"]] == ["alpha", "beta"]
    assert (p0["high_watermark"], p0["next_fetch_offset"], p0["ok"]) == (2, 3, True)
    assert [r["value"] for r in p1["records"]] == [{"base64": "AAE="}]


def route_events() -> dict[tuple[str, str], list[str]]:
    """The API Gateway events of events/ by (method, resource)."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(EVENTS.glob("*.json")):
        event = json.loads(path.read_text())
        if "httpMethod" in event:
            found.setdefault((event["httpMethod"], event["resource"]), []).append(path.stem)
    return found


def test_every_route_of_the_template_answers_through_its_function(
    emulated: dict[str, EmulatedFunction], synthesized: Synthesized
) -> None:
    """Each method the REST API routes to a function, with the events/ event of that route; ANY with PUT."""
    template, samples = synthesized.template, route_events()
    routes = RestApi(template).methods
    methods = sorted(route for route in routes if route[0] != "ANY")
    assert not [route for route in methods if route not in samples], "a route without an event in events/"
    status, body, _ = api_call(emulated, template, load_event("produce"))  # the topic the samples name
    assert status == 200, body
    for route in methods:
        for sample in samples[route]:
            status, body, _ = api_call(emulated, template, load_event(sample))
            assert status < 500, (sample, status, body)
            assert isinstance(body, dict), (sample, body)
    for resource in sorted(resource for method, resource in routes if method == "ANY"):
        concrete = [name for (_, r), names_ in samples.items() if r == resource for name in names_]
        event = load_event(concrete[0] if concrete else "unknown_path")
        event["httpMethod"], event["requestContext"]["httpMethod"] = "PUT", "PUT"
        if not concrete:
            event["resource"] = resource
        status, body, _ = api_call(emulated, template, event)
        if resource == KINESIS_PATH:  # one path, every operation a POST: Kinesis's own answer to the others
            assert (status, body["__type"]) == (400, "UnknownOperationException"), body
        else:
            assert status in (404, 405), (resource, status, body)


def test_admin_answers_health_and_topics(emulated: dict[str, EmulatedFunction], synthesized: Synthesized) -> None:
    template = synthesized.template
    status, body, function = api_call(emulated, template, load_event("health"))
    assert (status, function) == (200, names.ADMIN), body
    status, body, function = api_call(emulated, template, load_event("topics"))
    assert (status, function) == (200, names.ADMIN), body


def test_the_scheduled_planner_enqueues_and_the_worker_compacts_what_sqs_delivers(
    emulated: dict[str, EmulatedFunction],
    synthesized: Synthesized,
    s3_config: S3Config,
    queue_url: str,
) -> None:
    template = synthesized.template
    status, body, _ = api_call(emulated, template, load_event("produce", topic=new_topic()))
    assert status == 200, body
    planner = emulated[names.COMPACTION_PLANNER]
    (event,) = schedule_events(template, planner.spec)
    planned = planner.invoke(event)
    assert planned["enqueued"] >= 1, planned
    sqs = boto3.client("sqs", endpoint_url=s3_config.endpoint_url, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    worker = emulated[names.COMPACTION_WORKER]
    delivered = 0
    while messages := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=1).get("Messages", []):
        (message,) = messages  # the event source mapping's BatchSize is 1
        event = load_event("compaction_task")
        record = event["Records"][0]
        record.update(messageId=message["MessageId"], receiptHandle=message["ReceiptHandle"],
                      body=message["Body"], md5OfBody=message["MD5OfBody"], eventSourceARN=arn)  # fmt: skip
        answer = worker.invoke(event)
        assert answer == {"batchItemFailures": []}, answer
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        delivered += 1
    assert delivered == planned["enqueued"]


@pytest.mark.parametrize("name", [names.GC, names.VERIFY, names.BACKUP])
def test_each_scheduled_function_runs_on_its_schedule_event(
    emulated: dict[str, EmulatedFunction], synthesized: Synthesized, name: str
) -> None:
    function = emulated[name]
    events = schedule_events(synthesized.template, function.spec)
    assert len(events) == (2 if name == names.GC else 1)  # GC: hourly, and its WAL step alone
    for event in events:
        answer = function.invoke(event)
        assert isinstance(answer, dict), answer
        assert answer.get("errors", []) == [], answer
        if name == names.VERIFY:
            assert (answer["ok"], answer["problem_count"]) == (True, 0), answer


def test_a_layer_without_a_module_the_handler_imports_fails_the_cold_start(
    synthesized: Synthesized, tmp_path: Path
) -> None:
    """What the emulator catches that in-process tests cannot: the layer lacks Powertools, the handler's import."""
    rie, python = runtime(find_rie), runtime(find_runtime_python)
    spec = function_templates(synthesized.template, synthesized.outdir)[names.ADMIN]
    opt, tasks = lay_out(synthesized.layer_asset, {spec.name: spec}, tmp_path)
    shutil.rmtree(opt / "python" / "aws_lambda_powertools")
    environment = {"LLOG_OXIA_SERVICE_ADDRESS": "127.0.0.1:1"}  # never reached: the import fails first
    function = EmulatedFunction(spec, rie=rie, python=python, task_root=tasks[spec.name], opt=opt,
                                environment=environment, log=tmp_path / "admin.log")  # fmt: skip
    function.start()
    try:
        with pytest.raises(FunctionError, match="Runtime.ImportModuleError.*aws_lambda_powertools"):
            function.invoke(load_event("health"))
    finally:
        function.stop()


def test_a_template_variable_wired_to_a_resource_needs_a_local_stand_in(
    synthesized: Synthesized,
) -> None:
    spec = function_templates(synthesized.template, synthesized.outdir)[names.PRODUCE]
    assert isinstance(spec.environment["LLOG_S3_BUCKET"], dict)  # a Ref to the data bucket
    wired = FunctionTemplate(**{**vars(spec), "environment": {**spec.environment, "LLOG_NEW": {"Ref": "Queue"}}})
    with pytest.raises(ValueError, match="LLOG_NEW"):
        function_environment(wired, dict.fromkeys(LOCAL_SERVICES, "local"))
