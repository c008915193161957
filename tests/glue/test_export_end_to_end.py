"""The whole path on real Oxia: produce, compact (which publishes manifests), export, compare with reads."""

from __future__ import annotations

import dataclasses

import pytest
from pyspark.sql import SparkSession

from llog.client.reader import LogReader
from llog.client.writer import LogWriter, SharedAppendGroup
from llog.config import CompactorConfig
from llog.format.codec import Record
from llog.protocol.compaction import Compactor, compact_until_caught_up
from llog.store.storage import Storage
from llog_export.job import ExportOptions
from llog_export.runner import run_export
from tests.glue.helpers import DAY1, Row, frame_rows, in_order

pytestmark = pytest.mark.oxia


def read_back(reader: LogReader, topic: str, partition: int) -> list[Row]:
    return [
        (topic, partition, r.offset, r.timestamp_ms, r.key, r.value, list(r.headers))
        for r in reader.iter_from(topic, partition, 1)
    ]


def test_the_export_equals_what_consumers_read_for_the_same_offsets(
    spark: SparkSession, writer: LogWriter, reader: LogReader, topic: str, options: ExportOptions, storage: Storage
) -> None:
    topics = (topic, f"{topic}-b")
    for t in topics:
        for p in (0, 1):
            writer.initialize_partition(t, p)
    for i in range(12):
        writer.append_shared(
            [
                SharedAppendGroup(
                    t,
                    p,
                    [
                        Record(
                            bytes([i, 0, 255]) + t.encode(),
                            key=None if i % 2 else b"k%d" % i,
                            headers=(("h", bytes([i])),) if i % 3 else (),
                            timestamp_ms=DAY1 + i * 60_000,
                        )
                    ],
                )
                for t in topics
                for p in (0, 1)
                if (i + p) % 2 == 0 or i > 6
            ]
        )
    compactor = Compactor(storage, config=CompactorConfig(max_offsets_per_run=4))
    for t in topics:
        for p in (0, 1):
            compact_until_caught_up(compactor, t, p, budget_s=60)

    exported = dataclasses.replace(options, topics=topics)
    summary = run_export(spark, exported)

    expected = in_order([row for t in topics for p in (0, 1) for row in read_back(reader, t, p)])
    assert summary.rows == len(expected) > 0
    assert frame_rows(spark.read.parquet(options.output_path)) == expected
