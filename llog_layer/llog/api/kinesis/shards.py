"""Shards of a Kinesis stream as partitions of an llog topic, and where a record goes.

A stream of N shards is a topic of N partitions; shard ``shardId-000000000007`` is partition 7 (Kinesis's
id format: ``shardId-`` and twelve digits). As Kinesis's CreateStream does, the shards split the hash key
space [0, 2^128 - 1] evenly: shard i starts at ``i * (2^128 // N)``, ends one before the next shard starts,
and the last shard ends at 2^128 - 1 (it takes the remainder). For three shards that is [0, ...484],
[...485, ...969], [...970, 2^128 - 1], the ranges a real DescribeStream shows.

A record's hash key is its ``ExplicitHashKey`` if it has one, else the MD5 of its UTF-8 partition key read as
a big-endian 128-bit integer; it goes to the shard whose range holds that key. Parameters outside the service
model (partition key length, hash key pattern) raise ``ValidationException`` in the AWS validation message
style; a hash key of the right pattern but past 2^128 - 1 raises ``InvalidArgumentException``, as Kinesis does.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from llog.api.kinesis.errors import InvalidArgumentException, ResourceNotFoundException, ValidationException

HASH_KEY_COUNT = 2**128
MAX_HASH_KEY = HASH_KEY_COUNT - 1
SHARD_ID_PREFIX = "shardId-"
SHARD_ID_DIGITS = 12
MAX_PARTITION_KEY_LENGTH = 256
_SHARD_ID = re.compile(r"shardId-([0-9]{12})")
_HASH_KEY = re.compile(r"0|[1-9][0-9]{0,38}")


@dataclass(frozen=True)
class HashKeyRange:
    """The hash keys a shard owns, both ends included; rendered as decimal strings, as Kinesis does."""

    start: int
    end: int

    def __contains__(self, hash_key: object) -> bool:
        return isinstance(hash_key, int) and self.start <= hash_key <= self.end

    def as_kinesis(self) -> dict[str, str]:
        return {"StartingHashKey": str(self.start), "EndingHashKey": str(self.end)}


def shard_id(partition: int) -> str:
    """``shardId-000000000003`` for partition 3."""
    if not 0 <= partition < 10**SHARD_ID_DIGITS:
        raise ValueError(f"partition {partition} has no shard id")
    return f"{SHARD_ID_PREFIX}{partition:0{SHARD_ID_DIGITS}d}"


def partition_of(shard: str, shard_count: int, stream: str) -> int:
    """The partition of shard id ``shard`` in ``stream`` of ``shard_count`` shards.

    A malformed id or one past the last shard is a shard that does not exist: ``ResourceNotFoundException``.
    """
    match = _SHARD_ID.fullmatch(shard)
    if match is None or int(match.group(1)) >= shard_count:
        raise ResourceNotFoundException(f"Shard {shard} in stream {stream} does not exist")
    return int(match.group(1))


def _shard_width(shard_count: int) -> int:
    if not 1 <= shard_count <= HASH_KEY_COUNT:
        raise ValueError(f"a stream has 1 to 2^128 shards, not {shard_count}")
    return HASH_KEY_COUNT // shard_count


def hash_key_range(partition: int, shard_count: int) -> HashKeyRange:
    """The range of shard ``partition`` in a stream of ``shard_count`` shards created evenly."""
    width = _shard_width(shard_count)
    if not 0 <= partition < shard_count:
        raise ValueError(f"partition {partition} is not one of {shard_count}")
    end = MAX_HASH_KEY if partition == shard_count - 1 else (partition + 1) * width - 1
    return HashKeyRange(partition * width, end)


def parse_explicit_hash_key(explicit_hash_key: str) -> int:
    """The integer of an ``ExplicitHashKey``, checked as Kinesis checks it."""
    if _HASH_KEY.fullmatch(explicit_hash_key) is None:
        raise ValidationException(
            f"1 validation error detected: Value '{explicit_hash_key}' at 'explicitHashKey' failed to satisfy "
            r"constraint: Member must satisfy regular expression pattern: 0|([1-9]\d{0,38})"
        )
    hash_key = int(explicit_hash_key)
    if hash_key > MAX_HASH_KEY:
        raise InvalidArgumentException(
            "Invalid ExplicitHashKey. ExplicitHashKey must be in the range: [0, 2^128-1]. "
            f"Specified value was {explicit_hash_key}"
        )
    return hash_key


def hash_key_of(partition_key: str, explicit_hash_key: str | None = None) -> int:
    """The hash key of a record: its ``ExplicitHashKey``, else the MD5 of its partition key."""
    if not 1 <= len(partition_key) <= MAX_PARTITION_KEY_LENGTH:
        bound = "greater than or equal to 1" if not partition_key else "less than or equal to 256"
        raise ValidationException(
            f"1 validation error detected: Value '{partition_key}' at 'partitionKey' failed to satisfy "
            f"constraint: Member must have length {bound}"
        )
    if explicit_hash_key is not None:
        return parse_explicit_hash_key(explicit_hash_key)
    # A lone surrogate (JSON allows "\ud800") has no UTF-8; it hashes as "?", what Java's UTF-8 encoder makes of it.
    key_bytes = partition_key.encode("utf-8", "replace")
    return int.from_bytes(hashlib.md5(key_bytes, usedforsecurity=False).digest(), "big")


def shard_for(partition_key: str, explicit_hash_key: str | None, shard_count: int) -> int:
    """The partition a record goes to in a stream of ``shard_count`` evenly split shards."""
    width = _shard_width(shard_count)
    return min(hash_key_of(partition_key, explicit_hash_key) // width, shard_count - 1)
