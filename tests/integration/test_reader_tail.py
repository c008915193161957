"""``LogReader.tail``: a sequential partition's high watermark proved by the scan that finds the batches.

Each answer is checked against ``partition_info`` (which reads the sequence's
tail) and ``batches`` on a real Oxia server, and the reads are counted on a
reader of its own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llog.config import OxiaConfig, S3Config
from llog.format.kv.index import IndexedBatch
from llog.protocol.append import LogWriter
from llog.protocol.read import LogReader
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from tests.conftest import BUCKET
from tests.protocols import CAS

pytestmark = pytest.mark.oxia

BATCH_SIZES = (1, 3, 2, 5, 1)  # offsets 1, 2-4, 5-6, 7-11, 12


@pytest.fixture
def writer(storage: Storage) -> LogWriter:
    """A writer whose new partitions take the default, sequential protocol."""
    return LogWriter(storage)


@pytest.fixture
def own_reader(oxia_config: OxiaConfig, s3_config: S3Config, root: str, topic: str) -> Iterator[LogReader]:
    """A reader with an Oxia client of its own, so its counters count its reads alone; it knows the topic's
    folder already (its record, read once per ``TOPIC_CACHE_TTL_MS``)."""
    with OxiaStore(oxia_config) as oxia:
        reader = LogReader(Storage(oxia, BlobStore(s3_config), BUCKET, root))
        reader.layouts.topic_id(topic)
        yield reader


def fill(writer: LogWriter, topic: str, sizes: tuple[int, ...] = BATCH_SIZES) -> None:
    writer.initialize_partition(topic, 0)
    for n, size in enumerate(sizes):
        writer.append(topic, 0, [f"{n}-{i}".encode() for i in range(size)])


def expected(reader: LogReader, topic: str, start: int) -> tuple[int, list[IndexedBatch]]:
    info = reader.partition_info(topic, 0)
    batches = list(reader.batches(info, start)) if start <= info.high_watermark else []
    return info.high_watermark, batches


def reads(reader: LogReader, before: dict[str, int] | None = None) -> dict[str, int]:
    """The reader's Oxia calls by operation, since ``before``."""
    now = {op: s.calls for op, s in reader.storage.oxia.counters.snapshot().items()}
    made = {op: n - (before or {}).get(op, 0) for op, n in now.items()}
    return {op: n for op, n in made.items() if n}


def test_a_scan_that_reaches_the_tail_gives_the_high_watermark_and_the_batches(
    writer: LogWriter, own_reader: LogReader, topic: str
) -> None:
    fill(writer, topic)
    hw = sum(BATCH_SIZES)
    for start in range(2, hw + 2):  # from inside the log to the tail (hw + 1): the entry before start exists
        want_hw, want = expected(own_reader, topic, start)
        before = reads(own_reader)
        info, batches = own_reader.tail(topic, 0, start, page=64)
        assert reads(own_reader, before) == {"get": 1, "range_scan": 1}, start  # control and one page; no tail read
        assert info.high_watermark == want_hw == hw
        assert batches == want, start


@pytest.mark.parametrize("start", [0, 1])
def test_nothing_before_the_start_falls_back_to_reading_the_tail(
    writer: LogWriter, own_reader: LogReader, topic: str, start: int
) -> None:
    fill(writer, topic)
    before = reads(own_reader)
    info, batches = own_reader.tail(topic, 0, start, page=64)
    assert batches is None  # the caller scans with batches()
    assert info.high_watermark == sum(BATCH_SIZES)
    assert reads(own_reader, before) == {"get": 1, "get_lower": 1}


def test_a_full_page_serves_its_batches_and_reads_the_tail(
    writer: LogWriter, own_reader: LogReader, topic: str
) -> None:
    fill(writer, topic)
    # From offset 5 the entries ending at 4, 6, 11 and 12: four, more than a page of three plus the one before.
    before = reads(own_reader)
    info, batches = own_reader.tail(topic, 0, 5, page=3)
    assert reads(own_reader, before) == {"get": 1, "range_scan": 1, "get_lower": 1}  # a reader catching up
    assert info.high_watermark == sum(BATCH_SIZES)
    assert batches == expected(own_reader, topic, 5)[1][:3]
    info, batches = own_reader.tail(topic, 0, 5, page=4)  # page + 1 = 5 > 4 entries: the scan saw the end
    assert info.high_watermark == sum(BATCH_SIZES)
    assert batches == expected(own_reader, topic, 5)[1]


def test_an_empty_partition_and_an_offset_past_the_tail_fall_back(
    writer: LogWriter, own_reader: LogReader, topic: str
) -> None:
    writer.initialize_partition(topic, 0)
    info, batches = own_reader.tail(topic, 0, 1, page=64)
    assert (info.high_watermark, batches) == (0, None)
    fill(writer, topic, (2,))
    info, batches = own_reader.tail(topic, 0, 5, page=64)  # the entry before 5 does not exist
    assert (info.high_watermark, batches) == (2, None)


def test_a_new_generation_after_a_fence_keeps_the_high_watermark(
    writer: LogWriter, own_reader: LogReader, topic: str
) -> None:
    fill(writer, topic, (2, 3))
    writer.fence(topic, 0)
    writer.unfence(topic, 0)  # a new generation opens at offset 6
    for start in (5, 6):
        info, batches = own_reader.tail(topic, 0, start, page=64)
        assert info.high_watermark == 5
        assert batches == expected(own_reader, topic, start)[1]
    writer.append(topic, 0, [b"after"])
    for start in range(2, 8):
        info, batches = own_reader.tail(topic, 0, start, page=64)
        want_hw, want = expected(own_reader, topic, start)
        assert info.high_watermark == want_hw == 6
        if batches is not None:
            assert batches == want, start


def test_a_cas_partition_reads_as_before(storage: Storage, own_reader: LogReader, topic: str) -> None:
    writer = LogWriter(storage, config=CAS)
    fill(writer, topic)
    before = reads(own_reader)
    info, batches = own_reader.tail(topic, 0, 5, page=64)
    assert (info.high_watermark, batches) == (sum(BATCH_SIZES), None)  # its high watermark is in control
    assert reads(own_reader, before) == {"get": 1}


def test_a_reused_control_record_that_proves_nothing_is_read_afresh(
    writer: LogWriter, own_reader: LogReader, topic: str
) -> None:
    fill(writer, topic, (2, 3))
    stale = own_reader.partition_info(topic, 0).control
    writer.fence(topic, 0)
    writer.unfence(topic, 0)  # a generation the stale record does not know
    writer.append(topic, 0, [b"six"])
    before = reads(own_reader)
    info, batches = own_reader.tail(topic, 0, 1, page=64, control=stale)  # offset 1: nothing before it to prove
    assert batches is None
    assert info.high_watermark == 6
    assert reads(own_reader, before)["get"] == 1  # control, read again for the answer
    assert info.control == own_reader.partition_info(topic, 0).control
