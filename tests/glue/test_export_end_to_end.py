"""The whole path on real Oxia: produce, compact (which publishes manifests), export, compare with reads."""

from __future__ import annotations

import dataclasses
import time

import pytest
from pyspark.sql import SparkSession

from llog.config import CompactorConfig, GcConfig, WriterConfig
from llog.format.codec import Record
from llog.format.kv.control import AppendProtocol
from llog.protocol.append import LogWriter, SharedAppendGroup
from llog.protocol.compaction import Compactor, compact_until_caught_up
from llog.protocol.gc import GarbageCollector
from llog.protocol.read import LogReader
from llog.protocol.topics import RECLAIM_DELAY_MS, TopicConfig, TopicRegistry
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


def test_a_topic_deleted_and_created_again_is_exported_from_offset_1_as_a_new_incarnation(
    spark: SparkSession, storage: Storage, topic: str, options: ExportOptions
) -> None:
    registry = TopicRegistry(storage.oxia, root=storage.root, writer_config=WriterConfig())
    config = TopicConfig(AppendProtocol.SEQUENTIAL, None, None)
    first, _ = registry.create(topic, 1, config)
    LogWriter(storage).append(topic, 0, [Record(b"old-%d" % i, timestamp_ms=DAY1) for i in range(3)])
    compact_until_caught_up(Compactor(storage), topic, 0, budget_s=60)
    exported = dataclasses.replace(options, topics=(topic,))
    assert run_export(spark, exported).rows == 3

    registry.delete(topic)
    ahead_s = (GcConfig().grace_ms + RECLAIM_DELAY_MS + 60_000) / 1000
    later = dataclasses.replace(storage, clock=lambda: time.time() + ahead_s)
    assert GarbageCollector(later).collect().topics_reclaimed == 1  # the old incarnation's keys and objects
    second, _ = registry.create(topic, 1, config)
    assert second.topic_id != first.topic_id
    LogWriter(storage).append(topic, 0, [Record(b"new-%d" % i, timestamp_ms=DAY1) for i in range(2)])
    compact_until_caught_up(Compactor(storage), topic, 0, budget_s=60)

    summary = run_export(spark, exported)

    assert (summary.ranges, summary.rows) == (1, 2)
    rows = spark.read.parquet(options.output_path).select("topic_id", "offset", "value").collect()
    assert sorted((r["topic_id"], r["offset"], bytes(r["value"])) for r in rows) == sorted(
        [(first.topic_id, o, b"old-%d" % (o - 1)) for o in (1, 2, 3)]
        + [(second.topic_id, o, b"new-%d" % (o - 1)) for o in (1, 2)]
    )
    assert run_export(spark, exported).rows == 0
