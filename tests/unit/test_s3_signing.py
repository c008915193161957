"""Where and how ``BlobStore.put`` sends a PUT, against stand-in servers (no S3 needed).

Over plain HTTP the signature covers the body (its SHA-256), as botocore's
does. Over TLS (AWS, or an ``https://`` endpoint) the body goes unsigned and is
covered by its CRC32C, which S3 checks, as botocore's own checksum would be.
On AWS a PUT goes to the bucket's regional host, as botocore's calls do.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
import ssl
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import google_crc32c
import pytest
from botocore.exceptions import CredentialRetrievalError, NoCredentialsError
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from llog.config import S3Config
from llog.errors import BlobStoreUnavailable, ConfigurationError
from llog.format.keys import S3Location
from llog.store.s3 import BlobStore
from tests.s3_proxy import Seen, s3_proxy

BODY = b"a WAL blob " * 1000
CRC32C = base64.b64encode(google_crc32c.value(BODY).to_bytes(4, "big")).decode()
CONFIG = S3Config(
    bucket="llog", region_name="us-east-1", access_key_id="k", secret_access_key="s", session_token="t",
    connect_timeout_s=2, read_timeout_s=2, max_attempts=2,
)  # fmt: skip


def signed_headers(put: Seen) -> set[str]:
    return set(put.headers["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";"))


def test_over_plain_http_the_signature_covers_the_body_and_the_crc32c() -> None:
    with s3_proxy(None) as server:
        BlobStore(replace(CONFIG, endpoint_url=server.endpoint_url)).put(S3Location("llog", "wal-shared/x"), BODY)
    [put] = server.requests("PUT")
    assert put.headers["x-amz-content-sha256"] == hashlib.sha256(BODY).hexdigest()
    assert put.headers["x-amz-checksum-crc32c"] == CRC32C
    assert {"host", "x-amz-checksum-crc32c", "x-amz-content-sha256", "x-amz-date"} <= signed_headers(put)
    assert put.body == BODY


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def test_over_tls_the_body_is_unsigned_covered_by_its_crc32c_and_the_ca_bundle_is_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    monkeypatch.setenv("AWS_CA_BUNDLE", str(cert))  # as botocore's calls trust it
    with s3_proxy(None, tls=context) as server:
        BlobStore(replace(CONFIG, endpoint_url=server.endpoint_url)).put(S3Location("llog", "wal-shared/x"), BODY)
    [put] = server.requests("PUT")
    assert put.headers["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"
    assert put.headers["x-amz-checksum-crc32c"] == CRC32C
    assert put.headers["x-amz-security-token"] == "t"
    assert {"x-amz-checksum-crc32c", "x-amz-security-token"} <= signed_headers(put)
    assert not [h for h in put.headers if h in ("x-amz-trailer", "expect", "content-encoding")]
    assert put.body == BODY


@pytest.mark.parametrize(
    ("region", "bucket", "host", "prefix"),
    [
        ("eu-west-1", "llog-data", "llog-data.s3.eu-west-1.amazonaws.com", "/"),
        # An opt-in region refuses a PUT sent to S3's global endpoint.
        ("af-south-1", "llog-data", "llog-data.s3.af-south-1.amazonaws.com", "/"),
        # A bucket name with dots cannot be a host name under S3's TLS certificate.
        ("eu-west-1", "llog.data", "s3.eu-west-1.amazonaws.com", "/llog.data/"),
    ],
)
def test_on_aws_a_put_goes_to_the_buckets_regional_host(
    region: str, bucket: str, host: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT"):
        monkeypatch.delenv(variable, raising=False)
    store = BlobStore(replace(CONFIG, region_name=region))
    assert store._puts._target(bucket) == (host, prefix)  # read offline from botocore's endpoint rules
    assert store._puts.tls


@pytest.mark.parametrize(
    ("failure", "error"),
    [(NoCredentialsError(), ConfigurationError), (CredentialRetrievalError(provider="sts", error_msg="timed out"),
                                                   BlobStoreUnavailable)],
)  # fmt: skip
def test_credentials_that_cannot_be_had_fail_every_put_that_needs_them_clearly(
    failure: Exception, error: type[Exception]
) -> None:
    """None found is a configuration error; a refresh that failed is retriable. Every concurrent PUT says so."""
    with s3_proxy(None) as server:
        store = BlobStore(replace(CONFIG, endpoint_url=server.endpoint_url))
        store.put(S3Location("llog", "wal-shared/first"), BODY)  # the credentials worked once

        def fail() -> None:
            raise failure

        store._puts._credentials.get_frozen_credentials = fail
        with ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(lambda i: _outcome(store, i), range(16)))
    assert {type(o) for o in outcomes} == {error}
    assert all(type(failure).__name__ in str(o) or "NoCredentials" in str(o) for o in outcomes)
    assert len(server.requests("PUT")) == 1  # nothing unsigned was sent


def _outcome(store: BlobStore, i: int) -> Exception | None:
    try:
        store.put(S3Location("llog", f"wal-shared/{i}"), BODY)
    except Exception as exc:
        return exc
    return None


def test_credentials_that_botocore_refreshed_sign_the_next_put() -> None:
    """The CRT signs with the credentials each PUT reads from botocore, not those of the first PUT."""
    from botocore.credentials import ReadOnlyCredentials

    with s3_proxy(None) as server:
        store = BlobStore(replace(CONFIG, endpoint_url=server.endpoint_url))
        store.put(S3Location("llog", "wal-shared/before"), BODY)
        refreshed = ReadOnlyCredentials("k2", "s2", "t2")
        store._puts._credentials.get_frozen_credentials = lambda: refreshed
        store.put(S3Location("llog", "wal-shared/after"), BODY)
    before, after = server.requests("PUT")
    assert "Credential=k/" in before.headers["authorization"]
    assert "Credential=k2/" in after.headers["authorization"]
    assert after.headers["x-amz-security-token"] == "t2"
