"""The consume benchmark's bookkeeping (bench/consume.py, bench/stack.py), which needs no Oxia."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from bench import consume, stack
from llog.errors import OffsetOutOfRange
from llog.protocol.read import LogRecord
from llog.service.consume import ConsumeRequest, PartitionFetch
from llog.store.metrics import OperationStats

KIB = b"x" * 1024


def records(first: int, last: int, value: bytes = KIB) -> list[LogRecord]:
    return [LogRecord(o, value, None, (), 0) for o in range(first, last + 1)]


def row(phase: str, reader: str, **values: Any) -> dict[str, Any]:
    base = {
        "phase": phase,
        "reader": reader,
        "data": "100 x 1 KiB per append",
        "records": 32_000,
        "requests": 320,
        "records_per_s": 10_000.0,
        "mb_per_s": 10.0,
        "p50_ms": 5.0,
        "s3_gets_per_mb": 1.0,
        "s3_read_bytes_per_value_byte": 1.0,
        "oxia_reads_per_mb": 2.0,
    }
    return {**base, **values}


def test_a_tally_counts_records_value_bytes_and_one_time_per_request() -> None:
    tally = consume.Tally()
    assert tally.add(records(1, 3), 0.5) == 3
    assert tally.add(records(4, 4, b"ab"), 0.25) == 4
    assert tally.add([], 0.25) == 0
    assert (tally.records, tally.value_bytes, tally.latencies, tally.seconds) == (4, 3 * 1024 + 2, [0.5, 0.25, 0.25], 1)


def test_a_row_counts_gets_and_their_bytes_per_consumed_mb_and_only_oxia_reads() -> None:
    tally = consume.Tally(records=2000, value_bytes=2_000_000, latencies=[0.5, 1.0, 0.5])
    s3 = {
        "get": OperationStats(calls=2, bytes=16_000_000),
        "range_get": OperationStats(calls=4, bytes=1_000_000),
        "list": OperationStats(calls=1),
    }
    oxia = {"get": OperationStats(calls=3), "range_scan": OperationStats(calls=3), "put": OperationStats(calls=7)}
    r = consume.summarize("compacted", "lambda", tally, oxia, s3, "4 objects")
    assert r["records_per_s"] == pytest.approx(1000)
    assert r["mb_per_s"] == pytest.approx(1.0)
    assert r["p50_ms"] == pytest.approx(500)
    assert r["requests"] == 3
    assert r["s3_gets_per_mb"] == pytest.approx(3.0)  # 6 GETs (whole and range) over 2 MB of values
    assert r["s3_read_bytes_per_value_byte"] == pytest.approx(8.5)
    assert r["s3_other_requests"] == 1
    assert r["oxia_reads_per_mb"] == pytest.approx(3.0)
    assert r["oxia_writes"] == 7


def test_a_row_of_nothing_read_is_not_a_division_by_zero() -> None:
    r = consume.summarize("tail", "serve", consume.Tally(), {}, {}, "")
    assert all(math.isnan(r[k]) for k in consume.MEDIAN_KEYS)


def test_runs_merge_into_medians_per_phase_and_reader_in_first_run_order() -> None:
    runs = [
        [row("tail", "lambda", mb_per_s=1.0), row("tail", "serve", p50_ms=1.0)],
        [row("tail", "serve", p50_ms=3.0), row("tail", "lambda", mb_per_s=5.0)],
        [row("tail", "lambda", mb_per_s=2.0), row("tail", "serve", p50_ms=2.0)],
    ]
    merged = consume.merge_runs(runs)
    assert [(r["phase"], r["reader"], r["runs"]) for r in merged] == [("tail", "lambda", 3), ("tail", "serve", 3)]
    assert merged[0]["mb_per_s"] == 2.0
    assert merged[1]["p50_ms"] == 2.0


def test_readers_take_turns_going_first() -> None:
    assert consume.turn(consume.READERS, 0) == ["lambda", "serve", "iter_from"]
    assert consume.turn(consume.READERS, 1) == ["serve", "iter_from", "lambda"]
    assert consume.turn(consume.READERS, 5) == consume.turn(consume.READERS, 2)
    assert consume.turn([], 3) == []


def test_consume_requests_follow_next_fetch_offset_until_the_last_wanted_record() -> None:
    requests: list[ConsumeRequest] = []

    def service(request: ConsumeRequest) -> list[PartitionFetch]:
        requests.append(request)
        (p,) = request.partitions
        got = records(p.fetch_offset, min(p.fetch_offset + 9, 25))
        return [PartitionFetch(p.topic, p.partition, p.fetch_offset, got)]

    tally = consume.Tally()
    consume.consume_range(service, "orders", 3, 1, 25, 0, tally)
    assert [r.partitions[0].fetch_offset for r in requests] == [1, 11, 21]
    assert tally.records == 25
    first = requests[0]
    assert (first.partitions[0].topic, first.partitions[0].partition) == ("orders", 3)
    assert first.partitions[0].partition_max_bytes == consume.PARTITION_MAX_BYTES == 1024 * 1024
    assert (first.max_wait_ms, first.min_bytes, first.max_bytes) == (0, 1, consume.MAX_RESPONSE_BYTES)


def test_a_consume_error_or_an_empty_answer_stops_the_benchmark() -> None:
    error = OffsetOutOfRange("orders", 0, 5, 1, 4)

    def failing(request: ConsumeRequest) -> list[PartitionFetch]:
        return [PartitionFetch("orders", 0, 5, [], 4, 1, error)]

    with pytest.raises(OffsetOutOfRange):
        consume.consume_range(failing, "orders", 0, 5, 9, 0, consume.Tally())

    def empty(request: ConsumeRequest) -> list[PartitionFetch]:
        return [PartitionFetch("orders", 0, 5, [], 4)]

    with pytest.raises(RuntimeError, match="no records"):  # rather than loop forever
        consume.consume_range(empty, "orders", 0, 5, 9, 0, consume.Tally())


def test_the_report_compares_rows_of_the_same_run() -> None:
    rows = [
        row("tail", "lambda", p50_ms=6.0, s3_gets_per_mb=9.77, oxia_reads_per_mb=19.5),
        row("tail", "serve", p50_ms=0.2, s3_gets_per_mb=0.0, oxia_reads_per_mb=0.0),
        row("tail", "iter_from"),
        row("compacted", "lambda", s3_gets_per_mb=0.96, s3_read_bytes_per_value_byte=8.1),
        row("compacted", "serve", s3_gets_per_mb=0.12, s3_read_bytes_per_value_byte=1.01),
        row("compacted", "iter_from", s3_gets_per_mb=0.12, s3_read_bytes_per_value_byte=1.01),
    ]
    text = consume.report(rows)
    assert len(consume.table(rows).splitlines()) == 2 + len(rows)
    assert "without it (`lambda`) 6.00 ms (30x)" in text
    assert "`lambda` makes 8.0x the GETs per MB" in text
    assert "reads 8.1 bytes from S3 per value byte" in text
    assert "0.12 GETs per MB, 1.01 bytes read" in text
    # A phase that was not run: no comparison rather than a made-up one.
    tail_only = consume.comparisons(rows[:3])
    assert tail_only.startswith("* Tail")
    assert "Compacted" not in tail_only
    assert "From the rows above" not in consume.report([row("tail", "iter_from")])


def test_counter_differences_cover_every_field() -> None:
    before = {"get": OperationStats(calls=1, errors=1, retries=1, bytes=10, seconds=0.5, conflicts=1)}
    after = {
        "get": OperationStats(calls=4, errors=1, retries=3, bytes=110, seconds=1.5, conflicts=2),
        "range_get": OperationStats(calls=2, bytes=7),
    }
    assert stack.stats_diff(before, after) == {
        "get": OperationStats(calls=3, errors=0, retries=2, bytes=100, seconds=1.0, conflicts=1),
        "range_get": OperationStats(calls=2, bytes=7),
    }
    assert {"get", "range_get"} == stack.S3_GET_OPS


def test_without_an_oxia_binary_the_stack_says_why_before_starting_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stack, "find_oxia_binary", lambda dirs: None)
    monkeypatch.setattr(stack, "ROOT", tmp_path)

    def no_server(*args: object, **kwargs: object) -> None:
        raise AssertionError("nothing may start without an Oxia binary")

    monkeypatch.setattr(stack, "MotoS3", no_server)
    monkeypatch.setattr(stack, "OxiaProcess", no_server)
    with pytest.raises(RuntimeError, match="no Oxia binary"), stack.local_stack("b"):
        pass
    (tmp_path / ".tools").mkdir()
    (tmp_path / ".tools" / "oxia-unavailable").write_text("go install failed: 403\n")
    with pytest.raises(RuntimeError, match=r"^go install failed: 403$"), stack.local_stack("b"):
        pass


def test_the_script_reports_not_measured_when_there_is_no_oxia(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    def unavailable(*args: object, **kwargs: object) -> list[dict[str, Any]]:
        raise RuntimeError("no Oxia binary")

    monkeypatch.setattr(consume, "run", unavailable)
    assert consume.main([]) == 2
    assert capsys.readouterr().err == "Not measured here: no Oxia binary\n"


def test_the_partitions_report_compares_many_partitions_with_one() -> None:
    rows = [
        {"partitions": n, "protocol": "sequential", "requests": 60, "p50_ms": p50, "p99_ms": 2 * p50,
         "oxia_reads_per_request": reads}
        for n, p50, reads in ((1, 4.0, 2.0), (16, 10.0, 17.0))
    ]  # fmt: skip
    text = consume.partitions_report(rows)
    assert "| 1 | sequential | 60 | 4.00 | 8.00 | 2.0 |" in text
    assert "| 16 | sequential | 60 | 10.00 | 20.00 | 17.0 |" in text
    assert "16 partitions: 2.5x the p50 of one for a single partition, with 17.0 Oxia reads (2.0 for one" in text


def test_the_behind_report_compares_the_farthest_reader_with_one_a_page_behind() -> None:
    rows = [
        {"behind": d, "protocol": "sequential", "requests": 40, "p50_ms": p50, "p99_ms": 2 * p50,
         "oxia_reads_per_request": reads}
        for d, p50, reads in ((1, 4.0, 2.0), (64, 10.0, 3.0), (1000, 12.5, 3.0))
    ]  # fmt: skip
    text = consume.behind_report(rows)
    assert "| 1 | sequential | 40 | 4.00 | 8.00 | 2.0 |" in text
    assert "| 1,000 | sequential | 40 | 12.50 | 25.00 | 3.0 |" in text
    assert "1,000 batches behind: 1.25x the p50 at 64 behind (one page of the index)" in text
    assert "x the p50" not in consume.behind_report(rows[:1]), "no page row to compare with"
