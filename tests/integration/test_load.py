"""bench/load.py against ``llog serve`` over real HTTP: errors by type without Oxia, reconciliation with it.

The server runs in a thread on a free port against the session's moto S3, as
in tests/integration/test_http_server.py. Without Oxia (an unreachable
address) every produce is a 409 with ``OxiaUnavailable`` per partition and
nothing can be read back; the Oxia-backed tests run short loads whose every
acknowledged record must be read back.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import load
from bench.reconcile import RecordId, make_value
from llog.config import S3Config
from server.serve import LlogServer
from tests.conftest import serve_env, start_server, unreachable_oxia_env
from tests.integration.test_http_server import call_json

SUMMARY_FIELDS = {
    "run_id", "url", "auth", "topic", "config", "elapsed_s", "requests", "records", "throughput", "latency_ms",
    "errors", "reconciliation",
}
RECONCILIATION_FIELDS = {
    "ok", "complete", "acked", "found", "missing", "duplicates", "misplaced", "altered", "invented",
    "ambiguous_present", "ambiguous_absent", "rejected_absent", "foreign", "consumed", "read_errors", "examples",
    "seconds",
}


@pytest.fixture
def server_without_oxia(monkeypatch: pytest.MonkeyPatch, s3_config: S3Config, root: str) -> Iterator[LlogServer]:
    srv = start_server(monkeypatch, {**serve_env(s3_config, root), **unreachable_oxia_env()})
    try:
        yield srv
    finally:
        srv.shutdown()


def run_main(srv: LlogServer, tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "summary.json"
    code = load.main(["--url", srv.url, "--json", str(out), "--clients", "2", "--partitions", "2", *args])
    return code, json.loads(out.read_text())


# --- without Oxia --------------------------------------------------------------------------------------


def test_without_oxia_every_batch_is_rejected_by_type_and_nothing_can_be_read(server_without_oxia, tmp_path, capsys):
    code, summary = run_main(
        server_without_oxia, tmp_path, "--rate", "40", "--duration", "1.5", "--batch", "5", "--read-retries", "1"
    )
    out, err = capsys.readouterr()

    assert code == 1, "a reconciliation that could not read the partitions is not a success"
    assert set(summary) == SUMMARY_FIELDS
    requests, records = summary["requests"], summary["records"]
    n = requests["sent"]
    # 40 records/s in batches of 5 for 1.5 s caps it at 12 requests over both clients. Each answer waits out
    # the 300 ms connect timeout, so the clients fall behind that pace, the more so on a loaded machine.
    assert 2 <= n <= 12, "at most 12 requests, and at least one from each client"
    assert requests["by_status"] == {"409": n}
    assert (requests["ok"], requests["failed"]) == (0, n)
    assert records == {"sent": 5 * n, "acked": 0, "rejected": 5 * n, "ambiguous": 0}
    assert summary["errors"] == {"409 OxiaUnavailable": n}
    assert summary["throughput"]["records_per_s"] == 0
    assert summary["latency_ms"]["count"] == n
    assert 0 < summary["latency_ms"]["p50"] <= summary["latency_ms"]["p99"] <= summary["latency_ms"]["max"]
    assert summary["elapsed_s"] >= 1.5

    rec = summary["reconciliation"]
    assert set(rec) == RECONCILIATION_FIELDS
    assert (rec["ok"], rec["complete"]) == (False, False)
    assert (rec["acked"], rec["consumed"], rec["rejected_absent"]) == (0, 0, 5 * n)
    assert len(rec["read_errors"]) == 2
    assert all("OxiaUnavailable" in e for e in rec["read_errors"])

    assert re.search(r"^reconciliation +INCOMPLETE", out, re.M)
    assert re.search(rf"^error +409 OxiaUnavailable: {n} batches$", out, re.M)
    assert re.search(r"^\[ +1\.\ds\] sent \d+ acked 0 .* rec/s \(target 40\)$", err, re.M), err


def test_without_reconciliation_the_run_only_reports(server_without_oxia, tmp_path, capsys):
    code, summary = run_main(server_without_oxia, tmp_path, "--rate", "0", "--duration", "0.5", "--no-reconcile")
    assert code == 0
    assert summary["reconciliation"] is None
    assert summary["requests"]["sent"] > 0
    assert summary["records"]["acked"] == 0
    assert set(summary["errors"]) == {"409 OxiaUnavailable"}
    assert "not run (--no-reconcile)" in capsys.readouterr().out


# --- with Oxia ------------------------------------------------------------------------------------------


@pytest.mark.oxia
def test_a_load_reconciles_every_acknowledged_record(live_server, tmp_path):
    code, summary = run_main(
        live_server, tmp_path, "--clients", "3", "--partitions", "3", "--rate", "150", "--duration", "1.5",
        "--batch", "5", "--record-size", "64",
    )
    records, rec = summary["records"], summary["reconciliation"]
    assert code == 0, summary
    assert summary["errors"] == {}
    assert 0 < records["sent"] <= 225, "150 records/s for 1.5 s"
    assert records["acked"] == records["sent"]
    assert (rec["ok"], rec["complete"]) == (True, True)
    assert rec["acked"] == rec["found"] == rec["consumed"] == records["acked"]
    for name in ("missing", "duplicates", "misplaced", "altered", "invented", "ambiguous_present", "foreign"):
        assert rec[name] == 0, name
    assert summary["throughput"]["records_per_s"] > 0


@pytest.mark.oxia
def test_a_fenced_partition_rejects_its_batches_and_reconciliation_still_holds(live_server, tmp_path):
    topic = f"fenced-{uuid.uuid4().hex[:8]}"
    before = {"topic_partitions": [{"topic": topic, "partition": 1, "records": ["written before the run"]}]}
    assert call_json(live_server, "POST", "/produce", json.dumps(before))[0] == 200
    assert call_json(live_server, "POST", f"/topics/{topic}/partitions/1/fence")[0] == 200

    code, summary = run_main(
        live_server, tmp_path, "--topic", topic, "--rate", "100", "--duration", "1", "--batch", "5"
    )
    records, rec = summary["records"], summary["reconciliation"]
    assert code == 0, summary
    assert records["acked"] > 0
    assert records["rejected"] > 0
    assert records["acked"] + records["rejected"] == records["sent"]
    assert summary["errors"] == {"409 LogFenced": records["rejected"] // 5}
    assert rec["ok"]
    assert rec["found"] == records["acked"]
    assert rec["rejected_absent"] == records["rejected"]
    assert rec["foreign"] == 1, "the record written before the run is read and set aside"


@pytest.mark.oxia
def test_a_record_of_the_run_that_was_never_sent_fails_the_reconciliation(live_server):
    config = load.LoadConfig(
        url=live_server.url, topic=f"forged-{uuid.uuid4().hex[:8]}", run_id=uuid.uuid4().hex[:12], partitions=1,
        clients=1, rate=50, duration=0.5, record_size=64, batch=5, timeout=10,
    )
    forged = make_value(config.run_id, RecordId(client=9, seq=0), config.record_size).decode()
    body = {"topic_partitions": [{"topic": config.topic, "partition": 0, "records": [forged]}]}
    assert call_json(live_server, "POST", "/produce", json.dumps(body))[0] == 200

    summary = load.run(config, load.no_auth)

    rec = summary["reconciliation"]
    assert not rec["ok"]
    assert rec["complete"]
    assert rec["invented"] == 1
    assert rec["examples"]["invented"] == ["p0@1: client 9 seq 0 was never sent"]
    assert rec["found"] == summary["records"]["acked"] > 0
