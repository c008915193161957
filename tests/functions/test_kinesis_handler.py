"""The kinesis function (``functions.kinesis.app.handler``) with API Gateway's events of ``POST /kinesis`` (events/),
against the session's real Oxia and moto: S3 for the records, KMS sealing the access keys as the stack's key does.

Each request is signed as an AWS SDK signs it, by botocore's own ``SigV4Auth`` for service ``kinesis``, over the URL
the client called: the stage URL, whose path API Gateway passes as ``requestContext.path``.
"""

from __future__ import annotations

import base64
import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import cbor2
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from functions.common.telemetry import LocalContext
from functions.kinesis import app as kinesis_app
from llog.api.kinesis import wire
from llog.service.keys import AccessKeys, KeyPermissions
from llog.store.kms import KmsSealer
from llog.store.oxia import OxiaStore
from tests.conftest import set_env
from tests.functions.conftest import Env, load_event

REGION = "us-east-1"
ACCOUNT = "123456789012"


@pytest.fixture
def kinesis_env(monkeypatch: pytest.MonkeyPatch, oxia_env: Env, kms_key_arn: str) -> Iterator[Env]:
    """The kinesis function's environment as the stack sets it, the KMS endpoint and credentials at moto."""
    assert oxia_env.s3.endpoint_url is not None
    set_env(monkeypatch, {"LLOG_KEYS_KMS_KEY_ID": kms_key_arn, "LLOG_KINESIS_ACCOUNT_ID": ACCOUNT,
                          "AWS_ENDPOINT_URL_KMS": oxia_env.s3.endpoint_url, "AWS_REGION": REGION,
                          "AWS_DEFAULT_REGION": REGION, "AWS_ACCESS_KEY_ID": "testing",
                          "AWS_SECRET_ACCESS_KEY": "testing"})  # fmt: skip
    kinesis_app.reset()
    yield oxia_env
    kinesis_app.reset()


@pytest.fixture
def key(kinesis_env: Env, oxia_store: OxiaStore, kms_key_arn: str) -> tuple[str, str]:
    """A key issued as ``llog keys create`` issues it: every action on every stream."""
    keys = AccessKeys(oxia_store, root=kinesis_env.root, sealer=KmsSealer(kms_key_arn))
    everything = KeyPermissions(("*",), read=True, write=True, admin=True)
    issued, secret = keys.create(f"fn-{uuid.uuid4().hex[:6]}", everything)
    return issued.access_key_id, secret


def body_bytes(event: dict[str, Any]) -> bytes:
    return base64.b64decode(event["body"]) if event["isBase64Encoded"] else event["body"].encode()


def signed(
    sample: str, key: tuple[str, str], *, target: str | None = None, document: dict[str, Any] | None = None,
    signed_path: str | None = None, also_signed: tuple[str, ...] = (),
) -> dict[str, Any]:  # fmt: skip
    """The events/ sample as a client holding ``key`` sends it now: its target and body (or these), signed by
    ``SigV4Auth`` over ``https://<Host><requestContext.path>`` (or ``signed_path``), the body encoded as the
    sample's."""
    event = load_event(sample)
    headers = event["headers"]
    if target is not None:
        headers["X-Amz-Target"] = f"Kinesis_20131202.{target}"
    if document is None:
        body = body_bytes(event)
    elif headers["Content-Type"] == wire.CBOR_CONTENT_TYPE:
        body = cbor2.dumps(document)
    else:
        body = json.dumps(document).encode()
    url = f"https://{headers['Host']}{signed_path or event['requestContext']['path']}"
    sent = {"Content-Length": str(len(body)), **headers}
    to_sign = {name: sent[name] for name in ("Content-Type", "X-Amz-Target", *also_signed)}
    request = AWSRequest("POST", url, data=body, headers=to_sign)
    SigV4Auth(Credentials(*key), "kinesis", REGION).add_auth(request)
    headers.update({"X-Amz-Date": request.headers["X-Amz-Date"], "Authorization": request.headers["Authorization"]})
    event["multiValueHeaders"] = {name: [value] for name, value in headers.items()}
    event["body"] = base64.b64encode(body).decode() if event["isBase64Encoded"] else body.decode()
    return event


def invoke(event: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
    """The function's answer to ``event``: a CBOR answer (base64, binary) to a CBOR request, else JSON."""
    answer = kinesis_app.handler(copy.deepcopy(event), LocalContext("llog-kinesis"))
    cbor = event["headers"]["Content-Type"] == wire.CBOR_CONTENT_TYPE
    assert answer["isBase64Encoded"] is cbor
    body = cbor2.loads(base64.b64decode(answer["body"])) if cbor else json.loads(answer["body"])
    return answer["statusCode"], answer["headers"], body


def created_stream(key: tuple[str, str]) -> str:
    name = f"fn-{uuid.uuid4().hex[:8]}"
    status, _, body = invoke(signed("kinesis_create_stream", key, document={"StreamName": name, "ShardCount": 1}))
    assert status == 200, body
    return name


def records(key: tuple[str, str], stream: str) -> list[bytes]:
    status, _, shards = invoke(signed("kinesis_put_record", key, target="ListShards", document={"StreamName": stream}))
    assert status == 200, shards
    ((shard,),) = [[s["ShardId"] for s in shards["Shards"]]]
    where = {"StreamName": stream, "ShardId": shard, "ShardIteratorType": "TRIM_HORIZON"}
    status, _, iterator = invoke(signed("kinesis_put_record", key, target="GetShardIterator", document=where))
    assert status == 200, iterator
    status, _, got = invoke(signed("kinesis_put_record", key, target="GetRecords",
                                   document={"ShardIterator": iterator["ShardIterator"]}))  # fmt: skip
    assert status == 200, got
    return [base64.b64decode(record["Data"]) for record in got["Records"]]


def test_a_signed_put_record_is_stored_and_read_back(kinesis_env: Env, key: tuple[str, str]) -> None:
    stream = created_stream(key)
    event = signed("kinesis_put_record", key, document={**json.loads(body_bytes(load_event("kinesis_put_record"))),
                                                        "StreamName": stream})  # fmt: skip
    status, headers, body = invoke(event)
    assert status == 200, body
    assert headers["Content-Type"] == "application/x-amz-json-1.1"
    assert body["ShardId"] == "shardId-000000000000"
    assert body["SequenceNumber"]
    assert records(key, stream) == [b"alpha"]
    assert kinesis_env.objects() > 0  # in S3 under the root prefix


def test_a_bad_signature_is_kinesis_error_and_writes_nothing(kinesis_env: Env, key: tuple[str, str]) -> None:
    stream = created_stream(key)
    document = {"StreamName": stream, "Data": "YWxwaGE=", "PartitionKey": "customer-1"}
    objects = kinesis_env.objects()
    wrong_secret = signed("kinesis_put_record", (key[0], key[1][:-1] + "x"), document=document)
    # Signed over /kinesis, while API Gateway saw (and passes) the stage path the client called.
    without_stage = signed("kinesis_put_record", key, document=document, signed_path="/kinesis")
    altered = signed("kinesis_put_record", key, document=document)
    altered["body"] = altered["body"].replace("customer-1", "customer-2")
    unknown_key = signed("kinesis_put_record", ("LLOGUNKNOWNKEY000001", key[1]), document=document)
    refused = [(wrong_secret, "InvalidSignatureException"), (without_stage, "InvalidSignatureException"),
               (altered, "InvalidSignatureException"), (unknown_key, "UnrecognizedClientException")]  # fmt: skip
    for event, error in refused:
        status, headers, body = invoke(event)
        assert (status, body["__type"]) == (400, error), body
        assert headers["x-amzn-ErrorType"] == f"{error}:"
        assert body["message"]
    assert kinesis_env.objects() == objects
    assert records(key, stream) == []


def test_a_signed_content_length_verifies_without_the_header(kinesis_env: Env, key: tuple[str, str]) -> None:
    """The AWS SDK for Java signs ``Content-Length``; an event without the header (API Gateway need not pass it
    on) still verifies, as the body's own length, and a body of another length does not."""
    stream = created_stream(key)
    document = {"StreamName": stream, "Data": "YWxwaGE=", "PartitionKey": "customer-1"}
    event = signed("kinesis_put_record", key, document=document, also_signed=("Content-Length",))
    assert "content-length;" in event["headers"]["Authorization"]
    assert not [name for name in event["headers"] if name.lower() == "content-length"]
    status, _, body = invoke(event)
    assert status == 200, body
    event["body"] = event["body"].replace("customer-1", "customer-12")
    status, _, body = invoke(event)
    assert (status, body["__type"]) == (400, "InvalidSignatureException"), body
    assert records(key, stream) == [b"alpha"]


def test_a_base64_body_is_verified_on_its_bytes(kinesis_env: Env, key: tuple[str, str]) -> None:
    """A body API Gateway passes base64-encoded (a binary media type, or an HTTP API's non-text body) is checked
    against the signature over its decoded bytes, the bytes the client sent."""
    stream = created_stream(key)
    sample = load_event("kinesis_put_record_base64_body")
    assert sample["isBase64Encoded"] is True
    document = {**json.loads(body_bytes(sample)), "StreamName": stream}
    status, _, body = invoke(signed("kinesis_put_record_base64_body", key, document=document))
    assert status == 200, body
    # The same request, signed over the base64 text instead of the bytes, is someone else's.
    over_text = signed("kinesis_put_record", key, document=document)
    over_text["body"], over_text["isBase64Encoded"] = base64.b64encode(over_text["body"].encode()).decode(), False
    status, _, body = invoke(over_text)
    assert (status, body["__type"]) == (400, "InvalidSignatureException"), body
    not_base64 = signed("kinesis_put_record_base64_body", key, document=document)
    not_base64["body"] = "*" + not_base64["body"]
    status, _, body = invoke(not_base64)
    assert (status, body["__type"]) == (400, "InvalidSignatureException"), body
    assert records(key, stream) == [b"\x00\x01"]


def test_a_cbor_body_arrives_base64_and_is_verified_on_its_bytes(kinesis_env: Env, key: tuple[str, str]) -> None:
    """The AWS SDK for Java's default: a CBOR body, which the REST API passes base64-encoded (a binary media type),
    verified over its bytes; the answer is CBOR, base64-encoded for API Gateway to send as bytes."""
    stream = created_stream(key)
    sample = load_event("kinesis_put_record_cbor")
    assert (sample["isBase64Encoded"], sample["headers"]["Content-Type"]) == (True, wire.CBOR_CONTENT_TYPE)
    assert cbor2.loads(body_bytes(sample))["Data"] == b"alpha"  # a byte string: no base64 inside CBOR
    document = {**cbor2.loads(body_bytes(sample)), "StreamName": stream}
    status, headers, body = invoke(signed("kinesis_put_record_cbor", key, document=document,
                                          also_signed=("Content-Length",)))  # fmt: skip
    assert status == 200, body
    assert headers["Content-Type"] == wire.CBOR_CONTENT_TYPE
    assert body["ShardId"] == "shardId-000000000000"
    tampered = signed("kinesis_put_record_cbor", key, document=document)
    tampered["body"] = base64.b64encode(base64.b64decode(tampered["body"]).replace(b"alpha", b"alphb")).decode()
    status, _, body = invoke(tampered)
    assert (status, body["__type"]) == (400, "InvalidSignatureException"), body
    assert records(key, stream) == [b"alpha"]
