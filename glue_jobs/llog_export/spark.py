"""A local Spark session that behaves like the job's Glue session where it matters."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

GLUE_JOBS_DIR = Path(__file__).resolve().parents[1]

# Timestamps are instants; showing and partitioning them in UTC keeps dates stable across machines.
SESSION_CONF = {"spark.sql.session.timeZone": "UTC"}


@dataclass(frozen=True)
class LocalIceberg:
    """Iceberg for a local session: the runtime jar and a file-system (Hadoop) catalog."""

    jar: Path
    warehouse: Path
    catalog: str = "glue_catalog"  # the job's default catalog name; on Glue it is the Glue Data Catalog

    def conf(self) -> dict[str, str]:
        prefix = f"spark.sql.catalog.{self.catalog}"
        return {
            "spark.jars": str(self.jar),
            "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
            prefix: "org.apache.iceberg.spark.SparkCatalog",
            f"{prefix}.type": "hadoop",
            f"{prefix}.warehouse": self.warehouse.resolve().as_uri(),
        }


def local_spark_session(
    app_name: str,
    *,
    master: str = "local[2]",
    warehouse: str | Path | None = None,
    iceberg: LocalIceberg | None = None,
) -> SparkSession:
    """``pyspark`` in local mode, with Python workers that can import ``llog`` and ``llog_export``."""
    # Workers are new interpreters: the same one as the driver, with this package on their path.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(GLUE_JOBS_DIR) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(GLUE_JOBS_DIR), *paths])
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
    )
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    if warehouse is not None:
        builder = builder.config("spark.sql.warehouse.dir", str(warehouse))
    for key, value in (iceberg.conf() if iceberg else {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
