"""The export job on real local Spark and moto S3: rows, exactly-once commits, crashes, the catalog."""

from __future__ import annotations

import dataclasses
import time
import uuid
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from llog.config import S3Config
from llog.errors import LlogError
from llog.format.codec import Record, encode_batch
from llog.format.keys import PartitionKeys, S3Location
from llog.store.s3 import BlobStore
from llog_export.hadoop_fs import HadoopFileSystem
from llog_export.job import (
    AFTER_MOVES,
    AFTER_PENDING,
    AFTER_STAGING,
    EXPIRED,
    LOST,
    ExportOptions,
    ParquetExport,
    SkippedRange,
)
from llog_export.lease import ExportRunning, LeaseExpired
from llog_export.metrics import metric_data
from llog_export.runner import run_export
from llog_export.state import STATE_DIR
from tests.conftest import BUCKET
from tests.faults import SimulatedCrash, crash_at
from tests.glue.helpers import DAY1, DAY2, CompactedLog, Row, frame_rows, in_order, record


def table_rows(spark: SparkSession, output: str) -> list[Row]:
    return frame_rows(spark.read.parquet(output)) if data_files(output) else []


def after_the_lease(options: ExportOptions) -> float:
    """The clock of a run that starts once a crashed run's lease has expired."""
    return time.time() + options.lease_s + 1


def data_files(output: str) -> list[Path]:
    return sorted(p for p in Path(output).rglob("*.parquet") if not any(part.startswith("_") for part in p.parts))


def test_the_export_holds_every_committed_record_once_with_all_fields(
    spark: SparkSession, log: CompactedLog, options: ExportOptions, output: str
) -> None:
    log.compact("orders", 0, [record(i, DAY1) for i in range(7)])
    log.compact("orders", 0, [record(i, DAY2) for i in range(7, 12)])
    log.compact("orders", 1, [record(i, DAY2) for i in range(3)])
    log.compact("payments", 0, [Record(b"", key=b"", timestamp_ms=DAY1), Record(b"\x00" * 1000, timestamp_ms=DAY2)])

    summary = run_export(spark, options)

    assert (summary.ranges, summary.rows, summary.partitions) == (4, 17, 3)
    assert table_rows(spark, output) == in_order(log.expected)
    # partitioned by topic and UTC date of the record timestamp
    directories = {p.parent.relative_to(output).as_posix() for p in data_files(output)}
    assert directories == {
        "topic=orders/date=2026-11-20",
        "topic=orders/date=2026-11-21",
        "topic=payments/date=2026-11-20",
        "topic=payments/date=2026-11-21",
    }


def test_orphaned_objects_and_unfinished_compactions_are_not_exported(
    spark: SparkSession, log: CompactedLog, options: ExportOptions, output: str
) -> None:
    log.compact("orders", 0, [record(i, DAY1) for i in range(5)])
    in_flight_records = [record(i, DAY1) for i in range(5, 8)]
    # committed, its manifest not yet published; no later range is compacted until it is (docs/PROTOCOL.md)
    in_flight = log.compact("orders", 0, in_flight_records, commit=False)
    # an orphan: a crashed compaction's object covering the same offsets, with no manifest
    orphan = S3Location(BUCKET, PartitionKeys("orders", 0, options.llog_root_prefix).compacted_object_key())
    log.blobs.put(orphan, encode_batch([b"orphan"] * 5))

    first = run_export(spark, options)
    assert (first.ranges, first.rows) == (1, 5)
    assert [row[2] for row in table_rows(spark, output)] == [1, 2, 3, 4, 5]

    assert first.skipped == ()  # waiting for the range in flight, not skipping it
    log.publish(in_flight, in_flight_records)  # the compaction finishes
    log.compact("orders", 0, [record(i, DAY1) for i in range(8, 10)])
    second = run_export(spark, options)
    assert (second.ranges, second.rows) == (2, 5)
    assert table_rows(spark, output) == in_order(log.expected)
    assert b"orphan" not in {row[5] for row in table_rows(spark, output)}


def test_a_rerun_without_new_ranges_writes_nothing_and_a_later_one_exports_only_the_new_ranges(
    spark: SparkSession, log: CompactedLog, options: ExportOptions, output: str
) -> None:
    log.compact("orders", 0, [record(i, DAY1) for i in range(4)])
    run_export(spark, options)

    def table_and_state() -> dict[Path, int]:  # every file but the run leases each run takes
        return {p: p.stat().st_mtime_ns for p in Path(output).rglob("*") if p.is_file() and "lease-" not in p.name}

    files_before = table_and_state()
    idle = run_export(spark, options)

    assert (idle.attempt_id, idle.ranges, idle.rows) == (None, 0, 0)
    assert table_and_state() == files_before

    log.compact("orders", 0, [record(i, DAY2) for i in range(4, 6)])
    log.compact("orders", 2, [record(0, DAY2)])
    more = run_export(spark, options)
    assert (more.ranges, more.rows) == (2, 3)
    assert table_rows(spark, output) == in_order(log.expected)


@pytest.mark.parametrize("point", [AFTER_STAGING, AFTER_PENDING, AFTER_MOVES])
def test_a_crash_at_any_step_of_the_commit_neither_duplicates_nor_loses_rows(
    spark: SparkSession, log: CompactedLog, options: ExportOptions, output: str, point: str
) -> None:
    log.compact("orders", 0, [record(i, DAY1) for i in range(6)])
    log.compact("orders", 1, [record(i, DAY2) for i in range(3)])
    with pytest.raises(SimulatedCrash):
        ParquetExport(spark, options, fault_hook=crash_at(point)).run()

    # before the crash point only _-prefixed (invisible) paths may hold the rows
    visible = table_rows(spark, output)
    assert visible == ([] if point != AFTER_MOVES else in_order(log.expected))

    with pytest.raises(ExportRunning):  # the crashed run's lease holds until it expires
        ParquetExport(spark, options).run()
    rerun = ParquetExport(spark, options, clock=lambda: after_the_lease(options)).run()

    assert rerun.recovered_attempt is not None if point != AFTER_STAGING else rerun.recovered_attempt is None
    assert table_rows(spark, output) == in_order(log.expected)
    assert not (Path(output) / "_llog_staging").exists()
    assert run_export(spark, options).rows == 0


def test_the_table_is_registered_and_queryable_with_spark_sql(
    spark: SparkSession, log: CompactedLog, options: ExportOptions, output: str
) -> None:
    log.compact("orders", 0, [record(i, DAY1) for i in range(3)])
    log.compact("orders", 0, [record(i, DAY2) for i in range(3, 5)])
    database = f"llog_{uuid.uuid4().hex[:8]}"
    catalogued = dataclasses.replace(options, database=database, table="records")

    run_export(spark, catalogued)

    partitions = sorted(r[0] for r in spark.sql(f"SHOW PARTITIONS {database}.records").collect())
    assert partitions == ["topic=orders/date=2026-11-20", "topic=orders/date=2026-11-21"]
    counted = spark.sql(
        f"SELECT `date`, count(*) AS n, max(`offset`) AS last FROM {database}.records "
        "WHERE topic = 'orders' GROUP BY `date` ORDER BY `date`"
    ).collect()
    assert [(r["date"], r["n"], r["last"]) for r in counted] == [("2026-11-20", 3, 3), ("2026-11-21", 2, 5)]

    log.compact("orders", 0, [record(5, DAY2 + 86_400_000)])
    run_export(spark, catalogued)
    assert spark.sql(f"SELECT count(*) FROM {database}.records").collect()[0][0] == 6


def test_the_state_records_each_partitions_cursor(
    spark: SparkSession, log: CompactedLog, options: ExportOptions, output: str
) -> None:
    log.compact("orders", 0, [record(i, DAY1) for i in range(4)])
    log.compact("orders", 3, [record(i, DAY1) for i in range(2)])
    export = ParquetExport(spark, options)
    export.run()
    state = export.states.load()
    assert state.cursors == {"orders": {0: 5, 3: 3}}
    assert state.pending is None
    assert any(p.name.startswith("state-") for p in (Path(output) / STATE_DIR).iterdir())


def test_the_summary_counts_the_compacted_bytes_read(
    spark: SparkSession, log: CompactedLog, options: ExportOptions
) -> None:
    first = log.compact("orders", 0, [record(i, DAY1) for i in range(4)])
    size = len(log.blobs.get(S3Location.parse(first.data_key)))
    summary = run_export(spark, options)
    assert (summary.bytes_read, summary.files) == (size, 1)
    assert "exported 4 rows" in summary.describe()


def test_ranges_retention_removed_before_export_are_skipped_with_a_warning(
    spark: SparkSession, log: CompactedLog, options: ExportOptions, caplog: pytest.LogCaptureFixture
) -> None:
    expired = log.compact("orders", 0, [record(i, DAY1) for i in range(4)])
    log.compact("orders", 0, [record(i, DAY2) for i in range(4, 6)])
    # what retention does: publish the new log start, then delete the removed range's manifest
    keys = PartitionKeys("orders", 0, options.llog_root_prefix)
    log.manifests.publish_log_start(keys, expired.end_offset + 1)
    log.manifests.delete(keys, [(expired.start_offset, expired.end_offset)])

    with caplog.at_level("WARNING", logger="llog_export"):
        summary = run_export(spark, options)

    assert (summary.ranges, summary.rows) == (1, 2)
    assert "offsets 1-4 expired before export" in caplog.text
    assert summary.skipped == (SkippedRange("orders", 0, 1, 4, EXPIRED),)
    assert [row[2] for row in table_rows(spark, options.output_path)] == [5, 6]


def test_a_topic_created_again_is_exported_from_its_first_offset_under_cursors_of_its_own(
    spark: SparkSession, log: CompactedLog, options: ExportOptions
) -> None:
    log.compact("orders", 0, [record(i, DAY1) for i in range(4)])  # the legacy folder: offsets 1-4
    assert run_export(spark, options).rows == 4
    topic_id = str(uuid.uuid4())  # the name deleted and created again: its partitions in the folder of its id
    log.compact("orders", 0, [record(i, DAY2) for i in range(10, 12)], topic_id=topic_id)

    summary = run_export(spark, options)

    assert (summary.ranges, summary.rows) == (1, 2)
    assert sorted(row[2] for row in table_rows(spark, options.output_path)) == [1, 1, 2, 2, 3, 4]
    assert run_export(spark, options).rows == 0  # both incarnations' cursors are committed


def test_a_run_started_while_another_runs_is_refused_naming_the_holder_and_no_row_is_lost(
    spark: SparkSession, log: CompactedLog, options: ExportOptions, output: str
) -> None:
    log.compact("orders", 0, [record(i, DAY1) for i in range(6)])
    log.compact("orders", 1, [record(i, DAY2) for i in range(3)])
    second: list[BaseException] = []

    def start_a_second_run(point: str) -> None:
        # The first run is paused with its files staged; a second run starts and dies after staging its own.
        if point == AFTER_STAGING:
            try:
                ParquetExport(spark, options, fault_hook=crash_at(AFTER_STAGING)).run()
            except (SimulatedCrash, LlogError) as exc:
                second.append(exc)

    first = ParquetExport(spark, options, fault_hook=start_a_second_run)
    first.run()

    assert table_rows(spark, output) == in_order(log.expected)
    [refused] = second
    assert isinstance(refused, ExportRunning)
    assert first.holder in str(refused)
    assert run_export(spark, options).rows == 0


def test_a_run_that_outlived_its_lease_commits_nothing_and_the_next_run_exports_every_row_once(
    spark: SparkSession, log: CompactedLog, options: ExportOptions, output: str
) -> None:
    log.compact("orders", 0, [record(i, DAY1) for i in range(5)])
    now = [time.time()]

    def pause_past_the_lease(point: str) -> None:
        if point == AFTER_STAGING:
            now[0] += options.lease_s

    with pytest.raises(LeaseExpired):
        ParquetExport(spark, options, fault_hook=pause_past_the_lease, clock=lambda: now[0]).run()

    assert table_rows(spark, output) == []
    assert run_export(spark, options).rows == 5  # the failed run released its lease
    assert table_rows(spark, output) == in_order(log.expected)


def test_a_lost_range_is_skipped_with_its_exact_bounds_and_the_ranges_around_it_are_exported(
    spark: SparkSession, log: CompactedLog, options: ExportOptions, caplog: pytest.LogCaptureFixture
) -> None:
    log.compact("orders", 0, [record(i, DAY1) for i in range(4)])
    lost = log.lose("orders", 0, 5)  # offsets a rebuild could not recover: no object, no manifest, ever
    log.compact("orders", 0, [record(i, DAY2) for i in range(9, 12)])  # compaction went on past it
    log.compact("orders", 1, [record(i, DAY2) for i in range(2)])

    with caplog.at_level("WARNING", logger="llog_export"):
        summary = run_export(spark, options)

    assert lost == (5, 9)
    assert summary.skipped == (SkippedRange("orders", 0, 5, 9, LOST),)
    assert "orders/0: offsets 5-9 lost before export" in caplog.text
    assert "skipped 5 lost offsets" in summary.describe()
    assert (summary.ranges, summary.rows) == (3, 9)
    assert table_rows(spark, options.output_path) == in_order(log.expected)
    # retention later passes the lost range: nothing that was compacted after it is missing
    keys = PartitionKeys("orders", 0, options.llog_root_prefix)
    log.manifests.publish_log_start(keys, 13)
    log.compact("orders", 0, [record(i, DAY2) for i in range(12, 14)])
    assert run_export(spark, options).skipped == ()
    assert table_rows(spark, options.output_path) == in_order(log.expected)


def test_each_run_puts_its_lost_and_expired_offsets_as_metrics_the_alarms_watch() -> None:
    assert metric_data(lost_offsets=5, expired_offsets=0) == [
        {"MetricName": "ExportLostOffsets", "Dimensions": [{"Name": "service", "Value": "export"}], "Value": 5.0,
         "Unit": "Count"},
        {"MetricName": "ExportExpiredOffsets", "Dimensions": [{"Name": "service", "Value": "export"}], "Value": 0.0,
         "Unit": "Count"},
    ]  # fmt: skip


def test_create_new_is_create_only_on_s3_and_in_a_local_folder(
    spark: SparkSession, s3_config: S3Config, blob_store: BlobStore, root: str, output: str
) -> None:
    fs = HadoopFileSystem(spark, output, s3_config)
    local = f"{fs.qualify(output)}/_llog_export/lease"
    on_s3 = S3Location(BUCKET, f"{root}/lease")
    for uri in (on_s3.uri, local):
        assert fs.create_new(uri, b"first") is True
        assert fs.create_new(uri, b"second") is False
    assert fs.read_bytes(local) == blob_store.get(on_s3) == b"first"
