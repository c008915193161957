"""Concurrent writers, threads and processes: unique, contiguous offsets; with compactors and GC racing them."""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from llog.config import CompactorConfig, GcConfig, OxiaConfig, S3Config, WriterConfig
from llog.errors import CommitDeadlineExceeded
from llog.format.kv.control import AppendProtocol
from llog.protocol.append import LogWriter, SharedAppendGroup
from llog.protocol.compaction import Compactor
from llog.protocol.gc import GarbageCollector
from llog.protocol.read import LogReader
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from tests.conftest import BUCKET

pytestmark = pytest.mark.oxia


def append_many(oxia_config: OxiaConfig, s3_config: S3Config, root: str, topic: str, writer_id: int, appends: int,
                config: WriterConfig | None = None) -> list[tuple[int, int, bytes]]:
    """Runs in a thread or a worker process: a fresh writer with its own Oxia client (not fork-safe)."""
    with LogWriter(Storage(OxiaStore(oxia_config), BlobStore(s3_config), BUCKET, root), config=config) as writer:
        out = []
        for i in range(appends):
            payload = f"w{writer_id}-{i}".encode()
            result = writer.append(topic, 0, [payload, payload + b"+"])
            assert result.start_offset is not None
            assert result.end_offset is not None
            out.append((result.start_offset, result.end_offset, payload))
        return out


def assert_unique_and_contiguous(results: list[tuple[int, int, bytes]], reader: LogReader, topic: str) -> None:
    offsets = sorted(o for start, end, _ in results for o in range(start, end + 1))
    assert offsets == list(range(1, len(offsets) + 1))
    assert reader.high_watermark(topic, 0) == len(offsets)
    by_offset = {start: payload for start, _, payload in results}
    for record in reader.iter_from(topic, 0, 1):
        if record.offset in by_offset:
            assert record.value == by_offset[record.offset]
        else:
            assert record.value == by_offset[record.offset - 1] + b"+"


PROTOCOLS = pytest.mark.parametrize("protocol", list(AppendProtocol), ids=[p.value for p in AppendProtocol])


@PROTOCOLS
def test_threads_each_with_their_own_writer(reader: LogReader, oxia_config: OxiaConfig, s3_config: S3Config,
                                            topic: str, root: str, storage: Storage, protocol: AppendProtocol) -> None:
    config = WriterConfig(append_protocol=protocol)
    LogWriter(storage, config=config).initialize_partition(topic, 0)
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(append_many, oxia_config, s3_config, root, topic, w, 10, config) for w in range(8)]
        results = [r for f in futures for r in f.result()]
    assert len(results) == 80
    assert_unique_and_contiguous(results, reader, topic)


@PROTOCOLS
def test_processes_each_with_their_own_writer(reader: LogReader, oxia_config: OxiaConfig, s3_config: S3Config,
                                              topic: str, root: str, storage: Storage, protocol: AppendProtocol
                                              ) -> None:
    config = WriterConfig(append_protocol=protocol)
    LogWriter(storage, config=config).initialize_partition(topic, 0)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        chunks = pool.starmap(append_many, [(oxia_config, s3_config, root, topic, w, 8, config) for w in range(4)])
    results = [r for chunk in chunks for r in chunk]
    assert len(results) == 32
    assert_unique_and_contiguous(results, reader, topic)


@PROTOCOLS
def test_appends_compaction_and_garbage_collection_all_at_once(
    reader: LogReader, topic: str, protocol: AppendProtocol, storage: Storage
) -> None:
    """Writers, two compactors and the collector race on two partitions; every acknowledged record survives.

    Deadlines are short and the grace period only just longer than twice them
    (the rule docs/GC.md states), so the collector really does judge objects
    while appends and compactions are in flight.
    """
    config = WriterConfig(max_commit_delay_ms=1_000, append_protocol=protocol)  # docs/SEQUENTIAL_APPEND.md
    writer = LogWriter(storage, config=config)
    compactors = [
        Compactor(storage, config=CompactorConfig(max_commit_delay_ms=1_000))
        for _ in range(2)
    ]
    collector = GarbageCollector(storage, config=GcConfig(grace_ms=2_500))
    partitions = (0, 1)
    for partition in partitions:
        writer.initialize_partition(topic, partition)
    acked: dict[tuple[int, int], bytes] = {}
    unknown: set[bytes] = set()
    done = threading.Event()
    lock = threading.Lock()

    def produce(writer_id: int) -> None:
        for i in range(25):
            values = {p: f"{writer_id}-{i}-{p}".encode() for p in partitions}
            groups = [SharedAppendGroup(topic, p, [values[p]]) for p in partitions]
            for group, result in zip(groups, writer.append_shared(groups), strict=True):
                value = values[group.partition]
                with lock:
                    if result.ok:
                        assert result.start_offset is not None
                        acked[(group.partition, result.start_offset)] = value
                    else:  # a missed deadline: not acknowledged, and may or may not be readable
                        unknown.add(value)

    def background(work: Callable[[], object]) -> None:
        while not done.is_set():
            work()
            time.sleep(0.05)

    def compact_all(compactor: Compactor) -> None:
        for partition in partitions:
            # A compaction past its 1 s deadline (a loaded machine) gives up: its object is left for the
            # collector, which is part of what this race exercises. Any other error fails the test.
            with contextlib.suppress(CommitDeadlineExceeded):
                compactor.compact_once(topic, partition)

    with ThreadPoolExecutor(8) as pool:
        side = [pool.submit(background, functools.partial(compact_all, c)) for c in compactors]
        side.append(pool.submit(background, collector.collect))
        for future in [pool.submit(produce, w) for w in range(4)]:
            future.result()
        done.set()
        for future in side:
            future.result()  # re-raises anything a compactor or the collector hit

    for partition in partitions:
        records = {r.offset: r.value for r in reader.iter_from(topic, partition, 1)}
        assert sorted(records) == list(range(1, len(records) + 1))
        for (p, offset), value in acked.items():
            if p == partition:
                assert records[offset] == value
        assert set(records.values()) <= {v for (p, _), v in acked.items() if p == partition} | unknown
