"""Run Spark SQL over the table `make glue-local` wrote: the Parquet folder is the view ``records``.

    .venv/bin/python scripts/spark_sql.py "SELECT topic, date, count(*) FROM records GROUP BY topic, date"
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "glue_jobs"))

from llog_export.spark import local_spark_session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sql", help="a query over the view `records`")
    parser.add_argument("--table-path", default=".dev/tables/records", help="the export's --output_path")
    parser.add_argument("--rows", type=int, default=50, help="rows to show")
    args = parser.parse_args(argv)
    if not Path(args.table_path).is_dir():
        parser.error(f"{args.table_path} does not exist: run `make glue-local` first")
    spark = local_spark_session("llog-sql")
    try:
        spark.read.parquet(args.table_path).createOrReplaceTempView("records")
        spark.sql(args.sql).show(args.rows, truncate=False)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
