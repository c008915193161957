"""The exported table in the session's catalog (the Glue Data Catalog on Glue).

Spark SQL DDL works against whatever catalog the session has: the Glue Data
Catalog when the job runs with ``--enable-glue-datacatalog``, an in-memory (or
Hive) catalog locally. Partitions are added explicitly (no directory crawl), so
Athena sees exactly the partitions whose files are committed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pyspark.sql import SparkSession

from llog.errors import InvalidArgument

COLUMNS = (
    "`partition` INT, `offset` BIGINT, `timestamp` TIMESTAMP, `key` BINARY, `value` BINARY, "
    "`headers` ARRAY<STRUCT<name: STRING, value: BINARY>>, `topic_id` STRING, `topic` STRING, `date` STRING"
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")
_PARTITION_VALUE = re.compile(r"[A-Za-z0-9._-]{1,249}")  # topic names and yyyy-MM-dd dates
ADD_PARTITIONS_CHUNK = 100


def add_topic_id_column(spark: SparkSession, table: str) -> None:
    """Give a table created before the ``topic_id`` column that column (NULL in its earlier rows)."""
    if "topic_id" not in spark.table(table).columns:
        spark.sql(f"ALTER TABLE {table} ADD COLUMNS (`topic_id` STRING)")


def _identifier(name: str, what: str) -> str:
    if not _IDENTIFIER.fullmatch(name):
        raise InvalidArgument(f"invalid {what} name {name!r}: letters, digits and _ only")
    return f"`{name}`"


class TableCatalog:
    def __init__(self, spark: SparkSession, database: str, table: str, location: str) -> None:
        self.spark = spark
        self.database = _identifier(database, "database")
        self.table = f"{self.database}.{_identifier(table, 'table')}"
        self.location = location
        self._created = False

    def ensure_table(self) -> None:
        if self._created:
            return
        self.spark.sql(f"CREATE DATABASE IF NOT EXISTS {self.database}")
        self.spark.sql(
            f"CREATE TABLE IF NOT EXISTS {self.table} ({COLUMNS}) USING PARQUET "
            f"PARTITIONED BY (`topic`, `date`) LOCATION '{self.location}'"
        )
        add_topic_id_column(self.spark, self.table)
        self._created = True

    def register(self, partitions: Iterable[tuple[str, str]]) -> None:
        """Add ``(topic, date)`` partitions; ones that exist already are left alone."""
        self.ensure_table()
        specs = []
        for topic, date in sorted(set(partitions)):
            if not (_PARTITION_VALUE.fullmatch(topic) and _PARTITION_VALUE.fullmatch(date)):
                raise InvalidArgument(f"invalid table partition topic={topic!r} date={date!r}")
            specs.append(f"PARTITION (`topic` = '{topic}', `date` = '{date}')")
        for start in range(0, len(specs), ADD_PARTITIONS_CHUNK):
            chunk = " ".join(specs[start : start + ADD_PARTITIONS_CHUNK])
            self.spark.sql(f"ALTER TABLE {self.table} ADD IF NOT EXISTS {chunk}")
