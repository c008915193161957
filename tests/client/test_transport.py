"""The transport's typed errors (from a real ``llog serve``) and the request signing."""

from __future__ import annotations

import pytest
from botocore.credentials import Credentials

from devserver.devstack import free_port
from llog_client.auth import ApiKeyAuth, SigV4Auth
from llog_client.errors import (
    AccessDeniedError,
    FencedError,
    GroupMembershipError,
    InvalidRequestError,
    NotFoundError,
    OffsetMismatchError,
    ServerError,
    TransportError,
    UnavailableError,
    error_from,
)
from llog_client.transport import Transport, backoff, path
from server.serve import LlogServer


def test_the_servers_errors_come_back_typed(server: LlogServer) -> None:
    transport = Transport(server.url)
    with pytest.raises(NotFoundError) as unknown:
        transport.request("GET", "/no/such/route")
    assert (unknown.value.error_type, unknown.value.status, unknown.value.retriable) == ("NotFound", 404, False)
    with pytest.raises(InvalidRequestError) as invalid:
        transport.request("POST", "/produce", {"topic_partitions": []})
    assert invalid.value.status == 400
    with pytest.raises(InvalidRequestError) as bad_name:
        transport.request("GET", path("topics", "bad name", "partitions", "0"))
    assert bad_name.value.error_type == "InvalidTopicName"
    status, health = transport.request("GET", "/health")
    assert (status, health["status"]) == (200, "ok")


def test_no_server_is_a_retriable_transport_error() -> None:
    with pytest.raises(TransportError) as error:
        Transport(f"http://127.0.0.1:{free_port()}", connect_timeout_s=1).request("GET", "/health")
    assert error.value.retriable


@pytest.mark.parametrize(
    ("document", "status", "family", "retriable"),
    [
        ({"error_type": "LogFenced", "error": "x", "retriable": False}, 409, FencedError, False),
        ({"error_type": "ProducerFenced", "error": "x", "retriable": False}, 409, FencedError, False),
        ({"error_type": "StaleGeneration", "error": "x", "retriable": False}, 409, GroupMembershipError, False),
        ({"error_type": "OxiaUnavailable", "error": "x", "retriable": True}, 503, UnavailableError, True),
        ({"error_type": "SomethingNew", "error": "x", "retriable": True}, 409, UnavailableError, True),
        ({"error_type": "InternalError", "error": "x", "retriable": False}, 500, ServerError, False),
        ({"error": "Forbidden"}, 403, AccessDeniedError, False),
        ({"error": "Too big"}, 413, InvalidRequestError, False),
        # A gateway's bare 502/504: the function died or timed out, the batch may or may not be in the log.
        ({"message": "Internal server error"}, 502, UnavailableError, True),
        ({"message": "Endpoint request timed out"}, 504, UnavailableError, True),
        # API Gateway's throttling: retried after a backoff, not fatal.
        ({"message": "Too Many Requests"}, 429, UnavailableError, True),
    ],
)
def test_error_types_map_to_their_family(
    document: dict[str, object], status: int, family: type, retriable: bool
) -> None:
    error = error_from(document, status)
    assert type(error) is family
    assert error.retriable is retriable
    assert error.error_type == document.get("error_type", f"HTTP{status}")


def test_offset_mismatch_carries_the_next_offset() -> None:
    error = error_from({"error_type": "OffsetMismatch", "error": "x", "retriable": False, "next_offset": 7}, 412)
    assert isinstance(error, OffsetMismatchError)
    assert error.next_offset == 7


def test_api_key_is_sent_as_x_api_key() -> None:
    assert ApiKeyAuth("secret").headers("POST", "https://api/produce", {}, b"{}") == {"x-api-key": "secret"}
    with pytest.raises(ValueError, match="empty"):
        ApiKeyAuth("")


def test_sigv4_signs_the_method_url_and_body() -> None:
    auth = SigV4Auth("eu-west-1", credentials=Credentials("AKIDEXAMPLE", "secret", "token"))
    base = {"content-type": "application/json"}
    signed = auth.headers("POST", "https://abc.execute-api.eu-west-1.amazonaws.com/prod/produce", base, b"{}")
    authorization = signed["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/execute-api/aws4_request" in authorization
    assert "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token" in authorization
    assert signed["X-Amz-Security-Token"] == "token"
    assert "content-type" not in signed
    other = auth.headers("POST", "https://abc.execute-api.eu-west-1.amazonaws.com/prod/produce", base, b"[]")
    assert other["Authorization"] != authorization  # the body's hash is signed


def test_the_backoff_is_bounded_and_jittered() -> None:
    waits = {attempt: [backoff(attempt, 0.1, 1.0) for _ in range(200)] for attempt in (1, 2, 3, 4, 5, 2000)}
    for attempt, drawn in waits.items():
        step = min(1.0, 0.1 * 2 ** min(attempt - 1, 32))
        assert all(0.8 * step <= wait <= 1.2 * step for wait in drawn), attempt
        assert len(set(drawn)) > 1  # jittered
