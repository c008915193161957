"""Kinesis Data Streams' bill for the same traffic, on-demand and provisioned, the comparison of docs/COST.md."""

from __future__ import annotations

import math

from bench.cost.inputs import GIB, HOURS_PER_MONTH, KIB, MIB, SECONDS_PER_MONTH, Assumptions
from bench.cost.operations import gb_months


def kinesis_billed_kib(size: int) -> int:
    """On-demand ingest rounds each record up to a whole KiB."""
    return math.ceil(size / KIB)


def kinesis_put_units(size: int) -> int:
    return math.ceil(size / (25 * KIB))


def kinesis_retention_split(hours: float) -> tuple[float, float]:
    """(hours kept between 24 h and 7 days, hours kept beyond 7 days): the two priced retention tiers."""
    return min(max(hours - 24, 0.0), 144.0), max(hours - 168, 0.0)


def kinesis_retention_gb_months(bytes_per_month: float, a: Assumptions) -> tuple[float, float]:
    """GB-months of a month's ingest kept in each priced retention tier."""
    extended_h, long_h = kinesis_retention_split(a.retention_hours)
    return gb_months(bytes_per_month, extended_h), gb_months(bytes_per_month, long_h)


def kinesis_on_demand_monthly(size: int, bytes_per_s: float, a: Assumptions) -> dict[str, float]:
    p = a.prices
    records = bytes_per_s / size * SECONDS_PER_MONTH
    monthly_bytes = bytes_per_s * SECONDS_PER_MONTH
    extended, long_term = kinesis_retention_gb_months(monthly_bytes, a)
    return {
        "stream-hours": p.kinesis_od_stream_hour * HOURS_PER_MONTH,
        "data in": records * kinesis_billed_kib(size) * KIB / GIB * p.kinesis_od_ingest_gb,
        "data out": a.consumers * monthly_bytes / GIB * p.kinesis_od_retrieval_gb,
        "retention beyond 24 h": extended * p.kinesis_od_extended_retention_gb_month
        + long_term * p.kinesis_long_term_retention_gb_month,
    }


def kinesis_shards(size: int, bytes_per_s: float, a: Assumptions) -> int:
    """Shards for peak traffic: 1 MiB/s and 1,000 records/s in, 2 MiB/s out (shared by the consumers)."""
    peak = bytes_per_s * a.peak_factor
    return max(1, math.ceil(peak / MIB), math.ceil(peak / size / 1000), math.ceil(peak * a.consumers / (2 * MIB)))


def kinesis_provisioned_monthly(size: int, bytes_per_s: float, a: Assumptions) -> dict[str, float]:
    p = a.prices
    shards = kinesis_shards(size, bytes_per_s, a)
    records = bytes_per_s / size * SECONDS_PER_MONTH
    _, long_term = kinesis_retention_gb_months(bytes_per_s * SECONDS_PER_MONTH, a)
    extended = p.kinesis_extended_retention_shard_hour if a.retention_hours > 24 else 0.0
    return {
        "shard-hours": shards * p.kinesis_shard_hour * HOURS_PER_MONTH,
        "PUT payload units": records * kinesis_put_units(size) * p.kinesis_put_unit_per_million / 1e6,
        "retention beyond 24 h": shards * extended * HOURS_PER_MONTH
        + long_term * p.kinesis_long_term_retention_gb_month,
    }


AT_SCALE = 1e9  # bytes/s: where per-stream charges and the rounding of shard counts no longer matter


def kinesis_per_million(size: int, a: Assumptions) -> dict[str, dict[str, float]]:
    """USD per million requests (one record each) at scale, by bill line, without the per-stream charge."""
    millions = AT_SCALE / size * SECONDS_PER_MONTH / 1e6
    on_demand = kinesis_on_demand_monthly(size, AT_SCALE, a)
    on_demand.pop("stream-hours")
    provisioned = kinesis_provisioned_monthly(size, AT_SCALE, a)
    return {
        "kinesis on-demand": {k: v / millions for k, v in on_demand.items()},
        "kinesis provisioned": {k: v / millions for k, v in provisioned.items()},
    }
