"""``CrtPuts``: ``BlobStore``'s PUTs through the AWS Common Runtime's S3 client (awscrt).

Why: a PUT through botocore costs about 1.4 ms of Python per call (its event
hooks, endpoint rules, User-Agent, signing and urllib3), and more per MB for
hashing and sending, all of it holding the GIL that ``llog serve``'s event
loop needs. The CRT signs, sends and retries on its own native threads: the
caller holds the GIL for about 0.1 ms per PUT (docs/PERFORMANCE.md). Every
other S3 call stays on botocore.

What the two clients share, so that they agree on both: where a bucket is
(botocore's endpoint rules, read once per bucket from a presigned URL) and
the credentials (botocore's provider chain, read on every signing, so
refreshed credentials are picked up).

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
from collections.abc import Callable, Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any
from urllib.parse import quote, urlsplit

from llog.config import S3Config
from llog.errors import BlobStoreUnavailable, ConfigurationError, LlogError
from llog.format.keys import S3Location

_PROBE = "llog-endpoint-probe"  # the key of the presigned URL a bucket's host and path are read from

# S3's error codes for the CRT's names of S3 answers it reports without their body.
_CRT_NAMES = {"AWS_ERROR_S3_SLOW_DOWN": "SlowDown"}

# (operation, location, S3 error code, detail) -> the llog error; ``BlobStore`` maps botocore's the same way.
ErrorMapper = Callable[[str, str, str, str], LlogError]


class CrtPuts:
    """PUTs of whole objects, one request each (never multipart), with the CRC32C llog computed."""

    def __init__(self, config: S3Config, botocore_client: Any, credentials: Any, map_error: ErrorMapper) -> None:
        """``credentials``: botocore's (``Session.get_credentials()``); None when none were found."""
        self.config = config
        self._botocore = botocore_client
        self._credentials = credentials
        self._map_error = map_error
        self._targets: dict[str, tuple[str, str]] = {}  # bucket -> (Host header, path prefix of its keys)
        self._lock = threading.Lock()
        self._client: Any = None
        self._signing: Any = None  # the client's signing configuration
        self._pid = 0  # the CRT's threads do not survive a fork: a child process makes its own client
        self.tls = config.endpoint_url is None or config.endpoint_url.startswith("https:")
        self.deadline_s = config.max_attempts * (config.connect_timeout_s + config.read_timeout_s)

    def put(self, location: S3Location, body: bytes, checksum: str, metadata: Mapping[str, str]) -> None:
        """Write ``body`` to ``location``; ``checksum``: its CRC32C as ``x-amz-checksum-crc32c`` carries it."""
        from awscrt.exceptions import AwsCrtError
        from awscrt.http import HttpHeaders, HttpRequest
        from awscrt.s3 import S3RequestType, S3ResponseError

        host, prefix = self._target(location.bucket)
        headers = [("Host", host), ("Content-Length", str(len(body))), ("x-amz-checksum-crc32c", checksum)]
        headers += [(f"x-amz-meta-{name}", value) for name, value in metadata.items()]
        request = HttpRequest("PUT", prefix + quote(location.key, safe="/~"), HttpHeaders(headers), io.BytesIO(body))
        client = self._s3()
        # SHA-256 releases the GIL over large buffers.
        signing = None if self.tls else self._signing.replace(signed_body_value=hashlib.sha256(body).hexdigest())
        call = client.make_request(type=S3RequestType.PUT_OBJECT, request=request, signing_config=signing)
        try:
            call.finished_future.result(timeout=self.deadline_s)
        except FutureTimeout:
            call.cancel()
            raise BlobStoreUnavailable(
                f"S3 put of {location.uri} did not finish within {self.deadline_s:g}s "
                f"({self.config.max_attempts} attempts of at most {self.config.read_timeout_s:g}s)"
            ) from None
        except S3ResponseError as exc:
            code, message = _error_code(exc)
            raise self._map_error("put", location.uri, code, message) from exc
        except AwsCrtError as exc:  # no answer to read a code from (a dropped connection), or the CRT's own name
            code = _CRT_NAMES.get(exc.name, exc.name)
            raise self._map_error("put", location.uri, code, f"{exc.name}: {exc.message}") from exc

    def _target(self, bucket: str) -> tuple[str, str]:
        target = self._targets.get(bucket)
        if target is None:
            from botocore.exceptions import BotoCoreError, ClientError

            try:
                url = self._botocore.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": _PROBE})
            except (BotoCoreError, ClientError) as exc:
                raise self._map_error("put", f"s3://{bucket}", type(exc).__name__, str(exc)) from exc
            parts = urlsplit(url)
            target = self._targets[bucket] = (parts.netloc, parts.path[: -len(_PROBE)])
        return target

    def _s3(self) -> Any:
        with self._lock:
            if self._client is None or self._pid != os.getpid():
                self._client, self._pid = self._new_client(), os.getpid()
            return self._client

    def _new_client(self) -> Any:
        from awscrt.auth import (
            AwsCredentials,
            AwsCredentialsProvider,
            AwsSignatureType,
            AwsSignedBodyHeaderType,
            AwsSignedBodyValue,
            AwsSigningAlgorithm,
            AwsSigningConfig,
        )
        from awscrt.s3 import S3Client, S3RequestTlsMode, S3RetryConfig

        def current() -> AwsCredentials:
            if self._credentials is None:
                raise ConfigurationError("no AWS credentials were found for S3")
            frozen = self._credentials.get_frozen_credentials()
            return AwsCredentials(frozen.access_key, frozen.secret_key, frozen.token)

        region = self._botocore.meta.region_name
        signing = AwsSigningConfig(
            algorithm=AwsSigningAlgorithm.V4,
            signature_type=AwsSignatureType.HTTP_REQUEST_HEADERS,
            service="s3",
            region=region,
            credentials_provider=AwsCredentialsProvider.new_delegate(current),
            signed_body_header_type=AwsSignedBodyHeaderType.X_AMZ_CONTENT_SHA_256,
            # Over TLS the body is covered by its CRC32C, not hashed for the signature (as botocore does, and
            # the CRT everywhere); over plain HTTP ``put`` has the signature cover it, as botocore does.
            signed_body_value=AwsSignedBodyValue.UNSIGNED_PAYLOAD,
            use_double_uri_encode=False,
            should_normalize_uri_path=False,
        )
        self._signing = signing
        return S3Client(
            bootstrap=_bootstrap(),
            region=region,
            tls_mode=S3RequestTlsMode.ENABLED if self.tls else S3RequestTlsMode.DISABLED,
            signing_config=signing,
            # One PUT per object, whatever its size (S3's limit for one is 5 GiB): no multipart upload.
            multipart_upload_threshold=5 * 1024**3,
            # 0 would mean the CRT's default (5); it cannot be told to make one attempt only.
            retry_config=S3RetryConfig(max_retries=max(1, self.config.max_attempts - 1)),
            connect_timeout_ms=int(self.config.connect_timeout_s * 1000),
        )


_bootstraps: dict[int, Any] = {}  # process id -> its CRT event loop threads, shared by its clients


def _bootstrap() -> Any:
    """This process's CRT event loop threads and DNS resolver (not the CRT's static default, which a fork breaks)."""
    from awscrt.io import ClientBootstrap, DefaultHostResolver, EventLoopGroup

    bootstrap = _bootstraps.get(os.getpid())
    if bootstrap is None:
        group = EventLoopGroup()
        bootstrap = _bootstraps.setdefault(os.getpid(), ClientBootstrap(group, DefaultHostResolver(group)))
    return bootstrap


def _error_code(exc: Any) -> tuple[str, str]:
    """S3's error code from an error answer's XML body (the HTTP status when it has none), and a detail."""
    try:
        root = ET.fromstring(exc.body or b"")
        return root.findtext("Code") or str(exc.status_code), f"HTTP {exc.status_code}: {root.findtext('Message')}"
    except ET.ParseError:
        return str(exc.status_code), f"HTTP {exc.status_code}"
