"""Kinesis shard iterators: opaque, tamper-evident tokens naming where the next GetRecords reads.

GetShardIterator answers an iterator and each GetRecords a ``NextShardIterator``; the client only sends them
back. llog's carry the stream name, the topic id (the incarnation: a stream deleted and created again does not
accept the old one's iterators), the partition, the next offset to read and the time of issue, signed with
HMAC-SHA256 under a key the caller keeps. As Kinesis's, an iterator is valid for five minutes after it is
issued, then ``ExpiredIteratorException``; one that is malformed, altered or signed with another key is
``InvalidArgumentException``. The encoding is URL-safe base64 of a JSON array, a dot, and the signature; it
stays under Kinesis's 512-character limit for any stream name Kinesis allows.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import UTC, datetime

from llog.api.kinesis.errors import ExpiredIteratorException, InvalidArgumentException

ITERATOR_LIFETIME_MS = 300_000
MAX_ITERATOR_LENGTH = 512
_VERSION = 1


@dataclass(frozen=True)
class ShardIterator:
    """Where a shard's next GetRecords reads, and when the iterator was issued (ms since the epoch)."""

    stream: str
    topic_id: str
    partition: int
    offset: int
    issued_at_ms: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signature(payload: str, key: bytes) -> str:
    return _b64(hmac.new(key, payload.encode("ascii"), hashlib.sha256).digest())


def encode_iterator(iterator: ShardIterator, key: bytes) -> str:
    """The opaque string of ``iterator``, signed with ``key``."""
    if not key:
        raise ValueError("an iterator key must not be empty")
    fields = [_VERSION, iterator.stream, iterator.topic_id, iterator.partition, iterator.offset, iterator.issued_at_ms]
    payload = _b64(json.dumps(fields, separators=(",", ":")).encode())
    text = f"{payload}.{_signature(payload, key)}"
    if len(text) > MAX_ITERATOR_LENGTH:
        raise ValueError(f"an iterator of {len(text)} characters is over Kinesis's {MAX_ITERATOR_LENGTH}")
    return text


def _invalid() -> InvalidArgumentException:
    return InvalidArgumentException("Invalid ShardIterator.")


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%a %b %d %H:%M:%S UTC %Y")


def decode_iterator(text: str, key: bytes, now_ms: int) -> ShardIterator:
    """The iterator ``text`` encodes, if ``key`` signed it and it was issued at most five minutes before ``now_ms``."""
    if not key:
        raise ValueError("an iterator key must not be empty")
    payload, dot, signature = text.partition(".")
    if not dot or len(text) > MAX_ITERATOR_LENGTH or not text.isascii():
        raise _invalid()
    if not hmac.compare_digest(signature, _signature(payload, key)):
        raise _invalid()
    try:
        fields = json.loads(_unb64(payload))
    except (binascii.Error, ValueError):
        raise _invalid() from None
    match fields:
        case [int(version), str(stream), str(topic_id), int(partition), int(offset), int(issued_at_ms)] if (
            version == _VERSION
        ):
            iterator = ShardIterator(stream, topic_id, partition, offset, issued_at_ms)
        case _:
            raise _invalid()
    if now_ms - iterator.issued_at_ms > ITERATOR_LIFETIME_MS:
        raise ExpiredIteratorException(
            f"Iterator expired. The iterator was created at time {_utc(iterator.issued_at_ms)} while right now it is "
            f"{_utc(now_ms)} which is further in the future than the tolerated delay of {ITERATOR_LIFETIME_MS} "
            "milliseconds."
        )
    return iterator
