"""bench/kinesis.py with tiny sizes against a real Oxia, an S3 server and one llog serve: both arms of each
comparison run, every answer checked, and the report sets the ratios beside the target."""

from __future__ import annotations

import os

import pytest

from bench import kinesis, wrk

pytestmark = pytest.mark.oxia


def test_puts_and_reads_through_both_apis() -> None:
    if wrk.wrk_binary() is None:
        if os.environ.get("LLOG_REQUIRE_WRK"):
            pytest.fail("wrk is required (LLOG_REQUIRE_WRK is set): apt-get install -y wrk")
        pytest.skip("wrk is not installed (apt-get install -y wrk)")

    result = kinesis.run(connections=2, seconds=1, runs=1, read_records=1200)

    for phase in ("put", "get"):
        arms = result[phase]["arms"]
        assert set(arms) == set(kinesis.arm_names(phase))
        assert all(arm["runs"] == 1 and arm["records_per_s"] > 0 and not arm["errors"] for arm in arms.values())
    assert result["get"]["arms"]["Kinesis GetRecords"]["requests"] == 1  # Limit 10,000: one answer
    assert result["get"]["arms"]["native /consume"]["requests"] == 1
    table = kinesis.report(result)
    assert "| Kinesis PutRecords | 1 |" in table
    assert "* PutRecords records/s / native /produce's: " in table
