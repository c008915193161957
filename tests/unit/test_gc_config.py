"""Garbage collection settings: the grace period must outlast every commit delay."""

from __future__ import annotations

import pytest

from llog.config import GcConfig
from llog.errors import ConfigurationError


def test_defaults() -> None:
    defaults = GcConfig(grace_ms=24 * 3600 * 1000, max_deletes_per_run=10_000_000, read_concurrency=16)
    assert GcConfig.from_env({}) == defaults
    assert GcConfig.from_env({"LLOG_GC_READ_CONCURRENCY": "4"}).read_concurrency == 4


@pytest.mark.parametrize(
    "env",
    [
        {"LLOG_GC_GRACE_MS": "60000"},
        {"LLOG_GC_GRACE_MS": "600000", "LLOG_WRITER_MAX_COMMIT_DELAY_MS": "300000"},
        {"LLOG_GC_GRACE_MS": "600000", "LLOG_COMPACTOR_MAX_COMMIT_DELAY_MS": "400000"},
    ],
)
def test_a_grace_period_within_twice_a_commit_delay_is_refused(env: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError, match="LLOG_GC_GRACE_MS"):
        GcConfig.from_env(env)


def test_a_long_enough_grace_period_is_accepted() -> None:
    assert GcConfig.from_env({"LLOG_GC_GRACE_MS": "120001"}).grace_ms == 120_001


@pytest.mark.parametrize("value", ["0", "-1", "many"])
def test_read_concurrency_must_be_a_positive_integer(value: str) -> None:
    with pytest.raises(ConfigurationError, match="LLOG_GC_READ_CONCURRENCY"):
        GcConfig.from_env({"LLOG_GC_READ_CONCURRENCY": value})
