"""The consume Lambda's cache of whole compacted objects."""

from __future__ import annotations

import pytest

from llog.config import CacheConfig
from llog.errors import ConfigurationError
from llog.store.object_cache import ObjectCache


def test_hits_return_the_same_bytes_and_count() -> None:
    cache = ObjectCache(100)
    assert cache.get("s3://b/a") is None
    cache.put("s3://b/a", b"x" * 10)
    assert cache.get("s3://b/a") == b"x" * 10
    assert (cache.hits, cache.misses, cache.size_bytes) == (1, 1, 10)


def test_least_recently_used_objects_go_first_to_stay_within_the_bound() -> None:
    cache = ObjectCache(30)
    for key in ("a", "b", "c"):
        cache.put(key, b"1" * 10)
    assert cache.get("a") is not None  # now the most recently used
    cache.put("d", b"2" * 10)
    assert cache.get("b") is None
    assert [k for k in "acd" if cache.get(k) is not None] == ["a", "c", "d"]
    assert cache.size_bytes == 30


def test_an_object_larger_than_the_cache_is_not_kept_and_a_re_put_replaces() -> None:
    cache = ObjectCache(10)
    cache.put("big", b"x" * 11)
    assert cache.get("big") is None
    cache.put("k", b"12345")
    cache.put("k", b"123")
    assert (cache.get("k"), cache.size_bytes) == (b"123", 3)


def test_zero_bytes_disables_it() -> None:
    cache = ObjectCache(0)
    cache.put("k", b"v")
    assert not cache.enabled
    assert cache.get("k") is None


def test_configuration() -> None:
    assert ObjectCache.from_env({}).max_bytes == CacheConfig().object_cache_bytes == 256 * 1024 * 1024
    assert not ObjectCache.from_env({"LLOG_CONSUME_OBJECT_CACHE_BYTES": "0"}).enabled
    with pytest.raises(ConfigurationError, match="LLOG_CONSUME_OBJECT_CACHE_BYTES"):
        ObjectCache.from_env({"LLOG_CONSUME_OBJECT_CACHE_BYTES": "-1"})
