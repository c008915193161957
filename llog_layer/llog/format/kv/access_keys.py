"""The access keys llog issues for its Kinesis API (``llog.service.keys``), on the catalogue's shard::

    {root}/__catalog/access-keys/{access_key_id}    AccessKeyRecord
    {root}/__catalog/kinesis-iterator-key           IteratorKeyRecord

An access key id looks like AWS's: ``LLOG`` and 16 characters of ``A-Z2-7``, 20 in all, so it never holds a
``/`` and every id's key has the same depth: ``[access-keys/, access-keys/~)`` holds exactly the keys (``~``
sorts after every id character). Secrets are stored sealed (``llog.store.sealing``), never in plain.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

import msgspec

from llog.errors import InvalidArgument
from llog.format.keys import DEFAULT_ROOT_PREFIX, validate_root_prefix
from llog.format.kv.document import NonNegative, Text, decode_document, encode_document

ACCESS_KEY_ID_PREFIX = "LLOG"
ACCESS_KEY_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"  # base32's, as AWS's key ids use
ACCESS_KEY_ID_LENGTH = 20
ACCESS_KEY_ID_PATTERN = f"{ACCESS_KEY_ID_PREFIX}[A-Z2-7]{{{ACCESS_KEY_ID_LENGTH - len(ACCESS_KEY_ID_PREFIX)}}}"
_ACCESS_KEY_ID_RE = re.compile(ACCESS_KEY_ID_PATTERN)


def is_access_key_id(text: object) -> bool:
    return isinstance(text, str) and _ACCESS_KEY_ID_RE.fullmatch(text) is not None


def validate_access_key_id(text: object) -> str:
    """Return ``text`` if it is an access key id llog issues, else raise ``InvalidArgument``."""
    if not isinstance(text, str) or _ACCESS_KEY_ID_RE.fullmatch(text) is None:
        raise InvalidArgument(f"invalid access key id {text!r}: expected {ACCESS_KEY_ID_PATTERN}")
    return text


def new_access_key_id() -> str:
    random_part = ACCESS_KEY_ID_LENGTH - len(ACCESS_KEY_ID_PREFIX)
    return ACCESS_KEY_ID_PREFIX + "".join(secrets.choice(ACCESS_KEY_ID_ALPHABET) for _ in range(random_part))


@dataclass(frozen=True)
class AccessKeyKeys:
    """Where the access keys and the shard iterators' signing key live: one shard (``__catalog``)."""

    root: str = DEFAULT_ROOT_PREFIX
    partition_key = "__catalog"  # not a field: every catalogue record on one shard

    def __post_init__(self) -> None:
        validate_root_prefix(self.root)

    @property
    def prefix(self) -> str:
        return f"{self.root}/__catalog/access-keys/"

    @property
    def scan_end(self) -> str:
        """Exclusive end of every access key's key (``~`` sorts after every id character)."""
        return f"{self.prefix}~"

    def access_key(self, access_key_id: str) -> str:
        return f"{self.prefix}{validate_access_key_id(access_key_id)}"

    def parse_access_key(self, key: str) -> str | None:
        """The access key id ``key`` names, or None if it is not an access key's key."""
        access_key_id = key[len(self.prefix) :] if key.startswith(self.prefix) else ""
        return access_key_id if is_access_key_id(access_key_id) else None

    @property
    def iterator_key(self) -> str:
        return f"{self.root}/__catalog/kinesis-iterator-key"


class AccessKeyRecord(msgspec.Struct, frozen=True, gc=False):
    """``{root}/__catalog/access-keys/{id}``: a key's name, its sealed secret, what it may do, when it was made.

    ``streams`` are ``fnmatch`` patterns of stream (topic) names; ``read``, ``write`` and ``admin`` the actions
    allowed on the streams they match. ``sealed_secret`` is stored as base64.
    """

    name: Text
    sealed_secret: bytes
    streams: tuple[Text, ...]
    read: bool
    write: bool
    admin: bool
    created_at_ms: NonNegative

    def encode(self) -> bytes:
        return encode_document(self)

    @classmethod
    def decode(cls, raw: bytes, what: str = "access key record") -> AccessKeyRecord:
        return decode_document(_ACCESS_KEY, raw, what)


class IteratorKeyRecord(msgspec.Struct, frozen=True, gc=False):
    """``{root}/__catalog/kinesis-iterator-key``: the sealed key that signs every process's shard iterators."""

    sealed_key: bytes
    created_at_ms: NonNegative

    def encode(self) -> bytes:
        return encode_document(self)

    @classmethod
    def decode(cls, raw: bytes, what: str = "iterator key record") -> IteratorKeyRecord:
        return decode_document(_ITERATOR_KEY, raw, what)


_ACCESS_KEY = msgspec.json.Decoder(AccessKeyRecord)
_ITERATOR_KEY = msgspec.json.Decoder(IteratorKeyRecord)
