"""llog's HTTP client: a batching, idempotent :class:`Producer` and a group :class:`Consumer` (docs/CLIENT.md).

``llog_client.partitioner`` imports nothing else; the server takes it alone (keyed produce), so the
names below are loaded on first use and the server never loads urllib3 through this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llog_client.auth import ApiKeyAuth, SigV4Auth
    from llog_client.consumer import Consumer, Record
    from llog_client.producer import Producer, RecordMetadata

__all__ = ["ApiKeyAuth", "Consumer", "Producer", "Record", "RecordMetadata", "SigV4Auth"]

_MODULES = {
    "ApiKeyAuth": "llog_client.auth",
    "SigV4Auth": "llog_client.auth",
    "Consumer": "llog_client.consumer",
    "Record": "llog_client.consumer",
    "Producer": "llog_client.producer",
    "RecordMetadata": "llog_client.producer",
}


def __getattr__(name: str) -> Any:
    if name not in _MODULES:
        raise AttributeError(f"module 'llog_client' has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULES[name]), name)
