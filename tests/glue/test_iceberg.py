"""The export into an Iceberg table (Iceberg 1.11's Spark runtime, a local file-system catalog)."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from pyspark.sql import SparkSession

from llog.format.codec import encode_batch
from llog.format.keys import S3Location
from llog_export.catalog import COLUMNS
from llog_export.iceberg import CURSORS_PROPERTY, IcebergExport
from llog_export.job import AFTER_PLAN, ExportOptions
from llog_export.lease import ExportRunning
from tests.glue.helpers import DAY1, DAY2, CompactedLog, frame_rows, in_order, record


@pytest.fixture
def iceberg_options(options: ExportOptions) -> ExportOptions:
    return dataclasses.replace(options, database=f"db_{uuid.uuid4().hex[:8]}", table="records")


def snapshots(spark: SparkSession, table: str) -> list[dict[str, str]]:
    return [dict(r["summary"]) for r in spark.sql(f"SELECT summary FROM {table}.snapshots").collect()]


def test_rows_and_cursors_commit_in_one_snapshot_and_reruns_export_only_new_ranges(
    spark: SparkSession, iceberg_catalog: str, log: CompactedLog, iceberg_options: ExportOptions
) -> None:
    table = f"{iceberg_catalog}.{iceberg_options.database}.records"
    log.compact("orders", 0, [record(i, DAY1) for i in range(6)])
    log.compact("orders", 1, [record(i, DAY2) for i in range(4)])

    first = IcebergExport(spark, iceberg_options, catalog=iceberg_catalog).run()

    assert (first.ranges, first.rows, first.files >= 1) == (2, 10, True)
    assert frame_rows(spark.table(table)) == in_order(log.expected)
    [summary] = snapshots(spark, table)
    assert summary[CURSORS_PROPERTY] == '{"orders": {"0": 7, "1": 5}}'

    idle = IcebergExport(spark, iceberg_options, catalog=iceberg_catalog).run()
    assert (idle.attempt_id, idle.rows) == (None, 0)
    assert len(snapshots(spark, table)) == 1  # nothing committed

    log.compact("orders", 0, [record(i, DAY2) for i in range(6, 9)])
    more = IcebergExport(spark, iceberg_options, catalog=iceberg_catalog).run()
    assert (more.ranges, more.rows) == (1, 3)
    assert frame_rows(spark.table(table)) == in_order(log.expected)
    partitions = spark.sql(f"SELECT partition.topic, partition.date FROM {table}.partitions").collect()
    assert sorted((r[0], r[1]) for r in partitions) == [("orders", "2026-11-20"), ("orders", "2026-11-21")]


def test_a_run_that_fails_mid_write_commits_nothing_and_the_rerun_exports_each_row_once(
    spark: SparkSession, iceberg_catalog: str, log: CompactedLog, iceberg_options: ExportOptions
) -> None:
    table = f"{iceberg_catalog}.{iceberg_options.database}.records"
    log.compact("orders", 0, [record(i, DAY1) for i in range(5)])
    good = [record(i, DAY1) for i in range(5, 9)]
    damaged = log.compact("orders", 0, good)
    location = S3Location.parse(damaged.data_key)
    log.blobs.put(location, encode_batch(good)[:-1] + b"\xff")  # a corrupt object: its task fails

    with pytest.raises(Exception, match="checksum"):
        IcebergExport(spark, iceberg_options, catalog=iceberg_catalog).run()
    assert spark.table(table).count() == 0  # the rows of the healthy range were not committed alone

    log.blobs.put(location, encode_batch(good))  # repaired
    IcebergExport(spark, iceberg_options, catalog=iceberg_catalog).run()
    assert frame_rows(spark.table(table)) == in_order(log.expected)


def maintain(spark: SparkSession, catalog: str, options: ExportOptions) -> None:
    """What Glue's table optimizers (and ANALYTICS.md's advice) do: compact the files, then keep one snapshot."""
    name = f"{options.database}.{options.table}"
    spark.sql(f"CALL {catalog}.system.rewrite_data_files(table => '{name}', options => map('min-input-files', '1'))")
    spark.sql(
        f"CALL {catalog}.system.expire_snapshots(table => '{name}', "
        "older_than => TIMESTAMP '9999-01-01 00:00:00', retain_last => 1)"
    )


def test_cursors_survive_rewrite_data_files_and_expire_snapshots_keeping_one_no_row_twice_or_missing(
    spark: SparkSession, iceberg_catalog: str, log: CompactedLog, iceberg_options: ExportOptions
) -> None:
    table = f"{iceberg_catalog}.{iceberg_options.database}.records"
    created_again = str(uuid.uuid4())  # the name deleted and created again: offsets from 1 in its id's folder
    log.compact("orders", 0, [record(i, DAY1) for i in range(4)])
    log.compact("orders", 1, [record(i, DAY1) for i in range(3)])
    log.compact("orders", 0, [record(i, DAY2) for i in range(20, 22)], topic_id=created_again)
    IcebergExport(spark, iceberg_options, catalog=iceberg_catalog).run()
    log.compact("orders", 0, [record(i, DAY2) for i in range(4, 6)])
    IcebergExport(spark, iceberg_options, catalog=iceberg_catalog).run()

    maintain(spark, iceberg_catalog, iceberg_options)
    assert not any(CURSORS_PROPERTY in s for s in snapshots(spark, table))  # no snapshot carries cursors now

    log.compact("orders", 0, [record(i, DAY2) for i in range(6, 9)])
    log.compact("orders", 0, [record(i, DAY2) for i in range(22, 23)], topic_id=created_again)
    third = IcebergExport(spark, iceberg_options, catalog=iceberg_catalog).run()

    assert (third.ranges, third.rows) == (2, 4)
    assert sorted(map(repr, frame_rows(spark.table(table)))) == sorted(map(repr, log.expected))
    assert IcebergExport(spark, iceberg_options, catalog=iceberg_catalog).run().rows == 0


def test_a_run_started_while_another_runs_is_refused_and_no_range_is_appended_twice(
    spark: SparkSession, iceberg_catalog: str, log: CompactedLog, iceberg_options: ExportOptions
) -> None:
    table = f"{iceberg_catalog}.{iceberg_options.database}.records"
    log.compact("orders", 0, [record(i, DAY1) for i in range(5)])
    second: list[Exception] = []

    def start_a_second_run(point: str) -> None:
        if point == AFTER_PLAN:  # the first run has planned its ranges and not appended them yet
            try:
                IcebergExport(spark, iceberg_options, catalog=iceberg_catalog).run()
            except ExportRunning as exc:
                second.append(exc)

    first = IcebergExport(spark, iceberg_options, catalog=iceberg_catalog, fault_hook=start_a_second_run)
    first.run()

    assert frame_rows(spark.table(table)) == in_order(log.expected)
    [refused] = second
    assert first.holder in str(refused)


def test_a_table_created_before_the_topic_id_column_gets_it_and_its_earlier_rows_stay(
    spark: SparkSession, iceberg_catalog: str, log: CompactedLog, iceberg_options: ExportOptions
) -> None:
    table = f"{iceberg_catalog}.{iceberg_options.database}.records"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {iceberg_catalog}.{iceberg_options.database}")
    before = COLUMNS.replace("`topic_id` STRING, ", "")
    spark.sql(f"CREATE TABLE {table} ({before}) USING iceberg PARTITIONED BY (`topic`, `date`)")
    spark.sql(f"INSERT INTO {table} SELECT 0, 1, NULL, NULL, X'00', array(), 'older', '2026-11-20'")
    log.compact("orders", 0, [record(i, DAY1) for i in range(3)], topic_id=str(uuid.uuid4()))

    assert IcebergExport(spark, iceberg_options, catalog=iceberg_catalog).run().rows == 3

    rows = spark.sql(f"SELECT topic, topic_id FROM {table}").collect()
    assert sorted((r["topic"], r["topic_id"] is None) for r in rows) == [("older", True)] + [("orders", False)] * 3
