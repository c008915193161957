"""The first produces to a new implicit topic, concurrent in one produce process (``llog serve``), on a real Oxia.

A request that read the topic's record while there was none yet, and is answered only after another request
created the topic, must not make the process write to the partitions of no record (the legacy folders) instead
of the topic's: neither a partition initialized there, with acknowledged records no reader finds, nor an append
sent there, which fails as not initialized. The tests hold that read (``HeldRead``) to force the interleaving;
the held request names no partition, so it is refused once it has read, and touches nothing else.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from llog.errors import UnknownTopic
from llog.protocol.append import LogWriter
from llog.protocol.read import LogReader
from llog.protocol.topics import TopicConfig, TopicRecord, TopicRegistry
from llog.service.produce import ProduceEntry, ProduceService
from llog.store.storage import Storage

pytestmark = pytest.mark.oxia


class HeldRead:
    """``service``'s first read of a topic record answers only once ``release`` is set (``read`` says it read)."""

    def __init__(self, service: ProduceService, monkeypatch: pytest.MonkeyPatch) -> None:
        self.read = threading.Event()
        self.release = threading.Event()
        self._get = service.topics.get
        self._held = True
        monkeypatch.setattr(service.topics, "get", self)

    def __call__(self, topic: str) -> TopicRecord | None:
        record = self._get(topic)
        if self._held:
            self._held = False
            self.read.set()
            assert self.release.wait(10)
        return record


def refused_keyless(service: ProduceService, topic: str) -> None:
    with pytest.raises(UnknownTopic, match="was not created"):
        service.produce([ProduceEntry(topic, None, [b"keyless"])])


def values(storage: Storage, topic: str, partition: int) -> list[bytes]:
    return [r.value for r in LogReader(storage).iter_from(topic, partition, 1)]


def test_a_read_from_before_the_topic_existed_does_not_send_later_appends_elsewhere(
    storage: Storage, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = ProduceService(LogWriter(storage))
    held = HeldRead(service, monkeypatch)
    with ThreadPoolExecutor(1) as pool:
        stale = pool.submit(refused_keyless, service, topic)
        assert held.read.wait(10)  # it saw no record
        (first,) = service.produce([ProduceEntry(topic, 0, [b"first"])])  # creates the topic
        held.release.set()
        stale.result()

    (second,) = service.produce([ProduceEntry(topic, 0, [b"second"])])

    assert (first.error, second.error) == (None, None)
    assert values(storage, topic, 0) == [b"first", b"second"]


def test_no_partition_is_initialized_outside_the_topic_by_a_read_from_before_it_existed(
    storage: Storage, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = ProduceService(LogWriter(storage))
    held = HeldRead(service, monkeypatch)
    initialize_partition = service.writer.initialize_partition
    with ThreadPoolExecutor(1) as pool:
        stale = pool.submit(refused_keyless, service, topic)
        assert held.read.wait(10)

        def after_the_stale_answer(topic: str, partition: int) -> bool:
            # The topic's record is written: the read that saw none is answered before the partition is created.
            held.release.set()
            stale.result()
            return initialize_partition(topic, partition)

        monkeypatch.setattr(service.writer, "initialize_partition", after_the_stale_answer)
        (result,) = service.produce([ProduceEntry(topic, 0, [b"acknowledged"])])

    assert result.error is None
    assert values(storage, topic, 0) == [b"acknowledged"]  # readable where the topic's record says it is


class LateRead:
    """``service``'s first read of a topic record begins (its start is taken) but is sent only once ``release``
    is set: a read that started early and is answered late, as one an Oxia client retried."""

    def __init__(self, service: ProduceService, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self._get = service.topics.get
        self._held = True
        monkeypatch.setattr(service.topics, "get", self)

    def __call__(self, topic: str) -> TopicRecord | None:
        if self._held:
            self._held = False
            self.started.set()
            assert self.release.wait(10)
        return self._get(topic)


def test_a_read_answered_late_with_the_topic_is_not_outranked_by_a_later_read_that_saw_none(
    storage: Storage, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Overlapping reads: the one that began first may hold the newer answer (the topic, created meanwhile by
    another process); the process must not keep to the other's "no record" and fail the append."""
    service = ProduceService(LogWriter(storage))
    late = LateRead(service, monkeypatch)
    with ThreadPoolExecutor(1) as pool:
        produced = pool.submit(service.produce, [ProduceEntry(topic, 0, [b"after the create"])])
        assert late.started.wait(10)
        refused_keyless(service, topic)  # began later, answered first: no record yet
        TopicRegistry(storage.oxia, root=storage.root, writer_config=service.writer.config).create(
            topic, 1, TopicConfig(service.writer.config.append_protocol)
        )  # another process creates it
        late.release.set()
        (result,) = produced.result()

    assert result.error is None
    assert values(storage, topic, 0) == [b"after the create"]
