"""Unit tests of the in-process tail cache (llog/service/tail_cache.py).

Batches are real ``bytes-batch-v1`` batches (``encode_batch``), as the writer
hands them to ``on_commit``.
"""

from __future__ import annotations

import gc
import threading
from typing import cast

import pytest

from llog.config import CacheConfig
from llog.format.codec import Record, RecordBatch, decode_batch, encode_batch
from llog.protocol.read import LogReader
from llog.protocol.topics import STALE_TOPIC_MS
from llog.service import tail_cache
from llog.service.consume import ConsumeService
from llog.service.tail_cache import TailCache, cache_tag
from llog.store.changes import ChangeFeed, Changes, Wakeup


def batch(*values: bytes) -> RecordBatch:
    return decode_batch(encode_batch(list(values), now_ms=1))


def size_of(n_records: int = 1, value_size: int = 1) -> int:
    return batch(*[b"x" * value_size] * n_records).nbytes


def test_contiguous_batches_are_looked_up_by_offset():
    cache = TailCache(1 << 20)
    cache.add("orders", 0, 1, batch(b"a", b"b"), at_end=True)
    cache.add("orders", 0, 3, batch(b"c"), at_end=True)
    cache.add("orders", 0, 4, batch(b"d", b"e", b"f"), at_end=True)

    for offset, (start, first_value) in {1: (1, b"a"), 2: (1, b"a"), 3: (3, b"c"), 4: (4, b"d"), 6: (4, b"d")}.items():
        hit = cache.lookup("orders", 0, offset)
        assert hit is not None
        assert hit[0] == start
        assert hit[1].value(0) == first_value
    assert cache.lookup("orders", 0, 7) is None
    assert cache.lookup("orders", 0, 0) is None
    assert cache.lookup("orders", 1, 1) is None
    assert cache.cached_high_watermark("orders", 0) == 6
    assert cache.cached_high_watermark("orders", 1) is None
    assert (cache.hits, cache.misses) == (5, 3)


def test_a_gap_starts_the_partition_over():
    cache = TailCache(1 << 20)
    cache.add("orders", 0, 1, batch(b"a"), at_end=True)
    cache.add("orders", 0, 5, batch(b"e"), at_end=True)  # offsets 2-4 unknown: not contiguous
    assert cache.lookup("orders", 0, 1) is None
    assert cache.lookup("orders", 0, 5) is not None
    assert cache.cached_high_watermark("orders", 0) == 5
    assert cache.size_bytes == batch(b"e").nbytes


def test_re_adding_cached_offsets_changes_nothing():
    cache = TailCache(1 << 20)
    cache.add("orders", 0, 1, batch(b"a", b"b"), at_end=True)
    before = cache.size_bytes
    cache.add("orders", 0, 2, batch(b"other"), at_end=True)
    cache.add("orders", 0, 1, batch(b"a", b"b"), at_end=True)
    assert cache.size_bytes == before
    hit = cache.lookup("orders", 0, 2)
    assert hit is not None
    assert hit[1].value(1) == b"b"


def test_partitions_are_independent():
    cache = TailCache(1 << 20)
    cache.add("orders", 0, 1, batch(b"a"), at_end=True)
    cache.add("orders", 1, 1, batch(b"b"), at_end=True)
    cache.add("audit", 0, 7, batch(b"c"), at_end=True)
    assert cache.lookup("orders", 1, 1)[1].value(0) == b"b"  # type: ignore[index]
    assert cache.cached_high_watermark("audit", 0) == 7


def test_eviction_by_bytes_drops_the_oldest_batches_first_across_partitions():
    one = size_of()
    cache = TailCache(3 * one)
    cache.add("orders", 0, 1, batch(b"a"), at_end=True)
    cache.add("orders", 1, 1, batch(b"b"), at_end=True)
    cache.add("orders", 0, 2, batch(b"c"), at_end=True)
    assert cache.size_bytes == 3 * one
    cache.add("orders", 1, 2, batch(b"d"), at_end=True)  # over capacity: orders/0 offset 1 (the oldest) goes

    assert cache.size_bytes == 3 * one
    assert cache.lookup("orders", 0, 1) is None
    assert cache.lookup("orders", 0, 2) is not None
    assert cache.lookup("orders", 1, 1) is not None
    cache.add("orders", 0, 3, batch(b"e"), at_end=True)  # next oldest: orders/1 offset 1
    assert cache.lookup("orders", 1, 1) is None
    assert cache.lookup("orders", 1, 2) is not None
    assert cache.cached_high_watermark("orders", 0) == 3


def test_evicting_a_partitions_last_batch_forgets_the_partition():
    one = size_of()
    cache = TailCache(one)
    cache.add("orders", 0, 1, batch(b"a"), at_end=True)
    cache.add("orders", 1, 1, batch(b"b"), at_end=True)
    assert cache.cached_high_watermark("orders", 0) is None
    assert cache.cached_high_watermark("orders", 1) == 1


def test_a_batch_larger_than_the_cache_is_not_kept():
    cache = TailCache(size_of(1, 10))
    big = encode_batch([b"x" * 1000], now_ms=1)
    cache.on_commit("orders", 0, 1, big)
    assert cache.cached_high_watermark("orders", 0) is None
    cache.add("orders", 0, 1, decode_batch(big), at_end=True)
    assert cache.cached_high_watermark("orders", 0) is None
    assert cache.size_bytes == 0


def test_on_commit_decodes_a_real_encoded_batch():
    cache = TailCache(1 << 20)
    records: list[Record | bytes] = [Record(b"v1", b"k1", (("h", b"\x00"),), 17), Record(b"\xff\xfe"), b"plain"]
    cache.on_commit("orders", 0, 41, encode_batch(records, now_ms=99))
    hit = cache.lookup("orders", 0, 42)
    assert hit is not None
    start, cached = hit
    assert start == 41
    assert len(cached) == 3
    assert cached.record(0) == Record(b"v1", b"k1", (("h", b"\x00"),), 17)
    assert cached.record(1) == Record(b"\xff\xfe", None, (), 99)
    assert cached.value(2) == b"plain"
    assert cache.cached_high_watermark("orders", 0) == 43


def test_cached_batches_add_no_objects_for_the_garbage_collector_to_traverse():
    """A full collection stops the process and traverses every tracked object: a cache of small batches,
    which holds hundreds of thousands of them, must not add objects per batch."""
    cache = TailCache(1 << 30)
    encoded = [encode_batch([b"record %d" % i], now_ms=1) for i in range(2_000)]
    gc.collect()
    before = len(gc.get_objects())
    for i, data in enumerate(encoded):
        if i % 2:
            cache.on_commit("orders", 0, i + 1, data)  # the writer's batches
        else:
            cache.add("orders", 0, i + 1, decode_batch(data), at_end=True)  # a reader's
    gc.collect()  # tuples of untracked objects are untracked by a collection
    assert len(gc.get_objects()) - before < 500  # opened batches: about eight per batch, 16,000
    hit = cache.lookup("orders", 0, 1_500)
    assert hit is not None
    assert hit[1].value(0) == b"record 1499"


def test_a_batch_opened_from_a_larger_buffer_is_cached_as_its_own_bytes():
    data = encode_batch([b"a", b"b"], now_ms=1)
    blob = bytearray(b"x" * 100 + data + b"y" * 100)  # as a batch inside a fetched S3 object
    cache = TailCache(1 << 20)
    cache.add("orders", 0, 1, decode_batch(memoryview(blob)[100 : 100 + len(data)]), at_end=True)
    blob[100 : 100 + len(data)] = bytes(len(data))  # the object's buffer is not what the cache keeps
    hit = cache.lookup("orders", 0, 2)
    assert hit is not None
    assert (hit[0], hit[1].value(1)) == (1, b"b")
    assert cache.size_bytes == len(data)


def test_a_re_read_of_held_offsets_from_a_larger_buffer_is_not_copied(monkeypatch):
    data = encode_batch([b"a", b"b"], now_ms=1)
    blob = b"x" * 100 + data
    copies = []
    encoded = RecordBatch.encoded

    def counted(self: RecordBatch) -> bytes:
        copies.append(self)
        return encoded(self)

    monkeypatch.setattr(RecordBatch, "encoded", counted)
    cache = TailCache(1 << 20)
    cache.add("orders", 0, 1, decode_batch(memoryview(blob)[100:]), at_end=True)
    cache.add("orders", 0, 1, decode_batch(memoryview(blob)[100:]), at_end=True)  # held: nothing to keep
    assert len(copies) == 1
    assert cache.size_bytes == len(data)


def test_watching_wakes_on_an_add_to_a_watched_partition_only_while_registered():
    cache = TailCache(1 << 20)
    wakeup = Wakeup()
    with cache.watching([("audit", 0), ("orders", 0)], wakeup):
        cache.add("orders", 1, 1, batch(b"other"), at_end=True)
        assert wakeup.wait(0) is None
        cache.add("orders", 0, 1, batch(b"a"), at_end=True)
        # Tagged as the cache's news: nothing to re-read from Oxia.
        assert wakeup.wait(0) == Changes(frozenset({cache_tag(("orders", 0))}))
        cache.add("orders", 0, 1, batch(b"a"), at_end=True)  # already cached: no news
        assert wakeup.wait(0) is None
    cache.add("orders", 0, 2, batch(b"b"), at_end=True)
    assert wakeup.wait(0) is None


def test_watching_wakes_a_waiter_in_another_thread():
    cache = TailCache(1 << 20)
    wakeup = Wakeup()
    with cache.watching([("orders", 0)], wakeup):
        timer = threading.Timer(0.05, cache.on_commit, args=("orders", 0, 1, encode_batch([b"a"])))
        timer.start()
        woke = wakeup.wait(30)
        timer.join()
    assert woke == Changes(frozenset({cache_tag(("orders", 0))}))
    assert cache.cached_high_watermark("orders", 0) == 1


def test_zero_bytes_disables_the_cache():
    cache = TailCache(0)
    assert not cache.enabled
    cache.add("orders", 0, 1, batch(b"a"), at_end=True)
    cache.on_commit("orders", 0, 2, encode_batch([b"b"]))
    assert cache.lookup("orders", 0, 1) is None
    assert cache.cached_high_watermark("orders", 0) is None
    assert cache.size_bytes == 0
    # The consume service does not consult a disabled cache at all.
    assert ConsumeService(cast(LogReader, object()), tail_cache=cache).tail_cache is None
    assert ConsumeService(cast(LogReader, object()), tail_cache=TailCache(1)).tail_cache is not None


def test_tail_cache_from_env(monkeypatch):
    monkeypatch.delenv("LLOG_TAIL_CACHE_MAX_BYTES", raising=False)
    assert TailCache.from_env().max_bytes == CacheConfig().tail_cache_bytes == 512 * 1024 * 1024
    monkeypatch.setenv("LLOG_TAIL_CACHE_MAX_BYTES", "0")
    assert not TailCache.from_env().enabled
    monkeypatch.setenv("LLOG_TAIL_CACHE_MAX_BYTES", "-1")
    with pytest.raises(Exception, match="LLOG_TAIL_CACHE_MAX_BYTES"):
        TailCache.from_env()


def test_concurrent_adds_and_lookups_stay_consistent():
    cache = TailCache(40 * size_of())
    errors: list[BaseException] = []

    def writer(partition: int) -> None:
        for offset in range(1, 201):
            cache.add("orders", partition, offset, batch(b"x"), at_end=True)

    def reader(partition: int) -> None:
        try:
            for _ in range(400):
                hw = cache.cached_high_watermark("orders", partition)
                hit = cache.lookup("orders", partition, hw or 1)
                if hit is not None:
                    assert hit[1].value(0) == b"x"
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=f, args=(p,)) for p in range(3) for f in (writer, reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert errors == []
    assert cache.size_bytes <= 40 * size_of()
    # Eviction is global and oldest-first: a partition keeps its newest batches or nothing.
    tails = [cache.cached_high_watermark("orders", p) for p in range(3)]
    assert set(tails) <= {200, None}
    assert 200 in tails


def test_a_tail_read_short_of_the_end_is_cached_but_not_taken_for_the_end():
    """A reader catching up caches what it read, but must not wait at its end as if nothing followed."""
    cache = TailCache(1 << 20)
    cache.add("orders", 0, 1, batch(b"a", b"b"), at_end=False)
    assert cache.lookup("orders", 0, 2) is not None
    assert cache.cached_high_watermark("orders", 0) is None
    cache.add("orders", 0, 3, batch(b"c"), at_end=True)  # a read that reached the high watermark
    assert cache.cached_high_watermark("orders", 0) == 3
    cache.add("orders", 0, 3, batch(b"c"), at_end=False)  # a re-read changes nothing
    assert cache.cached_high_watermark("orders", 0) == 3


def test_a_higher_watermark_from_oxia_ends_the_cached_tail_s_claim():
    cache = TailCache(1 << 20)
    cache.on_commit("orders", 0, 1, encode_batch([b"a"], now_ms=1))
    assert cache.cached_high_watermark("orders", 0) == 1
    cache.note_high_watermark("orders", 0, 1)  # still the end
    assert cache.cached_high_watermark("orders", 0) == 1
    cache.note_high_watermark("orders", 0, 4)  # another process appended
    assert cache.cached_high_watermark("orders", 0) is None
    assert cache.lookup("orders", 0, 1) is not None  # the records themselves stay
    cache.on_commit("orders", 0, 5, encode_batch([b"e"], now_ms=1))  # this process appends again: the end
    assert cache.cached_high_watermark("orders", 0) == 5


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


STALE_S = STALE_TOPIC_MS / 1000


def test_a_partition_oxia_has_not_confirmed_for_stale_topic_ms_is_forgotten():
    # A deleted topic's partition is confirmed no more; reclaim waits longer than this, so a partition created
    # again under the same name never meets the old one's batches.
    clock = Clock()
    cache = TailCache(1 << 20, clock=clock)
    cache.on_commit("orders", 0, 1, encode_batch([b"a"], now_ms=1))
    clock.now += STALE_S
    assert cache.lookup("orders", 0, 1) is not None  # just within
    clock.now += 1
    assert cache.lookup("orders", 0, 1) is None
    assert cache.cached_high_watermark("orders", 0) is None
    assert cache.size_bytes == 0


@pytest.mark.parametrize("confirm", ["re-read", "high watermark", "append"])
def test_oxia_confirming_the_partition_keeps_its_batches(confirm: str):
    clock = Clock()
    cache = TailCache(1 << 20, clock=clock)
    cache.on_commit("orders", 0, 1, encode_batch([b"a"], now_ms=1))
    for _ in range(3):
        clock.now += STALE_S - 1
        if confirm == "re-read":  # a read through Oxia and S3 of something already cached
            cache.add("orders", 0, 1, batch(b"a"), at_end=True)
        elif confirm == "high watermark":
            cache.note_high_watermark("orders", 0, 1)
        else:
            end = cache.cached_high_watermark("orders", 0)
            assert end is not None
            cache.on_commit("orders", 0, end + 1, encode_batch([b"b"], now_ms=1))
    assert cache.lookup("orders", 0, 1) is not None


def test_a_high_watermark_below_the_cached_end_drops_the_partition():
    # Deleted, reclaimed and created again: offsets start over below what the cache holds.
    cache = TailCache(1 << 20)
    cache.on_commit("orders", 0, 1, encode_batch([b"a", b"b", b"c"], now_ms=1))
    cache.note_high_watermark("orders", 0, 1)
    assert cache.lookup("orders", 0, 1) is None
    assert cache.cached_high_watermark("orders", 0) is None
    assert cache.size_bytes == 0
    cache.on_commit("orders", 0, 1, encode_batch([b"new"], now_ms=1))  # the new partition's first append
    hit = cache.lookup("orders", 0, 1)
    assert hit is not None
    assert hit[1].value(0) == b"new"


def test_partitions_followed_without_cached_batches_are_let_go():
    """A consume marks each partition it reads (its notifications are followed from then on); partitions the
    cache holds nothing of are let go past FOLLOW_SLACK, so a process reading many partitions once keeps no
    watcher per partition for ever."""
    feed = ChangeFeed(lambda: [])  # never connects: nothing is trusted, only the bookkeeping is checked
    cache = TailCache(1 << 20)
    try:
        cache.add("orders", 0, 1, batch(b"a"), at_end=True)
        cache.mark("orders", 0, feed, {"orders/0/control": None})
        for p in range(1, tail_cache.FOLLOW_SLACK + 10):
            cache.mark("orders", p, feed, {f"orders/{p}/control": None})
        followed = set(cache._follows)
        assert len(followed) <= tail_cache.FOLLOW_SLACK + 2
        assert ("orders", 0) in followed  # it has cached batches
        assert len(feed._watchers._by_key) == len(followed)  # the others' watchers went with them
        cache.forget_topic("orders")
        assert not cache._follows
        assert not feed._watchers
    finally:
        feed.close()
