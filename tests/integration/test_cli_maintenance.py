"""``llog compact``, ``llog gc`` and ``llog migrate`` from the command line."""

from __future__ import annotations

import json

import pytest

from devserver.devstack import free_port
from llog.cli import main
from llog.client.writer import LogWriter
from llog.config import OxiaConfig, S3Config
from tests.conftest import BUCKET


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, s3_config: S3Config, root: str) -> None:
    for name, value in {"LLOG_S3_BUCKET": BUCKET, "LLOG_S3_ENDPOINT_URL": s3_config.endpoint_url or "",
                        "LLOG_S3_REGION_NAME": "us-east-1", "LLOG_S3_ACCESS_KEY_ID": "testing",
                        "LLOG_S3_SECRET_ACCESS_KEY": "testing", "LLOG_ROOT_PREFIX": root}.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize(
    "argv",
    [["compact", "--topic", "orders", "--partition", "0"], ["gc"], ["migrate", "--topic", "o", "--partition", "0"]],
)
def test_an_unreachable_oxia_is_a_clear_error_and_exit_status_1(
    env: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    monkeypatch.setenv("LLOG_OXIA_SERVICE_ADDRESS", f"127.0.0.1:{free_port()}")
    monkeypatch.setenv("LLOG_OXIA_CONNECT_TIMEOUT_MS", "300")
    assert main(argv) == 1
    assert "OxiaUnavailable" in capsys.readouterr().err


@pytest.mark.oxia
def test_compact_prints_what_it_did(env: None, monkeypatch: pytest.MonkeyPatch, oxia_config: OxiaConfig,
                                    writer: LogWriter, topic: str, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LLOG_OXIA_SERVICE_ADDRESS", oxia_config.service_address)
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a", b"b"])

    assert main(["compact", "--topic", topic, "--partition", "0"]) == 0

    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["outcome"], r["start_offset"], r["end_offset"]) for r in lines] == [
        ("compacted", 1, 2), ("nothing_to_do", None, None)
    ]


@pytest.mark.oxia
def test_migrate_switches_a_partition_once(env: None, monkeypatch: pytest.MonkeyPatch, oxia_config: OxiaConfig,
                                           writer: LogWriter, topic: str, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LLOG_OXIA_SERVICE_ADDRESS", oxia_config.service_address)
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a", b"b"])

    assert main(["migrate", "--topic", topic, "--partition", "0"]) == 0
    assert main(["migrate", "--topic", topic, "--partition", "0"]) == 0  # idempotent

    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert first == second
    assert first["control"]["append_protocol"] == "sequential"
    assert writer.append(topic, 0, [b"c"]).start_offset == 3
