"""The JSON forms of bytes in llog's HTTP API: a string (its UTF-8) or ``{"base64": ...}``."""

from __future__ import annotations

import base64
from typing import Any


def encode_bytes(data: bytes) -> str | dict[str, str]:
    """UTF-8 text as a JSON string (smaller than base64), anything else as ``{"base64": ...}``."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def decode_bytes(value: Any) -> bytes:
    """The bytes of a value, key or header value as the server renders it."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and isinstance(value.get("base64"), str):
        return base64.b64decode(value["base64"], validate=True)
    raise ValueError(f'expected a string or {{"base64": ...}}, got {value!r}')


def as_bytes(data: bytes | bytearray | memoryview | str) -> bytes:
    """``data`` as bytes; a str is its UTF-8."""
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)
