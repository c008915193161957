"""Unit tests of configuration from environment mappings (llog/config.py).

Every test passes an explicit dict as the environment: ``os.environ`` is never read or changed.
"""

from __future__ import annotations

import dataclasses

import pytest

from llog.config import OxiaConfig, S3Config, WriterConfig, env_int, root_prefix_from_env
from llog.errors import ConfigurationError, LlogError

ADDRESS = {"LLOG_OXIA_SERVICE_ADDRESS": "oxia.example:6648"}


# --- Oxia -------------------------------------------------------------------------------------


def test_oxia_defaults():
    c = OxiaConfig.from_env(dict(ADDRESS))
    assert c == OxiaConfig(
        service_address="oxia.example:6648",
        namespace="default",
        session_timeout_ms=30_000,
        client_identifier=None,
        request_timeout_ms=5_000,
        connect_timeout_ms=5_000,
        max_retries=3,
        close_timeout_ms=5_000,
    )


def test_oxia_all_variables():
    env = {
        "LLOG_OXIA_SERVICE_ADDRESS": "localhost:1234",
        "LLOG_OXIA_NAMESPACE": "llog-ns",
        "LLOG_OXIA_SESSION_TIMEOUT_MS": "2000",
        "LLOG_CLIENT_IDENTIFIER": "writer-7",
        "LLOG_OXIA_REQUEST_TIMEOUT_MS": "1",
        "LLOG_OXIA_CONNECT_TIMEOUT_MS": "250",
        "LLOG_OXIA_MAX_RETRIES": "0",
        "LLOG_OXIA_CLOSE_TIMEOUT_MS": "0",
        "UNRELATED": "ignored",
    }
    assert OxiaConfig.from_env(env) == OxiaConfig("localhost:1234", "llog-ns", 2000, "writer-7", 1, 250, 0, 0)


def test_empty_values_mean_unset():
    env = {
        **ADDRESS,
        "LLOG_OXIA_NAMESPACE": "",
        "LLOG_CLIENT_IDENTIFIER": "",
        "LLOG_OXIA_SESSION_TIMEOUT_MS": "",
        "LLOG_OXIA_MAX_RETRIES": "",
    }
    assert OxiaConfig.from_env(env) == OxiaConfig.from_env(dict(ADDRESS))


@pytest.mark.parametrize("env", [{}, {"LLOG_OXIA_SERVICE_ADDRESS": ""}, {"OXIA_SERVICE_ADDRESS": "x:1"}])
def test_missing_oxia_address(env):
    with pytest.raises(ConfigurationError, match="LLOG_OXIA_SERVICE_ADDRESS"):
        OxiaConfig.from_env(env)


INT_VARIABLES = [
    # (config class, variable, smallest accepted value, default, attribute)
    (OxiaConfig, "LLOG_OXIA_SESSION_TIMEOUT_MS", 2000, 30_000, "session_timeout_ms"),
    (OxiaConfig, "LLOG_OXIA_REQUEST_TIMEOUT_MS", 1, 5_000, "request_timeout_ms"),
    (OxiaConfig, "LLOG_OXIA_CONNECT_TIMEOUT_MS", 1, 5_000, "connect_timeout_ms"),
    (OxiaConfig, "LLOG_OXIA_MAX_RETRIES", 0, 3, "max_retries"),
    (OxiaConfig, "LLOG_OXIA_CLOSE_TIMEOUT_MS", 0, 5_000, "close_timeout_ms"),
    (S3Config, "LLOG_S3_MAX_ATTEMPTS", 1, 5, "max_attempts"),
    (WriterConfig, "LLOG_WRITER_MAX_CAS_ATTEMPTS", 1, 64, "max_cas_attempts"),
    (WriterConfig, "LLOG_WRITER_CAS_BACKOFF_INITIAL_MS", 0, 2, "cas_backoff_initial_ms"),
    (WriterConfig, "LLOG_WRITER_CAS_BACKOFF_MAX_MS", 0, 200, "cas_backoff_max_ms"),
]
INT_IDS = [v[1] for v in INT_VARIABLES]


@pytest.mark.parametrize(("cls", "name", "minimum", "default", "attr"), INT_VARIABLES, ids=INT_IDS)
def test_integer_variables(cls, name, minimum, default, attr):
    assert getattr(cls.from_env(dict(ADDRESS)), attr) == default
    assert getattr(cls.from_env({**ADDRESS, name: str(minimum)}), attr) == minimum
    assert getattr(cls.from_env({**ADDRESS, name: str(minimum + 12345)}), attr) == minimum + 12345


@pytest.mark.parametrize(("cls", "name", "minimum", "default", "attr"), INT_VARIABLES, ids=INT_IDS)
@pytest.mark.parametrize("raw", ["abc", "1.5", "1e3", "0x10", "ten", "5ms"])
def test_non_integer_values_name_the_variable(cls, name, minimum, default, attr, raw):
    with pytest.raises(ConfigurationError, match=f"{name}='{raw}' is not an integer"):
        cls.from_env({**ADDRESS, name: raw})


@pytest.mark.parametrize(("cls", "name", "minimum", "default", "attr"), INT_VARIABLES, ids=INT_IDS)
def test_too_small_values_name_the_variable(cls, name, minimum, default, attr):
    for value in (minimum - 1, -1000):
        with pytest.raises(ConfigurationError, match=f"{name}={value} must be at least {minimum}"):
            cls.from_env({**ADDRESS, name: str(value)})


def test_env_int():
    assert env_int({}, "X", 7) == 7
    assert env_int({"X": ""}, "X", 7) == 7
    assert env_int({"X": "0"}, "X", 7) == 0
    assert env_int({"X": "-3"}, "X", 7, minimum=-5) == -3
    with pytest.raises(ConfigurationError, match="X=-1 must be at least 0"):
        env_int({"X": "-1"}, "X", 7)
    with pytest.raises(ConfigurationError, match="X='x' is not an integer"):
        env_int({"X": "x"}, "X", 7)
    assert env_int({"X": "9"}, "X", 7, maximum=9) == 9
    with pytest.raises(ConfigurationError, match="X=10 must be at most 9"):
        env_int({"X": "10"}, "X", 7, maximum=9)


def test_inline_batches_are_bounded_and_can_be_turned_off():
    assert WriterConfig.from_env({}).inline_batch_max_bytes == 1024
    assert WriterConfig.from_env({"LLOG_INLINE_BATCH_MAX_BYTES": "0"}).inline_batch_max_bytes == 0
    assert WriterConfig.from_env({"LLOG_INLINE_BATCH_MAX_BYTES": "65536"}).inline_batch_max_bytes == 65536
    with pytest.raises(ConfigurationError, match="LLOG_INLINE_BATCH_MAX_BYTES=65537 must be at most 65536"):
        WriterConfig.from_env({"LLOG_INLINE_BATCH_MAX_BYTES": "65537"})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"service_address": ""}, "LLOG_OXIA_SERVICE_ADDRESS"),
        ({"session_timeout_ms": 1999}, "LLOG_OXIA_SESSION_TIMEOUT_MS must be between 2000 and 300000"),
        ({"session_timeout_ms": 300_001}, "LLOG_OXIA_SESSION_TIMEOUT_MS must be between 2000 and 300000"),
        ({"request_timeout_ms": 0}, "timeouts must be positive"),
        ({"connect_timeout_ms": 0}, "timeouts must be positive"),
    ],
)
def test_oxia_config_validates_direct_construction(changes, message):
    kwargs = {"service_address": "h:1", **changes}
    with pytest.raises(ConfigurationError, match=message):
        OxiaConfig(**kwargs)


def test_configuration_error_is_not_retriable():
    assert issubclass(ConfigurationError, LlogError)
    assert not ConfigurationError.retriable


# --- S3 ---------------------------------------------------------------------------------------


def test_s3_defaults():
    c = S3Config.from_env({})
    assert c == S3Config()
    assert (c.bucket, c.endpoint_url, c.region_name, c.access_key_id, c.secret_access_key, c.session_token) == (
        None,
        None,
        None,
        None,
        None,
        None,
    )
    assert (c.max_attempts, c.connect_timeout_s, c.read_timeout_s) == (5, 5.0, 30.0)


def test_s3_llog_variables():
    env = {
        "LLOG_S3_BUCKET": "bucket-1",
        "LLOG_S3_ENDPOINT_URL": "http://127.0.0.1:5000",
        "LLOG_S3_REGION_NAME": "eu-west-1",
        "LLOG_S3_ACCESS_KEY_ID": "AKIDLLOG",
        "LLOG_S3_SECRET_ACCESS_KEY": "llog-secret",
        "LLOG_S3_SESSION_TOKEN": "llog-token",
        "LLOG_S3_MAX_ATTEMPTS": "9",
    }
    c = S3Config.from_env(env)
    assert c == S3Config("bucket-1", "http://127.0.0.1:5000", "eu-west-1", "AKIDLLOG", "llog-secret", "llog-token", 9)


AWS_ENV = {
    "AWS_REGION": "us-east-2",
    "AWS_DEFAULT_REGION": "ap-south-1",
    "AWS_ACCESS_KEY_ID": "AKIDAWS",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "AWS_SESSION_TOKEN": "aws-token",
}


def test_s3_aws_fallbacks():
    c = S3Config.from_env(dict(AWS_ENV))
    assert (c.region_name, c.access_key_id, c.secret_access_key, c.session_token) == (
        "us-east-2",
        "AKIDAWS",
        "aws-secret",
        "aws-token",
    )
    assert (c.bucket, c.endpoint_url) == (None, None)


def test_s3_aws_default_region_is_the_last_fallback():
    assert S3Config.from_env({"AWS_DEFAULT_REGION": "ap-south-1"}).region_name == "ap-south-1"
    assert S3Config.from_env({"AWS_DEFAULT_REGION": "ap-south-1", "AWS_REGION": ""}).region_name == "ap-south-1"


@pytest.mark.parametrize(
    ("llog_name", "attr"),
    [
        ("LLOG_S3_REGION_NAME", "region_name"),
        ("LLOG_S3_ACCESS_KEY_ID", "access_key_id"),
        ("LLOG_S3_SECRET_ACCESS_KEY", "secret_access_key"),
        ("LLOG_S3_SESSION_TOKEN", "session_token"),
    ],
)
def test_s3_llog_variables_take_precedence(llog_name, attr):
    assert getattr(S3Config.from_env({**AWS_ENV, llog_name: "from-llog"}), attr) == "from-llog"
    # An empty LLOG_* value counts as unset and falls back to AWS_*.
    assert getattr(S3Config.from_env({**AWS_ENV, llog_name: ""}), attr) == getattr(S3Config.from_env(AWS_ENV), attr)


def test_require_bucket():
    assert S3Config.from_env({"LLOG_S3_BUCKET": "b"}).require_bucket() == "b"
    for config in (S3Config(), S3Config(bucket=""), S3Config.from_env({"LLOG_S3_BUCKET": ""})):
        with pytest.raises(ConfigurationError, match="LLOG_S3_BUCKET is not set"):
            config.require_bucket()


def test_secrets_are_not_in_repr():
    c = S3Config.from_env({**AWS_ENV, "LLOG_S3_SECRET_ACCESS_KEY": "s3cr3t-value", "LLOG_S3_SESSION_TOKEN": "t0k3n"})
    for text in (repr(c), str(c)):
        assert "s3cr3t-value" not in text
        assert "t0k3n" not in text
        assert "secret_access_key" not in text
        assert "session_token" not in text
        assert "AKIDAWS" in text  # the key id is not a secret
    assert c.secret_access_key == "s3cr3t-value"
    reprs = {f.name: f.repr for f in dataclasses.fields(S3Config)}
    assert (reprs["secret_access_key"], reprs["session_token"]) == (False, False)


def test_configs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        S3Config().bucket = "x"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        OxiaConfig("h:1").namespace = "x"  # type: ignore[misc]


# --- writer -------------------------------------------------------------------------------------


def test_writer_config():
    assert WriterConfig.from_env({}) == WriterConfig(64, 2, 200)
    env = {
        "LLOG_WRITER_MAX_CAS_ATTEMPTS": "8",
        "LLOG_WRITER_CAS_BACKOFF_INITIAL_MS": "0",
        "LLOG_WRITER_CAS_BACKOFF_MAX_MS": "50",
    }
    assert WriterConfig.from_env(env) == WriterConfig(8, 0, 50)


# --- root prefix ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "root"),
    [
        ({}, "llog"),
        ({"LLOG_ROOT_PREFIX": ""}, "llog"),
        ({"LLOG_ROOT_PREFIX": "tenant-1"}, "tenant-1"),
        ({"LLOG_ROOT_PREFIX": "env/prod/llog"}, "env/prod/llog"),
    ],
)
def test_root_prefix_from_env(env, root):
    assert root_prefix_from_env(env) == root


@pytest.mark.parametrize("root", ["/llog", "llog/", "a//b", "a b", "a:b", "\u00fc", "x" * 129])
def test_invalid_root_prefix_from_env(root):
    with pytest.raises(ConfigurationError, match="LLOG_ROOT_PREFIX: invalid root prefix"):
        root_prefix_from_env({"LLOG_ROOT_PREFIX": root})
