"""The consumer groups' records (``llog.protocol.groups``, docs/GROUPS.md): their keys and their document.

One Oxia record per group::

    {root}/__catalog/groups/{group}        partition_key "__groups/{group}"

    {"generation": 3, "members": {"m-1": {"topics": ["orders"], "session_timeout_ms": 30000,
     "expires_at_ms": …, "assignment": {"orders": [0, 1]}}}, "partitions": {"orders": 2},
     "offsets": {"orders": {"0": 42}}, "offset_topics": {"orders": "…"}, "touched_at_ms": …}

``__catalog`` is a reserved topic name, so no topic's keys can share the
folder; the registry's ``__catalog/partitions/`` and ``__catalog/topics/``
are its siblings at the same depth, and every scan of theirs is bounded by
its own folder (``partitions/``..``partitions/~``), which ``groups/`` sorts
before. A group's partition key is its own, so groups spread over the shards;
listing them is one key listing of this folder across shards. The partition
key cannot equal a partition's (``{topic}:{partition}``): it holds a ``/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import msgspec

from llog.errors import InvalidArgument
from llog.format.keys import DEFAULT_ROOT_PREFIX, validate_root_prefix
from llog.format.kv.document import NonNegative, decode_document

GROUP_PATTERN = "[A-Za-z0-9._-]{1,249}"  # the topic name rules
MEMBER_ID_PATTERN = "[A-Za-z0-9._-]{1,128}"
_GROUP_RE = re.compile(GROUP_PATTERN)
_MEMBER_RE = re.compile(MEMBER_ID_PATTERN)
RESERVED_GROUPS = (".", "..")


def validate_group(group: object) -> str:
    """Return ``group`` if it follows the topic name rules, else raise ``InvalidArgument``."""
    if not isinstance(group, str) or not _GROUP_RE.fullmatch(group) or group in RESERVED_GROUPS:
        raise InvalidArgument(f"invalid group {group!r}: expected 1-249 characters from [A-Za-z0-9._-], not . or ..")
    return group


def validate_member_id(member_id: object) -> str:
    if not isinstance(member_id, str) or not _MEMBER_RE.fullmatch(member_id):
        raise InvalidArgument(f"invalid member_id {member_id!r}: expected 1-128 characters from [A-Za-z0-9._-]")
    return member_id


@dataclass(frozen=True)
class GroupKeys:
    root: str = DEFAULT_ROOT_PREFIX

    def __post_init__(self) -> None:
        validate_root_prefix(self.root)

    @property
    def prefix(self) -> str:
        return f"{self.root}/__catalog/groups/"

    @property
    def scan_end(self) -> str:
        """Exclusive end of every group key: ``~`` sorts after every group character."""
        return f"{self.prefix}~"

    def group(self, group: str) -> str:
        return f"{self.prefix}{validate_group(group)}"

    @staticmethod
    def partition_key(group: str) -> str:
        return f"__groups/{validate_group(group)}"

    def parse(self, key: str) -> str | None:
        """The group a key names, or None if it is not a group key."""
        if not key.startswith(self.prefix):
            return None
        try:
            return validate_group(key[len(self.prefix) :])
        except InvalidArgument:
            return None


class StoredMember(msgspec.Struct, gc=False):
    topics: list[str]
    session_timeout_ms: NonNegative
    expires_at_ms: NonNegative
    assignment: dict[str, list[NonNegative]]


class GroupDocument(msgspec.Struct, kw_only=True, gc=False):
    """A group's record as stored. ``partitions``: per topic, a count when they are ``0..n-1``, else the list."""

    generation: NonNegative
    members: dict[str, StoredMember]
    partitions: dict[str, NonNegative | list[NonNegative]]
    offsets: dict[str, dict[NonNegative, NonNegative]]  # partition numbers stored as strings (JSON keys)
    offset_topics: dict[str, str] = {}  # absent in records written before topic identities were kept
    touched_at_ms: NonNegative

    def encode(self) -> bytes:
        return _encode_in_field_order(self)

    @classmethod
    def decode(cls, raw: bytes, group: str) -> GroupDocument:
        return decode_document(_GROUP, raw, f"the record of group {group!r}")


_GROUP = msgspec.json.Decoder(GroupDocument)
# Not the sorted encoder of the other documents: group records were always written in field order, members and
# topics sorted by the writer (``GroupState.document``), and each assignment in its own order.
_encode_in_field_order = msgspec.json.Encoder().encode
