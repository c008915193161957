"""llog next to Kinesis and against docs/COST.md's targets: break-even throughputs and sizes, every
configuration of the production shape, the serve fleet, one more topic, GC's capacity, retention.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from bench.cost.inputs import (
    CLIENT_BATCH_BYTES,
    CLIENT_BATCH_RECORDS,
    EBS,
    FRONT_DOORS,
    GIB,
    HOURS_PER_MONTH,
    MIB,
    OXIA_STORAGES,
    PROD,
    PROTOCOLS,
    REQUESTS_PER_FLUSH,
    SECONDS_PER_MONTH,
    SEQUENTIAL,
    SERVE_BALANCER,
    SERVE_DNS,
    SHAPES,
    TARGET_BATCHED_SMALL_RECORDS_PER_GB,
    TARGET_LARGE_REQUESTS_PER_GB,
    Assumptions,
    FrontDoor,
    OxiaShape,
    OxiaStorage,
    ProtocolOxia,
)
from bench.cost.kinesis import kinesis_per_million, kinesis_retention_split
from bench.cost.money import fixed_monthly, fleet_monthly, per_gb, per_million
from bench.cost.operations import billed_gb_seconds, front_door_requests, front_door_tiers, gb_months

Monthly = Callable[[float], float]


def lasting_win(points: Sequence[float], cheaper: Sequence[bool]) -> float | None:
    """The first point from which llog stays cheaper through the last one; None if it is dearer at the last."""
    if not cheaper[-1]:
        return None
    last_dearer = max((i for i, c in enumerate(cheaper) if not c), default=-1)
    return points[last_dearer + 1]


def break_even(llog: Monthly, other: Monthly, lo: float = 1e3, hi: float = 1e9, steps: int = 600) -> float | None:
    """The throughput (bytes/s) above which llog stays cheaper up to ``hi``; 0 if it always is, None if never."""
    grid = [lo * (hi / lo) ** (i / steps) for i in range(steps + 1)]
    cheaper = [llog(t) < other(t) for t in grid]
    return 0.0 if all(cheaper) else lasting_win(grid, cheaper)


def break_even_size(shape: OxiaShape, a: Assumptions, lo: int = 1_000, hi: int = 1_000_000) -> int | None:
    """The request size from which llog's variable cost per GB stays below Kinesis on-demand's (None: never).

    ``hi`` is 1 MB because a Kinesis record holds at most 1 MiB.
    """
    steps = 400
    sizes = sorted({int(lo * (hi / lo) ** (i / steps) + 0.5) for i in range(steps + 1)})

    def cheaper(size: int) -> bool:
        llog = per_gb(sum(per_million(size, shape, a).values()), size)
        return llog < per_gb(sum(kinesis_per_million(size, a)["kinesis on-demand"].values()), size)

    found = lasting_win(sizes, [cheaper(size) for size in sizes])
    return None if found is None else int(found)


def with_protocol(a: Assumptions, protocol: ProtocolOxia) -> Assumptions:
    return dataclasses.replace(a, protocol=protocol)


def llog_name(shape: OxiaShape, protocol: ProtocolOxia) -> str:
    """``"llog prod cas"``: the key of one llog variant in the report's data."""
    return f"llog {shape.name} {protocol.name}"


def configured(
    a: Assumptions, door: FrontDoor, storage: OxiaStorage, protocol: ProtocolOxia, records: int = 1
) -> Assumptions:
    return dataclasses.replace(a, front_door=door, oxia_storage=storage, protocol=protocol, records_per_request=records)


def configuration_name(door: FrontDoor, storage: OxiaStorage, protocol: ProtocolOxia) -> str:
    return f"{door.name} {storage.name} {protocol.name}"


# The columns of the configurations table: (name, request size, records per request).
CONFIGURATION_COLUMNS: tuple[tuple[str, int, int], ...] = (
    ("1 KB requests", 1_000, 1),
    ("256 KB requests", 256_000, 1),
    ("1 MB requests", 1_000_000, 1),
    ("1 KB records, client-batched to 256 KB", CLIENT_BATCH_BYTES, CLIENT_BATCH_RECORDS),
)


def configurations_per_gb(a: Assumptions) -> dict[str, dict[str, float]]:
    """Variable USD per GB in the production shape for every front door, Oxia storage and append protocol."""
    return {
        configuration_name(door, storage, protocol): {
            column: per_gb(sum(per_million(size, PROD, configured(a, door, storage, protocol, records)).values()), size)
            for column, size, records in CONFIGURATION_COLUMNS
        }
        for storage in OXIA_STORAGES
        for door in FRONT_DOORS
        for protocol in PROTOCOLS
    }


def targets(a: Assumptions) -> dict[str, dict[str, Any]]:
    """docs/COST.md's two targets, met or not, for every configuration of the production shape.

    Requests of 256 KB or more: the larger of the 256 KB and 1 MB figures (cost per GB falls with size).
    """
    table = configurations_per_gb(a)
    found: dict[str, dict[str, Any]] = {}
    for storage in OXIA_STORAGES:
        for door in FRONT_DOORS:
            for protocol in PROTOCOLS:
                row = table[configuration_name(door, storage, protocol)]
                large = max(row["256 KB requests"], row["1 MB requests"])
                batched = row["1 KB records, client-batched to 256 KB"]
                ap = configured(a, door, storage, protocol)
                found[configuration_name(door, storage, protocol)] = {
                    "deployable": door.deployable and storage.deployable,
                    "large_requests_per_gb": large,
                    "large_requests_met": large <= TARGET_LARGE_REQUESTS_PER_GB,
                    "large_target_met_from_bytes": size_meeting(TARGET_LARGE_REQUESTS_PER_GB, ap),
                    "batched_small_records_per_gb": batched,
                    "batched_small_records_met": batched <= TARGET_BATCHED_SMALL_RECORDS_PER_GB,
                }
    return found


def serve_fleet_report(a: Assumptions) -> dict[str, Any]:
    """The fleet's fixed monthly cost per endpoint, and its variable USD per GB at 256 KB requests (production
    shape, Oxia on EBS, the sequential protocol) as more requests share each flush."""
    size = CLIENT_BATCH_BYTES
    by_flush: dict[str, dict[str, float]] = {}
    for door in (SERVE_BALANCER, SERVE_DNS):
        by_flush[door.name] = {}
        for k in REQUESTS_PER_FLUSH:
            ak = configured(a, dataclasses.replace(door, requests_per_flush=k), EBS, SEQUENTIAL)
            by_flush[door.name][str(k)] = per_gb(sum(per_million(size, PROD, ak).values()), size)
    return {
        "monthly": {
            door.name: fleet_monthly(dataclasses.replace(a, front_door=door)) for door in (SERVE_BALANCER, SERVE_DNS)
        },  # fmt: skip
        "per_gb_at_256_kb_by_requests_per_flush": by_flush,
    }


def size_meeting(usd_per_gb: float, a: Assumptions, lo: int = 256_000, hi: int = 6_000_000) -> int | None:
    """The request size from which the production shape's variable cost per GB stays at or below ``usd_per_gb``.

    ``hi``: Lambda's 6 MB request limit. None: not below it.
    """
    steps = 200
    sizes = sorted({int(lo * (hi / lo) ** (i / steps) + 0.5) for i in range(steps + 1)})
    meets = [per_gb(sum(per_million(size, PROD, a).values()), size) <= usd_per_gb for size in sizes]
    found = lasting_win(sizes, meets)
    return None if found is None else int(found)


def fixed_monthly_by_storage(a: Assumptions) -> dict[str, float]:
    """The production shape's fixed monthly total with each Oxia storage (``a``'s protocol)."""
    return {storage.name: sum(fixed_monthly(PROD, dataclasses.replace(a, oxia_storage=storage)).values())
            for storage in OXIA_STORAGES}  # fmt: skip


def one_more_topic(a: Assumptions) -> dict[str, float]:
    """Monthly cost of one more low-traffic topic with one partition (its fixed part only)."""
    key = "Compaction and GC schedules"
    p = a.prices
    llog = {}
    for shape in SHAPES:
        for protocol in PROTOCOLS:
            ap = with_protocol(a, protocol)
            more = dataclasses.replace(ap, partitions=a.partitions + 1)
            llog[llog_name(shape, protocol)] = fixed_monthly(shape, more)[key] - fixed_monthly(shape, ap)[key]
    return {
        **llog,
        "kinesis on-demand": p.kinesis_od_stream_hour * HOURS_PER_MONTH,
        "kinesis provisioned": p.kinesis_shard_hour * HOURS_PER_MONTH,
    }


def gc_capacity(a: Assumptions) -> dict[str, Any]:
    """The produce rate (requests/s) up to which GC keeps up in Lambda, where every request is one WAL blob,
    over ``gc_capacity_partitions`` partitions.

    GC's WAL step runs every ``wal_gc_interval_s`` (``llog:walGcSchedule``): it reads every partition's WAL
    references (``wal_gc_oxia_reads_per_partition`` Oxia reads each, ``gc_read_concurrency`` at a time), lists
    the blobs that passed the grace since the last run (one LIST page after another) and deletes them unread
    (DeleteObjects of ``gc_delete_batch`` keys, ``gc_read_concurrency`` in flight beside the listing). It keeps
    up while a run handles an interval's blobs within the interval (and the function's timeout): per page of
    blobs, the slowest of the LIST page, the DeleteObjects calls over their concurrency and S3's request rate
    per prefix. The deletion cap bounds a run too. The hourly run's per-partition work (retention, compacted
    objects) must fit in the timeout beside it. Latencies and S3's rate are assumptions (``Latency``); the
    produce requests' own PUTs take half of that rate on ``wal-shared/``.
    """
    c, lat = a.code, a.latency
    window_s = min(c.wal_gc_interval_s, c.gc_timeout_s)
    references_s = (c.gc_capacity_partitions * c.wal_gc_oxia_reads_per_partition * lat.oxia_read_ms
                    / c.gc_read_concurrency / 1000)  # fmt: skip
    page_ms = {
        "a LIST page": lat.s3_list_ms,
        "DeleteObjects calls": lat.s3_delete_objects_ms * c.list_page / c.gc_delete_batch / c.gc_read_concurrency,
        # The WAL's PUTs share the prefix: keeping up, GC deletes as many blobs a second as produce writes.
        "S3's request rate per prefix": c.list_page / (lat.s3_prefix_writes_per_s / 2) * 1000,
    }
    slowest = max(page_ms, key=lambda k: page_ms[k])
    by_time = (window_s - references_s) * c.list_page / (page_ms[slowest] / 1000) / c.wal_gc_interval_s
    by_cap = c.gc_max_deletes_per_run / c.wal_gc_interval_s
    hourly_s = (c.gc_capacity_partitions * (c.gc_oxia_reads_per_partition * lat.oxia_read_ms + lat.s3_list_ms)
                / c.gc_read_concurrency / 1000)  # fmt: skip
    return {
        "wal_runs_per_hour": 3600 / c.wal_gc_interval_s,
        "partitions": c.gc_capacity_partitions,
        "read_concurrency": c.gc_read_concurrency,
        "references_s": references_s,
        "page_ms": page_ms,
        "slowest": slowest,
        "requests_per_s_by_run_time": by_time,
        "max_deletes_per_run": c.gc_max_deletes_per_run,
        "requests_per_s_by_deletion_cap": by_cap,
        "hourly_partition_work_s": hourly_s,
        "timeout_s": c.gc_timeout_s,
        "requests_per_s_kept_up_with": min(by_time, by_cap),
    }


def idle_long_poll_monthly(a: Assumptions) -> float:
    """One consumer long-polling an empty partition: each poll holds a consume function for the whole wait."""
    p, c = a.prices, a.code
    polls = SECONDS_PER_MONTH / c.consume_max_wait_s
    wait = billed_gb_seconds(c.consume_max_wait_s * 1000, c.consume_memory_mb) * p.lambda_arm_gb_second
    per_poll = (front_door_requests(0, a) * front_door_tiers(a)[0][1] + p.lambda_per_million) / 1e6 + wait
    return polls * per_poll


def retention_per_gb(a: Assumptions, hours: float) -> dict[str, float]:
    """USD to keep one GB of payload for ``hours``: storage and retention charges only.

    Kinesis includes 24 h. Provisioned Kinesis charges extended retention per
    shard-hour; per GB that assumes shards filled to 1 MiB/s over ``peak_factor``.
    """
    c, p = a.code, a.prices
    wal_h = (c.gc_grace_s + c.wal_gc_interval_s / 2) / 3600  # WAL blobs wait out GC's grace whatever the retention
    compacted_h = hours + c.gc_interval_s / 2 / 3600
    extended_h, long_h = kinesis_retention_split(hours)
    shard_gb_month = MIB / a.peak_factor * SECONDS_PER_MONTH / GIB
    extended_shard = p.kinesis_extended_retention_shard_hour * HOURS_PER_MONTH if hours > 24 else 0.0
    long_term = gb_months(GIB, long_h) * p.kinesis_long_term_retention_gb_month
    return {
        "llog (S3 Standard)": gb_months(GIB, wal_h + compacted_h) * p.s3_storage_gb_month,
        "Kinesis on-demand": gb_months(GIB, extended_h) * p.kinesis_od_extended_retention_gb_month + long_term,
        "Kinesis provisioned": extended_shard / shard_gb_month + long_term,
    }
