"""S3's error codes as llog's errors, for both S3 clients (botocore's and the CRT's)."""

from __future__ import annotations

from llog.errors import BlobNotFound, BlobStoreUnavailable, ConfigurationError, CorruptData, LlogError

_NOT_FOUND = frozenset({"NoSuchKey", "404", "NotFound"})
# XAdminUserNotFound: VersityGW's answer to an unknown access key (AWS says InvalidAccessKeyId).
# NoCredentials: none were found (the CRT's PUTs say so). PermanentRedirect, IllegalLocationConstraintException,
# AuthorizationHeaderMalformed: the bucket is in another region than the one configured.
_CONFIG_ERRORS = frozenset(
    {"NoSuchBucket", "InvalidBucketName", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch",
     "XAdminUserNotFound", "NoCredentials", "PermanentRedirect", "IllegalLocationConstraintException",
     "AuthorizationHeaderMalformed"}
)  # fmt: skip


def s3_error(op: str, location: str, code: str, detail: str) -> LlogError:
    """The llog error for S3's error ``code`` (an answer of botocore or of the CRT)."""
    if code in _NOT_FOUND:
        return BlobNotFound(f"{location} does not exist")
    if code in _CONFIG_ERRORS:
        return ConfigurationError(f"S3 {op} of {location} refused: {code}: {detail}")
    if code == "InvalidRange":
        return CorruptData(f"S3 {op} of {location}: the object is shorter than the requested range")
    return BlobStoreUnavailable(f"S3 {op} of {location} failed: {code}: {detail}")
