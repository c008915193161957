"""The append benchmark's bookkeeping (bench/append.py), which needs no Oxia: scenarios, counting, targets."""

from __future__ import annotations

from typing import Any

from bench import append
from llog.store.metrics import OperationStats


def row(protocol: str, writers: int, kind: str = "threads", partitions: int = 1, **values: Any) -> dict[str, Any]:
    base = {
        "protocol": protocol,
        "writers": writers,
        "kind": kind,
        "partitions": partitions,
        "appends": 100,
        "appends_per_s": 100.0,
        "p50_ms": 10.0,
        "p99_ms": 20.0,
        "oxia_reads_per_append": 0.0,
        "oxia_writes_per_append": 1.0,
        "s3_requests_per_append": 1.0,
        "cas_conflicts_per_append": 0.0,
        "oxia_retries_per_append": 0.0,
        "errors": {},
    }
    return {**base, **values}


def test_scenarios_cover_the_issue_matrix_with_both_protocols_back_to_back() -> None:
    found = append.scenarios(append.PROTOCOLS, (1, 8, 32, 64), append.KINDS, (1, 16))
    assert len(found) == 2 * 4 * 2 * 2
    assert len(set(found)) == len(found)
    for first, second in zip(found[::2], found[1::2], strict=True):
        assert (first.protocol, second.protocol) == ("cas", "sequential")
        assert (first.writers, first.kind, first.partitions) == (second.writers, second.kind, second.partitions)


def test_counter_differences_include_conflicts_and_retries() -> None:
    before = {"put": OperationStats(calls=2, retries=1, conflicts=1)}
    after = {"put": OperationStats(calls=10, retries=3, conflicts=4), "get": OperationStats(calls=5)}
    assert append._diff(before, after) == {"put": (8, 2, 3), "get": (5, 0, 0)}


def test_targets_are_computed_from_rows_of_the_same_run() -> None:
    rows = [
        row("cas", 1),
        row("sequential", 1, p50_ms=10.0),
        row("cas", 32, appends_per_s=50.0, cas_conflicts_per_append=3.5, oxia_writes_per_append=3.0),
        row("sequential", 32, appends_per_s=600.0, p99_ms=25.0, oxia_writes_per_append=1.0),
        row("sequential", 32, partitions=16, appends_per_s=10.0),  # other layouts do not count
    ]
    text = append.targets(rows)
    assert "| threads | 12.0 (met) | 2.50 (met) | 1.00 (met) |" in text
    assert "processes" not in text  # no rows for processes: no line rather than a made-up one
    slow = [r if r["protocol"] != "sequential" or r["writers"] != 32 else {**r, "appends_per_s": 400.0}
            for r in rows]  # fmt: skip
    assert "8.0 (not met)" in append.targets(slow)


def test_the_table_has_a_row_per_scenario_and_the_report_adds_the_targets() -> None:
    rows = [row("cas", 1), row("sequential", 1, errors={"LogFenced": 2})]
    table = append.table(rows)
    assert len(table.splitlines()) == 4
    assert "{'LogFenced': 2}" in table
    assert "Targets" in append.report(rows)


def test_reads_and_writes_are_told_apart() -> None:
    assert {"get", "get_ceiling", "get_lower", "range_scan"} <= append.READ_OPS
    assert {"put", "put_sequential", "delete", "delete_range"} <= append.WRITE_OPS
    assert not append.READ_OPS & append.WRITE_OPS


def test_the_floor_row_is_reported_apart_and_single_writer_p50s_are_multiples_of_it() -> None:
    floor = {"protocol": "floor", "s3_put_p50_ms": 2.0, "oxia_put_p50_ms": 0.5, "floor_ms": 2.5}
    rows = [floor, row("cas", 1, p50_ms=5.0), row("sequential", 1, p50_ms=3.0)]
    text = append.floor_report(rows)
    assert "**2.50 ms**" in text
    assert "cas, 1 writer (threads): p50 5.00 ms = 2.0x the floor" in text
    assert "sequential, 1 writer (threads): p50 3.00 ms = 1.2x the floor" in text
    assert "floor" not in append.table(rows).split("\n", 2)[2]  # not a row of the table
    assert append.report(rows).startswith("Floor on the same servers")
    assert append.floor_report(rows[1:]) == ""
