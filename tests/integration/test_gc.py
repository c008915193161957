"""Garbage collection on a real Oxia server and moto S3.

The collector's clock runs ahead by more than the grace period, so objects
written moments ago count as old; an un-advanced clock shows the grace
period protecting young objects.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from llog.blob_store import BlobStore
from llog.compactor import AFTER_BLOB_PUT, Compactor
from llog.faults import SimulatedCrash, crash_at
from llog.gc import GarbageCollector, GcConfig
from llog.keys import PartitionKeys, S3Location, shared_wal_prefix
from llog.oxia_store import OxiaStore
from llog.reader import LogReader
from llog.writer import AFTER_BLOB_PUT as WRITER_AFTER_BLOB_PUT
from llog.writer import AFTER_RESERVE, LogWriter, SharedAppendGroup
from tests.conftest import BUCKET

pytestmark = pytest.mark.oxia

GRACE_MS = 60 * 60 * 1000


def collector(oxia: OxiaStore, blobs: BlobStore, *, ahead_ms: int = GRACE_MS + 60_000) -> GarbageCollector:
    clock: Callable[[], float] = lambda: time.time() + ahead_ms / 1000  # noqa: E731
    return GarbageCollector(oxia, blobs, bucket=BUCKET, config=GcConfig(grace_ms=GRACE_MS), clock=clock)


def wal_keys(blobs: BlobStore) -> set[str]:
    return {o.key for o in blobs.list(BUCKET, shared_wal_prefix())}


def uri_key(uri: str | None) -> str:
    assert uri is not None
    return S3Location.parse(uri).key


def test_blobs_stay_while_referenced_and_go_once_compacted_everywhere(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, blob_store: BlobStore, topic: str
) -> None:
    other = f"{topic}-b"
    for t in (topic, other):
        writer.initialize_partition(t, 0)
    shared = writer.append_shared([SharedAppendGroup(topic, 0, [b"a"]), SharedAppendGroup(other, 0, [b"b"])])
    blob = uri_key(shared[0].wal_uri)
    compactor = Compactor(oxia_store, blob_store, bucket=BUCKET)
    gc = collector(oxia_store, blob_store)

    gc.collect()
    assert blob in wal_keys(blob_store)  # referenced by both partitions

    compactor.compact_once(topic, 0)
    gc.collect()
    assert blob in wal_keys(blob_store)  # still referenced by the other partition

    compactor.compact_once(other, 0)
    report = gc.collect()
    assert blob not in wal_keys(blob_store)
    assert report.wal_blobs_deleted >= 1
    assert reader.read_offset(topic, 0, 1).value == b"a"  # served by the compacted object
    assert reader.read_offset(other, 0, 1).value == b"b"


def test_an_orphaned_blob_goes_only_after_the_grace_period(
    writer: LogWriter, oxia_store: OxiaStore, blob_store: BlobStore, topic: str
) -> None:
    writer.initialize_partition(topic, 0)
    before = wal_keys(blob_store)
    with pytest.raises(SimulatedCrash):
        LogWriter(oxia_store, blob_store, bucket=BUCKET, fault_hook=crash_at(WRITER_AFTER_BLOB_PUT)).append(
            topic, 0, [b"never committed"])
    (orphan,) = wal_keys(blob_store) - before

    collector(oxia_store, blob_store, ahead_ms=0).collect()
    assert orphan in wal_keys(blob_store)  # young: a slow writer might still commit it

    collector(oxia_store, blob_store).collect()
    assert orphan not in wal_keys(blob_store)


def test_a_pending_append_keeps_its_blob(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, blob_store: BlobStore, topic: str
) -> None:
    writer.initialize_partition(topic, 0)
    with pytest.raises(SimulatedCrash):
        LogWriter(oxia_store, blob_store, bucket=BUCKET, fault_hook=crash_at(AFTER_RESERVE)).append(topic, 0, [b"p"])
    collector(oxia_store, blob_store).collect()
    assert reader.read_offset(topic, 0, 1).value == b"p"


def test_orphaned_compacted_objects_go_and_referenced_ones_stay(
    writer: LogWriter, reader: LogReader, oxia_store: OxiaStore, blob_store: BlobStore, topic: str
) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a", b"b"])
    keys = PartitionKeys(topic, 0)
    with pytest.raises(SimulatedCrash):
        Compactor(oxia_store, blob_store, bucket=BUCKET, fault_hook=crash_at(AFTER_BLOB_PUT)).compact_once(topic, 0)
    (orphan,) = [o.key for o in blob_store.list(BUCKET, keys.compacted_prefix)]
    Compactor(oxia_store, blob_store, bucket=BUCKET).compact_once(topic, 0)
    live = {o.key for o in blob_store.list(BUCKET, keys.compacted_prefix)} - {orphan}

    report = collector(oxia_store, blob_store).collect()

    remaining = {o.key for o in blob_store.list(BUCKET, keys.compacted_prefix)}
    assert remaining == live
    assert report.compacted_deleted >= 1
    assert [r.value for r in reader.iter_from(topic, 0, 1)] == [b"a", b"b"]
    # The watermark means a second run lists nothing already judged.
    second = collector(oxia_store, blob_store).collect()
    assert second.compacted_deleted == 0
