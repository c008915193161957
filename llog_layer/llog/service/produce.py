"""The produce service behind ``POST /produce``: topic checks, keyed routing, lazy partition creation, appends.

A partition is initialized on the first write this process sees for it
(docs/PROTOCOL.md); successful initializations are remembered for the life of
the process (a Lambda execution environment or ``llog serve``). A Lambda
appends each request on its own; ``llog serve`` passes a batching appender,
which turns concurrent requests into one shared WAL object.

Topics (``llog.protocol.topics``): the topic record of every topic a request
names is read once and trusted for ``TOPIC_CACHE_TTL_MS`` (no Oxia read per
request in the steady state; past it, while one caller reads it again, the
others on the cache alone keep to it), except that a partition at or past the
cached count re-reads it before the request is refused (counts only grow), and
so does a partition a cached implicit record does not name yet (a create
elsewhere may have made the topic explicit). Every refusal of the whole request
(a deleted or uncreated topic, a partition past a count, a conditional group on
a sequential partition, existing or about to be created) comes before its first
write. An entry
without a partition routes each record by its key with Kafka's partitioner
(``llog_client.partitioner``); records without a key go to one partition per
request and topic, round-robin across requests. A deleted topic is refused
(``UnknownTopic``) as soon as its record is seen; an append racing the delete
fails on the fence (``LogFenced``), and the record, read again, turns that
into ``UnknownTopic``. A partition of an implicit topic is added to the
topic's record (``TopicRegistry.add_implicit_partition``, which creates the
record on the topic's first produce) before this process first initializes
it, so a delete, however stale this process's copy of the record, fences it
or refuses it. A topic whose record changed identity (deleted,
reclaimed, created again), or was not confirmed for ``STALE_TOPIC_MS``, has
its partitions forgotten: they are initialized again before the next write.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from llog.config import WriterConfig
from llog.errors import ConditionalAppendUnsupported, InvalidPartition, LlogError, LogFenced, UnknownTopic
from llog.format.codec import Record
from llog.format.kv.control import AppendProtocol
from llog.protocol.append import AppendResult, LogWriter, SharedAppendGroup, validate_group
from llog.protocol.producers import ProducerIdentity
from llog.protocol.topics import STALE_TOPIC_MS, TOPIC_CACHE_TTL_MS, TopicRecord, TopicRegistry
from llog_client.partitioner import partition_for_key


class SharedAppender(Protocol):
    """What appends a request's groups when it is not the writer itself: a batcher in front of it."""

    def append_shared(self, groups: Sequence[SharedAppendGroup]) -> list[AppendResult]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class ProduceEntry:
    """One topic entry of a produce request: a batch for ``partition``, or (``None``) records routed by key."""

    topic: str
    partition: int | None
    records: Sequence[Record | bytes]


@dataclass
class _CachedTopic:
    record: TopicRecord | None  # None: no record (none at all, or an implicit topic from before topic records)
    checked_at: float  # the service's clock, seconds
    rereading: bool = False  # past the TTL, a caller that may block is reading it again

    @property
    def identity(self) -> tuple[str, bool] | None:
        return None if self.record is None else (self.record.identity, self.record.deleted)


def protocol_of_new_partition(record: TopicRecord | None, config: WriterConfig) -> AppendProtocol:
    """The protocol a produce creates a partition with: its explicit topic's, else the writer's."""
    return record.config.append_protocol if record is not None and not record.implicit else config.append_protocol


def route(
    entries: Sequence[ProduceEntry | SharedAppendGroup],
    partitions: Mapping[str, int],
    next_partition: Callable[[int], int],
) -> list[SharedAppendGroup]:
    """The batches of a request: one per entry with a partition; per keyed entry, one per partition its records go to.

    A keyed record goes to ``partition_for_key(key, n)`` among its topic's ``partitions[topic]``;
    the keyless records of one request and topic all go to one partition, ``next_partition(n)``
    (asked once per request and topic). Batches come in the order their first record does.
    """
    groups: list[SharedAppendGroup] = []
    sticky: dict[str, int] = {}
    for entry in entries:
        if isinstance(entry, SharedAppendGroup):  # a batch for its partition, with its producer fields
            groups.append(entry)
            continue
        if entry.partition is not None:
            groups.append(SharedAppendGroup(entry.topic, entry.partition, entry.records))
            continue
        count = partitions[entry.topic]
        routed: dict[int, list[Record | bytes]] = {}
        for item in entry.records:
            key = item.key if isinstance(item, Record) else None
            if key is not None:
                partition = partition_for_key(key, count)
            else:
                if entry.topic not in sticky:
                    sticky[entry.topic] = next_partition(count)
                partition = sticky[entry.topic]
            routed.setdefault(partition, []).append(item)
        groups.extend(SharedAppendGroup(entry.topic, p, batch) for p, batch in routed.items())
    return groups


class _WouldBlock(Exception):
    """``prepare(cached_only=True)`` met a step that reads Oxia."""


@dataclass
class PreparedProduce:
    """A request checked and routed (``ProduceService.prepare``), before its append."""

    groups: list[SharedAppendGroup]  # every batch of the request, in order
    results: dict[int, AppendResult] = field(default_factory=dict)  # by index: batches failed already
    ready: list[tuple[int, SharedAppendGroup]] = field(default_factory=list)  # by index: batches to append

    @property
    def ready_groups(self) -> list[SharedAppendGroup]:
        return [group for _, group in self.ready]


class ProduceService:
    def __init__(
        self,
        writer: LogWriter,
        *,
        batcher: SharedAppender | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.writer = writer
        self.batcher = batcher
        self.topics = TopicRegistry(writer.storage.oxia, root=writer.root, writer_config=writer.config)
        self._clock = clock
        self._initialized: set[tuple[str, int]] = set()
        self._cached: dict[str, _CachedTopic] = {}
        self._round_robin = 0  # keyless requests routed so far (per topic entry), under ``_lock``
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls) -> ProduceService:
        """The service of a produce Lambda: one shared append per request."""
        return cls(LogWriter.from_env())

    def produce(self, entries: Sequence[ProduceEntry | SharedAppendGroup]) -> list[AppendResult]:
        """Append every entry; one result per partition batch written (``produce_groups``)."""
        return self.produce_groups(entries)[1]

    def produce_groups(
        self, entries: Sequence[ProduceEntry | SharedAppendGroup]
    ) -> tuple[list[SharedAppendGroup], list[AppendResult]]:
        """Route, check and append every entry: the groups written and their results, in the same order.

        Invalid input, an unknown or deleted topic and a partition past an
        explicit topic's count raise before anything is written; a request
        whose every batch failed on a topic deleted meanwhile raises
        ``UnknownTopic`` too (nothing of it is in the log). A topic
        whose record cannot be read (Oxia out of reach) fails its batches,
        as a partition that cannot be initialized does; its keyed entries,
        which cannot be routed, fail the request.
        """
        prepared = self.prepare(entries)
        assert prepared is not None
        appender = self.batcher or self.writer
        appended = appender.append_shared(prepared.ready_groups) if prepared.ready else []
        finished = self.finish(prepared, appended)
        assert finished is not None
        return finished

    def prepare(
        self, entries: Sequence[ProduceEntry | SharedAppendGroup], *, cached_only: bool = False
    ) -> PreparedProduce | None:
        """``produce_groups`` up to the append: the groups to append, and those that failed already.

        ``cached_only``: None instead of reading Oxia (a topic record not cached or past its TTL, a
        partition not initialized by this process, a conditional group), so that the caller, an
        event loop, can run this on its own thread and hand the rest to one that may block.
        """
        for entry in entries:
            if not isinstance(entry, SharedAppendGroup):  # a keyed entry's records go to a partition later
                entry = SharedAppendGroup(entry.topic, entry.partition or 0, entry.records)
            validate_group(entry, self.writer.root)
        try:
            return self._prepare(entries, cached_only)
        except _WouldBlock:
            return None

    def _prepare(self, entries: Sequence[ProduceEntry | SharedAppendGroup], cached_only: bool) -> PreparedProduce:
        """Every refusal of the whole request (a topic deleted or not created, a partition past a count, a
        conditional group) comes before the first write: initializing a partition, or adding it to its topic."""
        records: dict[str, TopicRecord | None] = {}
        unreadable: dict[str, LlogError] = {}
        read: set[str] = set()  # the topics whose record this request read from Oxia
        for topic in dict.fromkeys(entry.topic for entry in entries):
            try:
                records[topic] = self._topic(topic, cached_only=cached_only, read=read)
            except LlogError as exc:
                unreadable[topic] = exc
        for entry in entries:
            if entry.topic not in unreadable:
                records[entry.topic] = self._check(entry, records[entry.topic], read, cached_only)
            elif entry.partition is None:
                raise unreadable[entry.topic]
        groups, turns = self._route(entries, records, cached_only)
        conditional = [g for g in groups if g.expected_offset is not None and g.topic not in unreadable]
        if conditional:
            if cached_only:
                raise _WouldBlock
            # Refused for the whole request here rather than in a batcher's flush (one more control read per
            # conditional group; the writer checks again at its append). A partition not created yet gets the
            # protocol of its topic (explicit) or of this process's writer (implicit).
            refusals = self.writer.conditional_refusals(
                conditional, lambda g: protocol_of_new_partition(records[g.topic], self.writer.config)
            )
            for error in refusals.values():
                if isinstance(error, ConditionalAppendUnsupported):
                    raise error
        prepared = PreparedProduce(groups)
        for i, group in enumerate(groups):
            try:
                if group.topic in unreadable:
                    raise unreadable[group.topic]
                self._ensure_initialized(group.topic, group.partition, records[group.topic], cached_only)
            except LlogError as exc:
                prepared.results[i] = AppendResult(group.topic, group.partition, len(group.records), error=exc)
            else:
                prepared.ready.append((i, group))
        with self._lock:
            self._round_robin += turns
        return prepared

    def finish(
        self, prepared: PreparedProduce, appended: Sequence[AppendResult], *, cached_only: bool = False
    ) -> tuple[list[SharedAppendGroup], list[AppendResult]] | None:
        """``produce_groups``' answer from the results of ``prepared.ready_groups``' append.

        ``cached_only``: None if a batch was fenced (its topic's record must be read again to tell a
        delete), without changing ``prepared``: call again without it.
        """
        results = dict(prepared.results)
        results.update((i, r) for (i, _), r in zip(prepared.ready, appended, strict=True))
        ordered = [results[i] for i in range(len(prepared.groups))]
        if cached_only and any(isinstance(r.error, LogFenced) for r in ordered):
            return None
        final = self._deleted_as_unknown(ordered)
        unknown = [r.error for r in final if isinstance(r.error, UnknownTopic)]
        if unknown and len(unknown) == len(final):
            raise unknown[0]  # every batch met a delete: the request's answer is that the topic is gone
        return prepared.groups, final

    # --- topics ------------------------------------------------------------------------------

    def _topic(
        self, topic: str, *, refresh: bool = False, cached_only: bool = False, read: set[str] | None = None
    ) -> TopicRecord | None:
        """The topic's record as this process knows it, read again if older than the TTL (or ``refresh``).

        ``read``: the topic is added to it when its record is read from Oxia.
        """
        now = self._clock()
        with self._lock:
            cached = self._cached.get(topic)
            if cached is not None and not refresh:
                age = now - cached.checked_at
                if age < TOPIC_CACHE_TTL_MS / 1000:
                    return cached.record
                if cached_only:
                    # One caller past the TTL reads the record again (llog serve: on a pool thread); until it
                    # has, the others keep to the cached one, for at most one more TTL, instead of each
                    # reading it (at 4,000 requests/s, a burst of pool threads that stalled the event loop).
                    if cached.rereading and age < 2 * TOPIC_CACHE_TTL_MS / 1000:
                        return cached.record
                    cached.rereading = True
        if cached_only:
            raise _WouldBlock
        try:
            fresh = self._read_topic(topic, now)
            if read is not None:
                read.add(topic)
        except BaseException:
            if cached is not None:
                cached.rereading = False  # the next caller past the TTL tries again
            raise
        with self._lock:
            if cached is not None and (
                cached.identity != fresh.identity or now - cached.checked_at >= STALE_TOPIC_MS / 1000
            ):
                self._forget(topic)  # possibly deleted and reclaimed since: create its partitions afresh
            self._cached[topic] = fresh
        return fresh.record

    def _read_topic(self, topic: str, now: float) -> _CachedTopic:
        """The topic's record read from Oxia, and learned by the writer's layouts (the incarnation it appends to).

        The layouts keep the read that began last; one that began earlier may still hold the newer answer (it
        was answered late: the topic was created meanwhile). When they disagree, a read begun after both
        answers settles it (Oxia is linearizable).
        """
        for _ in range(2):
            read_at = self.writer.layouts.now()
            fresh = _CachedTopic(self.topics.get(topic), now)
            kept = self.writer.layouts.learn(topic, fresh.record, read_at)
            if kept == (None if fresh.record is None else fresh.record.keys_id):
                break
        return fresh

    def _forget(self, topic: str) -> None:
        """Forget what this process knows of a topic's partitions (called with the lock held)."""
        for pid in [pid for pid in self._initialized if pid[0] == topic]:
            self._initialized.discard(pid)
            # The writer's cached open generation of a reclaimed partition names a sequence that is gone.
            self.writer.forget(*pid)

    def _check(
        self,
        entry: ProduceEntry | SharedAppendGroup,
        record: TopicRecord | None,
        read: set[str],
        cached_only: bool = False,
    ) -> TopicRecord | None:
        """The entry's topic record if the entry may be written to it; raises otherwise (nothing written).

        A record cached before this request (not in ``read``) that may be out of date for the entry's
        partition is read again first, so that the request is judged as a process without a cache would.
        """
        if entry.partition is not None and entry.topic not in read and self._may_be_stale(entry, record):
            record = self._topic(entry.topic, refresh=True, cached_only=cached_only, read=read)
        if record is not None and record.deleted:
            raise UnknownTopic(entry.topic, f"topic {entry.topic!r} was deleted")
        if entry.partition is None:
            if record is None or record.implicit:
                raise UnknownTopic(
                    entry.topic,
                    f"topic {entry.topic!r} was not created (POST /topics): records without a partition are routed "
                    "by key among an explicit topic's partitions; name a partition to produce to an implicit topic",
                )
            return record
        if record is not None and not record.implicit and entry.partition >= record.partitions:
            raise InvalidPartition(
                f"partition {entry.partition} does not exist: topic {entry.topic!r} has {record.partitions} "
                f"partitions (0 to {record.partitions - 1})"
            )
        return record

    def _may_be_stale(self, entry: ProduceEntry | SharedAppendGroup, record: TopicRecord | None) -> bool:
        """Whether another process may have changed what the cached record says of the entry's partition: one
        past an explicit topic's count (a grow), or one an implicit topic's record does not name yet and this
        process has not written (a create may have made the topic explicit, a count without it)."""
        assert entry.partition is not None
        if record is not None and not record.implicit:
            return entry.partition >= record.partitions
        named = record is not None and entry.partition in (record.implicit_partitions or frozenset())
        return not named and (entry.topic, entry.partition) not in self._initialized

    def _route(
        self,
        entries: Sequence[ProduceEntry | SharedAppendGroup],
        records: dict[str, TopicRecord | None],
        cached_only: bool,
    ) -> tuple[list[SharedAppendGroup], int]:
        """The request's batches, and how many round-robin turns they took.

        ``cached_only``: the turns are read, not taken; ``_prepare`` takes them once it succeeds, so that
        an attempt that falls back (and routes again) does not skip a partition.
        """
        counts = {topic: record.partitions for topic, record in records.items() if record and not record.implicit}
        taken = 0

        def next_partition(count: int) -> int:
            nonlocal taken
            with self._lock:
                turn = self._round_robin + taken
                if cached_only:
                    taken += 1
                else:
                    self._round_robin += 1
            return turn % count

        return route(entries, counts, next_partition), taken

    def _deleted_as_unknown(self, results: list[AppendResult]) -> list[AppendResult]:
        """A fenced partition of a topic whose record now says deleted: report ``UnknownTopic``."""
        deleted = set()
        for topic in {r.topic for r in results if isinstance(r.error, LogFenced)}:
            try:
                record = self._topic(topic, refresh=True)
            except LlogError:
                continue  # cannot tell: the batch stays LogFenced, which it is
            if record is not None and record.deleted:
                deleted.add(topic)
        return [
            AppendResult(r.topic, r.partition, r.count, error=UnknownTopic(r.topic, f"topic {r.topic!r} was deleted"))
            if r.topic in deleted and isinstance(r.error, LogFenced)
            else r
            for r in results
        ]

    # --- partitions ------------------------------------------------------------------------

    def _ensure_initialized(
        self, topic: str, partition: int, record: TopicRecord | None, cached_only: bool = False
    ) -> None:
        pid = (topic, partition)
        if pid in self._initialized:
            return
        if cached_only:
            raise _WouldBlock
        if record is None or record.implicit:
            # In the topic's record before it exists (llog.protocol.topics): a delete fences it or refuses it.
            added = self.topics.add_implicit_partition(topic, partition, record)
            self.writer.layouts.learn(topic, added)
            with self._lock:
                cached = self._cached.get(topic)
                if cached is not None and (cached.record is None or cached.record.identity == added.identity):
                    cached.record = added  # the same topic, as it is now (its first record, or a newer version)
            record = added
        if record.implicit:
            self.writer.initialize_partition(topic, partition)
        else:  # an explicit topic's partitions have its protocol, whatever this process's default
            self.topics.initialize(record, [partition])
        with self._lock:
            self._initialized.add(pid)

    def producer(self, producer_id: str | None) -> ProducerIdentity:
        """``POST /producers``: a new producer id at epoch 0, or ``producer_id`` with its epoch bumped."""
        registry = self.writer.producers
        return registry.issue() if producer_id is None else registry.bump(producer_id)

    def close(self) -> None:
        if self.batcher is not None:
            self.batcher.close()
        self.writer.close()
