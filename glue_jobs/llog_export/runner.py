"""The job's wiring: arguments, a Spark session (Glue's or a local one), one export run, a summary."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from pyspark.sql import SparkSession

from llog.errors import ConfigurationError
from llog_export.iceberg import IcebergExport
from llog_export.job import EXPIRED, LOST, Export, ExportOptions, ExportSummary, ParquetExport
from llog_export.metrics import put_metrics
from llog_export.options import JobArguments, on_glue, parse_arguments
from llog_export.spark import SESSION_CONF, LocalIceberg, local_spark_session

log = logging.getLogger("llog_export")


def _local_iceberg(arguments: JobArguments, env: Mapping[str, str]) -> LocalIceberg | None:
    if arguments.table_format != "iceberg":
        return None
    jar = env.get("LLOG_ICEBERG_JAR")
    if not jar:
        raise ConfigurationError("a local Iceberg export needs LLOG_ICEBERG_JAR (make glue-local sets it)")
    return LocalIceberg(Path(jar), Path(arguments.options.output_path))


def _session(arguments: JobArguments) -> tuple[SparkSession, Callable[[], None]]:
    if not on_glue():
        iceberg = _local_iceberg(arguments, os.environ)
        spark = local_spark_session(arguments.job_name or "llog-export", iceberg=iceberg)
        return spark, spark.stop
    from awsglue.context import GlueContext  # type: ignore[import-not-found, unused-ignore]
    from awsglue.job import Job  # type: ignore[import-not-found, unused-ignore]
    from pyspark import SparkContext

    glue = GlueContext(SparkContext.getOrCreate())
    spark = glue.spark_session
    for key, value in SESSION_CONF.items():
        spark.conf.set(key, value)
    job = Job(glue)
    job.init(arguments.job_name, {"JOB_NAME": arguments.job_name})
    return spark, job.commit


def run_export(spark: SparkSession, options: ExportOptions, table_format: str = "parquet") -> ExportSummary:
    export: Export = IcebergExport(spark, options) if table_format == "iceberg" else ParquetExport(spark, options)
    return export.run()


def run_job(argv: Sequence[str]) -> int:
    arguments = parse_arguments(argv)
    spark, finish = _session(arguments)
    summary = run_export(spark, arguments.options, arguments.table_format)
    # One machine-readable line for log queries (CloudWatch Logs Insights: filter @message like "llog_export_summary").
    print(json.dumps({"llog_export_summary": asdict(summary)}, sort_keys=True))
    if on_glue():
        put_metrics(summary.skipped_offsets(LOST), summary.skipped_offsets(EXPIRED))
    finish()
    return 0
