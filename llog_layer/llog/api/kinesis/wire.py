"""The Kinesis API's two encodings of a request and an answer: AWS JSON 1.1 and CBOR.

Every operation is ``POST`` with ``X-Amz-Target: Kinesis_20131202.<Operation>`` and a body in the encoding its
``Content-Type`` names, and the answer comes back in the same one. The operations see one document shape whichever
encoding came in: a blob (``Data``) arrives as base64 text in JSON and as a byte string in CBOR, and ``blob`` takes
either; a time (``Timestamp``) arrives as epoch seconds in JSON and as an aware ``datetime`` from CBOR, and
``timestamp_ms`` takes either. Answers are built with ``bytes`` for blobs and an aware ``datetime`` for times, and
``encode`` writes them as the encoding does.

CBOR (``application/x-amz-cbor-1.1``) is what the AWS SDK for Java v2 speaks to Kinesis unless told otherwise
(``-Daws.cborEnabled=false``). It writes a time as tag 1 over epoch *milliseconds* (RFC 8949 has seconds there),
reads a number under tag 1 or none as milliseconds, and reads an error as a map with ``__type`` and ``message``,
as in JSON. cbor2's decoders read tag 1 as seconds, which fails for any time after 1978 and misreads any before,
so requests are decoded by its pure-Python decoder with tag 1 read here.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import cbor2
import orjson
from cbor2._decoder import CBORDecoder as PythonCBORDecoder
from cbor2._types import CBORDecodeValueError  # the pure-Python decoder's, not the C module's

from llog.api.kinesis.errors import SerializationException, ValidationException

JSON_CONTENT_TYPE = "application/x-amz-json-1.1"
CBOR_CONTENT_TYPE = "application/x-amz-cbor-1.1"
TARGET_PREFIX = "Kinesis_20131202."
MAX_TIMESTAMP_S = 10**15  # far past any date; a larger number (or NaN, or infinity) is no time
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_MS = timedelta(milliseconds=1)
_CBOR_EPOCH_TIME_TAG = 1
# Tag 1 in its one-byte head (major type 6, argument 1): the form every SDK writes.
_CBOR_EPOCH_TIME_HEAD = bytes([0xC0 | _CBOR_EPOCH_TIME_TAG])


def content_type_of(header: str | None) -> str:
    """The answer's encoding for a request's ``Content-Type``: JSON unless the request is CBOR."""
    media_type = (header or "").split(";", 1)[0].strip().lower()
    return CBOR_CONTENT_TYPE if media_type == CBOR_CONTENT_TYPE else JSON_CONTENT_TYPE


def decode(content_type: str, body: bytes) -> dict[str, Any]:
    """A request body as a document; an empty body is ``{}``, as the SDKs send for operations without input."""
    if content_type == CBOR_CONTENT_TYPE:
        return _decode_cbor(body)
    if not body.strip():
        return {}
    try:
        document = orjson.loads(body)  # strict RFC 8259: no lone surrogate, no NaN
    except (ValueError, RecursionError):
        raise SerializationException("the request body is not valid JSON") from None
    if not isinstance(document, dict):
        raise SerializationException("the request body must be a JSON object")
    return document


class _KinesisCBORDecoder(PythonCBORDecoder):
    """cbor2's decoder, but tag 1 holds epoch milliseconds (an aware ``datetime``), as the SDK writes it."""

    def _decode(self, immutable: bool = False, unshared: bool = False) -> Any:
        if self.read(1) == _CBOR_EPOCH_TIME_HEAD:
            return _epoch_ms_datetime(super()._decode(unshared=True))
        self.fp.seek(-1, io.SEEK_CUR)
        return super()._decode(immutable, unshared)


def _epoch_ms_datetime(value: Any) -> datetime:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CBORDecodeValueError("tag 1 must hold a number of milliseconds since the epoch")
    try:
        return EPOCH + timedelta(milliseconds=value)
    except OverflowError:
        raise CBORDecodeValueError("tag 1 holds a time out of range") from None


def _string_keys(decoder: Any, mapping: dict[Any, Any]) -> dict[str, Any]:
    if not all(isinstance(key, str) for key in mapping):
        raise CBORDecodeValueError("map keys must be text strings")
    return mapping


def _decode_cbor(body: bytes) -> dict[str, Any]:
    if not body:
        return {}
    stream = io.BytesIO(body)
    try:
        document = _KinesisCBORDecoder(stream, object_hook=_string_keys).decode()
    except Exception:  # anything a decoder of untrusted bytes raises (cbor2's tags raise their own) is a bad body
        raise SerializationException("the request body is not valid CBOR") from None
    if stream.tell() != len(body):
        raise SerializationException("the request body has bytes after its CBOR document")
    if not isinstance(document, dict):
        raise SerializationException("the request body must be a CBOR map")
    return document


def _json_default(value: Any) -> Any:
    """What orjson does not write itself: a blob as base64, a time as epoch seconds."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime):
        return value.timestamp()
    raise TypeError(f"{type(value).__name__} is not in a Kinesis document")


def _cbor_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return cbor2.CBORTag(_CBOR_EPOCH_TIME_TAG, _datetime_ms(value))
    if isinstance(value, dict):
        return {k: _cbor_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cbor_value(v) for v in value]
    return value


def encode(content_type: str, document: dict[str, Any]) -> bytes:
    """An answer (or error) document in the request's encoding."""
    if content_type == CBOR_CONTENT_TYPE:
        return cbor2.dumps(_cbor_value(document))
    return orjson.dumps(document, default=_json_default, option=orjson.OPT_PASSTHROUGH_DATETIME)


def blob(value: Any, name: str) -> bytes:
    """A blob member: base64 text (JSON) or a byte string (CBOR)."""
    if isinstance(value, bytes):
        return value
    if not isinstance(value, str):
        raise SerializationException(f"{name} must be base64-encoded binary data")
    try:
        return binascii.a2b_base64(value, strict_mode=True)  # base64's own alphabet, padded, nothing else
    except (binascii.Error, ValueError):
        raise SerializationException(f"{name} is not valid base64") from None


def _datetime_ms(value: datetime) -> int:
    """An aware ``datetime`` as whole milliseconds since the epoch, without a float's rounding."""
    return (value - EPOCH) // ONE_MS


def timestamp_ms(value: Any, name: str) -> int:
    """A timestamp member (epoch seconds, possibly fractional; a ``datetime`` from CBOR) as milliseconds since
    the epoch."""
    if isinstance(value, datetime):
        return _datetime_ms(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or not abs(value) <= MAX_TIMESTAMP_S:
        raise SerializationException(f"{name} must be a timestamp in seconds since the epoch")
    return int(round(value * 1000))


def _member_value(document: dict[str, Any], name: str, required: bool) -> Any:
    """The member's value; None when absent, or ``ValidationException`` if it is ``required``."""
    value = document.get(name)
    if value is None and required:
        raise ValidationException(f"1 validation error detected: Value null at '{_member(name)}' failed to "
                                  "satisfy constraint: Member must not be null")  # fmt: skip
    return value


def string(document: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    value = _member_value(document, name, required)
    if value is not None and not isinstance(value, str):
        raise SerializationException(f"{name} must be a string")
    return value


def integer(document: dict[str, Any], name: str, *, required: bool = True) -> int | None:
    value = _member_value(document, name, required)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise SerializationException(f"{name} must be an integer")
    return value


def _member(name: str) -> str:
    """A member as Kinesis's validation messages name it: ``streamName`` for ``StreamName``."""
    return name[:1].lower() + name[1:]
