"""Verifying the AWS Signature Version 4 of a Kinesis request, against the secret of the key that signed it.

The SDKs sign every Kinesis request with SigV4 for service ``kinesis`` (an ``Authorization`` header
``AWS4-HMAC-SHA256 Credential=<key id>/<yyyymmdd>/<region>/kinesis/aws4_request, SignedHeaders=..., Signature=...``
and an ``X-Amz-Date`` header). ``verify`` rebuilds the canonical request from what arrived (method, raw path,
query, the signed headers, the body's SHA-256), derives the signing key from the secret ``secret_for`` returns
for the key id, and compares signatures in constant time. Failures raise the errors AWS answers:

| failure | error |
|---|---|
| no ``Authorization`` header | ``MissingAuthenticationTokenException`` (403) |
| a malformed header, no ``X-Amz-Date``, ``host`` unsigned | ``IncompleteSignatureException`` |
| a credential scoped to another service, or to another day than ``X-Amz-Date`` | ``InvalidSignatureException`` |
| a date more than five minutes from the server's clock, either way | ``InvalidSignatureException`` |
| a key id ``secret_for`` does not know | ``UnrecognizedClientException`` |
| a signature that does not match | ``InvalidSignatureException`` |

Replay within the five minutes is not refused here: a signed PutRecord sent twice writes twice, as on Kinesis.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar
from urllib.parse import parse_qsl, quote

from llog.api.kinesis.errors import (
    IncompleteSignatureException,
    InvalidSignatureException,
    MissingAuthenticationTokenException,
    UnrecognizedClientException,
)

Granted = TypeVar("Granted")  # what an issued key may do, as its store describes it
ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "kinesis"
MAX_CLOCK_SKEW = timedelta(minutes=5)
_AMZ_DATE = "%Y%m%dT%H%M%SZ"
_PARAMETER = re.compile(r"\s*(Credential|SignedHeaders|Signature)=([^,\s]*)\s*")
_SIGNATURE = re.compile(r"[0-9a-f]{64}")
_SIGNED_HEADERS = re.compile(r"[a-z0-9!#$%&'*+.^_`|~-]+(;[a-z0-9!#$%&'*+.^_`|~-]+)*")
_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access "
    "Key and signing method. Consult the service documentation for details."
)


@dataclass(frozen=True)
class SignedRequest:
    """A request as it arrived: ``path`` raw (still percent-encoded), ``query`` the raw query string."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class Caller:
    """Who signed a verified request, and for which region."""

    access_key_id: str
    region: str


@dataclass(frozen=True)
class _Authorization:
    access_key_id: str
    date: str
    region: str
    signed_headers: tuple[str, ...]
    signature: str


def _parse_authorization(header: str, service_name: str) -> _Authorization:
    algorithm, _, rest = header.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise IncompleteSignatureException(f"Unsupported AWS 'algorithm': '{algorithm}'")
    parameters: dict[str, str] = {}
    for part in rest.split(","):
        match = _PARAMETER.fullmatch(part)
        if match is None or match.group(1) in parameters:
            raise IncompleteSignatureException(f"Authorization header is not a well-formed SigV4 header: {header}")
        parameters[match.group(1)] = match.group(2)
    missing = [name for name in ("Credential", "SignedHeaders", "Signature") if name not in parameters]
    if missing:
        raise IncompleteSignatureException(
            " ".join(f"Authorization header requires '{name}' parameter." for name in missing)
            + f" Authorization={header}"
        )
    scope = parameters["Credential"].split("/")
    if len(scope) != 5 or not all(scope):
        raise IncompleteSignatureException(
            f"Credential is malformed: '{parameters['Credential']}'; "
            f"expected <access key id>/<yyyymmdd>/<region>/{service_name}/aws4_request"
        )
    access_key_id, date, region, service, terminator = scope
    if service != service_name:
        raise InvalidSignatureException(f"Credential should be scoped to correct service: '{service_name}'. ")
    if terminator != "aws4_request":
        raise InvalidSignatureException(
            f"Credential should be scoped with a valid terminator: 'aws4_request', not '{terminator}'. "
        )
    if _SIGNED_HEADERS.fullmatch(parameters["SignedHeaders"]) is None:
        raise IncompleteSignatureException(f"SignedHeaders is malformed: '{parameters['SignedHeaders']}'")
    if _SIGNATURE.fullmatch(parameters["Signature"]) is None:
        raise IncompleteSignatureException("Signature is not 64 lowercase hexadecimal digits")
    signed_headers = tuple(parameters["SignedHeaders"].split(";"))
    return _Authorization(access_key_id, date, region, signed_headers, parameters["Signature"])


def _canonical_query(query: str) -> str:
    pairs = parse_qsl(query, keep_blank_values=True)
    return "&".join(f"{quote(key, safe='-_.~')}={quote(value, safe='-_.~')}" for key, value in sorted(pairs))


def _canonical_headers(headers: Mapping[str, str], signed: tuple[str, ...]) -> str:
    return "".join(f"{name}:{' '.join(headers[name].split())}\n" for name in signed)


def _signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def _check_clock(amz_date: str, now: datetime) -> datetime:
    try:
        signed_at = datetime.strptime(amz_date, _AMZ_DATE).replace(tzinfo=UTC)
    except ValueError:
        raise IncompleteSignatureException(f"Date must be in ISO-8601 'basic format'. Got '{amz_date}'.") from None
    now_text = now.strftime(_AMZ_DATE)
    if signed_at < now - MAX_CLOCK_SKEW:
        raise InvalidSignatureException(
            f"Signature expired: {amz_date} is now earlier than {(now - MAX_CLOCK_SKEW).strftime(_AMZ_DATE)} "
            f"({now_text} - 5 min.)"
        )
    if signed_at > now + MAX_CLOCK_SKEW:
        raise InvalidSignatureException(
            f"Signature not yet current: {amz_date} is still later than {(now + MAX_CLOCK_SKEW).strftime(_AMZ_DATE)} "
            f"({now_text} + 5 min.)"
        )
    return signed_at


def verify(
    request: SignedRequest, secret_for: Callable[[str], str | None], now: datetime, *, service: str = SERVICE
) -> Caller:
    """The caller of ``request`` if its SigV4 signature for ``service`` is good; the AWS error otherwise.

    ``secret_for`` returns the secret access key of a key id, or None for a key that is unknown or revoked;
    ``now`` is the server's clock (aware, UTC). ``llog serve``'s own API is signed for service ``llog``
    (``server.auth``) with the same keys.
    """
    headers = {name.lower(): value for name, value in request.headers.items()}
    header = headers.get("authorization")
    if header is None:
        raise MissingAuthenticationTokenException("Missing Authentication Token")
    authorization = _parse_authorization(header, service)
    amz_date = headers.get("x-amz-date")
    if amz_date is None:
        raise IncompleteSignatureException(
            f"Authorization header requires existence of a 'X-Amz-Date' header. Authorization={header}"
        )
    if "host" not in authorization.signed_headers:
        raise IncompleteSignatureException("'Host' must be a 'SignedHeader' in the AWS Authorization.")
    absent = [name for name in authorization.signed_headers if name not in headers]
    if absent:
        raise IncompleteSignatureException(f"Signed headers are missing from the request: {', '.join(absent)}")
    signed_at = _check_clock(amz_date, now)
    if authorization.date != signed_at.strftime("%Y%m%d"):
        raise InvalidSignatureException(
            f"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: "
            f"'{authorization.date}' != '{signed_at.strftime('%Y%m%d')}', from '{amz_date}'."
        )
    secret = secret_for(authorization.access_key_id)
    if secret is None:
        raise UnrecognizedClientException("The security token included in the request is invalid.")
    canonical_request = "\n".join(
        (
            request.method,
            quote(request.path or "/", safe="/~"),
            _canonical_query(request.query),
            _canonical_headers(headers, authorization.signed_headers),
            ";".join(authorization.signed_headers),
            hashlib.sha256(request.body).hexdigest(),
        )
    )
    scope = f"{authorization.date}/{authorization.region}/{service}/aws4_request"
    string_to_sign = "\n".join((ALGORITHM, amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest()))
    key = _signing_key(secret, authorization.date, authorization.region, service)
    expected = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, authorization.signature):
        raise InvalidSignatureException(_MISMATCH)
    return Caller(authorization.access_key_id, authorization.region)


def verify_issued(
    request: SignedRequest,
    lookup: Callable[[str], tuple[str, Granted] | None],
    now: datetime,
    *,
    service: str = SERVICE,
) -> tuple[Caller, Granted]:
    """``verify`` against issued keys: ``lookup`` gives a key id's ``(secret, what it is granted)``, or None; the
    caller and what its key is granted."""
    granted: list[Granted] = []

    def secret_for(access_key_id: str) -> str | None:
        entry = lookup(access_key_id)
        if entry is None:
            return None
        granted.append(entry[1])
        return entry[0]

    caller = verify(request, secret_for, now, service=service)
    return caller, granted[-1]
