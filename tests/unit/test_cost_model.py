"""bench/cost_model.py: it runs, its numbers add up and scale, and its constants match the code and the CDK app.

Every check of the totals runs for both append protocols (``inputs.PROTOCOLS``: CAS and sequential).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from bench import cost_model
from bench.cost import comparisons, inputs, money, operations, report, tables
from bench.cost.kinesis import (
    kinesis_billed_kib,
    kinesis_on_demand_monthly,
    kinesis_per_million,
    kinesis_put_units,
    kinesis_shards,
)
from functions.common import names
from infra import functions as fns
from infra.oxia import COORDINATOR_SIZE, DATA_SERVERS
from infra.serve_fleet import TASK_CPU, TASK_MEMORY_MIB
from infra.settings import FRONT_DOORS, SERVE_ENDPOINTS, LlogSettings
from llog.config import CompactorConfig, GcConfig, Limits
from llog.format.kv.control import AppendProtocol
from llog.protocol import compaction, gc
from llog.protocol.index import PartitionIndex
from llog.service import consume
from llog.store import fetch

ROOT = Path(__file__).resolve().parents[2]
A = inputs.Assumptions()  # the production shape on EBS (the stack's default), the dev shape on EFS
ON_EFS = dataclasses.replace(A, oxia_storage=inputs.EFS)  # the production shape on EFS (llog:oxiaStorage=efs)
SIZES = inputs.REQUEST_SIZES
PROTOCOLS = pytest.mark.parametrize("protocol", inputs.PROTOCOLS, ids=[p.name for p in inputs.PROTOCOLS])


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return report.build(A)


def test_the_calculator_prints_every_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cost_model.main([]) == 0
    text = capsys.readouterr().out
    headings = [
        "Operations per produce request", "Variable cost per million produce requests", "Variable cost per GB ingested",
        "Fixed monthly cost", "Monthly total at steady throughput", "Break-even throughput", "Sensitivity",
        "Production shape by front door and Oxia storage", "Targets",
        "Storage per GB kept", "Idle long-polling consumer", "Garbage collection capacity",
    ]  # fmt: skip
    for heading in headings:
        assert f"### {heading}" in text
    assert cost_model.main(["--json", "--consumers", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["prices_as_of"] == inputs.PRICES_AS_OF
    assert doc["assumptions"]["consumers"] == 2
    assert set(doc["per_million_requests"]) == {"1 KB", "64 KB", "256 KB", "1 MB"}
    llog = {f"llog {shape} {protocol}" for shape in ("dev", "prod") for protocol in ("cas", "sequential")}
    assert set(doc["per_million_requests"]["1 KB"]) == llog | {"kinesis on-demand", "kinesis provisioned"}
    assert set(doc["operations_per_request"]) == {"cas", "sequential"}
    assert set(doc["assumptions"]["protocols"]) == {"cas", "sequential"}
    assert "protocol" not in doc["assumptions"]  # the report covers both


def test_the_tables_show_both_protocols_where_they_differ_and_once_where_not() -> None:
    text = tables.render(report.build(A), A)
    for row in ("| Oxia writes: produce, cas | 3.020 | 3.020 | 3.020 |",
                "| Oxia writes: produce, sequential | 1.020 | 1.020 | 1.020 |",
                "| API Gateway requests: produce | 1.000 | 1.000 | 1.000 |"):  # fmt: skip
        assert row in text
    lines = ("Lambda GB-seconds", "**llog, prod shape (Oxia on EBS gp3)", "llog, dev shape (standalone Oxia on EFS)")
    for line in lines:
        assert f"| {line}, cas |" in text or f"| {line}, cas** |" in text
        assert f"| {line}, sequential |" in text or f"| {line}, sequential** |" in text
    assert "| API Gateway (REST) |" in text  # the same in both protocols: one row
    assert "| S3 requests |" in text
    # The bill lines are the production shape's: on EBS no write is charged, with either protocol.
    assert "| Oxia EFS writes | $0.00 | $0.00 | $0.00 | $0.00 |" in text
    # With the production shape on EFS every Oxia write is: the protocols' lines differ, and the labels say EFS.
    on_efs = tables.render(report.build(ON_EFS), ON_EFS)
    for line in ("Oxia EFS writes", "**llog, prod shape (Oxia on EFS)", "llog, dev shape (standalone Oxia on EFS)"):
        assert f"| {line}, cas |" in on_efs or f"| {line}, cas** |" in on_efs
        assert f"| {line}, sequential |" in on_efs or f"| {line}, sequential** |" in on_efs


@PROTOCOLS
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("shape", inputs.SHAPES)
def test_the_total_per_million_is_the_sum_of_its_parts(
    size: int, shape: inputs.OxiaShape, protocol: inputs.ProtocolOxia
) -> None:
    a = comparisons.with_protocol(A, protocol)
    # The parts of a shape take the time of its own Oxia storage (the dev shape's is always EFS).
    shaped = operations.on_shape(shape, a)
    by_part = sum(sum(money.line_items(part, shape, a).values()) for part in operations.parts(size, shaped).values())
    by_line = sum(money.per_million(size, shape, a).values())
    assert by_line == pytest.approx(by_part * 1e6, rel=1e-12)
    # ... and the per-request counts are the sums of the parts' counts.
    one = operations.per_request(size, shaped)
    for f in dataclasses.fields(operations.Part):
        assert getattr(one, f.name) == pytest.approx(
            sum(getattr(p, f.name) for p in operations.parts(size, shaped).values())
        )


@PROTOCOLS
@pytest.mark.parametrize("size", SIZES)
def test_the_monthly_total_is_fixed_plus_requests_times_the_variable_cost(
    size: int, protocol: inputs.ProtocolOxia
) -> None:
    a = comparisons.with_protocol(A, protocol)
    bytes_per_s = 100_000.0  # well inside API Gateway's first tier
    requests = bytes_per_s / size * inputs.SECONDS_PER_MONTH
    for shape in inputs.SHAPES:
        monthly = sum(money.llog_monthly(size, bytes_per_s, shape, a).values())
        variable = sum(money.per_million(size, shape, a).values()) * requests / 1e6
        expected = sum(money.fixed_monthly(shape, a).values()) + variable
        assert monthly == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("size", SIZES)
def test_a_sequential_append_is_one_oxia_write_and_a_cas_append_three(size: int) -> None:
    cas, sequential = (
        operations.produce_part(size, comparisons.with_protocol(A, p)) for p in (inputs.CAS, inputs.SEQUENTIAL)
    )
    # A writer's first request to a partition initializes it first (a registry read, two create-only puts),
    # either protocol.
    first = A.code.produce_first_oxia_writes * A.first_append_share
    assert A.code.produce_first_oxia_writes == 2
    assert cas.oxia_writes == pytest.approx(3 + first)
    assert sequential.oxia_writes == pytest.approx(1 + first)
    # A writer's first append to a partition also reads its registry entry and its topic's record (then cached).
    assert cas.oxia_reads == pytest.approx(1 + 2 * A.first_append_share)
    assert sequential.oxia_reads == pytest.approx(3 * A.first_append_share)  # only a writer's first append reads
    assert (
        operations.produce_part(
            size, dataclasses.replace(A, protocol=inputs.SEQUENTIAL, first_append_share=1.0)
        ).oxia_reads
        == 3
    )
    warm = dataclasses.replace(A, first_append_share=0.0)  # every request on a warm writer: the common path
    assert [
        operations.produce_part(size, comparisons.with_protocol(warm, p)).oxia_writes
        for p in (inputs.CAS, inputs.SEQUENTIAL)
    ] == [3, 1]
    assert [
        operations.produce_part(size, comparisons.with_protocol(warm, p)).oxia_reads
        for p in (inputs.CAS, inputs.SEQUENTIAL)
    ] == [1, 0]
    # Three sequential fsync'd writes become one: the produce function runs two Oxia writes and the CAS
    # protocol's control read shorter: 2 x 10 + 2 = 22 ms on EFS, 2 x 3 + 2 = 8 ms on EBS (1024 MB: GB-s = s).
    write_ms = {inputs.EFS: A.latency.oxia_write_ms, inputs.EBS: A.latency.oxia_write_ms_ebs}
    assert [write_ms[inputs.EFS], write_ms[inputs.EBS], A.latency.oxia_read_ms] == [10, 3, 2]
    for storage, saved_s in ((inputs.EFS, 0.022), (inputs.EBS, 0.008)):
        on = dataclasses.replace(A, oxia_storage=storage)
        cas, sequential = (
            operations.produce_part(size, comparisons.with_protocol(on, p)) for p in (inputs.CAS, inputs.SEQUENTIAL)
        )
        saved = operations.billed_gb_seconds(2 * write_ms[storage] + A.latency.oxia_read_ms, A.code.produce_memory_mb)
        assert saved == pytest.approx(saved_s)
        assert cas.gb_seconds - sequential.gb_seconds == pytest.approx(saved, abs=1e-3)  # 1 ms: rounding


@pytest.mark.parametrize("size", SIZES)
def test_the_protocols_differ_only_in_oxia_and_in_the_time_it_takes(size: int) -> None:
    cas, sequential = (operations.parts(size, comparisons.with_protocol(A, p)) for p in (inputs.CAS, inputs.SEQUENTIAL))
    for name in cas:
        a, b = dataclasses.asdict(cas[name]), dataclasses.asdict(sequential[name])
        assert {k for k in a if a[k] != b[k]} <= {"oxia_reads", "oxia_writes", "gb_seconds"}, name
    assert cas["compaction"] == sequential["compaction"]
    assert cas["gc"] == sequential["gc"]
    # The high watermark of a sequential partition costs a read more (its sequence's tail).
    assert inputs.SEQUENTIAL.consume_reads == inputs.CAS.consume_reads + 1
    assert inputs.SEQUENTIAL.planner_reads_per_partition == inputs.CAS.planner_reads_per_partition + 1
    # With Oxia on EFS its line follows the writes: the produce path's share drops to about a third (exactly
    # a third on a warm writer; the cold environments' partition initializations cost both protocols the same).
    first = A.code.produce_first_oxia_writes * A.first_append_share
    # The production shape on EFS; the dev shape, always on EFS.
    for shape, on in ((inputs.PROD, ON_EFS), (inputs.DEV, A)):
        efs = {p.name: money.line_items(operations.produce_part(size, comparisons.with_protocol(on, p)), shape,
                                        on)["Oxia EFS writes"]
               for p in inputs.PROTOCOLS}  # fmt: skip
        assert efs["cas"] > 0
        assert efs["sequential"] == pytest.approx(efs["cas"] * (1 + first) / (3 + first))
    # On EBS (the production default) no write is charged, with either protocol.
    for p in inputs.PROTOCOLS:
        assert (
            money.line_items(operations.produce_part(size, comparisons.with_protocol(A, p)), inputs.PROD, A)[
                "Oxia EFS writes"
            ]
            == 0
        )
    for shape in inputs.SHAPES:
        totals = [
            sum(money.per_million(size, shape, comparisons.with_protocol(A, p)).values())
            for p in (inputs.CAS, inputs.SEQUENTIAL)
        ]
        assert totals[1] < totals[0]


def test_the_sequential_protocol_is_the_deployed_default() -> None:
    assert A.protocol is inputs.SEQUENTIAL
    no_context: dict[str, object] = {}
    assert LlogSettings.from_context(no_context.get).append_protocol == AppendProtocol.SEQUENTIAL.value
    assert [p.name for p in inputs.PROTOCOLS] == [AppendProtocol.CAS.value, AppendProtocol.SEQUENTIAL.value]


def test_variable_costs_scale_with_throughput_and_fixed_ones_do_not() -> None:
    size = 64_000
    fixed = sum(money.fixed_monthly(inputs.PROD, A).values())
    one, two = (sum(money.llog_monthly(size, t, inputs.PROD, A).values()) - fixed for t in (50_000.0, 100_000.0))
    assert two == pytest.approx(2 * one)
    od1, od2 = (kinesis_on_demand_monthly(size, t, A) for t in (50_000.0, 100_000.0))
    assert od2["stream-hours"] == od1["stream-hours"]
    assert od2["data in"] == pytest.approx(2 * od1["data in"])
    assert od2["data out"] == pytest.approx(2 * od1["data out"])


def test_per_gb_is_per_million_over_the_gigabytes_of_a_million_requests(doc: dict[str, Any]) -> None:
    per_million, per_gb = doc["per_million_requests"], doc["per_gb"]
    for size in SIZES:
        label = report.label(size)
        for name, items in per_million[label].items():
            assert per_gb[label][name] * (1e6 * size / inputs.GIB) == pytest.approx(sum(items.values()))


def test_per_gb_numbers_scale_as_the_pricing_models_say() -> None:
    # Kinesis on-demand charges per byte: per GB it hardly depends on the request size (KiB rounding aside).
    od = [money.per_gb(sum(kinesis_per_million(s, A)["kinesis on-demand"].values()), s) for s in SIZES]
    assert od[1] == pytest.approx(od[-1], rel=0.02)
    # llog's produce path is billed per request: its API Gateway cost per GB falls as 1 / request size.
    api = [money.line_items(operations.produce_part(s, A), inputs.PROD, A)["API Gateway (REST)"] * 1e6 for s in SIZES]
    api_per_gb = [money.per_gb(x, s) for x, s in zip(api, SIZES, strict=True)]
    for i, size in enumerate(SIZES):
        assert api_per_gb[i] / api_per_gb[-1] == pytest.approx(SIZES[-1] / size)
    # Hence llog's total per GB falls as requests grow.
    llog = [money.per_gb(sum(money.per_million(s, inputs.PROD, A).values()), s) for s in SIZES]
    assert llog == sorted(llog, reverse=True)
    # Storage per request grows with its bytes.
    storage = [money.per_million(s, inputs.PROD, A)["S3 storage"] for s in SIZES]
    assert storage[-1] / storage[1] == pytest.approx(1_000_000 / 64_000, rel=0.05)


def test_more_consumers_cost_more_consume_requests_and_gets() -> None:
    two = dataclasses.replace(A, consumers=2)
    for size in SIZES:
        one_c, two_c = operations.consume_part(size, A), operations.consume_part(size, two)
        assert two_c.api_requests == pytest.approx(2 * one_c.api_requests)
        assert two_c.s3_get_class == pytest.approx(2 * one_c.s3_get_class)
        assert operations.produce_part(size, two) == operations.produce_part(size, A)


def test_api_gateway_tiers() -> None:
    rest, http = A.prices.apigw_rest_tiers, A.prices.apigw_http_tiers
    assert money.apigw_monthly(1e6, rest) == pytest.approx(3.50)
    assert money.apigw_monthly(333e6, rest) == pytest.approx(333 * 3.50)
    assert money.apigw_monthly(1e9, rest) == pytest.approx(333 * 3.50 + 667 * 2.80)
    assert money.apigw_monthly(21e9, rest) == pytest.approx(333 * 3.50 + 667 * 2.80 + 19_000 * 2.38 + 1_000 * 1.51)
    assert money.apigw_monthly(1e6, http) == pytest.approx(1.00)
    assert money.apigw_monthly(1e9, http) == pytest.approx(300 * 1.00 + 700 * 0.90)


def test_kinesis_billing_units() -> None:
    assert [kinesis_billed_kib(s) for s in SIZES] == [1, 63, 250, 977]
    assert [kinesis_put_units(s) for s in SIZES] == [1, 3, 10, 40]
    # 1 MB/s of 1 KB records at peak factor 2: 2 MB/s and 2,000 records/s in -> 2 shards.
    assert kinesis_shards(1_000, 1e6, A) == 2
    assert kinesis_shards(1_000_000, 1.0, A) == 1


def test_fixed_costs_follow_the_deployed_shapes() -> None:
    p = A.prices
    dev, prod = money.fixed_monthly(inputs.DEV, A), money.fixed_monthly(inputs.PROD, A)
    assert dev["Oxia Fargate tasks"] == pytest.approx((0.5 * p.fargate_arm_vcpu_hour + 1 * p.fargate_arm_gb_hour) * 730)
    # On EFS the production shape runs four Fargate tasks, three of 1 vCPU / 2 GB (on EBS, the default, only its
    # coordinator is a task: test_oxia_on_ebs_has_no_per_write_charge_shorter_writes_and_ec2_instead_of_fargate).
    assert money.fixed_monthly(inputs.PROD, ON_EFS)["Oxia Fargate tasks"] > 6 * dev["Oxia Fargate tasks"]
    assert "Oxia EC2 instances" in prod
    assert dev == money.fixed_monthly(
        inputs.DEV, ON_EFS
    )  # standalone is on EFS whatever the production shape's storage
    assert dev["NAT gateway"] == prod["NAT gateway"] == pytest.approx(0.045 * 730)
    more = dataclasses.replace(A, partitions=A.partitions + 5)
    assert money.fixed_monthly(inputs.PROD, more)["Compaction and GC schedules"] > prod["Compaction and GC schedules"]


def test_break_even_finds_the_crossing_of_two_lines() -> None:
    crossing = comparisons.break_even(lambda t: 100 + t, lambda t: 2 * t, lo=1, hi=1_000, steps=3_000)
    assert crossing == pytest.approx(100, rel=0.01)
    assert comparisons.break_even(lambda t: 2 * t, lambda t: t, lo=1, hi=1_000) is None
    assert comparisons.break_even(lambda t: t, lambda t: 2 * t, lo=1, hi=1_000) == 0.0


@PROTOCOLS
def test_break_even_results_are_where_the_totals_cross(doc: dict[str, Any], protocol: inputs.ProtocolOxia) -> None:
    mb = doc["break_even_mb_s"]["1 MB"][f"llog prod {protocol.name} vs Kinesis on-demand"]
    assert mb is not None
    llog = report._llog_total(1_000_000, inputs.PROD, comparisons.with_protocol(A, protocol))
    kinesis = report._total(kinesis_on_demand_monthly, 1_000_000, A)
    assert llog(mb * 1e6 * 1.05) < kinesis(mb * 1e6 * 1.05)
    assert llog(mb * 1e6 * 0.95) > kinesis(mb * 1e6 * 0.95)


def test_efs_batching_and_latency_move_only_their_own_lines() -> None:
    batched = dataclasses.replace(ON_EFS, efs_batching=4.0)  # the production shape on EFS
    base, lines = money.per_million(64_000, inputs.PROD, ON_EFS), money.per_million(64_000, inputs.PROD, batched)
    assert base["Oxia EFS writes"] > 0
    assert lines["Oxia EFS writes"] == pytest.approx(base["Oxia EFS writes"] / 4)
    assert {k: v for k, v in lines.items() if k != "Oxia EFS writes"} == {
        k: v for k, v in base.items() if k != "Oxia EFS writes"
    }
    # The dev shape is on EFS by default too; the production shape on EBS has no EFS writes to batch.
    dev, dev_batched = (
        money.per_million(64_000, inputs.DEV, dataclasses.replace(A, efs_batching=b)) for b in (1.0, 4.0)
    )
    assert dev["Oxia EFS writes"] > 0
    assert dev_batched["Oxia EFS writes"] == pytest.approx(dev["Oxia EFS writes"] / 4)
    assert money.per_million(64_000, inputs.PROD, dataclasses.replace(A, efs_batching=4.0)) == money.per_million(
        64_000, inputs.PROD, A
    )
    slow = money.per_million(64_000, inputs.PROD, dataclasses.replace(ON_EFS, latency=ON_EFS.latency.scaled(2)))
    assert slow["Lambda GB-seconds"] > base["Lambda GB-seconds"]
    assert slow["S3 requests"] == base["S3 requests"]


def test_gc_capacity_is_the_smaller_of_a_runs_time_and_the_deletion_cap() -> None:
    g = comparisons.gc_capacity(A)
    c = A.code
    assert g["wal_runs_per_hour"] == 6  # every 10 minutes
    # A run reads 10,000 partitions' references (3 Oxia reads each, 16 at a time) in seconds.
    assert g["references_s"] == pytest.approx(10_000 * 3 * A.latency.oxia_read_ms / 16 / 1000)
    # S3's per-prefix request rate is the slowest per 1,000 blobs: the 3,500 writes/s of wal-shared/ are half
    # the WAL's PUTs and half GC's deletes when GC keeps up, so 1,000 / 1,750 s, more than a LIST page.
    assert g["slowest"] == "S3's request rate per prefix"
    assert g["page_ms"]["S3's request rate per prefix"] == pytest.approx(1000 / 1.75)
    rate = (600 - g["references_s"]) / 600 * 1750
    assert g["requests_per_s_by_run_time"] == pytest.approx(rate)
    assert g["requests_per_s_by_deletion_cap"] == pytest.approx(c.gc_max_deletes_per_run / 600)
    assert g["requests_per_s_kept_up_with"] == min(g["requests_per_s_by_run_time"], g["requests_per_s_by_deletion_cap"])
    assert g["requests_per_s_kept_up_with"] >= 1000  # issue 40's target with the defaults
    assert g["hourly_partition_work_s"] < c.gc_timeout_s / 2
    # Hourly WAL runs alone would not: a run then handles an hour's blobs within the 900 s timeout.
    hourly = comparisons.gc_capacity(dataclasses.replace(A, code=dataclasses.replace(c, wal_gc_interval_s=3600)))
    assert hourly["requests_per_s_kept_up_with"] < 1000
    # Deletes one call at a time, each slower than the prefix's share of a page: the DeleteObjects calls bind.
    serial = comparisons.gc_capacity(dataclasses.replace(
        A, code=dataclasses.replace(c, gc_read_concurrency=1),
        latency=dataclasses.replace(A.latency, s3_delete_objects_ms=900.0)))  # fmt: skip
    assert serial["slowest"] == "DeleteObjects calls"
    assert serial["page_ms"]["DeleteObjects calls"] == pytest.approx(900)


# --- the constants against the code and the CDK app -----------------------------------------------


def test_function_memory_and_consume_wait_match_infra() -> None:
    c = inputs.Code()
    specs = fns.SPECS
    assert specs[names.PRODUCE].memory_mib == c.produce_memory_mb
    assert specs[names.CONSUME].memory_mib == c.consume_memory_mb
    assert specs[names.COMPACTION_WORKER].memory_mib == c.worker_memory_mb
    assert specs[names.COMPACTION_PLANNER].memory_mib == c.planner_memory_mb
    assert specs[names.GC].memory_mib == c.gc_memory_mb
    assert int(specs[names.CONSUME].environment["LLOG_CONSUME_MAX_WAIT_MS"]) == c.consume_max_wait_s * 1000


def test_serve_fleet_matches_infra() -> None:
    c = inputs.Code()
    settings = LlogSettings.from_context({"llog:frontDoor": "serve"}.get)
    assert settings.serve_tasks == c.serve_tasks
    assert (c.serve_task_vcpu, c.serve_task_gb) == (TASK_CPU / 1024, TASK_MEMORY_MIB / 1024)
    assert settings.serve_endpoint == "balancer"
    assert inputs.SERVE_BALANCER.balancer
    assert LlogSettings.from_context({"llog:stage": "prod"}.get).max_azs == c.prod_azs


def test_oxia_shapes_match_infra() -> None:
    for stage, shape in (("dev", inputs.DEV), ("prod", inputs.PROD)):
        settings = LlogSettings.from_context({"llog:stage": stage}.get)
        size = settings.oxia_size
        server = (size.cpu / 1024, size.memory_mib / 1024)
        if settings.oxia_mode == "standalone":
            assert shape.tasks == (server,)
            assert shape.wal_copies == 1
        else:
            coordinator = (COORDINATOR_SIZE.cpu / 1024, COORDINATOR_SIZE.memory_mib / 1024)
            assert shape.tasks == (server,) * DATA_SERVERS + (coordinator,)
            assert shape.wal_copies == DATA_SERVERS
        assert settings.nat_gateways == 1
        assert settings.compaction_schedule == "rate(1 minute)"
        assert inputs.Code().planner_interval_s == 60
        assert settings.gc_schedule == "rate(1 hour)"
        assert inputs.Code().gc_interval_s == 3600
        assert settings.wal_gc_schedule == "rate(10 minutes)"
        assert inputs.Code().wal_gc_interval_s == 600
        assert settings.gc_grace_period_hours * 3600 == inputs.Code().gc_grace_s


def test_protocol_limits_match_llog() -> None:
    c = inputs.Code()
    assert CompactorConfig().max_bytes_per_run == c.compaction_max_bytes
    # Compactor._select reads one page of the index from the cursor: at most this many WAL entries a run.
    assert c.compaction_max_entries == compaction.SELECT_SCAN_LIMIT
    assert c.consume_max_batches == consume.MAX_BATCHES_PER_PARTITION
    assert c.consume_fetch_threads == fetch.FETCH_THREADS
    assert Limits().default_partition_max_bytes == c.consume_fetch_bytes
    assert GcConfig().grace_ms == c.gc_grace_s * 1000
    assert GcConfig().read_concurrency == c.gc_read_concurrency
    assert GcConfig().max_deletes_per_run == c.gc_max_deletes_per_run
    assert c.header_probe_bytes == gc.HEADER_PROBE_BYTES
    assert c.gc_delete_batch == gc.DELETE_OBJECTS_KEYS
    assert c.list_page == gc.WAL_CHUNK  # a listing page of blobs per round of header reads
    assert fns.SPECS[names.GC].timeout.to_seconds() == c.gc_timeout_s
    assert inspect.signature(PartitionIndex.iter).parameters["page"].default == c.index_page


def test_prices_are_stated_and_positive() -> None:
    assert re.fullmatch(r"\d{4}-\d{2}", inputs.PRICES_AS_OF)
    for f in dataclasses.fields(inputs.Prices):
        value = getattr(A.prices, f.name)
        if isinstance(value, float):
            assert value > 0, f.name
            assert math.isfinite(value), f.name


def test_cost_md_holds_exactly_what_the_script_prints() -> None:
    text = (ROOT / "docs/COST.md").read_text()
    begin, end = "<!-- generated by bench/cost_model.py: begin -->\n", "<!-- generated by bench/cost_model.py: end -->"
    generated = text[text.index(begin) + len(begin) : text.index(end)]
    assert generated == tables.render(report.build(A), A), (
        "docs/COST.md is stale: paste the output of bench/cost_model.py"
    )
    assert ".venv/bin/python bench/cost_model.py" in text


# --- front door, Oxia storage, client batching, targets ------------------------------------------


def test_the_deployable_front_doors_are_the_cdk_apps_and_rest_is_the_default() -> None:
    assert A.front_door is inputs.REST_API
    assert A.oxia_storage is inputs.EBS  # the production shape's, as the stack deploys replicated stages
    assert A.records_per_request == 1
    deployable = [d for d in inputs.FRONT_DOORS if d.deployable]
    assert tuple(dict.fromkeys(d.name.split("-")[0] for d in deployable)) == FRONT_DOORS
    assert {"balancer" if d.balancer else "dns" for d in deployable if d.fleet} == set(SERVE_ENDPOINTS)
    no_context: dict[str, object] = {}
    assert LlogSettings.from_context(no_context.get).front_door == inputs.REST_API.name
    assert inputs.EBS.deployable  # infra/oxia_ebs.py, llog:oxiaStorage (docs/DEPLOY.md, "Oxia on EBS")
    assert LlogSettings.from_context({"llog:stage": "prod"}.get).oxia_storage == inputs.EBS.name
    assert LlogSettings.from_context(no_context.get).oxia_storage == inputs.EFS.name  # dev: standalone
    # Each shape is priced on the storage the stack gives its stage.
    for stage, shape in (("dev", inputs.DEV), ("prod", inputs.PROD)):
        storage = LlogSettings.from_context({"llog:stage": stage}.get).oxia_storage
        assert operations.on_shape(shape, A).oxia_storage.name == storage, stage
    assert operations.on_shape(inputs.DEV, A).oxia_storage is inputs.EFS
    assert operations.on_shape(inputs.PROD, ON_EFS) is ON_EFS


def test_the_http_api_bills_one_request_per_512_kb_of_body_and_function_urls_none() -> None:
    http = dataclasses.replace(A, front_door=inputs.HTTP_API)
    url = dataclasses.replace(A, front_door=inputs.FUNCTION_URL)
    # Bodies are base64 JSON: 256 KB of records is ~342 KB (one request), 1 MB ~1.33 MB (three).
    assert [operations.produce_part(s, http).api_requests for s in SIZES] == [1, 1, 1, 3]
    assert [operations.produce_part(s, A).api_requests for s in SIZES] == [1, 1, 1, 1]
    assert operations.consume_part(1_000, http).api_requests == operations.consume_part(1_000, A).api_requests
    assert operations.produce_part(1_000, url).api_requests == operations.consume_part(1_000, url).api_requests == 0
    for size in SIZES:
        rest_line = money.per_million(size, inputs.PROD, A)["API Gateway (REST)"]
        http_line = money.per_million(size, inputs.PROD, http)["API Gateway (HTTP)"]
        requests = operations.per_request(size, http).api_requests
        assert http_line == pytest.approx(requests * 1.00)
        assert rest_line == pytest.approx(operations.per_request(size, A).api_requests * 3.50)
        assert money.per_million(size, inputs.PROD, url)["Lambda function URLs"] == 0
        # Nothing else moves.
        others = {k: v for k, v in money.per_million(size, inputs.PROD, http).items() if k != "API Gateway (HTTP)"}
        assert others == {k: v for k, v in money.per_million(size, inputs.PROD, A).items() if k != "API Gateway (REST)"}


def test_oxia_on_ebs_has_no_per_write_charge_shorter_writes_and_ec2_instead_of_fargate() -> None:
    ebs, efs = dataclasses.replace(A, oxia_storage=inputs.EBS), ON_EFS
    p = A.prices
    for size in SIZES:
        assert money.per_million(size, inputs.PROD, ebs)["Oxia EFS writes"] == 0
        assert money.per_million(size, inputs.PROD, efs)["Oxia EFS writes"] > 0
        # The dev shape (standalone) stays on EFS: the same whatever the production shape's storage.
        assert money.per_million(size, inputs.DEV, ebs) == money.per_million(size, inputs.DEV, efs)
        assert money.per_million(size, inputs.DEV, ebs)["Oxia EFS writes"] > 0
        fast, slow = operations.produce_part(size, ebs), operations.produce_part(size, efs)
        assert slow.gb_seconds - fast.gb_seconds == pytest.approx(
            math.ceil(slow.oxia_writes * (A.latency.oxia_write_ms - A.latency.oxia_write_ms_ebs)) / 1000, abs=2e-3
        )
    fixed = money.fixed_monthly(inputs.PROD, ebs)
    coordinator = (COORDINATOR_SIZE.cpu / 1024, COORDINATOR_SIZE.memory_mib / 1024)
    assert fixed["Oxia Fargate tasks"] == pytest.approx(
        (coordinator[0] * p.fargate_arm_vcpu_hour + coordinator[1] * p.fargate_arm_gb_hour) * 730
    )
    assert fixed["Oxia EC2 instances"] == pytest.approx(DATA_SERVERS * p.ec2_c7g_medium_hour * 730)
    assert fixed["Oxia EBS gp3 volumes"] == pytest.approx(DATA_SERVERS * A.ebs_gb_per_volume * p.ebs_gp3_gb_month)
    assert fixed["Oxia EFS storage"] == pytest.approx(A.efs_gb_per_volume * p.efs_standard_gb_month)  # coordinator
    assert "Oxia EC2 instances" not in money.fixed_monthly(inputs.PROD, efs)
    assert "Oxia EC2 instances" not in money.fixed_monthly(inputs.DEV, ebs)


def test_a_client_batch_of_small_records_costs_what_one_request_of_its_bytes_does() -> None:
    assert inputs.CLIENT_BATCH_BYTES == 256_000
    assert inputs.CLIENT_BATCH_RECORDS == 256
    batched = dataclasses.replace(A, records_per_request=inputs.CLIENT_BATCH_RECORDS)
    one, many = (
        operations.per_request(inputs.CLIENT_BATCH_BYTES, A),
        operations.per_request(inputs.CLIENT_BATCH_BYTES, batched),
    )
    # The same operations (one PUT, the protocol's Oxia writes, ...); only the bytes differ a little.
    for f in ("api_requests", "invocations", "s3_put_class", "s3_get_class", "oxia_reads", "oxia_writes"):
        assert getattr(many, f) == pytest.approx(getattr(one, f)), f
    extra = (inputs.CLIENT_BATCH_RECORDS - 1) * A.code.record_overhead_bytes
    assert (
        operations.wal_blob_bytes(inputs.CLIENT_BATCH_BYTES, batched)
        == operations.wal_blob_bytes(inputs.CLIENT_BATCH_BYTES, A) + extra
    )
    small = money.per_gb(sum(money.per_million(1_000, inputs.PROD, A).values()), 1_000)
    via_client = money.per_gb(
        sum(money.per_million(inputs.CLIENT_BATCH_BYTES, inputs.PROD, batched).values()), inputs.CLIENT_BATCH_BYTES
    )
    assert via_client < small / 100


def test_the_targets_table_is_the_configurations_table_against_the_targets(doc: dict[str, Any]) -> None:
    table, targets = doc["configurations_per_gb"], doc["targets"]
    assert len(targets) == len(inputs.FRONT_DOORS) * len(inputs.OXIA_STORAGES) * len(inputs.PROTOCOLS)
    for name, t in targets.items():
        row = table[name]
        assert t["large_requests_per_gb"] == max(row["256 KB requests"], row["1 MB requests"])
        assert t["large_requests_met"] == (t["large_requests_per_gb"] <= inputs.TARGET_LARGE_REQUESTS_PER_GB)
        batched = row["1 KB records, client-batched to 256 KB"]
        assert t["batched_small_records_per_gb"] == batched
        assert t["batched_small_records_met"] == (batched <= inputs.TARGET_BATCHED_SMALL_RECORDS_PER_GB)
    assert targets["rest ebs sequential"]["deployable"]  # the stack's production default
    assert targets["rest efs cas"]["deployable"]
    assert targets["http ebs cas"]["deployable"]
    assert not targets["url ebs cas"]["deployable"]  # function URLs are not offered
    # The other tables' production shape is the default configuration: the REST API, Oxia on EBS.
    for protocol in inputs.PROTOCOLS:
        name = comparisons.configuration_name(A.front_door, A.oxia_storage, protocol)
        assert name == f"rest ebs {protocol.name}"
        assert table[name]["1 KB requests"] == doc["per_gb"]["1 KB"][f"llog prod {protocol.name}"]


@pytest.mark.parametrize("name", ["rest efs cas", "http ebs cas"])
def test_the_size_meeting_a_target_is_where_the_cost_per_gb_crosses_it(doc: dict[str, Any], name: str) -> None:
    door, storage, protocol = name.split(" ")
    a = comparisons.configured(
        A,
        next(d for d in inputs.FRONT_DOORS if d.name == door),
        next(o for o in inputs.OXIA_STORAGES if o.name == storage),
        next(p for p in inputs.PROTOCOLS if p.name == protocol),
    )
    size = doc["targets"][name]["large_target_met_from_bytes"]
    assert size is not None

    def usd_per_gb(s: int) -> float:
        return money.per_gb(sum(money.per_million(s, inputs.PROD, a).values()), s)

    assert usd_per_gb(size) <= inputs.TARGET_LARGE_REQUESTS_PER_GB < usd_per_gb(int(size * 0.97))


# --- the serve fleet ---------------------------------------------------------------------------------


def fleet(door: inputs.FrontDoor, k: float | None = None) -> inputs.Assumptions:
    door = door if k is None else dataclasses.replace(door, requests_per_flush=k)
    return operations.on_shape(inputs.PROD, dataclasses.replace(A, front_door=door))


@pytest.mark.parametrize("size", SIZES)
def test_a_flush_of_k_requests_costs_each_request_a_kth_of_one_wal_object(size: int) -> None:
    for k in inputs.REQUESTS_PER_FLUSH:
        one = operations.per_request(size, fleet(inputs.SERVE_DNS, k))
        produce = operations.parts(size, fleet(inputs.SERVE_DNS, k))["produce"]
        assert produce.s3_put_class == pytest.approx(1 / k)
        assert produce.oxia_writes == pytest.approx(operations.produce_oxia_writes(A) / k)
        assert one.api_requests == 0
        # No Lambda in the request path: only compaction's invocations are left, and they are per WAL entry.
        assert one.invocations == 0
        assert one.gb_seconds == pytest.approx(
            (
                operations.compaction_part(round(size * k), A).gb_seconds
                + operations.gc_part(round(size * k), A).gb_seconds
            )
            / k
        )
    alone = operations.per_request(size, fleet(inputs.SERVE_DNS_ALONE))
    assert (
        alone.s3_put_class == operations.per_request(size, A).s3_put_class
    )  # one WAL object per request, as in Lambda
    assert alone.s3_get_class == operations.per_request(size, A).s3_get_class


def test_only_the_load_balancer_bills_bytes_and_hours() -> None:
    size = inputs.CLIENT_BATCH_BYTES
    balancer, dns = (
        operations.per_request(size, fleet(inputs.SERVE_BALANCER)),
        operations.per_request(size, fleet(inputs.SERVE_DNS)),
    )
    body = operations.request_body_bytes(size, A)
    assert balancer.balancer_bytes == (body + A.code.http_overhead_bytes) * (1 + A.consumers)
    assert dns.balancer_bytes == 0
    # Behind the balancer 2 in 3 callers reach a node in another zone, both ways billed; by DNS none do.
    assert balancer.inter_az_bytes == pytest.approx(balancer.balancer_bytes * 2 / 3)
    assert dns.inter_az_bytes == 0
    lines = money.per_million(size, inputs.PROD, fleet(inputs.SERVE_BALANCER))
    assert lines["Data transfer between zones"] == pytest.approx(balancer.inter_az_bytes * 1e6 / inputs.GIB * 0.02)
    assert money.per_million(size, inputs.PROD, A)["Data transfer between zones"] == 0  # API Gateway, Lambda: none
    line = money.per_million(size, inputs.PROD, fleet(inputs.SERVE_BALANCER))[inputs.SERVE_BALANCER.line]
    assert line == pytest.approx(balancer.balancer_bytes * 1e6 / inputs.GIB * A.prices.alb_lcu_hour)
    assert money.per_million(size, inputs.PROD, fleet(inputs.SERVE_DNS))[inputs.SERVE_DNS.line] == 0
    task = (A.prices.fargate_arm_vcpu_hour + 2 * A.prices.fargate_arm_gb_hour) * 730
    # By DNS one service per zone, at least one task each: 3 tasks over the 3 zones; behind the balancer 2.
    assert money.fleet_monthly(fleet(inputs.SERVE_DNS)) == {"Serve fleet Fargate tasks": pytest.approx(3 * task)}
    assert money.fleet_monthly(fleet(inputs.SERVE_BALANCER))["Serve fleet Fargate tasks"] == pytest.approx(2 * task)
    assert money.fleet_monthly(fleet(inputs.SERVE_BALANCER))["Serve fleet load balancer"] == pytest.approx(0.0225 * 730)
    monthly = money.llog_monthly(size, 1e6, inputs.PROD, fleet(inputs.SERVE_BALANCER))
    assert monthly["Serve fleet load balancer"] == pytest.approx(0.0225 * 730)
    assert monthly[inputs.SERVE_BALANCER.line] == pytest.approx(balancer.balancer_bytes * 1e6 / size * 2_628_000
                                                            / inputs.GIB * A.prices.alb_lcu_hour)  # fmt: skip


def test_the_fleet_gets_cheaper_per_gb_as_flushes_grow() -> None:
    table = comparisons.serve_fleet_report(A)["per_gb_at_256_kb_by_requests_per_flush"]
    for row in table.values():
        values = [row[str(k)] for k in inputs.REQUESTS_PER_FLUSH]
        assert values == sorted(values, reverse=True)
    assert table["serve-dns"][str(inputs.MEASURED_REQUESTS_PER_FLUSH)] <= inputs.TARGET_LARGE_REQUESTS_PER_GB
