"""`make bench`: run every benchmark and write docs/PERFORMANCE.md (whole: notes go to docs/PERFORMANCE_NOTES.md).

Benchmarks that need a service this machine cannot provide (the Oxia server)
are reported as not measured, with the reason, instead of being left out.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import (  # noqa: E402
    append,
    codec,
    cold_start,
    consume,
    discovery,
    documents,
    export,
    gc_scale,
    http_bodies,
    idempotent,
    kinesis,
    lambda_warm,
    serve,
    serve_report,
    tail,
    timestamps,
)

OUTPUT = ROOT / "docs" / "PERFORMANCE.md"
COMMAND = "make bench"


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def measured(benchmark: Callable[[], str]) -> str:
    """The benchmark's report, or why it could not be measured here (the Oxia server may be unavailable)."""
    try:
        return benchmark()
    except Exception as exc:
        return f"**Not measured here:** {exc}"


def main() -> int:
    sections = []
    print("codec benchmark ...", flush=True)
    codec_rows = codec.run()
    sections.append((
        "Codec: `bytes-batch-v1` encode and decode",
        "bench/codec.py",
        "`decode` is `decode_batch`: header, CRC32C and section checks, after which a record is served by "
        "index without copying the batch; `decode+values` adds one `bytes` object per record value, "
        "`decode+records` one `LogRecord` per record (what a consume request builds); `copy` is one "
        "`bytes(memoryview(batch))` of the same encoded batch, the baseline; `slice` is the floor for producing "
        "one Python object per record at known offsets. MB/s counts value bytes.\n\n"
        + codec.table(codec_rows) + "\n\n" + codec.targets(codec_rows),
    ))

    print("document codec benchmark ...", flush=True)
    sections.append((
        "Codec: the documents stored in Oxia",
        "bench/documents.py",
        "Encode and decode of one document of each kind (msgspec Structs, strict decoding), per operation; "
        "index entries and `meta/control` are on every append and fetch.\n\n" + documents.table(documents.run()),
    ))

    print("HTTP bodies benchmark ...", flush=True)
    sections.append((
        "HTTP bodies: the native API's parse and answer path",
        "bench/http_bodies.py",
        "Parsing a request into the services' calls (`llog.api.native.contract`: msgspec decodes into the "
        "definitions of `llog.api.native.bodies`, then the checks they cannot state) and writing an answer's JSON, "
        "in one process, no storage. Median microseconds per call.\n\n" + http_bodies.table(http_bodies.run()),
    ))

    print("append benchmark ...", flush=True)
    append_table = measured(lambda: append.report(append.run(seconds=3, runs=2)))
    sections.append((
        "Append: CAS and sequential protocols side by side",
        "bench/append.py",
        "The CAS protocol (compare-and-set on `meta/control`) and the sequential one (one Oxia sequential "
        "put, docs/SEQUENTIAL_APPEND.md) in the same run: 1, 8, 32 and 64 concurrent writers (threads of one "
        "process or separate processes, each writer with its own Oxia client) append single 100-byte records "
        "to one partition or round-robin over 16, against a local Oxia standalone (fsync on) and moto S3. "
        "Oxia reads and writes, S3 requests, compare-and-set conflicts and Oxia retries are counted per "
        "successful partition-append.\n\n" + append_table,
    ))

    print("idempotent produce benchmark ...", flush=True)
    idempotent_table = measured(lambda: idempotent.report(idempotent.run(appends=200)))
    sections.append((
        "Idempotent produce: what exactly-once costs per append",
        "bench/idempotent.py",
        "One writer appends single 100-byte records to one partition, 200 per mode, against a local Oxia "
        "standalone (fsync on) and moto S3: plain appends, idempotent appends (producer id, epoch and the next "
        "sequence: claim, commit with the producer tag, finalize; docs/IDEMPOTENCE.md) and retries of an "
        "already-appended batch (what a lost answer's retry finds). Oxia operations per append are counted on "
        "the store's counters; p50 / plain p50 compares with the plain appends of the same run and protocol.\n\n"
        + idempotent_table,
    ))

    print("consume benchmark ...", flush=True)
    consume_table = measured(lambda: consume.report(consume.run(batches=320, records=100, runs=3)))
    partitions_table = measured(lambda: consume.partitions_report(consume.many_partitions(partitions=16)))
    behind_table = measured(lambda: consume.behind_report(consume.behind_the_tail()))
    sections.append((
        "Consume and compaction: a tail reader, the compactor and a reader of compacted history",
        "bench/consume.py",
        "A fresh partition gets 320 appends of 100 records of 1 KiB (31 MiB) through `LogWriter`, against a local "
        "Oxia standalone (fsync on) and moto S3. *Tail*: right after each append, each reader reads that batch. "
        "*Compacted*: the partition is then compacted (the compactor's default 8 MiB objects) and each reader "
        "reads it all from offset 1. Readers: `lambda` is `ConsumeService` as the consume Lambda runs it, "
        "without a tail cache and with its cache of compacted objects; `serve` is `ConsumeService` with the "
        "tail cache that `llog serve`'s writer feeds (for "
        "the compacted history a new, empty cache: a process that did not write the data); `iter_from` is one "
        "`LogReader.iter_from` scan. Consume requests use the HTTP defaults (`partition_max_bytes` 1 MiB, "
        "`max_wait_ms` 0) from `next_fetch_offset` until every record is read. Each reader has its own Oxia "
        "and S3 clients; its requests are counted per consumed MB of values (10^6 bytes), with the bytes its "
        "GETs returned per value byte. Records/s and MB/s count only the time inside the read calls; "
        "p50 is per request (one consume call, or one whole `iter_from` scan). The `compaction` row is the "
        "compactor between the two phases: each `compact_once` (one object) timed by its stages, with its own "
        "S3 GETs and Oxia reads per MB compacted.\n\n" + consume_table
        + "\n\n*Many partitions* (`bench/consume.py --partitions 16`): after each shared append of one record "
        "of 1 KiB to each of 16 partitions of a sequential topic, one consume request for partition 0 and one "
        "for all 16, as the consume Lambda serves them (no tail cache), each reader with its own clients; "
        "60 requests each, taking turns.\n\n" + partitions_table
        + "\n\n*Behind the tail* (`bench/consume.py --behind`): one partition of a sequential topic gets 1,000 "
        "appends of one 100-byte record (batches kept in their index entries: no S3 GET); the consume Lambda's "
        "service (no tail cache) then asks for one batch (`partition_max_bytes` 1) at 1, 64 and 1,000 batches "
        "behind the tail, 40 requests each, taking turns. A request reads at most one page of the index (64 "
        "batches).\n\n" + behind_table,
    ))

    print("discovery benchmark ...", flush=True)
    discovery_table = measured(lambda: discovery.report(discovery.run(partitions=1000, entries=(10, 100), runs=3)))
    sections.append((
        "Discovery: compaction planner, GC and retention per partition as the index grows",
        "bench/discovery.py",
        "1,000 partitions (half CAS, half sequential) are filled with index entries, 10 then 100 per partition "
        "(tenfold), written as the writers write them (create-only `index/` puts and the counter's "
        "compare-and-set; one sequential put per entry), against a local Oxia standalone (fsync off: only setup "
        "writes) and moto S3; nothing is compacted. At each size: one planner tick, a GC run on the unchanged log "
        "without and with a 7-day age limit, and retention under a size limit, counted per partition and timed "
        "(median of 3). The issue's 1,000 x 1,000 takes ~15 minutes to fill here: "
        "`bench/discovery.py --entries 100 1000`.\n\n" + discovery_table,
    ))

    print("timestamp lookup benchmark ...", flush=True)
    timestamps_table = measured(lambda: timestamps.table(timestamps.run(entries=100_000, runs=5)))
    sections.append((
        "Offset for a timestamp: one lookup on 100,000 index entries",
        "bench/timestamps.py",
        "Two partitions of 100,000 one-record index entries, timestamps one second apart, on a local Oxia "
        "standalone (fsync off) and moto S3: one never compacted (WAL entries, read forward page by page: the worst "
        "case) and one whose entries are all compacted (bisected on their log max timestamp). Each row is the "
        "median of 5 lookups with the Oxia reads and S3 GETs of one (docs/RECOVERY.md, \"Offset for a timestamp\").\n\n"
        + timestamps_table,
    ))

    print("GC scale benchmark ...", flush=True)
    sections.append((
        "Garbage collection of WAL blobs: per-operation costs and whole runs against the cost model",
        "bench/gc_scale.py",
        "The latencies the cost model's GC capacity assumes (bench/cost/inputs.py `Latency`; docs/COST.md, "
        "\"Garbage collection capacity\") measured on a local Oxia standalone (fsync off) and VersityGW, medians "
        "of 5; then whole WAL runs (`collect(wal_only=True)`, clock past the grace) over 100 registered "
        "partitions of 3 uncompacted entries each, deleting 10,000 unreferenced blobs put under `wal-shared/`: "
        "judged from the references alone (*unread*, the steady state) at read concurrency 1 and 16, and by their "
        "headers (*by header*: the namespace's identity created after the blobs) at 16; *nothing to delete* is a "
        "run's fixed cost (the references, the registry, one listing). The model columns apply `gc_capacity`'s "
        "page formula without S3's request rate per prefix (a local server has none). A run sends its deletes "
        "once 10,000 blobs are judged (`gc.DELETE_BATCH`, one namespace check each), so in a run of 10,000 they "
        "follow the listing instead of going beside it, as the formula has them. A shared 2-core machine with "
        "local servers is not AWS: the client's CPU (botocore parsing a LIST page) and the server's (VersityGW "
        "deleting files) share the two cores; the ratios say which assumption to look at, not what S3 does. On "
        "its own: `PATH=.tools/bin:$PATH .venv/bin/python bench/gc_scale.py --partitions 100 --blobs 10000 "
        "--runs 5` (`--json` for the numbers).\n\n"
        + measured(lambda: gc_scale.report(gc_scale.run(partitions=100, blobs=10_000, runs=5))),
    ))

    print("export benchmark ...", flush=True)
    sections.append((
        "Analytics export: the Glue job's transform and the local job",
        "bench/export.py",
        "Compacted objects of 8,192 records of 1 KiB (~8.4 MB, the compactor's default size). *Transform*: one "
        "core turns the objects, read from files, into Arrow record batches with the job's executor code "
        "(`decode_batch` with its CRC32C, then `batch_to_arrow`), against only reading the same files (the "
        "baseline, page cache warm); with and without one header per record (headers are parsed per record, "
        "the other columns are wrapped without copying). *Export job*: the objects sit in moto S3 with their "
        "manifests and `ParquetExport` runs on local Spark with both cores (`local[2]`), from planning to the "
        "committed state, JVM already warm. MB/s counts compacted object bytes.\n\n"
        + export.run(),
    ))

    print("serve benchmark ...", flush=True)
    sections.append((
        "HTTP: `llog serve` against the floor of its servers",
        "bench/serve.py",
        "One Oxia standalone (fsync on) and one S3 server (VersityGW when installed, else moto; the report names "
        "it) behind two `llog serve` processes (`python -m server.serve`). The produce, ingest, HTTP-ceiling "
        "and peer clients are wrk's keep-alive connections (bench/wrk.py), every answer checked; the tail, "
        "flush-sharing and 256-client clients are bench/load.py's threads, one keep-alive connection each; S3 PUTs "
        "and Oxia writes "
        "come from the server's `GET /metrics`. The floor is "
        "the median of 200 one-at-a-time 100-byte S3 PUTs plus that of 200 Oxia puts on the same servers. *Tail*: "
        "a consumer long-polls at the tail, a producer sends one record 10-150 ms later; produce sent to consume "
        "answered, consumer in the producer's process or the other one. *Ingest*: 16, 64 and 128 connections "
        "sending 100 records of 1 KiB per request (25 to each of 4 partitions), each run against raw S3 PUTs of its "
        "mean PUT size from `LLOG_BATCH_MAX_IN_FLIGHT` writers; the sustained rate is the highest of the three. *HTTP "
        "ceiling*: the same clients against llog serve's HTTP server with nothing behind it (bench/noop_http.py). *256 "
        "clients*: bench/load.py at full speed, then reconciled. *Peer*: s2-lite 0.43.4 with its defaults on "
        "the same S3 server, when installed (`.tools/bin/s2-lite`).\n\n"
        + measured(lambda: serve_report.report(serve.run())),
    ))

    print("kinesis benchmark ...", flush=True)
    sections.append((
        "Kinesis API: PutRecords and GetRecords against native produce and consume",
        "bench/kinesis.py",
        "One Oxia standalone (fsync on) and one S3 server (VersityGW when installed, else moto) behind one `llog "
        "serve`, with an access key it issued. *Put*: wrk's 16 keep-alive connections send PutRecords of 500 "
        "records of 1 KiB of random bytes (500 partition keys over a stream of 4 shards), signed once per run with "
        "botocore's SigV4Auth and replayed (a Python client would take more of the 2 cores than the server it "
        "measures), against native `/produce` of the same records (each keyed by its partition key, "
        "`{\"base64\"}` values, one entry per shard its key hashes to) to the same stream: 3 runs of 5 s each, "
        "alternating, every answer checked. *Get*: one reader reads a one-shard stream of 50,000 records of 1 KiB "
        "from start to tail, GetRecords (`Limit` 10,000) following `NextShardIterator`, against `/consume` asking "
        "for as many bytes (10 MiB; its answers are capped at `LLOG_CONSUME_MAX_RESPONSE_BYTES`, 4 MiB) following "
        "`next_fetch_offset`; each answer parsed with `json.loads`; 3 scans each, alternating, after one of each. "
        "llog serve's CPU comes from `/proc`. The target (issue 41): PutRecords at least 80% of native produce's "
        "records/s. Where the CPU goes: docs/PERFORMANCE_NOTES.md, \"The Kinesis API's costs\".\n\n"
        + measured(lambda: kinesis.report(kinesis.run())),
    ))

    print("tail benchmark ...", flush=True)
    sections.append((
        "Tail consumers: produce acknowledged to long-poll consume returned",
        "bench/tail.py",
        "A consumer long-polls at the tail (`ConsumeService`, `max_wait_ms` 10 s) while a writer appends one "
        "record at a time, against a local Oxia standalone (fsync on) and moto S3. *serve*: one process, the "
        "writer feeding the tail cache that wakes the consumer (`llog serve`); *cross-process*: the writer in "
        "another process, the consumer woken by Oxia's notifications (the consume Lambda, or another "
        "`llog serve`). Latency runs from the append returning to the consume returning, both read from "
        "`CLOCK_MONOTONIC`; the ratio is against the produce p50 of the same run.\n\n"
        + measured(lambda: tail.report(tail.run())),
    ))

    print("lambda benchmark ...", flush=True)
    sections.append((
        "Lambda handlers in-process: cold start and warm invocations against the floor",
        "bench/lambda_warm.py",
        "Produce and consume handlers, each in a fresh interpreter in a Lambda-like environment: import, first "
        "invocation, then 200 warm invocations one at a time (real-shaped API Gateway events, one 100-byte "
        "record), X-Ray off and on, against a local Oxia standalone (fsync on) and moto S3; the floor (median "
        "100-byte S3 PUT + median Oxia put) is measured in the same process on the same servers.\n\n"
        + measured(lambda: lambda_warm.report(lambda_warm.run(samples=200))),
    ))

    print("cold start benchmark ...", flush=True)
    sections.append((
        "Cold start: handler init",
        "bench/cold_start.py",
        "Each Lambda handler module imported in fresh interpreters in a Lambda-like environment "
        "(`LAMBDA_TASK_ROOT` set). The storage clients' modules and the X-Ray Tracer are loaded by the first "
        "invocation (see the Lambda section). With CPython 3.13 the layer is built as infra/layer.py builds it "
        "and measured twice, alternating: without byte code (as a layer without .pyc runs in Lambda, where /opt "
        "is read-only) and as shipped (precompiled); the function code has no .pyc in either; the interpreter "
        "is named above the table.\n\n" + cold_start.table(),
    ))

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "# Performance\n",
        f"Produced by `{COMMAND}` on {now} ({machine()}), which writes this file whole. Every figure is the "
        "median of repeated runs taken in one session; ratios compare numbers from the same run. The machine "
        "is shared and noisy: compare ratios, not absolute numbers across runs. The experiments behind these "
        "numbers, and the changes they led to or did not, are in [PERFORMANCE_NOTES.md](PERFORMANCE_NOTES.md).\n",
    ]
    for title, script, body in sections:
        parts.append(f"## {title}\n\nScript: `{script}` (also runnable on its own).\n\n{body}\n")
    OUTPUT.write_text("\n".join(parts))
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
