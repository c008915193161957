"""The Kinesis API's two encodings of a request and an answer: AWS JSON 1.1 and CBOR.

Every operation is ``POST`` with ``X-Amz-Target: Kinesis_20131202.<Operation>`` and a body in the encoding its
``Content-Type`` names. The operations see one document shape whichever encoding came in: a blob
(``Data``) arrives as base64 text in JSON and as a byte string in CBOR, and ``blob`` takes either; a time
(``Timestamp``) arrives as epoch seconds, and ``timestamp_ms`` takes it. Answers are built with ``bytes`` for
blobs and an aware ``datetime`` for times, and ``encode`` writes them as the encoding does.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from datetime import datetime
from typing import Any

from llog.api.kinesis.errors import SerializationException, ValidationException

JSON_CONTENT_TYPE = "application/x-amz-json-1.1"
TARGET_PREFIX = "Kinesis_20131202."


def content_type_of(header: str | None) -> str:
    """The answer's encoding for a request's ``Content-Type``: JSON unless the request is CBOR."""
    return JSON_CONTENT_TYPE


def decode(content_type: str, body: bytes) -> dict[str, Any]:
    """A request body as a document; an empty body is ``{}``, as the SDKs send for operations without input."""
    if not body.strip():
        return {}
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise SerializationException("the request body is not valid JSON") from None
    if not isinstance(document, dict):
        raise SerializationException("the request body must be a JSON object")
    return document


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    return value


def encode(content_type: str, document: dict[str, Any]) -> bytes:
    """An answer (or error) document in the request's encoding."""
    return json.dumps(_json_value(document), separators=(",", ":")).encode()


def blob(value: Any, name: str) -> bytes:
    """A blob member: base64 text (JSON) or a byte string (CBOR)."""
    if isinstance(value, bytes):
        return value
    if not isinstance(value, str):
        raise SerializationException(f"{name} must be base64-encoded binary data")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise SerializationException(f"{name} is not valid base64") from None


def timestamp_ms(value: Any, name: str) -> int:
    """A timestamp member (epoch seconds, possibly fractional) as milliseconds since the epoch."""
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SerializationException(f"{name} must be a timestamp in seconds since the epoch")
    return int(round(value * 1000))


def string(document: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    value = document.get(name)
    if value is None:
        if required:
            raise ValidationException(f"1 validation error detected: Value null at '{_member(name)}' failed to "
                                      "satisfy constraint: Member must not be null")  # fmt: skip
        return None
    if not isinstance(value, str):
        raise SerializationException(f"{name} must be a string")
    return value


def integer(document: dict[str, Any], name: str, *, required: bool = True) -> int | None:
    value = document.get(name)
    if value is None:
        if required:
            raise ValidationException(f"1 validation error detected: Value null at '{_member(name)}' failed to "
                                      "satisfy constraint: Member must not be null")  # fmt: skip
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SerializationException(f"{name} must be an integer")
    return value


def _member(name: str) -> str:
    """A member as Kinesis's validation messages name it: ``streamName`` for ``StreamName``."""
    return name[:1].lower() + name[1:]
