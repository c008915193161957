"""Settings from CDK context: defaults per stage, command-line strings, and clear validation errors."""

from __future__ import annotations

from typing import Any

import pytest

from infra.settings import OXIA_SIZES, LlogSettings, SettingsError


def settings(**context: Any) -> LlogSettings:
    return LlogSettings.from_context(lambda key: context.get(key.removeprefix("llog:")))


def test_development_defaults() -> None:
    s = settings()
    assert s.stage == "dev"
    assert s.stack_name == "llog-dev"
    assert not s.production
    assert s.oxia_mode == "standalone"
    assert s.oxia_size == OXIA_SIZES["small"]
    assert s.oxia_shards == 1
    assert s.oxia_namespace == "default"
    assert (s.max_azs, s.nat_gateways) == (2, 1)
    assert s.bucket_encryption == "s3_managed"
    assert s.root_prefix == "llog"
    assert s.compaction_schedule == "rate(1 minute)"
    assert (s.gc_schedule, s.wal_gc_schedule) == ("rate(1 hour)", "rate(10 minutes)")
    assert s.gc_grace_period_hours == 24
    assert s.log_retention_days == 14
    assert s.access_log_retention_days == 30
    assert s.api_auth == "iam"
    assert s.front_door == "rest"  # today's REST API, in every stage unless llog:frontDoor says otherwise
    assert (s.api_throttle_rate, s.api_throttle_burst) == (100, 200)
    assert s.compaction_max_concurrency == 50
    assert s.compaction_lag_alarm_threshold == 100_000
    assert s.export_topics == ("*",)
    assert s.export_schedule == "cron(15 * * * ? *)"
    assert s.export_table_format == "parquet"
    assert (s.glue_worker_type, s.glue_workers) == ("G.1X", 2)
    assert s.glue_database == "llog_dev"
    assert s.export_timeout_minutes == 60


def test_export_settings_are_read() -> None:
    s = settings(stage="eu-1", exportTopics="orders, payments", exportSchedule="cron(0 3 * * ? *)",
                 exportTableFormat="iceberg", glueWorkerType="G.4X", glueWorkers="10",
                 exportTimeoutMinutes="180")  # fmt: skip
    assert s.export_topics == ("orders", "payments")
    assert s.export_schedule == "cron(0 3 * * ? *)"
    assert s.export_table_format == "iceberg"
    assert (s.glue_worker_type, s.glue_workers) == ("G.4X", 10)
    assert s.glue_database == "llog_eu_1"  # '-' is not allowed in a Glue/Athena database name
    assert s.export_timeout_minutes == 180
    assert settings(exportTopics=["a.b", "c_d"], glueDatabase="analytics").export_topics == ("a.b", "c_d")
    assert settings(glueDatabase="analytics").glue_database == "analytics"
    assert settings(exportTopics="auto").export_topics == ("*",)


def test_new_settings_are_read_and_checked() -> None:
    s = settings(apiThrottleRateLimit="50", apiThrottleBurstLimit=75, compactionMaxConcurrency="40",
                 compactionLagAlarmThreshold=10_000, compactionMinLag="1000", compactionMaxDelayMinutes=30)  # fmt: skip
    assert (s.api_throttle_rate, s.api_throttle_burst) == (50, 75)
    assert s.compaction_max_concurrency == 40
    assert s.compaction_lag_alarm_threshold == 10_000
    assert (s.compaction_min_lag, s.compaction_max_delay_minutes) == (1000, 30)
    for key, value in (("compactionMaxConcurrency", 1), ("compactionMaxConcurrency", 1001),
                       ("apiThrottleRateLimit", 0), ("apiThrottleBurstLimit", 5001),
                       ("compactionLagAlarmThreshold", 0), ("compactionMinLag", 0),
                       ("compactionMaxDelayMinutes", 0), ("compactionMaxDelayMinutes", 1441),
                       ("compactionMinLag", 100_000)):  # at the lag alarm's default threshold  # fmt: skip
        with pytest.raises(SettingsError, match=f"llog:{key}"):
            settings(**{key: value})


def test_production_defaults() -> None:
    s = settings(stage="prod")
    assert s.production
    assert s.oxia_mode == "replicated"
    assert s.oxia_size == OXIA_SIZES["medium"]
    assert s.oxia_shards == 3
    assert s.max_azs == 3
    assert s.log_retention_days == 90
    assert s.access_log_retention_days == 365


def test_command_line_strings_are_parsed() -> None:
    # `cdk deploy -c key=value` passes every value as a string.
    s = settings(
        stage="staging",
        productionStages="prod,staging",
        oxiaMode="standalone",
        oxiaSize="large",
        oxiaShards="4",
        maxAzs="3",
        natGateways="3",
        bucketEncryption="kms",
        compactionSchedule="cron(0/10 * * * ? *)",
        gcSchedule="rate(1 day)",
        logRetentionDays="30",
        apiAuth="api_key",
    )
    assert s.production
    assert s.oxia_mode == "standalone"
    assert s.oxia_size.cpu == 2048
    assert s.oxia_shards == 4
    assert (s.max_azs, s.nat_gateways) == (3, 3)
    assert s.bucket_encryption == "kms"
    assert s.compaction_schedule == "cron(0/10 * * * ? *)"
    assert s.api_auth == "api_key"


def test_json_values_and_auto_are_accepted() -> None:
    s = settings(productionStages=["live"], stage="live", oxiaShards=5, oxiaMode="auto", logRetentionDays=365)
    assert s.production
    assert s.oxia_mode == "replicated"
    assert s.oxia_shards == 5
    assert s.log_retention_days == 365


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"stage": "Prod"}, "llog:stage: expected 1-16 characters"),
        ({"stage": "dev-"}, "llog:stage"),
        ({"stage": "a" * 17}, "llog:stage"),
        ({"stage": 7}, "llog:stage: expected a string"),
        ({"oxiaMode": "cluster"}, "llog:oxiaMode: expected one of standalone, replicated, got 'cluster'"),
        ({"oxiaSize": "huge"}, "llog:oxiaSize: expected one of small, medium, large, xlarge"),
        ({"oxiaShards": "two"}, "llog:oxiaShards: expected an integer in [1, 64]"),
        ({"oxiaShards": 0}, "llog:oxiaShards"),
        ({"oxiaShards": True}, "llog:oxiaShards"),
        ({"oxiaNamespace": "orders"}, 'llog:oxiaNamespace: expected "default": an Oxia standalone server'),
        ({"oxiaNamespace": "a/b", "oxiaMode": "replicated"}, "llog:oxiaNamespace"),
        ({"natGateways": 0}, "llog:natGateways: expected at least 1"),
        ({"natGateways": 3}, "llog:natGateways: expected at most llog:maxAzs (2)"),
        ({"maxAzs": 1}, "llog:maxAzs"),
        ({"bucketEncryption": "aes"}, "llog:bucketEncryption: expected one of s3_managed, kms"),
        ({"rootPrefix": "a/b"}, "llog:rootPrefix"),
        ({"rootPrefix": ".."}, "llog:rootPrefix: expected 1-64 characters from [A-Za-z0-9._-], not '.' or '..'"),
        ({"compactionSchedule": "every 5 minutes"}, "llog:compactionSchedule: expected an EventBridge Scheduler"),
        ({"compactionSchedule": "rate(1 minutes)"}, "llog:compactionSchedule"),
        ({"gcSchedule": "rate(2 hour)"}, "llog:gcSchedule"),
        ({"gcSchedule": "rate(0 hours)"}, "llog:gcSchedule"),
        ({"gcGracePeriodHours": -1}, "llog:gcGracePeriodHours"),
        ({"logRetentionDays": 10}, "llog:logRetentionDays: expected one of 1, 3, 5"),
        ({"apiAuth": "cognito"}, "llog:apiAuth: expected one of iam, api_key"),
        ({"frontDoor": "url"}, "llog:frontDoor: expected one of rest, http, serve, got 'url'"),
        ({"frontDoor": "http", "apiAuth": "api_key"}, 'llog:apiAuth: expected "iam" with llog:frontDoor=http'),
        ({"frontDoor": "serve", "apiAuth": "iam"}, "llog:apiAuth: expected unset with llog:frontDoor=serve"),
        ({"serveTasks": 0}, "llog:serveTasks"),
        ({"productionStages": [1]}, "llog:productionStages: expected a list of strings"),
        ({"productionStages": "prod,,x"}, "llog:productionStages"),
        ({"exportTopics": "*,orders"}, 'llog:exportTopics: expected "*" (every topic) or a list of llog topic'),
        ({"exportTopics": "orders/eu"}, "llog:exportTopics"),
        ({"exportTopics": "wal-shared"}, "llog:exportTopics"),
        ({"exportTopics": "a,a"}, "llog:exportTopics: expected a list of distinct topic names"),
        ({"exportTopics": 3}, "llog:exportTopics: expected a list of strings"),
        ({"exportSchedule": "rate(1 hour)"}, "llog:exportSchedule: expected a Glue cron expression"),
        ({"exportSchedule": "cron(15 * * * ?)"}, "llog:exportSchedule"),
        ({"exportTableFormat": "delta"}, "llog:exportTableFormat: expected one of parquet, iceberg"),
        ({"glueWorkerType": "G.025X"}, "llog:glueWorkerType: expected one of G.1X, G.2X, G.4X, G.8X"),
        ({"glueWorkers": 1}, "llog:glueWorkers: expected an integer in [2, 1000]"),
        ({"glueWorkers": "two"}, "llog:glueWorkers"),
        ({"glueDatabase": "Llog-Dev"}, "llog:glueDatabase: expected 1-255 characters from [a-z0-9_]"),
        ({"exportTimeoutMinutes": 0}, "llog:exportTimeoutMinutes: expected an integer in [1, 2880]"),
        ({"exportTimeoutMinutes": 2881}, "llog:exportTimeoutMinutes"),
    ],
)
def test_invalid_values_name_the_key_and_the_fix(context: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingsError) as info:
        settings(**context)
    text = str(info.value)
    assert message in text
    assert "-c llog:" in text


def test_retention_defaults_keep_everything_and_overrides_are_checked_by_llog() -> None:
    assert settings().retention_environment() == {
        "LLOG_RETENTION_MS": "0",
        "LLOG_RETENTION_BYTES": "0",
        "LLOG_RETENTION_TOPICS": "{}",
    }
    chosen = settings(retentionHours="24", retentionBytes=10**9, retentionTopics='{"clicks": {"bytes": 1000}}')
    assert chosen.retention_environment() == {
        "LLOG_RETENTION_MS": str(86_400_000),
        "LLOG_RETENTION_BYTES": str(10**9),
        "LLOG_RETENTION_TOPICS": '{"clicks": {"bytes": 1000}}',
    }
    for bad in ('{"a/b": {"ms": 1}}', '{"t": {"days": 1}}', "[1]", "{"):
        with pytest.raises(SettingsError, match="retentionTopics"):
            settings(retentionTopics=bad)
    with pytest.raises(SettingsError, match="retentionHours"):
        settings(retentionHours=-1)


def test_the_front_door_is_read_from_context() -> None:
    assert settings(frontDoor="http").front_door == "http"
    assert settings(stage="prod", frontDoor="rest").front_door == "rest"
    assert settings(stage="prod").front_door == "rest"
    assert settings(frontDoor="auto").front_door == "rest"
