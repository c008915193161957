"""The cost model's inputs: units, AWS list prices, llog's and the CDK app's constants, the append
protocols' Oxia counts, assumed latencies, front doors, Oxia storages and shapes, and ``Assumptions``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

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
    wal_gc_interval_s: int = 600  # llog:walGcSchedule: GC's WAL step alone
    gc_grace_s: int = 86_400  # llog:gcGracePeriodHours
    list_page: int = 1000  # list_objects_v2 keys per page
    alarms_besides_oxia: int = 11  # infra/observability.py: 6 functions, DLQ, API, lag, S3, Glue; + 1 per Oxia task
    gc_read_concurrency: int = 16  # GcConfig.read_concurrency (LLOG_GC_READ_CONCURRENCY): partitions read and S3
    # calls (DeleteObjects) sent at once
    gc_delete_batch: int = 1000  # keys per DeleteObjects call (gc.DELETE_OBJECTS_KEYS)
    gc_capacity_partitions: int = 10_000  # the partitions of the capacity table (docs/COST.md)
    gc_max_deletes_per_run: int = 10_000_000  # GcConfig.max_deletes_per_run (LLOG_GC_MAX_DELETES_PER_RUN)
    gc_timeout_s: int = 900  # infra/functions.py GC_TIMEOUT
    header_probe_bytes: int = 64 * KIB  # gc.HEADER_PROBE_BYTES: one range GET per WAL blob header written before
    # the namespace's identity (none in the steady state the tables show)
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
    worker_oxia_reads: int = 0  # per invocation of its own: a task stops at the range that reached the index's
    # tail (run_compaction_task), so every read is a compacted object's (a duplicate task that finds nothing
    # reads 6: the claim check and an empty compact_once)
    worker_oxia_writes: int = 4  # per invocation: the claim and its release (OxiaStore), the session's creation
    # and its close (the Oxia client's own calls, counted as the server's WAL writes; in Lambda a frozen
    # environment's session expires instead of closing, which the test does not wait for)
    planner_oxia_reads_per_tick: int = 2  # LogCatalog.partitions: the topic records and the partition registry
    gc_oxia_reads_per_run: int = 5  # the namespace identity (llog.protocol.namespace) twice: the guard, and
    # again right before each batch of 10,000 WAL blobs judged unreferenced is deleted; the topic records
    # (reclaim, retention settings), one listing of the partition registry (retention, WAL references,
    # compacted objects) and the producer ids (idle ones are deleted). A partition with orphaned compacted
    # objects to delete (rare: a compaction that died) reads the identity once more.
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
    # GC's WAL step alone (llog:walGcSchedule), per run: the namespace identity twice, the topic records and the
    # registry; per partition its WAL references (control, cursor, index scan).
    wal_gc_oxia_reads_per_run: int = 4
    wal_gc_oxia_reads_per_partition: int = 3


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
    s3_delete_objects_ms: float = 300.0  # one DeleteObjects call of 1,000 keys
    # S3's documented request rate per partitioned prefix (PUT/COPY/POST/DELETE): all of wal-shared/ is one
    # prefix, assumed not split further by S3.
    s3_prefix_writes_per_s: float = 3500.0
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
