"""The export: committed compacted ranges in, Parquet table partitions out, exactly once.

An export run plans on the driver (manifests after each partition's cursor),
decodes on the executors (one task reads and decodes whole compacted objects
with ``mapInArrow``), writes Parquet to a staging folder and commits with the
protocol of :mod:`llog_export.state` (or one Iceberg append, :mod:`llog_export.iceberg`), all
under the table's run lease (:mod:`llog_export.lease`). The plan crosses the gaps that will never be
filled (``walk``: expired and LOST ranges) and reports each one.

A topic's partitions are found in S3 by their folders (``ManifestStore.partitions``): the legacy folder
and, for a topic created from the version that put topic ids into keys, one folder per incarnation
(``{topic}/{topic_id}/partitions/{p}``, docs/FORMAT.md). Each incarnation has cursors of its own, named
``{topic}/{topic_id}`` (a topic name holds no ``/``): a topic deleted and created again starts at offset
1, and is exported from there, not from the old incarnation's cursor.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.accumulators import Accumulator
from pyspark.sql import DataFrame, SparkSession

from llog.config import S3Config
from llog.errors import CorruptMetadata
from llog.format.codec import decode_batch
from llog.format.keys import PartitionKeys, S3Location, format_offset
from llog.protocol.faults import FaultHook
from llog.protocol.manifest import ManifestSpan, ManifestStore
from llog.store.s3 import BlobStore
from llog_export.arrow import SPARK_SCHEMA, batch_to_arrow
from llog_export.catalog import TableCatalog
from llog_export.hadoop_fs import HadoopFileSystem
from llog_export.lease import Lease, RunLease
from llog_export.state import (
    STAGING_DIR,
    Cursors,
    ExportState,
    FileSystem,
    Move,
    PendingAttempt,
    StateStore,
    merge_cursors,
)

log = logging.getLogger("llog_export")

AFTER_PLAN = "export.after_plan"  # both table formats: ranges planned, nothing written yet
AFTER_STAGING = "export.after_staging"
AFTER_PENDING = "export.after_pending"
AFTER_MOVES = "export.after_moves"

WORK_SCHEMA = (
    "topic STRING, topic_id STRING, partition INT, start_offset BIGINT, end_offset BIGINT, manifest_key STRING"
)


@dataclass(frozen=True)
class ExportOptions:
    llog_bucket: str
    output_path: str
    llog_root_prefix: str = "llog"
    topics: tuple[str, ...] = ()  # empty: every topic found in the bucket
    database: str | None = None  # register the table in this catalog database
    table: str = "records"
    s3: S3Config = field(default_factory=S3Config)
    max_ranges_per_run: int = 100_000  # bounds one run's work; the next run continues
    lease_s: float = 3600.0  # a run's lease on the table (llog_export.lease): a run must end within it


@dataclass(frozen=True)
class ExportSummary:
    attempt_id: str | None
    ranges: int
    rows: int
    bytes_read: int
    files: int
    partitions: int  # topic-partitions with new rows
    recovered_attempt: str | None
    seconds: dict[str, float]
    skipped: tuple[SkippedRange, ...] = ()  # offsets the table will never hold, found by this run's plan

    def skipped_offsets(self, reason: str) -> int:
        return sum(r.offsets for r in self.skipped if r.reason == reason)

    def describe(self) -> str:
        total = sum(self.seconds.values())
        rate = self.rows / total if total else 0.0
        skipped = "".join(f"; skipped {self.skipped_offsets(reason)} {reason} offsets" for reason in (EXPIRED, LOST)
                          if self.skipped_offsets(reason))  # fmt: skip
        return (
            f"exported {self.rows} rows ({self.bytes_read} bytes) from {self.ranges} compacted ranges of "
            f"{self.partitions} partitions into {self.files} files in {total:.1f} s ({rate:,.0f} rows/s){skipped}"
        )


def cursor_name(keys: PartitionKeys) -> str:
    """The name of an incarnation's cursors: the topic for the legacy folder, else ``{topic}/{topic_id}``."""
    return keys.topic if keys.topic_id is None else f"{keys.topic}/{keys.topic_id}"


@dataclass(frozen=True)
class PlannedRange:
    keys: PartitionKeys
    span: ManifestSpan

    @property
    def topic(self) -> str:
        return self.keys.topic

    @property
    def partition(self) -> int:
        return self.keys.partition

    @property
    def end_offset(self) -> int:
        return self.span.end_offset

    @property
    def record_count(self) -> int:
        return self.span.record_count


EXPIRED = "expired"  # retention removed the ranges before the export reached them
LOST = "lost"  # no manifest, and a later range has one: none will come (a LOST range)


@dataclass(frozen=True)
class SkippedRange:
    """Offsets of a partition the table will never hold (``reason``: ``expired`` or ``lost``)."""

    name: str  # the incarnation's cursor name
    partition: int
    start_offset: int
    end_offset: int
    reason: str

    @property
    def offsets(self) -> int:
        return self.end_offset - self.start_offset + 1


@dataclass
class Plan:
    ranges: list[PlannedRange] = field(default_factory=list)
    skipped: list[SkippedRange] = field(default_factory=list)


def plan_ranges(manifests: ManifestStore, cursors: Cursors, options: ExportOptions) -> Plan:
    """Every committed range after each partition's cursor, up to ``max_ranges_per_run``, from listings alone,
    and the offsets skipped on the way (``walk``), each logged with its exact range."""
    plan = Plan()
    for topic in options.topics or tuple(manifests.topics()):
        for keys in manifests.partitions(topic):
            cursor = cursors.get(cursor_name(keys), {}).get(keys.partition, 1)
            found = 0
            for step in walk(manifests, keys, cursor):
                if isinstance(step, SkippedRange):
                    log.warning("plan: %s/%d: offsets %d-%d %s before export: the table will not hold them",
                                step.name, step.partition, step.start_offset, step.end_offset, step.reason)  # fmt: skip
                    plan.skipped.append(step)
                    continue
                if len(plan.ranges) >= options.max_ranges_per_run:
                    log.info("plan: reached max_ranges_per_run=%d; the next run continues", options.max_ranges_per_run)
                    return plan
                plan.ranges.append(PlannedRange(keys, step))
                found += 1
            if found:
                log.info("plan: %s/%d: %d ranges from offset %d", cursor_name(keys), keys.partition, found, cursor)
    return plan


def walk(manifests: ManifestStore, keys: PartitionKeys, cursor: int) -> Iterator[ManifestSpan | SkippedRange]:
    """The partition's ranges from ``cursor``, across the gaps that will never be filled.

    The chain stops at a gap (``ManifestStore.spans``). Below the log start retention published, the
    ranges expired. Above it, a gap is a committed compaction still publishing its manifest only if no
    later range has one: compaction publishes a range's manifest before it ends the range's record, and
    only then can the next range be compacted (docs/PROTOCOL.md, "Compaction", steps 7-8). So a gap
    followed by a manifest has none and never will: a LOST range (offsets a rebuild could not recover,
    docs/RECOVERY.md), skipped with its exact bounds. Waiting there would never end, and once retention
    passed it would drop every range compacted after it. Costs one GET (the log start) and, when
    the chain stops above it, one LIST per partition.
    """
    position = cursor
    log_start: int | None = None
    while True:
        for span in manifests.spans(keys, position):
            yield span
            position = span.end_offset + 1
        if log_start is None:
            log_start = manifests.log_start(keys)
        if log_start > position:
            yield SkippedRange(cursor_name(keys), keys.partition, position, log_start - 1, EXPIRED)
            position = log_start
            continue
        following = _next_manifest_start(manifests, keys, position)
        if following is None or following <= position:
            # Caught up, or the range at ``position`` is still being compacted, or was published since
            # ``spans`` listed (then it starts at ``position``): the next run goes on from here.
            return
        yield SkippedRange(cursor_name(keys), keys.partition, position, following - 1, LOST)
        position = following


def _next_manifest_start(manifests: ManifestStore, keys: PartitionKeys, position: int) -> int | None:
    """The start of the first manifest after ``position`` (whose own range has none), if any."""
    start_after = f"{keys.manifest_prefix}{format_offset(position)}"
    for info in manifests.blobs.list(manifests.bucket, keys.manifest_prefix, start_after=start_after):
        span = keys.parse_manifest_key(info.key)
        if span is not None:
            return span[0]
    return None


def cursors_after(ranges: list[PlannedRange]) -> Cursors:
    cursors: Cursors = {}
    for r in ranges:
        parts = cursors.setdefault(cursor_name(r.keys), {})
        parts[r.partition] = max(parts.get(r.partition, 1), r.end_offset + 1)
    return cursors


def decode_ranges(
    s3: S3Config, bucket: str, root: str, on_object: Callable[[int], None] | None = None
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The executor side: rows of work (one manifest each) in, table rows out.

    Each task reads the manifests it was given, then the compacted objects they
    name; ``on_object`` is told the size of every object (a Spark accumulator's ``add``).
    """

    def decode(work: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        blobs = BlobStore(s3)  # per task: clients do not survive pickling
        manifests = ManifestStore(blobs, bucket=bucket, root=root)
        for chunk in work:
            for item in chunk.to_pylist():
                keys = PartitionKeys(item["topic"], item["partition"], root, item["topic_id"])
                manifest = manifests.read(keys, item["manifest_key"])
                data = blobs.get(S3Location.parse(manifest.data_key))
                if on_object is not None:
                    on_object(len(data))
                yield batch_to_arrow(
                    decode_batch(data, expected_count=manifest.record_count),
                    topic=manifest.topic,
                    partition=manifest.partition,
                    first_offset=manifest.start_offset,
                    topic_id=keys.topic_id,
                )

    return decode


def _table_partition(relative_dir: str) -> tuple[str, str]:
    """``topic=orders/date=2026-11-21`` -> ``("orders", "2026-11-21")``."""
    values = dict(part.split("=", 1) for part in relative_dir.split("/"))
    return values["topic"], values["date"]


class Export(ABC):
    """One run against one table: the run lease, plan from the committed cursors, decode, the sink's commit."""

    def __init__(
        self,
        spark: SparkSession,
        options: ExportOptions,
        *,
        blobs: BlobStore | None = None,
        fs: FileSystem | None = None,
        fault_hook: FaultHook | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.spark = spark
        self.options = options
        self.manifests = ManifestStore(
            blobs or BlobStore(options.s3), bucket=options.llog_bucket, root=options.llog_root_prefix
        )
        hadoop = HadoopFileSystem(spark, options.output_path, options.s3)
        self.output = hadoop.qualify(options.output_path).rstrip("/")
        self.fs: FileSystem = fs or hadoop
        self.leases = RunLease(self.fs, self.output, duration_s=options.lease_s, clock=clock)
        self.holder = f"{socket.gethostname()} pid {os.getpid()} run {uuid.uuid4().hex}"
        self._lease: Lease | None = None
        self._fault_hook = fault_hook
        self._seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def _fault(self, point: str) -> None:
        if self._fault_hook is not None:
            self._fault_hook(point)

    def _stage(self, name: str) -> None:
        now = time.perf_counter()
        self._seconds[name] = self._seconds.get(name, 0.0) + now - self._last
        self._last = now
        log.info("stage %s done in %.2f s", name, self._seconds[name])

    @abstractmethod
    def committed_cursors(self) -> tuple[Cursors, str | None]:
        """The cursors of the last commit (finishing an interrupted one first) and that attempt's id, if any."""

    @abstractmethod
    def commit(self, rows: DataFrame, attempt: str, cursors: Cursors) -> int:
        """Write ``rows`` and the new ``cursors`` so that both or neither become visible; returns files written."""

    def _check_lease(self) -> None:
        """Before a commit point: this run still holds its lease, with time to commit (llog_export.lease)."""
        assert self._lease is not None, "a commit outside run()"
        self.leases.check(self._lease)

    def run(self) -> ExportSummary:
        """One run under the table's run lease (``ExportRunning`` if another run holds it).

        A run that fails releases its lease; one that dies (a crash, ``SimulatedCrash`` in the tests)
        leaves it to expire, as a killed process would.
        """
        self._lease = self.leases.acquire(self.holder)
        try:
            summary = self._run()
        except Exception:
            try:
                self.leases.release(self._lease)
            except Exception:  # the run's own failure is the one to report; the lease expires anyway
                log.exception("could not release run lease %d; it expires at %d ms", self._lease.number,
                              self._lease.expires_at_ms)  # fmt: skip
            raise
        self.leases.release(self._lease)
        return summary

    def _run(self) -> ExportSummary:
        cursors, recovered = self.committed_cursors()
        self._stage("recover")
        plan = plan_ranges(self.manifests, cursors, self.options)
        ranges, skipped = plan.ranges, tuple(plan.skipped)
        self._stage("plan")
        if not ranges:
            log.info("nothing to export: every partition is at its last committed compacted range")
            return ExportSummary(None, 0, 0, 0, 0, 0, recovered, self._seconds, skipped)

        attempt = uuid.uuid4().hex
        rows = sum(r.record_count for r in ranges)
        log.info("attempt %s: exporting %d ranges (%d rows)", attempt, len(ranges), rows)
        self._fault(AFTER_PLAN)
        frame, bytes_read = self._decoded(ranges)
        files = self.commit(frame, attempt, merge_cursors(cursors, cursors_after(ranges)))
        summary = ExportSummary(
            attempt,
            len(ranges),
            rows,
            int(bytes_read.value),
            files,
            len({r.keys for r in ranges}),
            recovered,
            self._seconds,
            skipped,
        )
        log.info("%s", summary.describe())
        return summary

    def _decoded(self, ranges: list[PlannedRange]) -> tuple[DataFrame, Accumulator[int]]:
        """The table rows of ``ranges``, decoded on the executors when the frame is written."""
        work = [(r.topic, r.keys.topic_id, r.partition, r.span.start_offset, r.end_offset, r.span.key) for r in ranges]
        # One task per core: each task streams many objects, and a task costs ~0.1 s to start (measured).
        tasks = max(1, min(len(work), self.spark.sparkContext.defaultParallelism))
        bytes_read = self.spark.sparkContext.accumulator(0)
        frame = self.spark.createDataFrame(work, WORK_SCHEMA).repartition(tasks)
        decode = decode_ranges(self.options.s3, self.options.llog_bucket, self.options.llog_root_prefix, bytes_read.add)
        return frame.mapInArrow(decode, SPARK_SCHEMA), bytes_read


class ParquetExport(Export):
    """A Parquet table at ``output_path``, committed with the protocol of :mod:`llog_export.state`."""

    def __init__(
        self,
        spark: SparkSession,
        options: ExportOptions,
        *,
        blobs: BlobStore | None = None,
        fs: FileSystem | None = None,
        fault_hook: FaultHook | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(spark, options, blobs=blobs, fs=fs, fault_hook=fault_hook, clock=clock)
        self.states = StateStore(self.fs, self.output)
        self.catalog = TableCatalog(spark, options.database, options.table, self.output) if options.database else None
        self._state = ExportState()

    def committed_cursors(self) -> tuple[Cursors, str | None]:
        state = self.states.load()
        recovered = None
        if state.pending is not None:
            recovered = state.pending.attempt_id
            log.info("recovering attempt %s: finishing its commit", recovered)
            state = self._finish(state, state.pending)
        else:
            # Anything staged belongs to an attempt that died before its pending state: never visible, drop it.
            self.fs.delete(f"{self.output}/{STAGING_DIR}")
        self._state = state
        return state.cursors, recovered

    def commit(self, rows: DataFrame, attempt: str, cursors: Cursors) -> int:
        staging = self.states.staging(attempt)
        rows.write.mode("errorifexists").partitionBy("topic", "date").parquet(staging)
        self._stage("decode_and_write")
        self._fault(AFTER_STAGING)

        moves, table_partitions = self._plan_moves(staging, attempt)
        pending = PendingAttempt(attempt, tuple(moves), cursors, tuple(table_partitions))
        self._check_lease()  # the pending state is the commit point: from it the attempt rolls forward
        state = self.states.advance(self._state, cursors=self._state.cursors, pending=pending)
        self._fault(AFTER_PENDING)
        self._state = self._finish(state, pending)
        return len(moves)

    def _plan_moves(self, staging: str, attempt: str) -> tuple[list[Move], list[tuple[str, str]]]:
        moves = []
        partitions = set()
        for staged in sorted(self.fs.list_files(staging)):
            relative = staged[len(staging) + 1 :]
            directory, _, name = relative.rpartition("/")
            if not name.endswith(".parquet") or not directory:
                continue  # _SUCCESS and checksum files stay behind
            partitions.add(_table_partition(directory))
            moves.append(Move(staged, f"{self.output}/{directory}/{attempt}-{name}"))
        return moves, sorted(partitions)

    def _finish(self, state: ExportState, pending: PendingAttempt) -> ExportState:
        for move in pending.moves:
            staged, final = self.fs.exists(move.staged), self.fs.exists(move.final)
            if staged and final:
                self.fs.delete(move.staged)  # an object-store rename (copy, delete) died between its steps
            elif staged:
                if not self.fs.rename(move.staged, move.final):
                    raise OSError(f"could not move {move.staged} to {move.final}")
            elif not final:
                raise CorruptMetadata(f"{move.staged} of attempt {pending.attempt_id} vanished before it was moved")
        self._fault(AFTER_MOVES)
        self._stage("move")
        if self.catalog is not None:
            self.catalog.register(pending.table_partitions)
            self._stage("catalog")
        state = self.states.advance(state, cursors=pending.cursors, pending=None)
        self.fs.delete(f"{self.output}/{STAGING_DIR}")  # one attempt at a time: all of it was this one's
        self._stage("commit")
        return state
