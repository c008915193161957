"""What compaction leaves in S3, made directly (no Oxia), and the rows an export must hold for it."""

from __future__ import annotations

import datetime as dt
import uuid

from pyspark.sql import DataFrame

from llog.format.codec import Record, encode_batch
from llog.format.keys import PartitionKeys, S3Location
from llog.format.kv.compaction import CompactedRange
from llog.protocol.manifest import ManifestStore
from llog.store.s3 import BlobStore
from tests.conftest import BUCKET

DAY1 = int(dt.datetime(2026, 11, 20, 23, 59, tzinfo=dt.UTC).timestamp() * 1000)
DAY2 = int(dt.datetime(2026, 11, 21, 0, 1, tzinfo=dt.UTC).timestamp() * 1000)

Row = tuple[str, int, int, int, bytes | None, bytes, list[tuple[str, bytes]]]


def record(i: int, timestamp_ms: int) -> Record:
    """Binary payloads (every byte value), keys present and absent, headers on some records."""
    return Record(
        value=bytes([i % 256, 0, 255]) + f"payload-{i}".encode(),
        key=None if i % 3 == 0 else f"key-{i}".encode(),
        headers=(("trace", bytes([i % 7, 0])), ("n", b"")) if i % 2 else (),
        timestamp_ms=timestamp_ms + i,
    )


class CompactedLog:
    """Writes compacted objects and, for committed ranges, their manifests: what compaction leaves in S3."""

    def __init__(self, blobs: BlobStore, root: str) -> None:
        self.blobs = blobs
        self.root = root
        self.manifests = ManifestStore(blobs, bucket=BUCKET, root=root)
        self.expected: list[Row] = []
        self.ends: dict[tuple[str, int, str | None], int] = {}

    def compact(
        self, topic: str, partition: int, records: list[Record], *, commit: bool = True, topic_id: str | None = None
    ) -> CompactedRange:
        """A compacted range of the partition in the legacy folder, or in the folder of ``topic_id``."""
        keys = PartitionKeys(topic, partition, self.root, topic_id)
        start = self.ends.get((topic, partition, topic_id), 0) + 1
        end = start + len(records) - 1
        location = S3Location(BUCKET, keys.compacted_object_key())
        self.blobs.put(location, encode_batch(records))
        manifest = CompactedRange(topic, partition, start, end, location.uri, uuid.uuid4().hex, DAY2)
        self.ends[(topic, partition, topic_id)] = end
        if commit:
            self.publish(manifest, records, topic_id)
        return manifest

    def lose(self, topic: str, partition: int, count: int) -> tuple[int, int]:
        """The next ``count`` offsets of the legacy folder as a rebuild's LOST range leaves them in S3: nothing."""
        start = self.ends.get((topic, partition, None), 0) + 1
        self.ends[(topic, partition, None)] = start + count - 1
        return start, start + count - 1

    def publish(self, manifest: CompactedRange, records: list[Record], topic_id: str | None = None) -> None:
        self.manifests.publish(PartitionKeys(manifest.topic, manifest.partition, self.root, topic_id), manifest)
        for offset, r in enumerate(records, manifest.start_offset):
            assert r.timestamp_ms is not None
            self.expected.append(
                (manifest.topic, manifest.partition, offset, r.timestamp_ms, r.key, r.value, list(r.headers))
            )


def frame_rows(frame: DataFrame) -> list[Row]:
    """A table's rows as plain tuples, in (topic, partition, offset) order."""
    rows = []
    for r in frame.collect():
        timestamp_ms = int(r["timestamp"].replace(tzinfo=dt.UTC).timestamp() * 1000)
        headers = [(h["name"], bytes(h["value"])) for h in r["headers"]]
        key = None if r["key"] is None else bytes(r["key"])
        rows.append((r["topic"], r["partition"], r["offset"], timestamp_ms, key, bytes(r["value"]), headers))
    return in_order(rows)


def in_order(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda row: (row[0], row[1], row[2]))
