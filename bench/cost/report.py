"""Every number of docs/COST.md's tables as data (``build``; ``--json`` prints it), for both append protocols."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from bench.cost.comparisons import (
    Monthly,
    break_even,
    break_even_size,
    configurations_per_gb,
    fixed_monthly_by_storage,
    gc_capacity,
    idle_long_poll_monthly,
    llog_name,
    one_more_topic,
    retention_per_gb,
    serve_fleet_report,
    targets,
    with_protocol,
)
from bench.cost.inputs import (
    EFS,
    EFS_BATCHING,
    LATENCY_FACTORS,
    PRICES_AS_OF,
    PROD,
    PROTOCOLS,
    REQUEST_SIZES,
    RETENTIONS_H,
    SHAPES,
    THROUGHPUTS_MB_S,
    Assumptions,
    OxiaShape,
)
from bench.cost.kinesis import kinesis_on_demand_monthly, kinesis_per_million, kinesis_provisioned_monthly
from bench.cost.money import fixed_monthly, llog_monthly, per_gb, per_million
from bench.cost.operations import on_shape, parts


def label(size: int) -> str:
    return f"{size // 1_000_000} MB" if size >= 1_000_000 else f"{size // 1_000} KB"


def counts_report(a: Assumptions) -> dict[str, dict[str, dict[str, float]]]:
    return {label(s): {name: dataclasses.asdict(part) for name, part in parts(s, a).items()} for s in REQUEST_SIZES}


def build(a: Assumptions) -> dict[str, Any]:
    """Every number of the report, as data, for both append protocols (llog keys: ``llog_name``)."""
    doc: dict[str, Any] = {"prices_as_of": PRICES_AS_OF, "assumptions": _assumptions_json(a)}
    variants = [(shape, with_protocol(a, protocol)) for shape in SHAPES for protocol in PROTOCOLS]
    doc["operations_per_request"] = {pr.name: counts_report(with_protocol(a, pr)) for pr in PROTOCOLS}
    doc["per_million_requests"] = {
        label(s): {
            **{llog_name(shape, ap.protocol): per_million(s, shape, ap) for shape, ap in variants},
            **kinesis_per_million(s, a),
        }
        for s in REQUEST_SIZES
    }
    doc["per_gb"] = {
        label(s): {name: per_gb(sum(v.values()), s) for name, v in doc["per_million_requests"][label(s)].items()}
        for s in REQUEST_SIZES
    }
    doc["fixed_monthly"] = {
        shape.name: {pr.name: fixed_monthly(shape, with_protocol(a, pr)) for pr in PROTOCOLS} for shape in SHAPES
    }
    doc["monthly"] = {
        label(s): {
            str(mb): {
                **{llog_name(shape, ap.protocol): llog_monthly(s, mb * 1e6, shape, ap) for shape, ap in variants},
                "kinesis on-demand": kinesis_on_demand_monthly(s, mb * 1e6, a),
                "kinesis provisioned": kinesis_provisioned_monthly(s, mb * 1e6, a),
            }
            for mb in THROUGHPUTS_MB_S
        }
        for s in REQUEST_SIZES
    }
    kinesis = {"on-demand": kinesis_on_demand_monthly, "provisioned": kinesis_provisioned_monthly}
    doc["break_even_mb_s"] = {
        label(s): {
            f"{llog_name(shape, ap.protocol)} vs Kinesis {name}": _mb(
                break_even(_llog_total(s, shape, ap), _total(monthly, s, a))
            )
            for shape, ap in variants
            for name, monthly in kinesis.items()
        }
        for s in REQUEST_SIZES
    }
    doc["break_even_request_bytes_vs_on_demand"] = {
        llog_name(shape, ap.protocol): break_even_size(shape, ap) for shape, ap in variants
    }
    doc["one_more_topic_monthly"] = one_more_topic(a)
    doc["latency_sensitivity"] = {
        pr.name: {
            label(s): {str(f): sum(per_million(s, PROD, dataclasses.replace(a, protocol=pr,
                                                                           latency=a.latency.scaled(f))).values())
                       for f in LATENCY_FACTORS}
            for s in REQUEST_SIZES
        }
        for pr in PROTOCOLS
    }  # fmt: skip
    on_efs = dataclasses.replace(a, oxia_storage=EFS)  # EFS batching matters only with Oxia on EFS
    doc["efs_batching_sensitivity"] = {
        pr.name: {
            label(s): {str(b): sum(per_million(s, PROD, dataclasses.replace(on_efs, protocol=pr,
                                                                           efs_batching=b)).values())
                       for b in EFS_BATCHING}
            for s in REQUEST_SIZES
        }
        for pr in PROTOCOLS
    }  # fmt: skip
    doc["configurations_per_gb"] = configurations_per_gb(a)
    doc["fixed_monthly_prod_by_oxia_storage"] = fixed_monthly_by_storage(a)
    doc["targets"] = targets(a)
    doc["serve_fleet"] = serve_fleet_report(a)
    doc["retention_per_gb"] = {str(h): retention_per_gb(a, h) for h in RETENTIONS_H}
    doc["idle_long_poll_consumer_monthly"] = idle_long_poll_monthly(a)
    doc["gc_capacity"] = gc_capacity(a)
    return doc


def _llog_total(size: int, shape: OxiaShape, a: Assumptions) -> Monthly:
    return lambda bytes_per_s: sum(llog_monthly(size, bytes_per_s, shape, a).values())


def _total(monthly: Callable[[int, float, Assumptions], dict[str, float]], size: int, a: Assumptions) -> Monthly:
    return lambda bytes_per_s: sum(monthly(size, bytes_per_s, a).values())


def _mb(bytes_per_s: float | None) -> float | None:
    return None if bytes_per_s is None else bytes_per_s / 1e6


def _assumptions_json(a: Assumptions) -> dict[str, Any]:
    doc = dataclasses.asdict(a)
    doc.pop("protocol")  # the report covers both
    doc["prices"]["apigw_rest_tiers"] = [[None if math.isinf(c) else c, r] for c, r in a.prices.apigw_rest_tiers]
    doc["shapes"] = {
        s.name: {"tasks": [list(t) for t in s.tasks], "wal_copies": s.wal_copies,
                 "oxia_storage": on_shape(s, a).oxia_storage.name}
        for s in SHAPES
    }  # fmt: skip
    doc["protocols"] = {pr.name: dataclasses.asdict(pr) for pr in PROTOCOLS}
    return doc
