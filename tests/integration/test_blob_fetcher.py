"""The consume path's fetcher against moto: whole compacted objects come from the object cache once cached."""

from __future__ import annotations

import uuid

from llog.format.keys import S3Location
from llog.format.kv.document import DataRef
from llog.store.fetch import BlobFetcher
from llog.store.object_cache import ObjectCache
from llog.store.s3 import BlobStore
from tests.conftest import BUCKET


def gets(blobs: BlobStore) -> int:
    stats = blobs.counters.snapshot()
    return sum(stats[op].calls for op in ("get", "range_get") if op in stats)


def test_a_whole_object_is_fetched_once_across_requests(blob_store: BlobStore) -> None:
    location = S3Location(BUCKET, f"fetcher-{uuid.uuid4().hex}/data/compacted/object")
    blob_store.put(location, b"compacted bytes")
    whole = DataRef(location.uri)  # a compacted entry names the whole object
    cache = ObjectCache(1 << 20)
    before = gets(blob_store)

    first = BlobFetcher(blob_store, cache)
    first.prefetch([whole])
    second = BlobFetcher(blob_store, cache)  # the next request, same environment
    second.prefetch([whole])

    assert first.get(whole) == second.get(whole) == b"compacted bytes"
    assert gets(blob_store) - before == 1
    assert (cache.hits, cache.misses) == (1, 1)


def test_slices_of_wal_blobs_are_not_cached(blob_store: BlobStore) -> None:
    location = S3Location(BUCKET, f"fetcher-{uuid.uuid4().hex}/wal-shared/blob")
    blob_store.put(location, b"0123456789")
    ref = DataRef(location.uri, byte_offset=2, byte_length=3)
    cache = ObjectCache(1 << 20)
    before = gets(blob_store)

    for _ in range(2):
        fetcher = BlobFetcher(blob_store, cache)
        fetcher.prefetch([ref])
        assert fetcher.get(ref) == b"234"

    assert gets(blob_store) - before == 2
    assert cache.size_bytes == 0
