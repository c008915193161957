"""The dev stage's REST API in front of its functions under the emulator (devserver/lambda_front.py).

What ``LLOG_DEV_FRONT=lambda make dev`` serves on :8080, here on a free port: the routes, request models and
gateway responses of the synthesized template, in front of produce, consume and admin built as ``cdk synth``
builds them, against the session's real Oxia and moto. Requests come from the clients users run: curl with
the README's bodies, the Python client, and boto3's Kinesis client.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from devserver.devstack import free_port
from devserver.emulator import FunctionPool, Synthesized, find_rie, find_runtime_python, local_endpoints
from devserver.lambda_front import LambdaFront, RestApi, proxy_answer, proxy_event, start_front
from llog.config import S3Config
from llog.service.keys import AccessKeys, KeyPermissions
from llog.store.kms import KmsSealer
from llog.store.oxia import OxiaStore
from llog_client import Consumer, Producer
from llog_client.consumer import Record
from tests.conftest import BUCKET, OxiaServer
from tests.functions.conftest import runtime
from tests.integration.test_http_server import EXAMPLE_CONSUME, EXAMPLE_PRODUCE
from tests.integration.test_kinesis_sdk_java import CLASSPATH as JAVA_CLASSPATH
from tests.integration.test_smoke import STEPS, run_smoke
from tests.kinesis_sdks import JAVA_PROJECT, JS_PROJECT, KinesisEndpoint, require_sdk, run_check, stream_name

pytestmark = pytest.mark.bundling
KINESIS_ACCOUNT = "123456789012"


@pytest.fixture(scope="module")
def front_root() -> str:
    return f"front-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def front(
    synthesized: Synthesized, oxia_server: OxiaServer, s3_config: S3Config, kms_key_arn: str, front_root: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LambdaFront]:  # fmt: skip
    runtime(find_rie), runtime(find_runtime_python)
    assert s3_config.endpoint_url is not None
    local = {
        "LLOG_OXIA_SERVICE_ADDRESS": oxia_server.address,
        "LLOG_S3_BUCKET": BUCKET,
        "LLOG_ROOT_PREFIX": front_root,
        "LLOG_KEYS_KMS_KEY_ID": kms_key_arn,
        "LLOG_KINESIS_ACCOUNT_ID": KINESIS_ACCOUNT,
    }
    endpoints = local_endpoints(s3_config.endpoint_url, "us-east-1", "testing", "testing")
    served = start_front(synthesized, tmp_path_factory.mktemp("front"), local, endpoints, "127.0.0.1", free_port(),
                         concurrency=3).start()  # fmt: skip
    try:
        yield served
    finally:
        served.stop()


def call(
    front: LambdaFront, method: str, path: str, body: str | None = None
) -> tuple[int, dict[str, str], Any]:
    data = body.encode() if body is not None else None
    request = urllib.request.Request(front.url + path, data=data, method=method,
                                     headers={"content-type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


def curl(front: LambdaFront, path: str, body: str) -> Any:
    """``curl -X POST`` as the README writes it, the topic ``orders`` renamed."""
    done = subprocess.run(
        ["curl", "--silent", "--show-error", "--fail-with-body", "-X", "POST", front.url + path,
         "-H", "content-type: application/json", "-d", body],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return json.loads(done.stdout)


def test_the_readme_curls_produce_and_consume_through_the_functions(front: LambdaFront) -> None:
    topic = f"front-{uuid.uuid4().hex[:8]}"
    produced = curl(front, "/produce", EXAMPLE_PRODUCE.replace('"orders"', json.dumps(topic)))
    assert (produced["success_count"], produced["error_count"]) == (2, 0), produced
    consumed = curl(front, "/consume", EXAMPLE_CONSUME.replace('"orders"', json.dumps(topic)))
    p0, p1 = consumed["results"]
    assert [r["value"] for r in p0["records"]] == ["alpha", "beta"]  # offsets start at 1
    assert [r["value"] for r in p1["records"]] == [{"base64": "AAE="}]
    assert (p0["high_watermark"], p1["high_watermark"]) == (2, 1)


def test_the_python_client_produces_and_consumes_a_created_topic(front: LambdaFront) -> None:
    topic = f"front-{uuid.uuid4().hex[:8]}"
    status, _, created = call(front, "POST", "/topics", json.dumps({"topic": topic, "partitions": 3}))
    assert status == 201, created
    with Producer(front.url) as producer:
        for i in range(30):
            producer.send(topic, f"value-{i}".encode(), key=f"key-{i % 7}".encode())
        producer.flush()
    records: list[Record] = []
    with Consumer(front.url, f"group-{topic}", [topic]) as consumer:
        deadline = time.monotonic() + 60
        while len(records) < 30 and time.monotonic() < deadline:
            records += consumer.poll(1.0)
    assert sorted(r.value for r in records) == sorted(f"value-{i}".encode() for i in range(30))
    by_key: dict[bytes | None, set[int]] = {}
    for record in records:
        by_key.setdefault(record.key, set()).add(record.partition)
    assert all(len(partitions) == 1 for partitions in by_key.values()), by_key  # keyed records stay together


def test_the_request_model_refuses_a_body_before_the_function_runs(front: LambdaFront) -> None:
    """API Gateway's validation (the model of /produce) answers with the template's BAD_REQUEST_BODY response."""
    # What the template's gateway response says, not restated here.
    template_body = json.loads(front.api.responses["BAD_REQUEST_BODY"]["ResponseTemplates"]["application/json"])
    produce = front.api.route("POST", "/produce")
    assert produce is not None
    pool = front.pools[produce[0].function]
    invocations_before = invocations(pool)
    for body in ('{"topic_partitions": []}', "{}", "not json"):
        status, headers, answer = call(front, "POST", "/produce", body)
        assert status == 400, (body, answer)
        assert answer == template_body, (body, answer)
        assert headers["x-amzn-ErrorType"] == "BAD_REQUEST_BODY"
    assert invocations(pool) == invocations_before  # the function never ran


def invocations(pool: FunctionPool) -> int:
    """Invocations the pool's environments started, as the emulator logs them."""
    return sum(environment.output().count("START RequestId") for environment in pool.environments)


def test_unknown_paths_and_methods_reach_the_functions_as_the_template_routes_them(front: LambdaFront) -> None:
    status, _, answer = call(front, "GET", "/no/such/path")
    assert status == 404, answer  # {proxy+} -> admin
    status, _, answer = call(front, "PUT", "/produce", "{}")
    assert status == 405, answer  # ANY on /produce -> produce, which allows POST only
    status, _, answer = call(front, "GET", f"/topics/front-{uuid.uuid4().hex[:8]}")
    assert (status, answer["error_type"]) == (404, "UnknownTopic"), answer  # {topic} -> admin


def test_concurrent_long_polls_get_environments_of_their_own(front: LambdaFront) -> None:
    """A consume waits in its environment; another request of the same function starts a second one."""
    topic = f"front-{uuid.uuid4().hex[:8]}"
    assert call(front, "POST", "/produce", json.dumps({"topic_partitions": [
        {"topic": topic, "partition": 0, "records": ["first"]}]}))[0] == 200  # fmt: skip
    poll = json.dumps({"topic_partitions": [{"topic": topic, "partition": 0, "fetch_offset": 2}],
                       "max_wait_ms": 3000, "min_bytes": 1})  # fmt: skip
    answers: list[tuple[int, dict[str, str], Any]] = []
    waiting = [threading.Thread(target=lambda: answers.append(call(front, "POST", "/consume", poll))) for _ in (1, 2)]
    started = time.monotonic()
    for thread in waiting:
        thread.start()
    time.sleep(0.5)
    assert call(front, "POST", "/produce", json.dumps({"topic_partitions": [
        {"topic": topic, "partition": 0, "records": ["second"]}]}))[0] == 200  # fmt: skip
    for thread in waiting:
        thread.join(30)
    assert [a[0] for a in answers] == [200, 200], answers
    for _, _, body in answers:
        assert [r["value"] for r in body["results"][0]["records"]] == ["second"], body
    assert time.monotonic() - started < 3, "the long polls were answered by the produce, not by their deadline"
    consume = front.api.route("POST", "/consume")
    assert consume is not None
    assert len(front.pools[consume[0].function].environments) >= 2


def test_boto3s_kinesis_client_creates_puts_and_gets_through_the_kinesis_function(
    front: LambdaFront, front_root: str, oxia_store: OxiaStore, kms_key_arn: str, s3_config: S3Config
) -> None:
    """An unchanged boto3 ``kinesis`` client but for its endpoint (the front's ``/kinesis``) and credentials (a key
    llog issued): it signs ``/kinesis``, the path the front passes as ``requestContext.path``, which the function
    verifies. What is put is read back; a wrong secret is refused by the function, as deployed."""
    kms = boto3.client("kms", endpoint_url=s3_config.endpoint_url, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    keys = AccessKeys(oxia_store, root=front_root, sealer=KmsSealer(kms_key_arn, client=kms))
    issued, secret = keys.create("front", KeyPermissions(("*",), read=True, write=True, admin=True))

    def client(secret: str) -> Any:
        return boto3.client("kinesis", endpoint_url=f"{front.url}/kinesis", region_name="eu-west-1",
                            aws_access_key_id=issued.access_key_id, aws_secret_access_key=secret,
                            config=Config(retries={"max_attempts": 1}))  # fmt: skip

    kinesis, stream = client(secret), f"front-{uuid.uuid4().hex[:8]}"
    kinesis.create_stream(StreamName=stream, ShardCount=2)
    description = kinesis.describe_stream(StreamName=stream)["StreamDescription"]
    assert description["StreamARN"] == f"arn:aws:kinesis:eu-west-1:{KINESIS_ACCOUNT}:stream/{stream}"
    put = kinesis.put_record(StreamName=stream, Data=b"\x00alpha", PartitionKey="customer-1")
    batch = kinesis.put_records(StreamName=stream, Records=[{"Data": f"r{i}".encode(), "PartitionKey": "customer-1"}
                                                           for i in range(3)])  # fmt: skip
    assert batch["FailedRecordCount"] == 0, batch
    iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=put["ShardId"],
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]  # fmt: skip
    got = kinesis.get_records(ShardIterator=iterator)
    assert [r["Data"] for r in got["Records"]] == [b"\x00alpha", b"r0", b"r1", b"r2"]
    assert got["Records"][0]["SequenceNumber"] == put["SequenceNumber"]
    with pytest.raises(ClientError) as refused:
        client(secret[:-1] + ("x" if secret[-1] != "x" else "y")).put_record(
            StreamName=stream, Data=b"no", PartitionKey="customer-1"
        )
    assert refused.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert [r["Data"] for r in kinesis.get_records(ShardIterator=iterator)["Records"]][-1] == b"r2"


@pytest.mark.parametrize("sdk", ["java", "js"])
def test_the_aws_sdks_for_java_and_javascript_through_the_kinesis_function(
    front: LambdaFront, front_root: str, oxia_store: OxiaStore, kms_key_arn: str, s3_config: S3Config, sdk: str
) -> None:
    """The SDK checks of tests/sdk (every operation, iterator and error they cover) through the function, as
    API Gateway invokes it. Java speaks JSON here: behind API Gateway, a CBOR answer reaches it base64-encoded
    (docs/KINESIS.md, "The SDKs, as tested")."""
    kms = boto3.client("kms", endpoint_url=s3_config.endpoint_url, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    keys = AccessKeys(oxia_store, root=front_root, sealer=KmsSealer(kms_key_arn, client=kms))
    issued, secret = keys.create(f"front-{sdk}", KeyPermissions(("*",), read=True, write=True, admin=True))
    endpoint = KinesisEndpoint(f"{front.url}/kinesis", issued.access_key_id, secret, server_output=())
    if sdk == "java":
        require_sdk("java", ("java",), JAVA_PROJECT / "target" / ".built")
        command, cwd = ["java", "-Daws.cborEnabled=false", "-cp", JAVA_CLASSPATH, "Main"], JAVA_PROJECT
    else:
        require_sdk("js", ("node",), JS_PROJECT / "node_modules" / "@aws-sdk" / "client-kinesis")
        command, cwd = ["node", "check.mjs"], JS_PROJECT
    assert "PASS" in run_check(command, endpoint, stream_name(f"front-{sdk}"), cwd)


def test_binary_media_types_are_passed_base64_and_nothing_else_is(synthesized: Synthesized) -> None:
    """As API Gateway: a body of a binary media type (CBOR, the Kinesis API's) goes to the function base64-encoded,
    a JSON body as text; a base64 answer goes back as bytes only to a client whose first Accept is binary."""
    api = RestApi(synthesized.template)
    assert api.binary_media_types == ("application/x-amz-cbor-1.1",)
    kinesis = api.route("POST", "/kinesis")
    produce = api.route("POST", "/produce")
    assert kinesis is not None
    assert produce is not None

    def event(routed: Any, content_type: str, body: bytes) -> dict[str, Any]:
        headers = [("Content-Type", content_type)]
        return proxy_event(routed[0], routed[1], "POST", "/kinesis", headers, body, stage=api.stage, request_id="r",
                           source_ip="127.0.0.1", binary=api.is_binary(content_type))  # fmt: skip

    cbor = event(kinesis, "application/x-amz-cbor-1.1", b"\xbf\xff")
    assert (cbor["body"], cbor["isBase64Encoded"]) == ("v/8=", True)
    assert cbor["requestContext"]["path"] == "/kinesis"  # what the client asked for (no stage in the front's URLs)
    for content_type in ("application/json", "application/x-amz-json-1.1", "application/json; charset=utf-8"):
        text = event(produce, content_type, b'{"topic_partitions": []}')
        assert (text["body"], text["isBase64Encoded"]) == ('{"topic_partitions": []}', False), content_type
    answer = {"statusCode": 200, "headers": {"Content-Type": "application/x-amz-cbor-1.1"}, "body": "v/8=",
              "isBase64Encoded": True}  # fmt: skip
    assert proxy_answer(answer, binary=True)[2] == b"\xbf\xff"
    assert proxy_answer(answer, binary=False)[2] == b"v/8="  # API Gateway passes it on as the text it is


def test_routing_prefers_literal_parts_then_parameters_then_the_greedy_path(synthesized: Synthesized) -> None:
    api = RestApi(synthesized.template)
    cases = {
        ("POST", "/produce"): ("/produce", {}),
        ("GET", "/topics/orders"): ("/topics/{topic}", {"topic": "orders"}),
        ("POST", "/topics/orders/partitions"): ("/topics/{topic}/partitions", {"topic": "orders"}),
        ("GET", "/groups/billing"): ("/groups/{group}", {"group": "billing"}),
        ("GET", "/a/b/c"): ("/{proxy+}", {"proxy": "a/b/c"}),
        ("DELETE", "/"): ("/", {}),
        ("POST", "/kinesis"): ("/kinesis", {}),
        ("GET", "/kinesis"): ("/kinesis", {}),
    }
    for (method, path), (resource, parameters) in cases.items():
        routed = api.route(method, path)
        assert routed is not None, (method, path)
        assert (routed[0].resource_path, routed[1]) == (resource, parameters), (method, path, routed)
    assert api.stage == "dev"


def test_no_answer_within_the_integration_timeout_is_504_and_the_environment_is_replaced(
    front: LambdaFront, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("devserver.lambda_front.INTEGRATION_TIMEOUT_S", 1.0)
    topic = f"front-{uuid.uuid4().hex[:8]}"
    poll = json.dumps({"topic_partitions": [{"topic": topic, "partition": 0, "fetch_offset": 2}],
                       "max_wait_ms": 3000, "min_bytes": 1})  # fmt: skip
    assert call(front, "POST", "/produce", json.dumps({"topic_partitions": [
        {"topic": topic, "partition": 0, "records": ["only"]}]}))[0] == 200  # fmt: skip
    status, headers, answer = call(front, "POST", "/consume", poll)
    assert (status, headers["x-amzn-ErrorType"]) == (504, "INTEGRATION_TIMEOUT"), answer
    assert answer["error"] == "Endpoint request timed out", answer
    monkeypatch.setattr("devserver.lambda_front.INTEGRATION_TIMEOUT_S", 29.0)
    status, _, answer = call(front, "POST", "/consume", poll.replace('"max_wait_ms": 3000', '"max_wait_ms": 0'))
    assert status == 200, answer  # served by a live environment


def test_a_function_whose_environment_died_answers_502(front: LambdaFront) -> None:
    admin = front.api.route("GET", "/health")
    assert admin is not None
    pool = front.pools[admin[0].function]
    for environment in list(pool.environments):
        assert environment.process is not None
        environment.process.kill()
        environment.process.wait()
    status, headers, answer = call(front, "GET", "/health")
    assert (status, headers["x-amzn-ErrorType"]) == (502, "DEFAULT_5XX"), answer
    assert (answer["error"], answer["retriable"]) == ("Internal server error", True), answer
    status, _, answer = call(front, "GET", "/health")
    assert status == 200, answer  # a new environment (a cold start) took its place


def test_make_smoke_passes_every_step_through_the_functions(front: LambdaFront) -> None:
    """scripts/smoke.py (``make smoke URL=...``), as against a deployed stage: the README's requests, the client's
    producer, a group consumer's commit and lag, and the topics deleted."""
    done = run_smoke("--url", front.url, "--records", "40")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line.split()[0] for line in done.stdout.splitlines()[: len(STEPS)]] == ["ok"] * len(STEPS), done.stdout
