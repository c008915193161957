"""``llog serve``'s tail cache answers as Oxia would (llog/service/tail_cache.py, llog/service/consume.py).

Two tasks of ``llog serve`` share partitions: each its own Oxia client, tail cache, writer
feeding it and consume service reading through it, as ``server/serve.py`` wires them. A
consume answered from a task's cache must be the answer a consume service without a cache
(the consume Lambda's) gives at the same moment, once the other task's change has been
notified to this one: records another task appended, a topic deleted elsewhere, a log start
moved by retention. Each test compares the two answers field by field; the last ones run two
real ``llog serve`` processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest

from devserver.devstack import OxiaProcess, find_oxia_binary
from llog.config import OxiaConfig, RetentionPolicy, S3Config
from llog.errors import OxiaUnavailable, UnknownTopic
from llog.format.codec import encode_batch
from llog.format.kv.control import AppendProtocol
from llog.protocol.append import LogWriter, SharedAppendGroup
from llog.protocol.metadata import CommitWrites
from llog.protocol.read import LogReader
from llog.protocol.topics import TopicConfig, TopicRegistry
from llog.service import consume
from llog.service.consume import ConsumeRequest, ConsumeService, FetchPartition, PartitionFetch
from llog.service.tail_cache import TailCache
from llog.store.changes import Wakeup
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from tests.conftest import BUCKET, TOOLS_BIN, OxiaServer, _oxia_unavailable, serve_env
from tests.integration.test_consume import await_notifications
from tests.integration.test_retention import DAY_MS, compacted_log, retention
from tests.serve_tasks import post_json, serve_process

pytestmark = pytest.mark.oxia

MB = 1 << 20
JOIN_S = 30


class Task(NamedTuple):
    """One ``llog serve`` task's storage, tail cache, writer and consume service."""

    storage: Storage
    cache: TailCache
    writer: LogWriter
    service: ConsumeService


@pytest.fixture
def tasks(oxia_config: OxiaConfig, s3_config: S3Config, root: str) -> Iterator[tuple[Task, Task]]:
    with OxiaStore(oxia_config) as oxia_a, OxiaStore(oxia_config) as oxia_b:
        made = []
        for oxia in (oxia_a, oxia_b):
            storage = Storage(oxia, BlobStore(s3_config), BUCKET, root)
            cache = TailCache(MB)
            writer = LogWriter(storage, commit_listener=cache.on_commit)
            made.append(Task(storage, cache, writer, ConsumeService(LogReader(storage), tail_cache=cache)))
            await_notifications(oxia)
        yield made[0], made[1]


@pytest.fixture
def uncached(storage: Storage) -> ConsumeService:
    """The consume Lambda's service: no tail cache, every answer read from Oxia."""
    return ConsumeService(LogReader(storage))


def request(*parts: FetchPartition, max_wait_ms: int = 0, min_bytes: int = 1) -> ConsumeRequest:
    return ConsumeRequest(list(parts), max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=4 * MB)


def part(topic: str, partition: int = 0, offset: int = 1) -> FetchPartition:
    return FetchPartition(topic, partition, offset, MB)


def answer(service: ConsumeService, req: ConsumeRequest) -> list[tuple[Any, ...]] | str:
    """Everything a consume answers, comparable; a request refused as a whole gives its error's type."""
    try:
        results = service.consume(req)
    except UnknownTopic as exc:
        return exc.error_type
    return [shown(r) for r in results]


def shown(r: PartitionFetch) -> tuple[Any, ...]:
    records = [(rec.offset, rec.value) for rec in r.records]
    error = r.error.error_type if r.error is not None else None
    return r.topic, r.partition, records, r.high_watermark, r.log_start_offset, r.next_fetch_offset, error


@contextlib.contextmanager
def notified(task: Task, topic: str, partition: int = 0) -> Iterator[None]:
    """Returns once ``task``'s notification feed has delivered a change of the partition's commit keys
    made inside the block (to every watcher: the batch is dispatched under the feed's lock)."""
    keys = task.service.reader.layouts.keys(topic, partition)
    feed = task.storage.oxia.changes()
    wakeup = Wakeup()
    with feed.watching(wakeup, {keys.control: "control", keys.sequences: "seq"}):
        yield
        assert wakeup.wait(JOIN_S) is not None, "no notification of the change reached the task"
    with feed._lock:  # the dispatch that woke us has finished waking the others
        pass


def caught_up(task: Task, partition_key: str) -> None:
    """Returns once ``task``'s feed has delivered every change committed so far on the shard of
    ``partition_key``: a write after them there is notified after them (a shard notifies in commit order)."""
    marker = f"{task.storage.root}/test-marker/{partition_key}"
    wakeup = Wakeup()
    with task.storage.oxia.changes().watching(wakeup, {marker: "marker"}):
        task.storage.oxia.put(marker, b"", partition_key=partition_key)
        assert wakeup.wait(JOIN_S) is not None, "the marker's notification never came"
    with task.storage.oxia.changes()._lock:  # its dispatch, and the earlier ones', reached every watcher
        pass


def trusted(task: Task, topic: str, partition: int = 0) -> None:
    """Consume at the partition's end until the task's cache trusts the end it holds (the notifications of
    its own appends that came after the writer reported them cost a read each)."""
    deadline = time.monotonic() + 5
    while task.cache.current(topic, partition, max_age_s=consume.RECHECK_S) is None:
        assert time.monotonic() < deadline, "the cache never came to trust the partition's end"
        end = task.cache.cached_high_watermark(topic, partition) or 0
        task.service.consume(request(part(topic, partition, end + 1)))
        time.sleep(0.02)


# --- another task's appends --------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", [AppendProtocol.CAS, AppendProtocol.SEQUENTIAL])
def test_a_poll_at_the_tail_this_task_appended_returns_another_tasks_acknowledged_append(
    tasks: tuple[Task, Task], uncached: ConsumeService, topic: str, protocol: AppendProtocol
) -> None:
    """The first round of a long-poll whose other partition has data answers at once: the partition at
    the task's own cached tail must not be answered empty when another task has appended there."""
    here, there = tasks
    registry = TopicRegistry(here.storage.oxia, root=here.storage.root)
    registry.create(topic, 2, TopicConfig(protocol, None, None))
    here.writer.append(topic, 0, [b"here"])  # offset 1, this task's cached tail
    here.writer.append(topic, 1, [b"other partition"])
    trusted(here, topic)  # the cache would answer the partition's end without Oxia now
    with notified(here, topic):
        assert there.writer.append(topic, 0, [b"there"]).end_offset == 2  # acknowledged

    two_partitions = request(part(topic, 0, 2), part(topic, 1, 1), max_wait_ms=10_000)
    at_once = request(part(topic, 0, 2), max_wait_ms=10_000, min_bytes=0)
    expected = answer(uncached, two_partitions)
    assert expected[0][2] == [(2, b"there")]
    assert answer(here.service, two_partitions) == expected
    assert answer(here.service, at_once) == answer(uncached, at_once)


def test_a_long_poll_at_this_tasks_tail_is_answered_with_another_tasks_append(
    tasks: tuple[Task, Task], uncached: ConsumeService, topic: str
) -> None:
    here, there = tasks
    here.writer.initialize_partition(topic, 0)
    here.writer.append(topic, 0, [b"here"])
    waiting: list[Any] = []
    req = request(part(topic, 0, 2), max_wait_ms=20_000)
    poll = threading.Thread(target=lambda: waiting.append(answer(here.service, req)), daemon=True)
    began = time.monotonic()
    poll.start()
    there.writer.append(topic, 0, [b"there"])
    poll.join(JOIN_S)
    assert waiting == [answer(uncached, req)]
    assert time.monotonic() - began < 5


# --- a topic deleted by another task ---------------------------------------------------------------------


def test_a_topic_deleted_by_another_task_is_unknown_on_the_cache_path(
    tasks: tuple[Task, Task], uncached: ConsumeService, topic: str
) -> None:
    here, there = tasks
    TopicRegistry(here.storage.oxia, root=here.storage.root).create(topic, 1, TopicConfig(AppendProtocol.CAS))
    here.writer.append(topic, 0, [b"a", b"b"])
    assert answer(here.service, request(part(topic))) == answer(uncached, request(part(topic)))
    trusted(here, topic)

    with notified(here, topic):
        TopicRegistry(there.storage.oxia, root=there.storage.root).delete(topic)

    for req in (request(part(topic)), request(part(topic, 0, 3)), request(part(topic, 0, 3), max_wait_ms=200)):
        assert answer(uncached, req) == "UnknownTopic"
        assert answer(here.service, req) == "UnknownTopic"


def test_unknown_topic_read_from_oxia_is_not_taken_for_oxia_out_of_reach(
    tasks: tuple[Task, Task], uncached: ConsumeService, topic: str
) -> None:
    """A cache hit whose read of Oxia says the topic was deleted is refused, not served from the cache."""
    here, there = tasks
    TopicRegistry(here.storage.oxia, root=here.storage.root).create(topic, 1, TopicConfig(AppendProtocol.CAS))
    here.writer.append(topic, 0, [b"a", b"b"])
    TopicRegistry(there.storage.oxia, root=there.storage.root).delete(topic)

    req = request(part(topic), max_wait_ms=0)  # the last (only) round reads Oxia
    assert answer(uncached, req) == answer(here.service, req) == "UnknownTopic"


# --- retention in another process ------------------------------------------------------------------------


def test_records_below_a_log_start_moved_by_retention_are_out_of_range_on_the_cache_path(
    tasks: tuple[Task, Task], uncached: ConsumeService, storage: Storage, topic: str
) -> None:
    here, _ = tasks
    compacted_log(here.writer, here.storage, topic)  # offsets 1-21, all appended (and cached) here
    for offset in (21, 22):
        req = request(part(topic, 0, offset))
        assert answer(here.service, req) == answer(uncached, req)
    trusted(here, topic)
    # From 3 the cache holds the appended batches, Oxia's index the compacted range 1-5: the answers
    # differ in how far they go, not in what they say.
    assert answer(here.service, request(part(topic, 0, 3)))[0][2][0] == (3, b"r3")

    with notified(here, topic):
        result = retention(storage, topic, RetentionPolicy(max_age_ms=DAY_MS), ahead_ms=2 * DAY_MS).enforce(topic, 0)
    assert result.log_start_after == 21

    for offset in (3, 20, 21, 22):
        req = request(part(topic, 0, offset), max_wait_ms=200)
        expected = answer(uncached, req)
        assert expected[0][4] == 21
        assert answer(here.service, req) == expected, offset


class Clock:
    """A clock that moves only when the test moves it."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_a_change_notified_just_before_this_tasks_append_is_read_again_at_once(
    tasks: tuple[Task, Task], uncached: ConsumeService, storage: Storage, topic: str
) -> None:
    """An append here confirms the end it committed only when every notification unseen at the writer's
    report is of the append's own writes (their Oxia version ids). Retention elsewhere notified just before
    it (at the same moment, by the cache's clock) is not: the next answer reads Oxia."""
    here, _ = tasks
    cache = TailCache(MB, clock=Clock())
    writer = LogWriter(here.storage, commit_listener=cache.on_commit)
    service = ConsumeService(LogReader(here.storage), tail_cache=cache)
    compacted_log(writer, here.storage, topic)  # offsets 1-21
    assert answer(service, request(part(topic, 0, 22))) == answer(uncached, request(part(topic, 0, 22)))

    with notified(here, topic):
        retention(storage, topic, RetentionPolicy(max_age_ms=DAY_MS), ahead_ms=2 * DAY_MS).enforce(topic, 0)
    writer.append(topic, 0, [b"after"])  # offset 22

    req = request(part(topic, 0, 3))
    expected = answer(uncached, req)
    assert expected[0][6] == "OffsetOutOfRange"
    assert answer(service, req) == expected


class Versions(Wakeup):
    """Collects the notified writes (key, version id) of the keys it watches."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[str, int]] = set()

    def notified(self, tags: Any, written: frozenset[tuple[str, int]]) -> None:
        self.seen |= written
        super().notified(tags, written)


@pytest.mark.parametrize("protocol", [AppendProtocol.CAS, AppendProtocol.SEQUENTIAL])
def test_this_tasks_append_notified_before_the_writer_reports_it_confirms_its_end(
    tasks: tuple[Task, Task], topic: str, protocol: AppendProtocol
) -> None:
    """The writes (key, version id) the writer reports are those Oxia notifies, each partition's its own: an
    append whose notifications came before the report (all it reports, and one at least) confirms its end, and
    the cache answers at it without reading Oxia; a shared append's partitions too (a sequential topic's: their
    puts in one Oxia write)."""
    here, _ = tasks
    cache = TailCache(MB)
    feed = here.storage.oxia.changes()
    own = {p: Versions() for p in (0, 1)}
    reported: dict[int, set[tuple[str, int]]] = {0: set(), 1: set()}

    def reported_after_its_notifications(*args: Any) -> None:
        partition, written = args[1], args[4].writes
        deadline = time.monotonic() + JOIN_S
        while not (written <= own[partition].seen and own[partition].seen - reported[partition]):
            assert time.monotonic() < deadline, "the append's writes were never notified"
            own[partition].wait(0.05)
        with feed._lock:  # their dispatch has reached the cache too
            pass
        cache.on_commit(*args)
        reported[partition] = set(own[partition].seen)

    writer = LogWriter(here.storage, commit_listener=reported_after_its_notifications)
    service = ConsumeService(LogReader(here.storage), tail_cache=cache)
    TopicRegistry(here.storage.oxia, root=here.storage.root).create(topic, 2, TopicConfig(protocol))
    for p in (0, 1):  # the partitions' creation notified before the read, which then confirms them
        caught_up(here, service.reader.layouts.keys(topic, p).partition_key)
    assert [r[3] for r in answer(service, request(part(topic, 0), part(topic, 1)))] == [0, 0]  # read: empty
    with contextlib.ExitStack() as stack:
        for p in (0, 1):
            keys = service.reader.layouts.keys(topic, p)
            stack.enter_context(feed.watching(own[p], {keys.control: None, keys.sequences: None}))
        assert writer.append(topic, 0, [b"a"]).end_offset == 1
        assert cache.current(topic, 0, max_age_s=consume.RECHECK_S) == (1, 1)
        writer.append(topic, 1, [b"b"])
        writer.append_shared([SharedAppendGroup(topic, 0, [b"c"]), SharedAppendGroup(topic, 1, [b"d"])])
        assert cache.current(topic, 0, max_age_s=consume.RECHECK_S) == (2, 1)
        assert cache.current(topic, 1, max_age_s=consume.RECHECK_S) == (2, 1)


# --- the follow of a partition -----------------------------------------------------------------------------


def test_a_partition_polled_before_its_topic_existed_follows_its_topics_keys_once_they_resolve(
    tasks: tuple[Task, Task], uncached: ConsumeService, topic: str
) -> None:
    """A consume before the topic exists resolves the legacy folder's keys (trusted for TOPIC_CACHE_TTL_MS):
    once the topic's own keys resolve, the cache follows those, so another task's append is not hidden."""
    here, there = tasks
    assert answer(here.service, request(part(topic)))[0][6] is not None  # no such partition yet
    registry = TopicRegistry(there.storage.oxia, root=there.storage.root)
    registry.create(topic, 1, TopicConfig(AppendProtocol.CAS))
    here.service.reader.layouts.learn(topic, registry.get(topic))  # TOPIC_CACHE_TTL_MS later: the id resolves
    there.writer.append(topic, 0, [b"one"])
    trusted(here, topic)

    with notified(here, topic):
        assert there.writer.append(topic, 0, [b"two"]).end_offset == 2

    req = request(part(topic, 0, 2))
    expected = answer(uncached, req)
    assert expected[0][2] == [(2, b"two")]
    assert answer(here.service, req) == expected


def test_a_round_that_read_a_topic_this_task_deleted_meanwhile_caches_none_of_its_batches(
    tasks: tuple[Task, Task], topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``forget_topic`` (a delete through this task) while a consume is between its read of Oxia and its
    decoding: the batches it then decodes belong to the deleted topic and are not cached."""
    here, there = tasks
    there.writer.initialize_partition(topic, 0)
    there.writer.append(topic, 0, [b"a", b"b"])
    decode = here.service._decode

    def deleted_meanwhile(*args: Any) -> Any:
        here.cache.forget_topic(topic)
        return decode(*args)

    monkeypatch.setattr(here.service, "_decode", deleted_meanwhile)
    assert answer(here.service, request(part(topic)))[0][2] == [(1, b"a"), (2, b"b")]
    assert here.cache.lookup(topic, 0, 1) is None


def test_oxia_out_of_reach_after_a_notified_delete_is_the_error_not_the_cached_records(
    tasks: tuple[Task, Task], uncached: ConsumeService, storage: Storage, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With Oxia out of reach the cache serves what it holds only when nothing was notified since its last
    read of the partition: after a delete elsewhere was notified, the answer is Oxia's error."""
    here, there = tasks
    TopicRegistry(here.storage.oxia, root=here.storage.root).create(topic, 1, TopicConfig(AppendProtocol.CAS))
    here.writer.append(topic, 0, [b"a", b"b"])
    trusted(here, topic)
    with notified(here, topic):
        TopicRegistry(there.storage.oxia, root=there.storage.root).delete(topic)
    uncached.reader.layouts.topic_id(topic)  # the topic's record, read before Oxia went out of reach

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise OxiaUnavailable("get failed: Oxia is out of reach")

    for store in (here.storage.oxia, storage.oxia):
        monkeypatch.setattr(store, "get", unavailable)
    req = request(part(topic))
    expected = answer(uncached, req)
    assert expected[0][6] == "OxiaUnavailable"
    assert answer(here.service, req) == expected


def test_changes_while_the_feed_reconnected_are_not_taken_for_an_own_append(
    tasks: tuple[Task, Task], uncached: ConsumeService, storage: Storage, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The feed's reconnect says anything may have changed while it was down; an own append reported at
    once after it does not vouch for that: retention notified by nobody is read."""
    here, _ = tasks
    clock = Clock()
    cache = TailCache(MB, clock=clock)
    feed = here.storage.oxia.changes()
    own_notified: list[Wakeup] = []

    def reported_after_its_notification(*args: Any) -> None:
        if own_notified:  # the usual order: the append's notification came before the writer reported it
            assert own_notified[0].wait(JOIN_S) is not None
            with feed._lock:  # its dispatch has reached the cache too
                pass
        cache.on_commit(*args)

    writer = LogWriter(here.storage, commit_listener=reported_after_its_notification)
    service = ConsumeService(LogReader(here.storage), tail_cache=cache)
    compacted_log(writer, here.storage, topic)  # offsets 1-21
    caught_up(here, service.reader.layouts.keys(topic, 0).partition_key)  # so the next read confirms the end
    assert answer(service, request(part(topic, 0, 22))) == answer(uncached, request(part(topic, 0, 22)))
    assert cache.current(topic, 0, max_age_s=consume.RECHECK_S) is not None

    # The feed stays down until retention has run unnotified (its reconnects fail until then).
    retention_ran = threading.Event()
    shard_stubs = feed._shard_stubs

    def shard_stubs_after_retention() -> list[tuple[int, Any]]:
        if not retention_ran.is_set():
            raise LookupError("held down by the test until retention has run")
        return shard_stubs()

    monkeypatch.setattr(feed, "_shard_stubs", shard_stubs_after_retention)
    connects = feed.connects
    for stream in list(feed._streams):
        stream.cancel()
    deadline = time.monotonic() + JOIN_S
    while feed.live:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    retention(storage, topic, RetentionPolicy(max_age_ms=DAY_MS), ahead_ms=2 * DAY_MS).enforce(topic, 0)
    assert feed.connects == connects, "the feed came back before retention ran: nothing was missed"
    retention_ran.set()
    while feed.connects == connects:
        assert time.monotonic() < deadline, "the feed did not reconnect"
        time.sleep(0.01)
    keys = service.reader.layouts.keys(topic, 0)
    own_notified.append(Wakeup())
    with feed.watching(own_notified[0], {keys.control: "control", keys.sequences: "seq"}):
        writer.append(topic, 0, [b"after"])  # offset 22, at the clock's moment of the reconnect

    req = request(part(topic, 0, 3))
    expected = answer(uncached, req)
    assert expected[0][6] == "OffsetOutOfRange"
    assert answer(service, req) == expected


def test_a_long_poll_that_began_the_follow_is_woken_after_the_cache_counted_the_change(
    tasks: tuple[Task, Task], uncached: ConsumeService, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-poll registers its wake-up before its first round starts the cache's follow of the partition;
    the feed still counts a change in the cache before waking the poll, which then finds its end stale
    and reads the change, instead of answering from the cache and sleeping until its re-check."""
    here, there = tasks
    here.writer.initialize_partition(topic, 0)
    here.writer.append(topic, 0, [b"here"])  # cached at the end, not confirmed: nothing follows it yet
    monkeypatch.setattr(consume, "RECHECK_S", 10.0)
    feed = here.storage.oxia.changes()
    keys = here.service.reader.layouts.keys(topic, 0)
    mark = here.cache.mark

    class Slow(Wakeup):
        def wake_tags(self, tags: Any) -> None:
            time.sleep(0.3)  # another waiter between the poll's and the follow's: the poll runs meanwhile

    slow: list[Slow] = []

    def mark_after_another_waiter(*args: Any) -> Any:
        if not slow:  # the first round's mark, which starts the follow
            slow.append(Slow())
            feed.watch(slow[0], {keys.control: None, keys.sequences: None})
        return mark(*args)

    monkeypatch.setattr(here.cache, "mark", mark_after_another_waiter)
    waiting: list[Any] = []
    req = request(part(topic, 0, 2), max_wait_ms=20_000)
    poll = threading.Thread(target=lambda: waiting.append(answer(here.service, req)), daemon=True)
    poll.start()
    deadline = time.monotonic() + JOIN_S
    while here.cache.current(topic, 0, max_age_s=10.0) is None:  # the poll's first round confirmed the end
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.1)
    appended = time.monotonic()
    there.writer.append(topic, 0, [b"there"])
    poll.join(JOIN_S)
    assert waiting == [answer(uncached, req)]
    assert time.monotonic() - appended < 3


# --- two llog serve processes ----------------------------------------------------------------------------


@pytest.fixture
def serve_tasks(s3_config: S3Config, root: str, oxia_server: OxiaServer) -> Iterator[tuple[str, str, str]]:
    """Two ``llog serve`` processes with their tail caches, and a third without one (the reference)."""
    env = {**os.environ, **serve_env(s3_config, root), "LLOG_OXIA_SERVICE_ADDRESS": oxia_server.address}
    without = {**env, "LLOG_TAIL_CACHE_MAX_BYTES": "0"}
    with serve_process(env) as (_, first), serve_process(env) as (_, second), serve_process(without) as (_, plain):
        yield first, second, plain


def consume_doc(topic: str, offsets: dict[int, int], max_wait_ms: int = 0, min_bytes: int = 1) -> dict[str, Any]:
    parts = [{"topic": topic, "partition": p, "fetch_offset": o} for p, o in offsets.items()]
    return {"topic_partitions": parts, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes}


def http_answer(url: str, doc: dict[str, Any]) -> tuple[int, Any]:
    status, body = post_json(url + "/consume", doc)
    return (status, body["results"]) if status == 200 else (status, body["error_type"])


def test_two_serve_processes_answer_as_one_without_a_cache(serve_tasks: tuple[str, str, str], topic: str) -> None:
    """Produce through one task, long-poll through the other, produce through the other, delete: each
    consume answer of the two tasks is the cacheless process's (once the change has reached the task:
    at most the re-check bound, a second, as docs/HTTP_API.md says)."""
    first, second, plain = serve_tasks

    def same_everywhere(doc: dict[str, Any]) -> tuple[int, Any]:
        expected = http_answer(plain, doc)
        deadline = time.monotonic() + 2
        for url in (first, second):
            while (got := http_answer(url, doc)) != expected and time.monotonic() < deadline:
                time.sleep(0.05)
            assert got == expected, url
        return expected

    def produce(url: str, partition: int, *values: str) -> None:
        doc = {"topic_partitions": [{"topic": topic, "partition": partition, "records": list(values)}]}
        assert post_json(url + "/produce", doc)[0] == 200

    assert post_json(first + "/topics", {"topic": topic, "partitions": 2})[0] == 201
    produce(first, 0, "one")
    produce(first, 1, "p1")
    same_everywhere(consume_doc(topic, {0: 1, 1: 1}))

    # A long-poll through the second task at the tail, woken by the first task's append.
    waiting: list[Any] = []
    poll_doc = consume_doc(topic, {0: 2}, max_wait_ms=20_000)
    poll = threading.Thread(target=lambda: waiting.append(http_answer(second, poll_doc)), daemon=True)
    poll.start()
    time.sleep(0.3)
    produce(first, 0, "two")
    poll.join(JOIN_S)
    assert waiting == [http_answer(plain, poll_doc)]

    # The second task appends at the first's own tail: a poll through the first whose other partition has
    # data answers at once, and must not leave it out.
    produce(second, 0, "three")
    (status, results) = same_everywhere(consume_doc(topic, {0: 3, 1: 1}, max_wait_ms=5_000))
    assert (status, [r["value"] for r in results[0]["records"]], results[0]["high_watermark"]) == (200, ["three"], 3)
    same_everywhere(consume_doc(topic, {0: 4}, max_wait_ms=100, min_bytes=0))

    # Deleted through the first task: 404 there at once, and from the second once it learns it.
    produce(first, 0, "four")
    assert http_answer(second, consume_doc(topic, {0: 1}))[0] == 200
    request_delete(first, topic)
    assert http_answer(first, consume_doc(topic, {0: 5, 1: 2})) == (404, "UnknownTopic")
    assert same_everywhere(consume_doc(topic, {0: 1})) == (404, "UnknownTopic")
    assert same_everywhere(consume_doc(topic, {0: 5}, max_wait_ms=100)) == (404, "UnknownTopic")


def request_delete(url: str, topic: str) -> None:
    with urllib.request.urlopen(urllib.request.Request(f"{url}/topics/{topic}", method="DELETE"), timeout=30) as resp:
        assert resp.status == 200


def test_a_delete_through_serve_clears_its_cache(live_server: Any, topic: str) -> None:
    url = live_server.url
    assert post_json(url + "/topics", {"topic": topic, "partitions": 1})[0] == 201
    produce = {"topic_partitions": [{"topic": topic, "partition": 0, "records": ["a"]}]}
    assert post_json(url + "/produce", produce)[0] == 200
    assert http_answer(url, consume_doc(topic, {0: 1}))[0] == 200
    request_delete(url, topic)
    assert http_answer(url, consume_doc(topic, {0: 1})) == (404, "UnknownTopic")
    assert http_answer(url, consume_doc(topic, {0: 2}, max_wait_ms=100)) == (404, "UnknownTopic")


# --- Oxia with more than one shard -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_shard_oxia(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OxiaConfig]:
    """An Oxia of its own with two shards: version ids are counted per shard, so the same id is written on both."""
    binary = find_oxia_binary([TOOLS_BIN])
    if binary is None:
        _oxia_unavailable("no Oxia binary (make setup)")
        return
    process = OxiaProcess(binary, tmp_path_factory.mktemp("oxia-2-shards"), shards=2)
    process.start()
    try:
        yield OxiaConfig(process.address, request_timeout_ms=3_000, connect_timeout_ms=5_000, close_timeout_ms=3_000)
    finally:
        process.stop()


def on_other_shards(oxia: OxiaStore, root: str, first: str, second: str) -> bool:
    """Whether two partition keys are on different shards of an Oxia nobody else writes: a write between two
    on the first key's shard bumps its version id by two if on that shard, by one if not."""
    before = oxia.put(f"{root}/probe/{first}", b"", partition_key=first)
    oxia.put(f"{root}/probe/{second}", b"", partition_key=second)
    return oxia.put(f"{root}/probe/{first}", b"", partition_key=first) == before + 1


def test_another_tasks_write_with_a_version_id_of_this_tasks_shared_append_on_another_shard_is_not_taken_for_its_own(
    two_shard_oxia: OxiaConfig, s3_config: S3Config, root: str
) -> None:
    """Oxia counts version ids per shard. A shared append of this task writes P0's entry on one shard and P1's
    on the other; another task's append to P0 right after gets, on P0's shard, the id this task's P1 write got
    on P1's. Its notification reaches this task before the writer reports P0's commit: the cache must not take
    it for the append's own (it names another key), and answers with the other task's record."""
    with OxiaStore(two_shard_oxia) as oxia_a, OxiaStore(two_shard_oxia) as oxia_b:
        here, other = [
            Task(storage, cache, LogWriter(storage, commit_listener=cache.on_commit),
                 ConsumeService(LogReader(storage), tail_cache=cache))
            for storage, cache in ((Storage(o, BlobStore(s3_config), BUCKET, root), TailCache(MB))
                                   for o in (oxia_a, oxia_b))
        ]  # fmt: skip
        for task in (here, other):
            await_notifications(task.storage.oxia)
        layouts = here.service.reader.layouts
        registry = TopicRegistry(oxia_a, root=root)

        def created(topic: str) -> str:
            registry.create(topic, 2, TopicConfig(AppendProtocol.SEQUENTIAL))
            return topic

        topic = next(
            t for t in (created(f"t-{uuid.uuid4().hex[:12]}") for _ in range(64))
            if on_other_shards(oxia_a, root, *(layouts.keys(t, p).partition_key for p in (0, 1)))
        )  # fmt: skip
        pk0, pk1 = (layouts.keys(topic, p).partition_key for p in (0, 1))
        reports: list[tuple[Any, ...]] = []
        deferred = LogWriter(here.storage, commit_listener=lambda *args: reports.append(args))
        for p in (0, 1):  # each partition written once (the writer then batches their puts), then read to its end
            deferred.append(topic, p, [b"first"])
            here.writer.append(topic, p, [b"second"])
            caught_up(here, layouts.keys(topic, p).partition_key)
            trusted(here, topic, p)
        reports.clear()

        def pump(partition_key: str) -> int:
            return oxia_a.put(f"{root}/pump/{partition_key}", b"", partition_key=partition_key)

        last0, last1 = pump(pk0), pump(pk1)  # align: P1's shard one write ahead of P0's
        while last1 < last0 + 1:
            last1 = pump(pk1)
        while last0 + 1 < last1:
            last0 = pump(pk0)
        # This task's shared append: P0's entry gets id last0 + 1 on its shard, P1's last1 + 1 on the other.
        deferred.append_shared([SharedAppendGroup(topic, 0, [b"ours-0"]), SharedAppendGroup(topic, 1, [b"ours-1"])])
        # The other task's, acknowledged: on P0's shard, id last0 + 2 == last1 + 1, the id of this task's P1 write.
        theirs = Versions()
        with here.storage.oxia.changes().watching(theirs, dict.fromkeys(layouts.keys(topic, 0).commit_keys)):
            assert other.writer.append(topic, 0, [b"theirs"]).end_offset == 4
            assert theirs.wait(JOIN_S) is not None
        ours_on_p1 = next(args[4].writes for args in reports if args[1] == 1)
        assert {v for _, v in theirs.seen} & {v for _, v in ours_on_p1}, "no version id was written on both shards"
        caught_up(here, pk0)
        caught_up(here, pk1)
        for args in reports:  # the writer's reports, after every notification of the appends arrived
            here.cache.on_commit(*args)
        end = here.cache.cached_high_watermark(topic, 0)
        assert end == 3
        got = answer(here.service, request(part(topic, 0, offset=end + 1)))
        assert not isinstance(got, str)
        assert got[0][2] == [(4, b"theirs")], got


def test_an_append_to_the_partitions_keys_in_another_folder_confirms_no_end(
    tasks: tuple[Task, Task], topic: str
) -> None:
    """A writer that resolved the topic to other keys (another incarnation's folder) committed to keys the
    cache does not follow: no notification of them says what became of the followed ones, so its report,
    though nothing unseen is pending, confirms no end and the next answer reads Oxia."""
    here, _ = tasks
    TopicRegistry(here.storage.oxia, root=here.storage.root).create(topic, 1, TopicConfig(AppendProtocol.CAS))
    here.writer.append(topic, 0, [b"a"])
    keys = here.service.reader.layouts.keys(topic, 0)
    caught_up(here, keys.partition_key)
    trusted(here, topic, 0)
    elsewhere = dataclasses.replace(keys, topic_id=str(uuid.uuid4()))  # another incarnation's folder
    assert elsewhere.commit_keys != keys.commit_keys
    here.cache.on_commit(topic, 0, 2, encode_batch([b"b"]), CommitWrites(elsewhere.commit_keys, frozenset()))
    assert here.cache.current(topic, 0, max_age_s=consume.RECHECK_S) is None
