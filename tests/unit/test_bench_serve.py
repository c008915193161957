"""The HTTP benchmark's bookkeeping (bench/serve.py), without servers: counting and the rendered report."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest

from bench import serve_counting, serve_processes, serve_report, serve_requests, serve_scenarios, serve_settings

FLUSH = {
    "latency_ms": 14.0,
    "queue_ms": 4.0,
    "batcher_ms": 11.0,
    "rest_ms": 3.0,
    "flush_ms": 7.5,
    "s3_put_ms": 5.0,
    "oxia_write_ms": 1.5,
}
MACHINE = {
    "cores": 2,
    "busy_cores": 1.5,
    "processes": {"llog serve": 0.7, "load": 0.4, "versitygw": 0.2, "kernel threads": 0.1, "oxia": 0.05, "sshd": 0.01},
}


def produce_row(what: str, requests_per_s: float, p50: float, p99: float, s3_puts: float, oxia_writes: float
                ) -> dict[str, Any]:  # fmt: skip
    return {"what": what, "clients": 1, "requests": 100, "requests_per_s": requests_per_s, "p50_ms": p50,
            "p99_ms": p99, "s3_puts_per_request": s3_puts, "oxia_writes_per_request": oxia_writes,
            "server_cpu_ms_per_request": 1000 / requests_per_s, "errors": {}, "flush": FLUSH,
            "machine_cpu": MACHINE}  # fmt: skip


def ingest_run(connections: int, mb_per_s: float, raw_mb_per_s: float) -> dict[str, Any]:
    return {
        "llog": {"connections": connections, "partitions": 4, "records": 100, "record_size": 1024,
                 "mb_per_s": mb_per_s, "requests": 1000, "p50_ms": 80.0, "p99_ms": 200.0, "s3_puts": 100,
                 "mean_put_bytes": 800000.0, "server_cpu_ms_per_request": 3.5, "errors": {},
                 "flush": dict.fromkeys(FLUSH), "machine_cpu": {"cores": 2, "busy_cores": 0.25, "processes": {}}},
        "raw_s3": {"writers": 4, "object_bytes": 800000, "puts": 300, "mb_per_s": raw_mb_per_s, "p50_ms": 40.0},
    }  # fmt: skip


def results(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "s3_server": "versitygw",
        "batcher": {"max_delay_ms": 500, "max_in_flight": 4, "max_bytes": 4194304},
        "floor": {"s3_put_p50_ms": 3.0, "oxia_put_p50_ms": 2.0, "floor_ms": 5.0},
        "produce": {
            "idle": produce_row("idle", 100.0, 8.0, 20.0, 1.0, 1.0),
            "partitions16": produce_row("16 partitions", 50.0, 12.0, 30.0, 1.0, 16.0),
            "clients32": {**produce_row("32 clients", 2000.0, 15.0, 30.0, 0.1, 0.1), "errors": {"409 X": 2}},
        },
        "tail": [
            {"what": "same process", "samples": 40, "produce_p50_ms": 10.0, "e2e_p50_ms": 11.0,
             "e2e_p99_ms": 30.0, "after_ack_p50_ms": 1.0, "errors": {}},
            {"what": "other process", "samples": 39, "produce_p50_ms": 10.0, "e2e_p50_ms": 40.0,
             "e2e_p99_ms": 90.0, "after_ack_p50_ms": 30.0, "errors": {"consume 200: offsets None, not [7]": 1}},
        ],
        "ingest": [ingest_run(16, 30.0, 50.0), ingest_run(64, 45.0, 80.0), ingest_run(128, 40.0, 60.0)],
        "flush_sharing": [
            {"clients": c, "partitions": 4, "batch": 250, "record_size": 1024, "mb_per_s": 10.0 * c,
             "requests": 100 * c, "p50_ms": 20.0, "p99_ms": 40.0, "s3_puts": 100 * c // k, "mean_put_bytes": 1.0,
             "server_cpu_ms_per_request": 2.0, "errors": {}}
            for c, k in ((1, 1), (4, 2), (16, 8))
        ],
        "many_clients": {"clients": 256, "partitions": 16, "requests": 3000, "requests_per_s": 500.0,
                         "p50_ms": 400.0, "p99_ms": 1500.0, "transport_errors": 0, "errors": {},
                         "reconciliation": "OK"},
        "ceiling": {str(c): {"what": f"{c} clients", "clients": c, "requests": 100 * c, "requests_per_s": rate,
                             "p50_ms": 0.5, "p99_ms": 2.0, "errors": {}}
                    for c, rate in ((1, 2500.0), (32, 4000.0))},
        "peer": {"skipped": "no s2-lite binary"},
    }  # fmt: skip
    return {**base, **changes}


def test_report_renders_every_table_and_each_target_with_its_numbers() -> None:
    text = serve_report.report(results())
    assert "S3 server: **versitygw**" in text
    assert "= **5.00 ms**" in text
    assert "| idle | 100 | 100.0 | 8.0 | 20.0 | 1.000 | 1.00 | 10.00 | 0 |" in text
    assert "| 32 clients | 100 | 2000.0 | 15.0 | 30.0 | 0.100 | 0.10 | 0.50 | 409 X: 2 |" in text
    assert "| llog serve: 16 connections, 100 records of 1024 B per request over 4 partitions | 30.00 | 1000 | 80.0 " \
           "| 200.0 | 100, 800000 B | 3.50 | 0 |" in text  # fmt: skip
    assert "| llog serve: 128 connections, 100 records of 1024 B per request over 4 partitions | 40.00 |" in text
    assert "| raw S3 PUTs: 4 writers, 800000 B objects | 80.00 | 300 | 40.0 | - | 300, 800000 B | - | 0 |" in text
    assert "| other process | 39 | 10.0 | 40.0 | 90.0 | 30.0 | consume 200: offsets None, not [7]: 1 |" in text
    assert "| 256 keep-alive clients, 1 record per request, 16 partitions | 3000 |" in text
    assert "| produce requests of 256,000 B (250 records of 1,024 B), 4 partitions | requests | S3 PUTs |" in text
    assert "| 1 clients | 100 | 100 | 1.00 | 10.00 | 20.0 | 0 |" in text
    assert "| 16 clients | 1600 | 200 | 8.00 | 160.00 | 20.0 | 0 |" in text
    assert "| 32 clients, 1 record per request | 3200 | 4000.0 | 0.50 | 2.00 | 0 |" in text
    assert "Peer (s2-lite 0.43.4): not measured: no s2-lite binary." in text
    assert "| 32 clients | 14.00 | 4.00 | 11.00 | 3.00 | 7.50 | 5.00 | 1.50 | 1.50 of 2 | 0.70 | 0.40 | versitygw " \
           "0.20, kernel threads 0.10, oxia 0.05, sshd 0.01 |" in text  # fmt: skip
    # The sustained ingest is the run where llog serve reached the most MB/s: 64 connections here.
    assert "| ingest, 64 connections | - | - | - | - | - | - | - | 0.25 of 2 | 0.00 | 0.00 |  |" in text
    targets = text.split("Targets (issue 15)")[1]
    assert "Idle produce p50 / floor (8.0 ms / 5.0 ms): 1.60 (≤ 2): met" in targets
    assert "32 clients requests/s / 1 client's (2000.0 / 100.0): 20.00 (≥ 15): met" in targets
    assert "32 clients p99 / 1 client's p50 (30.0 ms / 8.0 ms): 3.75 (≤ 4): met" in targets
    assert "  * server CPU per request at 32 clients: 0.50 ms, so one core serves at most 2000 requests/s; 15x the " \
           "single client's rate (1500 requests/s) needs at most 0.67 ms" in targets  # fmt: skip
    assert "  * the same 32 clients against llog serve's HTTP server with nothing behind it: 4000 requests/s, 40.0x " \
           "the single llog client's rate; llog reached 0.50 of that ceiling" in targets  # fmt: skip
    assert "16-partition request p50 / 1-partition p50 (12.0 ms / 8.0 ms): 1.50 (≤ 2): met" in targets
    assert "same process: produce→consume p50 / produce p50 (11.0 ms / 10.0 ms): 1.10 (≤ 1.5): met" in targets
    assert "other process: produce→consume p50 / produce p50 (40.0 ms / 10.0 ms): 4.00 (≤ 1.5): **not met**" in targets
    assert "Sustained ingest MB/s / raw S3 PUT MB/s (64 connections: 45.00 / 80.00): 0.56 (≥ 0.5): met" in targets
    assert "resets and refused connections: 0 (= 0): met" in targets
    assert targets.count("\n* ") == 9


def test_a_missing_measurement_is_not_met_and_peer_rows_render() -> None:
    idle = {**results()["produce"]["idle"], "p50_ms": None}
    peer = {"rows": {
        "idle": {"what": "idle: 1 client, 1 record", "requests": 50, "requests_per_s": 20.0, "p50_ms": 50.0,
                 "p99_ms": 60.0, "errors": {}},
        "clients32": {"what": "32 clients", "requests": 900, "requests_per_s": 300.0, "p50_ms": 100.0,
                      "p99_ms": 120.0, "errors": {"503 HTTP": 1}},
    }}  # fmt: skip
    text = serve_report.report(results(produce={**results()["produce"], "idle": idle}, peer=peer))
    assert "Idle produce p50 / floor (- ms / 5.0 ms): - (≤ 2): **not met**" in text
    assert "| 32 clients | 900 | 300.0 | 100.0 | 120.0 | 503 HTTP: 1 |" in text


def batcher(flushes: int, calls: int, queue_s: float, call_s: float, flush_s: float) -> dict[str, Any]:
    return {"flushes": flushes, "flushed_calls": calls, "queue_seconds": queue_s, "call_seconds": call_s,
            "flush_seconds": flush_s}  # fmt: skip


def test_operations_are_counted_from_the_metrics_document() -> None:
    before = {"s3": {"put": {"calls": 2, "bytes": 200, "seconds": 0.5}, "billing": {}},
              "oxia": {"put_sequential": {"calls": 3, "seconds": 0.25}, "get": {"calls": 9, "seconds": 1.0}},
              "batcher": batcher(2, 10, 0.5, 2.0, 1.0)}  # fmt: skip
    after = {"s3": {"put": {"calls": 5, "bytes": 900, "seconds": 0.5 + 0.015}, "get": {"calls": 4}, "billing": {}},
             "oxia": {"put_sequential": {"calls": 7, "seconds": 0.25 + 0.004}, "put": {"calls": 1, "seconds": 0.001},
                      "get": {"calls": 20, "seconds": 9.0}},
             "batcher": batcher(5, 40, 0.5 + 0.12, 2.0 + 0.33, 1.0 + 0.0225)}  # fmt: skip
    ops = serve_counting.counts_between(serve_counting.op_counts(before), serve_counting.op_counts(after))
    assert {k: ops[k] for k in ("s3_puts", "s3_put_bytes", "oxia_writes", "flushes", "flushed_calls")} == {
        "s3_puts": 3, "s3_put_bytes": 700, "oxia_writes": 5, "flushes": 3, "flushed_calls": 30,
    }  # fmt: skip
    means = serve_counting.flush_breakdown(ops, latency_ms=14.0)
    # Oxia's reads (get) are not writes: 4 ms over 4 writes.
    expected = {"latency_ms": 14.0, "queue_ms": 4.0, "batcher_ms": 11.0, "rest_ms": 3.0, "flush_ms": 7.5,
                "s3_put_ms": 5.0, "oxia_write_ms": 1.0}  # fmt: skip
    assert means == {k: pytest.approx(v) for k, v in expected.items()}


def test_a_window_without_flushes_has_no_means() -> None:
    ops = dict.fromkeys(("s3_puts", "s3_put_seconds", "oxia_writes", "oxia_write_seconds", "flushes",
                         "flushed_calls", "queue_seconds", "call_seconds", "flush_seconds"), 0.0)  # fmt: skip
    assert set(serve_counting.flush_breakdown(ops, latency_ms=None).values()) == {None}


def test_a_produce_answer_succeeds_only_when_every_partition_was_acknowledged() -> None:
    ok = {"topic": "t", "ok": True, "count": 1, "start_offset": 4, "end_offset": 4}
    fenced = {"topic": "t", "ok": False, "count": 1, "error_type": "LogFenced"}
    check = serve_requests.produce_check(2)
    assert check(200, json.dumps({"results": [ok, ok]}).encode()) is None
    assert check(409, json.dumps({"results": [ok, fenced]}).encode()) == "409 LogFenced"
    assert serve_requests.produce_check(1)(502, b"Bad Gateway") == "502 HTTP"
    assert json.loads(serve_requests.produce_request("t", [0, 1])) == {"topic_partitions": [
        {"topic": "t", "partition": 0, "records": [serve_settings.VALUE]},
        {"topic": "t", "partition": 1, "records": [serve_settings.VALUE]},
    ]}  # fmt: skip


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux /proc")
def test_the_machine_split_names_the_busy_server_and_this_process(tmp_path: Path) -> None:
    busy = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\ntime.sleep(60)\n"
    server = serve_processes.Service(
        "busy", [sys.executable, "-c", busy], {}, tmp_path / "busy.log", 0, lambda _s: None
    )
    server.launch()
    try:
        reads: list[float] = []

        def clock() -> float:
            reads.append(time.monotonic())
            return reads[-1]

        machine = serve_counting.MachineCpu(server, clock=clock)
        end = time.process_time() + 0.2
        while time.process_time() < end:  # this process (the benchmark's clients) is busy too
            pass
        deadline = time.monotonic() + 30
        while server.cpu_seconds() < 0.25 and time.monotonic() < deadline:
            time.sleep(0.01)
        split = machine.since_start()
    finally:
        server.stop()
    window = reads[1] - reads[0]  # CPU seconds, not shares of a window a slow machine makes longer
    assert split["cores"] == os.cpu_count()
    assert split["processes"]["llog serve"] * window > 0.2
    assert split["processes"]["load"] * window > 0.15
    assert split["busy_cores"] * window >= 0.3


def write_proc(root: Path, processes: dict[int, tuple[str, int, int, int]], cpu_line: str) -> None:
    """A ``/proc`` of ``pid -> (comm, flags, CPU ticks, start time)``: each process's stat as Linux writes it."""
    for pid, (comm, flags, ticks, start) in processes.items():
        (root / str(pid)).mkdir(exist_ok=True)
        fields = ["S", "1", str(pid), str(pid), "0", "-1", str(flags), "0", "0", "0", "0", str(ticks), "0", "0", "0",
                  "20", "0", "1", "0", str(start)]  # fmt: skip
        (root / str(pid) / "stat").write_text(f"{pid} ({comm}) {' '.join(fields)} 0 0\n")
    (root / "stat").write_text(cpu_line + "\ncpu0 1 2 3\n")


def test_the_machine_split_reads_names_kernel_threads_restarts_and_idle_time_from_proc(tmp_path: Path) -> None:
    tick = os.sysconf("SC_CLK_TCK")
    serve_pid, this_pid = 4242, os.getpid()
    server = serve_processes.Service("serve", [], {}, tmp_path / "log", 0, lambda _s: None)
    server._proc = cast(Any, type("Proc", (), {"pid": serve_pid})())
    before = {serve_pid: ("python", 0, 0, 100), this_pid: ("python", 0, 0, 50), 7: ("versitygw", 0, 0, 60),
              8: ("kworker/u8:0-writeback", 0x00208040, 0, 2), 9: ("oxia", 0, 10 * tick, 70)}  # fmt: skip
    # user nice system idle iowait irq softirq steal guest guest_nice: guest time is in user already
    write_proc(tmp_path, before, "cpu  0 0 0 0 0 0 0 0 0 0")
    seconds = iter([0.0, 1.0, 2.0])  # a window of exactly 1 s: shares are not rounded away by a slow machine
    machine = serve_counting.MachineCpu(server, proc=tmp_path, clock=lambda: next(seconds))
    after = {**before, serve_pid: ("python", 0, 3 * tick, 100), this_pid: ("python", 0, tick, 50),
             7: ("versitygw", 0, tick, 60), 8: ("kworker/u8:0-ext4-rsv-conversion", 0x00208040, tick // 2, 2),
             9: ("oxia", 0, tick, 80)}  # fmt: skip  # Oxia restarted under the same pid: its ticks are all new
    write_proc(tmp_path, after, "cpu  300 0 100 500 100 0 0 0 999 0")
    split = machine.since_start()
    assert split["busy_cores"] == pytest.approx(split["cores"] * 0.4), "idle and iowait: 600 of 1,000 ticks"
    per_load = {name: value / split["processes"]["load"] for name, value in split["processes"].items()}
    assert per_load == pytest.approx({"llog serve": 3, "load": 1, "versitygw": 1, "oxia": 1, "kernel threads": 0.5})
    assert next(iter(split["processes"])) == "llog serve", "busiest first"
    # wrk's CPU (a child that ran and ended within the window, gone from /proc) counts as the load's
    with_wrk = machine.since_start({"load": 2.0, "gone": 0.0})["processes"]
    assert with_wrk["load"] == pytest.approx(with_wrk["llog serve"]), "1 s of this process's and 2 s of wrk's"
    assert "gone" not in with_wrk


def test_an_ingest_request_spreads_distinct_values_of_the_record_size_evenly_over_the_partitions() -> None:
    shape = serve_settings.IngestShape(connections=16, partitions=4, records=100, record_size=1024)
    doc = json.loads(serve_scenarios.ingest_request("t", shape))
    entries = doc["topic_partitions"]
    assert [(e["topic"], e["partition"], len(e["records"])) for e in entries] == [("t", p, 25) for p in range(4)]
    values = [v for e in entries for v in e["records"]]
    assert {len(v) for v in values} == {1024}
    assert len(set(values)) == 100


def test_the_sustained_ingest_is_the_run_with_the_most_mb_per_s() -> None:
    runs = results()["ingest"]
    assert serve_report.sustained(runs) is runs[1]
    assert serve_report.sustained(list(reversed(runs))) is runs[1]
