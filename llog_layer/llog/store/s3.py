"""The S3 adapter: PUTs through the AWS Common Runtime (``llog.store.s3_crt``), every other call on botocore.

The same code talks to real S3 and to a local S3 server (moto, VersityGW):
only ``endpoint_url`` differs. Both clients retry throttling, 5xx answers
and dropped connections (``max_attempts``); what still fails is mapped to
``BlobStoreUnavailable`` (retriable), ``BlobNotFound`` or
``ConfigurationError`` (``s3_error``).

botocore is imported by the first ``BlobStore``, not with this module: a
Lambda function that never touches S3 (the admin function's catalog routes)
does not load it, and a function's init phase (its handler's import) does
not include it. boto3 is not used: its session, resources and transfer
manager add import and client-creation time and nothing this adapter calls.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from crc32c import crc32c

from llog.config import S3Config
from llog.errors import BlobStoreUnavailable, CorruptData, InvalidArgument
from llog.format.keys import S3Location
from llog.store.metrics import OperationCounters
from llog.store.s3_crt import CrtPuts
from llog.store.s3_errors import s3_error

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_DELETE_BATCH = 1000  # DeleteObjects limit


def _s3_options(endpoint_url: str | None) -> Any:  # botocore.config.Config(s3=...): a TypedDict of its stubs
    # Path-style works with every S3-compatible endpoint, virtual-host style needs DNS for the bucket name.
    # On AWS, virtual is botocore's default for its calls anyway; said explicitly, its presigned URLs (where
    # the CRT's PUTs go) name the bucket's regional host too, not the global one, which opt-in regions refuse.
    return {"addressing_style": "path" if endpoint_url else "virtual"}


def _checksum_options() -> Any:
    """botocore checks a response's checksum only where llog asks for one (a full GET's).

    Its default since 1.36 asks for one on every GET, ranges included, and checks it when it can compute it
    (CRC32C: with awscrt). Older versions (a Lambda runtime's) check nothing unasked and lack the option.
    """
    import botocore.config

    try:
        return botocore.config.Config(response_checksum_validation="when_required")
    except TypeError:
        return botocore.config.Config()


def crc32c_checksum(body: bytes) -> str:
    """The object's CRC32C as S3's ``x-amz-checksum-crc32c`` header carries it (base64 of the big-endian value).

    S3 refuses a PUT whose body does not match it (``BadDigest``), so the object
    is checked against the bytes llog built: hardware CRC32C, a few microseconds
    per MB. S3 keeps it, and a full GET checks the object against it.
    """
    return base64.b64encode(crc32c(body).to_bytes(4, "big")).decode("ascii")


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    last_modified_ms: int
    metadata: dict[str, str] = field(default_factory=dict)


class BlobStore:
    """put / get / range get / list / delete with op counters."""

    def __init__(self, config: S3Config, *, counters: OperationCounters | None = None) -> None:
        self.config = config
        self.counters = counters or OperationCounters()
        import botocore.config
        import botocore.session
        from botocore.credentials import Credentials
        from botocore.exceptions import BotoCoreError, ClientError

        self._errors = (BotoCoreError, ClientError)  # what a client call raises; ``_fail`` maps them
        session = botocore.session.Session()
        # botocore's stubs type every client as BaseClient; boto3's name the S3 one.
        client = session.create_client(
            "s3",
            endpoint_url=config.endpoint_url,
            region_name=config.region_name,
            aws_access_key_id=config.access_key_id,
            aws_secret_access_key=config.secret_access_key,
            aws_session_token=config.session_token,
            config=botocore.config.Config(
                retries={"mode": "standard", "max_attempts": config.max_attempts},
                connect_timeout=config.connect_timeout_s,
                read_timeout=config.read_timeout_s,
                s3=_s3_options(config.endpoint_url),
            ).merge(_checksum_options()),
        )
        self._client = cast("S3Client", client)
        credentials = (
            Credentials(config.access_key_id, config.secret_access_key, config.session_token)
            if config.access_key_id and config.secret_access_key
            else session.get_credentials()  # the chain the client above resolved its own from (cached)
        )
        self._puts = CrtPuts(config, client, credentials, session.get_config_variable("ca_bundle"))

    @classmethod
    def from_env(cls) -> BlobStore:
        return cls(S3Config.from_env())

    @property
    def events(self) -> Any:
        """botocore's event hooks of the client (every call but ``put``): instrumentation, fault injection in tests."""
        return self._client.meta.events

    def _fail(self, op: str, location: str, exc: Exception) -> Exception:
        from botocore.exceptions import ClientError, FlexibleChecksumError

        if isinstance(exc, FlexibleChecksumError):  # botocore's own check of a full GET (it has awscrt's CRC32C)
            return CorruptData(f"S3 {op} of {location}: the object does not match its CRC32C: {exc}")
        if isinstance(exc, ClientError):
            return s3_error(op, location, str(exc.response.get("Error", {}).get("Code", "")), str(exc))
        return BlobStoreUnavailable(f"S3 {op} of {location} failed: {exc}")

    def create_bucket(self, bucket: str) -> None:
        """Create ``bucket`` if it does not exist (local development and tests)."""
        try:
            self._client.create_bucket(Bucket=bucket)
        except self._client.exceptions.BucketAlreadyOwnedByYou:
            pass
        except self._errors as exc:
            raise self._fail("create_bucket", f"s3://{bucket}", exc) from exc

    def put(self, location: S3Location, body: bytes, *, metadata: dict[str, str] | None = None) -> None:
        with self.counters.timed("put") as nbytes:
            self._puts.put(location, body, crc32c_checksum(body), metadata or {})
            nbytes.append(len(body))

    def put_if_absent(self, location: S3Location, body: bytes) -> bool:
        """Create the object unless it exists (a conditional PUT, ``If-None-Match: *``); False if it does.

        S3 answers 412 when the object exists and 409 while another conditional write of the key is in
        flight: both mean someone else is creating it. Written whole or not at all, like every PUT.
        """
        with self.counters.timed("put") as nbytes:
            try:
                self._client.put_object(
                    Bucket=location.bucket, Key=location.key, Body=body, IfNoneMatch="*", ChecksumAlgorithm="CRC32C"
                )
            except self._client.exceptions.ClientError as exc:
                if str(exc.response.get("Error", {}).get("Code", "")) in (
                    "PreconditionFailed",
                    "ConditionalRequestConflict",
                ):
                    return False
                raise self._fail("put", location.uri, exc) from exc
            except self._errors as exc:
                raise self._fail("put", location.uri, exc) from exc
            nbytes.append(len(body))
        return True

    def head(self, location: S3Location) -> ObjectInfo:
        """Size, time and user metadata of an object."""
        with self.counters.timed("head"):
            try:
                response = self._client.head_object(Bucket=location.bucket, Key=location.key)
            except self._errors as exc:
                raise self._fail("head", location.uri, exc) from exc
        return ObjectInfo(
            location.key,
            int(response["ContentLength"]),
            int(response["LastModified"].timestamp() * 1000),
            dict(response.get("Metadata", {})),
        )

    def get(self, location: S3Location) -> bytes:
        with self.counters.timed("get") as nbytes:
            data = self._read(location, "get", {})
            nbytes.append(len(data))
            return data

    def get_range(self, location: S3Location, offset: int, length: int) -> bytes:
        """Exactly ``length`` bytes from ``offset``.

        An object shorter than the range (the index promises more bytes than
        S3 holds) raises ``CorruptData``: a short read is never returned.
        """
        if offset < 0 or length < 1:
            raise InvalidArgument(f"invalid byte range offset={offset} length={length}")
        with self.counters.timed("range_get") as nbytes:
            data = self._read(location, "range_get", {"Range": f"bytes={offset}-{offset + length - 1}"})
            nbytes.append(len(data))
        if len(data) != length:
            raise CorruptData(
                f"range GET of {location.uri} returned {len(data)} bytes, expected {length} "
                f"(bytes {offset}-{offset + length - 1})"
            )
        return data

    def _read(self, location: S3Location, op: str, extra: dict[str, Any]) -> bytes:
        try:
            # A full GET asks for the object's checksum (S3 leaves it out of ranges; some S3-compatible
            # servers do not, and botocore would check it against the range).
            checksum: dict[str, Any] = {} if extra else {"ChecksumMode": "ENABLED"}
            response = self._client.get_object(Bucket=location.bucket, Key=location.key, **extra, **checksum)
            data: bytes = response["Body"].read()
        except self._errors as exc:
            raise self._fail(op, location.uri, exc) from exc
        # botocore checks it too, but only with awscrt (its CRC32C) and a version that honours ChecksumMode's
        # answer; this check depends on neither.
        stored = response.get("ChecksumCRC32C")
        if stored and not extra and "-" not in stored and stored != crc32c_checksum(data):  # "-": a multipart's
            raise CorruptData(f"S3 {op} of {location.uri}: the object does not match its CRC32C ({stored})")
        return data

    def list(self, bucket: str, prefix: str, *, start_after: str | None = None) -> Iterator[ObjectInfo]:
        """Every object under ``prefix`` (after ``start_after``, if given) in key order, page by page."""
        for page in self._pages(bucket, prefix, {"StartAfter": start_after} if start_after else {}):
            for obj in page.get("Contents", []):
                yield ObjectInfo(obj["Key"], int(obj["Size"]), int(obj["LastModified"].timestamp() * 1000))

    def list_prefixes(self, bucket: str, prefix: str) -> Iterator[str]:
        """The next ``/``-level below ``prefix``: each distinct ``prefix + name + "/"``, in key order."""
        for page in self._pages(bucket, prefix, {"Delimiter": "/"}):
            for common in page.get("CommonPrefixes", []):
                yield common["Prefix"]

    def _pages(self, bucket: str, prefix: str, options: dict[str, Any]) -> Iterator[Any]:
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, **options}
            if token:
                kwargs["ContinuationToken"] = token
            with self.counters.timed("list"):
                try:
                    page = self._client.list_objects_v2(**kwargs)
                except self._errors as exc:
                    raise self._fail("list", f"s3://{bucket}/{prefix}", exc) from exc
            yield page
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    def delete(self, bucket: str, keys: Sequence[str]) -> None:
        """Delete keys (missing ones are fine); raises if any deletion failed."""
        for start in range(0, len(keys), _DELETE_BATCH):
            chunk = keys[start : start + _DELETE_BATCH]
            with self.counters.timed("delete"):
                try:
                    response = self._client.delete_objects(
                        Bucket=bucket, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True}
                    )
                except self._errors as exc:
                    raise self._fail("delete", f"s3://{bucket}", exc) from exc
            errors = response.get("Errors", [])
            if errors:
                raise BlobStoreUnavailable(f"S3 delete failed for {len(errors)} objects, first: {errors[0]}")
