"""``llog compact``, ``llog gc`` and ``llog migrate`` from the command line."""

from __future__ import annotations

import json

import pytest

from llog.cli import main
from llog.config import OxiaConfig, S3Config
from llog.protocol.append import LogWriter
from llog.protocol.gc import GarbageCollector, GcReport
from tests.conftest import moto_s3_env, set_env, unreachable_oxia_env


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, s3_config: S3Config, root: str) -> None:
    set_env(monkeypatch, moto_s3_env(s3_config, root))


@pytest.mark.parametrize(
    "argv",
    [["verify", "--topic", "orders"], ["backup"], ["rebuild", "--topic", "orders"], ["gc"],
     ["compact", "--topic", "orders", "--partition", "0"]],
)  # fmt: skip
def test_a_missing_setting_is_one_line_and_exit_status_1(
    env: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    monkeypatch.delenv("LLOG_S3_BUCKET", raising=False)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"llog {argv[0]}: ConfigurationError: LLOG_S3_BUCKET is not set")
    assert err.count("\n") == 1  # one line, no traceback


@pytest.fixture
def two_records(env: None, monkeypatch: pytest.MonkeyPatch, oxia_config: OxiaConfig, writer: LogWriter,
                topic: str) -> None:
    """``topic``'s partition 0 holds records 1 and 2; the command line talks to the test's Oxia server."""
    monkeypatch.setenv("LLOG_OXIA_SERVICE_ADDRESS", oxia_config.service_address)
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a", b"b"])


@pytest.mark.parametrize(
    "argv",
    [["compact", "--topic", "orders", "--partition", "0"], ["gc"], ["migrate", "--topic", "o", "--partition", "0"]],
)
def test_an_unreachable_oxia_is_a_clear_error_and_exit_status_1(
    env: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    set_env(monkeypatch, unreachable_oxia_env())
    assert main(argv) == 1
    assert "OxiaUnavailable" in capsys.readouterr().err


@pytest.mark.oxia
def test_compact_prints_what_it_did(two_records: None, topic: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compact", "--topic", topic, "--partition", "0"]) == 0

    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["outcome"], r["start_offset"], r["end_offset"]) for r in lines] == [
        ("compacted", 1, 2), ("nothing_to_do", None, None)
    ]


@pytest.mark.oxia
def test_migrate_switches_a_partition_once(two_records: None, writer: LogWriter, topic: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "--topic", topic, "--partition", "0"]) == 0
    assert main(["migrate", "--topic", topic, "--partition", "0"]) == 0  # idempotent

    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert first == second
    assert first["control"]["append_protocol"] == "sequential"
    assert writer.append(topic, 0, [b"c"]).start_offset == 3


@pytest.mark.oxia
def test_gc_wal_only_collects_the_wal_blobs_alone(
    two_records: None, topic: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[bool] = []
    collect = GarbageCollector.collect

    def recorded(self: GarbageCollector, *, wal_only: bool = False) -> GcReport:
        ran.append(wal_only)
        return collect(self, wal_only=wal_only)

    monkeypatch.setattr(GarbageCollector, "collect", recorded)
    assert main(["gc", "--wal-only"]) == 0
    assert main(["gc"]) == 0
    assert ran == [True, False]
    wal_only, full = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert wal_only["wal_partitions_read"] == full["wal_partitions_read"] >= 1
