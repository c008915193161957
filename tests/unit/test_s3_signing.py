"""How ``BlobStore.put`` signs and checksums a PUT, stopped before it is sent (no server needed).

Over TLS (AWS, or an ``https://`` endpoint) the body goes unsigned and is covered
by its CRC32C, as botocore's own checksum would cover it: no SHA-256 of every
body. Over plain HTTP botocore signs the body.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import google_crc32c
import pytest

from llog.config import S3Config
from llog.format.keys import S3Location
from llog.store.s3 import BlobStore

BODY = b"a WAL blob " * 1000


class Sent(Exception):
    def __init__(self, headers: dict[str, bytes]) -> None:
        self.headers = headers


def stop_before_sending(request: Any, **_: Any) -> None:
    raise Sent({k.lower(): v for k, v in request.headers.items()})


def put_headers(endpoint_url: str | None) -> dict[str, bytes]:
    config = S3Config(
        bucket="llog", endpoint_url=endpoint_url, region_name="us-east-1", access_key_id="k", secret_access_key="s"
    )
    store = BlobStore(config)
    store.events.register("before-send.s3.PutObject", stop_before_sending)
    with pytest.raises(Sent) as sent:
        store.put(S3Location("llog", "wal-shared/x"), BODY)
    return sent.value.headers


@pytest.mark.parametrize("endpoint_url", [None, "https://s3.example.com"])
def test_over_tls_the_body_is_unsigned_and_carries_its_crc32c(endpoint_url: str | None) -> None:
    headers = put_headers(endpoint_url)
    assert headers["x-amz-content-sha256"] == b"UNSIGNED-PAYLOAD"
    assert headers["x-amz-checksum-crc32c"] == base64.b64encode(google_crc32c.value(BODY).to_bytes(4, "big"))
    assert b"aws-chunked" not in headers.get("content-encoding", b"")
    assert "x-amz-trailer" not in headers


def test_over_plain_http_botocore_signs_the_body() -> None:
    headers = put_headers("http://127.0.0.1:9")
    assert headers["x-amz-content-sha256"] == hashlib.sha256(BODY).hexdigest().encode()
    assert "x-amz-checksum-crc32c" in headers
