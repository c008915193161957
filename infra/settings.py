"""Deployment settings, read from CDK context with validation and clear errors.

Every setting is a context key ``llog:<name>``: set it in ``cdk.json`` (``"context"``) or on the
command line (``npx cdk deploy -c llog:stage=prod``). Values from the command line arrive as
strings, values from ``cdk.json`` as JSON values; both are accepted. Settings marked "by stage"
default differently for production stages (``llog:productionStages``) and the others.
docs/DEPLOY.md has the same table.

This module imports nothing from aws_cdk so that it can be tested (and reused) on its own; it
checks per-topic retention with llog's own parser, so the deployed function cannot reject it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, cast

from llog.config import RetentionConfig
from llog.errors import ConfigurationError
from llog.format.kv.control import LEGACY_CAS_NAME, AppendProtocol

PREFIX = "llog:"

OxiaMode = Literal["standalone", "replicated"]
OxiaStorage = Literal["efs", "ebs"]
ApiAuth = Literal["iam", "api_key"]
BucketEncryption = Literal["s3_managed", "kms"]
ExportTableFormat = Literal["parquet", "iceberg"]
FrontDoor = Literal["rest", "http", "serve"]
ServeEndpoint = Literal["balancer", "dns"]
ServeAuth = Literal["sigv4", "none"]

OXIA_MODES: tuple[OxiaMode, ...] = ("standalone", "replicated")
# Where the data servers keep their data: an EFS file system each (Fargate), or a gp3 volume each on
# an EC2 instance of their own (ECS on EC2). docs/DEPLOY.md, "Oxia".
OXIA_STORAGES: tuple[OxiaStorage, ...] = ("efs", "ebs")
API_AUTH_MODES: tuple[ApiAuth, ...] = ("iam", "api_key")
BUCKET_ENCRYPTIONS: tuple[BucketEncryption, ...] = ("s3_managed", "kms")
EXPORT_TABLE_FORMATS: tuple[ExportTableFormat, ...] = ("parquet", "iceberg")
# The API in front of produce, consume and admin: a REST API (API keys, usage plans, request validation),
# an HTTP API ($1.00 instead of $3.50 per million requests; IAM auth only), or the serve fleet (llog serve
# on ECS behind an internal load balancer: group commit, no per-request charge, admitted by security
# group). docs/DEPLOY.md, "Front door".
FRONT_DOORS: tuple[FrontDoor, ...] = ("rest", "http", "serve")
# How callers reach the serve fleet: an internal load balancer, or DNS names of the tasks (Cloud Map, no per-byte
# charge). infra/serve_fleet.py.
SERVE_ENDPOINTS: tuple[ServeEndpoint, ...] = ("balancer", "dns")
SERVE_AUTH_MODES: tuple[ServeAuth, ...] = ("sigv4", "none")
# LLOG_APPEND_PROTOCOL of the functions: the protocol of partitions they create (docs/SEQUENTIAL_APPEND.md).
APPEND_PROTOCOLS: tuple[str, ...] = tuple(p.value for p in AppendProtocol)
# Glue worker types the export job may run on (G.1X: 4 vCPU, 16 GB ... G.8X: 32 vCPU, 128 GB).
GLUE_WORKER_TYPES: tuple[str, ...] = ("G.1X", "G.2X", "G.4X", "G.8X")
# "*": every topic under the root prefix.
ALL_TOPICS = "*"


@dataclass(frozen=True)
class OxiaSize:
    """Fargate size of one Oxia data server (or of the standalone server)."""

    name: str
    cpu: int  # Fargate CPU units (1024 = 1 vCPU)
    memory_mib: int

    @property
    def db_cache_mib(self) -> int:
        """Pebble block cache: a quarter of the task's memory (Oxia's default is 100 MiB)."""
        return max(64, self.memory_mib // 4)


# Valid Fargate (Linux/ARM64) CPU/memory pairs.
OXIA_SIZES: Mapping[str, OxiaSize] = {
    s.name: s
    for s in (
        OxiaSize("small", 512, 1024),
        OxiaSize("medium", 1024, 2048),
        OxiaSize("large", 2048, 4096),
        OxiaSize("xlarge", 4096, 8192),
    )
}

# The values CloudWatch Logs accepts for a retention period, in days.
LOG_RETENTION_DAYS: tuple[int, ...] = (
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731,
    1096, 1827, 2192, 2557, 2922, 3288, 3653,
)  # fmt: skip

_STAGE_RE = re.compile(r"^[a-z](?:[a-z0-9-]{0,14}[a-z0-9])?$")
_RATE_RE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_CRON_RE = re.compile(r"^cron\((\S+ ){5}\S+\)$")
_PREFIX_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_NAMESPACE_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
# llog's topic names (llog.format.keys) and the names its key layout reserves.
_TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_RESERVED_TOPICS = frozenset({".", "..", "wal-shared"})
# Glue database names that Athena accepts without quoting rules: lowercase, digits, underscore.
_DATABASE_RE = re.compile(r"^[a-z0-9_]{1,255}$")
# A browser origin as the browser sends it in ``Origin``: lowercase scheme and host, no path; CORS compares
# the strings exactly. Host: a DNS name, an IPv4 address or a bracketed IPv6 address.
_ORIGIN_RE = re.compile(r"^(https?)://([a-z0-9]([a-z0-9.-]*[a-z0-9])?|\[[0-9a-f:.]+\])(:([0-9]{1,5}))?$")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class SettingsError(ValueError):
    """A context value is missing its expected form. The message names the key and the fix."""


def _fail(key: str, expected: str, value: object) -> SettingsError:
    return SettingsError(
        f"context {PREFIX}{key}: expected {expected}, got {value!r} "
        f'(set it in cdk.json under "context" or with -c {PREFIX}{key}=VALUE)'
    )


class _Reader:
    def __init__(self, get: Callable[[str], object]) -> None:
        self._get = get

    def raw(self, key: str) -> object:
        value = self._get(PREFIX + key)
        if isinstance(value, str) and value.strip().lower() in ("", "auto"):
            return None
        return value

    def string(self, key: str, default: str) -> str:
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise _fail(key, "a string", value)
        return value.strip()

    def choice(self, key: str, choices: tuple[str, ...], default: str) -> str:
        value = self.string(key, default)
        if value not in choices:
            raise _fail(key, "one of " + ", ".join(choices), value)
        return value

    def integer(self, key: str, default: int, lo: int, hi: int) -> int:
        value = self.raw(key)
        if value is None:
            return default
        if isinstance(value, bool):
            raise _fail(key, f"an integer in [{lo}, {hi}]", value)
        if isinstance(value, str):
            try:
                value = int(value.strip(), 10)
            except ValueError:
                raise _fail(key, f"an integer in [{lo}, {hi}]", value) from None
        if not isinstance(value, int) or not lo <= value <= hi:
            raise _fail(key, f"an integer in [{lo}, {hi}]", value)
        return value

    def string_list(self, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = self.raw(key)
        if value is None:
            return default
        if isinstance(value, str):
            items = [v.strip() for v in value.split(",")]
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            items = [v.strip() for v in value]
        else:
            raise _fail(key, "a list of strings (or a comma-separated string)", value)
        if not items or any(not v for v in items):
            raise _fail(key, "a non-empty list of non-empty strings", value)
        return tuple(items)


def _schedule(reader: _Reader, key: str, default: str) -> str:
    value = reader.string(key, default)
    rate = _RATE_RE.match(value)
    if rate:
        n, unit = int(rate.group(1)), rate.group(2)
        if n >= 1 and (n == 1) == (not unit.endswith("s")):
            return value
    elif _CRON_RE.match(value):
        return value
    raise _fail(key, 'an EventBridge Scheduler expression such as "rate(5 minutes)", "rate(1 hour)" '
                'or "cron(0/15 * * * ? *)"', value)  # fmt: skip


def _cron(reader: _Reader, key: str, default: str) -> str:
    """A Glue trigger schedule: Glue accepts only ``cron(...)`` (six fields), not ``rate(...)``."""
    value = reader.string(key, default)
    if not _CRON_RE.match(value):
        raise _fail(key, 'a Glue cron expression with six fields such as "cron(15 * * * ? *)"', value)
    return value


def _topics(reader: _Reader, key: str) -> tuple[str, ...]:
    topics = reader.string_list(key, (ALL_TOPICS,))
    if topics == (ALL_TOPICS,):
        return topics
    for topic in topics:
        if not _TOPIC_RE.match(topic) or topic in _RESERVED_TOPICS:
            raise _fail(key, '"*" (every topic) or a list of llog topic names (1-249 characters from '
                        '[A-Za-z0-9._-], not ".", ".." or "wal-shared")', topic)  # fmt: skip
    if len(set(topics)) != len(topics):
        raise _fail(key, "a list of distinct topic names", list(topics))
    return topics


def _is_origin(origin: str) -> bool:
    match = _ORIGIN_RE.match(origin)
    if match is None:
        return False
    port = match.group(5)
    # A browser drops the scheme's default port and leading zeros: "http://h:80" never matches an Origin.
    return port is None or (port[0] != "0" and int(port) < 65536 and int(port) != _DEFAULT_PORTS[match.group(1)])


def _cors_origins(reader: _Reader, key: str) -> tuple[str, ...]:
    """The browser origins the API answers CORS for (the console's, for example); none by default."""
    if reader.raw(key) == []:
        return ()
    origins = reader.string_list(key, ())
    expected = ('a list of origins "scheme://host[:port]" as a browser sends them (http or https, lowercase, '
                'no path or trailing "/", no default port, no "*"), such as "http://127.0.0.1:8080"')  # fmt: skip
    for origin in origins:
        if not _is_origin(origin):
            raise _fail(key, expected, origin)
    if len(set(origins)) != len(origins):
        raise _fail(key, "a list of distinct origins", list(origins))
    return origins


def _retention_topics(reader: _Reader, key: str) -> str:
    """Per-topic retention as the JSON the GC function reads (``LLOG_RETENTION_TOPICS``), checked by llog's parser."""
    value = reader.raw(key)
    if value is None:
        return "{}"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    try:
        RetentionConfig.from_env({"LLOG_RETENTION_TOPICS": text})
    except ConfigurationError as exc:
        raise _fail(key, 'a JSON object {"topic": {"ms": <int>, "bytes": <int>}}' + f" ({exc})", value) from None
    return text


def default_glue_database(stage: str) -> str:
    """``llog_<stage>`` with every character Glue/Athena database names do not allow replaced by ``_``."""
    return re.sub(r"[^a-z0-9_]", "_", f"llog_{stage}".lower())


@dataclass(frozen=True)
class LlogSettings:
    """The validated settings of one deployment (one stage)."""

    stage: str
    production: bool
    oxia_mode: OxiaMode
    oxia_size: OxiaSize
    oxia_shards: int
    oxia_namespace: str
    max_azs: int
    nat_gateways: int
    bucket_encryption: BucketEncryption
    root_prefix: str
    compaction_schedule: str
    gc_schedule: str
    wal_gc_schedule: str
    gc_grace_period_hours: int
    log_retention_days: int
    access_log_retention_days: int
    api_auth: ApiAuth
    front_door: FrontDoor = "rest"
    serve_tasks: int = 2  # llog:frontDoor=serve: Fargate tasks of the fleet, and how callers reach them
    serve_endpoint: ServeEndpoint = "balancer"
    # llog:frontDoor=serve: whether every request must be signed with a key llog issued (LLOG_SERVE_AUTH).
    serve_auth: ServeAuth = "sigv4"
    api_throttle_rate: int = 100
    api_throttle_burst: int = 200
    compaction_max_concurrency: int = 50
    # The planner's size-or-age rule (LLOG_COMPACTION_MIN_LAG, LLOG_COMPACTION_MAX_DELAY_MS; docs/SCALE.md).
    compaction_min_lag: int = 1
    compaction_max_delay_minutes: int = 10
    compaction_lag_alarm_threshold: int = 100_000
    # The Glue export (infra/analytics.py): topics ("*" = all), Glue trigger cron, table format,
    # worker type and count, Glue database (default llog_<stage>), run timeout.
    export_topics: tuple[str, ...] = (ALL_TOPICS,)
    export_schedule: str = "cron(15 * * * ? *)"
    export_table_format: ExportTableFormat = "parquet"
    glue_worker_type: str = "G.1X"
    glue_workers: int = 2
    glue_database: str = "llog_dev"
    export_timeout_minutes: int = 60
    # Retention (docs/RETENTION.md), applied by the GC function: defaults for every topic
    # (0 = no limit) and per-topic overrides {"topic": {"ms": …, "bytes": …}} as JSON.
    retention_hours: int = 0
    retention_bytes: int = 0
    retention_topics: str = "{}"
    # The append protocol of new partitions (LLOG_APPEND_PROTOCOL); existing ones keep theirs.
    append_protocol: str = AppendProtocol.SEQUENTIAL.value
    # Recovery (infra/recovery.py, docs/RECOVERY.md): the backup's interval bounds the recovery point
    # objective with the compaction lag; verification reads every retained byte, so it runs less often.
    backup_schedule: str = "rate(1 hour)"
    verify_schedule: str = "rate(1 day)"
    # Browser origins allowed to call the API (CORS: preflight at the gateway, headers on every answer);
    # empty: no CORS at all. docs/CONSOLE.md, "Against a deployed stack".
    cors_origins: tuple[str, ...] = ()
    # The data servers' storage (infra/oxia.py); standalone is always on EFS.
    oxia_storage: OxiaStorage = "efs"

    @property
    def stack_name(self) -> str:
        return f"llog-{self.stage}"

    def retention_environment(self) -> dict[str, str]:
        """The ``LLOG_RETENTION_*`` variables of the GC function (which applies retention)."""
        return {
            "LLOG_RETENTION_MS": str(self.retention_hours * 3_600_000),
            "LLOG_RETENTION_BYTES": str(self.retention_bytes),
            "LLOG_RETENTION_TOPICS": self.retention_topics,
        }

    @classmethod
    def from_context(cls, get: Callable[[str], object]) -> LlogSettings:
        """Read every ``llog:*`` key through ``get`` (for example ``app.node.try_get_context``)."""
        r = _Reader(get)
        stage = r.string("stage", "dev")
        if not _STAGE_RE.match(stage):
            raise _fail("stage", "1-16 characters: lowercase letters, digits and '-', starting with a letter", stage)
        production_stages = r.string_list("productionStages", ("prod",))
        production = stage in production_stages

        oxia_mode = cast(OxiaMode, r.choice("oxiaMode", OXIA_MODES, "replicated" if production else "standalone"))
        size_name = r.choice("oxiaSize", tuple(OXIA_SIZES), "medium" if production else "small")
        shards = r.integer("oxiaShards", 3 if oxia_mode == "replicated" else 1, 1, 64)
        namespace = r.string("oxiaNamespace", "default")
        if not _NAMESPACE_RE.match(namespace):
            raise _fail("oxiaNamespace", "1-64 characters from [A-Za-z0-9._-]", namespace)
        if oxia_mode == "standalone" and namespace != "default":
            raise _fail("oxiaNamespace", '"default": an Oxia standalone server has only that namespace', namespace)

        oxia_storage = cast(
            OxiaStorage, r.choice("oxiaStorage", OXIA_STORAGES, "ebs" if oxia_mode == "replicated" else "efs")
        )
        if oxia_mode == "standalone" and oxia_storage != "efs":
            raise _fail("oxiaStorage", '"efs" with llog:oxiaMode=standalone: EBS volumes on EC2 are built for the '
                        "three data servers of the replicated mode only", oxia_storage)  # fmt: skip

        max_azs = r.integer("maxAzs", 3 if production else 2, 2, 6)
        nat_gateways = r.integer("natGateways", 1, 0, 6)
        if nat_gateways < 1:
            raise _fail("natGateways", "at least 1: the Oxia image is pulled from Docker Hub and the functions "
                        "call AWS APIs that have no gateway endpoint", nat_gateways)  # fmt: skip
        if nat_gateways > max_azs:
            raise _fail("natGateways", f"at most llog:maxAzs ({max_azs})", nat_gateways)

        encryption = cast(BucketEncryption, r.choice("bucketEncryption", BUCKET_ENCRYPTIONS, "s3_managed"))
        root_prefix = r.string("rootPrefix", "llog")
        if not _PREFIX_RE.match(root_prefix) or root_prefix in (".", ".."):
            raise _fail("rootPrefix", "1-64 characters from [A-Za-z0-9._-], not '.' or '..' (the first segment of "
                        "every key)", root_prefix)  # fmt: skip

        log_retention = r.integer("logRetentionDays", 90 if production else 14, 1, 3653)
        if log_retention not in LOG_RETENTION_DAYS:
            raise _fail("logRetentionDays", "one of " + ", ".join(map(str, LOG_RETENTION_DAYS)), log_retention)
        access_log_retention = r.integer("accessLogRetentionDays", 365 if production else 30, 1, 3653)

        api_auth = cast(ApiAuth, r.choice("apiAuth", API_AUTH_MODES, "iam"))
        front_door = cast(FrontDoor, r.choice("frontDoor", FRONT_DOORS, "rest"))
        if front_door == "http" and api_auth != "iam":
            raise _fail("apiAuth", '"iam" with llog:frontDoor=http: HTTP APIs have no API keys or usage plans',
                        api_auth)  # fmt: skip
        if front_door == "serve" and r.raw("apiAuth") is not None:
            raise _fail("apiAuth", "unset with llog:frontDoor=serve: the fleet's load balancer admits callers by "
                        "security group, and the tasks check their signatures (llog:serveAuth)", api_auth)  # fmt: skip
        serve_auth = cast(ServeAuth, r.choice("serveAuth", SERVE_AUTH_MODES, "sigv4"))
        if front_door != "serve" and r.raw("serveAuth") is not None:
            raise _fail("serveAuth", "unset unless llog:frontDoor=serve: API Gateway authenticates the other front "
                        "doors' callers (llog:apiAuth)", serve_auth)  # fmt: skip
        min_lag = r.integer("compactionMinLag", 1, 1, 10**9)
        lag_alarm = r.integer("compactionLagAlarmThreshold", 100_000, 1, 10**12)
        if min_lag >= lag_alarm:
            raise _fail("compactionMinLag", f"below llog:compactionLagAlarmThreshold ({lag_alarm}): a partition "
                        "waiting for its minimum would raise the lag alarm", min_lag)  # fmt: skip
        glue_database = r.string("glueDatabase", default_glue_database(stage))
        if not _DATABASE_RE.match(glue_database):
            raise _fail("glueDatabase", "1-255 characters from [a-z0-9_] (a Glue database name Athena accepts)",
                        glue_database)  # fmt: skip
        return cls(
            stage=stage,
            production=production,
            oxia_mode=oxia_mode,
            oxia_size=OXIA_SIZES[size_name],
            oxia_shards=shards,
            oxia_namespace=namespace,
            max_azs=max_azs,
            nat_gateways=nat_gateways,
            bucket_encryption=encryption,
            root_prefix=root_prefix,
            compaction_schedule=_schedule(r, "compactionSchedule", "rate(1 minute)"),
            gc_schedule=_schedule(r, "gcSchedule", "rate(1 hour)"),
            wal_gc_schedule=_schedule(r, "walGcSchedule", "rate(10 minutes)"),
            gc_grace_period_hours=r.integer("gcGracePeriodHours", 24, 1, 24 * 90),
            log_retention_days=log_retention,
            access_log_retention_days=access_log_retention,
            api_auth=api_auth,
            front_door=front_door,
            serve_tasks=r.integer("serveTasks", 2, 1, 100),
            serve_endpoint=cast(ServeEndpoint, r.choice("serveEndpoint", SERVE_ENDPOINTS, "balancer")),
            serve_auth=serve_auth,
            api_throttle_rate=r.integer("apiThrottleRateLimit", 100, 1, 10_000),
            api_throttle_burst=r.integer("apiThrottleBurstLimit", 200, 1, 5_000),
            compaction_max_concurrency=r.integer("compactionMaxConcurrency", 50, 2, 1000),
            compaction_min_lag=min_lag,
            compaction_max_delay_minutes=r.integer("compactionMaxDelayMinutes", 10, 1, 24 * 60),
            compaction_lag_alarm_threshold=lag_alarm,
            export_topics=_topics(r, "exportTopics"),
            export_schedule=_cron(r, "exportSchedule", "cron(15 * * * ? *)"),
            export_table_format=cast(ExportTableFormat, r.choice("exportTableFormat", EXPORT_TABLE_FORMATS, "parquet")),
            glue_worker_type=r.choice("glueWorkerType", GLUE_WORKER_TYPES, "G.1X"),
            glue_workers=r.integer("glueWorkers", 2, 2, 1000),
            glue_database=glue_database,
            export_timeout_minutes=r.integer("exportTimeoutMinutes", 60, 1, 2880),
            retention_hours=r.integer("retentionHours", 0, 0, 24 * 365 * 100),
            retention_bytes=r.integer("retentionBytes", 0, 0, 2**62),
            retention_topics=_retention_topics(r, "retentionTopics"),
            append_protocol=AppendProtocol(
                r.choice("appendProtocol", (*APPEND_PROTOCOLS, LEGACY_CAS_NAME), AppendProtocol.SEQUENTIAL.value)
            ).value,
            backup_schedule=_schedule(r, "backupSchedule", "rate(1 hour)"),
            verify_schedule=_schedule(r, "verifySchedule", "rate(1 day)"),
            cors_origins=_cors_origins(r, "corsOrigins"),
            oxia_storage=oxia_storage,
        )
