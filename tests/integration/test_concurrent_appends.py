"""Concurrent writers, threads and processes, on one partition: unique, contiguous offsets."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ThreadPoolExecutor

import pytest

from llog.blob_store import BlobStore
from llog.config import OxiaConfig, S3Config
from llog.oxia_store import OxiaStore
from llog.reader import LogReader
from llog.writer import LogWriter
from tests.conftest import BUCKET

pytestmark = pytest.mark.oxia


def _append_many(oxia_config: OxiaConfig, s3_config: S3Config, topic: str, writer_id: int, appends: int
                 ) -> list[tuple[int, int, bytes]]:
    """Runs in a worker process: a fresh writer (Oxia clients are not fork-safe)."""
    with LogWriter(OxiaStore(oxia_config), BlobStore(s3_config), bucket=BUCKET) as writer:
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


def test_threads_share_one_writer(writer: LogWriter, reader: LogReader, oxia_config: OxiaConfig,
                                  s3_config: S3Config, topic: str) -> None:
    writer.initialize_partition(topic, 0)
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(_append_many, oxia_config, s3_config, topic, w, 10) for w in range(8)]
        results = [r for f in futures for r in f.result()]
    assert len(results) == 80
    assert_unique_and_contiguous(results, reader, topic)


def test_processes_each_with_their_own_writer(writer: LogWriter, reader: LogReader, oxia_config: OxiaConfig,
                                              s3_config: S3Config, topic: str) -> None:
    writer.initialize_partition(topic, 0)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        chunks = pool.starmap(_append_many, [(oxia_config, s3_config, topic, w, 8) for w in range(4)])
    results = [r for chunk in chunks for r in chunk]
    assert len(results) == 32
    assert_unique_and_contiguous(results, reader, topic)
