"""What one produce request causes in each part of the system (``Part``): API requests, Lambda time, S3
requests and storage, Oxia reads and writes, logs, load balancer and inter-zone bytes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass, fields

from bench.cost.inputs import (
    DEV,
    EFS,
    FUNCTION_URL,
    GIB,
    HOURS_PER_MONTH,
    HTTP_API,
    MIB,
    Assumptions,
    Latency,
    OxiaShape,
)


@dataclass(frozen=True)
class Part:
    """What one produce request causes in one part of the system, amortized."""

    api_requests: float = 0.0
    invocations: float = 0.0
    gb_seconds: float = 0.0
    s3_put_class: float = 0.0
    s3_get_class: float = 0.0
    s3_gb_months: float = 0.0
    oxia_reads: float = 0.0
    oxia_writes: float = 0.0
    log_bytes: float = 0.0
    traces: float = 0.0
    balancer_bytes: float = 0.0  # processed by the serve fleet's load balancer
    inter_az_bytes: float = 0.0  # between callers and the serve fleet, across availability zones

    def __add__(self, other: Part) -> Part:
        return Part(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def times(self, k: float) -> Part:
        return Part(**{f.name: getattr(self, f.name) * k for f in fields(self)})


def total(parts: Iterable[Part]) -> Part:
    result = Part()
    for part in parts:
        result = result + part
    return result


def billed_gb_seconds(ms: float, memory_mb: int) -> float:
    """Lambda bills each invocation's duration rounded up to the millisecond."""
    return math.ceil(ms) / 1000 * memory_mb / 1024


def cpu_ms(nbytes: float, memory_mb: int, lat: Latency) -> float:
    return nbytes / MIB * lat.cpu_ms_per_mib_at_1024mb * 1024 / memory_mb


def transfer_ms(nbytes: float, lat: Latency, streams: int = 1) -> float:
    return nbytes / MIB * lat.s3_ms_per_mib / max(streams, 1)


def gb_months(nbytes: float, hours: float) -> float:
    return nbytes / GIB * hours / HOURS_PER_MONTH


def wal_blob_bytes(size: int, a: Assumptions) -> int:
    return size + a.code.wal_overhead_bytes + (a.records_per_request - 1) * a.code.record_overhead_bytes


def request_body_bytes(size: int, a: Assumptions) -> int:
    """A produce request's JSON body, its records base64-encoded (the worst case; text records travel as is)."""
    return 4 * math.ceil(size / 3) + a.records_per_request * a.code.request_bytes_per_record + 128


def front_door_requests(body_bytes: float, a: Assumptions) -> float:
    """Requests the front door bills for one call: REST 1, HTTP one per 512 KB of request, function URLs none."""
    if a.front_door is FUNCTION_URL or a.front_door.fleet:
        return 0.0
    if a.front_door is HTTP_API:
        return float(max(1, math.ceil(body_bytes / a.prices.apigw_http_metered_bytes)))
    return 1.0


def front_door_tiers(a: Assumptions) -> tuple[tuple[float, float], ...]:
    if a.front_door is HTTP_API:
        return a.prices.apigw_http_tiers
    if a.front_door is FUNCTION_URL or a.front_door.fleet:
        return ((math.inf, 0.0),)
    return a.prices.apigw_rest_tiers


def on_shape(shape: OxiaShape, a: Assumptions) -> Assumptions:
    """``a`` with the Oxia storage the stack deploys for ``shape``: standalone (dev) is always on EFS."""
    return dataclasses.replace(a, oxia_storage=EFS) if shape is DEV else a


def oxia_write_ms(a: Assumptions) -> float:
    return a.latency.oxia_write_ms if a.oxia_storage is EFS else a.latency.oxia_write_ms_ebs


def produce_oxia_reads(a: Assumptions) -> float:
    """Oxia reads per produce request: the protocol's common path plus its first appends' share."""
    first = a.protocol.produce_first_reads + a.code.produce_first_oxia_reads
    return a.protocol.produce_reads + first * a.first_append_share


def produce_oxia_writes(a: Assumptions) -> float:
    """Oxia writes per produce request: the protocol's common path plus the first appends' initializations."""
    return a.protocol.produce_writes + a.code.produce_first_oxia_writes * a.first_append_share


def produce_part(size: int, a: Assumptions) -> Part:
    """One API request, one invocation, one S3 PUT of a WAL blob (stored until GC's grace has passed),
    then the Oxia operations of the append protocol, one after another."""
    c, lat = a.code, a.latency
    blob = wal_blob_bytes(size, a)
    reads, writes = produce_oxia_reads(a), produce_oxia_writes(a)
    ms = (lat.handler_overhead_ms + lat.s3_put_ms + transfer_ms(blob, lat) + reads * lat.oxia_read_ms
          + writes * oxia_write_ms(a) + cpu_ms(size, c.produce_memory_mb, lat))  # fmt: skip
    return Part(
        api_requests=front_door_requests(request_body_bytes(size, a), a),
        invocations=1,
        gb_seconds=billed_gb_seconds(ms, c.produce_memory_mb),
        s3_put_class=1,
        s3_gb_months=gb_months(blob, (c.gc_grace_s + c.wal_gc_interval_s / 2) / 3600),
        oxia_reads=reads,
        oxia_writes=writes,
        log_bytes=a.log_bytes_per_invocation + a.log_bytes_per_api_request,
        traces=a.xray_sampled,
    )


def batches_per_consume(size: int, a: Assumptions) -> int:
    """WAL batches one consume request returns to a consumer at the tail (one per produce request)."""
    c = a.code
    return max(1, min(c.consume_max_batches, c.consume_fetch_bytes // (size + c.batch_overhead_bytes)))


def consume_part(size: int, a: Assumptions) -> Part:
    """Each consumer group reads each batch once: one range GET per WAL blob, ``batches_per_consume`` per request."""
    c, lat = a.code, a.latency
    b = batches_per_consume(size, a)
    nbytes = b * size
    streams = min(b, c.consume_fetch_threads)
    reads = a.protocol.consume_reads
    ms = (lat.handler_overhead_ms + reads * lat.oxia_read_ms + math.ceil(b / streams) * lat.s3_get_ms
          + transfer_ms(nbytes, lat, streams) + cpu_ms(nbytes, c.consume_memory_mb, lat))  # fmt: skip
    per_request = Part(
        api_requests=front_door_requests(0, a),  # a consume request's body is small
        invocations=1,
        gb_seconds=billed_gb_seconds(ms, c.consume_memory_mb),
        s3_get_class=b,
        oxia_reads=reads,
        log_bytes=a.log_bytes_per_invocation + a.log_bytes_per_api_request,
        traces=a.xray_sampled,
    )
    return per_request.times(a.consumers / b)


def entries_per_compaction(size: int, a: Assumptions) -> int:
    """WAL entries (produce requests) one compacted object holds when the partition keeps it full."""
    c = a.code
    return max(1, min(c.compaction_max_entries, c.compaction_max_bytes // (size + c.batch_overhead_bytes)))


def compaction_part(size: int, a: Assumptions) -> Part:
    """Per compacted object: n range GETs, the object's and the manifest's PUTs, the index swap; shared by n."""
    c, lat = a.code, a.latency
    n = entries_per_compaction(size, a)
    body = n * (size + c.batch_overhead_bytes)
    streams = min(n, c.consume_fetch_threads)
    ms = (lat.handler_overhead_ms + c.compaction_oxia_reads * lat.oxia_read_ms
          + c.compaction_oxia_writes * oxia_write_ms(a) + math.ceil(n / streams) * lat.s3_get_ms
          + transfer_ms(body, lat, streams) + 2 * lat.s3_put_ms + transfer_ms(body, lat)
          + cpu_ms(2 * body, c.worker_memory_mb, lat))  # fmt: skip
    stored_h = a.retention_hours + c.gc_interval_s / 2 / 3600
    per_object = Part(
        gb_seconds=billed_gb_seconds(ms, c.worker_memory_mb),
        s3_put_class=2,
        s3_get_class=n,
        s3_gb_months=gb_months(body + c.manifest_bytes, stored_h),
        oxia_reads=c.compaction_oxia_reads,
        oxia_writes=c.compaction_oxia_writes,
    )
    return per_object.times(1 / n)


def gc_part(size: int, a: Assumptions) -> Part:
    """GC lists each WAL blob once, in the first WAL run after its grace (a run stops listing at the first younger
    blob), and deletes it unread (DeleteObjects, free; sent beside the listing); each compacted object gets one
    HEAD and one Oxia read when first judged, and retention reads its index entry every run while it is kept.
    Retention deletes (free) are per range."""
    c, lat = a.code, a.latency
    n = entries_per_compaction(size, a)
    retention_pages = a.retention_hours * 3600 / c.gc_interval_s / c.index_page  # per kept entry, over its life
    oxia_reads = (1 + retention_pages) / n
    ms = lat.s3_list_ms / c.list_page + lat.s3_get_ms / n + oxia_reads * lat.oxia_read_ms
    return Part(
        gb_seconds=ms / 1000 * c.gc_memory_mb / 1024,
        s3_put_class=1 / c.list_page,
        s3_get_class=1 / n,
        oxia_reads=oxia_reads,
    )


def parts(size: int, a: Assumptions) -> dict[str, Part]:
    if a.front_door.fleet:
        return fleet_parts(size, a)
    return {
        "produce": produce_part(size, a),
        "consume": consume_part(size, a),
        "compaction": compaction_part(size, a),
        "gc": gc_part(size, a),
    }


def fleet_parts(size: int, a: Assumptions) -> dict[str, Part]:
    """Through the serve fleet: a flush of ``requests_per_flush`` requests is one WAL entry of their bytes, which
    the consumers, compaction and GC handle as the functions handle one request's; the tasks' compute is fixed
    (``fleet_monthly``). Each request, and each consumer's read of it, adds an access-log line and, behind the load
    balancer, its bytes through it."""
    c, k = a.code, a.front_door.requests_per_flush
    entry = max(1, round(size * k))
    in_tasks = {"invocations": 0.0, "gb_seconds": 0.0, "log_bytes": 0.0, "traces": 0.0}
    shared = {
        "produce": dataclasses.replace(produce_part(entry, a), **in_tasks),
        "consume": dataclasses.replace(consume_part(entry, a), **in_tasks),
        "compaction": compaction_part(entry, a),
        "gc": gc_part(entry, a),
    }
    found = {name: part.times(1 / k) for name, part in shared.items()}
    # The produce request in, and each consumer's answer out, about as large (values base64-encoded alike).
    through = (request_body_bytes(size, a) + c.http_overhead_bytes) * (1 + a.consumers)
    found["requests"] = Part(
        balancer_bytes=through if a.front_door.balancer else 0.0,
        # A caller in another zone than the task (or load balancer node) it reaches: 2 of 3 when zones are random.
        inter_az_bytes=0.0 if a.front_door.zonal else through * (1 - 1 / c.prod_azs),
        log_bytes=c.serve_log_bytes_per_request * (1 + a.consumers),
    )
    return found


@functools.cache
def per_request(size: int, a: Assumptions) -> Part:
    """Everything one produce request causes (cached: the break-even search asks often)."""
    return total(parts(size, a).values())
