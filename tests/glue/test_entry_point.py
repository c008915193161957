"""glue_jobs/export_job.py as Glue would start it, with the same --name value arguments (local argparse path)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from llog.config import S3Config
from llog.errors import InvalidArgument
from llog_export.options import parse_arguments
from tests.conftest import BUCKET
from tests.glue.helpers import DAY1, CompactedLog, frame_rows, in_order, record

JOB = Path(__file__).resolve().parents[2] / "glue_jobs" / "export_job.py"


def test_the_entry_point_runs_the_export_and_prints_a_summary(
    spark: SparkSession, log: CompactedLog, s3_config: S3Config, root: str, output: str
) -> None:
    log.compact("orders", 0, [record(i, DAY1) for i in range(5)])
    env = {
        **os.environ,
        "LLOG_S3_ENDPOINT_URL": str(s3_config.endpoint_url),
        "LLOG_S3_REGION_NAME": str(s3_config.region_name),
        "LLOG_S3_ACCESS_KEY_ID": str(s3_config.access_key_id),
        "LLOG_S3_SECRET_ACCESS_KEY": str(s3_config.secret_access_key),
    }
    args = ["--JOB_NAME", "t", "--llog_bucket", BUCKET, "--llog_root_prefix", root, "--output_path", output,
            "--topics", "orders"]  # fmt: skip
    done = subprocess.run([sys.executable, str(JOB), *args], env=env, capture_output=True, text=True, timeout=240)

    assert done.returncode == 0, done.stderr[-3000:]
    [line] = [line for line in done.stdout.splitlines() if "llog_export_summary" in line]
    summary = json.loads(line)["llog_export_summary"]
    assert (summary["ranges"], summary["rows"]) == (1, 5)
    assert "exported 5 rows" in done.stderr  # the progress log
    assert frame_rows(spark.read.parquet(output)) == in_order(log.expected)


def test_arguments_are_validated_with_messages_that_name_them() -> None:
    base = ["job", "--llog_bucket", "b", "--output_path", "/tmp/x"]
    parsed = parse_arguments([*base, "--topics", "a, b,*", "--max_ranges_per_run", "7"], env={})
    assert (parsed.options.topics, parsed.options.max_ranges_per_run, parsed.table_format) == (("a", "b"), 7, "parquet")
    assert parse_arguments(base, env={}).options.topics == ()  # every topic
    with pytest.raises(InvalidArgument, match="table_format"):
        parse_arguments([*base, "--table_format", "csv"], env={})
    with pytest.raises(InvalidArgument, match="topic"):
        parse_arguments([*base, "--topics", "bad/topic"], env={})
    with pytest.raises(Exception, match="max_ranges_per_run"):
        parse_arguments([*base, "--max_ranges_per_run", "0"], env={})
    with pytest.raises(SystemExit):
        parse_arguments(["job", "--output_path", "/tmp/x"], env={})  # --llog_bucket is required


def test_the_job_imports_without_the_packages_glue_does_not_have() -> None:
    """Glue gets llog, llog_export, crc32c and msgspec only: no Oxia client, gRPC or Powertools."""
    code = """
import importlib.abc, sys
class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"oxia", "grpc", "betterproto2", "aws_lambda_powertools", "moto", "google_crc32c"}:
            raise ImportError(f"{name} is not installed on Glue")
        return None
sys.meta_path.insert(0, Missing())
import llog_export.runner, llog_export.iceberg
print("ok")
"""
    env = {**os.environ, "PYTHONPATH": str(JOB.parent)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
