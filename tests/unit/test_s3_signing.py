"""How ``BlobStore.put`` signs and protects a PUT, against stand-in servers (no S3 needed).

Over plain HTTP the signature covers the body (its SHA-256), as botocore's
does. Over TLS (AWS, or an ``https://`` endpoint) the body goes unsigned and is
covered by its CRC32C, which S3 checks, as botocore's own checksum would be.
"""

from __future__ import annotations

import base64
import hashlib
import socket
import threading
from dataclasses import replace

import google_crc32c
import pytest

from llog.config import S3Config
from llog.errors import BlobStoreUnavailable
from llog.format.keys import S3Location
from llog.store.s3 import BlobStore
from tests.s3_proxy import s3_proxy

BODY = b"a WAL blob " * 1000
CONFIG = S3Config(
    bucket="llog", region_name="us-east-1", access_key_id="k", secret_access_key="s", connect_timeout_s=0.5,
    read_timeout_s=0.5, max_attempts=1,
)  # fmt: skip


def test_over_plain_http_the_signature_covers_the_body_and_the_crc32c() -> None:
    with s3_proxy(None) as server:
        BlobStore(replace(CONFIG, endpoint_url=server.endpoint_url)).put(S3Location("llog", "wal-shared/x"), BODY)
    [put] = server.requests("PUT")
    assert put.headers["x-amz-content-sha256"] == hashlib.sha256(BODY).hexdigest()
    crc32c = base64.b64encode(google_crc32c.value(BODY).to_bytes(4, "big")).decode()
    assert put.headers["x-amz-checksum-crc32c"] == crc32c
    signed = put.headers["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
    assert {"host", "x-amz-checksum-crc32c", "x-amz-content-sha256", "x-amz-date"} <= set(signed)
    assert put.body == BODY


def test_over_tls_the_body_is_unsigned_and_the_put_speaks_tls() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    first_bytes: list[bytes] = []

    def accept() -> None:
        connection, _ = listener.accept()
        with connection:
            first_bytes.append(connection.recv(1))

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    store = BlobStore(replace(CONFIG, endpoint_url=f"https://127.0.0.1:{listener.getsockname()[1]}"))
    with pytest.raises(BlobStoreUnavailable):  # no TLS server answers
        store.put(S3Location("llog", "wal-shared/x"), BODY)
    thread.join(5)
    listener.close()
    assert first_bytes == [b"\x16"]  # a TLS handshake record: the request went encrypted
    # Under TLS the wire cannot be read here; the signing configuration says what the header carries.
    assert store._puts.tls
    assert store._puts._signing.signed_body_value == "UNSIGNED-PAYLOAD"
