"""The model's USD: operations priced by bill line, the stack's fixed monthly cost, the serve fleet's, and
monthly totals at a steady throughput.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

from bench.cost.inputs import (
    EBS,
    GIB,
    HOURS_PER_MONTH,
    KIB,
    SECONDS_PER_MONTH,
    Assumptions,
    OxiaShape,
)
from bench.cost.operations import (
    Part,
    billed_gb_seconds,
    front_door_tiers,
    on_shape,
    oxia_write_ms,
    per_request,
)


def balancer_usd(nbytes: float, a: Assumptions) -> float:
    """The load balancer's LCU charge for the bytes it processes (their dimension binds for these requests)."""
    return nbytes / GIB / a.prices.alb_gb_per_lcu_hour * a.prices.alb_lcu_hour


def fleet_monthly(a: Assumptions) -> dict[str, float]:
    """The serve fleet's fixed monthly cost in the production shape: its Fargate tasks and the load balancer's hours
    (if it has one)."""
    p, c = a.prices, a.code
    task = c.serve_task_vcpu * p.fargate_arm_vcpu_hour + c.serve_task_gb * p.fargate_arm_gb_hour
    # Reached by DNS, each zone has a service of its own with at least one task (infra/serve_fleet.py).
    tasks = math.ceil(c.serve_tasks / c.prod_azs) * c.prod_azs if a.front_door.zonal else c.serve_tasks
    found = {"Serve fleet Fargate tasks": tasks * task * HOURS_PER_MONTH}
    if a.front_door.balancer:
        found["Serve fleet load balancer"] = p.alb_hour * HOURS_PER_MONTH
    return found


def oxia_efs_usd(writes: float, shape: OxiaShape, a: Assumptions) -> float:
    if not on_shape(shape, a).oxia_storage.per_write_charge:
        return 0.0
    metered = writes / a.efs_batching * shape.wal_copies * a.efs_kib_per_write * KIB
    return metered / GIB * a.prices.efs_elastic_write_per_gb


def line_items(part: Part, shape: OxiaShape, a: Assumptions) -> dict[str, float]:
    """USD of ``part`` by bill line, API Gateway at its first tier."""
    p = a.prices
    return {
        a.front_door.line: part.api_requests * front_door_tiers(a)[0][1] / 1e6 + balancer_usd(part.balancer_bytes, a),
        "Lambda requests": part.invocations * p.lambda_per_million / 1e6,
        "Lambda GB-seconds": part.gb_seconds * p.lambda_arm_gb_second,
        "S3 requests": part.s3_put_class * p.s3_put_per_1000 / 1e3 + part.s3_get_class * p.s3_get_per_10000 / 1e4,
        "S3 storage": part.s3_gb_months * p.s3_storage_gb_month,
        "Oxia EFS writes": oxia_efs_usd(part.oxia_writes, shape, a),
        "Logs and traces": part.log_bytes / GIB * p.cloudwatch_logs_ingest_gb
        + part.traces * p.xray_per_million_traces / 1e6,
        "Data transfer between zones": part.inter_az_bytes / GIB * 2 * p.inter_az_gb,
    }


def per_million(size: int, shape: OxiaShape, a: Assumptions) -> dict[str, float]:
    """Variable cost of one million produce requests, by bill line."""
    a = on_shape(shape, a)
    return {k: v * 1e6 for k, v in line_items(per_request(size, a), shape, a).items()}


def apigw_monthly(requests: float, tiers: Sequence[tuple[float, float]]) -> float:
    usd, floor = 0.0, 0.0
    for ceiling, rate in tiers:
        usd += max(0.0, min(requests, ceiling) - floor) * rate / 1e6
        floor = ceiling
        if requests <= ceiling:
            break
    return usd


@functools.cache
def _fixed_monthly(shape: OxiaShape, a: Assumptions) -> tuple[tuple[str, float], ...]:
    return tuple(fixed_monthly(shape, a).items())


def fixed_monthly(shape: OxiaShape, a: Assumptions) -> dict[str, float]:
    """What the stack costs each month with no traffic beyond ``a.partitions`` partitions being compacted."""
    a = on_shape(shape, a)
    p, c, lat, pr = a.prices, a.code, a.latency, a.protocol
    ticks = SECONDS_PER_MONTH / c.planner_interval_s
    gc_runs = SECONDS_PER_MONTH / c.gc_interval_s
    planner_ms = (lat.handler_overhead_ms + c.planner_oxia_reads_per_tick * lat.oxia_read_ms
                  + a.partitions * (pr.planner_reads_per_partition * lat.oxia_read_ms + lat.sqs_send_ms))  # fmt: skip
    worker_ms = (lat.handler_overhead_ms + c.worker_oxia_reads * lat.oxia_read_ms
                 + c.worker_oxia_writes * oxia_write_ms(a))  # fmt: skip
    worker = Part(invocations=1, gb_seconds=billed_gb_seconds(worker_ms, c.worker_memory_mb),
                  oxia_reads=c.worker_oxia_reads, oxia_writes=c.worker_oxia_writes,
                  log_bytes=a.log_bytes_per_invocation)  # fmt: skip
    # Per partition and GC run: the compacted prefix's LIST and retention's log start PUT (manifests/log-start.json).
    gc = Part(s3_put_class=2, oxia_reads=c.gc_oxia_reads_per_partition, oxia_writes=c.gc_oxia_writes_per_partition)
    per_partition = worker.times(ticks) + gc.times(gc_runs)
    planner = Part(invocations=1, gb_seconds=billed_gb_seconds(planner_ms, c.planner_memory_mb),
                   oxia_reads=c.planner_oxia_reads_per_tick + a.partitions * pr.planner_reads_per_partition,
                   log_bytes=a.log_bytes_per_invocation).times(ticks)  # fmt: skip
    per_partition_ms = (c.gc_oxia_reads_per_partition * lat.oxia_read_ms + lat.s3_list_ms
                        + c.gc_oxia_writes_per_partition * oxia_write_ms(a))  # fmt: skip
    gc_ms = (lat.handler_overhead_ms + c.gc_oxia_reads_per_run * lat.oxia_read_ms
             + a.partitions * per_partition_ms / c.gc_read_concurrency)  # fmt: skip
    # GC's WAL step alone (llog:walGcSchedule): the partitions' WAL references, and a LIST page that stops at the
    # first young blob (the listing and deletion of the blobs themselves are per request, gc_part).
    wal_runs = SECONDS_PER_MONTH / c.wal_gc_interval_s
    references_ms = c.wal_gc_oxia_reads_per_partition * lat.oxia_read_ms
    wal_ms = (lat.handler_overhead_ms + c.wal_gc_oxia_reads_per_run * lat.oxia_read_ms + lat.s3_list_ms
              + a.partitions * references_ms / c.gc_read_concurrency)  # fmt: skip
    wal_runs_part = Part(
        invocations=1,
        gb_seconds=billed_gb_seconds(wal_ms, c.gc_memory_mb),
        s3_put_class=1,  # the listing's first page
        s3_get_class=2,  # the namespace identity's S3 copy: the guard, and again before the deletes
        oxia_reads=c.wal_gc_oxia_reads_per_run + a.partitions * c.wal_gc_oxia_reads_per_partition,
        log_bytes=a.log_bytes_per_invocation,
    ).times(wal_runs)
    gc_runs_part = Part(
        invocations=1,
        gb_seconds=billed_gb_seconds(gc_ms, c.gc_memory_mb),
        s3_get_class=2,  # the namespace identity's S3 copy: the guard, and again before the WAL deletes
        oxia_reads=c.gc_oxia_reads_per_run,
        log_bytes=a.log_bytes_per_invocation,
    ).times(gc_runs)
    sqs = a.partitions * ticks * 3 * p.sqs_per_million / 1e6  # send, receive, delete
    schedules = per_partition.times(a.partitions) + planner + gc_runs_part + wal_runs_part
    scheduled = sum(line_items(schedules, shape, a).values()) + sqs
    fargate, ec2, efs_volumes, ebs_volumes = shape.tasks, 0, len(shape.tasks), 0
    if a.oxia_storage is EBS:  # the data servers on EC2 instances with a gp3 volume each; the coordinator as is
        fargate, ec2 = shape.tasks[shape.wal_copies :], shape.wal_copies
        efs_volumes, ebs_volumes = len(fargate), shape.wal_copies
    oxia = {
        "Oxia Fargate tasks": sum(v * p.fargate_arm_vcpu_hour + g * p.fargate_arm_gb_hour for v, g in fargate)
        * HOURS_PER_MONTH,
        "Oxia EFS storage": efs_volumes * a.efs_gb_per_volume * p.efs_standard_gb_month,
    }
    if a.oxia_storage is EBS:
        oxia["Oxia EC2 instances"] = ec2 * p.ec2_c7g_medium_hour * HOURS_PER_MONTH
        oxia["Oxia EBS gp3 volumes"] = ebs_volumes * a.ebs_gb_per_volume * p.ebs_gp3_gb_month
    return {
        **oxia,
        "NAT gateway": p.nat_gateway_hour * HOURS_PER_MONTH,
        "Compaction and GC schedules": scheduled,
        "Dashboard, alarms, X-Ray reservoir": p.cloudwatch_dashboard_month
        + (c.alarms_besides_oxia + len(shape.tasks)) * p.cloudwatch_alarm_month
        + SECONDS_PER_MONTH * p.xray_per_million_traces / 1e6,  # the reservoir samples one request a second
    }


def llog_monthly(size: int, bytes_per_s: float, shape: OxiaShape, a: Assumptions) -> dict[str, float]:
    """Fixed plus variable monthly cost at a steady ``bytes_per_s`` of payload, API Gateway tiered."""
    a = on_shape(shape, a)
    requests = bytes_per_s / size * SECONDS_PER_MONTH
    one = per_request(size, a)
    variable = line_items(one.times(requests), shape, a)
    variable[a.front_door.line] = apigw_monthly(one.api_requests * requests, front_door_tiers(a)) + balancer_usd(
        one.balancer_bytes * requests, a
    )
    fleet = fleet_monthly(a) if a.front_door.fleet else {}
    return {**dict(_fixed_monthly(shape, a)), **fleet, **variable}


def per_gb(usd_per_million: float, size: int) -> float:
    return usd_per_million / (1e6 * size / GIB)
