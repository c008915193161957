"""``CrtPuts``: ``BlobStore``'s PUTs through the AWS Common Runtime's S3 client (awscrt).

Why: a PUT through botocore costs about 1.4 ms of Python per call (its event
hooks, endpoint rules, User-Agent, signing and urllib3), and more per MB, all
of it holding the GIL that ``llog serve``'s event loop needs. The CRT signs,
sends and retries on its own native threads: the caller holds the GIL for
about 0.1 ms per PUT (docs/PERFORMANCE_NOTES.md). Every other S3 call stays on
botocore.

What the two clients share, so that they agree on both: where a bucket is
(botocore's endpoint rules, read once per bucket from a presigned URL) and
the credentials (botocore's, read by every PUT on its caller's thread, so
refreshed credentials are picked up), and the CA bundle (``AWS_CA_BUNDLE``).
The CRT does not go through an HTTP proxy (``HTTPS_PROXY``), which botocore's calls would.

One CRT client per process and setting serves every ``BlobStore``: a client
holds threads and buffers for the life of the process, and each store's
credentials travel with its requests.

Failures: the CRT retries 5xx answers, throttling and dropped connections
(``LLOG_S3_MAX_ATTEMPTS`` attempts in all, at least two), with exponential
backoff. It has no read timeout of its own, so a call that does not finish
within ``max_attempts x (connect + read timeout)`` is cancelled. What still
fails is mapped as botocore's errors are (``s3_error``).
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from llog.config import S3Config
from llog.errors import BlobStoreUnavailable
from llog.format.keys import S3Location
from llog.store.s3_errors import s3_error

_PROBE = "llog-endpoint-probe"  # the key of the presigned URL a bucket's host and path are read from

# S3's error codes for the CRT's names of S3 answers it reports without their body.
_CRT_NAMES = {"AWS_ERROR_S3_SLOW_DOWN": "SlowDown"}


@dataclass(frozen=True)
class _ClientSettings:
    endpoint_url: str | None  # the CRT sends a request to an endpoint it has connections to by host name alone
    region: str
    tls: bool
    max_attempts: int
    connect_timeout_ms: int
    ca_bundle: str | None


class CrtPuts:
    """PUTs of whole objects, one request each (never multipart), with the CRC32C llog computed."""

    def __init__(self, config: S3Config, botocore_client: Any, credentials: Any, ca_bundle: str | None) -> None:
        """``credentials``: botocore's (``Session.get_credentials()``); None when none were found."""
        self.config = config
        self._botocore = botocore_client
        self._credentials = credentials
        self._targets: dict[str, tuple[str, str]] = {}  # bucket -> (Host header, path prefix of its keys)
        self._lock = threading.Lock()
        self._signing: tuple[Any, Any] | None = None  # (botocore's frozen credentials, a signing config with them)
        tls = config.endpoint_url is None or config.endpoint_url.startswith("https:")
        self.settings = _ClientSettings(
            config.endpoint_url,
            botocore_client.meta.region_name,
            tls,
            config.max_attempts,
            int(config.connect_timeout_s * 1000),
            ca_bundle if tls else None,
        )
        self.deadline_s = config.max_attempts * (config.connect_timeout_s + config.read_timeout_s)

    @property
    def tls(self) -> bool:
        return self.settings.tls

    def put(self, location: S3Location, body: bytes, checksum: str, metadata: Mapping[str, str]) -> None:
        """Write ``body`` to ``location``; ``checksum``: its CRC32C as ``x-amz-checksum-crc32c`` carries it."""
        from awscrt.exceptions import AwsCrtError
        from awscrt.http import HttpHeaders, HttpRequest
        from awscrt.s3 import S3RequestType, S3ResponseError

        host, prefix = self._target(location.bucket)
        headers = [("Host", host), ("Content-Length", str(len(body))), ("x-amz-checksum-crc32c", checksum)]
        headers += [(f"x-amz-meta-{name}", value) for name, value in metadata.items()]
        request = HttpRequest("PUT", prefix + quote(location.key, safe="/~"), HttpHeaders(headers), io.BytesIO(body))
        signing = self._signing_config(location)
        if not self.tls:  # the signature covers the body over plain HTTP, as botocore's does (hashlib drops the GIL)
            signing = signing.replace(signed_body_value=hashlib.sha256(body).hexdigest())
        try:
            call = _client(self.settings).make_request(
                type=S3RequestType.PUT_OBJECT, request=request, signing_config=signing
            )
            call.finished_future.result(timeout=self.deadline_s)
        except FutureTimeout:
            call.cancel()
            raise BlobStoreUnavailable(
                f"S3 put of {location.uri} did not finish within {self.deadline_s:g}s "
                f"({self.config.max_attempts} attempts of at most {self.config.read_timeout_s:g}s)"
            ) from None
        except S3ResponseError as exc:
            code, detail = _error_code(exc)
            raise s3_error("put", location.uri, code, detail) from exc
        except AwsCrtError as exc:  # no answer to read a code from (a dropped connection), or the CRT's own name
            code = _CRT_NAMES.get(exc.name, exc.name)
            raise s3_error("put", location.uri, code, f"{exc.name}: {exc.message}") from exc

    def _target(self, bucket: str) -> tuple[str, str]:
        target = self._targets.get(bucket)
        if target is None:
            from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

            try:
                url = self._botocore.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": _PROBE})
            except NoCredentialsError as exc:
                raise s3_error("put", f"s3://{bucket}", "NoCredentials", str(exc)) from exc
            except (BotoCoreError, ClientError) as exc:
                raise s3_error("put", f"s3://{bucket}", type(exc).__name__, str(exc)) from exc
            parts = urlsplit(url)
            target = self._targets[bucket] = (parts.netloc, parts.path[: -len(_PROBE)])
        return target

    def _signing_config(self, location: S3Location) -> Any:
        """A signing configuration with botocore's current credentials.

        They are read here, on the caller's thread, which holds the GIL anyway, and handed to the CRT
        as static ones: a credentials callback would take the GIL once more per PUT on a CRT thread
        (behind ``llog serve``'s event loop), and its failure would reach the caller only as the CRT's
        error name. A refresh that botocore finds due happens here, as it does for botocore's own calls.
        """
        assert self._credentials is not None  # ``_target`` refused the PUT without credentials
        try:
            frozen = self._credentials.get_frozen_credentials()
        except Exception as exc:  # none found is a configuration error; a refresh that failed may work next time
            from botocore.exceptions import NoCredentialsError

            code = "NoCredentials" if isinstance(exc, NoCredentialsError) else type(exc).__name__
            raise s3_error("put", location.uri, code, str(exc)) from exc
        with self._lock:
            if self._signing is None or self._signing[0] != frozen:  # the first PUT, or refreshed credentials
                from awscrt.auth import (
                    AwsCredentialsProvider,
                    AwsSignatureType,
                    AwsSignedBodyHeaderType,
                    AwsSignedBodyValue,
                    AwsSigningAlgorithm,
                    AwsSigningConfig,
                )

                provider = AwsCredentialsProvider.new_static(frozen.access_key, frozen.secret_key, frozen.token)
                self._signing = (frozen, AwsSigningConfig(
                    algorithm=AwsSigningAlgorithm.V4,
                    signature_type=AwsSignatureType.HTTP_REQUEST_HEADERS,
                    service="s3",
                    region=self.settings.region,
                    credentials_provider=provider,
                    signed_body_header_type=AwsSignedBodyHeaderType.X_AMZ_CONTENT_SHA_256,
                    # Over TLS the body is covered by its CRC32C, not hashed for the signature (as botocore
                    # does, and the CRT everywhere); ``put`` has the signature cover it over plain HTTP.
                    signed_body_value=AwsSignedBodyValue.UNSIGNED_PAYLOAD,
                    use_double_uri_encode=False,
                    should_normalize_uri_path=False,
                ))  # fmt: skip
            return self._signing[1]


_clients: dict[tuple[int, _ClientSettings], Any] = {}  # (process id, settings) -> the CRT's S3 client
_clients_lock = threading.Lock()


def _client(settings: _ClientSettings) -> Any:
    """This process's S3 client for ``settings`` (a fork's child makes its own: the CRT's threads stay behind)."""
    key = (os.getpid(), settings)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = _new_client(settings)
        return client


def _new_client(settings: _ClientSettings) -> Any:
    from awscrt.io import ClientBootstrap, ClientTlsContext, DefaultHostResolver, EventLoopGroup, TlsContextOptions
    from awscrt.s3 import S3Client, S3RequestTlsMode, S3RetryConfig

    group = EventLoopGroup()
    tls_options = None
    if settings.ca_bundle:
        context = TlsContextOptions()
        context.override_default_trust_store_from_path(ca_filepath=settings.ca_bundle)
        tls_options = ClientTlsContext(context).new_connection_options()
    return S3Client(
        bootstrap=ClientBootstrap(group, DefaultHostResolver(group)),
        region=settings.region,
        tls_mode=S3RequestTlsMode.ENABLED if settings.tls else S3RequestTlsMode.DISABLED,
        tls_connection_options=tls_options,
        # One PUT per object, whatever its size (S3's limit for one is 5 GiB): no multipart upload.
        multipart_upload_threshold=5 * 1024**3,
        # 0 would mean the CRT's default (5); it cannot be told to make one attempt only.
        retry_config=S3RetryConfig(max_retries=max(1, settings.max_attempts - 1)),
        connect_timeout_ms=settings.connect_timeout_ms,
    )


def _error_code(exc: Any) -> tuple[str, str]:
    """S3's error code from an error answer's XML body (the HTTP status when it has none), and a detail."""
    try:
        root = ET.fromstring(exc.body or b"")
    except ET.ParseError:
        return str(exc.status_code), f"HTTP {exc.status_code}"
    code = root.findtext("{*}Code") or str(exc.status_code)  # {*}: in any namespace or none
    message = root.findtext("{*}Message")
    return code, f"HTTP {exc.status_code}: {message}"
