"""The registry of partitions and key order on a real Oxia v0.17.1 (hierarchical sorting).

Neighbouring names sort in ways a segment-by-segment order never did:
``partitions/10`` before ``partitions/2``, ``foobar`` before ``foo``'s deeper
keys, and a CEILING/LOWER past one partition's last key lands on a
neighbour's. Each test puts such neighbours side by side, with different
contents, and checks that every component sees exactly its own partition.
"""

from __future__ import annotations

import dataclasses

import pytest

from llog.config import GcConfig, WriterConfig
from llog.errors import OffsetOutOfRange, PartitionNotInitialized
from llog.format.keys import PartitionKeys, RegistryKeys
from llog.format.kv.control import AppendProtocol
from llog.protocol.append import LogWriter
from llog.protocol.catalog import LogCatalog
from llog.protocol.compaction import Compactor
from llog.protocol.gc import GarbageCollector
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.read import LogReader
from llog.protocol.registry import PartitionRegistry
from llog.store.oxia import OxiaStore
from llog.store.storage import Storage

pytestmark = pytest.mark.oxia

# Topics whose keys interleave under hierarchical sorting, and partitions 1, 2 and 10.
TOPICS = ("foo", "foobar", "foo.bar", "fo", "foo-")
PARTITIONS = (1, 2, 10)


def contents(topic: str, partition: int) -> list[bytes]:
    """A distinct number of distinct records per partition; some are left empty."""
    n = (TOPICS.index(topic) + PARTITIONS.index(partition)) % 4
    return [f"{topic}/{partition}/{i}".encode() for i in range(n)]


def fill(writer: LogWriter) -> None:
    for topic in TOPICS:
        for partition in PARTITIONS:
            writer.initialize_partition(topic, partition)
            records = contents(topic, partition)
            # One append per record: several index entries per partition.
            for record in records:
                writer.append(topic, partition, [record])


def writer_for(storage: Storage, protocol: AppendProtocol) -> LogWriter:
    return LogWriter(storage, config=WriterConfig(append_protocol=protocol))


def test_registry_lists_neighbouring_topics_and_partitions_exactly(oxia_store: OxiaStore, root: str) -> None:
    registry = PartitionRegistry(oxia_store, root=root)
    for topic in reversed(TOPICS):
        for partition in PARTITIONS:
            assert registry.register(PartitionKeys(topic, partition, root))
    assert not registry.register(PartitionKeys("foo", 1, root))  # idempotent

    expected = {t: [1, 2, 10] for t in sorted(TOPICS)}
    assert registry.partitions() == expected
    assert list(registry.partitions()) == sorted(TOPICS)
    for topic in TOPICS:
        assert registry.partitions(topic) == {topic: [1, 2, 10]}
    assert registry.partitions("nothing") == {}
    # Another root on the same server is another registry.
    assert PartitionRegistry(oxia_store, root=f"{root}-other").partitions() == {}


def test_registry_ignores_deeper_and_shallower_keys_under_its_prefix(oxia_store: OxiaStore, root: str) -> None:
    keys = RegistryKeys(root)
    registry = PartitionRegistry(oxia_store, root=root)
    registry.register(PartitionKeys("foo", 2, root))
    # Keys one level deeper and shallower, on the same shard: never part of a scan of one depth.
    for stray in (f"{keys.prefix}foo:0000000001/x", f"{root}/__catalog/partitions", f"{keys.prefix}foo"):
        oxia_store.put(stray, b"{}", partition_key=keys.partition_key)
    assert registry.partitions() == {"foo": [2]}


@pytest.mark.parametrize("protocol", list(AppendProtocol))
def test_readers_see_only_their_own_partition_among_neighbours(storage: Storage, protocol: AppendProtocol) -> None:
    fill(writer_for(storage, protocol))
    reader = LogReader(storage)
    assert LogCatalog(storage.oxia, root=storage.root).partitions() == {
        t: [PartitionKeys(t, p, storage.root) for p in (1, 2, 10)] for t in sorted(TOPICS)
    }
    for topic in TOPICS:
        for partition in PARTITIONS:
            expected = contents(topic, partition)
            assert reader.high_watermark(topic, partition) == len(expected), (topic, partition)
            if expected:
                got = [r.value for r in reader.read_range(topic, partition, 1, len(expected))]
                assert got == expected, (topic, partition)
            # Past the end (a CEILING/LOWER that would land on a neighbour): out of range, never a neighbour's record.
            with pytest.raises(OffsetOutOfRange):
                reader.read_offset(topic, partition, len(expected) + 1)


@pytest.mark.parametrize("protocol", list(AppendProtocol))
def test_compaction_and_gc_keep_neighbours_apart(storage: Storage, protocol: AppendProtocol) -> None:
    fill(writer_for(storage, protocol))
    compactor = Compactor(storage)
    for topic in TOPICS:
        for partition in PARTITIONS:
            result = compactor.compact_once(topic, partition)
            expected = contents(topic, partition)
            if expected:
                assert (result.start_offset, result.end_offset) == (1, len(expected)), (topic, partition)
            else:
                assert result.outcome == "nothing_to_do", (topic, partition)
    # Status reads a partition's meta/ records with one scan: each sees its own cursor, never a neighbour's.
    catalog = LogCatalog(storage.oxia, root=storage.root)
    for topic in TOPICS:
        for partition in PARTITIONS:
            status = catalog.status(PartitionKeys(topic, partition, storage.root))
            n = len(contents(topic, partition))
            assert (status.high_watermark, status.compaction_cursor, status.compaction) == (n, n + 1, None)
    report = GarbageCollector(dataclasses.replace(storage, clock=lambda: 2**40), config=GcConfig(grace_ms=1)).collect()
    assert report.errors == []
    assert report.wal_blobs_deleted > 0
    reader = LogReader(storage)
    for topic in TOPICS:
        for partition in PARTITIONS:
            expected = contents(topic, partition)
            if expected:
                got = [r.value for r in reader.read_range(topic, partition, 1, len(expected))]
                assert got == expected, (topic, partition)


def test_partitions_are_registered_before_they_exist(storage: Storage) -> None:
    """A crash between registering and creating ``meta/control`` leaves a registered, uninitialized partition."""
    registry = PartitionRegistry(storage.oxia, root=storage.root)
    registry.register(PartitionKeys("half", 3, storage.root))  # what a writer that died right after registering leaves
    catalog = LogCatalog(storage.oxia, root=storage.root)
    assert catalog.partitions() == {"half": [PartitionKeys("half", 3, storage.root)]}
    with pytest.raises(PartitionNotInitialized):
        catalog.status(PartitionKeys("half", 3, storage.root))
    report = GarbageCollector(dataclasses.replace(storage, clock=lambda: 2**40), config=GcConfig(grace_ms=1)).collect()
    assert report.errors == []  # not initialized yet is not an error

    writer = LogWriter(storage)
    assert writer.initialize_partition("half", 3)  # completes the creation
    writer.initialize_partition("fresh", 0)
    keys = {t: PartitionKeys(t, p, storage.root) for t, p in (("fresh", 0), ("half", 3))}
    assert catalog.partitions() == {t: [k] for t, k in keys.items()}
    assert catalog.status(PartitionKeys("half", 3, storage.root)).high_watermark == 0


def test_creation_registers_first(oxia_store: OxiaStore, root: str) -> None:
    """Whatever step of creation a crash stops, a partition whose control exists is registered."""
    meta = PartitionMetadata(oxia_store, PartitionKeys("ordered", 7, root))
    seen: list[str] = []
    real_put = oxia_store.put

    def recording_put(key: str, value: bytes, **kwargs: object) -> int:
        seen.append(key)
        return real_put(key, value, **kwargs)  # type: ignore[arg-type]

    oxia_store.put = recording_put  # type: ignore[method-assign]
    try:
        assert meta.create()
    finally:
        del oxia_store.put
    keys = PartitionKeys("ordered", 7, root)
    assert seen == [RegistryKeys(root).partition("ordered", 7), keys.compaction_cursor, keys.control]
