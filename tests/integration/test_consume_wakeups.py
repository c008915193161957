"""Long-poll wake-ups from Oxia's change notifications (llog/store/changes.py, llog/service/consume.py).

A consumer in one process (its own ``OxiaStore``, no tail cache, as in the
consume Lambda) waits at the tail while a writer with another client
appends. The consumer's re-check timer is pushed past the test's horizon, so
only a notification can wake it before ``max_wait_ms``; the Oxia reads it
made while waiting are counted with its store's ``OperationCounters``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Iterable, Iterator
from typing import ClassVar

import pytest

from llog.config import OxiaConfig, S3Config, WriterConfig
from llog.errors import OxiaUnavailable
from llog.format.kv.control import AppendProtocol
from llog.protocol.append import LogWriter
from llog.protocol.read import LogReader
from llog.service import consume
from llog.service.consume import ConsumeRequest, ConsumeService, FetchPartition, PartitionFetch
from llog.service.tail_cache import TailCache
from llog.store.changes import ChangeFeed, Changes, Wakeup
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from tests.conftest import BUCKET, OxiaServer
from tests.integration.test_consume import await_notifications

pytestmark = pytest.mark.oxia

MB = 1 << 20
MAX_WAIT_MS = 60_000
# Far beyond MAX_WAIT_MS: a consumer that returns early was woken by a notification.
JOIN_S = 30
# A waiter's reads: its first round, and one round when woken (control, the index
# or sequence lookups). A 20 ms -> 500 ms backoff loop makes more than this in its
# first second alone.
MAX_READS_WHILE_WAITING = 8


@pytest.fixture(autouse=True)
def no_recheck(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consume, "RECHECK_S", 3_600.0)
    monkeypatch.setattr(consume, "Wakeup", TellingWakeup)


class TellingWakeup(Wakeup):
    """A long-poll's wakeup that tells when its waiter first waits: its first round of reads is done."""

    waiting: ClassVar[threading.Event] = threading.Event()

    def wait(self, timeout_s: float) -> Changes | None:
        TellingWakeup.waiting.set()
        return super().wait(timeout_s)


@pytest.fixture
def consumer_storage(oxia_config: OxiaConfig, s3_config: S3Config, root: str) -> Iterator[Storage]:
    with OxiaStore(oxia_config) as oxia:
        yield Storage(oxia, BlobStore(s3_config), BUCKET, root)


class Waiter:
    """A long-poll in a thread of its own."""

    def __init__(self, service: ConsumeService, topic: str, offset: int, max_wait_ms: int = MAX_WAIT_MS) -> None:
        self.result: list[PartitionFetch] = []
        request = ConsumeRequest(
            [FetchPartition(topic, 0, offset, 1 << 20)], max_wait_ms, min_bytes=1, max_bytes=1 << 20
        )
        self._thread = threading.Thread(target=lambda: self.result.extend(service.consume(request)), daemon=True)
        TellingWakeup.waiting.clear()
        self._thread.start()
        # Let it reach its wait: were the record appended earlier, its first round would read it.
        assert TellingWakeup.waiting.wait(JOIN_S), "the long-poll did not wait"

    def join(self) -> PartitionFetch:
        self._thread.join(JOIN_S)
        assert not self._thread.is_alive(), "the long-poll was not woken"
        (result,) = self.result
        return result


def reads_by_op(storage: Storage) -> dict[str, int]:
    return {op: s.calls for op, s in storage.oxia.counters.snapshot().items()}


def reads(storage: Storage) -> int:
    return storage.oxia.counters.total_calls()


@pytest.mark.parametrize("protocol", [AppendProtocol.CAS, AppendProtocol.SEQUENTIAL])
def test_a_waiter_is_woken_by_another_clients_append(
    storage: Storage, consumer_storage: Storage, topic: str, protocol: AppendProtocol
) -> None:
    writer = LogWriter(storage, config=WriterConfig(append_protocol=protocol))
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"before"])
    service = ConsumeService(LogReader(consumer_storage))
    service.reader.layouts.topic_id(topic)  # the topic's folder (its record), read once per TOPIC_CACHE_TTL_MS
    await_notifications(consumer_storage.oxia)
    before = reads_by_op(consumer_storage)

    waiter = Waiter(service, topic, offset=2)
    writer.append(topic, 0, [b"after"])
    result = waiter.join()

    assert [r.value for r in result.records] == [b"after"]
    assert result.high_watermark == 2
    made = {op: n - before.get(op, 0) for op, n in reads_by_op(consumer_storage).items() if n > before.get(op, 0)}
    assert sum(made.values()) <= MAX_READS_WHILE_WAITING, made
    if protocol is AppendProtocol.SEQUENTIAL:
        # The first round reads control and the page proving the tail; the woken one, no notification
        # having named control since, only the page with the new entry.
        assert made == {"get": 1, "range_scan": 2}


def test_a_waiter_with_a_tail_cache_is_woken_by_another_processs_append(
    storage: Storage, consumer_storage: Storage, topic: str
) -> None:
    # llog serve's consumer, reading a partition another process writes: the tail
    # cache holds the partition's end as last read, and only Oxia knows it moved.
    writer = LogWriter(storage)
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"before"])
    cache = TailCache(MB)
    service = ConsumeService(LogReader(consumer_storage), tail_cache=cache)
    (first,) = service.consume(ConsumeRequest([FetchPartition(topic, 0, 1, MB)], 0, min_bytes=1, max_bytes=MB))
    assert cache.cached_high_watermark(topic, 0) == 1
    await_notifications(consumer_storage.oxia)
    before = reads(consumer_storage)

    waiter = Waiter(service, topic, offset=2)
    writer.append(topic, 0, [b"after"])
    result = waiter.join()

    assert [r.value for r in first.records] == [b"before"]
    assert [r.value for r in result.records] == [b"after"]
    assert reads(consumer_storage) - before <= MAX_READS_WHILE_WAITING


def test_another_processs_appends_reach_a_waiter_at_this_processs_own_tail(
    storage: Storage, consumer_storage: Storage, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two llog serve tasks on one partition. Task A appended last, so its waiter trusts its cached tail
    # through notifications of that partition; task B appends every 0.2 s, each notification waking the
    # waiter again. A re-check every RECHECK_S however often it is woken finds B's records.
    monkeypatch.setattr(consume, "RECHECK_S", 0.5)
    cache = TailCache(MB)
    here = LogWriter(consumer_storage, commit_listener=cache.on_commit)
    here.initialize_partition(topic, 0)
    other = LogWriter(storage)
    service = ConsumeService(LogReader(consumer_storage), tail_cache=cache)
    await_notifications(consumer_storage.oxia)
    own = here.append(topic, 0, [b"here"]).end_offset
    assert own is not None
    assert cache.cached_high_watermark(topic, 0) == own
    stop = threading.Event()

    def append_elsewhere() -> None:
        while not stop.wait(0.2):
            other.append(topic, 0, [b"there"])

    appender = threading.Thread(target=append_elsewhere, daemon=True)
    appender.start()
    try:
        began = time.monotonic()
        (result,) = service.consume(
            ConsumeRequest([FetchPartition(topic, 0, own + 1, MB)], 20_000, min_bytes=1, max_bytes=MB)
        )
        waited = time.monotonic() - began
    finally:
        stop.set()
        appender.join(JOIN_S)
    assert result.records, "the waiter returned empty-handed"
    assert {r.value for r in result.records} == {b"there"}
    assert result.records[0].offset == own + 1
    assert waited < 5, f"waited {waited:.1f} s of 20 for appends made every 0.2 s"


def test_the_feed_reconnects_after_an_oxia_restart(
    oxia_server: OxiaServer, storage: Storage, consumer_storage: Storage, topic: str
) -> None:
    writer = LogWriter(storage)
    writer.initialize_partition(topic, 0)
    service = ConsumeService(LogReader(consumer_storage))
    await_notifications(consumer_storage.oxia)
    feed = consumer_storage.oxia.changes()
    connects = feed.connects

    oxia_server.restart()
    with feed.watching(Wakeup(), {}):
        deadline = time.monotonic() + JOIN_S
        while not (feed.live and feed.connects > connects):
            assert time.monotonic() < deadline, "the notification streams did not come back"
            time.sleep(0.05)
    writer.append(topic, 0, [b"warm-up"])  # the writer's client reconnects too
    before = reads(consumer_storage)

    waiter = Waiter(service, topic, offset=2)
    writer.append(topic, 0, [b"after the restart"])
    result = waiter.join()

    assert [r.value for r in result.records] == [b"after the restart"]
    assert reads(consumer_storage) - before <= MAX_READS_WHILE_WAITING


def test_close_is_prompt_while_a_waiter_waits_and_ends_the_wait(
    oxia_config: OxiaConfig, s3_config: S3Config, root: str, storage: Storage, topic: str
) -> None:
    LogWriter(storage).initialize_partition(topic, 0)
    store = OxiaStore(oxia_config)
    service = ConsumeService(LogReader(Storage(store, BlobStore(s3_config), BUCKET, root)))
    await_notifications(store)
    waiter = Waiter(service, topic, offset=1)

    start = time.monotonic()
    store.close()
    closing_s = time.monotonic() - start
    result = waiter.join()

    assert closing_s < oxia_config.close_timeout_ms / 1000
    assert isinstance(result.error, OxiaUnavailable)
    assert not store.changes().live


def test_a_feed_that_cannot_connect_keeps_trying_and_closes_at_once() -> None:
    attempts: list[float] = []

    def unreachable() -> list[tuple[int, object]]:
        attempts.append(time.monotonic())
        raise OxiaUnavailable("no shard assignments")

    feed = ChangeFeed(unreachable)
    wakeup = Wakeup()
    with feed.watching(wakeup, {"k": "tag"}):
        deadline = time.monotonic() + JOIN_S
        while len(attempts) < 2:
            assert time.monotonic() < deadline, "the feed did not retry"
            time.sleep(0.01)
        assert not feed.live
        feed.close()
        # Waiters are told to re-check, and meet the closed store there.
        assert wakeup.wait(0) == Changes(everything=True)


# --- Wakeup ---------------------------------------------------------------------------------


def test_one_batch_of_notifications_wakes_a_waiter_once_with_all_its_tags() -> None:
    # One Oxia log entry may change a partition's control and add a sequence key: a waiter
    # must not see the second change without the first (it would keep a stale control record).
    class CountingWakeup(Wakeup):
        wakes = 0

        def wake(self, tag: Hashable | None = None) -> None:
            self.wakes += 1
            super().wake(tag)

        def wake_tags(self, tags: Iterable[Hashable | None]) -> None:
            self.wakes += 1
            super().wake_tags(tags)

    feed = ChangeFeed(lambda: [])
    wakeup = CountingWakeup()
    feed._watchers.add(wakeup, {"p/meta/control": "control", "p/seq/": "seq"})
    feed._dispatch({"p/seq/0000000001/e-1-0": 7, "p/meta/control": 7})
    assert wakeup.wakes == 1
    assert wakeup.wait(0) == Changes(frozenset({"control", "seq"}))


def test_a_wakeup_reports_and_clears_what_woke_it() -> None:
    wakeup = Wakeup()
    assert wakeup.wait(0) is None
    wakeup.wake(("orders", 0))
    wakeup.wake(("orders", 1))
    wakeup.wake()
    changes = wakeup.wait(0)
    assert changes == Changes(frozenset({("orders", 0), ("orders", 1)}))
    assert ("orders", 0) in changes
    assert ("audit", 0) not in changes
    assert wakeup.wait(0) is None
    wakeup.wake_all()
    everything = wakeup.wait(0)
    assert everything is not None
    assert ("audit", 0) in everything


def test_a_wakeup_wakes_a_waiter_in_another_thread() -> None:
    wakeup = Wakeup()
    timer = threading.Timer(0.05, wakeup.wake, args=("k",))
    timer.start()
    changes = wakeup.wait(JOIN_S)
    timer.join()
    assert changes == Changes(frozenset({"k"}))


def test_a_control_change_while_waiting_is_read_again(storage: Storage, consumer_storage: Storage, topic: str) -> None:
    # Fence and unfence open a new generation: a waiter still using the control record of
    # its first round would scan the old one and wait out max_wait_ms (no re-check here).
    writer = LogWriter(storage)
    writer.initialize_partition(topic, 0)
    writer.append(topic, 0, [b"before"])
    service = ConsumeService(LogReader(consumer_storage))
    await_notifications(consumer_storage.oxia)

    waiter = Waiter(service, topic, offset=2)
    writer.fence(topic, 0)
    writer.unfence(topic, 0)
    writer.append(topic, 0, [b"in the new generation"])
    result = waiter.join()

    assert [(r.offset, r.value) for r in result.records] == [(2, b"in the new generation")]
    assert result.high_watermark == 2
