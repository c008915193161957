"""The S3 operation counts of bench/cost_model.py, measured on the real code against moto S3.

What needs no Oxia is measured here through the BlobStore's counters: the
produce path's PUT (the WAL blob is written before Oxia is contacted, so an
unreachable Oxia server still lets it be counted), the bytes it stores, and
the range GETs the consume path and compaction issue for the slices they read
(``BlobFetcher``). The Oxia counts of the model are measured on a real Oxia
server by ``test_cost_model_oxia_counts.py``.
"""

from __future__ import annotations

import uuid

import pytest

from bench.cost import inputs, operations
from devserver.devstack import free_port
from llog.config import OxiaConfig, S3Config
from llog.format.codec import encode_batch
from llog.format.keys import S3Location
from llog.format.kv.document import DataRef
from llog.protocol.append import LogWriter, SharedAppendGroup
from llog.store.fetch import BlobFetcher
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from tests.conftest import BUCKET

A = inputs.Assumptions()


def calls(store: BlobStore) -> dict[str, int]:
    return {op: stats.calls for op, stats in store.counters.snapshot().items()}


@pytest.mark.parametrize("size", inputs.REQUEST_SIZES)
def test_a_produce_request_is_one_put_of_its_bytes_plus_a_bounded_overhead(s3_config: S3Config, size: int) -> None:
    blobs = BlobStore(s3_config)
    unreachable = OxiaConfig(f"127.0.0.1:{free_port()}", connect_timeout_ms=300, request_timeout_ms=300,
                             max_retries=0, close_timeout_ms=300)  # fmt: skip
    with OxiaStore(unreachable) as oxia:
        writer = LogWriter(Storage(oxia, blobs, BUCKET, f"cost-{uuid.uuid4().hex[:8]}"))
        (result,) = writer.append_shared([SharedAppendGroup("orders", 0, [b"x" * size])])
    assert result.error is not None  # Oxia is unreachable: nothing committed, but the PUT happened first

    put = blobs.counters.snapshot()["put"]
    assert calls(blobs) == {"put": 1}
    assert put.calls == operations.produce_part(size, A).s3_put_class
    assert size < put.bytes <= operations.wal_blob_bytes(size, A)


@pytest.mark.parametrize("size", inputs.REQUEST_SIZES)
def test_a_batch_of_one_record_fits_the_modelled_overhead(size: int) -> None:
    assert len(encode_batch([b"x" * size])) <= size + inputs.Code().batch_overhead_bytes


def test_reading_slices_of_different_blobs_is_one_range_get_per_blob(s3_config: S3Config) -> None:
    blobs = BlobStore(s3_config)
    refs = []
    for _ in range(5):  # five produce requests: five WAL blobs
        location = S3Location(BUCKET, f"cost/{uuid.uuid4()}")
        blobs.put(location, b"h" * 40 + b"x" * 1_000)
        refs.append(DataRef(location.uri, byte_offset=40, byte_length=1_000))
    before = calls(blobs)

    fetcher = BlobFetcher(blobs)
    fetcher.prefetch(refs)
    assert all(fetcher.get(ref) == b"x" * 1_000 for ref in refs)

    assert calls(blobs)["range_get"] - before.get("range_get", 0) == len(refs)
    # The model's consume and compaction reads: one GET-class request per WAL blob read.
    assert operations.compaction_part(1_000, A).s3_get_class == pytest.approx(1.0)
    assert operations.consume_part(1_000, A).s3_get_class == pytest.approx(A.consumers)


def test_slices_of_one_blob_are_read_with_one_range_get(s3_config: S3Config) -> None:
    blobs = BlobStore(s3_config)
    location = S3Location(BUCKET, f"cost/{uuid.uuid4()}")
    blobs.put(location, bytes(range(256)) * 40)
    refs = [DataRef(location.uri, byte_offset=o, byte_length=100) for o in (0, 100, 300, 2_000)]

    fetcher = BlobFetcher(blobs)
    fetcher.prefetch(refs)
    assert [fetcher.get(r) for r in refs] == [(bytes(range(256)) * 40)[o : o + 100] for o in (0, 100, 300, 2_000)]
    assert calls(blobs) == {"put": 1, "range_get": 1}


def test_a_compacted_entry_is_read_with_one_whole_object_get(s3_config: S3Config) -> None:
    blobs = BlobStore(s3_config)
    location = S3Location(BUCKET, f"cost/{uuid.uuid4()}")
    blobs.put(location, b"c" * 10_000)

    fetcher = BlobFetcher(blobs)
    fetcher.prefetch([DataRef(location.uri)])
    assert fetcher.get(DataRef(location.uri)) == b"c" * 10_000
    assert calls(blobs) == {"put": 1, "get": 1}
