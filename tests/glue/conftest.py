"""Real local Spark for the Glue job tests: one session for the whole test run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from llog.config import S3Config
from llog.store.s3 import BlobStore
from llog_export.job import ExportOptions
from llog_export.spark import LocalIceberg, local_spark_session
from tests.conftest import BUCKET
from tests.glue.helpers import CompactedLog

ROOT = Path(__file__).resolve().parents[2]
ICEBERG_JAR = ROOT / ".tools" / "jars" / "iceberg-spark-runtime-4.1_2.13-1.11.0.jar"
ICEBERG_UNAVAILABLE = ROOT / ".tools" / "iceberg-unavailable"


def iceberg_jar() -> Path | None:
    return ICEBERG_JAR if ICEBERG_JAR.is_file() else None


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    # One JVM per run: the Iceberg runtime, when present, has to be on the classpath from the start.
    jar = iceberg_jar()
    iceberg = LocalIceberg(jar, tmp_path_factory.mktemp("iceberg"), catalog="local_iceberg") if jar else None
    session = local_spark_session("llog-export-tests", warehouse=tmp_path_factory.mktemp("warehouse"), iceberg=iceberg)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def output(tmp_path: Path) -> str:
    return str(tmp_path / "table")


@pytest.fixture
def log(blob_store: BlobStore, root: str) -> CompactedLog:
    return CompactedLog(blob_store, root)


@pytest.fixture
def options(s3_config: S3Config, root: str, output: str) -> ExportOptions:
    return ExportOptions(llog_bucket=BUCKET, output_path=output, llog_root_prefix=root, s3=s3_config)


@pytest.fixture
def iceberg_catalog(spark: SparkSession) -> str:
    if iceberg_jar() is None:
        reason = ICEBERG_UNAVAILABLE.read_text().strip() if ICEBERG_UNAVAILABLE.exists() else "run make setup"
        pytest.skip(f"no Iceberg Spark runtime: {reason}")
    return "local_iceberg"
