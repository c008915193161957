"""llog serve's EMF reports (server/emf.py): what each interval's documents hold, and the latency sample."""

from __future__ import annotations

import io
import json
import random
from typing import Any

import pytest

from llog.errors import LlogError
from server.emf import LATENCY_SAMPLES, EmfReporter, RequestSample


class Counts:
    def __init__(self) -> None:
        self.now = {"produced_records": 0, "produced_bytes": 0, "consumed_records": 0, "consumed_bytes": 0}

    def __call__(self) -> dict[str, int]:
        return dict(self.now)


def documents(out: io.StringIO) -> dict[str, dict[str, Any]]:
    """The EMF documents written so far, by their service dimension; checks each is one well-formed EMF line."""
    by_service: dict[str, dict[str, Any]] = {}
    for line in out.getvalue().splitlines():
        doc = json.loads(line)
        (directive,) = doc["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == "llog"
        assert directive["Dimensions"] == [["service"]]
        for metric in directive["Metrics"]:
            assert metric["Name"] in doc  # each metric's value sits at the root
        by_service[doc["service"]] = doc
    out.seek(0)
    out.truncate()
    return by_service


def test_each_report_holds_what_was_counted_since_the_last_one() -> None:
    counts, requests, out = Counts(), RequestSample(), io.StringIO()
    counts.now["produced_records"] = 5  # before the reporter started: not reported
    reporter = EmfReporter(60, requests, counts, out)
    counts.now.update(produced_records=12, produced_bytes=700, consumed_records=3, consumed_bytes=90)
    for status, seconds in ((200, 0.004), (200, 0.006), (400, 0.001), (404, 0.001), (503, 0.5)):
        requests.add(status, seconds)
    reporter.report()
    docs = documents(out)
    # Powertools writes every value as a list, which EMF allows.
    assert (docs["produce"]["RecordsProduced"], docs["produce"]["BytesProduced"]) == ([7], [700])
    assert (docs["consume"]["RecordsConsumed"], docs["consume"]["BytesConsumed"]) == ([3], [90])
    serve = docs["serve"]
    assert (serve["Requests"], serve["ClientErrors"], serve["ServerErrors"]) == ([5], [2], [1])
    assert sorted(serve["Latency"]) == pytest.approx([1.0, 1.0, 4.0, 6.0, 500.0])
    units = {m["Name"]: m["Unit"] for m in serve["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert units == {"Requests": "Count", "ClientErrors": "Count", "ServerErrors": "Count", "Latency": "Milliseconds"}

    counts.now["consumed_records"] = 4
    counts.now["consumed_bytes"] = 120
    reporter.report()
    docs = documents(out)
    assert set(docs) == {"consume"}  # nothing produced and no request since: no produce or serve datapoints
    assert (docs["consume"]["RecordsConsumed"], docs["consume"]["BytesConsumed"]) == ([1], [30])

    reporter.report()
    assert documents(out) == {}  # an idle interval writes nothing


def test_the_latency_sample_is_bounded_and_uniform_over_the_interval() -> None:
    requests = RequestSample(random.Random(7))
    for i in range(10_000):
        requests.add(200, i / 1000)  # request i took i ms
    total, client_errors, server_errors, latencies = requests.take()
    assert (total, client_errors, server_errors) == (10_000, 0, 0)
    assert len(latencies) == LATENCY_SAMPLES == 99  # one document holds them, below Powertools' 100-value flush
    assert len(set(latencies)) == LATENCY_SAMPLES
    # Uniform over the interval, not its first requests: the sample's median sits near the middle.
    assert 3_500 < sorted(latencies)[LATENCY_SAMPLES // 2] < 6_500
    assert requests.take() == (0, 0, 0, [])  # take starts a new interval


def test_a_full_latency_sample_is_written_as_one_document() -> None:
    requests, out = RequestSample(random.Random(1)), io.StringIO()
    for _ in range(1_000):
        requests.add(200, 0.002)
    EmfReporter(60, requests, Counts(), out).report()
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    assert len(json.loads(lines[0])["Latency"]) == LATENCY_SAMPLES


def test_stop_writes_the_last_partial_interval() -> None:
    requests, out = RequestSample(), io.StringIO()
    reporter = EmfReporter(3600, requests, Counts(), out).start()
    requests.add(200, 0.01)
    reporter.stop()
    assert documents(out)["serve"]["Requests"] == [1]


@pytest.mark.parametrize("raw", ["-1", "soon", "3601"])
def test_an_invalid_interval_is_refused_with_its_name(raw: str) -> None:
    with pytest.raises(LlogError, match="LLOG_SERVE_EMF_INTERVAL_S"):
        EmfReporter.interval_from_env({"LLOG_SERVE_EMF_INTERVAL_S": raw})
    assert EmfReporter.interval_from_env({}) == 0
    assert EmfReporter.interval_from_env({"LLOG_SERVE_EMF_INTERVAL_S": "60"}) == 60
