"""Sealing the secrets llog keeps in Oxia (the Kinesis access keys' secrets and the shard iterators' signing
key, ``llog.service.keys``), so that a copy of Oxia's data or a backup of it does not hold them in plain.

| sealer | used by | setting | how |
|---|---|---|---|
| ``KmsSealer`` (``llog.store.kms``) | a deployed stack | ``LLOG_KEYS_KMS_KEY_ID`` | KMS Encrypt and Decrypt |
| ``LocalSealer`` | ``llog serve``, ``make dev`` | ``LLOG_KEYS_SEALING_KEY_FILE`` | AES-256-GCM, key in a file |

``sealer_from_env`` picks KMS when its key is set, else the local file. Opening what was altered, or what was
sealed under another key, raises ``SealingFailed``.

``LocalSealer`` needs the ``cryptography`` package, which the Lambda layer does not ship (the functions seal
with KMS); it is imported when a ``LocalSealer`` is made.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import uuid
from pathlib import Path
from typing import Protocol

from llog.config import SealingConfig
from llog.errors import ConfigurationError, SealingFailed

KEY_BYTES = 32  # AES-256
_NONCE_BYTES = 12
_TAG_BYTES = 16
_LOCAL_FORMAT = b"\x01"  # the first byte of what LocalSealer seals: the layout's version


class SecretSealer(Protocol):
    """Seals a secret for storage and opens it again; ``open`` raises ``SealingFailed`` on anything it did not
    seal under its key."""

    def seal(self, plain: bytes) -> bytes: ...

    def open(self, sealed: bytes) -> bytes: ...


class LocalSealer:
    """AES-256-GCM under a key of ``KEY_BYTES`` bytes: ``version byte | 12-byte random nonce | ciphertext | tag``."""

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ConfigurationError(f"a sealing key is {KEY_BYTES} bytes, not {len(key)}")
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError:
            raise ConfigurationError(
                "LLOG_KEYS_SEALING_KEY_FILE needs the cryptography package (pip install cryptography); "
                "a deployed stack seals with KMS instead (LLOG_KEYS_KMS_KEY_ID)"
            ) from None
        self._aead = AESGCM(key)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> LocalSealer:
        """The key in ``path`` (base64 of ``KEY_BYTES`` bytes); a new random one, mode 0600, if there is none."""
        return cls(read_or_create_key_file(Path(path)))

    def seal(self, plain: bytes) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        return _LOCAL_FORMAT + nonce + self._aead.encrypt(nonce, plain, None)

    def open(self, sealed: bytes) -> bytes:
        from cryptography.exceptions import InvalidTag

        if len(sealed) < 1 + _NONCE_BYTES + _TAG_BYTES or sealed[:1] != _LOCAL_FORMAT:
            raise SealingFailed("not a secret sealed by a local sealing key (LLOG_KEYS_SEALING_KEY_FILE)")
        nonce, ciphertext = sealed[1 : 1 + _NONCE_BYTES], sealed[1 + _NONCE_BYTES :]
        try:
            return self._aead.decrypt(nonce, ciphertext, None)
        except InvalidTag:
            raise SealingFailed(
                "a sealed secret does not open under the local sealing key: it was altered, or sealed under "
                "another key (LLOG_KEYS_SEALING_KEY_FILE changed?)"
            ) from None


def read_or_create_key_file(path: Path) -> bytes:
    """The key ``path`` holds. A missing file is created first, with a random key, readable by its owner alone.

    The new file is written under a name of its own and then linked into place, so two processes starting at
    once both end up reading the one key that won, never a half-written file.
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(descriptor, "w") as file:
                file.write(base64.b64encode(os.urandom(KEY_BYTES)).decode("ascii") + "\n")
                file.flush()
                os.fsync(file.fileno())
            with contextlib.suppress(FileExistsError):  # another process created it first: its key is the one
                os.link(draft, path)
        finally:
            draft.unlink()
    try:
        text = path.read_text(encoding="ascii")
        key = base64.b64decode(text.strip(), validate=True)
    except (OSError, UnicodeDecodeError, binascii.Error) as exc:
        raise ConfigurationError(f"LLOG_KEYS_SEALING_KEY_FILE ({path}) cannot be read as a base64 key: {exc}") from None
    if len(key) != KEY_BYTES:
        raise ConfigurationError(f"LLOG_KEYS_SEALING_KEY_FILE ({path}) holds {len(key)} bytes, not {KEY_BYTES}")
    return key


def sealer_for(config: SealingConfig) -> SecretSealer:
    """KMS when its key is configured, else the local key file; ``ConfigurationError`` with neither."""
    if config.kms_key_id:
        from llog.store.kms import KmsSealer

        return KmsSealer(config.kms_key_id)
    if config.key_file:
        return LocalSealer.from_file(config.key_file)
    raise ConfigurationError(
        "no key seals the access keys' secrets: set LLOG_KEYS_KMS_KEY_ID (a KMS key, in AWS) or "
        "LLOG_KEYS_SEALING_KEY_FILE (a local key file, created if missing)"
    )


def sealer_from_env() -> SecretSealer:
    return sealer_for(SealingConfig.from_env())
