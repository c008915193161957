"""Job arguments: Glue's ``getResolvedOptions`` on Glue, the same ``--name value`` pairs via argparse locally."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from llog.config import S3Config, env_int
from llog.errors import InvalidArgument
from llog.format.keys import DEFAULT_ROOT_PREFIX, validate_root_prefix, validate_topic
from llog_export.job import ExportOptions
from llog_export.lease import LEASE_MARGIN_S

REQUIRED = ("llog_bucket", "output_path")
OPTIONAL: Mapping[str, str] = {
    "llog_root_prefix": f"root prefix of llog's keys (default {DEFAULT_ROOT_PREFIX})",
    "topics": "comma-separated topics, or * for every topic (default *)",
    "database": "catalog database to register the table in (default: none)",
    "table": "table name (default records)",
    "table_format": "parquet or iceberg (default parquet)",
    "s3_endpoint_url": "S3 endpoint for llog's bucket, for S3-compatible servers (default: AWS)",
    "max_ranges_per_run": "compacted ranges per run at most (default 100000)",
    "lease_minutes": "a run's lease on the table; a crashed run blocks the next one this long (default 60)",
}
TABLE_FORMATS = ("parquet", "iceberg")


@dataclass(frozen=True)
class JobArguments:
    options: ExportOptions
    table_format: str
    job_name: str | None


def on_glue() -> bool:
    try:
        import awsglue  # noqa: F401  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return False
    return True


def _resolve(argv: Sequence[str]) -> dict[str, str | None]:
    if on_glue():
        from awsglue.utils import getResolvedOptions  # type: ignore[import-not-found, unused-ignore]

        # getResolvedOptions fails on a missing name: ask only for the optional ones that were given.
        given = [name for name in OPTIONAL if f"--{name}" in argv]
        resolved: dict[str, str | None] = dict(getResolvedOptions(list(argv), ["JOB_NAME", *REQUIRED, *given]))
        return resolved
    parser = argparse.ArgumentParser(prog="export_job.py", description="Export llog's compacted ranges to a table.")
    for name in REQUIRED:
        parser.add_argument(f"--{name}", required=True)
    for name, help_text in OPTIONAL.items():
        parser.add_argument(f"--{name}", help=help_text)
    parser.add_argument("--JOB_NAME")
    return vars(parser.parse_args(list(argv[1:])))


def parse_arguments(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> JobArguments:
    argv = list(sys.argv if argv is None else argv)
    env = os.environ if env is None else env
    args = _resolve(argv)
    topics = tuple(t.strip() for t in (args.get("topics") or "*").split(",") if t.strip() and t.strip() != "*")
    for topic in topics:
        validate_topic(topic)
    table_format = args.get("table_format") or "parquet"
    if table_format not in TABLE_FORMATS:
        raise InvalidArgument(f"--table_format must be one of {', '.join(TABLE_FORMATS)}, not {table_format!r}")
    s3 = S3Config.from_env(env)
    if args.get("s3_endpoint_url"):
        s3 = replace(s3, endpoint_url=args["s3_endpoint_url"])
    given = {name: value for name, value in args.items() if value is not None}
    max_ranges = env_int(given, "max_ranges_per_run", ExportOptions.max_ranges_per_run, minimum=1)
    # A lease shorter than the margin a commit needs would refuse every commit.
    lease_minutes = env_int(given, "lease_minutes", int(ExportOptions.lease_s) // 60, minimum=LEASE_MARGIN_S // 60 + 1)
    options = ExportOptions(
        llog_bucket=str(args["llog_bucket"]),
        output_path=str(args["output_path"]),
        llog_root_prefix=validate_root_prefix(args.get("llog_root_prefix") or DEFAULT_ROOT_PREFIX),
        topics=topics,
        database=args.get("database") or None,
        table=args.get("table") or "records",
        s3=s3,
        max_ranges_per_run=max_ranges,
        lease_s=lease_minutes * 60.0,
    )
    return JobArguments(options, table_format, args.get("JOB_NAME"))
