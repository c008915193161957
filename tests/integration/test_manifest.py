"""ManifestStore on moto S3: the chain of committed ranges, gaps, discovery."""

from __future__ import annotations

import uuid

import pytest

from llog.errors import CorruptMetadata
from llog.format.keys import PartitionKeys, S3Location
from llog.format.kv.compaction import CompactedRange
from llog.protocol.manifest import ManifestStore
from llog.store.s3 import BlobStore
from tests.conftest import BUCKET


@pytest.fixture
def store(blob_store: BlobStore) -> ManifestStore:
    return ManifestStore(blob_store, bucket=BUCKET, root=f"m-{uuid.uuid4().hex[:10]}")


def publish(
    store: ManifestStore, topic: str, partition: int, start: int, end: int, topic_id: str | None = None
) -> CompactedRange:
    manifest = CompactedRange(topic, partition, start, end, f"s3://{BUCKET}/obj-{start}", "c", 1)
    store.publish(PartitionKeys(topic, partition, store.root, topic_id), manifest)
    return manifest


def spans(store: ManifestStore, topic: str, partition: int, start: int = 1) -> list[tuple[int, int]]:
    keys = PartitionKeys(topic, partition, store.root)
    listed = [(s.start_offset, s.end_offset) for s in store.spans(keys, start)]
    read = [(m.start_offset, m.end_offset) for m in store.ranges(keys, start)]
    assert listed == read
    return listed


def test_ranges_follow_the_chain_from_a_cursor_and_stop_at_a_gap(store: ManifestStore) -> None:
    for start, end in [(1, 4), (5, 9), (10, 10), (15, 20)]:  # 11-14 not published yet
        publish(store, "orders", 0, start, end)
    assert spans(store, "orders", 0) == [(1, 4), (5, 9), (10, 10)]
    assert spans(store, "orders", 0, 5) == [(5, 9), (10, 10)]
    assert spans(store, "orders", 0, 11) == []
    publish(store, "orders", 0, 11, 14)
    assert spans(store, "orders", 0, 10) == [(10, 10), (11, 14), (15, 20)]
    publish(store, "orders", 0, 5, 9)  # a resumed compaction republishes: same bytes, same chain
    assert len(spans(store, "orders", 0)) == 5


def test_stray_objects_are_ignored_and_a_manifest_under_the_wrong_key_is_an_error(
    store: ManifestStore, blob_store: BlobStore
) -> None:
    keys = PartitionKeys("orders", 1, store.root)
    publish(store, "orders", 1, 1, 3)
    blob_store.put(S3Location(BUCKET, keys.manifest_prefix + "README.txt"), b"operator notes")
    assert spans(store, "orders", 1) == [(1, 3)]
    wrong = CompactedRange("orders", 2, 4, 6, "s3://b/k", "c", 1).encode()
    blob_store.put(S3Location(BUCKET, keys.manifest_key(4, 6)), wrong)
    assert [(s.start_offset, s.end_offset) for s in store.spans(keys)] == [(1, 3), (4, 6)]
    with pytest.raises(CorruptMetadata, match="describes"):
        list(store.ranges(keys))


def test_topics_and_partitions_of_every_incarnation_are_discovered_from_s3(
    store: ManifestStore, blob_store: BlobStore
) -> None:
    topic_id = "6f1c0a52-8d0e-4c1b-9a57-2b9d8c1e0f43"
    for topic, partition, incarnation in [("orders", 0, None), ("orders", 10, None), ("orders", 2, None),
                                          ("payments", 0, None), ("orders", 1, topic_id)]:  # fmt: skip
        publish(store, topic, partition, 1, 1, incarnation)
    blob_store.put(S3Location(BUCKET, f"{store.root}/wal-shared/x"), b"wal")
    blob_store.put(S3Location(BUCKET, f"{store.root}/orders/notes/x"), b"an operator's folder")
    assert store.topics() == ["orders", "payments"]
    assert store.partitions("orders") == [
        PartitionKeys("orders", 1, store.root, topic_id),  # the id's folder sorts before "partitions/"
        *(PartitionKeys("orders", p, store.root) for p in (0, 2, 10)),
    ]
    assert store.partitions("absent") == []


def test_retention_publishes_the_log_start_and_deletes_manifests(store: ManifestStore, blob_store: BlobStore) -> None:
    for start, end in [(1, 4), (5, 9), (10, 12)]:
        publish(store, "orders", 0, start, end)
    keys = PartitionKeys("orders", 0, store.root)
    assert store.log_start(keys) == 1  # never truncated

    store.publish_log_start(keys, 10)
    store.delete(keys, [(1, 4), (5, 9)])

    assert store.log_start(keys) == 10
    assert spans(store, "orders", 0) == []  # the chain from 1 now starts with a gap
    assert spans(store, "orders", 0, 10) == [(10, 12)]
    blob_store.put(S3Location(BUCKET, keys.manifest_prefix + "log-start.json"), b'{"log_start_offset": 0}')
    with pytest.raises(CorruptMetadata, match="log start"):
        store.log_start(keys)
