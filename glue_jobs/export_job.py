"""Glue job: export llog's committed compacted ranges to a Parquet (or Iceberg) table.

On AWS Glue 6.0 (Spark 4.1, Python 3.13) the arguments come through
``getResolvedOptions``; locally the same ``--name value`` pairs go through
argparse (``make glue-local``). Everything but the wiring lives in ``llog_export``.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # local runs: llog_export sits next to this file

from llog_export.runner import run_job

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.exit(run_job(sys.argv))
