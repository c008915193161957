"""Garbage collection on a real Oxia server and moto S3.

The collector's clock runs ahead by more than the grace period, so objects
written moments ago count as old; an un-advanced clock shows the grace
period protecting young objects.

A collector whose clock runs ahead creates the namespace's identity ahead
too, so the WAL blobs of a test that lets the first run create it are
written before it: judged by their headers, as a stack's blobs from before
the registry are. Tests of the judgement from references alone create the
identity first, more than a grace period ago (``namespace_first``).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable

import pytest

from llog.config import GcConfig
from llog.errors import OxiaUnavailable
from llog.format.keys import PartitionKeys, RegistryKeys, S3Location, new_object_id, shared_wal_prefix
from llog.protocol.append import LogWriter, SharedAppendGroup
from llog.protocol.compaction import Compactor
from llog.protocol.faults import COMPACTOR_AFTER_BLOB_PUT as AFTER_BLOB_PUT
from llog.protocol.faults import WRITER_AFTER_BLOB_PUT
from llog.protocol.faults import WRITER_AFTER_RESERVE as AFTER_RESERVE
from llog.protocol.gc import GarbageCollector
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.namespace import check_namespace
from llog.protocol.read import LogReader
from llog.protocol.topics import TopicRegistry
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from tests.conftest import BUCKET
from tests.faults import SimulatedCrash, crash_at
from tests.protocols import CAS

pytestmark = pytest.mark.oxia

GRACE_MS = 60 * 60 * 1000


def collector(storage: Storage, *, ahead_ms: int = GRACE_MS + 60_000) -> GarbageCollector:
    clock: Callable[[], float] = lambda: time.time() + ahead_ms / 1000  # noqa: E731
    return GarbageCollector(dataclasses.replace(storage, clock=clock), config=GcConfig(grace_ms=GRACE_MS))


def wal_keys(blobs: BlobStore, root: str) -> set[str]:
    return {o.key for o in blobs.list(BUCKET, shared_wal_prefix(root))}


def uri_key(uri: str | None) -> str:
    assert uri is not None
    return S3Location.parse(uri).key


def test_blobs_stay_while_referenced_and_go_once_compacted_everywhere(
    writer: LogWriter, reader: LogReader, blob_store: BlobStore, topic: str, root: str, storage: Storage
) -> None:
    other = f"{topic}-b"
    for t in (topic, other):
        writer.initialize_partition(t, 0)
    shared = writer.append_shared([SharedAppendGroup(topic, 0, [b"a"]), SharedAppendGroup(other, 0, [b"b"])])
    blob = uri_key(shared[0].wal_uri)
    compactor = Compactor(storage)
    gc = collector(storage)

    gc.collect()
    assert blob in wal_keys(blob_store, root)  # referenced by both partitions

    compactor.compact_once(topic, 0)
    gc.collect()
    assert blob in wal_keys(blob_store, root)  # still referenced by the other partition

    compactor.compact_once(other, 0)
    report = gc.collect()
    assert blob not in wal_keys(blob_store, root)
    assert report.wal_blobs_deleted >= 1
    assert reader.read_offset(topic, 0, 1).value == b"a"  # served by the compacted object
    assert reader.read_offset(other, 0, 1).value == b"b"


def test_an_orphaned_blob_goes_only_after_the_grace_period(
    writer: LogWriter, blob_store: BlobStore, topic: str, root: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    before = wal_keys(blob_store, root)
    with pytest.raises(SimulatedCrash):
        LogWriter(storage, fault_hook=crash_at(WRITER_AFTER_BLOB_PUT)).append(topic, 0, [b"never committed"])
    (orphan,) = wal_keys(blob_store, root) - before

    collector(storage, ahead_ms=0).collect()
    assert orphan in wal_keys(blob_store, root)  # young: a slow writer might still commit it

    collector(storage).collect()
    assert orphan not in wal_keys(blob_store, root)


def test_a_pending_append_keeps_its_blob(reader: LogReader, topic: str, storage: Storage) -> None:
    LogWriter(storage, config=CAS).initialize_partition(topic, 0)  # only the CAS protocol has pending appends
    with pytest.raises(SimulatedCrash):
        LogWriter(storage, config=CAS, fault_hook=crash_at(AFTER_RESERVE)).append(topic, 0, [b"p"])
    collector(storage).collect()
    assert reader.read_offset(topic, 0, 1).value == b"p"


def test_orphaned_compacted_objects_go_and_referenced_ones_stay(
    writer: LogWriter, reader: LogReader, blob_store: BlobStore, topic: str, root: str, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"a", b"b"])
    keys = PartitionKeys(topic, 0, root)
    with pytest.raises(SimulatedCrash):
        Compactor(storage, fault_hook=crash_at(AFTER_BLOB_PUT)).compact_once(topic, 0)
    (orphan,) = [o.key for o in blob_store.list(BUCKET, keys.compacted_prefix)]
    Compactor(storage).compact_once(topic, 0)
    live = {o.key for o in blob_store.list(BUCKET, keys.compacted_prefix)} - {orphan}

    report = collector(storage).collect()

    remaining = {o.key for o in blob_store.list(BUCKET, keys.compacted_prefix)}
    assert remaining == live
    assert report.compacted_deleted >= 1
    assert [r.value for r in reader.iter_from(topic, 0, 1)] == [b"a", b"b"]
    # The watermark means a second run lists nothing already judged.
    second = collector(storage).collect()
    assert second.compacted_deleted == 0


def put_unreadable(blobs: BlobStore, root: str) -> dict[str, str]:
    """Two objects under the root's wal-shared/ that are not LLS1 blobs, with the reason GC gives for each."""
    noise = random.Random(7).randbytes(4096)
    assert not noise.startswith(b"LLS1")
    reasons = {}
    for body, reason in ((b"1234567", "is 7 bytes, too short for an LLS1 blob"), (noise, "not an LLS1 shared blob")):
        key = f"{shared_wal_prefix(root)}{new_object_id()}"
        blobs.put(S3Location(BUCKET, key), body)
        reasons[key] = reason
    return reasons


def test_unreadable_objects_under_wal_shared_are_kept_as_warnings_and_the_run_goes_on(
    writer: LogWriter, blob_store: BlobStore, topic: str, root: str, caplog: pytest.LogCaptureFixture, storage: Storage
) -> None:
    """A foreign or damaged object is never deleted (GC cannot judge it), and it is a warning, not an error:
    it would recur every run. Real garbage next to it still goes in the same run."""
    writer.initialize_partition(topic, 0)
    kept = uri_key(writer.append(topic, 0, [b"kept"]).wal_uri)
    before = wal_keys(blob_store, root)
    with pytest.raises(SimulatedCrash):
        LogWriter(storage, fault_hook=crash_at(WRITER_AFTER_BLOB_PUT)).append(topic, 0, [b"never committed"])
    (orphan,) = wal_keys(blob_store, root) - before
    unreadable = put_unreadable(blob_store, root)

    with caplog.at_level(logging.WARNING, logger="llog.protocol.gc"):
        report = collector(storage).collect()

    assert report.errors == []
    assert (report.wal_blobs_deleted, report.referenced_kept, report.wal_unreadable_kept) == (1, 1, 2)
    assert wal_keys(blob_store, root) == {kept, *unreadable}
    assert orphan not in wal_keys(blob_store, root)
    assert len(report.warnings) == 2
    for warning in report.warnings:
        key = warning.split(":")[0]
        assert unreadable[key] in warning
    logged = [r for r in caplog.records if "not readable LLS1 blobs" in r.getMessage()]
    assert len(logged) == 1  # once per run, not once per object
    assert logged[0].levelno == logging.WARNING
    assert "kept 2 object(s)" in logged[0].getMessage()

    again = collector(storage).collect()
    assert (again.errors, again.wal_unreadable_kept, again.wal_blobs_deleted) == ([], 2, 0)
    assert wal_keys(blob_store, root) == {kept, *unreadable}


def test_a_wal_object_deleted_between_listing_and_reading_is_skipped(
    writer: LogWriter, blob_store: BlobStore, topic: str, root: str, monkeypatch: pytest.MonkeyPatch, storage: Storage
) -> None:
    writer.initialize_partition(topic, 0)
    with pytest.raises(SimulatedCrash):
        LogWriter(storage, fault_hook=crash_at(WRITER_AFTER_BLOB_PUT)).append(topic, 0, [b"never committed"])
    (orphan,) = wal_keys(blob_store, root)
    read_header = GarbageCollector._blob_partitions

    def deleted_first(self: GarbageCollector, location: S3Location, size: int) -> set[tuple[str, int]]:
        blob_store.delete(BUCKET, [location.key])  # someone else (another GC run) got there first
        return read_header(self, location, size)

    monkeypatch.setattr(GarbageCollector, "_blob_partitions", deleted_first)
    report = collector(storage).collect()

    assert (report.errors, report.warnings) == ([], [])
    assert (report.wal_blobs_seen, report.wal_blobs_deleted, report.wal_unreadable_kept) == (1, 0, 0)
    assert orphan not in wal_keys(blob_store, root)


def namespace_first(storage: Storage) -> None:
    """The namespace's identity, created more than a grace ago: blobs written from here on are judged unread."""
    check_namespace(dataclasses.replace(storage, clock=lambda: time.time() - GRACE_MS / 1000 - 1))


def range_gets(storage: Storage) -> int:
    stats = storage.blobs.counters.snapshot().get("range_get")
    return 0 if stats is None else stats.calls


def test_blobs_written_since_the_namespace_are_judged_from_the_references_alone(
    writer: LogWriter, reader: LogReader, blob_store: BlobStore, topic: str, root: str, storage: Storage
) -> None:
    namespace_first(storage)
    other = f"{topic}-b"
    for t in (topic, other):
        writer.initialize_partition(t, 0)
    compacted = uri_key(writer.append(topic, 0, [b"compacted"]).wal_uri)
    Compactor(storage).compact_once(topic, 0)
    shared = writer.append_shared([SharedAppendGroup(topic, 0, [b"a"]), SharedAppendGroup(other, 0, [b"b"])])
    live = uri_key(shared[0].wal_uri)
    with pytest.raises(SimulatedCrash):
        LogWriter(storage, fault_hook=crash_at(WRITER_AFTER_BLOB_PUT)).append(other, 0, [b"never committed"])
    (orphan,) = wal_keys(blob_store, root) - {compacted, live}
    gets = range_gets(storage)

    report = collector(storage).collect()

    assert report.errors == []
    assert wal_keys(blob_store, root) == {live}
    assert (report.wal_judged_unread, report.wal_headers_read, report.wal_blobs_deleted) == (2, 0, 2)
    assert (report.referenced_kept, report.wal_partitions_read) == (2, 2)  # the live blob, the compacted object
    assert range_gets(storage) == gets  # no header read
    assert [r.value for r in reader.iter_from(topic, 0, 1)] == [b"compacted", b"a"]
    assert orphan not in wal_keys(blob_store, root)

    for t in (topic, other):  # each still held a slice of the shared blob
        Compactor(storage).compact_once(t, 0)
    assert collector(storage).collect().wal_blobs_deleted == 1
    assert wal_keys(blob_store, root) == set()


def test_a_pending_append_keeps_its_blob_when_judged_unread(reader: LogReader, topic: str, storage: Storage) -> None:
    namespace_first(storage)
    LogWriter(storage, config=CAS).initialize_partition(topic, 0)
    with pytest.raises(SimulatedCrash):
        LogWriter(storage, config=CAS, fault_hook=crash_at(AFTER_RESERVE)).append(topic, 0, [b"p"])
    report = collector(storage).collect()
    assert (report.referenced_kept, report.wal_blobs_deleted) == (1, 0)
    assert reader.read_offset(topic, 0, 1).value == b"p"


def test_the_listing_stops_at_the_first_blob_written_after_the_cutoff(
    writer: LogWriter, blob_store: BlobStore, topic: str, root: str, storage: Storage
) -> None:
    """Keys sort by creation time, so a run lists what may be old and the first young blob, not the grace's worth."""
    namespace_first(storage)
    writer.initialize_partition(topic, 0)
    for i in range(3):
        with pytest.raises(SimulatedCrash):
            LogWriter(storage, fault_hook=crash_at(WRITER_AFTER_BLOB_PUT)).append(topic, 0, [b"x%d" % i])
    report = collector(storage, ahead_ms=0).collect()
    assert (report.wal_blobs_seen, report.young_skipped, report.wal_blobs_deleted) == (1, 1, 0)
    assert len(wal_keys(blob_store, root)) == 3


def test_a_deleted_topic_keeps_its_blobs_until_it_is_reclaimed(
    writer: LogWriter, blob_store: BlobStore, topic: str, root: str, storage: Storage
) -> None:
    namespace_first(storage)
    writer.initialize_partition(topic, 0)
    blob = uri_key(writer.append(topic, 0, [b"a"]).wal_uri)
    TopicRegistry(storage.oxia, root=root).delete(topic)
    report = collector(storage).collect()  # past the grace, not past the reclaim delay
    assert report.topics_reclaimed == 0
    assert (report.referenced_kept, report.wal_blobs_deleted) == (1, 0)
    assert blob in wal_keys(blob_store, root)


def test_blobs_from_before_the_namespace_are_judged_by_their_headers_for_partitions_the_registry_lacks(
    writer: LogWriter, reader: LogReader, blob_store: BlobStore, topic: str, root: str, storage: Storage
) -> None:
    """A partition from before the registry is not listed until its next initialize; its blobs are older than
    the namespace's identity, so their headers name it and its index is read."""
    writer.initialize_partition(topic, 0)
    blob = uri_key(writer.append(topic, 0, [b"a"]).wal_uri)
    keys = RegistryKeys(root)
    storage.oxia.delete(keys.partition(topic, 0), partition_key=keys.partition_key)  # as before the registry
    check_namespace(storage)  # now: the blob was written before it

    report = collector(storage).collect()

    assert (report.wal_partitions_read, report.wal_headers_read, report.referenced_kept) == (0, 1, 1)
    assert blob in wal_keys(blob_store, root)
    assert reader.read_offset(topic, 0, 1).value == b"a"


def test_no_wal_blob_is_judged_when_a_partition_cannot_be_read(
    writer: LogWriter, blob_store: BlobStore, topic: str, root: str, monkeypatch: pytest.MonkeyPatch, storage: Storage
) -> None:
    namespace_first(storage)
    other = f"{topic}-b"
    for t in (topic, other):
        writer.initialize_partition(t, 0)
    with pytest.raises(SimulatedCrash):
        LogWriter(storage, fault_hook=crash_at(WRITER_AFTER_BLOB_PUT)).append(topic, 0, [b"never committed"])
    read = GarbageCollector._partition_references

    def unreachable(meta: PartitionMetadata) -> set[str]:
        if meta.keys.topic == other:
            raise OxiaUnavailable("Oxia did not answer")
        return read(meta)

    monkeypatch.setattr(GarbageCollector, "_partition_references", staticmethod(unreachable))
    report = collector(storage).collect()

    assert report.wal_blobs_deleted == 0
    assert [e for e in report.errors if "WAL references" in e] == [f"WAL references of {other}/0: Oxia did not answer"]
    assert len(wal_keys(blob_store, root)) == 1


def unregister(storage: Storage, topic: str) -> None:
    """As for a partition made before the registry existed."""
    keys = RegistryKeys(storage.root)
    storage.oxia.delete(keys.partition(topic, 0), partition_key=keys.partition_key)


def test_a_blob_written_within_a_grace_of_the_namespace_is_judged_by_its_header(
    writer: LogWriter, reader: LogReader, blob_store: BlobStore, topic: str, root: str, storage: Storage
) -> None:
    """A partition from before the registry, appended to by a writer that does not register it (a process of
    the old version, still running while the new one's first GC run creates the identity): its blob is newer
    than the identity, and only the header names the partition."""
    writer.initialize_partition(topic, 0)
    unregister(storage, topic)
    check_namespace(storage)
    blob = uri_key(writer.append(topic, 0, [b"acked"]).wal_uri)  # no initialize_partition: not registered

    report = collector(storage).collect()

    assert (report.wal_judged_unread, report.wal_headers_read, report.wal_referenced_kept) == (0, 1, 1)
    assert blob in wal_keys(blob_store, root)
    assert reader.read_offset(topic, 0, 1).value == b"acked"


def test_a_collector_whose_clock_was_behind_when_it_made_the_identity_still_reads_older_blobs(
    writer: LogWriter, reader: LogReader, blob_store: BlobStore, topic: str, root: str, storage: Storage
) -> None:
    """The identity's time is the collector's clock, the blobs' names the writers': skew within the grace."""
    writer.initialize_partition(topic, 0)
    unregister(storage, topic)
    blob = uri_key(writer.append(topic, 0, [b"acked"]).wal_uri)  # before the identity, in real time
    check_namespace(dataclasses.replace(storage, clock=lambda: time.time() - 5))

    report = collector(storage).collect()

    assert (report.wal_headers_read, report.wal_referenced_kept) == (1, 1)
    assert blob in wal_keys(blob_store, root)
    assert reader.read_offset(topic, 0, 1).value == b"acked"
