"""Garbage collection settings: the grace period must outlast every commit delay."""

from __future__ import annotations

import pytest

from llog.errors import ConfigurationError
from llog.gc import GcConfig


def test_defaults() -> None:
    assert GcConfig.from_env({}) == GcConfig(grace_ms=24 * 3600 * 1000, max_deletes_per_run=10_000)


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
