"""Consume benchmark: a tail reader and a reader of compacted history, with their S3 and Oxia requests.

Each run appends ``--batches`` batches of ``--records`` records of 1 KiB to a fresh partition
through ``LogWriter`` (one append per batch), against a local Oxia standalone (fsync on) and a moto
S3 server, and reads them back with three readers, each with its own Oxia and S3 clients (connections
opened before the clock starts):

* ``lambda``: ``ConsumeService`` without a tail cache, as the consume Lambda runs it (POST /consume);
* ``serve``: ``ConsumeService`` with a ``TailCache`` that the writer feeds through its commit
  listener, as ``llog serve`` wires them;
* ``iter_from``: one ``LogReader.iter_from`` scan.

Consume requests use the HTTP contract's defaults (``partition_max_bytes`` 1 MiB, ``max_bytes``
4 MiB, ``min_bytes`` 1, ``max_wait_ms`` 0, which ``--max-wait-ms`` changes) and are repeated from
``next_fetch_offset`` until the reader has every wanted record. Two phases:

* ``tail``: right after each append, every reader reads that batch (readers take turns going first);
* ``compacted``: the partition is then compacted (``compact_until_caught_up``, the compactor's
  default 8 MiB objects) and every reader reads it all from offset 1. The ``serve`` reader gets a
  new, empty tail cache first: it stands for a process that did not write the data.

Reported per phase and reader (the median over ``--runs`` runs): records/s and MB/s (value bytes,
10^6 bytes, over the time spent inside the read calls only), the median time of one request (one
consume call, or one whole ``iter_from`` scan), S3 GETs (whole and range) per consumed MB, bytes
the GETs returned per value byte consumed, and Oxia reads per consumed MB.

    .venv/bin/python bench/consume.py [--batches 320] [--records 100] [--runs 3] [--protocol cas]
        [--max-wait-ms 0] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `bench` importable
    sys.path.insert(0, str(ROOT))

from bench.stack import (  # noqa: E402
    READ_OPS,
    S3_GET_OPS,
    local_stack,
    median_of_runs,
    percentile,
    print_rows,
    stats_diff,
)
from llog.config import CacheConfig, Limits, OxiaConfig, S3Config, WriterConfig  # noqa: E402
from llog.format.keys import DEFAULT_ROOT_PREFIX, PartitionKeys  # noqa: E402
from llog.format.kv.control import AppendProtocol  # noqa: E402
from llog.format.kv.document import INITIAL_OFFSET  # noqa: E402
from llog.protocol.append import LogWriter, SharedAppendGroup  # noqa: E402
from llog.protocol.compaction import Compactor, compact_until_caught_up  # noqa: E402
from llog.protocol.read import LogReader, LogRecord  # noqa: E402
from llog.service.consume import (  # noqa: E402
    MAX_BATCHES_PER_PARTITION,
    ConsumeRequest,
    ConsumeService,
    FetchPartition,
    PartitionFetch,
)
from llog.service.tail_cache import TailCache  # noqa: E402
from llog.store.metrics import OperationCounters, OperationStats  # noqa: E402
from llog.store.object_cache import ObjectCache  # noqa: E402
from llog.store.oxia import OxiaStore  # noqa: E402
from llog.store.s3 import BlobStore  # noqa: E402
from llog.store.storage import Storage  # noqa: E402

BUCKET = "llog-bench"
RECORD_SIZE = 1024
MB = 1_000_000
MIB = 1024 * 1024
READERS = ("lambda", "serve", "iter_from")
PHASES = ("tail", "compacted")
PROTOCOLS = ("cas", "sequential")
T = TypeVar("T")
PARTITION_MAX_BYTES = Limits().default_partition_max_bytes
MAX_RESPONSE_BYTES = Limits().max_response_bytes


@dataclass
class Tally:
    """What one reader read in one phase of one run: records, value bytes, and each request's time."""

    records: int = 0
    value_bytes: int = 0
    latencies: list[float] = field(default_factory=list)

    def add(self, records: Iterable[LogRecord], seconds: float) -> int:
        """Count one request's records; returns the last offset it got (0 if none)."""
        last = 0
        for record in records:
            self.records += 1
            self.value_bytes += len(record.value)
            last = record.offset
        self.latencies.append(seconds)
        return last

    @property
    def seconds(self) -> float:
        return sum(self.latencies)


def summarize(phase: str, reader: str, tally: Tally, oxia: dict[str, OperationStats],
              s3: dict[str, OperationStats], data: str) -> dict[str, Any]:  # fmt: skip
    """One row: rates from ``tally``, storage requests from the reader's own counter differences."""
    mb = tally.value_bytes / MB
    nan = float("nan")

    def per_mb(n: int) -> float:
        return n / mb if mb else nan

    gets = sum(s.calls for op, s in s3.items() if op in S3_GET_OPS)
    get_bytes = sum(s.bytes for op, s in s3.items() if op in S3_GET_OPS)
    return {
        "phase": phase,
        "reader": reader,
        "data": data,
        "records": tally.records,
        "requests": len(tally.latencies),
        "records_per_s": tally.records / tally.seconds if tally.seconds > 0 else nan,
        "mb_per_s": mb / tally.seconds if tally.seconds > 0 else nan,
        "p50_ms": percentile(tally.latencies, 0.5) * 1000 if tally.latencies else nan,
        "s3_gets_per_mb": per_mb(gets),
        "s3_read_bytes_per_value_byte": get_bytes / tally.value_bytes if tally.value_bytes else nan,
        "s3_other_requests": sum(s.calls for op, s in s3.items() if op not in S3_GET_OPS),
        "oxia_reads_per_mb": per_mb(sum(s.calls for op, s in oxia.items() if op in READ_OPS)),
        "oxia_writes": sum(s.calls for op, s in oxia.items() if op not in READ_OPS),
    }


MEDIAN_KEYS = (
    "records_per_s",
    "mb_per_s",
    "p50_ms",
    "s3_gets_per_mb",
    "s3_read_bytes_per_value_byte",
    "oxia_reads_per_mb",
)


def median_row(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each rate over the runs; counts and descriptions from the first run."""
    return median_of_runs(samples, MEDIAN_KEYS)


def merge_runs(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One median row per (phase, reader), in the order of the first run."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rows in runs:
        for r in rows:
            groups.setdefault((r["phase"], r["reader"]), []).append(r)
    return [median_row(samples) for samples in groups.values()]


def turn(readers: Sequence[T], i: int) -> list[T]:
    """``readers`` rotated by ``i``: who goes first changes from one read to the next."""
    k = i % len(readers) if readers else 0
    return [*readers[k:], *readers[:k]]


def _storage(address: str, s3_config: S3Config, oxia: OperationCounters | None = None,
             s3: OperationCounters | None = None) -> Storage:  # fmt: skip
    """Oxia and S3 clients of their own (each Lambda has its own), under the default root."""
    return Storage(OxiaStore(OxiaConfig(address), counters=oxia), BlobStore(s3_config, counters=s3), BUCKET,
                   DEFAULT_ROOT_PREFIX)  # fmt: skip


# --- readers -------------------------------------------------------------------------------------


class _Reader:
    """One reader with its own Oxia and S3 clients and counters."""

    def __init__(self, address: str, s3_config: S3Config) -> None:
        self.oxia_counters, self.s3_counters = OperationCounters(), OperationCounters()
        self.log = LogReader(_storage(address, s3_config, self.oxia_counters, self.s3_counters))

    def warm_up(self, topic: str) -> None:
        """Open the Oxia and S3 connections before the clock starts."""
        keys = PartitionKeys(topic, 0)
        self.log.storage.oxia.get(keys.control, partition_key=keys.partition_key)
        self.log.layouts.topic_id(topic)  # the topic's record (its folders), read again once per TTL
        list(self.log.storage.blobs.list(BUCKET, "warm-up/"))

    def snapshot(self) -> tuple[dict[str, OperationStats], dict[str, OperationStats]]:
        return self.oxia_counters.snapshot(), self.s3_counters.snapshot()

    def read(self, topic: str, partition: int, start: int, end: int, tally: Tally) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.log.close()


class ConsumeReader(_Reader):
    """POST /consume's service: with a tail cache (``llog serve``), or without one and with the
    consume Lambda's cache of compacted objects."""

    def __init__(self, address: str, s3_config: S3Config, *, max_wait_ms: int, cache: TailCache | None) -> None:
        super().__init__(address, s3_config)
        self.max_wait_ms = max_wait_ms
        objects = ObjectCache(CacheConfig().object_cache_bytes) if cache is None else None
        self.service = ConsumeService(self.log, tail_cache=cache, object_cache=objects)

    def read(self, topic: str, partition: int, start: int, end: int, tally: Tally) -> None:
        consume_range(self.service.consume, topic, partition, start, end, self.max_wait_ms, tally)


def consume_range(consume: Callable[[ConsumeRequest], list[PartitionFetch]], topic: str, partition: int, start: int,
                  end: int, max_wait_ms: int, tally: Tally) -> None:  # fmt: skip
    """Consume requests from ``start``, each from the last one's ``next_fetch_offset``, until ``end`` is read."""
    offset = start
    while offset <= end:
        request = ConsumeRequest(
            [FetchPartition(topic, partition, offset, PARTITION_MAX_BYTES)],
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            max_bytes=MAX_RESPONSE_BYTES,
        )
        t0 = time.perf_counter()
        (result,) = consume(request)
        elapsed = time.perf_counter() - t0
        if result.error is not None:
            raise result.error
        if not result.records:
            raise RuntimeError(f"no records at {topic}/{partition} offset {offset} (hw {result.high_watermark})")
        tally.add(result.records, elapsed)
        offset = result.next_fetch_offset


class ScanReader(_Reader):
    """``LogReader.iter_from``: one scan up to the high watermark it sees when it starts."""

    def read(self, topic: str, partition: int, start: int, end: int, tally: Tally) -> None:
        t0 = time.perf_counter()
        records = list(self.log.iter_from(topic, partition, start))
        last = tally.add(records, time.perf_counter() - t0)
        if last != end:
            raise RuntimeError(f"iter_from({start}) of {topic}/{partition} ended at {last}, expected {end}")


# --- one run -------------------------------------------------------------------------------------


ReadFn = Callable[[str, int, int], None]  # read(reader name, first offset, last offset)


def _measure(phase: str, readers: dict[str, _Reader], topic: str, data: str, work: Callable[[ReadFn], None]
             ) -> list[dict[str, Any]]:  # fmt: skip
    """Run ``work(read)``; one row per reader, from its own tally and counter differences."""
    tallies = {name: Tally() for name in readers}
    before = {name: r.snapshot() for name, r in readers.items()}

    def read(name: str, start: int, end: int) -> None:
        readers[name].read(topic, 0, start, end, tallies[name])

    work(read)
    rows = []
    for name, r in readers.items():
        (oxia_before, s3_before), (oxia_after, s3_after) = before[name], r.snapshot()
        rows.append(summarize(phase, name, tallies[name], stats_diff(oxia_before, oxia_after),
                              stats_diff(s3_before, s3_after), data))  # fmt: skip
    return rows


def one_run(address: str, s3_config: S3Config, *, batches: int, records: int, protocol: str, max_wait_ms: int,
            phases: Sequence[str], index: int = 0) -> list[dict[str, Any]]:  # fmt: skip
    topic = f"bench-consume-{uuid.uuid4().hex[:8]}"
    cache = TailCache(CacheConfig().tail_cache_bytes)
    writer = LogWriter(
        _storage(address, s3_config),
        config=WriterConfig(append_protocol=AppendProtocol(protocol)),
        commit_listener=cache.on_commit,  # as llog serve wires its writer to its tail cache
    )
    compactor = Compactor(_storage(address, s3_config))
    serve = ConsumeReader(address, s3_config, max_wait_ms=max_wait_ms, cache=cache)
    readers: dict[str, _Reader] = {
        "lambda": ConsumeReader(address, s3_config, max_wait_ms=max_wait_ms, cache=None),
        "serve": serve,
        "iter_from": ScanReader(address, s3_config),
    }
    payload = [b"x" * RECORD_SIZE] * records
    last = INITIAL_OFFSET + batches * records - 1
    rows: list[dict[str, Any]] = []

    def populate(read: ReadFn | None) -> None:
        """Append every batch; with ``read``, every reader reads each batch right after its append."""
        for i in range(batches):
            appended = writer.append(topic, 0, payload)
            if not appended.ok or appended.start_offset is None or appended.end_offset is None:
                raise RuntimeError(f"append failed: {appended.error}")
            if read is not None:
                for name in turn(READERS, index + i):
                    read(name, appended.start_offset, appended.end_offset)

    def read_history(read: ReadFn) -> None:
        for name in turn(READERS, index):
            read(name, INITIAL_OFFSET, last)

    try:
        writer.initialize_partition(topic, 0)
        for r in readers.values():
            r.warm_up(topic)
        if "tail" in phases:
            rows.extend(_measure("tail", readers, topic, f"{records} x 1 KiB per append", populate))
        else:
            populate(None)
        if "compacted" in phases:
            before = compactor.storage.oxia.counters.snapshot(), compactor.storage.blobs.counters.snapshot()
            done = [c for c in compact_until_caught_up(compactor, topic, 0, budget_s=600) if c.outcome == "compacted"]
            if not done or done[-1].end_offset != last:
                raise RuntimeError(f"compaction stopped short of offset {last}: {done[-1:]}")
            sizes = [c.bytes_written / MIB for c in done]
            data = f"{len(done)} objects, median {statistics.median(sizes):.1f} MiB"
            compacted = Tally(records=last, value_bytes=last * RECORD_SIZE,
                              latencies=[sum(c.stage_seconds.values()) for c in done])  # fmt: skip
            oxia_diff = stats_diff(before[0], compactor.storage.oxia.counters.snapshot())
            s3_diff = stats_diff(before[1], compactor.storage.blobs.counters.snapshot())
            rows.append(summarize("compaction", "compactor", compacted, oxia_diff, s3_diff, data))
            # serve stands for a process that did not write the data: its tail cache starts empty.
            serve.service = ConsumeService(serve.log, tail_cache=TailCache(CacheConfig().tail_cache_bytes))
            rows.extend(_measure("compacted", readers, topic, data, read_history))
    finally:
        for r in readers.values():
            r.close()
        writer.close()
        compactor.close()
    return rows


def run(*, batches: int = 320, records: int = 100, runs: int = 3, protocol: str = "cas", max_wait_ms: int = 0,
        phases: Sequence[str] = PHASES) -> list[dict[str, Any]]:  # fmt: skip
    """Every run against one Oxia standalone and one moto server; raises if Oxia cannot be had."""
    with local_stack(BUCKET) as (address, s3_config):
        samples = []
        for i in range(runs):
            sample = one_run(
                address, s3_config, batches=batches, records=records, protocol=protocol,
                max_wait_ms=max_wait_ms, phases=phases, index=i,
            )  # fmt: skip
            samples.append(sample)
        return merge_runs(samples)


def timed_consume(reader: ConsumeReader, request: ConsumeRequest) -> tuple[list[PartitionFetch], float, int]:
    """One consume call of ``reader``'s service: its results, its seconds and the Oxia reads it made."""
    before = reader.oxia_counters.snapshot()
    t0 = time.perf_counter()
    results = reader.service.consume(request)
    elapsed = time.perf_counter() - t0
    reads = sum(s.calls for op, s in stats_diff(before, reader.oxia_counters.snapshot()).items() if op in READ_OPS)
    return results, elapsed, reads


def latency_rows(key: str, tallies: dict[int, Tally], reads: dict[int, int], samples: int,
                 protocol: str) -> list[dict[str, Any]]:  # fmt: skip
    """One row per ``key`` value (partitions per request, batches behind): latencies and Oxia reads."""
    return [{key: n, "protocol": protocol, "requests": samples,
             "p50_ms": percentile(tally.latencies, 0.5) * 1000, "p99_ms": percentile(tally.latencies, 0.99) * 1000,
             "oxia_reads_per_request": reads[n] / samples} for n, tally in tallies.items()]  # fmt: skip


def latency_table(heading: str, key: str, rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        f"| {heading} | protocol | requests | p50 ms | p99 ms | Oxia reads / request |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r[key]:,} | {r['protocol']} | {r['requests']} | {r['p50_ms']:.2f} "
                     f"| {r['p99_ms']:.2f} | {r['oxia_reads_per_request']:.1f} |")  # fmt: skip
    return lines


def many_partitions(*, partitions: int = 16, samples: int = 60, protocol: str = "sequential") -> list[dict[str, Any]]:
    """One consume request for one partition and one for ``partitions``, each partition with one new batch.

    A sample appends one record of 1 KiB to every partition (one shared append), then two readers (the
    consume Lambda's service, each with its own clients, taking turns going first) read: one partition 0
    alone, the other every partition in one request. Latency is of the consume call alone.
    """
    widths = (1, partitions)
    with local_stack(BUCKET) as (address, s3_config):
        topic = f"bench-partitions-{uuid.uuid4().hex[:8]}"
        writer = LogWriter(_storage(address, s3_config), config=WriterConfig(append_protocol=AppendProtocol(protocol)))
        readers = {n: ConsumeReader(address, s3_config, max_wait_ms=0, cache=None) for n in widths}
        tallies = {n: Tally() for n in widths}
        reads: dict[int, int] = dict.fromkeys(widths, 0)
        try:
            for p in range(partitions):
                writer.initialize_partition(topic, p)
            for reader in readers.values():
                reader.warm_up(topic)
            groups = [SharedAppendGroup(topic, p, [b"x" * RECORD_SIZE]) for p in range(partitions)]
            for i in range(samples):
                if not all(r.ok for r in writer.append_shared(groups)):
                    raise RuntimeError("append failed")
                for n in turn(list(widths), i):
                    wanted = [FetchPartition(topic, p, INITIAL_OFFSET + i, PARTITION_MAX_BYTES) for p in range(n)]
                    request = ConsumeRequest(wanted, max_wait_ms=0, min_bytes=1, max_bytes=MAX_RESPONSE_BYTES)
                    results, elapsed, made = timed_consume(readers[n], request)
                    if any(r.error is not None or len(r.records) != 1 for r in results):
                        raise RuntimeError(f"{n} partitions: {[(r.error, len(r.records)) for r in results]}")
                    reads[n] += made
                    tallies[n].add([rec for r in results for rec in r.records], elapsed)
        finally:
            for reader in readers.values():
                reader.close()
            writer.close()
        return latency_rows("partitions", tallies, reads, samples, protocol)


def partitions_report(rows: list[dict[str, Any]]) -> str:
    lines = latency_table("partitions per request", "partitions", rows)
    one, many = rows[0], rows[-1]
    if len(rows) > 1 and one["p50_ms"] > 0:
        lines += ["", f"One request for {many['partitions']} partitions: {many['p50_ms'] / one['p50_ms']:.1f}x the p50 "
                      f"of one for a single partition, with {many['oxia_reads_per_request']:.1f} Oxia reads "
                      f"({one['oxia_reads_per_request']:.1f} for one partition)."]  # fmt: skip
    return "\n".join(lines)


def behind_the_tail(*, distances: Sequence[int] = (1, 64, 1000), samples: int = 40,
                    protocol: str = "sequential") -> list[dict[str, Any]]:
    """Consume requests for one batch at ``distances`` batches behind the tail of one partition.

    The partition gets ``max(distances)`` appends of one record of 100 bytes (a batch small enough to be
    kept in its index entry: no S3 GET), then one reader (the consume Lambda's service: no tail cache)
    asks ``samples`` times at each distance, taking turns, for the batch there alone
    (``partition_max_bytes`` 1), so that the index's cost is not hidden behind the data's. A request
    reads at most a page of the index (64 batches) whatever the distance.
    """
    with local_stack(BUCKET) as (address, s3_config):
        topic = f"bench-behind-{uuid.uuid4().hex[:8]}"
        writer = LogWriter(_storage(address, s3_config), config=WriterConfig(append_protocol=AppendProtocol(protocol)))
        reader = ConsumeReader(address, s3_config, max_wait_ms=0, cache=None)
        tallies = {d: Tally() for d in distances}
        reads = dict.fromkeys(distances, 0)
        try:
            writer.initialize_partition(topic, 0)
            high_watermark = 0
            for _ in range(max(distances)):
                high_watermark = writer.append(topic, 0, [b"x" * 100]).end_offset or high_watermark
            reader.warm_up(topic)
            for i in range(samples):
                for d in turn(list(distances), i):
                    offset = high_watermark - d + 1
                    request = ConsumeRequest([FetchPartition(topic, 0, offset, 1)], max_wait_ms=0, min_bytes=1,
                                             max_bytes=MAX_RESPONSE_BYTES)  # fmt: skip
                    (result,), elapsed, made = timed_consume(reader, request)
                    if result.error is not None or [r.offset for r in result.records] != [offset]:
                        raise RuntimeError(f"{d} behind: {result.error!r}, {[r.offset for r in result.records]}")
                    reads[d] += made
                    tallies[d].add(result.records, elapsed)
        finally:
            reader.close()
            writer.close()
        return latency_rows("behind", tallies, reads, samples, protocol)


def behind_report(rows: list[dict[str, Any]]) -> str:
    lines = latency_table("batches behind the tail", "behind", rows)
    page = next((r for r in rows if r["behind"] == MAX_BATCHES_PER_PARTITION), None)
    farthest = rows[-1]
    if page is not None and farthest is not page and page["p50_ms"] > 0:
        lines += ["", f"{farthest['behind']:,} batches behind: {farthest['p50_ms'] / page['p50_ms']:.2f}x the p50 at "
                      f"{page['behind']} behind (one page of the index): flat when a request's cost follows the "
                      "page it reads, not the distance to the tail."]  # fmt: skip
    return "\n".join(lines)


# --- report --------------------------------------------------------------------------------------


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| phase | data | reader | records | requests | records/s | MB/s | p50 ms / request | S3 GETs / MB "
        "| S3 bytes read / value byte | Oxia reads / MB |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['phase']} | {r['data']} | {r['reader']} | {r['records']:,} | {r['requests']:,} "
            f"| {r['records_per_s']:,.0f} | {r['mb_per_s']:.1f} | {r['p50_ms']:.2f} | {r['s3_gets_per_mb']:.2f} "
            f"| {r['s3_read_bytes_per_value_byte']:.2f} | {r['oxia_reads_per_mb']:.2f} |"
        )
    return "\n".join(lines)


def _find(rows: list[dict[str, Any]], phase: str, reader: str) -> dict[str, Any] | None:
    return next((r for r in rows if (r["phase"], r["reader"]) == (phase, reader)), None)


def comparisons(rows: list[dict[str, Any]]) -> str:
    """Ratios from rows of the same run: what the tail cache saves, and what whole-object GETs cost."""
    lines = []
    lam, serve = _find(rows, "tail", "lambda"), _find(rows, "tail", "serve")
    if lam is not None and serve is not None and serve["p50_ms"] > 0:
        lines.append(
            f"* Tail: the tail cache (`serve`) answers in {serve['p50_ms']:.2f} ms at the median with "
            f"{serve['s3_gets_per_mb']:.2f} S3 GETs and {serve['oxia_reads_per_mb']:.2f} Oxia reads per MB; "
            f"without it (`lambda`) {lam['p50_ms']:.2f} ms ({lam['p50_ms'] / serve['p50_ms']:.0f}x), "
            f"{lam['s3_gets_per_mb']:.2f} GETs and {lam['oxia_reads_per_mb']:.2f} Oxia reads per MB."
        )
    scan, lam = _find(rows, "compacted", "iter_from"), _find(rows, "compacted", "lambda")
    if scan is not None and lam is not None and scan["s3_gets_per_mb"] > 0:
        lines.append(
            f"* Compacted history: a consume request serves at most `partition_max_bytes` "
            f"({PARTITION_MAX_BYTES // MIB} MiB) but GETs the whole compacted object, so `lambda` makes "
            f"{lam['s3_gets_per_mb'] / scan['s3_gets_per_mb']:.1f}x the GETs per MB of one `iter_from` scan and "
            f"reads {lam['s3_read_bytes_per_value_byte']:.1f} bytes from S3 per value byte served "
            f"(`iter_from`: {scan['s3_read_bytes_per_value_byte']:.2f})."
        )
    serve = _find(rows, "compacted", "serve")
    if serve is not None and lam is not None and lam["s3_gets_per_mb"] > 0:
        lines.append(
            f"* `serve` keeps the batches it read in its tail cache and serves the following requests from them: "
            f"{serve['s3_gets_per_mb']:.2f} GETs per MB, {serve['s3_read_bytes_per_value_byte']:.2f} bytes read "
            f"per value byte."
        )
    return "\n".join(lines)


def report(rows: list[dict[str, Any]]) -> str:
    notes = comparisons(rows)
    return table(rows) + (f"\n\nFrom the rows above:\n\n{notes}" if notes else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=320)
    parser.add_argument("--records", type=int, default=100, help="records of 1 KiB per append")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--protocol", choices=PROTOCOLS, default="cas")
    parser.add_argument("--max-wait-ms", type=int, default=0)
    parser.add_argument("--phases", nargs="+", choices=PHASES, default=list(PHASES))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--partitions", type=int, default=0,
                        help="instead: one consume request for this many partitions against one for a single one")
    parser.add_argument("--behind", action="store_true",
                        help="instead: requests for one batch at 1, 64 and 1,000 batches behind the tail")
    args = parser.parse_args(argv)
    if args.behind:
        return print_rows(behind_the_tail, behind_report, as_json=args.json)
    if args.partitions:
        return print_rows(lambda: many_partitions(partitions=args.partitions), partitions_report, as_json=args.json)
    return print_rows(
        lambda: run(batches=args.batches, records=args.records, runs=args.runs, protocol=args.protocol,
                    max_wait_ms=args.max_wait_ms, phases=args.phases),  # fmt: skip
        report,
        as_json=args.json,
    )


if __name__ == "__main__":
    sys.exit(main())
