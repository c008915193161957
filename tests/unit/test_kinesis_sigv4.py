"""SigV4 verification of Kinesis requests, against requests signed by botocore's own signer.

No expected signature is written by hand: every request is signed by ``botocore.auth.SigV4Auth`` as boto3's
``kinesis`` client signs it, then verified, then altered one part at a time.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from llog.api.kinesis.errors import (
    IncompleteSignatureException,
    InvalidSignatureException,
    KinesisError,
    MissingAuthenticationTokenException,
    UnrecognizedClientException,
)
from llog.api.kinesis.sigv4 import Caller, SignedRequest, verify

KEY_ID = "LLOGKEY0000000000001"
SECRET = "s3cr3t/with+slashes=and/more0123456789ab"
SECRETS = {KEY_ID: SECRET}
SIGNED_AT = datetime(2026, 12, 7, 19, 30, 0, tzinfo=UTC)
BODY = json.dumps({"StreamName": "orders", "Data": "aGVsbG8=", "PartitionKey": "user-1"}).encode()


def botocore_signed(
    body: bytes = BODY,
    url: str = "http://localhost:9092/",
    *,
    secret: str = SECRET,
    region: str = "us-east-1",
    service: str = "kinesis",
    at: datetime = SIGNED_AT,
    headers: Mapping[str, str] | None = None,
) -> SignedRequest:
    """A PutRecord as boto3's kinesis client sends it, signed by botocore at ``at``."""
    request = AWSRequest(
        method="POST",
        url=url,
        data=body,
        headers={
            "Content-Type": "application/x-amz-json-1.1",
            "X-Amz-Target": "Kinesis_20131202.PutRecord",
            **(headers or {}),
        },
    )
    with mock.patch("botocore.auth.get_current_datetime", return_value=at.replace(tzinfo=None)):
        SigV4Auth(Credentials(KEY_ID, secret), service, region).add_auth(request)
    prepared = request.prepare()
    parts = urlsplit(prepared.url)
    # botocore signs the host of the URL and leaves the Host header to the HTTP client, which sends the same value
    # (these URLs name no default port).
    headers = {"Host": parts.netloc, **prepared.headers}
    body_sent = prepared.body or b""
    assert isinstance(body_sent, bytes)
    return SignedRequest(prepared.method or "POST", parts.path, parts.query, headers, body_sent)


def test_the_signer_was_pinned_to_the_signing_time() -> None:
    assert botocore_signed().headers["X-Amz-Date"] == "20261207T193000Z"


def test_a_request_signed_by_botocore_verifies() -> None:
    assert verify(botocore_signed(), SECRETS.get, SIGNED_AT) == Caller(KEY_ID, "us-east-1")


@pytest.mark.parametrize(
    ("url", "region"),
    [
        ("http://localhost:9092/", "eu-west-3"),
        ("https://llog.example.com/kinesis/", "us-east-1"),
        ("https://llog.example.com/a%20b/c~d", "us-east-1"),
        ("https://llog.example.com/?b=2&a=1&a=0&empty=&sp=x%20y", "us-east-1"),
    ],
)
def test_paths_queries_and_regions_verify(url: str, region: str) -> None:
    assert verify(botocore_signed(url=url, region=region), SECRETS.get, SIGNED_AT) == Caller(KEY_ID, region)


@pytest.mark.parametrize("body", [b"", bytes(range(256)), b"{}" * 5000])
def test_any_body_verifies(body: bytes) -> None:
    assert verify(botocore_signed(body), SECRETS.get, SIGNED_AT).access_key_id == KEY_ID


def test_header_names_are_matched_whatever_their_case() -> None:
    request = botocore_signed()
    upper_cased = _replace(request, headers={name.upper(): value for name, value in request.headers.items()})
    assert verify(upper_cased, SECRETS.get, SIGNED_AT).access_key_id == KEY_ID


def _replace(request: SignedRequest, **changes: Any) -> SignedRequest:
    return dataclasses.replace(request, **changes)


def _with_header(request: SignedRequest, name: str, value: str) -> SignedRequest:
    return _replace(request, headers={**request.headers, name: value})


def _mismatch(request: SignedRequest) -> None:
    with pytest.raises(InvalidSignatureException, match="does not match the signature you provided") as caught:
        verify(request, SECRETS.get, SIGNED_AT)
    assert caught.value.status == 400


def test_every_changed_byte_of_the_body_fails() -> None:
    request = botocore_signed()
    for index in range(0, len(BODY), 7):
        altered = bytearray(BODY)
        altered[index] ^= 0x01
        _mismatch(_replace(request, body=bytes(altered)))
    _mismatch(_replace(request, body=BODY + b" "))


def test_a_changed_signed_header_fails() -> None:
    request = botocore_signed()
    _mismatch(_with_header(request, "X-Amz-Target", "Kinesis_20131202.DeleteStream"))
    _mismatch(_with_header(request, "Content-Type", "application/x-amz-cbor-1.1"))
    _mismatch(_with_header(request, "Host", "elsewhere:9092"))


def test_a_changed_date_within_the_skew_fails() -> None:
    _mismatch(_with_header(botocore_signed(), "X-Amz-Date", "20261207T193001Z"))


def test_a_changed_method_path_or_query_fails() -> None:
    request = botocore_signed(url="http://localhost:9092/?a=1")
    _mismatch(_replace(request, method="PUT"))
    _mismatch(_replace(request, path="/other"))
    _mismatch(_replace(request, query="a=2"))


def test_an_unsigned_header_may_change() -> None:
    request = _with_header(botocore_signed(), "User-Agent", "another agent")
    assert verify(request, SECRETS.get, SIGNED_AT).access_key_id == KEY_ID


def test_a_wrong_secret_fails() -> None:
    _mismatch(botocore_signed(secret=SECRET + "x"))


def test_an_unknown_key_is_an_unrecognized_client() -> None:
    with pytest.raises(UnrecognizedClientException, match="security token included in the request is invalid"):
        verify(botocore_signed(), lambda _key_id: None, SIGNED_AT)


def test_another_service_scope_is_refused() -> None:
    with pytest.raises(InvalidSignatureException, match="scoped to correct service: 'kinesis'"):
        verify(botocore_signed(service="dynamodb"), SECRETS.get, SIGNED_AT)


@pytest.mark.parametrize("skew", [timedelta(minutes=5), timedelta(minutes=-5), timedelta(0)])
def test_a_clock_within_five_minutes_verifies(skew: timedelta) -> None:
    assert verify(botocore_signed(), SECRETS.get, SIGNED_AT + skew).access_key_id == KEY_ID


def test_a_signature_older_than_five_minutes_has_expired() -> None:
    with pytest.raises(InvalidSignatureException) as caught:
        verify(botocore_signed(), SECRETS.get, SIGNED_AT + timedelta(minutes=5, seconds=1))
    assert caught.value.message == (
        "Signature expired: 20261207T193000Z is now earlier than 20261207T193001Z (20261207T193501Z - 5 min.)"
    )


def test_a_signature_more_than_five_minutes_ahead_is_not_yet_current() -> None:
    with pytest.raises(InvalidSignatureException, match=r"^Signature not yet current: 20261207T193000Z"):
        verify(botocore_signed(), SECRETS.get, SIGNED_AT - timedelta(minutes=5, seconds=1))


def test_no_authorization_is_a_missing_token_403() -> None:
    request = botocore_signed()
    unsigned = _replace(request, headers={k: v for k, v in request.headers.items() if k != "Authorization"})
    with pytest.raises(MissingAuthenticationTokenException, match="Missing Authentication Token") as caught:
        verify(unsigned, SECRETS.get, SIGNED_AT)
    assert caught.value.status == 403


def _authorization(request: SignedRequest) -> str:
    return request.headers["Authorization"]


@pytest.mark.parametrize(
    ("rewrite", "error", "message"),
    [
        (lambda a: a.replace("AWS4-HMAC-SHA256", "AWS4-HMAC-SHA1"), IncompleteSignatureException, "algorithm"),
        (lambda a: a.split(", Signature=")[0], IncompleteSignatureException, "requires 'Signature' parameter"),
        (lambda a: a.replace("Credential=", "Cred="), IncompleteSignatureException, "not a well-formed"),
        (lambda a: a + ", Signature=" + "0" * 64, IncompleteSignatureException, "not a well-formed"),
        (lambda a: a.replace("/aws4_request", ""), IncompleteSignatureException, "Credential is malformed"),
        (lambda a: a.replace("/us-east-1/", "//"), IncompleteSignatureException, "Credential is malformed"),
        (lambda a: a.replace("aws4_request", "aws5_request"), InvalidSignatureException, "valid terminator"),
        (lambda a: a.replace("/20261207/", "/20261206/"), InvalidSignatureException, "Date in Credential scope"),
        (lambda a: a.replace("SignedHeaders=", "SignedHeaders=Bad;"), IncompleteSignatureException, "malformed"),
        (lambda a: a.replace("host;", ""), IncompleteSignatureException, "'Host' must be a 'SignedHeader'"),
        (lambda a: a.replace("x-amz-date", "x-amz-missing"), IncompleteSignatureException, "missing from the"),
        (lambda a: a[:-1], IncompleteSignatureException, "64 lowercase hexadecimal"),
        (lambda a: a[:-64] + a[-64:].upper(), IncompleteSignatureException, "64 lowercase hexadecimal"),
    ],
)
def test_a_malformed_authorization_header_is_refused(
    rewrite: Callable[[str], str], error: type[KinesisError], message: str
) -> None:
    request = botocore_signed()
    altered = _with_header(request, "Authorization", rewrite(_authorization(request)))
    with pytest.raises(error, match=message):
        verify(altered, SECRETS.get, SIGNED_AT)


def test_a_missing_or_malformed_date_is_an_incomplete_signature() -> None:
    request = botocore_signed()
    undated = _replace(request, headers={k: v for k, v in request.headers.items() if k != "X-Amz-Date"})
    with pytest.raises(IncompleteSignatureException, match="requires existence of a 'X-Amz-Date' header"):
        verify(undated, SECRETS.get, SIGNED_AT)
    with pytest.raises(IncompleteSignatureException, match="ISO-8601 'basic format'"):
        verify(_with_header(request, "X-Amz-Date", "2026-12-07T19:30:00Z"), SECRETS.get, SIGNED_AT)
