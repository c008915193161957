"""Configuration from ``LLOG_*`` environment variables (README.md, Configuration) or arguments.

Every component has ``from_env()``; each config can also be built directly.
Nothing here reads ``.env`` files: load them in the shell (``set -a; . .env``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from llog.backoff import Backoff
from llog.errors import ConfigurationError, InvalidArgument
from llog.format.documents import AppendProtocol
from llog.format.keys import DEFAULT_ROOT_PREFIX, validate_root_prefix

Environ = Mapping[str, str]


def _get(env: Environ, *names: str) -> str | None:
    """The first non-empty value among ``names``: LLOG_* first, then AWS fallbacks."""
    for name in names:
        value = env.get(name)
        if value:
            return value
    return None


def env_int(env: Environ, name: str, default: int, *, minimum: int = 0) -> int:
    """An integer variable, ``default`` when unset; ``ConfigurationError`` naming it when invalid."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    if not re.fullmatch(r"-?[0-9]{1,18}", raw):
        raise ConfigurationError(f"{name}={raw!r} is not an integer")
    value = int(raw)
    if value < minimum:
        raise ConfigurationError(f"{name}={value} must be at least {minimum}")
    return value


@dataclass(frozen=True)
class OxiaConfig:
    """How to reach Oxia and how patient to be with it."""

    service_address: str
    namespace: str = "default"
    session_timeout_ms: int = 30_000
    client_identifier: str | None = None
    request_timeout_ms: int = 5_000
    connect_timeout_ms: int = 5_000
    max_retries: int = 3
    close_timeout_ms: int = 5_000

    def __post_init__(self) -> None:
        if not self.service_address:
            raise ConfigurationError("the Oxia service address is required (LLOG_OXIA_SERVICE_ADDRESS)")
        if self.session_timeout_ms < 2_000:
            raise ConfigurationError("LLOG_OXIA_SESSION_TIMEOUT_MS must be at least 2000 (an Oxia client limit)")
        if self.request_timeout_ms < 1 or self.connect_timeout_ms < 1:
            raise ConfigurationError("Oxia timeouts must be positive")

    @classmethod
    def from_env(cls, env: Environ | None = None) -> OxiaConfig:
        env = os.environ if env is None else env
        address = _get(env, "LLOG_OXIA_SERVICE_ADDRESS")
        if not address:
            raise ConfigurationError("LLOG_OXIA_SERVICE_ADDRESS is not set (host:port of the Oxia service)")
        return cls(
            service_address=address,
            namespace=_get(env, "LLOG_OXIA_NAMESPACE") or "default",
            session_timeout_ms=env_int(env, "LLOG_OXIA_SESSION_TIMEOUT_MS", 30_000, minimum=2_000),
            client_identifier=_get(env, "LLOG_CLIENT_IDENTIFIER"),
            request_timeout_ms=env_int(env, "LLOG_OXIA_REQUEST_TIMEOUT_MS", 5_000, minimum=1),
            connect_timeout_ms=env_int(env, "LLOG_OXIA_CONNECT_TIMEOUT_MS", 5_000, minimum=1),
            max_retries=env_int(env, "LLOG_OXIA_MAX_RETRIES", 3),
            close_timeout_ms=env_int(env, "LLOG_OXIA_CLOSE_TIMEOUT_MS", 5_000),
        )


@dataclass(frozen=True)
class S3Config:
    """How to reach S3 (or an S3-compatible endpoint such as the local moto server)."""

    bucket: str | None = None
    endpoint_url: str | None = None
    region_name: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    max_attempts: int = 5
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0

    @classmethod
    def from_env(cls, env: Environ | None = None) -> S3Config:
        env = os.environ if env is None else env
        return cls(
            bucket=_get(env, "LLOG_S3_BUCKET"),
            endpoint_url=_get(env, "LLOG_S3_ENDPOINT_URL"),
            region_name=_get(env, "LLOG_S3_REGION_NAME", "AWS_REGION", "AWS_DEFAULT_REGION"),
            access_key_id=_get(env, "LLOG_S3_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"),
            secret_access_key=_get(env, "LLOG_S3_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY"),
            session_token=_get(env, "LLOG_S3_SESSION_TOKEN", "AWS_SESSION_TOKEN"),
            max_attempts=env_int(env, "LLOG_S3_MAX_ATTEMPTS", 5, minimum=1),
        )

    def require_bucket(self) -> str:
        if not self.bucket:
            raise ConfigurationError("LLOG_S3_BUCKET is not set (the bucket for WAL and compacted objects)")
        return self.bucket


def append_protocol_from_env(env: Environ | None = None) -> AppendProtocol:
    """``LLOG_APPEND_PROTOCOL``: ``cas`` (default) or ``sequential`` (docs/SEQUENTIAL_APPEND.md)."""
    env = os.environ if env is None else env
    raw = env.get("LLOG_APPEND_PROTOCOL")
    if raw is None or raw.strip() == "":
        return AppendProtocol.CAS
    try:
        return AppendProtocol(raw.strip().lower())
    except ValueError:
        choices = ", ".join(p.value for p in AppendProtocol)
        raise ConfigurationError(f"LLOG_APPEND_PROTOCOL={raw!r} is not one of {choices}") from None


@dataclass(frozen=True)
class WriterConfig:
    """Writer tuning: how hard to fight for ``meta/control`` under contention."""

    max_cas_attempts: int = 64
    cas_backoff_initial_ms: int = 2
    cas_backoff_max_ms: int = 200
    # No reservation is attempted later than this after the WAL blob's PUT
    # began; garbage collection's grace period must exceed it (docs/GC.md).
    max_commit_delay_ms: int = 60_000
    # The protocol of the partitions this writer *creates*; an existing
    # partition keeps the one its meta/control names (docs/SEQUENTIAL_APPEND.md).
    append_protocol: AppendProtocol = AppendProtocol.CAS

    @classmethod
    def from_env(cls, env: Environ | None = None) -> WriterConfig:
        env = os.environ if env is None else env
        return cls(
            max_cas_attempts=env_int(env, "LLOG_WRITER_MAX_CAS_ATTEMPTS", 64, minimum=1),
            cas_backoff_initial_ms=env_int(env, "LLOG_WRITER_CAS_BACKOFF_INITIAL_MS", 2),
            cas_backoff_max_ms=env_int(env, "LLOG_WRITER_CAS_BACKOFF_MAX_MS", 200),
            max_commit_delay_ms=env_int(env, "LLOG_WRITER_MAX_COMMIT_DELAY_MS", 60_000, minimum=1),
            append_protocol=append_protocol_from_env(env),
        )

    def cas_backoff(self) -> Backoff:
        """A fresh backoff for one compare-and-set retry loop on ``meta/control``."""
        return Backoff(self.cas_backoff_initial_ms / 1000, self.cas_backoff_max_ms / 1000)


def root_prefix_from_env(env: Environ | None = None) -> str:
    env = os.environ if env is None else env
    try:
        return validate_root_prefix(_get(env, "LLOG_ROOT_PREFIX") or DEFAULT_ROOT_PREFIX)
    except InvalidArgument as exc:
        raise ConfigurationError(f"LLOG_ROOT_PREFIX: {exc}") from None
