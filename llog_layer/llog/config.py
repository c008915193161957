"""Configuration: every ``LLOG_*`` variable the library reads, and every ``*Config`` built from them.

``SETTINGS`` is the one table of variables (name, default, meaning); README.md's
Configuration section lists the same names (a test keeps them in step). Only
this module reads the environment: a component's ``from_env()`` builds its
config here, and each config can also be built directly. Nothing here reads
``.env`` files: load them in the shell (``set -a; . .env``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llog.backoff import Backoff
from llog.errors import ConfigurationError, InvalidArgument
from llog.format.keys import DEFAULT_ROOT_PREFIX, validate_root_prefix, validate_topic
from llog.format.kv.control import AppendProtocol

Environ = Mapping[str, str]

# Lambda's synchronous payload limit is 6 MB for the request and the response.
LAMBDA_PAYLOAD_LIMIT = 6 * 1024 * 1024


# The session timeouts Oxia 0.17.1 accepts (it refuses more than 5 minutes); below 2 s a keep-alive would have
# to be sent more often than every 666 ms.
OXIA_SESSION_TIMEOUT_MIN_MS, OXIA_SESSION_TIMEOUT_MAX_MS = 2_000, 300_000

@dataclass(frozen=True)
class Setting:
    name: str
    default: str  # as the variable would spell it; "" when unset means none or required
    meaning: str


SETTINGS: Mapping[str, Setting] = {
    s.name: s
    for s in (
        # Oxia
        Setting("LLOG_OXIA_SERVICE_ADDRESS", "", "host:port of the Oxia service (required)"),
        Setting("LLOG_OXIA_NAMESPACE", "default", "Oxia namespace"),
        Setting("LLOG_OXIA_SESSION_TIMEOUT_MS", "30000", "Oxia session timeout (2000 to 300000)"),
        Setting("LLOG_CLIENT_IDENTIFIER", "", "Oxia client identifier"),
        Setting("LLOG_OXIA_REQUEST_TIMEOUT_MS", "5000", "timeout of one Oxia call"),
        Setting("LLOG_OXIA_CONNECT_TIMEOUT_MS", "5000", "timeout of connecting to Oxia"),
        Setting("LLOG_OXIA_MAX_RETRIES", "3", "retries of an Oxia call that may be retried"),
        Setting("LLOG_OXIA_CLOSE_TIMEOUT_MS", "5000", "how long closing the Oxia client may take"),
        # S3
        Setting("LLOG_S3_BUCKET", "", "bucket for WAL and compacted objects (required to write)"),
        Setting("LLOG_S3_ENDPOINT_URL", "", "S3 endpoint (unset: AWS)"),
        Setting("LLOG_S3_REGION_NAME", "", "S3 region (falls back to AWS_REGION, AWS_DEFAULT_REGION)"),
        Setting("LLOG_S3_ACCESS_KEY_ID", "", "S3 access key (falls back to AWS_ACCESS_KEY_ID)"),
        Setting("LLOG_S3_SECRET_ACCESS_KEY", "", "S3 secret key (falls back to AWS_SECRET_ACCESS_KEY)"),
        Setting("LLOG_S3_SESSION_TOKEN", "", "S3 session token (falls back to AWS_SESSION_TOKEN)"),
        Setting("LLOG_S3_MAX_ATTEMPTS", "5", "attempts of one S3 call"),
        Setting("LLOG_ROOT_PREFIX", DEFAULT_ROOT_PREFIX, "prefix of every Oxia key and S3 object"),
        # writer
        Setting("LLOG_APPEND_PROTOCOL", "sequential", "append protocol of new partitions: sequential or cas"),
        Setting("LLOG_WRITER_MAX_CAS_ATTEMPTS", "64", "compare-and-set attempts of one append"),
        Setting("LLOG_WRITER_CAS_BACKOFF_INITIAL_MS", "2", "first backoff after a lost compare-and-set"),
        Setting("LLOG_WRITER_CAS_BACKOFF_MAX_MS", "200", "longest backoff after a lost compare-and-set"),
        Setting("LLOG_WRITER_MAX_COMMIT_DELAY_MS", "60000", "latest reservation after a WAL object's PUT began"),
        Setting("LLOG_WRITER_COMMIT_CONCURRENCY", "16", "partitions of one shared append committed at once"),
        Setting("LLOG_INLINE_BATCH_MAX_BYTES", "1024", "a batch this small is also kept in its index entry (0: off)"),
        Setting("LLOG_PRODUCER_EXPIRY_MS", str(7 * 24 * 3600 * 1000), "idle time after which a producer id expires"),
        # HTTP requests
        Setting("LLOG_MAX_REQUEST_BYTES", str(LAMBDA_PAYLOAD_LIMIT), "largest request body"),
        Setting("LLOG_MAX_PARTITIONS_PER_REQUEST", "100", "partitions in one produce or consume request"),
        Setting("LLOG_MAX_RECORDS_PER_REQUEST", "10000", "records in one produce request"),
        Setting("LLOG_CONSUME_MAX_WAIT_MS", "20000", "longest long poll of a consume request"),
        Setting("LLOG_CONSUME_MAX_RESPONSE_BYTES", str(4 * 1024 * 1024), "largest consume response (raw bytes)"),
        Setting("LLOG_CONSUME_DEFAULT_PARTITION_MAX_BYTES", str(1024 * 1024), "a partition's default max_bytes"),
        Setting("LLOG_CONSUME_OBJECT_CACHE_BYTES", str(256 * 1024 * 1024), "cache of compacted objects (0: off)"),
        Setting("LLOG_TAIL_CACHE_MAX_BYTES", str(512 * 1024 * 1024), "llog serve's cache of new batches (0: off)"),
        # compaction
        Setting("LLOG_COMPACTOR_MAX_OFFSETS_PER_RUN", "100000", "offsets rewritten by one compaction run"),
        Setting("LLOG_COMPACTOR_MAX_BYTES_PER_RUN", str(8 * 1024 * 1024), "bytes rewritten by one compaction run"),
        Setting("LLOG_COMPACTOR_MAX_COMMIT_DELAY_MS", "60000", "latest reference after a compacted object's PUT"),
        Setting("LLOG_COMPACTION_MIN_LAG", "1", "uncompacted offsets that make the planner schedule a partition"),
        Setting("LLOG_COMPACTION_MAX_DELAY_MS", "600000", "age of the oldest uncompacted entry that does too"),
        Setting("LLOG_COMPACTION_BUDGET_MS", "240000", "time one compaction worker spends on a task"),
        Setting("LLOG_COMPACTION_QUEUE_URL", "", "SQS queue of compaction tasks (planner)"),
        Setting("LLOG_COMPACTOR_ID", "", "name of this compactor in its claims (unset: random)"),
        # garbage collection and retention
        Setting("LLOG_GC_GRACE_MS", str(24 * 3600 * 1000), "age below which GC keeps any object"),
        Setting("LLOG_GC_MAX_DELETES_PER_RUN", "10000000", "objects one GC run deletes at most"),
        Setting("LLOG_GC_READ_CONCURRENCY", "16", "partitions GC reads, and S3 calls it sends, at once"),
        Setting("LLOG_BACKUP_KEEP", "7", "complete backups llog backup keeps (older ones are deleted)"),
        Setting("LLOG_RETENTION_MS", "0", "age of compacted ranges retention removes (0: keep)"),
        Setting("LLOG_RETENTION_BYTES", "0", "size per partition above which retention removes (0: keep)"),
        Setting("LLOG_RETENTION_TOPICS", "{}", 'per-topic retention, JSON {"topic": {"ms": …, "bytes": …}}'),
        # consumer groups
        Setting("LLOG_GROUP_EXPIRY_MS", str(7 * 24 * 3600 * 1000), "idle time after which an empty group goes"),
        # the HTTP API
        Setting("LLOG_CORS_ORIGINS", "", "origins whose pages may call the API (CORS), comma-separated; empty: none"),
        # Kinesis access keys (llog keys)
        Setting("LLOG_KEYS_KMS_KEY_ID", "", "KMS key sealing the access keys' secrets (id, ARN or alias)"),
        Setting("LLOG_KEYS_SEALING_KEY_FILE", "", "local key file sealing them instead (created if missing)"),
        Setting("LLOG_KINESIS_ACCOUNT_ID", "000000000000", "account id in the Kinesis API's stream ARNs"),
        # identity
        Setting("LLOG_BROKER_ID", "", "broker id GET /health reports (unset: function name and instance)"),
    )
}


def setting(env: Environ, name: str) -> str:
    """The variable's value, or its default from ``SETTINGS`` when unset or empty."""
    value = env.get(name)
    return value if value else SETTINGS[name].default


def default_int(name: str) -> int:
    """The default of an integer setting (the one place each default is written)."""
    return int(SETTINGS[name].default)


def setting_int(env: Environ, name: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    """An integer setting (default from ``SETTINGS``); ``ConfigurationError`` naming it when invalid."""
    return env_int(env, name, default_int(name), minimum=minimum, maximum=maximum)


def environ() -> Environ:
    """The process environment: the one place the library reads it."""
    return os.environ


def _get(env: Environ, *names: str) -> str | None:
    """The first non-empty value among ``names``: LLOG_* first, then AWS fallbacks."""
    for name in names:
        value = env.get(name)
        if value:
            return value
    return None


def env_int(env: Environ, name: str, default: int, *, minimum: int = 0, maximum: int | None = None) -> int:
    """An integer variable, ``default`` when unset; ``ConfigurationError`` naming it when invalid."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    if not re.fullmatch(r"-?[0-9]{1,18}", raw):
        raise ConfigurationError(f"{name}={raw!r} is not an integer")
    value = int(raw)
    if value < minimum:
        raise ConfigurationError(f"{name}={value} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise ConfigurationError(f"{name}={value} must be at most {maximum}")
    return value


@dataclass(frozen=True)
class OxiaConfig:
    """How to reach Oxia and how patient to be with it."""

    service_address: str
    namespace: str = "default"
    session_timeout_ms: int = default_int("LLOG_OXIA_SESSION_TIMEOUT_MS")
    client_identifier: str | None = None
    request_timeout_ms: int = default_int("LLOG_OXIA_REQUEST_TIMEOUT_MS")
    connect_timeout_ms: int = default_int("LLOG_OXIA_CONNECT_TIMEOUT_MS")
    max_retries: int = default_int("LLOG_OXIA_MAX_RETRIES")
    close_timeout_ms: int = default_int("LLOG_OXIA_CLOSE_TIMEOUT_MS")

    def __post_init__(self) -> None:
        if not self.service_address:
            raise ConfigurationError("the Oxia service address is required (LLOG_OXIA_SERVICE_ADDRESS)")
        if not OXIA_SESSION_TIMEOUT_MIN_MS <= self.session_timeout_ms <= OXIA_SESSION_TIMEOUT_MAX_MS:
            raise ConfigurationError(
                f"LLOG_OXIA_SESSION_TIMEOUT_MS must be between {OXIA_SESSION_TIMEOUT_MIN_MS} and "
                f"{OXIA_SESSION_TIMEOUT_MAX_MS} (Oxia refuses a longer session)"
            )
        if self.request_timeout_ms < 1 or self.connect_timeout_ms < 1:
            raise ConfigurationError("Oxia timeouts must be positive")

    @classmethod
    def from_env(cls, env: Environ | None = None) -> OxiaConfig:
        env = environ() if env is None else env
        address = _get(env, "LLOG_OXIA_SERVICE_ADDRESS")
        if not address:
            raise ConfigurationError("LLOG_OXIA_SERVICE_ADDRESS is not set (host:port of the Oxia service)")
        return cls(
            service_address=address,
            namespace=setting(env, "LLOG_OXIA_NAMESPACE"),
            session_timeout_ms=setting_int(
                env,
                "LLOG_OXIA_SESSION_TIMEOUT_MS",
                minimum=OXIA_SESSION_TIMEOUT_MIN_MS,
                maximum=OXIA_SESSION_TIMEOUT_MAX_MS,
            ),
            client_identifier=_get(env, "LLOG_CLIENT_IDENTIFIER"),
            request_timeout_ms=setting_int(env, "LLOG_OXIA_REQUEST_TIMEOUT_MS", minimum=1),
            connect_timeout_ms=setting_int(env, "LLOG_OXIA_CONNECT_TIMEOUT_MS", minimum=1),
            max_retries=setting_int(env, "LLOG_OXIA_MAX_RETRIES"),
            close_timeout_ms=setting_int(env, "LLOG_OXIA_CLOSE_TIMEOUT_MS"),
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
    max_attempts: int = default_int("LLOG_S3_MAX_ATTEMPTS")
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0

    @classmethod
    def from_env(cls, env: Environ | None = None) -> S3Config:
        env = environ() if env is None else env
        return cls(
            bucket=_get(env, "LLOG_S3_BUCKET"),
            endpoint_url=_get(env, "LLOG_S3_ENDPOINT_URL"),
            region_name=_get(env, "LLOG_S3_REGION_NAME", "AWS_REGION", "AWS_DEFAULT_REGION"),
            access_key_id=_get(env, "LLOG_S3_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"),
            secret_access_key=_get(env, "LLOG_S3_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY"),
            session_token=_get(env, "LLOG_S3_SESSION_TOKEN", "AWS_SESSION_TOKEN"),
            max_attempts=setting_int(env, "LLOG_S3_MAX_ATTEMPTS", minimum=1),
        )

    def require_bucket(self) -> str:
        if not self.bucket:
            raise ConfigurationError("LLOG_S3_BUCKET is not set (the bucket for WAL and compacted objects)")
        return self.bucket


def append_protocol_from_env(env: Environ | None = None) -> AppendProtocol:
    """``LLOG_APPEND_PROTOCOL``: ``sequential`` (default) or ``cas`` (docs/SEQUENTIAL_APPEND.md)."""
    env = environ() if env is None else env
    raw = setting(env, "LLOG_APPEND_PROTOCOL").strip() or SETTINGS["LLOG_APPEND_PROTOCOL"].default
    try:
        return AppendProtocol(raw.lower())
    except ValueError:
        choices = ", ".join(p.value for p in AppendProtocol)
        raise ConfigurationError(f"LLOG_APPEND_PROTOCOL={raw!r} is not one of {choices}") from None


# Inline batches ride in Oxia values (and, for CAS partitions, in meta/control's pending,
# rewritten on every reservation): they stay small.
INLINE_BATCH_LIMIT = 64 * 1024


@dataclass(frozen=True)
class WriterConfig:
    """Writer tuning: how hard to fight for ``meta/control`` under contention."""

    max_cas_attempts: int = default_int("LLOG_WRITER_MAX_CAS_ATTEMPTS")
    cas_backoff_initial_ms: int = default_int("LLOG_WRITER_CAS_BACKOFF_INITIAL_MS")
    cas_backoff_max_ms: int = default_int("LLOG_WRITER_CAS_BACKOFF_MAX_MS")
    # No reservation is attempted later than this after the WAL blob's PUT
    # began; garbage collection's grace period must exceed it (docs/GC.md).
    max_commit_delay_ms: int = default_int("LLOG_WRITER_MAX_COMMIT_DELAY_MS")
    # The protocol of the partitions this writer *creates*; an existing
    # partition keeps the one its meta/control names (docs/SEQUENTIAL_APPEND.md).
    append_protocol: AppendProtocol = AppendProtocol.SEQUENTIAL
    # The partitions of one shared append commit concurrently, so a request
    # touching many partitions pays about one Oxia round trip, not one each.
    commit_concurrency: int = default_int("LLOG_WRITER_COMMIT_CONCURRENCY")
    # An idempotent producer's id and its per-partition state expire after this long unused.
    producer_expiry_ms: int = default_int("LLOG_PRODUCER_EXPIRY_MS")
    # An encoded batch up to this size is also written into its index entry, so a
    # reader of the log's tail gets it from Oxia without an S3 GET (0: never).
    inline_batch_max_bytes: int = default_int("LLOG_INLINE_BATCH_MAX_BYTES")

    @classmethod
    def from_env(cls, env: Environ | None = None) -> WriterConfig:
        env = environ() if env is None else env
        return cls(
            max_cas_attempts=setting_int(env, "LLOG_WRITER_MAX_CAS_ATTEMPTS", minimum=1),
            cas_backoff_initial_ms=setting_int(env, "LLOG_WRITER_CAS_BACKOFF_INITIAL_MS"),
            cas_backoff_max_ms=setting_int(env, "LLOG_WRITER_CAS_BACKOFF_MAX_MS"),
            max_commit_delay_ms=setting_int(env, "LLOG_WRITER_MAX_COMMIT_DELAY_MS", minimum=1),
            append_protocol=append_protocol_from_env(env),
            commit_concurrency=setting_int(env, "LLOG_WRITER_COMMIT_CONCURRENCY", minimum=1),
            producer_expiry_ms=setting_int(env, "LLOG_PRODUCER_EXPIRY_MS", minimum=1),
            inline_batch_max_bytes=setting_int(env, "LLOG_INLINE_BATCH_MAX_BYTES", maximum=INLINE_BATCH_LIMIT),
        )

    def cas_backoff(self) -> Backoff:
        """A fresh backoff for one compare-and-set retry loop on ``meta/control``."""
        return Backoff(self.cas_backoff_initial_ms / 1000, self.cas_backoff_max_ms / 1000)


def root_prefix_from_env(env: Environ | None = None) -> str:
    env = environ() if env is None else env
    try:
        return validate_root_prefix(setting(env, "LLOG_ROOT_PREFIX"))
    except InvalidArgument as exc:
        raise ConfigurationError(f"LLOG_ROOT_PREFIX: {exc}") from None


@dataclass(frozen=True)
class SealingConfig:
    """What seals the secrets of the access keys llog issues (``llog.store.sealing``): a KMS key, or a local key
    file; with both set, KMS."""

    kms_key_id: str | None = None
    key_file: str | None = None

    @classmethod
    def from_env(cls, env: Environ | None = None) -> SealingConfig:
        env = environ() if env is None else env
        return cls(_get(env, "LLOG_KEYS_KMS_KEY_ID"), _get(env, "LLOG_KEYS_SEALING_KEY_FILE"))


@dataclass(frozen=True)
class CompactorConfig:
    max_offsets_per_run: int = default_int("LLOG_COMPACTOR_MAX_OFFSETS_PER_RUN")
    max_bytes_per_run: int = default_int("LLOG_COMPACTOR_MAX_BYTES_PER_RUN")
    # meta/compaction (the first reference to a new object) is never created
    # later than this after the object's PUT began; GC's grace must exceed it.
    max_commit_delay_ms: int = default_int("LLOG_COMPACTOR_MAX_COMMIT_DELAY_MS")
    # Idle producer states (llog.protocol.producers) are deleted when compaction reads them.
    producer_expiry_ms: int = default_int("LLOG_PRODUCER_EXPIRY_MS")

    @classmethod
    def from_env(cls, env: Environ | None = None) -> CompactorConfig:
        env = environ() if env is None else env
        return cls(
            max_offsets_per_run=setting_int(env, "LLOG_COMPACTOR_MAX_OFFSETS_PER_RUN", minimum=1),
            max_bytes_per_run=setting_int(env, "LLOG_COMPACTOR_MAX_BYTES_PER_RUN", minimum=1),
            max_commit_delay_ms=setting_int(env, "LLOG_COMPACTOR_MAX_COMMIT_DELAY_MS", minimum=1),
            producer_expiry_ms=setting_int(env, "LLOG_PRODUCER_EXPIRY_MS", minimum=1),
        )



@dataclass(frozen=True)
class RetentionPolicy:
    """Limits of one topic's partitions; ``None`` means no limit."""

    max_age_ms: int | None = None  # a compacted range older than this (since it was compacted) goes
    max_bytes: int | None = None  # per partition: the oldest ranges go while the partition is larger

    @property
    def keeps_everything(self) -> bool:
        return self.max_age_ms is None and self.max_bytes is None


def _limit(value: Any, what: str) -> int | None:
    """A positive integer limit; 0, negative or null means none (Kafka's -1 works too)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{what} must be an integer, got {value!r}")
    return value if value > 0 else None


@dataclass(frozen=True)
class RetentionConfig:
    default: RetentionPolicy = field(default_factory=RetentionPolicy)
    topics: Mapping[str, RetentionPolicy] = field(default_factory=dict)

    def policy(self, topic: str) -> RetentionPolicy:
        return self.topics.get(topic, self.default)

    @property
    def keeps_everything(self) -> bool:
        return self.default.keeps_everything and all(p.keeps_everything for p in self.topics.values())

    @classmethod
    def from_env(cls, env: Environ | None = None) -> RetentionConfig:
        """``LLOG_RETENTION_MS`` and ``LLOG_RETENTION_BYTES`` (0 or unset: no limit) for every topic;
        ``LLOG_RETENTION_TOPICS``, a JSON object ``{"topic": {"ms": …, "bytes": …}}``, per topic
        (a key left out of a topic's object means no limit)."""
        env = environ() if env is None else env
        default = RetentionPolicy(
            _limit(setting_int(env, "LLOG_RETENTION_MS", minimum=-1), "LLOG_RETENTION_MS"),
            _limit(setting_int(env, "LLOG_RETENTION_BYTES", minimum=-1), "LLOG_RETENTION_BYTES"),
        )
        raw = env.get("LLOG_RETENTION_TOPICS") or "{}"
        try:
            doc = json.loads(raw)
        except ValueError:
            raise ConfigurationError(f"LLOG_RETENTION_TOPICS is not JSON: {raw!r}") from None
        if not isinstance(doc, dict):
            raise ConfigurationError('LLOG_RETENTION_TOPICS must be a JSON object {"topic": {"ms": …, "bytes": …}}')
        topics = {}
        for topic, limits in doc.items():
            what = f"LLOG_RETENTION_TOPICS[{topic!r}]"
            try:
                validate_topic(topic)
            except ValueError as exc:
                raise ConfigurationError(f"{what}: {exc}") from None
            if not isinstance(limits, dict) or set(limits) - {"ms", "bytes"}:
                raise ConfigurationError(f'{what} must be an object with "ms" and/or "bytes"')
            topics[topic] = RetentionPolicy(
                _limit(limits.get("ms"), f"{what}.ms"), _limit(limits.get("bytes"), f"{what}.bytes")
            )
        return cls(default, topics)


def cors_origins_from_env(env: Environ | None = None) -> tuple[str, ...]:
    """``LLOG_CORS_ORIGINS``: the origins the API functions answer with CORS headers (docs/CONSOLE.md)."""
    raw = setting(environ() if env is None else env, "LLOG_CORS_ORIGINS")
    return tuple(origin.strip() for origin in raw.split(",") if origin.strip())


def backup_keep_from_env(env: Environ | None = None) -> int:
    """``LLOG_BACKUP_KEEP``: how many complete backups ``llog backup`` keeps (docs/RECOVERY.md)."""
    return setting_int(environ() if env is None else env, "LLOG_BACKUP_KEEP", minimum=1)


@dataclass(frozen=True)
class GcConfig:
    grace_ms: int = default_int("LLOG_GC_GRACE_MS")
    max_deletes_per_run: int = default_int("LLOG_GC_MAX_DELETES_PER_RUN")
    # Partitions read (references, retention, compacted objects) and S3 calls sent (DeleteObjects, the
    # headers of WAL blobs from before the namespace's identity) at once: one at a time, their latency
    # would bound a run (a Lambda invocation) at 10,000 partitions.
    read_concurrency: int = default_int("LLOG_GC_READ_CONCURRENCY")
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    # Producer ids idle this long are deleted by each run (llog.protocol.producers).
    producer_expiry_ms: int = default_int("LLOG_PRODUCER_EXPIRY_MS")

    @classmethod
    def from_env(cls, env: Environ | None = None) -> GcConfig:
        env = environ() if env is None else env
        config = cls(
            grace_ms=setting_int(env, "LLOG_GC_GRACE_MS", minimum=1),
            max_deletes_per_run=setting_int(env, "LLOG_GC_MAX_DELETES_PER_RUN", minimum=1),
            read_concurrency=setting_int(env, "LLOG_GC_READ_CONCURRENCY", minimum=1),
            retention=RetentionConfig.from_env(env),
            producer_expiry_ms=setting_int(env, "LLOG_PRODUCER_EXPIRY_MS", minimum=1),
        )
        commit_delay = max(setting_int(env, "LLOG_WRITER_MAX_COMMIT_DELAY_MS"),
                           setting_int(env, "LLOG_COMPACTOR_MAX_COMMIT_DELAY_MS"))
        if config.grace_ms <= 2 * commit_delay:
            raise ConfigurationError(
                f"LLOG_GC_GRACE_MS={config.grace_ms} must exceed twice the longest commit delay ({commit_delay} ms) "
                "to cover clock skew between writers and the collector"
            )
        return config



@dataclass(frozen=True)
class Limits:
    """Request limits, from ``LLOG_*`` variables; each violation is a 4xx naming the limit."""

    max_request_bytes: int = default_int("LLOG_MAX_REQUEST_BYTES")
    max_partitions_per_request: int = default_int("LLOG_MAX_PARTITIONS_PER_REQUEST")
    max_records_per_request: int = default_int("LLOG_MAX_RECORDS_PER_REQUEST")
    # Safely below API Gateway's 29 s integration timeout.
    max_wait_ms: int = default_int("LLOG_CONSUME_MAX_WAIT_MS")
    # Raw bytes: base64 inflates them by 4/3, which must stay under Lambda's 6 MB.
    max_response_bytes: int = default_int("LLOG_CONSUME_MAX_RESPONSE_BYTES")
    default_partition_max_bytes: int = default_int("LLOG_CONSUME_DEFAULT_PARTITION_MAX_BYTES")

    @classmethod
    def from_env(cls, env: Environ | None = None) -> Limits:
        env = environ() if env is None else env
        return cls(
            max_request_bytes=setting_int(env, "LLOG_MAX_REQUEST_BYTES", minimum=1),
            max_partitions_per_request=setting_int(env, "LLOG_MAX_PARTITIONS_PER_REQUEST", minimum=1),
            max_records_per_request=setting_int(env, "LLOG_MAX_RECORDS_PER_REQUEST", minimum=1),
            max_wait_ms=setting_int(env, "LLOG_CONSUME_MAX_WAIT_MS"),
            max_response_bytes=setting_int(env, "LLOG_CONSUME_MAX_RESPONSE_BYTES", minimum=1),
            default_partition_max_bytes=setting_int(env, "LLOG_CONSUME_DEFAULT_PARTITION_MAX_BYTES", minimum=1),
        )


@dataclass(frozen=True)
class CacheConfig:
    """Sizes of the consume path's caches; 0 turns a cache off."""

    object_cache_bytes: int = default_int("LLOG_CONSUME_OBJECT_CACHE_BYTES")
    tail_cache_bytes: int = default_int("LLOG_TAIL_CACHE_MAX_BYTES")

    @classmethod
    def from_env(cls, env: Environ | None = None) -> CacheConfig:
        env = environ() if env is None else env
        return cls(
            object_cache_bytes=setting_int(env, "LLOG_CONSUME_OBJECT_CACHE_BYTES"),
            tail_cache_bytes=setting_int(env, "LLOG_TAIL_CACHE_MAX_BYTES"),
        )


@dataclass(frozen=True)
class CompactionScheduleConfig:
    """The planner's thresholds (size or age) and queue, and one worker's time budget and name."""

    min_lag: int = default_int("LLOG_COMPACTION_MIN_LAG")
    max_delay_ms: int = default_int("LLOG_COMPACTION_MAX_DELAY_MS")
    budget_ms: int = default_int("LLOG_COMPACTION_BUDGET_MS")
    queue_url: str | None = None
    compactor_id: str | None = None  # None: each worker names itself

    @classmethod
    def from_env(cls, env: Environ | None = None) -> CompactionScheduleConfig:
        env = environ() if env is None else env
        return cls(
            min_lag=setting_int(env, "LLOG_COMPACTION_MIN_LAG"),
            max_delay_ms=setting_int(env, "LLOG_COMPACTION_MAX_DELAY_MS"),
            budget_ms=setting_int(env, "LLOG_COMPACTION_BUDGET_MS"),
            queue_url=_get(env, "LLOG_COMPACTION_QUEUE_URL"),
            compactor_id=_get(env, "LLOG_COMPACTOR_ID"),
        )

    def require_queue_url(self) -> str:
        if not self.queue_url:
            raise ConfigurationError("LLOG_COMPACTION_QUEUE_URL is not set (the compaction task queue)")
        return self.queue_url


def group_expiry_ms_from_env(env: Environ | None = None) -> int:
    """``LLOG_GROUP_EXPIRY_MS``: how long a group with no live member and no commit is kept (docs/GROUPS.md)."""
    return setting_int(environ() if env is None else env, "LLOG_GROUP_EXPIRY_MS", minimum=1)


def kinesis_account_from_env(env: Environ | None = None) -> str:
    """``LLOG_KINESIS_ACCOUNT_ID``: the account the Kinesis API names in stream ARNs (12 digits)."""
    account = _get(environ() if env is None else env, "LLOG_KINESIS_ACCOUNT_ID") or "000000000000"
    if not (len(account) == 12 and account.isdigit()):
        raise ConfigurationError(f"LLOG_KINESIS_ACCOUNT_ID must be 12 digits, not {account!r}")
    return account


def broker_id_from_env(env: Environ | None = None) -> str | None:
    """``LLOG_BROKER_ID``: the name ``GET /health`` reports, if the operator set one."""
    return _get(environ() if env is None else env, "LLOG_BROKER_ID")
