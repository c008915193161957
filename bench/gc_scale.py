"""GC scale benchmark: what garbage collection of WAL blobs costs per operation and per run (issue 40).

Against a local Oxia standalone (fsync off: the measured reads and S3 calls do not wait on it) and
VersityGW (a real S3 server, objects on disk), the per-operation costs the cost model's GC capacity rests on
(bench/cost/comparisons.py ``gc_capacity``, docs/COST.md "Garbage collection capacity"), medians of
``--runs`` repeats:

* one LIST page of 1,000 keys under ``wal-shared/``;
* one DeleteObjects of 1,000 keys (``BlobStore.delete``);
* one header read of a WAL blob (``read_blob_slices``: one range GET);
* one partition's WAL references (``GarbageCollector._partition_references``: control, cursor and index
  scan), a partition with ``APPENDS_PER_PARTITION`` uncompacted entries (the median over the partitions).

Each with this process's CPU time during the call: on a shared machine the collector's client and the local
servers compete for the same cores, so this tells the client's share from the server's.

Then whole WAL runs (``collect(wal_only=True)``) of a collector whose clock is ahead by more than the grace:
``--partitions`` registered partitions, each with ``APPENDS_PER_PARTITION`` committed appends, and
``--blobs`` old unreferenced blobs put directly under ``wal-shared/`` with UUIDv7 names:

* *unread*: the namespace's identity was created more than a grace before the blobs, so they are judged from
  the partitions' references alone and deleted without being read (small bodies), at read concurrency 1
  and 16;
* *by header*: the identity was created after the blobs (a stack from before the registry), so each blob's
  LLS1 header is read (copies of one real blob's bytes), at read concurrency 16;
* *nothing to delete*: a run on the same log without garbage: reading the partitions' references, the
  registry and one short listing.

    PATH=.tools/bin:$PATH .venv/bin/python bench/gc_scale.py [--partitions 100] [--blobs 10000] [--runs 5]
        [--s3-server versitygw|moto] [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `bench` importable
    sys.path.insert(0, str(ROOT))

from bench.cost.inputs import Code, Latency  # noqa: E402
from bench.stack import READ_OPS, local_stack, stats_diff  # noqa: E402
from llog.config import GcConfig, OxiaConfig  # noqa: E402
from llog.format.keys import PartitionKeys, S3Location, shared_wal_object_key, shared_wal_prefix  # noqa: E402
from llog.protocol.append import LogWriter, SharedAppendGroup  # noqa: E402
from llog.protocol.gc import GarbageCollector, GcReport, read_blob_slices  # noqa: E402
from llog.protocol.metadata import PartitionMetadata  # noqa: E402
from llog.protocol.namespace import check_namespace  # noqa: E402
from llog.store.metrics import OperationCounters  # noqa: E402
from llog.store.oxia import OxiaStore  # noqa: E402
from llog.store.s3 import BlobStore  # noqa: E402
from llog.store.storage import Storage  # noqa: E402

BUCKET = "llog-bench"
TOPIC = "gc"
GRACE_MS = 3_600_000
AHEAD_MS = GRACE_MS + 60_000  # the collector's clock: every blob written so far is past the grace
APPENDS_PER_PARTITION = 3  # shared appends over every partition: each gets this many uncompacted entries
PAGE_KEYS = 1000  # one LIST page, one DeleteObjects call (S3's limits)
PUT_THREADS = 16
HIGH_CONCURRENCY = 16  # the default LLOG_GC_READ_CONCURRENCY


def shifted(storage: Storage, ms: int) -> Storage:
    """``storage`` with a clock ``ms`` ahead (negative: behind)."""
    return dataclasses.replace(storage, clock=lambda: time.time() + ms / 1000)


def collector(storage: Storage, read_concurrency: int) -> GarbageCollector:
    config = GcConfig(grace_ms=GRACE_MS, read_concurrency=read_concurrency)
    return GarbageCollector(shifted(storage, AHEAD_MS), config=config)


def medians(runs: int, action: Callable[[int], object]) -> dict[str, float]:
    """``action(i)`` over ``runs`` calls: the median time and the median CPU time of this process (the
    collector's side of the call: its S3 or Oxia client), in ms."""
    times, cpu = [], []
    for i in range(runs):
        started, cpu_started = time.perf_counter(), time.process_time()
        action(i)
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - cpu_started) * 1000)
    return {"ms": statistics.median(times), "client_cpu_ms": statistics.median(cpu)}


def build_log(storage: Storage, partitions: int) -> S3Location:
    """``partitions`` registered partitions with ``APPENDS_PER_PARTITION`` shared appends each; a WAL blob of
    one of partition 0's appends (its header names one partition, as one produce request's does)."""
    writer = LogWriter(storage)
    with ThreadPoolExecutor(PUT_THREADS) as pool:
        list(pool.map(lambda p: writer.initialize_partition(TOPIC, p), range(partitions)))
    for _ in range(APPENDS_PER_PARTITION):
        groups = [SharedAppendGroup(TOPIC, p, [b"x" * 100]) for p in range(partitions)]
        failed = [r for r in writer.append_shared(groups) if not r.ok]
        if failed:
            raise RuntimeError(f"building the log failed: {failed[0].error}")
    sample = writer.append(TOPIC, 0, [b"y" * 100]).wal_uri
    if sample is None:
        raise RuntimeError("the sample append wrote no WAL blob")
    return S3Location.parse(sample)


def put_blobs(storage: Storage, count: int, body: bytes) -> list[str]:
    """``count`` blobs of ``body`` under ``wal-shared/`` with new UUIDv7 names, nothing referencing them."""
    keys = [shared_wal_object_key(storage.root) for _ in range(count)]
    with ThreadPoolExecutor(PUT_THREADS) as pool:
        list(pool.map(lambda key: storage.blobs.put(S3Location(storage.bucket, key), body), keys))
    return keys


def measure_operations(storage: Storage, oxia: OperationCounters, sample: S3Location, partitions: int,
                       runs: int, page_keys: int) -> dict[str, Any]:  # fmt: skip
    """Each single operation's medians (``medians``; a LIST page and a DeleteObjects call of ``page_keys``
    keys), with the Oxia reads of one partition's references; ``wal-shared/`` must hold at least a page."""
    blobs, bucket, prefix = storage.blobs, storage.bucket, shared_wal_prefix(storage.root)

    def list_page(_: int) -> None:
        if len(list(islice(blobs.list(bucket, prefix), page_keys))) < page_keys:  # from the first page
            raise AssertionError(f"fewer than {page_keys} keys under {prefix}")

    batches = [put_blobs(storage, page_keys, b"d") for _ in range(runs)]
    size = blobs.head(sample).size
    metas = [PartitionMetadata(storage.oxia, PartitionKeys(TOPIC, p, storage.root)) for p in range(partitions)]
    before = oxia.snapshot()
    references = medians(partitions, lambda p: GarbageCollector._partition_references(metas[p]))
    reads = sum(s.calls for op, s in stats_diff(before, oxia.snapshot()).items() if op in READ_OPS)
    return {
        "list_page": medians(runs, list_page),
        "delete_objects": medians(runs, lambda i: blobs.delete(bucket, batches[i])),
        "header_read": medians(runs, lambda _: read_blob_slices(blobs, sample, size)),
        "partition_references": {**references, "oxia_reads": reads / partitions},
    }


def wal_run(name: str, storage: Storage, read_concurrency: int, garbage: int) -> dict[str, Any]:
    """One timed WAL run, which must delete exactly ``garbage`` blobs."""
    gc = collector(storage, read_concurrency)
    started, cpu_started = time.perf_counter(), time.process_time()
    report = gc.collect(wal_only=True)
    seconds, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    check(name, report, garbage)
    return {
        "run": name,
        "read_concurrency": read_concurrency,
        "partitions_read": report.wal_partitions_read,
        "blobs_deleted": report.wal_blobs_deleted,
        "headers_read": report.wal_headers_read,
        "seconds": seconds,
        "client_cpu_s": cpu_s,
        "blobs_deleted_per_s": report.wal_blobs_deleted / seconds,
    }


def check(name: str, report: GcReport, garbage: int) -> None:
    if report.errors or report.wal_blobs_deleted != garbage:
        raise AssertionError(f"{name}: deleted {report.wal_blobs_deleted} of {garbage} blobs, {report.errors[:3]}")


def run(partitions: int = 100, blobs: int = 10_000, *, runs: int = 5, s3_server: str = "versitygw",
        page_keys: int = PAGE_KEYS) -> dict[str, Any]:  # fmt: skip
    """Per-operation costs and whole WAL runs on one Oxia standalone and one S3 server; ``page_keys`` below
    1,000 (a LIST page and a DeleteObjects call of fewer keys) only to try the benchmark out quickly."""
    with local_stack(BUCKET, fsync=False, s3_server=s3_server) as (address, s3_config):
        oxia_counters = OperationCounters()
        with OxiaStore(OxiaConfig(address), counters=oxia_counters) as oxia:
            blob_store = BlobStore(s3_config)
            name = f"bench-gc-{uuid.uuid4().hex[:8]}"
            unread = Storage(oxia, blob_store, BUCKET, f"{name}-unread")
            by_header = Storage(oxia, blob_store, BUCKET, f"{name}-header")
            # The identity more than a grace before the blobs: they are judged from the references alone.
            check_namespace(shifted(unread, -GRACE_MS - 1000))
            started = time.perf_counter()
            sample = build_log(unread, partitions)
            header_sample = build_log(by_header, partitions)
            build_s = time.perf_counter() - started
            put_blobs(unread, max(blobs, page_keys), b"x" * 100)
            operations = measure_operations(unread, oxia_counters, sample, partitions, runs, page_keys)
            wal_runs = [wal_run("unread", unread, 1, max(blobs, page_keys))]
            put_blobs(unread, blobs, b"x" * 100)
            wal_runs.append(wal_run("unread", unread, HIGH_CONCURRENCY, blobs))
            put_blobs(by_header, blobs, blob_store.get(header_sample))
            check_namespace(shifted(by_header, AHEAD_MS))  # created after the blobs: their headers are read
            wal_runs.append(wal_run("by header", by_header, HIGH_CONCURRENCY, blobs))
            nothing = [wal_run("nothing to delete", unread, c, 0) for c in (1, HIGH_CONCURRENCY)]
    return {"partitions": partitions, "blobs": blobs, "runs": runs, "s3_server": s3_server, "build_s": build_s,
            "page_keys": page_keys, "operations": operations, "wal_runs": wal_runs + nothing}  # fmt: skip


def assumptions() -> dict[str, float]:
    """What the cost model assumes for each operation (bench/cost/inputs.py ``Latency``), in ms."""
    lat, code = Latency(), Code()
    return {
        "list_page": lat.s3_list_ms,
        "delete_objects": lat.s3_delete_objects_ms,
        "header_read": lat.s3_get_ms,
        "partition_references": code.wal_gc_oxia_reads_per_partition * lat.oxia_read_ms,
    }


def modelled_blobs_per_s(list_page_ms: float, delete_objects_ms: float, concurrency: int) -> float:
    """``gc_capacity``'s rate of an unread run, without S3's request rate per prefix (none on a local server):
    a page of blobs takes the slower of its LIST page and its DeleteObjects calls over their concurrency."""
    page_ms = max(list_page_ms, delete_objects_ms * PAGE_KEYS / Code().gc_delete_batch / concurrency)
    return PAGE_KEYS / page_ms * 1000


OPERATIONS = {  # {keys}: the run's page_keys
    "list_page": "one LIST page of {keys:,} keys under `wal-shared/`",
    "delete_objects": "one DeleteObjects of {keys:,} keys",
    "header_read": "one header read of a WAL blob (range GET)",
    "partition_references": "one partition's WAL references (control, cursor, index scan)",
}
ASSUMPTION_NAMES = {
    "list_page": "`s3_list_ms`",
    "delete_objects": "`s3_delete_objects_ms`",
    "header_read": "`s3_get_ms`",
    "partition_references": "`wal_gc_oxia_reads_per_partition` x `oxia_read_ms`",
}


def report(result: dict[str, Any]) -> str:
    ops, assumed = result["operations"], assumptions()
    lines = [
        f"{result['partitions']:,} partitions ({APPENDS_PER_PARTITION} uncompacted entries each; built in "
        f"{result['build_s']:.0f} s), {result['blobs']:,} unreferenced blobs a run, S3 server "
        f"{result['s3_server']}; operations are medians of {result['runs']} (partition references: of the "
        f"{result['partitions']:,} partitions, {ops['partition_references']['oxia_reads']:.1f} Oxia reads each). "
        "Client CPU is this process's CPU time during the call (the S3 or Oxia client's side).\n",
        "| operation | measured ms | client CPU ms | cost model assumes ms | measured / assumed |",
        "|---|---:|---:|---:|---:|",
    ]
    for key, what in OPERATIONS.items():
        op = ops[key]
        lines.append(f"| {what.format(keys=result['page_keys'])} | {op['ms']:.1f} | {op['client_cpu_ms']:.1f} "
                     f"| {assumed[key]:.0f} ({ASSUMPTION_NAMES[key]}) | {op['ms'] / assumed[key]:.2f} |")  # fmt: skip
    lines += [
        "",
        "| WAL run | read concurrency | partitions read | blobs deleted | headers read | seconds | client CPU s "
        "| blobs deleted/s | model, measured latencies | model, assumed latencies |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["wal_runs"]:
        modelled = "- | -"
        if r["run"] == "unread":
            rates = [modelled_blobs_per_s(list_ms, delete_ms, r["read_concurrency"]) for list_ms, delete_ms in (
                (ops["list_page"]["ms"], ops["delete_objects"]["ms"]),
                (assumed["list_page"], assumed["delete_objects"]))]  # fmt: skip
            modelled = " | ".join(f"{rate:,.0f}" for rate in rates)
        rate = f"{r['blobs_deleted_per_s']:,.0f}" if r["blobs_deleted"] else "-"
        lines.append(f"| {r['run']} | {r['read_concurrency']} | {r['partitions_read']:,} | {r['blobs_deleted']:,} "
                     f"| {r['headers_read']:,} | {r['seconds']:.2f} | {r['client_cpu_s']:.2f} | {rate} "
                     f"| {modelled} |")  # fmt: skip
    references_s = result["partitions"] * assumed["partition_references"] / HIGH_CONCURRENCY / 1000
    lines += [
        "",
        f"The model's columns: blobs a second of an unread run by `gc_capacity`'s page formula. Reading "
        f"{result['partitions']:,} partitions' references {HIGH_CONCURRENCY} at a time takes {references_s:.2f} s "
        "in the model (assumed latencies); *nothing to delete* is that plus the registry and one listing, measured.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--blobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--s3-server", choices=("versitygw", "moto"), default="versitygw")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        result = run(args.partitions, args.blobs, runs=args.runs, s3_server=args.s3_server)
    except Exception as exc:
        print(f"Not measured here: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result) if args.json else report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
