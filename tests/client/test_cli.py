"""``llog produce`` and ``llog consume`` through ``llog.cli.main``, against a real ``llog serve``."""

from __future__ import annotations

import io
import json
import sys
from datetime import datetime

import pytest

from llog.cli import main
from llog_client import cli as client_cli
from llog_client.producer import Producer
from server.serve import LlogServer
from tests.client.conftest import call


def run_produce(monkeypatch: pytest.MonkeyPatch, argv: list[str], lines: bytes) -> int:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(lines)))
    return main(argv)


def test_produce_then_consume_round_trip(
    server: LlogServer, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    lines = b"".join(b"key-%d:value %d\n" % (i, i) for i in range(20)) + b"no key here\n"
    status = run_produce(monkeypatch, ["produce", "cli", "--url", server.url, "--key-separator", ":"], lines)
    assert status == 0

    argv = ["consume", "cli", "--url", server.url, "--group", "printers", "--from-beginning", "--format", "json"]
    assert main([*argv, "--count", "21"]) == 0
    printed = [json.loads(line) for line in capsysbinary.readouterr().out.splitlines()]
    assert sorted(r["value"] for r in printed) == sorted([f"value {i}" for i in range(20)] + ["no key here"])
    assert {r["key"] for r in printed} == {f"key-{i}" for i in range(20)} | {None}

    # The group committed what was printed: a second run prints only what came after.
    assert run_produce(monkeypatch, ["produce", "cli", "--url", server.url, "--partition", "0"], b"later\n") == 0
    assert main([*argv[:-2], "--key-separator", "=", "--count", "1"]) == 0
    assert capsysbinary.readouterr().out == b"=later\n"


def test_consume_count_stops_mid_poll_and_commits_only_what_it_printed(
    server: LlogServer, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    lines = b"".join(b"line %d\n" % i for i in range(10))
    assert run_produce(monkeypatch, ["produce", "counted", "--url", server.url, "--partition", "0"], lines) == 0
    argv = ["consume", "counted", "--url", server.url, "--group", "g", "--from-beginning"]
    assert client_cli.main([*argv, "--count", "4"]) == 0
    assert capsysbinary.readouterr().out == b"".join(b"line %d\n" % i for i in range(4))
    assert client_cli.main([*argv, "--count", "6", "--progress"]) == 0
    captured = capsysbinary.readouterr()
    assert captured.out == b"".join(b"line %d\n" % i for i in range(4, 10))
    assert b"6 records" in captured.err


def test_produce_reports_failed_records_and_exits_1(
    server: LlogServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_produce(monkeypatch, ["produce", "shut", "--url", server.url, "--partition", "0"], b"a\n") == 0
    call(server, "POST", "/topics/shut/partitions/0/fence")
    status = run_produce(monkeypatch, ["produce", "shut", "--url", server.url, "--partition", "0"], b"b\nc\n")
    assert status == 1
    assert "2 of 2 records failed (2 LogFenced)" in capsys.readouterr().err


def test_consume_from_time_overrides_committed_offsets(
    server: LlogServer, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    with Producer(server.url) as producer:
        for stamp in ("2026-11-24T08:00:00Z", "2026-11-24T09:00:00Z", "2026-11-24T10:00:00Z"):
            producer.send("clock", f"at {stamp}", partition=0, timestamp_ms=time_ms(stamp))
        producer.flush()
    argv = ["consume", "clock", "--url", server.url, "--group", "g", "--from-beginning", "--count", "3"]
    assert main(argv) == 0
    capsysbinary.readouterr()
    assert main([*argv[:-2], "--from-time", "2026-11-24T08:30:00+00:00", "--count", "2"]) == 0
    assert capsysbinary.readouterr().out == b"at 2026-11-24T09:00:00Z\nat 2026-11-24T10:00:00Z\n"
    assert main([*argv[:-2], "--from-time", str(time_ms("2026-11-24T10:00:00Z")), "--count", "1"]) == 0
    assert capsysbinary.readouterr().out == b"at 2026-11-24T10:00:00Z\n"


def test_from_time_must_be_a_time(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["consume", "clock", "--group", "g", "--from-time", "yesterday"])
    assert exited.value.code == 2
    assert "not a time: 'yesterday'" in capsys.readouterr().err


def time_ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)
