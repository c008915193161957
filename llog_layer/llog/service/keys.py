"""The access keys llog issues for its Kinesis API, and the key that signs its shard iterators.

An access key is an id (``LLOG`` and 16 characters of ``A-Z2-7``, shaped as AWS's are), a secret of 40
characters shown once, when the key is made, a name, and permissions: the streams (``fnmatch`` patterns of
topic names) and the actions (``read``, ``write``, ``admin``) it may use. Each key is one Oxia record on the
catalogue's shard, its secret sealed (``llog.format.kv.access_keys``, ``llog.store.sealing``). The Kinesis API
checks a request's SigV4 signature against the secret ``lookup`` returns for the key id it names, then the
permissions against what the request does. ``llog keys create|list|revoke`` manage them (``llog.cli``).

``lookup`` keeps what it read, a key or its absence, for ``cache_ttl_s``: every process refuses a revoked key
within that time of the revoke, and a request costs no Oxia read while its key is cached. A key is unknown for
as long to a process that looked its id up before the key existed, which takes guessing a random id.

``iterator_key`` is the one secret every process of a deployment signs Kinesis shard iterators with, so that an
iterator one process handed out is accepted by any other: the first process to need it creates it
(create-only, sealed), every other reads that one, and each keeps it for its lifetime.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from llog.errors import CorruptMetadata, InvalidArgument, VersionConflict
from llog.format.kv.access_keys import (
    AccessKeyKeys,
    AccessKeyRecord,
    IteratorKeyRecord,
    is_access_key_id,
    new_access_key_id,
)
from llog.store.oxia import CREATE_ONLY, OxiaStore
from llog.store.sealing import KEY_BYTES, SecretSealer

ACTIONS = ("read", "write", "admin")
SECRET_LENGTH = 40  # as AWS's secret access keys: token_urlsafe gives 4 characters per 3 random bytes
MAX_NAME_LENGTH = 128
MAX_STREAM_PATTERNS = 64
# A stream pattern: a topic name's characters and fnmatch's * ? [ ] !, a little longer than a topic name may be.
_PATTERN_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-*?[]!")
_MAX_PATTERN_LENGTH = 256
_MAX_CACHED = 10_000  # looked-up ids kept at most; a flood of made-up ids cannot grow the cache further
_CREATE_ATTEMPTS = 3  # a new id is taken only if a put met another key's record: never, at 2**80 ids


def new_secret() -> str:
    return secrets.token_urlsafe(SECRET_LENGTH * 3 // 4)


def validate_key_name(name: object) -> str:
    """Return ``name`` if it can name a key: 1 to 128 printable characters."""
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME_LENGTH or not name.isprintable():
        raise InvalidArgument(f"invalid key name {name!r}: expected 1 to {MAX_NAME_LENGTH} printable characters")
    return name


@dataclass(frozen=True)
class KeyPermissions:
    """What a key may do: ``read``, ``write`` and ``admin`` on the streams one of ``streams`` matches.

    ``streams`` are ``fnmatch`` patterns of stream (topic) names, matched case-sensitively: ``("*",)`` is every
    stream, ``("orders-*", "audit")`` two families. Each action is granted on its own: ``admin`` (creating,
    deleting and describing streams) grants neither reading nor writing.
    """

    streams: tuple[str, ...] = ("*",)
    read: bool = True
    write: bool = True
    admin: bool = False

    def __post_init__(self) -> None:
        streams = self.streams
        if isinstance(streams, str) or not isinstance(streams, Iterable):
            raise InvalidArgument(f"stream patterns must be a sequence of patterns, not {streams!r}")
        object.__setattr__(self, "streams", tuple(streams))
        if not 1 <= len(self.streams) <= MAX_STREAM_PATTERNS:
            raise InvalidArgument(f"a key needs 1 to {MAX_STREAM_PATTERNS} stream patterns, not {len(self.streams)}")
        for pattern in self.streams:
            if (
                not isinstance(pattern, str)
                or not 1 <= len(pattern) <= _MAX_PATTERN_LENGTH
                or not set(pattern) <= _PATTERN_CHARACTERS
            ):
                raise InvalidArgument(
                    f"invalid stream pattern {pattern!r}: expected 1 to {_MAX_PATTERN_LENGTH} characters of "
                    "[A-Za-z0-9._-] and the wildcards * ? [ ] !"
                )
        if not all(isinstance(flag, bool) for flag in (self.read, self.write, self.admin)):
            raise InvalidArgument("read, write and admin are booleans")
        if not (self.read or self.write or self.admin):
            raise InvalidArgument("a key needs at least one of read, write and admin")

    def allows(self, stream: str, action: str) -> bool:
        """Whether ``action`` (one of ``ACTIONS``) is granted on ``stream``."""
        if action not in ACTIONS:
            raise InvalidArgument(f"unknown action {action!r}: expected one of {', '.join(ACTIONS)}")
        granted: bool = getattr(self, action)
        return granted and any(fnmatchcase(stream, pattern) for pattern in self.streams)


@dataclass(frozen=True)
class AccessKey:
    """An access key as listed: everything but its secret."""

    access_key_id: str
    name: str
    permissions: KeyPermissions
    created_ms: int


def _permissions(record: AccessKeyRecord, what: str) -> KeyPermissions:
    try:
        return KeyPermissions(record.streams, record.read, record.write, record.admin)
    except InvalidArgument as exc:
        raise CorruptMetadata(f"{what}: {exc}") from None


class AccessKeys:
    """The access keys of one deployment (``root``) in Oxia, their secrets sealed by ``sealer``.

    Safe to share between threads. ``clock`` (seconds since the epoch) stamps new keys and ages the cache.
    """

    def __init__(
        self,
        oxia: OxiaStore,
        *,
        root: str,
        sealer: SecretSealer,
        cache_ttl_s: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._oxia = oxia
        self._keys = AccessKeyKeys(root)
        self._sealer = sealer
        self._cache_ttl_s = cache_ttl_s
        self._clock = clock
        self._cache: dict[str, tuple[float, tuple[str, KeyPermissions] | None]] = {}
        self._cache_lock = threading.Lock()
        self._revocations = 0  # revokes by this process: a lookup that read across one does not cache its read
        self._iterator_key: bytes | None = None
        self._iterator_key_lock = threading.Lock()

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def create(self, name: str, permissions: KeyPermissions) -> tuple[AccessKey, str]:
        """A new key: ``(the key, its secret)``. The secret is stored sealed and cannot be read back."""
        validate_key_name(name)
        secret = new_secret()
        record = AccessKeyRecord(
            name=name,
            sealed_secret=self._sealer.seal(secret.encode("ascii")),
            streams=permissions.streams,
            read=permissions.read,
            write=permissions.write,
            admin=permissions.admin,
            created_at_ms=self._now_ms(),
        )
        value = record.encode()
        for _ in range(_CREATE_ATTEMPTS):
            access_key_id = new_access_key_id()
            if self._create_record(self._keys.access_key(access_key_id), value):
                return AccessKey(access_key_id, name, permissions, record.created_at_ms), secret
        raise VersionConflict(f"{_CREATE_ATTEMPTS} new access key ids in a row were taken already")

    def _create_record(self, key: str, value: bytes) -> bool:
        """Create ``key`` holding ``value``; False if another record holds the key."""
        try:
            self._oxia.put(key, value, partition_key=self._keys.partition_key, expected_version_id=CREATE_ONLY)
            return True
        except VersionConflict:
            # A retried put may meet its own first attempt's record (an ambiguous conflict): then it is ours.
            found = self._oxia.get(key, partition_key=self._keys.partition_key)
            return found is not None and found.value == value

    def list(self) -> list[AccessKey]:
        """Every key, oldest first."""
        found: list[AccessKey] = []
        scanned = self._oxia.range_scan(self._keys.prefix, self._keys.scan_end, partition_key=self._keys.partition_key)
        for versioned in scanned:
            access_key_id = self._keys.parse_access_key(versioned.key)
            if access_key_id is None:
                continue  # the scan stays at one depth under the prefix: only ids, but a key is checked anyway
            record = AccessKeyRecord.decode(versioned.value, versioned.key)
            permissions = _permissions(record, versioned.key)
            found.append(AccessKey(access_key_id, record.name, permissions, record.created_at_ms))
        return sorted(found, key=lambda k: (k.created_ms, k.access_key_id))

    def revoke(self, access_key_id: str) -> bool:
        """Delete the key; False if there is none of that id. This process refuses it from the return on, others
        within ``cache_ttl_s``."""
        if not is_access_key_id(access_key_id):
            return False
        deleted = self._oxia.delete(self._keys.access_key(access_key_id), partition_key=self._keys.partition_key)
        with self._cache_lock:  # after the delete: a lookup that read the key before it caches nothing now
            self._cache.pop(access_key_id, None)
            self._revocations += 1
        return deleted

    def lookup(self, access_key_id: str) -> tuple[str, KeyPermissions] | None:
        """``(secret, permissions)`` of the key, or None if there is none; cached for ``cache_ttl_s``.

        Raises ``SealingFailed`` when the stored secret does not open under the configured sealer, and
        ``OxiaUnavailable`` (or ``SealerUnavailable``) when a store does not answer.
        """
        if not is_access_key_id(access_key_id):
            return None  # never a key: nothing to read, and nothing made up reaches an Oxia key
        now = self._clock()
        with self._cache_lock:
            cached = self._cache.get(access_key_id)
            revocations = self._revocations
        if cached is not None and cached[0] > now:
            return cached[1]
        found = self._read(access_key_id)
        with self._cache_lock:
            if self._revocations != revocations:  # a revoke ran meanwhile: what was read may be gone
                return found
            if len(self._cache) >= _MAX_CACHED:
                self._cache = {k: entry for k, entry in self._cache.items() if entry[0] > now}
                if len(self._cache) >= _MAX_CACHED:
                    self._cache.clear()
            self._cache[access_key_id] = (now + self._cache_ttl_s, found)
        return found

    def _read(self, access_key_id: str) -> tuple[str, KeyPermissions] | None:
        key = self._keys.access_key(access_key_id)
        found = self._oxia.get(key, partition_key=self._keys.partition_key)
        if found is None:
            return None
        record = AccessKeyRecord.decode(found.value, key)
        secret = self._sealer.open(record.sealed_secret)
        try:
            return secret.decode("ascii"), _permissions(record, key)
        except UnicodeDecodeError:
            raise CorruptMetadata(f"{key}: the sealed secret is not text") from None

    def iterator_key(self) -> bytes:
        """The ``KEY_BYTES``-byte secret every process of the deployment signs shard iterators with."""
        with self._iterator_key_lock:
            if self._iterator_key is None:
                self._iterator_key = self._read_or_create_iterator_key()
            return self._iterator_key

    def _read_or_create_iterator_key(self) -> bytes:
        key, partition_key = self._keys.iterator_key, self._keys.partition_key
        found = self._oxia.get(key, partition_key=partition_key)
        if found is None:
            created = os.urandom(KEY_BYTES)
            record = IteratorKeyRecord(self._sealer.seal(created), self._now_ms())
            try:
                self._oxia.put(key, record.encode(), partition_key=partition_key, expected_version_id=CREATE_ONLY)
                return created
            except VersionConflict:  # another process created it first (or this put's own first attempt did)
                found = self._oxia.get(key, partition_key=partition_key)
                if found is None:
                    raise  # nothing deletes the record: a conflict without one is not ours to explain
        opened = self._sealer.open(IteratorKeyRecord.decode(found.value, key).sealed_key)
        if len(opened) != KEY_BYTES:
            raise CorruptMetadata(f"{key}: the iterator key is {len(opened)} bytes, not {KEY_BYTES}")
        return opened
