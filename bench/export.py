"""Export benchmark: the Glue job's transform per core, and the local job end to end.

Transform (one process, one core): compacted objects of 1 KiB records, written
to files on disk, are turned into Arrow record batches by the job's executor
code (``decode_batch`` + ``batch_to_arrow``), next to the baseline of only
reading the same files. Cases: records without headers (the columns are wrapped,
not copied) and records that all carry one header (parsed record by record).

End to end: the compacted objects are put in moto S3 with their manifests and
``ParquetExport`` runs on local Spark (``local[2]``: both cores), from planning
to the committed state file, after a warm-up export that starts the JVM.

Each figure is the median of ``--repeats`` runs. MB/s counts compacted object
bytes (10^6 bytes).

    .venv/bin/python bench/export.py [--repeats 5] [--objects 16]
"""

from __future__ import annotations

import argparse
import gc
import logging
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "glue_jobs"))

from devserver.devstack import MotoS3  # noqa: E402
from llog.format.codec import Record, decode_batch, encode_batch  # noqa: E402
from llog.format.keys import PartitionKeys, S3Location  # noqa: E402
from llog.format.kv.compaction import CompactedRange  # noqa: E402
from llog.protocol.manifest import ManifestStore  # noqa: E402
from llog.store.s3 import BlobStore  # noqa: E402
from llog_export.arrow import batch_to_arrow  # noqa: E402
from llog_export.job import ExportOptions, ParquetExport  # noqa: E402
from llog_export.spark import local_spark_session  # noqa: E402

RECORD_SIZE = 1024
RECORDS_PER_OBJECT = 8_192  # ~8 MiB objects, the compactor's default byte limit
NOW_MS = 1_763_700_000_000
BUCKET = "llog-bench"


@dataclass(frozen=True)
class Row:
    case: str
    operation: str
    median_s: float
    records: int
    nbytes: int

    @property
    def records_per_s(self) -> float:
        return self.records / self.median_s

    @property
    def mb_per_s(self) -> float:
        return self.nbytes / self.median_s / 1e6


def compacted_object(index: int, *, headers: bool) -> bytes:
    payload = bytes(range(256)) * (RECORD_SIZE // 256)
    return encode_batch(
        [
            Record(
                payload,
                key=f"key-{i % 1000}".encode(),
                headers=(("trace-id", f"{index}-{i}".encode()),) if headers else (),
                timestamp_ms=NOW_MS + i,
            )
            for i in range(RECORDS_PER_OBJECT)
        ]
    )


def median_time(operation: Callable[[], None], repeats: int) -> float:
    operation()  # warm-up: page cache, imports, allocator
    times = []
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        start = time.perf_counter()
        operation()
        times.append(time.perf_counter() - start)
        gc.enable()
    return statistics.median(times)


def transform_rows(objects: int, repeats: int) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        for headers in (False, True):
            case = f"{objects} x {RECORDS_PER_OBJECT:,} x 1 KiB" + (", 1 header each" if headers else "")
            paths = []
            for i in range(objects):
                path = Path(directory) / f"{headers}-{i}.bin"
                path.write_bytes(compacted_object(i, headers=headers))
                paths.append(path)
            nbytes = sum(p.stat().st_size for p in paths)
            records = objects * RECORDS_PER_OBJECT

            def read(paths: list[Path] = paths) -> None:
                for path in paths:
                    path.read_bytes()

            def transform(paths: list[Path] = paths) -> None:
                for offset, path in enumerate(paths):
                    batch = decode_batch(path.read_bytes(), expected_count=RECORDS_PER_OBJECT)
                    batch_to_arrow(batch, topic="bench", partition=0, first_offset=1 + offset * RECORDS_PER_OBJECT)

            rows.append(Row(case, "read file (baseline)", median_time(read, repeats), records, nbytes))
            rows.append(Row(case, "read + decode to Arrow", median_time(transform, repeats), records, nbytes))
    return rows


def end_to_end_rows(objects: int, repeats: int) -> list[Row]:
    moto = MotoS3()
    moto.start()
    spark = local_spark_session("llog-export-bench")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        config = moto.config(BUCKET)
        blobs = BlobStore(config)
        blobs.create_bucket(BUCKET)
        root = f"bench-{uuid.uuid4().hex[:8]}"
        manifests = ManifestStore(blobs, bucket=BUCKET, root=root)
        nbytes = 0
        for i in range(objects):
            partition = i % 4
            start = 1 + (i // 4) * RECORDS_PER_OBJECT
            data = compacted_object(i, headers=False)
            location = S3Location(BUCKET, PartitionKeys("bench", partition, root).compacted_object_key())
            blobs.put(location, data)
            nbytes += len(data)
            manifests.publish(
                PartitionKeys("bench", partition, root),
                CompactedRange("bench", partition, start, start + RECORDS_PER_OBJECT - 1, location.uri, "b", NOW_MS)
            )
        with tempfile.TemporaryDirectory() as directory:

            def export() -> None:
                output = Path(directory) / uuid.uuid4().hex
                options = ExportOptions(llog_bucket=BUCKET, output_path=str(output), llog_root_prefix=root, s3=config)
                summary = ParquetExport(spark, options, blobs=blobs).run()
                assert summary.rows == objects * RECORDS_PER_OBJECT, summary

            seconds = median_time(export, repeats)
        return [Row(f"{objects} objects x {RECORDS_PER_OBJECT:,} x 1 KiB", "export job (local[2])", seconds,
                    objects * RECORDS_PER_OBJECT, nbytes)]  # fmt: skip
    finally:
        spark.stop()
        moto.stop()


def table(transform: list[Row], end_to_end: list[Row]) -> str:
    lines = [
        "| case | operation | median s | records/s | MB/s | x baseline |",
        "|---|---|---:|---:|---:|---:|",
    ]
    baselines = {r.case: r.median_s for r in transform if r.operation.endswith("(baseline)")}
    for r in transform:
        ratio = r.median_s / baselines[r.case]
        lines.append(
            f"| {r.case} | {r.operation} | {r.median_s:.3f} | {r.records_per_s:,.0f} | {r.mb_per_s:,.0f} | "
            f"{ratio:.1f} |"
        )
    for r in end_to_end:
        lines.append(
            f"| {r.case} | {r.operation} | {r.median_s:.2f} | {r.records_per_s:,.0f} | {r.mb_per_s:,.0f} | |"
        )
    return "\n".join(lines)


def run(*, repeats: int = 5, objects: int = 16) -> str:
    for name in ("llog_export", "werkzeug"):  # progress lines and moto's request log
        logging.getLogger(name).setLevel(logging.WARNING)
    return table(transform_rows(objects, repeats), end_to_end_rows(objects, max(3, repeats // 2)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--objects", type=int, default=16)
    args = parser.parse_args()
    print(run(repeats=args.repeats, objects=args.objects))
    return 0


if __name__ == "__main__":
    sys.exit(main())
