"""Topics: a named set of partitions ``0..N-1`` with settings, created, grown and deleted explicitly.

A topic record (``{root}/__catalog/topics/{topic}``, ``partition_key =
"__catalog"``, docs/FORMAT.md) holds ``{"partitions", "config",
"created_at_ms", "state", "deleted_at_ms", "topic_id", "keys_include_id"}``, and
``"tags"`` when it has any.
Every topic has one. ``keys_include_id`` says where its partitions live
(``llog.format.keys``): a topic this version creates has them in folders named
by its ``topic_id``, so an incarnation's keys and objects never coincide with
another's of the same name; a topic whose partitions were written before keep
the legacy folders (an implicit topic from before records, a create adopting
one, and their deletes say so). Everything resolves a topic's partitions to
its current record's keys (``TopicLayouts``), and discovery to the keys each
registry entry names (``llog.protocol.registry``).

An *implicit* topic (created by a produce naming partition numbers) has
a record marked so (``implicit_partitions``): the set of partition numbers
produce added to it, each up to 2**31-1. Partitions registered before topic
records existed (``llog.protocol.registry``, no record) keep working: the
next produce to the topic writes its record with every registered partition
(the migration), and a delete of such a topic writes a deleted one.

Actions, each idempotent, so a crash at any point is finished by repeating it
(or by the next action that needs its result):

* **create**: put the record create-only, then initialize every partition
  (register, cursor, control: ``PartitionMetadata.create`` with the topic's
  protocol). Crash after the record: the next create with the same settings,
  a grow, or a produce to the partition initializes what is missing. A create
  of an implicit topic's name adopts its partitions (the count must cover them):
  a compare-and-set makes its record explicit, with the same ``topic_id``.
* **add a partition to an implicit topic** (``add_implicit_partition``, by
  produce, before it registers and initializes the partition): create the
  record create-only (the first produce) or add the number by compare-and-set.
  A deleted record refuses it (``UnknownTopic``); a record that turned
  explicit bounds it by its count. Crash after the record: the partition is
  named but not initialized; the next produce initializes it, a delete
  creates it fenced.
* **grow**: compare-and-set the record to the larger count, then initialize
  the new partitions. Crash after the record: as for create.
* **configure** (``configure``): compare-and-set the record to its settings
  (retention) or tags changed, on the version read; a concurrent change makes
  it read again and re-apply. It changes nothing else: not the partition
  count, the id or the state (a deleted or implicit topic is refused with
  ``UnknownTopic``). One write: a crash leaves the change done or not done.
* **delete**: compare-and-set the record to ``state: "deleted"``, then make
  sure every partition exists and fence it, marking its ``meta/control`` as a
  deleted topic's (``fence.set_state`` with ``topic_deleted``: no unfence
  reopens it). A delete of a record already deleted fences under a reclaim
  claim of its own (``_claim_to_fence``, released after the fence): no reclaim
  runs meanwhile, which would have the fence create its partitions again; it
  does not fence a record a reclaim run holds (that run deletes every
  partition), and takes over an expired claim. Crash after
  the record: the next delete fences; until then produce processes refuse the
  topic as soon as they see the record (below). Deleting an implicit topic
  writes a deleted record for it.
* **reclaim** (``reclaim_topic``, called by GC once the deletion is older than
  GC's grace plus ``RECLAIM_DELAY_MS``): first claim the deleted record for
  this run (compare-and-set of ``reclaim: {run_id, claimed_at_ms}`` on the
  version the run read; a claim of another run younger than
  ``RECLAIM_LEASE_MS``, or a record changed since, makes the run leave the
  topic alone); then, per partition of this incarnation (the record's, and the
  registry entries naming its id), delete its Oxia keys
  (one bounded range per key depth, ``PartitionKeys.oxia_ranges``, ``meta/``
  first, so anything still reading it finds it not initialized), then its S3
  objects (compacted objects, manifests), then its registry entry (a delete
  conditional on the version read with this incarnation's id); last, the
  topic record, conditional on the claim's version. A run that defers a
  partition releases its claim. Crash anywhere: the record is still there,
  deleted (claimed until the claim expires), and the next pass repeats every
  step (deleting what is gone is a no-op). Shared WAL blobs are left to GC,
  which deletes them once no index references them.

Invariants:

* T1 Partition counts only grow, and a record's name claim is create-only: two
  creates of one name agree or one gets ``TopicExists``.
* T2 After a delete returns, no append to the topic succeeds: every partition
  the record names (and every one registered for its incarnation) is fenced,
  so an append racing the delete fails (``LogFenced``, which the produce service reports as
  ``UnknownTopic`` once it reads the record). The delete's fence marks each
  ``meta/control`` as its deleted topic's (``fence.set_state``'s
  ``topic_deleted``) and goes on until the record in force is fenced and
  marked, and every unfence refuses a marked partition, re-checking after
  each compare-and-set it loses: an unfence that checked the topic record
  before the delete either loses to the delete's fence or is fenced again by
  it (docs/PROTOCOL.md, "Fence and unfence"). A produce initializes a
  partition only once it is in the record (an explicit topic's count, or added
  by compare-and-set), so a process that trusts a stale copy of the record,
  or saw none, cannot open a partition the delete did not fence: its
  compare-and-set (or create-only put) meets the deleted record. A repeated
  delete (the first one crashed part-way) fences under its own reclaim claim;
  one that finds the claim held returns without fencing, leaving the work to
  the holder (a reclaim run deletes every partition, another repeated delete
  fences them), so until that holder is done a partition the crashed delete
  never reached may still take appends; an expired claim is taken over.
* T3 Reclaim never touches another topic's data, nor another incarnation of
  its name: it works only under the deleted incarnation's own prefixes, which
  for a topic created by this version include its ``topic_id``, so a topic
  created again under the name (after reclaim finished) has other keys,
  objects and registry entry values; its registry entries are removed only if
  they still name that id. This needs no timing: a run paused for any time
  (past its lease, while another run took over, finished, and the name was
  created again and written) deletes nothing of the new incarnation. That holds
  for a deleted topic whose partitions are in the legacy folders (written
  before topic ids) too: a topic is created in the legacy folders only over
  partitions registered before topic records existed, and reclaim removes the
  registry entries before the record, so the name's next topic has an id
  (only entries naming no id count as legacy partitions, and a repeated delete
  fences only under its own claim, so it registers no reclaimed partition
  again; one paused past that claim's lease can, and its entries, naming the
  reclaimed id, are ignored by discovery and replaced by the current
  incarnation's registration, docs/GC.md "Deleted topics"). Between runs the
  claim is an efficiency measure: two runs (the scheduled GC and a manual one) do
  not work on one topic at once (a run deletes nothing before its
  compare-and-set claim on the record it read succeeded; a claim older than
  ``RECLAIM_LEASE_MS`` may be taken over, and its holder starts no
  partition's deletion past half of it), and the record is deleted only by
  the run that holds it claimed.
* T4 Nothing writes to a reclaimed partition. A produce process trusts a
  topic record it read for at most ``TOPIC_CACHE_TTL_MS``, and treats an entry
  not confirmed for ``STALE_TOPIC_MS`` as a possibly reclaimed topic (it forgets
  the partitions it initialized); reclaim waits GC's grace
  (> twice the writers' commit delay) plus ``RECLAIM_DELAY_MS`` >= both. Every
  component resolves a partition's keys from the record (``TopicLayouts``), so a
  process that still holds an old incarnation's keys past these bounds (paused)
  writes only into the old incarnation's folder, never a newer one's: what it
  writes there is not readable (and a sequential put into a reclaimed folder is
  left for no one to delete), the price of a pause beyond the bounds.
  The compaction planner no longer lists a deleted topic
  (``LogCatalog.partitions``), and a compactor still holding a partition's
  claim defers that partition's reclaim. (A compaction task queued before the
  delete and claimed in the instant between that check and the deletion of
  ``meta/`` could still write; the time bounds make it remote, not impossible.)
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from llog.config import RetentionPolicy, WriterConfig
from llog.errors import (
    CorruptMetadata,
    InvalidArgument,
    InvalidPartition,
    InvalidPartitionCount,
    TopicDeleted,
    TopicExists,
    UnknownTopic,
    VersionConflict,
)
from llog.format.keys import (
    DEFAULT_ROOT_PREFIX,
    PartitionKeys,
    RegistryKeys,
    partition_keys,
    validate_partition,
    validate_topic,
    validate_topic_id,
)
from llog.format.kv.control import AppendProtocol, LogState
from llog.limits import MAX_PARTITIONS
from llog.protocol import fence
from llog.protocol.append_sequential import SequentialAppender
from llog.protocol.faults import RECLAIM_AFTER_LEASE_CHECK, FaultHook
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.registry import PartitionRegistry
from llog.store.oxia import CREATE_ONLY, OxiaStore
from llog.store.storage import Storage

TOPIC_CACHE_TTL_MS = 10_000  # a produce process reads a topic's record at most this often
# A cached topic not confirmed for this long may have been deleted and reclaimed unseen: its partitions are
# initialized again before the next write. Reclaim waits at least this long after a deletion (T4), so an idle
# topic pays that only after ten minutes.
STALE_TOPIC_MS = 10 * 60 * 1000
RECLAIM_DELAY_MS = STALE_TOPIC_MS
# A reclaim run claims the deleted topic's record for this long (T3); it starts no partition's deletion past
# half of it, so a run whose claim another took over has stopped, unless a pause of the other half fell
# between its check and its next delete.
RECLAIM_LEASE_MS = 60 * 60 * 1000
PARTITION_CONCURRENCY = 16  # partitions initialized, fenced or described at once


class TopicState(str, Enum):
    ACTIVE = "active"
    DELETED = "deleted"


MAX_LIMIT = 2**63 - 1  # a retention limit any 64-bit reader of the topic record can hold


def _limit(doc: Any, name: str) -> int | None:
    value = doc.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise InvalidArgument(f"config.{name} must be an integer from 1 to {MAX_LIMIT} or null, got {value!r}")
    return value


@dataclass(frozen=True)
class TopicConfig:
    """A topic's settings. A retention limit left null leaves the deployment's (``LLOG_RETENTION_*``) in force."""

    append_protocol: AppendProtocol
    retention_ms: int | None = None
    retention_bytes: int | None = None

    FIELDS = ("append_protocol", "retention_ms", "retention_bytes")

    @classmethod
    def parse(cls, doc: Any, *, default_protocol: AppendProtocol) -> TopicConfig:
        """A config document (fields optional); ``InvalidArgument`` names what is wrong."""
        if doc is None:
            doc = {}
        if not isinstance(doc, dict):
            raise InvalidArgument("config must be a JSON object")
        unknown = sorted(set(doc) - set(cls.FIELDS))
        if unknown:
            raise InvalidArgument(f"config has unknown keys: {', '.join(unknown)} (known: {', '.join(cls.FIELDS)})")
        protocol = doc.get("append_protocol")
        if protocol is None:
            protocol = default_protocol
        else:
            try:
                protocol = AppendProtocol(protocol)
            except ValueError:
                choices = ", ".join(p.value for p in AppendProtocol)
                raise InvalidArgument(f"config.append_protocol {protocol!r} is not one of {choices}") from None
        return cls(protocol, _limit(doc, "retention_ms"), _limit(doc, "retention_bytes"))

    def to_json(self) -> dict[str, Any]:
        return {
            "append_protocol": self.append_protocol.value,
            "retention_ms": self.retention_ms,
            "retention_bytes": self.retention_bytes,
        }

    def retention(self, default: RetentionPolicy) -> RetentionPolicy:
        """The policy of the topic's partitions: its own limits, the deployment's where it sets none."""
        return RetentionPolicy(
            default.max_age_ms if self.retention_ms is None else self.retention_ms,
            default.max_bytes if self.retention_bytes is None else self.retention_bytes,
        )


def validate_partition_count(partitions: object) -> int:
    if isinstance(partitions, bool) or not isinstance(partitions, int) or not 1 <= partitions <= MAX_PARTITIONS:
        raise InvalidPartitionCount(f"partitions must be an integer from 1 to {MAX_PARTITIONS}, got {partitions!r}")
    return partitions


@dataclass(frozen=True)
class ReclaimClaim:
    """Which reclaim run works on a deleted topic, since when (its own clock): no other may until it expires."""

    run_id: str
    claimed_at_ms: int

    def held_by_another(self, run_id: str, now_ms: int) -> bool:
        return self.run_id != run_id and now_ms < self.claimed_at_ms + RECLAIM_LEASE_MS


def new_topic_id() -> str:
    """A topic's identity, given at its creation: a re-created name gets another (docs/FORMAT.md)."""
    return str(uuid.uuid4())


@dataclass(frozen=True)
class TopicRecord:
    """A topic's record. An explicit topic has ``partitions`` ``0..N-1``; an implicit one (``implicit_partitions``
    not None, ``partitions`` 0) has exactly the partition numbers produce added to it, each up to 2**31-1."""

    topic: str
    partitions: int
    config: TopicConfig
    created_at_ms: int
    state: TopicState = TopicState.ACTIVE
    deleted_at_ms: int | None = None
    version_id: int | None = field(default=None, compare=False)  # None: not stored yet
    implicit_partitions: frozenset[int] | None = None
    topic_id: str | None = None  # None: a record written before topic ids
    reclaim: ReclaimClaim | None = None  # the reclaim run working on this deleted topic
    # The topic's partitions live in folders named with ``topic_id`` (every topic created from that version
    # on); False: in the legacy folders, which partitions written before it (and their topic) keep.
    keys_include_id: bool = False
    tags: tuple[tuple[str, str], ...] = ()  # (key, value), sorted by key: the Kinesis API's stream tags

    @property
    def keys_id(self) -> str | None:
        """The id in this incarnation's partition keys, None for the legacy folders (``PartitionKeys.topic_id``)."""
        return self.topic_id if self.keys_include_id else None

    def partition_keys(self, partition: int, root: str) -> PartitionKeys:
        """The keys of one of this incarnation's partitions."""
        return partition_keys(self.topic, partition, root, self.keys_id)

    @property
    def deleted(self) -> bool:
        return self.state is TopicState.DELETED

    @property
    def implicit(self) -> bool:
        return self.implicit_partitions is not None

    @property
    def partition_numbers(self) -> list[int]:
        """Every partition the record names, in numeric order."""
        if self.implicit_partitions is not None:
            return sorted(self.implicit_partitions)
        return list(range(self.partitions))

    @property
    def identity(self) -> str:
        """What tells this incarnation of the name from another: its id, or for an older record its creation time."""
        return self.topic_id if self.topic_id is not None else f"created-{self.created_at_ms}"

    def encode(self) -> bytes:
        doc: dict[str, Any] = {
            "partitions": self.partitions,
            "config": self.config.to_json(),
            "created_at_ms": self.created_at_ms,
            "state": self.state.value,
            "deleted_at_ms": self.deleted_at_ms,
            "topic_id": self.topic_id,
            "keys_include_id": self.keys_include_id,
        }
        if self.implicit_partitions is not None:
            # A version that reads ``partitions`` as a count refuses the record (null) rather than misreading it.
            doc["partitions"] = None
            doc["implicit_partitions"] = sorted(self.implicit_partitions)
        if self.reclaim is not None:
            doc["reclaim"] = {"run_id": self.reclaim.run_id, "claimed_at_ms": self.reclaim.claimed_at_ms}
        if self.tags:
            doc["tags"] = dict(self.tags)
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, topic: str, value: bytes, version_id: int) -> TopicRecord:
        try:
            doc = json.loads(value)
            # A field a newer version added is ignored (docs/FORMAT.md, "Compatibility").
            stored = {k: v for k, v in doc["config"].items() if k in TopicConfig.FIELDS}
            implicit = doc.get("implicit_partitions")
            topic_id = doc.get("topic_id")
            if topic_id is not None and not isinstance(topic_id, str):
                raise TypeError(f"topic_id {topic_id!r}")
            keys_include_id = doc.get("keys_include_id", False)
            if not isinstance(keys_include_id, bool):
                raise TypeError(f"keys_include_id {keys_include_id!r}")
            if keys_include_id:
                validate_topic_id(topic_id)
            claim = doc.get("reclaim")
            reclaim = None if claim is None else ReclaimClaim(str(claim["run_id"]), int(claim["claimed_at_ms"]))
            tags = doc.get("tags") or {}
            if not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
                raise TypeError(f"tags {tags!r}")
            return cls(
                topic,
                0 if implicit is not None else validate_partition_count(doc["partitions"]),
                TopicConfig.parse(stored, default_protocol=AppendProtocol.SEQUENTIAL),
                int(doc["created_at_ms"]),
                TopicState(doc["state"]),
                None if doc.get("deleted_at_ms") is None else int(doc["deleted_at_ms"]),
                version_id,
                None if implicit is None else frozenset(validate_partition(p) for p in implicit),
                topic_id,
                reclaim,
                keys_include_id,
                tuple(sorted(tags.items())),
            )
        except (ValueError, KeyError, TypeError, InvalidArgument) as exc:
            raise CorruptMetadata(f"topic record of {topic!r} is not readable: {exc}") from None


def keys_ids(records: Mapping[str, TopicRecord]) -> dict[str, str | None]:
    """Each recorded topic's current incarnation, as ``PartitionRegistry.entries`` takes it (``current``)."""
    return {topic: record.keys_id for topic, record in records.items()}


class TopicRegistry:
    """Create, read, grow and delete topic records, and initialize or fence their partitions."""

    def __init__(
        self,
        oxia: OxiaStore,
        *,
        root: str = DEFAULT_ROOT_PREFIX,
        clock: Callable[[], float] = time.time,
        writer_config: WriterConfig | None = None,
    ) -> None:
        self.oxia = oxia
        self.root = root
        self.keys = RegistryKeys(root)
        self.registry = PartitionRegistry(oxia, root=root, clock=clock)
        self._clock = clock
        self._writer_config = writer_config or WriterConfig()

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    # --- reads -----------------------------------------------------------------------------

    def get(self, topic: str) -> TopicRecord | None:
        """The topic's record (one Oxia read), or None: implicit or unknown."""
        found = self.oxia.get(self.keys.topic(topic), partition_key=self.keys.partition_key)
        return None if found is None else TopicRecord.decode(topic, found.value, found.version_id)

    def records(self) -> dict[str, TopicRecord]:
        """Every topic record, by name (one scan)."""
        found = {}
        scan = self.oxia.range_scan(
            self.keys.topics_prefix, self.keys.topics_scan_end, partition_key=self.keys.partition_key
        )
        for item in scan:
            topic = self.keys.parse_topic(item.key)
            if topic is not None:
                found[topic] = TopicRecord.decode(topic, item.value, item.version_id)
        return found

    def registered(self, topic: str, record: TopicRecord | None) -> list[int]:
        """The partitions registered for ``record``'s incarnation, in numeric order; with no record, those from
        before topic records (entries naming no id). Entries a reclaimed incarnation left are not counted."""
        current = {} if record is None else {topic: record.keys_id}
        return [e.partition for e in self.registry.entries(topic, current=current).get(topic, [])]

    def active(self, topic: str) -> TopicRecord:
        """The record of an explicit topic that is not deleted; ``UnknownTopic`` otherwise."""
        record = self.get(topic)
        if record is None or record.deleted or record.implicit:
            raise UnknownTopic(topic)
        return record

    # --- create, grow ------------------------------------------------------------------------

    def create(self, topic: str, partitions: int, config: TopicConfig) -> tuple[TopicRecord, bool]:
        """Create the topic (True) or find it with the same settings (False); then initialize every partition.

        An implicit topic's name is adopted (True): its record becomes explicit, keeping its id, if the count
        covers its partitions.
        """
        validate_topic(topic)
        validate_partition_count(partitions)
        while True:
            record = self.get(topic)
            if record is None or (record.implicit and not record.deleted):
                existing = set(self.registered(topic, record))
                if record is not None:
                    existing |= set(record.partition_numbers)
                if existing and max(existing) >= partitions:
                    raise InvalidPartitionCount(
                        f"topic {topic!r} already has partition {max(existing)} (created by produce): "
                        f"partitions must be at least {max(existing) + 1}"
                    )
                # Partitions from before topic records keep their legacy folders; an adopted record its own.
                created_at, topic_id, keyed = (self._now_ms(), new_topic_id(), not existing) if record is None else (
                    record.created_at_ms, record.topic_id or new_topic_id(), record.keys_include_id)  # fmt: skip
                explicit = TopicRecord(topic, partitions, config, created_at, topic_id=topic_id, keys_include_id=keyed)
                try:
                    if record is None:
                        record = self._put_new(explicit)
                    else:
                        adopted = replace(explicit, version_id=record.version_id)
                        record = replace(adopted, version_id=self._replace(adopted))
                except VersionConflict:
                    continue  # created or changed concurrently: compare with that one
                created = True
            else:
                created = False
                if record.deleted:
                    raise TopicDeleted(
                        f"topic {topic!r} was deleted and its data is not reclaimed yet; the name is free again "
                        "after the next garbage collection past its grace period"
                    )
                if (record.partitions, record.config) != (partitions, config):
                    raise TopicExists(
                        f"topic {topic!r} exists with other settings: partitions {record.partitions}, "
                        f"config {json.dumps(record.config.to_json())}"
                    )
            self.initialize(record, range(record.partitions))
            return record, created

    def add_implicit_partition(self, topic: str, partition: int, record: TopicRecord | None) -> TopicRecord:
        """The topic's record once it names ``partition``: what a produce needs before it creates a partition.

        ``record`` is the caller's (possibly stale) copy, None if it saw none. An implicit topic's first
        produce creates its record create-only, with the partitions registered before topic records existed
        (their migration); a new partition is added by compare-and-set. So a delete, which compare-and-sets the
        record to deleted and then fences every partition it names, either refuses the addition
        (``UnknownTopic``) or fences the partition. An explicit topic's record is returned as it is
        (``InvalidPartition`` past its count).
        """
        validate_partition(partition)
        while True:
            try:
                if record is None:
                    registered = self.registered(topic, None)
                    fresh = TopicRecord(
                        topic, 0, TopicConfig(self._writer_config.append_protocol), self._now_ms(),
                        implicit_partitions=frozenset(registered) | {partition}, topic_id=new_topic_id(),
                        keys_include_id=not registered,  # partitions from before records keep their folders
                    )  # fmt: skip
                    return self._put_new(fresh)
                if record.deleted:
                    raise UnknownTopic(topic, f"topic {topic!r} was deleted")
                if record.implicit_partitions is None:
                    if partition >= record.partitions:
                        raise InvalidPartition(
                            f"partition {partition} does not exist: topic {topic!r} has {record.partitions} "
                            f"partitions (0 to {record.partitions - 1})"
                        )
                    return record
                if partition in record.implicit_partitions:
                    return record
                grown = replace(record, implicit_partitions=record.implicit_partitions | {partition})
                return replace(grown, version_id=self._replace(grown))
            except VersionConflict:
                record = self.get(topic)  # created, grown, adopted or deleted meanwhile: judge that one

    def grow(self, topic: str, partitions: int) -> TopicRecord:
        """Raise the partition count (the same count is a no-op that completes a crashed grow)."""
        validate_partition_count(partitions)
        while True:
            record = self.active(topic)
            if partitions < record.partitions:
                raise InvalidPartitionCount(
                    f"topic {topic!r} has {record.partitions} partitions; the count can only grow"
                )
            if partitions > record.partitions:
                grown = replace(record, partitions=partitions)
                try:
                    version = self._replace(grown)
                except VersionConflict:
                    continue
                record = replace(grown, version_id=version)
            self.initialize(record, range(record.partitions))
            return record

    # --- configure ---------------------------------------------------------------------------

    def configure(self, topic: str, change: Callable[[TopicRecord], TopicRecord]) -> TopicRecord:
        """The record with ``change`` applied (its settings or tags), by compare-and-set on the version read.

        ``change`` is applied again to the record a concurrent writer left; it may raise to refuse the change
        (as the Kinesis retention calls do for a period in the wrong direction) and must leave the partitions,
        the id and the state as they are.
        """
        while True:
            record = self.active(topic)
            changed = change(record)
            if (changed.partitions, changed.topic_id, changed.state, changed.reclaim) != (
                record.partitions, record.topic_id, record.state, record.reclaim
            ):  # fmt: skip
                raise ValueError("configure changes a topic's settings and tags only")
            if changed == record:
                return record
            try:
                version = self._replace(changed)
            except VersionConflict:
                continue
            return replace(changed, version_id=version)

    def initialize(self, record: TopicRecord, partitions: Iterable[int]) -> None:
        """Create the given partitions of the topic if absent, with the topic's protocol (idempotent)."""
        self._each(record, partitions, lambda meta: meta.create(record.config.append_protocol))

    # --- delete ------------------------------------------------------------------------------

    def delete(self, topic: str) -> TopicRecord:
        """Mark the topic deleted, then fence every partition; again on a deleted topic it re-fences, under a
        reclaim claim of its own (``_claim_to_fence``)."""
        validate_topic(topic)
        claim: TopicRecord | None = None
        while True:
            record = self.get(topic)
            try:
                if record is None:
                    record = self._delete_unrecorded(topic)
                elif not record.deleted:
                    deleted = replace(record, state=TopicState.DELETED, deleted_at_ms=self._now_ms())
                    record = replace(deleted, version_id=self._replace(deleted))
                else:
                    claim = self._claim_to_fence(record)
                    if claim is None:
                        return record  # a reclaim run works on it: fencing would create its partitions again
                    record = claim
            except VersionConflict:
                continue
            break
        registered = self.registered(topic, record)
        self._each(record, sorted(set(registered) | set(record.partition_numbers)), self._fence(record))
        if claim is not None:  # released, so that the next reclaim run need not wait for it to expire
            with contextlib.suppress(VersionConflict):  # expired and taken over by a reclaim run
                self._replace(replace(claim, reclaim=None))
        return record

    def _claim_to_fence(self, record: TopicRecord) -> TopicRecord | None:
        """A repeated delete's claim on a deleted record: the reclaim claim (``ReclaimClaim``, a compare-and-set
        on the version read), so that no reclaim run deletes the topic's partitions while this delete fences
        them, which would create them again (docs/GC.md "Deleted topics"); None if a reclaim run holds the
        record (it deletes every partition). An expired claim is taken over. ``VersionConflict`` if the record
        changed since it was read."""
        now_ms = self._now_ms()
        run_id = new_reclaim_run_id()
        if record.reclaim is not None and record.reclaim.held_by_another(run_id, now_ms):
            return None
        claimed = replace(record, reclaim=ReclaimClaim(run_id, now_ms))
        return replace(claimed, version_id=self._replace(claimed))

    def _delete_unrecorded(self, topic: str) -> TopicRecord:
        """Delete an implicit topic whose partitions were all created before topic records existed."""
        registered = self.registered(topic, None)
        if not registered:
            raise UnknownTopic(topic)
        now = self._now_ms()
        record = TopicRecord(
            topic, 0, TopicConfig(self._writer_config.append_protocol), now, TopicState.DELETED, now,
            implicit_partitions=frozenset(registered), topic_id=new_topic_id(),
        )  # fmt: skip
        return self._put_new(record)

    def _fence(self, record: TopicRecord) -> Callable[[PartitionMetadata], object]:
        # No appender cache to keep: a throwaway one fences sequential partitions.
        sequential = SequentialAppender(self._writer_config, fault=lambda point: None, clock=self._clock)

        def run(meta: PartitionMetadata) -> object:
            # A partition the create never got to is created first, fenced: nothing can open it later.
            meta.create(record.config.append_protocol)
            return fence.set_state(
                meta, LogState.FENCED, config=self._writer_config, sequential=sequential, topic_deleted=True
            )

        return run

    # --- helpers -------------------------------------------------------------------------

    def _put_new(self, record: TopicRecord) -> TopicRecord:
        """Store a record under a name that has none (create-only: ``VersionConflict`` if one appeared)."""
        version = self.oxia.put(
            self.keys.topic(record.topic),
            record.encode(),
            partition_key=self.keys.partition_key,
            expected_version_id=CREATE_ONLY,
        )
        return replace(record, version_id=version)

    def _replace(self, record: TopicRecord) -> int:
        assert record.version_id is not None, "only a stored record is replaced"
        return self.oxia.put(
            self.keys.topic(record.topic),
            record.encode(),
            partition_key=self.keys.partition_key,
            expected_version_id=record.version_id,
        )

    def _each(
        self, record: TopicRecord, partitions: Iterable[int], action: Callable[[PartitionMetadata], object]
    ) -> None:
        metas = [PartitionMetadata(self.oxia, record.partition_keys(p, self.root)) for p in partitions]
        if len(metas) <= 1:
            for meta in metas:
                action(meta)
            return
        with ThreadPoolExecutor(min(PARTITION_CONCURRENCY, len(metas)), thread_name_prefix="llog-topic") as pool:
            list(pool.map(action, metas))  # raises the first failure, after every action ended


class TopicLayouts:
    """Topic name -> the keys of its current incarnation's partitions: what the writer, the reader and everything
    else that names a partition by topic and number (compactor, retention, claims, the CLI) resolve through.

    A topic's record (its ``keys_id``), or its absence (the legacy folders: partitions from before topic
    records, or none), is read once and trusted for ``TOPIC_CACHE_TTL_MS``, the produce service's rule
    (``llog.service.produce``); the produce service hands in each record it reads (``learn``), so a produce
    costs no read more, and a consume one read per topic and TTL. So a topic created after a process looked
    it up may read as not initialized there for up to one TTL. A holder of an old incarnation's keys (a
    cached entry, a paused process) reads and writes only that incarnation's folder, never a newer one's: a
    record past the TTL is read again before the next resolution, and a reclaimed incarnation's folder
    holds no ``meta/control``, so it reads as not initialized.
    """

    def __init__(self, oxia: OxiaStore, *, root: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.root = root
        self._records = TopicRegistry(oxia, root=root)
        self._clock = clock
        self._cached: dict[str, tuple[str | None, float]] = {}  # topic -> (keys id, read at)
        self._all_read_at = -math.inf  # when ``learn_all`` last saw every record: an unlisted topic had none
        self._lock = threading.Lock()

    def keys(self, topic: str, partition: int) -> PartitionKeys:
        """The keys of ``topic``'s ``partition`` in its current incarnation (``InvalidTopicName`` and
        ``InvalidPartition`` before any read)."""
        validate_partition(partition)
        return partition_keys(topic, partition, self.root, self.topic_id(topic))

    def topic_id(self, topic: str) -> str | None:
        """The id in the keys of ``topic``'s partitions (``TopicRecord.keys_id``); None for the legacy folders."""
        validate_topic(topic)
        now = self._clock()
        with self._lock:
            cached = self._cached.get(topic) or (None, self._all_read_at)
        if now - cached[1] < TOPIC_CACHE_TTL_MS / 1000:
            return cached[0]
        return self.learn(topic, self._records.get(topic), now)

    def learn_all(self, records: Mapping[str, TopicRecord]) -> None:
        """Every topic's record, as one scan just found them (``TopicRegistry.records``): GC's, so that judging
        its WAL blobs' partitions reads no record again."""
        now = self._clock()
        with self._lock:
            self._cached = {topic: (record.keys_id, now) for topic, record in records.items()}
            self._all_read_at = now

    def now(self) -> float:
        """This cache's clock, which ``learn``'s ``read_at`` is measured on."""
        return self._clock()

    def learn(self, topic: str, record: TopicRecord | None, read_at: float | None = None) -> str | None:
        """A record of ``topic`` just read or written elsewhere (None: it has none); the keys id in force after it.

        ``read_at``: when its read began (default: now, a record just written). A read that began before the
        record in hand was learned is ignored: it may be older (it saw no record, and a concurrent produce's
        first record was learned before it was answered), and the writer would then create and append to the
        partition in a folder no record names, where no reader finds what it acknowledged.
        """
        keys_id = None if record is None else record.keys_id
        learned_at = self._clock() if read_at is None else read_at
        with self._lock:
            in_hand = self._cached.get(topic) or (None, self._all_read_at)
            if learned_at < in_hand[1]:
                return in_hand[0]
            self._cached[topic] = (keys_id, learned_at)
        return keys_id


# --- reclaim -----------------------------------------------------------------------------------


@dataclass
class ReclaimResult:
    partitions_reclaimed: int = 0
    objects_deleted: int = 0
    bytes_deleted: int = 0
    finished: bool = False  # the topic record is gone: the name is free
    deferred: list[str] = field(default_factory=list)  # partitions left for a later pass, and why


def reclaim_due(record: TopicRecord, now_ms: int, grace_ms: int) -> bool:
    """Whether a deleted topic may be reclaimed now (invariant T4)."""
    return record.deleted and (record.deleted_at_ms or 0) + grace_ms + RECLAIM_DELAY_MS <= now_ms


def new_reclaim_run_id() -> str:
    return str(uuid.uuid4())


def reclaim_topic(
    storage: Storage, record: TopicRecord, *, run_id: str | None = None, fault_hook: FaultHook | None = None
) -> ReclaimResult:
    """Delete everything of a deleted topic (see the module docstring); repeatable after any crash.

    ``record`` is the record as the caller read it. The run first claims it (compare-and-set on that version,
    ``run_id`` a run's own id): a record another run claimed, or that changed since it was read (reclaimed
    and its name created again), is left alone. Only the claim's version is deleted at the end.
    """
    if not record.deleted:
        raise InvalidArgument(f"topic {record.topic!r} is not deleted; only a deleted topic is reclaimed")
    run_id = run_id or new_reclaim_run_id()
    registry = PartitionRegistry(storage.oxia, root=storage.root)
    keys = RegistryKeys(storage.root)
    result = ReclaimResult()
    now_ms = int(storage.clock() * 1000)
    if record.reclaim is not None and record.reclaim.held_by_another(run_id, now_ms):
        result.deferred.append(f"{record.topic}: reclaim run {record.reclaim.run_id} works on it")
        return result
    assert record.version_id is not None
    claimed = replace(record, reclaim=ReclaimClaim(run_id, now_ms))
    try:
        version = storage.oxia.put(keys.topic(record.topic), claimed.encode(), partition_key=keys.partition_key,
                                   expected_version_id=record.version_id)  # fmt: skip
    except VersionConflict:
        result.deferred.append(f"{record.topic}: its record changed since this run read it")
        return result  # claimed by another run, or reclaimed (and maybe created again): judged next time
    stop_at_ms = now_ms + RECLAIM_LEASE_MS // 2
    # Only this incarnation's entries and keys: a name created again has other ones (``PartitionKeys.topic_id``).
    entries = registry.entries(record.topic, current={record.topic: record.keys_id}).get(record.topic, [])
    registered = [e.partition for e in entries]
    for partition in sorted(set(registered) | set(record.partition_numbers)):
        if storage.clock() * 1000 >= stop_at_ms:
            result.deferred.append(f"{record.topic}: this run's claim is half expired; the next run goes on")
            break
        if fault_hook is not None:
            fault_hook(RECLAIM_AFTER_LEASE_CHECK)
        partition_keys = record.partition_keys(partition, storage.root)
        pk = partition_keys.partition_key
        if storage.oxia.get(partition_keys.compactor_claim, partition_key=pk) is not None:
            result.deferred.append(f"{record.topic}/{partition}: a compactor holds its claim")
            continue
        for start, end in partition_keys.oxia_ranges:
            storage.oxia.delete_range(start, end, partition_key=pk)
        objects = list(storage.blobs.list(storage.bucket, partition_keys.object_prefix))
        storage.blobs.delete(storage.bucket, [o.key for o in objects])
        result.objects_deleted += len(objects)
        result.bytes_deleted += sum(o.size for o in objects)
        registry.deregister(partition_keys)
        result.partitions_reclaimed += 1
    try:
        if result.deferred:  # release the claim, so that the next run need not wait for it to expire
            storage.oxia.put(keys.topic(record.topic), replace(record, reclaim=None).encode(),
                             partition_key=keys.partition_key, expected_version_id=version)  # fmt: skip
        else:
            storage.oxia.delete(keys.topic(record.topic), partition_key=keys.partition_key,
                                expected_version_id=version)  # fmt: skip
            result.finished = True
    except VersionConflict:
        pass  # the claim expired and another run took it over: it finishes
    return result
