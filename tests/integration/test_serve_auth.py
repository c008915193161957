"""``LLOG_SERVE_AUTH=sigv4``: ``llog serve``'s own API signed with issued keys (server/auth.py), real Oxia.

The Python client signs with ``SigV4Auth.with_key``; a request unsigned, badly signed, signed by a revoked key,
or by a key without the route's permission on a topic it names is refused (403) and writes nothing.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.auth import SigV4Auth as BotocoreSigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from llog.config import S3Config
from llog.service.keys import KeyPermissions
from llog_client import Producer, SigV4Auth
from server.serve import LlogServer
from tests.conftest import OxiaServer, keyed_serve_env, serving


@pytest.fixture(scope="module")
def server(
    s3_config: S3Config, oxia_server: OxiaServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlogServer]:
    env = keyed_serve_env(
        s3_config, oxia_server.address, f"auth-{uuid.uuid4().hex[:12]}", tmp_path_factory.mktemp("keys")
    )
    with serving({**env, "LLOG_SERVE_AUTH": "sigv4"}) as srv:
        yield srv


def _issue(srv: LlogServer, **granted: Any) -> tuple[str, str]:
    permissions = KeyPermissions(**{"streams": ("*",), "read": True, "write": True, "admin": True, **granted})
    key, secret = srv.services.access_keys().create(f"auth-{uuid.uuid4().hex[:6]}", permissions)
    return key.access_key_id, secret


def _call(srv: LlogServer, method: str, path: str, body: Any = None, key: tuple[str, str] | None = None,
          service: str = "llog") -> tuple[int, Any]:  # fmt: skip
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} if data is not None or method != "GET" else {}
    request = AWSRequest(method=method, url=srv.url + path, data=data or b"", headers=headers)
    if key is not None:
        BotocoreSigV4Auth(Credentials(*key), service, "eu-west-1").add_auth(request)
    prepared = urllib.request.Request(srv.url + path, data=data, method=method, headers=dict(request.headers))
    try:
        with urllib.request.urlopen(prepared, timeout=30) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def _produce(topic: str, value: str) -> dict[str, Any]:
    return {"topic_partitions": [{"topic": topic, "partition": 0, "records": [value]}]}


def _values(srv: LlogServer, key: tuple[str, str], topic: str) -> list[Any]:
    status, consumed = _call(srv, "POST", "/consume", {"topic_partitions": [
        {"topic": topic, "partition": 0, "fetch_offset": 1}], "max_wait_ms": 0}, key)  # fmt: skip
    assert status == 200, consumed
    return [r["value"] for r in consumed["results"][0]["records"]]


def test_the_probes_are_open_and_every_other_request_needs_a_signature(server: LlogServer) -> None:
    assert _call(server, "GET", "/health")[0] == 200
    assert _call(server, "GET", "/openapi.json")[0] == 200
    topic = f"t-{uuid.uuid4().hex[:8]}"
    for method, path, body in [
        ("POST", "/produce", _produce(topic, "x")),
        ("GET", "/topics", None),
        ("POST", "/topics", {"topic": topic, "partitions": 1}),
        ("GET", "/metrics", None),
    ]:
        status, refused = _call(server, method, path, body)  # fmt: skip
        assert (status, refused["error_type"]) == (403, "MissingAuthenticationToken"), path
    admin = _issue(server)
    assert _values(server, admin, topic) == []  # the refused produce wrote nothing
    assert _call(server, "GET", f"/topics/{topic}", key=admin)[0] == 404  # nor created the topic


def test_the_python_client_signs_with_an_issued_key(server: LlogServer) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    key = _issue(server)
    with Producer(server.url, SigV4Auth.with_key(*key)) as producer:
        metadata = producer.send(topic, b"signed", partition=0).result(30)
    assert metadata.offset == 1
    assert _values(server, key, topic) == ["signed"]


def test_bad_signatures_and_revoked_keys_are_refused(server: LlogServer) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    key_id, secret = _issue(server)
    assert _call(server, "POST", "/produce", _produce(topic, "a"), (key_id, secret[:-1] + "x"))[1]["error_type"] == (
        "InvalidSignature")  # fmt: skip
    assert _call(server, "POST", "/produce", _produce(topic, "a"), (key_id, secret), service="kinesis")[0] == 403
    assert server.services.access_keys().revoke(key_id)
    status, refused = _call(server, "POST", "/produce", _produce(topic, "a"), (key_id, secret))
    assert (status, refused["error_type"]) == (403, "UnrecognizedClient")
    assert _values(server, _issue(server), topic) == []


def test_a_key_acts_only_on_its_topics_with_its_permissions(server: LlogServer) -> None:
    prefix = f"o{uuid.uuid4().hex[:6]}"
    mine, other = f"{prefix}-1", f"p{prefix}"
    writer = _issue(server, streams=(f"{prefix}-*",), read=False, admin=False)
    assert _call(server, "POST", "/produce", _produce(mine, "ok"), writer)[0] == 200
    both = {"topic_partitions": [*_produce(mine, "a")["topic_partitions"], *_produce(other, "b")["topic_partitions"]]}
    status, refused = _call(server, "POST", "/produce", both, writer)
    assert (status, refused["error_type"]) == (403, "AccessDenied")
    assert other in refused["error"]
    for method, path, body in [
        ("POST", "/consume", {"topic_partitions": [{"topic": mine, "partition": 0, "fetch_offset": 1}]}),
        ("POST", f"/topics/{mine}/partitions/0/fence", {}),
        ("GET", "/metrics", None),
    ]:
        status, refused = _call(server, method, path, body, writer)  # fmt: skip
        assert (status, refused["error_type"]) == (403, "AccessDenied"), path
    admin = _issue(server)
    assert _values(server, admin, mine) == ["ok"]  # only the request the key may make wrote
    assert _values(server, admin, other) == []
    assert _call(server, "GET", "/metrics", key=admin)[0] == 200


def test_the_kinesis_api_keeps_its_own_signature(server: LlogServer) -> None:
    import boto3

    key_id, secret = _issue(server)
    kinesis = boto3.client("kinesis", endpoint_url=f"{server.url}/kinesis", region_name="us-east-1",
                           aws_access_key_id=key_id, aws_secret_access_key=secret)  # fmt: skip
    assert "StreamNames" in kinesis.list_streams()
