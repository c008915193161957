"""Cost model of the deployed llog stack next to Kinesis Data Streams (docs/COST.md).

    .venv/bin/python bench/cost_model.py [--json] [--consumers N] [--partitions N] [--retention-hours H]
                                         [--peak-factor F] [--latency-factor F] [--efs-batching F]
                                         [--first-append-share F]

Arithmetic on stated inputs only, standard library only. Every table is
printed for both append protocols (``LLOG_APPEND_PROTOCOL``: ``cas``, the
deployed default, and ``sequential``, docs/SEQUENTIAL_APPEND.md) wherever
they differ:

* ``Prices``: us-east-1 list prices, transcribed by hand (``PRICES_AS_OF``);
  they are assumptions, not read from AWS.
* ``Code``: constants of llog and of the CDK app that the operation counts
  follow from (function memory, compaction and consume limits, schedules).
  ``tests/unit/test_cost_model.py`` checks them against the source.
* The operation counts per request (``produce_part`` ... ``gc_part``): the S3
  counts of produce, consume and compaction reads are measured with moto by
  ``tests/integration/test_cost_model_counts.py``; the Oxia counts (``Code``
  for what both protocols share, ``ProtocolOxia`` for what differs) are
  measured on a real Oxia server by
  ``tests/integration/test_cost_model_oxia_counts.py``, which runs the real
  code for each and asserts that it issues exactly these counts (and that the
  server logs one WAL write per Oxia write); the S3 writes of compaction and
  GC are derived from the code.
* ``Latency``: assumed latencies inside a Lambda function, from which billed
  durations are built (nothing was deployed, so none is measured); the
  sensitivity table scales them.
* ``FrontDoor`` (REST API, HTTP API, function URLs), ``OxiaStorage`` (EBS gp3 on
  ECS on EC2, production's default, or EFS) and ``records_per_request``
  (small records batched by the client into ``CLIENT_BATCH_BYTES`` requests):
  the deployed defaults in every table but the last two, which price the
  production shape with each and state issue 15's targets as met or not.
  Each shape is priced on the storage the stack gives it (``on_shape``): the
  production shape on ``Assumptions.oxia_storage``, the dev shape (standalone)
  always on EFS.

Every table of docs/COST.md is printed by this script; ``--json`` gives the same numbers.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30  # AWS bills "GB" as 2^30 bytes
HOURS_PER_MONTH = 730
SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600
PRICES_AS_OF = "2025-06"
# Bytes of payload per produce request ("1 KB", "64 KB", "256 KB", "1 MB"), one record each unless batched.
REQUEST_SIZES = (1_000, 64_000, 256_000, 1_000_000)
# The client (issue 16's; not written yet) batches records into requests of at least this many bytes by default.
CLIENT_BATCH_BYTES = 256_000
CLIENT_RECORD_BYTES = 1_000  # the small records the per-GB targets are stated for
CLIENT_BATCH_RECORDS = CLIENT_BATCH_BYTES // CLIENT_RECORD_BYTES
# docs/COST.md's targets for the production shape, USD per GB of payload (variable cost).
TARGET_LARGE_REQUESTS_PER_GB = 0.03  # requests of 256 KB or more
TARGET_BATCHED_SMALL_RECORDS_PER_GB = 0.05  # 1 KB records through the client with its default batching
THROUGHPUTS_MB_S = (0.1, 1.0, 10.0, 100.0)  # MB = 10^6 bytes
LATENCY_FACTORS = (0.5, 1.0, 2.0, 4.0)
EFS_BATCHING = (1.0, 4.0, 16.0)
RETENTIONS_H = (24.0, 168.0, 720.0)


@dataclass(frozen=True)
class Prices:
    """us-east-1 list prices in USD (first tier unless a tier is named), as of ``PRICES_AS_OF``."""

    # API Gateway REST API, per million requests: (cumulative monthly requests up to which, price);
    # the first 333M, the next 667M, the next 19B, beyond. (Payload limit: 10 MB; Lambda's is 6 MB.)
    apigw_rest_tiers: tuple[tuple[float, float], ...] = ((333e6, 3.50), (1e9, 2.80), (20e9, 2.38), (math.inf, 1.51))
    # API Gateway HTTP API, per million requests: the first 300M a month, beyond. A request is metered in
    # increments of 512 KB (a 1.3 MB request body bills as three requests).
    apigw_http_tiers: tuple[tuple[float, float], ...] = ((300e6, 1.00), (math.inf, 0.90))
    apigw_http_metered_bytes: int = 512 * KIB
    lambda_arm_gb_second: float = 0.0000133334
    lambda_per_million: float = 0.20
    s3_storage_gb_month: float = 0.023
    s3_put_per_1000: float = 0.005  # PUT, COPY, POST, LIST
    s3_get_per_10000: float = 0.004  # GET and all other requests; DELETE is free
    alb_hour: float = 0.0225  # Application Load Balancer, per hour
    alb_lcu_hour: float = 0.008  # per LCU-hour; for large requests the processed-bytes dimension binds:
    alb_gb_per_lcu_hour: float = 1.0  # 1 GB processed an hour is one LCU (IP targets)
    inter_az_gb: float = 0.01  # data transfer between availability zones, charged in each direction
    fargate_arm_vcpu_hour: float = 0.03238
    fargate_arm_gb_hour: float = 0.00356
    efs_standard_gb_month: float = 0.30
    efs_elastic_write_per_gb: float = 0.06
    ebs_gp3_gb_month: float = 0.08  # 3,000 IOPS and 125 MB/s included
    ec2_c7g_medium_hour: float = 0.0363  # 1 vCPU, 2 GiB (Graviton): the "medium" Oxia size on EC2
    nat_gateway_hour: float = 0.045
    sqs_per_million: float = 0.40
    cloudwatch_logs_ingest_gb: float = 0.50
    xray_per_million_traces: float = 5.00
    cloudwatch_dashboard_month: float = 3.00
    cloudwatch_alarm_month: float = 0.10
    kinesis_od_stream_hour: float = 0.04
    kinesis_od_ingest_gb: float = 0.08  # each record rounded up to 1 KiB
    kinesis_od_retrieval_gb: float = 0.04
    kinesis_od_extended_retention_gb_month: float = 0.10  # 24 h .. 7 days
    kinesis_shard_hour: float = 0.015
    kinesis_put_unit_per_million: float = 0.014  # one unit per 25 KiB of a record
    kinesis_extended_retention_shard_hour: float = 0.02  # 24 h .. 7 days
    kinesis_long_term_retention_gb_month: float = 0.023  # beyond 7 days, both modes

    @property
    def apigw_first_tier_per_million(self) -> float:
        return self.apigw_rest_tiers[0][1]


@dataclass(frozen=True)
class FrontDoor:
    """What produce and consume calls go through (``llog:frontDoor``) and how it bills them."""

    name: str
    line: str  # the bill line
    deployable: bool  # offered by the CDK app today
    # The serve fleet (llog:frontDoor=serve): llog serve tasks behind a load balancer, no Lambda in the request
    # path; its group commit shares one WAL object (one S3 PUT, one index entry, one Oxia write per partition)
    # between the produce requests of a flush.
    fleet: bool = False
    requests_per_flush: float = 1.0
    balancer: bool = False  # behind the load balancer (llog:serveEndpoint=balancer), else reached by DNS
    # Callers reach tasks in their own availability zone (llog:serveEndpoint=dns: a name per zone); behind the
    # load balancer a caller's connection lands on a node in any zone.
    zonal: bool = False


REST_API = FrontDoor("rest", "API Gateway (REST)", True)  # the default: API keys, usage plans, validation
HTTP_API = FrontDoor("http", "API Gateway (HTTP)", True)  # llog:frontDoor=http, IAM only
# Lambda function URLs cost nothing beyond Lambda; the handlers would need Powertools' LambdaFunctionUrlResolver
# (payload format 2.0 only), so the CDK app does not offer them (docs/DEPLOY.md, "Front door").
FUNCTION_URL = FrontDoor("url", "Lambda function URLs", False)
# Measured: bench/serve.py's flush sharing (256,000-byte requests, 4 partitions) makes one S3 PUT per 7.36 requests
# with 16 clients, per 1.95 with 4 (docs/PERFORMANCE_NOTES.md, "Flush sharing"); one client at a time makes one per
# request, the fleet's worst case.
MEASURED_REQUESTS_PER_FLUSH = 7.36
SERVE_BALANCER = FrontDoor("serve", "serve fleet, load balancer", True, True, MEASURED_REQUESTS_PER_FLUSH, True)
SERVE_DNS = FrontDoor("serve-dns", "serve fleet, DNS", True, True, MEASURED_REQUESTS_PER_FLUSH, zonal=True)
SERVE_DNS_ALONE = FrontDoor("serve-dns-alone", "serve fleet, DNS, each request flushed alone", True, True, 1.0,
                            zonal=True)  # fmt: skip
FRONT_DOORS = (REST_API, HTTP_API, FUNCTION_URL, SERVE_BALANCER, SERVE_DNS, SERVE_DNS_ALONE)
# Requests per flush the fleet table spans: alone, 4 clients' and 16 clients' (measured, above), and bench/serve.py's
# 32 clients of one record each (0.068 S3 PUTs per request).
REQUESTS_PER_FLUSH = (1.0, 1.95, 4.0, MEASURED_REQUESTS_PER_FLUSH, 14.7)


@dataclass(frozen=True)
class OxiaStorage:
    """Where the Oxia data servers keep their WAL and database."""

    name: str
    per_write_charge: bool  # EFS Elastic throughput meters every write; EBS gp3 includes 3,000 IOPS
    deployable: bool


EFS = OxiaStorage("efs", True, True)  # llog:oxiaStorage=efs: one EFS file system per process (standalone: always)
# llog:oxiaStorage=ebs, the default of replicated stages: ECS on EC2, one instance and one gp3 volume per
# data server (docs/DEPLOY.md, "Oxia on EBS"); the coordinator stays on Fargate with EFS.
EBS = OxiaStorage("ebs", False, True)
OXIA_STORAGES = (EFS, EBS)
STORAGE_TEXT = {EFS.name: "EFS", EBS.name: "EBS gp3"}  # how the tables name them


@dataclass(frozen=True)
class Code:
    """Constants of llog and of the CDK app (infra/) the counts follow from."""

    produce_memory_mb: int = 1024  # infra/functions.py SPECS
    serve_tasks: int = 2  # llog:serveTasks (infra/settings.py)
    serve_task_vcpu: float = 1.0  # infra/serve_fleet.py TASK_CPU
    serve_task_gb: float = 2.0  # infra/serve_fleet.py TASK_MEMORY_MIB
    serve_log_bytes_per_request: int = 200  # llog serve's access-log line, to the tasks' log group
    http_overhead_bytes: int = 600  # request and response headers and a produce answer, through the load balancer
    prod_azs: int = 3  # llog:maxAzs of production stages: callers and tasks spread over three zones
    consume_memory_mb: int = 1024
    worker_memory_mb: int = 2048
    planner_memory_mb: int = 512
    gc_memory_mb: int = 1024
    consume_max_wait_s: float = 20.0  # LLOG_CONSUME_MAX_WAIT_MS of the consume function
    wal_overhead_bytes: int = 256  # LLS1 header + batch header of a one-record, one-partition blob (upper bound)
    batch_overhead_bytes: int = 64  # bytes-batch-v1 header and columns of one record (upper bound)
    record_overhead_bytes: int = 16  # each further record of a batch (columns; 12.2 measured at 256 x 1 KB)
    request_bytes_per_record: int = 32  # JSON around each record of a produce request ({"base64": ...}, commas)
    manifest_bytes: int = 512  # one manifest per compacted range (upper bound)
    compaction_max_bytes: int = 8 * MIB  # CompactorConfig.max_bytes_per_run
    compaction_max_entries: int = 1024  # one index page in Compactor._select
    consume_max_batches: int = 64  # consume.MAX_BATCHES_PER_PARTITION
    consume_fetch_threads: int = 8  # llog.store.fetch.FETCH_THREADS
    consume_fetch_bytes: int = MIB  # LLOG_CONSUME_DEFAULT_PARTITION_MAX_BYTES
    planner_interval_s: int = 60  # llog:compactionSchedule
    gc_interval_s: int = 3600  # llog:gcSchedule
    gc_grace_s: int = 86_400  # llog:gcGracePeriodHours
    list_page: int = 1000  # list_objects_v2 keys per page
    alarms_besides_oxia: int = 11  # infra/observability.py: 6 functions, DLQ, API, lag, S3, Glue; + 1 per Oxia task
    gc_read_concurrency: int = 16  # GcConfig.read_concurrency (LLOG_GC_READ_CONCURRENCY): WAL headers read at once
    gc_max_deletes_per_run: int = 100_000  # GcConfig.max_deletes_per_run (LLOG_GC_MAX_DELETES_PER_RUN)
    gc_timeout_s: int = 900  # infra/functions.py GC_TIMEOUT
    header_probe_bytes: int = 64 * KIB  # gc.HEADER_PROBE_BYTES: one range GET per WAL blob header
    index_page: int = 1024  # retention under a size limit reads the whole index in pages of this many entries
    # Oxia operations both append protocols share, per uncontended call, measured on a real Oxia server
    # (tests/integration/test_cost_model_oxia_counts.py asserts each, for both protocols; they cost the same).
    # A write is an OxiaStore write or, where named, a session's creation or close: one Oxia WAL write each.
    produce_first_oxia_writes: int = 2  # a writer's first request to a partition (a cold Lambda environment):
    # ProduceService initializes the partition: its registry entry is read (it names the partition's folder:
    # no write), then two create-only puts (cursor, control) find the records there; a failed conditional put
    # is a WAL write all the same
    produce_first_oxia_reads: int = 2  # that registry entry, and the topic's record (read once per environment,
    # then cached)
    compaction_oxia_reads: int = 17  # per compacted object: the claim check before compact_once, then its
    # 16: control (recover_pending), meta/compaction, cursor, control + index scan (_select), the scan of the
    # partition's idempotent producer states (llog.protocol.producers.claims_floor), the previous compacted
    # entry (its log max timestamp; none for a partition's first range), cursor again;
    # _finish: record, cursor, control (_index_for), the end entry; record; record, cursor (_advance); record
    compaction_oxia_writes: int = 7  # record, end key, 2 state changes, delete_range, cursor, delete record
    worker_oxia_reads: int = 6  # per invocation: the claim check and the final "nothing to do" compact_once
    # (control, meta/compaction, cursor, control and index scan of _select)
    worker_oxia_writes: int = 4  # per invocation: the claim and its release (OxiaStore), the session's creation
    # and its close (the Oxia client's own calls, counted as the server's WAL writes; in Lambda a frozen
    # environment's session expires instead of closing, which the test does not wait for)
    planner_oxia_reads_per_tick: int = 2  # LogCatalog.partitions: the topic records and the partition registry
    gc_oxia_reads_per_run: int = 6  # the namespace identity (llog.protocol.namespace) twice: the guard, and
    # again right before the WAL blobs judged unreferenced are deleted; the topic records (reclaim, retention
    # settings), two listings of the partition registry (retention, compacted objects) and the producer ids
    # (idle ones are deleted). A partition with orphaned compacted objects to delete (rare: a compaction that
    # died) reads the identity once more.
    gc_oxia_reads_per_partition: int = 11  # per run, with an age limit that removes a range: retention 6
    # (control, the first index entry (one lookup), cursor and meta/compaction (the bound it stays below, read
    # because a range may go), one index page up to the first entry it keeps, control before the log start's
    # CAS), WAL references 3 (control, cursor, index scan), compacted objects 2 (one scan of meta/: GC watermark
    # and meta/compaction; control); + 1 per compacted object judged (gc_part). A size limit reads the whole
    # index every run instead: 1 more per 1,024 index entries kept (index_page). Where nothing expired,
    # retention reads 2 (control, the first entry).
    gc_oxia_writes_per_partition: int = 3  # per run: retention's log start CAS and index delete_range; GC watermark
    # Without a retention policy (the stack's default; the tables assume --retention-hours) retention reads
    # control only and writes nothing: 1 + 3 + 2 reads, the GC watermark's write.
    gc_oxia_reads_per_partition_keeping_everything: int = 6
    gc_oxia_writes_per_partition_keeping_everything: int = 1


@dataclass(frozen=True)
class ProtocolOxia:
    """The Oxia operations that differ between the append protocols (measured on a real Oxia server)."""

    name: str
    produce_reads: int  # per partition-append on a writer's common path
    produce_first_reads: int  # more on a writer's first append to a partition (a cold Lambda environment)
    produce_writes: int  # per partition-append, uncontended
    consume_reads: int  # per consume request and partition: control, the sequence's tail (sequential), index scan
    planner_reads_per_partition: int  # LogCatalog.status: one scan of meta/, the sequence's tail (sequential)
    # An idempotent producer's partition-append (llog.protocol.producers; not priced in the tables): the
    # producer state and the partition's next offset read before the claim (from control, read fresh; for a
    # sequential partition also the open generation's tail), the claim's and the finalize's CAS around the
    # protocol's commit (whose own control read is the one before the claim, for CAS).
    idempotent_produce_reads: int
    idempotent_produce_writes: int


# writer._commit: read control; CAS control (reserve), create the index entry, CAS control (clear pending).
# A lost compare-and-set adds a read and a write (and back-off): contention is not modelled. A writer's first
# append to a partition costs nothing more here (Code.produce_first_oxia_writes apart).
CAS = ProtocolOxia("cas", produce_reads=1, produce_first_reads=0, produce_writes=3, consume_reads=2,
                    planner_reads_per_partition=1, idempotent_produce_reads=2,
                    idempotent_produce_writes=5)  # fmt: skip
# SequentialAppender.commit: one sequential put into the cached open generation; the first append of a
# writer to a partition reads control first (and Code.produce_first_oxia_writes). The high watermark is read
# from the sequence's tail: + 1 read.
SEQUENTIAL = ProtocolOxia("sequential", produce_reads=0, produce_first_reads=1, produce_writes=1, consume_reads=3,
                          planner_reads_per_partition=2, idempotent_produce_reads=3,
                          idempotent_produce_writes=3)  # fmt: skip
PROTOCOLS = (CAS, SEQUENTIAL)


@dataclass(frozen=True)
class Latency:
    """Assumed latencies (ms) seen from a Lambda function in the VPC. Not measured: nothing was deployed."""

    handler_overhead_ms: float = 5.0  # event parsing, Powertools, response
    s3_put_ms: float = 30.0  # one PUT, before transferring the body
    s3_get_ms: float = 15.0  # one GET (or HEAD) to first byte
    s3_list_ms: float = 100.0  # one LIST page of up to 1,000 keys
    s3_ms_per_mib: float = 12.5  # transfer on one S3 connection (80 MiB/s)
    oxia_read_ms: float = 2.0
    oxia_write_ms: float = 10.0  # an fsync'd WAL write on EFS (NFS round trips, docs/DEPLOY.md)
    oxia_write_ms_ebs: float = 3.0  # an fsync'd WAL write on a gp3 volume, and the replica's ack
    sqs_send_ms: float = 10.0
    cpu_ms_per_mib_at_1024mb: float = 40.0  # JSON, base64, CRC32C, encode/decode at 1024 MB (~0.6 vCPU)

    def scaled(self, factor: float) -> Latency:
        return Latency(**{f.name: getattr(self, f.name) * factor for f in fields(self)})


@dataclass(frozen=True)
class OxiaShape:
    """Oxia as infra/oxia.py deploys it: Fargate ARM64 tasks with their own EFS volumes, or data servers on EBS."""

    name: str
    tasks: tuple[tuple[float, float], ...]  # (vCPU, GB memory) per task (on EBS: per data server's instance)
    wal_copies: int  # volumes every Oxia write lands on (the replicas)


DEV = OxiaShape("dev", ((0.5, 1.0),), 1)  # standalone, llog:oxiaSize=small: always on EFS
PROD = OxiaShape("prod", ((1.0, 2.0),) * 3 + ((0.25, 0.5),), 3)  # 3 medium data servers + coordinator
SHAPES = (DEV, PROD)


@dataclass(frozen=True)
class Assumptions:
    prices: Prices = field(default_factory=Prices)
    code: Code = field(default_factory=Code)
    latency: Latency = field(default_factory=Latency)
    protocol: ProtocolOxia = SEQUENTIAL  # the append protocol of new partitions (build() prints both)
    front_door: FrontDoor = REST_API
    # The production shape's Oxia storage (llog:oxiaStorage; EBS, the default of replicated stages). The dev
    # shape is standalone, which the stack always puts on EFS, whatever this says (on_shape).
    oxia_storage: OxiaStorage = EBS
    records_per_request: int = 1  # records in each produce request (CLIENT_BATCH_RECORDS: the client's batches)
    # Share of produce requests that are a writer's first append to their partition: in Lambda a cold
    # environment's. Both protocols pay for it with three create-only puts (the partition's initialization),
    # the sequential one with a read too. Assumed: an environment serving 1,000 requests over 10 partitions.
    first_append_share: float = 0.01
    consumers: int = 1  # consumer groups, each reading every record once, at the tail
    partitions: int = 10  # active partitions (each compacted every planner tick)
    retention_hours: float = 24.0
    peak_factor: float = 2.0  # provisioned Kinesis shards are sized for peak / average throughput
    efs_kib_per_write: float = 36.0  # metered per WAL write: >= 32 KiB data op + 4 KiB metadata op
    efs_batching: float = 1.0  # Oxia writes sharing one WAL write (1: uncontended, the worst case)
    efs_gb_per_volume: float = 1.0
    ebs_gb_per_volume: float = 20.0  # gp3's price is per provisioned GB, used or not
    log_bytes_per_invocation: float = 1_000.0  # Lambda platform lines and the EMF document
    log_bytes_per_api_request: float = 500.0  # API Gateway access log line
    xray_sampled: float = 0.05  # X-Ray default sampling beyond the 1/s reservoir


# --- operations per produce request -------------------------------------------------------------


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
        s3_gb_months=gb_months(blob, (c.gc_grace_s + c.gc_interval_s / 2) / 3600),
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
    """GC lists each WAL blob every run until it is past the grace, probes its header once (``gc_read_concurrency``
    at a time), deletes it (free); each compacted object gets one HEAD and one Oxia read when first judged, and
    retention reads its index entry every run while it is kept. Retention deletes (free) are per range."""
    c, lat = a.code, a.latency
    listings = (c.gc_grace_s + c.gc_interval_s / 2) / c.gc_interval_s
    probe_ms = lat.s3_get_ms + transfer_ms(min(c.header_probe_bytes, wal_blob_bytes(size, a)), lat)
    n = entries_per_compaction(size, a)
    retention_pages = a.retention_hours * 3600 / c.gc_interval_s / c.index_page  # per kept entry, over its life
    oxia_reads = (1 + retention_pages) / n
    ms = (listings / c.list_page * lat.s3_list_ms + probe_ms / c.gc_read_concurrency
          + lat.s3_get_ms / n + oxia_reads * lat.oxia_read_ms)  # fmt: skip
    return Part(
        gb_seconds=ms / 1000 * c.gc_memory_mb / 1024,
        s3_put_class=listings / c.list_page,
        s3_get_class=1 + 1 / n,
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


@functools.cache
def per_request(size: int, a: Assumptions) -> Part:
    """Everything one produce request causes (cached: the break-even search asks often)."""
    return total(parts(size, a).values())


# --- money ------------------------------------------------------------------------------------------


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
    gc_ms = (lat.handler_overhead_ms + c.gc_oxia_reads_per_run * lat.oxia_read_ms
             + a.partitions * (c.gc_oxia_reads_per_partition * lat.oxia_read_ms + lat.s3_list_ms
                               + c.gc_oxia_writes_per_partition * oxia_write_ms(a)))  # fmt: skip
    gc_runs_part = Part(
        invocations=1,
        gb_seconds=billed_gb_seconds(gc_ms, c.gc_memory_mb),
        s3_get_class=2,  # the namespace identity's S3 copy: the guard, and again before the WAL deletes
        oxia_reads=c.gc_oxia_reads_per_run,
        log_bytes=a.log_bytes_per_invocation,
    ).times(gc_runs)
    sqs = a.partitions * ticks * 3 * p.sqs_per_million / 1e6  # send, receive, delete
    schedules = per_partition.times(a.partitions) + planner + gc_runs_part
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


# --- Kinesis Data Streams -------------------------------------------------------------------------


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


def per_gb(usd_per_million: float, size: int) -> float:
    return usd_per_million / (1e6 * size / GIB)


# --- comparisons ------------------------------------------------------------------------------------

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
        "monthly": {door.name: fleet_monthly(dataclasses.replace(a, front_door=door))
                    for door in (SERVE_BALANCER, SERVE_DNS)},  # fmt: skip
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


def gc_capacity(a: Assumptions) -> dict[str, float]:
    """The produce rate (requests/s) up to which GC keeps up in Lambda, where every request is one WAL blob.

    Two bounds: the deletion cap (``LLOG_GC_MAX_DELETES_PER_RUN`` per scheduled run), and the function's
    timeout, within which a run lists the whole WAL prefix (the grace period's blobs and the run's own,
    one LIST page after another) and reads the header of every blob past the grace,
    ``gc_read_concurrency`` at a time. The read and LIST latencies are assumptions (``Latency``).
    """
    c, lat = a.code, a.latency
    read_ms = lat.s3_get_ms + transfer_ms(c.header_probe_bytes, lat)  # a full probe: the slowest header read
    read_s_per_rate = c.gc_interval_s * read_ms / c.gc_read_concurrency / 1000  # run seconds per request/s
    list_s_per_rate = (c.gc_grace_s + c.gc_interval_s) / c.list_page * lat.s3_list_ms / 1000
    cap = c.gc_max_deletes_per_run / c.gc_interval_s
    with_listing = c.gc_timeout_s / (read_s_per_rate + list_s_per_rate)
    return {
        "runs_per_hour": 3600 / c.gc_interval_s,
        "max_deletes_per_run": c.gc_max_deletes_per_run,
        "requests_per_s_by_deletion_cap": cap,
        "header_read_ms": read_ms,
        "read_concurrency": c.gc_read_concurrency,
        "timeout_s": c.gc_timeout_s,
        "header_reads_per_run_by_timeout": c.gc_timeout_s * 1000 / read_ms * c.gc_read_concurrency,
        "requests_per_s_by_timeout_header_reads_alone": c.gc_timeout_s / read_s_per_rate,
        "list_page_ms": lat.s3_list_ms,
        "requests_per_s_by_timeout_with_listing": with_listing,
        "requests_per_s_kept_up_with": min(cap, with_listing),
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
    wal_h = (c.gc_grace_s + c.gc_interval_s / 2) / 3600  # WAL blobs wait out GC's grace whatever the retention
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


# --- the report -----------------------------------------------------------------------------------


def label(size: int) -> str:
    return f"{size // 1_000_000} MB" if size >= 1_000_000 else f"{size // 1_000} KB"


def usd(x: float, digits: int = 2) -> str:
    return f"${x:,.{digits}f}"


def md_table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, text_columns: int = 1) -> str:
    """A Markdown table: the first ``text_columns`` left-aligned, numbers right-aligned."""
    rule = "|" + "|".join("---" if i < text_columns else "---:" for i in range(len(headers))) + "|"
    lines = ["| " + " | ".join(headers) + " |", rule]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


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


def render(doc: Mapping[str, Any], a: Assumptions) -> str:
    sections = [
        _render_counts(doc),
        _render_per_million(doc),
        _render_per_gb(doc),
        _render_fixed(doc),
        _render_monthly(doc),
        _render_break_even(doc),
        _render_sensitivity(doc),
        _render_configurations(doc),
        _render_targets(doc),
        _render_serve_fleet(doc),
        _render_retention(doc),
        f"### Idle long-polling consumer\n\nOne consumer long-polling an empty partition "
        f"({a.code.consume_max_wait_s:.0f} s waits at {a.code.consume_memory_mb} MB): "
        f"{usd(doc['idle_long_poll_consumer_monthly'])} a month.",
        _render_gc_capacity(doc),
    ]
    return "\n\n".join(sections) + "\n"


def _sizes() -> list[str]:
    return [label(s) for s in REQUEST_SIZES]


def _protocols() -> list[str]:
    return [pr.name for pr in PROTOCOLS]


def _by_protocol(name: str, cells: Mapping[str, list[str]]) -> list[list[str]]:
    """One row if every protocol shows the same cells, else one row per protocol (``"name, cas"``)."""
    first = cells[_protocols()[0]]
    if all(cells[pr] == first for pr in _protocols()):
        return [[name, *first]]
    return [[f"{name}, {pr}", *cells[pr]] for pr in _protocols()]


def _storage(doc: Mapping[str, Any], shape: str) -> str:
    """``"EBS gp3"``: the Oxia storage the report priced ``shape`` with."""
    return STORAGE_TEXT[doc["assumptions"]["shapes"][shape]["oxia_storage"]]


def _shape_text(doc: Mapping[str, Any], shape: str) -> str:
    """``"prod shape (Oxia on EBS gp3)"``, ``"dev shape (standalone Oxia on EFS)"``."""
    standalone = "standalone " if doc["assumptions"]["shapes"][shape]["wal_copies"] == 1 else ""
    return f"{shape} shape ({standalone}Oxia on {_storage(doc, shape)})"


def _display(doc: Mapping[str, Any], name: str) -> str:
    """``"llog prod cas"`` -> ``"llog prod (EBS gp3), cas"``; other names as they are."""
    words = name.split(" ")
    if words[0] == "llog" and len(words) == 3:
        return f"llog {words[1]} ({_storage(doc, words[1])}), {words[2]}"
    return name


def _render_counts(doc: Mapping[str, Any]) -> str:
    ops = doc["operations_per_request"]
    rows = []
    keys = [("api_requests", "API Gateway requests", 3), ("invocations", "Lambda invocations", 3),
            ("gb_seconds", "Lambda GB-seconds", 4), ("s3_put_class", "S3 PUT/LIST requests", 4),
            ("s3_get_class", "S3 GET/HEAD requests", 4), ("oxia_reads", "Oxia reads", 3),
            ("oxia_writes", "Oxia writes", 3)]  # fmt: skip
    for key, name, digits in keys:
        for part in ("produce", "consume", "compaction", "gc"):
            values = {pr: [ops[pr][s][part][key] for s in _sizes()] for pr in _protocols()}
            if any(any(v) for v in values.values()):
                cells = {pr: [f"{v:.{digits}f}" for v in values[pr]] for pr in _protocols()}
                rows += _by_protocol(f"{name}: {part}", cells)
    header = f"per produce request, {_shape_text(doc, PROD.name)}"  # Lambda time follows the Oxia storage
    return "### Operations per produce request\n\n" + md_table([header, *_sizes()], rows)


def _render_per_million(doc: Mapping[str, Any]) -> str:
    per = doc["per_million_requests"]
    prod = {pr: f"llog prod {pr}" for pr in _protocols()}
    rows = []
    for item in per[_sizes()[0]][prod["cas"]]:
        rows += _by_protocol(item, {pr: [usd(per[s][key][item]) for s in _sizes()] for pr, key in prod.items()})
    prod_shape, dev_shape = _shape_text(doc, PROD.name), _shape_text(doc, DEV.name)
    for pr, key in prod.items():
        rows.append([f"**llog, {prod_shape}, {pr}**", *(f"**{usd(sum(per[s][key].values()))}**" for s in _sizes())])
    for pr in _protocols():
        rows.append([f"llog, {dev_shape}, {pr}",
                     *(usd(sum(per[s][f"llog dev {pr}"].values())) for s in _sizes())])  # fmt: skip
    for name, key in (("Kinesis on-demand (data in + out)", "kinesis on-demand"),
                      ("Kinesis provisioned (at scale)", "kinesis provisioned")):  # fmt: skip
        rows.append([name, *(usd(sum(per[s][key].values())) for s in _sizes())])
    return "### Variable cost per million produce requests\n\n" + md_table(["USD per 1M requests", *_sizes()], rows)


def _render_per_gb(doc: Mapping[str, Any]) -> str:
    names = {f"llog {shape} {pr}": f"llog, {_shape_text(doc, shape)}, {pr}" for shape in ("prod", "dev")
             for pr in _protocols()}  # fmt: skip
    names |= {"kinesis on-demand": "Kinesis on-demand", "kinesis provisioned": "Kinesis provisioned (at scale)"}
    rows = [[name, *(usd(doc["per_gb"][s][key], 3) for s in _sizes())] for key, name in names.items()]
    return "### Variable cost per GB ingested\n\n" + md_table(["USD per GB (2^30 B) of payload", *_sizes()], rows)


def _render_fixed(doc: Mapping[str, Any]) -> str:
    fixed = doc["fixed_monthly"]
    shapes = ("dev", "prod")
    rows = []
    # Every line of either shape, in the order of the shape with the most (EC2 and EBS: the prod shape on EBS).
    items = dict.fromkeys(
        item for shape in sorted(shapes, key=lambda s: -len(fixed[s]["cas"])) for item in fixed[shape]["cas"]
    )

    def cell(shape: str, pr: str, item: str) -> str:
        return usd(fixed[shape][pr][item]) if item in fixed[shape][pr] else "-"

    for item in items:
        rows += _by_protocol(item, {pr: [cell(shape, pr, item) for shape in shapes] for pr in _protocols()})
    totals = {pr: [f"**{usd(sum(fixed[shape][pr].values()))}**" for shape in shapes] for pr in _protocols()}
    rows += [[f"**{name}**", *cells] for name, *cells in _by_protocol("total", totals)]
    topic = doc["one_more_topic_monthly"]
    more = md_table(["one more low-traffic topic", "USD per month"],
                    [[_display(doc, k), usd(v)] for k, v in topic.items()])  # fmt: skip
    columns = [f"dev (standalone, {_storage(doc, 'dev')})", f"prod (replicated, {_storage(doc, 'prod')})"]
    table = md_table(["USD per month", *columns], rows)
    return f"### Fixed monthly cost\n\n{table}\n\n{more}"


def _render_monthly(doc: Mapping[str, Any]) -> str:
    rows = []
    llog = [f"llog {shape} {pr}" for shape in ("dev", "prod") for pr in _protocols()]
    columns = (*llog, "kinesis on-demand", "kinesis provisioned")
    for size in REQUEST_SIZES:
        for mb, cols in doc["monthly"][label(size)].items():
            rate = f"{float(mb) * 1e6 / size:,.1f}"
            rows.append([label(size), mb, rate, *(usd(sum(cols[k].values()), 0) for k in columns)])
    headers = ["request", "MB/s", "requests/s", *(_display(doc, k) for k in llog), "Kinesis on-demand",
               "Kinesis provisioned"]  # fmt: skip
    return "### Monthly total at steady throughput\n\n" + md_table(headers, rows)


def _break_even_text(mb: float | None) -> str:
    return "never (up to 1,000 MB/s)" if mb is None else "always" if mb == 0 else f"above {mb:,.2f} MB/s"


def _render_break_even(doc: Mapping[str, Any]) -> str:
    rows = []
    for s in _sizes():
        found = doc["break_even_mb_s"][s]
        for shape in ("dev", "prod"):
            for kinesis in ("on-demand", "provisioned"):
                texts = [_break_even_text(found[f"llog {shape} {pr} vs Kinesis {kinesis}"]) for pr in _protocols()]
                rows.append([s, f"llog {shape} ({_storage(doc, shape)}) vs Kinesis {kinesis}", *texts])
    sizes = doc["break_even_request_bytes_vs_on_demand"]
    by_size = "\n".join(
        f"* {_display(doc, name)} vs Kinesis on-demand, variable cost per GB: "
        + ("never below 1 MB" if size is None else f"llog is cheaper from requests of {size / 1000:,.0f} KB")
        for name, size in sizes.items()
    )
    headers = ["request", "comparison", *(f"llog is cheaper, {pr}" for pr in _protocols())]
    table = md_table(headers, rows, text_columns=len(headers))
    return f"### Break-even throughput\n\n{table}\n\nBreak-even request size:\n\n{by_size}"


def _render_sensitivity(doc: Mapping[str, Any]) -> str:
    lat, efs = doc["latency_sensitivity"], doc["efs_batching_sensitivity"]
    rows, storage = [], _storage(doc, PROD.name)
    for f in LATENCY_FACTORS:
        rows += [[f"Oxia on {storage}, latencies x{f}", pr, *(usd(lat[pr][s][str(f)]) for s in _sizes())]
                 for pr in _protocols()]  # fmt: skip
    for b in EFS_BATCHING:
        rows += [[f"Oxia on EFS, Oxia writes per EFS write: {b:g}", pr, *(usd(efs[pr][s][str(b)]) for s in _sizes())]
                 for pr in _protocols()]  # fmt: skip
    table = md_table(["assumption", "protocol", *_sizes()], rows, text_columns=2)
    return "### Sensitivity (llog, prod shape, USD per 1M requests)\n\n" + table


def _configuration_text(name: str) -> str:
    door, storage, protocol = name.split(" ")
    doors = {d.name: d.line for d in FRONT_DOORS}
    return f"{doors[door]}, Oxia on {STORAGE_TEXT[storage]}, {protocol}"


def _render_configurations(doc: Mapping[str, Any]) -> str:
    table = doc["configurations_per_gb"]
    columns = [name for name, _, _ in CONFIGURATION_COLUMNS]
    rows = [[_configuration_text(name), *(usd(row[c], 3) for c in columns)] for name, row in table.items()]
    fixed = doc["fixed_monthly_prod_by_oxia_storage"]
    note = (f"Fixed monthly cost of the production shape: {usd(fixed['efs'])} with Oxia on EFS, "
            f"{usd(fixed['ebs'])} on EBS gp3 (EC2 instances instead of Fargate tasks for the data "
            "servers).")  # fmt: skip
    fleet = {name: usd(sum(m.values())) for name, m in doc["serve_fleet"]["monthly"].items()}
    note += (f" The serve fleet adds {fleet[SERVE_BALANCER.name]} a month behind its load balancer (two tasks of "
             f"1 vCPU and 2 GiB and the balancer's hours), {fleet[SERVE_DNS.name]} reached by DNS (a task in each of "
             "the three zones).")  # fmt: skip
    return ("### Production shape by front door and Oxia storage (USD per GB)\n\n"
            + md_table(["front door, Oxia storage, protocol", *columns], rows) + "\n\n" + note)  # fmt: skip


def _render_serve_fleet(doc: Mapping[str, Any]) -> str:
    table = doc["serve_fleet"]["per_gb_at_256_kb_by_requests_per_flush"]
    doors = {d.name: d.line for d in FRONT_DOORS}
    flushes = [str(k) for k in REQUESTS_PER_FLUSH]
    rows = [[doors[name], *(usd(row[k], 3) for k in flushes)] for name, row in table.items()]
    headers = ["256 KB requests, Oxia on EBS gp3, sequential", *(f"{float(k):g} per flush" for k in flushes)]
    return "### Serve fleet by requests per flush (USD per GB, variable cost)\n\n" + md_table(headers, rows)


def _size_text(size: int | None) -> str:
    return "not below 6 MB" if size is None else f"{size / 1000:,.0f} KB"


def _render_targets(doc: Mapping[str, Any]) -> str:
    rows = []
    for name, t in doc["targets"].items():
        rows.append([
            _configuration_text(name),
            "yes" if t["deployable"] else "no",
            usd(t["large_requests_per_gb"], 3), "met" if t["large_requests_met"] else "not met",
            _size_text(t["large_target_met_from_bytes"]),
            usd(t["batched_small_records_per_gb"], 3), "met" if t["batched_small_records_met"] else "not met",
        ])  # fmt: skip
    large, small = usd(TARGET_LARGE_REQUESTS_PER_GB), usd(TARGET_BATCHED_SMALL_RECORDS_PER_GB)
    headers = ["production shape", "deployable today", f"256 KB+ requests (target {large})", "target",
               f"{large} reached from", f"1 KB records via the client (target {small})", "target"]  # fmt: skip
    table = md_table(headers, rows, text_columns=2)
    return "### Targets (USD per GB, variable cost)\n\n" + table


def _render_retention(doc: Mapping[str, Any]) -> str:
    ret = doc["retention_per_gb"]
    names = list(ret[str(RETENTIONS_H[0])])
    rows = [[f"{h:g} h ({h / 24:g} d)", *(usd(ret[str(h)][n], 4) for n in names)] for h in RETENTIONS_H]
    return "### Storage per GB kept, by retention\n\n" + md_table(["retention", *names], rows)


def _render_gc_capacity(doc: Mapping[str, Any]) -> str:
    g = doc["gc_capacity"]
    rows = [
        ["GC runs an hour (`llog:gcSchedule`)", f"{g['runs_per_hour']:g}"],
        ["objects deleted per run at most (`LLOG_GC_MAX_DELETES_PER_RUN`)", f"{g['max_deletes_per_run']:,}"],
        ["produce requests/s the deletion cap keeps up with", f"{g['requests_per_s_by_deletion_cap']:,.1f}"],
        ["one header read, assumed (GET to first byte and up to 64 KiB)", f"{g['header_read_ms']:.1f} ms"],
        [f"header reads that fit in the {g['timeout_s']:g} s timeout, {g['read_concurrency']} at a time",
         f"{g['header_reads_per_run_by_timeout']:,.0f}"],
        ["produce requests/s the timeout allows, header reads alone",
         f"{g['requests_per_s_by_timeout_header_reads_alone']:,.0f}"],
        [f"... with listing the WAL prefix ({g['list_page_ms']:g} ms a page of 1,000 keys, assumed)",
         f"{g['requests_per_s_by_timeout_with_listing']:,.0f}"],
        ["**produce requests/s GC keeps up with**", f"**{g['requests_per_s_kept_up_with']:,.1f}**"],
    ]  # fmt: skip
    table = md_table(["garbage collection in Lambda, one WAL blob per produce request", "value"], rows)
    return "### Garbage collection capacity\n\n" + table


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, Assumptions]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON instead of tables")
    defaults = Assumptions()
    parser.add_argument("--consumers", type=int, default=defaults.consumers, help="consumer groups reading everything")
    parser.add_argument("--partitions", type=int, default=defaults.partitions, help="active partitions")
    parser.add_argument("--retention-hours", type=float, default=defaults.retention_hours)
    parser.add_argument("--peak-factor", type=float, default=defaults.peak_factor, help="peak/average (Kinesis shards)")
    parser.add_argument("--latency-factor", type=float, default=1.0, help="scale every assumed latency")
    parser.add_argument("--efs-batching", type=float, default=defaults.efs_batching, help="Oxia writes per EFS write")
    parser.add_argument(
        "--first-append-share",
        type=float,
        default=defaults.first_append_share,
        help="share of produce requests that are a writer's first to their partition (sequential)",
    )
    args = parser.parse_args(argv)
    a = dataclasses.replace(
        defaults,
        consumers=args.consumers,
        partitions=args.partitions,
        retention_hours=args.retention_hours,
        peak_factor=args.peak_factor,
        latency=defaults.latency.scaled(args.latency_factor),
        efs_batching=args.efs_batching,
        first_append_share=args.first_append_share,
    )
    return args, a


def main(argv: Sequence[str] | None = None) -> int:
    args, a = parse_args(argv)
    doc = build(a)
    print(json.dumps(doc, indent=2) if args.json else render(doc, a), end="" if not args.json else "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
