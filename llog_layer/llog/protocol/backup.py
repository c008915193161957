"""Back up a namespace's Oxia state to S3, and restore it into an empty namespace (docs/RECOVERY.md).

**Layout** (docs/FORMAT.md, "Backups"), under ``{root}/__catalog/backups/{backup_id}/``,
``backup_id`` a UUIDv7 (ids sort by the time the backup started)::

    partitions/{topic}/{partition:010d}.json   one partition's Oxia records (PartitionSnapshot)
    catalog.json                               topic records, registry entries, groups, producer ids
    backup.json                                written last: the backup is complete once it exists

``__catalog`` is a reserved topic name, so no topic's objects share the
folder, and garbage collection, retention and reclaim never list it: GC
lists ``wal-shared/`` and each partition's ``data/compacted/``, retention
and reclaim only a partition's own prefix. Each backup run keeps the newest
``LLOG_BACKUP_KEEP`` complete backups and deletes the older ones (and any
incomplete one older than those).

**What a snapshot holds.** Every Oxia key of the partition (the bounded
ranges of ``PartitionKeys.oxia_ranges``: ``meta/``, ``index/``,
``producers/``, ``seq/``) with its value, keys relative to the root so a
backup can be restored under another root. Left out: ``meta/compactor-claim``
(ephemeral: tied to a session) and ``meta/gc-watermark`` (GC's progress:
without it GC judges again from the start, which is only slower).

**Consistency.** Oxia has no multi-key snapshot. Per partition the backup
reads the ``meta/`` records (one range scan), the high watermark ``hw``,
then the index and the other folders, then ``meta/`` again, and retries
(``SNAPSHOT_ATTEMPTS``) unless the second read agrees with the first on
everything but what an append moves (a CAS partition's ``sequence_counter``
and ``pending``). What it keeps is then a state the protocol itself passes
through or recovers from:

* Appends only add entries above ``hw``; the snapshot drops every valid
  entry ending above ``hw``, so it is the log as of ``hw``. A CAS partition's
  ``pending`` (committed, maybe not materialized) is kept in its control
  record with the entry, if the scan saw it: the first writer after a restore
  finishes it (A7), create-only, so both together are fine.
* Compaction and retention change the index only while ``meta/compaction``,
  the cursor or the log start (in ``meta/control``) change around it: a
  compaction that committed, or a retention run, during the scan changes the
  second read and the partition is read again. Left unchanged, a compaction
  in flight (same record, same state) can still have rewritten its end key
  or deleted lower keys during the scan: the snapshot then holds the end key
  and some of the lower keys, with the record that names the step, exactly
  what the resuming compactor finishes (A13; I3, I6: the same records at the
  same offsets either way).
* Fences and unfences change ``meta/control``; a fence marker that landed
  before its seal is kept with its void keys (the first writer or unfence
  after a restore seals the generation, A9).
* Idempotent producer states (``producers/``) are scanned after ``hw``, so
  they may remember a batch finalized since, whose entry the snapshot drops:
  restored as read, a retry of it would be answered "duplicate" with offsets
  that hold other records (or none). So each state is cut back to ``hw``
  (``_producer_state_at``): a remembered batch ending above ``hw`` is
  dropped, and so is an in-flight claim whose ``search_from_offset`` lies
  past ``hw + 1`` (claimed after the snapshot's point: its batch, if it
  committed, lies above ``hw``). This keeps I15 and I16 in the restored
  namespace: every batch still remembered has its entry, with its tag, in
  the restored index (which holds everything up to ``hw``); a batch that
  committed above ``hw`` is not in the restored log, and its retry commits
  it once, after ``hw``; a kept claim's search offset is at most ``hw + 1``,
  the restored next offset, so a batch it may have committed lies at or
  after it in the restored log, or (above ``hw``) was not restored and its
  takeover finds no tag, which is true of the restored log. Reading
  ``producers/`` before ``hw`` would give the same guarantees but miss states
  finalized between the two reads (their claims, still in flight, are
  then resolved by a takeover after the claim margin).

Catalog records are read at points chosen so a restore never contradicts a
partition: the groups *before* the partitions (a committed offset is at most
the high watermark + 1 when committed, so at most the snapshot's), the topic
records and the registry before the partitions too (a grow after them only
adds partitions a later create or produce initializes), the producer ids
after them (an id's epoch is at least every epoch its partition states name).
A backup also records when it started and finished.

**Restore** writes one backup into a namespace where the restored topics
have no key: no topic record, no registry entry, no key of any of their
partitions; anything present raises ``NamespaceNotEmpty`` before the first
write, and so does a manifest in S3 of a range ending past a partition's
backed-up high watermark (a restore in place after more was compacted would
reuse acknowledged offsets). Per partition the registry entry comes first (I10), ``meta/control``
last (the existence marker): a restore that stops part-way leaves
partitions that are not initialized, and the topic record is written after
all of its partitions (create-only: one that appeared meanwhile, a produce's
implicit topic, fails the restore with ``NamespaceNotEmpty``), then the
partitions are registered again (``PartitionRegistry.register_again``:
until the record is in force the restored entries are not the name's, and a
registration of the legacy folder may have replaced one). Groups and producer ids are created only where
absent (a live one is kept and counted as skipped). A restore gives back the
state at the backup; after losing Oxia, ``llog.protocol.rebuild`` combines
the latest backup with what S3 proves since and never reuses an offset.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from llog.config import backup_keep_from_env
from llog.errors import (
    BackupNotFound,
    BlobNotFound,
    CorruptMetadata,
    InconsistentReadState,
    LlogError,
    NamespaceNotEmpty,
    UnknownTopic,
    VersionConflict,
)
from llog.format.keys import (
    PARTITION_WIDTH,
    PartitionKeys,
    RegistryKeys,
    S3Location,
    new_object_id,
    validate_topic,
    validate_topic_id,
)
from llog.format.kv.control import ControlRecord
from llog.format.kv.groups import GroupKeys
from llog.format.kv.producers import ProducerKeys, ProducerState
from llog.protocol.index import PartitionIndex
from llog.protocol.metadata import PartitionMetadata
from llog.protocol.namespace import verify_namespace
from llog.protocol.registry import PartitionRegistry
from llog.protocol.topics import PARTITION_CONCURRENCY, TopicRegistry, keys_ids
from llog.store.oxia import CREATE_ONLY, OxiaStore
from llog.store.storage import Storage

log = logging.getLogger(__name__)

BACKUP_FORMAT = "llog-backup-v1"
SNAPSHOT_ATTEMPTS = 8  # reads of one partition before the backup gives up on it (it keeps changing)


# --- layout --------------------------------------------------------------------------------


@dataclass(frozen=True)
class BackupLayout:
    """S3 keys of the backups under one root (docs/FORMAT.md, "Backups")."""

    root: str

    @property
    def prefix(self) -> str:
        return f"{self.root}/__catalog/backups/"

    def folder(self, backup_id: str) -> str:
        return f"{self.prefix}{backup_id}/"

    def summary(self, backup_id: str) -> str:
        return f"{self.folder(backup_id)}backup.json"

    def catalog(self, backup_id: str) -> str:
        return f"{self.folder(backup_id)}catalog.json"

    def partition(self, backup_id: str, topic: str, partition: int) -> str:
        return f"{self.folder(backup_id)}partitions/{validate_topic(topic)}/{partition:0{PARTITION_WIDTH}d}.json"


def _relative(root: str, key: str) -> str:
    if not key.startswith(f"{root}/"):
        raise CorruptMetadata(f"key {key!r} is not under the root {root!r}")
    return key[len(root) + 1 :]


def _text(value: bytes, key: str) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptMetadata(f"{key} holds a value that is not UTF-8 text") from None


def _load(raw: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except ValueError:
        raise CorruptMetadata(f"{what} is not JSON") from None
    if not isinstance(doc, dict) or doc.get("format") != BACKUP_FORMAT:
        raise CorruptMetadata(f"{what} is not a {BACKUP_FORMAT} document")
    return doc


def _dump(doc: dict[str, Any]) -> bytes:
    return json.dumps({"format": BACKUP_FORMAT, **doc}, separators=(",", ":"), sort_keys=True).encode()


# --- documents -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionSnapshot:
    """One partition's Oxia records as of its high watermark: keys relative to the root, values as stored."""

    topic: str
    partition: int
    taken_at_ms: int
    high_watermark: int
    records: dict[str, str]
    attempts: int = 1
    topic_id: str | None = None  # the id in the partition's keys; None: the legacy folder (llog.format.keys)

    def encode(self) -> bytes:
        return _dump(
            {
                "topic": self.topic,
                "topic_id": self.topic_id,
                "partition": self.partition,
                "taken_at_ms": self.taken_at_ms,
                "high_watermark": self.high_watermark,
                "attempts": self.attempts,
                "records": self.records,
            }
        )

    @classmethod
    def decode(cls, raw: bytes, what: str) -> PartitionSnapshot:
        doc = _load(raw, what)
        try:
            return cls(
                validate_topic(doc["topic"]),
                int(doc["partition"]),
                int(doc["taken_at_ms"]),
                int(doc["high_watermark"]),
                {str(k): str(v) for k, v in doc["records"].items()},
                int(doc.get("attempts", 1)),
                None if doc.get("topic_id") is None else validate_topic_id(doc["topic_id"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptMetadata(f"{what} is not a partition snapshot: {exc}") from None

    def keys(self, root: str) -> PartitionKeys:
        return PartitionKeys(self.topic, self.partition, root, self.topic_id)

    def value(self, root: str, key: str) -> bytes | None:
        """The stored value of the full ``key`` (under ``root``), or None if the snapshot has none."""
        found = self.records.get(_relative(root, key))
        return None if found is None else found.encode()

    def control(self, root: str) -> ControlRecord | None:
        raw = self.value(root, self.keys(root).control)
        return None if raw is None else ControlRecord.decode(raw)


@dataclass(frozen=True)
class BackupSummary:
    """``backup.json``: what a complete backup holds and when it was taken."""

    backup_id: str
    started_at_ms: int
    finished_at_ms: int
    topics: dict[str, list[int]]  # the partitions snapshotted, per topic
    groups: int
    producers: int
    errors: list[str]

    def encode(self) -> bytes:
        return _dump(
            {
                "backup_id": self.backup_id,
                "started_at_ms": self.started_at_ms,
                "finished_at_ms": self.finished_at_ms,
                "topics": self.topics,
                "groups": self.groups,
                "producers": self.producers,
                "errors": self.errors,
            }
        )

    @classmethod
    def decode(cls, raw: bytes, what: str) -> BackupSummary:
        doc = _load(raw, what)
        try:
            return cls(
                str(doc["backup_id"]),
                int(doc["started_at_ms"]),
                int(doc["finished_at_ms"]),
                {str(t): [int(p) for p in ps] for t, ps in doc["topics"].items()},
                int(doc["groups"]),
                int(doc["producers"]),
                [str(e) for e in doc["errors"]],
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptMetadata(f"{what} is not a backup summary: {exc}") from None


@dataclass(frozen=True)
class CatalogSnapshot:
    """``catalog.json``: records outside the partitions, keys relative to the root, values as stored.

    ``groups`` maps a group's name to its record (its key and partition key follow from the name).
    """

    topic_records: dict[str, str]
    registry: dict[str, str]
    groups: dict[str, str]
    producers: dict[str, str]

    def encode(self) -> bytes:
        return _dump(
            {
                "topic_records": self.topic_records,
                "registry": self.registry,
                "groups": self.groups,
                "producers": self.producers,
            }
        )

    @classmethod
    def decode(cls, raw: bytes, what: str) -> CatalogSnapshot:
        doc = _load(raw, what)
        try:
            parts = [{str(k): str(v) for k, v in doc[name].items()} for name in (
                "topic_records", "registry", "groups", "producers")]  # fmt: skip
        except (KeyError, TypeError, AttributeError) as exc:
            raise CorruptMetadata(f"{what} is not a catalog snapshot: {exc}") from None
        return cls(*parts)


# --- reading Oxia --------------------------------------------------------------------------


# Not backed up: a claim is ephemeral (tied to a session), the GC watermark is only GC's progress.
def _skipped(keys: PartitionKeys) -> frozenset[str]:
    return frozenset({keys.compactor_claim, keys.gc_watermark})


def _stable_meta(keys: PartitionKeys, records: dict[str, bytes]) -> dict[str, bytes]:
    """The ``meta/`` records that must not change while a partition is read; appends move none of them.

    A CAS append moves ``sequence_counter`` and ``pending`` in ``meta/control``: those are left out.
    """
    stable = {k: v for k, v in records.items() if k not in _skipped(keys)}
    raw = stable.get(keys.control)
    if raw is not None:
        control = ControlRecord.decode(raw)
        if not control.sequential:
            stable[keys.control] = control.with_changes(sequence_counter=control.log_start_offset,
                                                        pending=None).encode()  # fmt: skip
    return stable


def _meta_records(oxia: OxiaStore, keys: PartitionKeys) -> dict[str, bytes]:
    start, end = keys.oxia_ranges[0]  # meta/
    return {r.key: r.value for r in oxia.range_scan(start, end, partition_key=keys.partition_key)}


def _beyond(keys: PartitionKeys, control: ControlRecord, key: str, hw: int) -> bool:
    """Whether ``key`` is a valid index entry ending above ``hw`` (an append after the snapshot's point)."""
    end = keys.parse_index_key(key)
    if end is not None:
        return end > hw
    for generation in control.generations:
        parsed = keys.parse_sequence_key(generation.number, key) if generation.number else None
        if parsed is not None:
            return parsed.fences == 0 and generation.base + parsed.position > hw
    return False


def _producer_state_at(raw: bytes, hw: int) -> bytes:
    """A producer state as of ``hw`` (module docstring): batches ending above it and claims made after it
    dropped; the stored value itself if nothing is."""
    state = ProducerState.decode(raw)
    claim = state.in_flight
    cut = state.with_changes(
        batches=tuple(b for b in state.batches if b.end_offset <= hw),
        in_flight=claim if claim is None or claim.search_from_offset <= hw + 1 else None,
    )
    return raw if cut == state else cut.encode()


def snapshot_partition(storage: Storage, keys: PartitionKeys) -> PartitionSnapshot | None:
    """The partition's Oxia records as of its high watermark (module docstring); None: not initialized."""
    topic, partition = keys.topic, keys.partition
    meta = PartitionMetadata(storage.oxia, keys)
    for attempt in range(1, SNAPSHOT_ATTEMPTS + 1):
        taken_at_ms = int(storage.clock() * 1000)
        before = _meta_records(storage.oxia, keys)
        raw_control = before.get(keys.control)
        if raw_control is None:
            return None
        control = ControlRecord.decode(raw_control)
        hw = PartitionIndex(meta, control).high_watermark()
        found = dict(before)
        for start, end in keys.oxia_ranges[1:]:
            found.update(
                (r.key, r.value) for r in storage.oxia.range_scan(start, end, partition_key=keys.partition_key)
            )
        if _stable_meta(keys, _meta_records(storage.oxia, keys)) != _stable_meta(keys, before):
            continue  # a compaction, retention or fence moved on meanwhile: read again
        records = {
            _relative(storage.root, k): _text(
                _producer_state_at(v, hw) if k.startswith(keys.producer_states_prefix) else v, k
            )
            for k, v in sorted(found.items())
            if k not in _skipped(keys) and not _beyond(keys, control, k, hw)
        }
        return PartitionSnapshot(topic, partition, taken_at_ms, hw, records, attempt, keys.topic_id)
    raise InconsistentReadState(
        f"{topic}/{partition} changed during each of {SNAPSHOT_ATTEMPTS} reads (compaction or retention running); "
        "back it up again later"
    )


def _scan(oxia: OxiaStore, root: str, start: str, end: str, partition_key: str) -> dict[str, str]:
    return {
        _relative(root, r.key): _text(r.value, r.key) for r in oxia.range_scan(start, end, partition_key=partition_key)
    }


def _read_groups(oxia: OxiaStore, root: str) -> dict[str, str]:
    keys = GroupKeys(root)
    found = {}
    for key in oxia.list_keys(keys.prefix, keys.scan_end):  # groups spread over the shards
        group = keys.parse(key)
        if group is None:
            continue
        record = oxia.get(key, partition_key=keys.partition_key(group))
        if record is not None:
            found[group] = _text(record.value, key)
    return found


# --- back up ---------------------------------------------------------------------------------


@dataclass
class PartitionBackup:
    """What the backup holds of one partition."""

    partition: int
    high_watermark: int | None  # None: registered, not initialized (nothing to back up)
    records: int
    attempts: int


@dataclass
class BackupReport:
    backup_id: str
    started_at_ms: int
    finished_at_ms: int = 0
    topics: dict[str, list[PartitionBackup]] = field(default_factory=dict)
    groups: int = 0
    producers: int = 0
    deleted_backups: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "backup_id": self.backup_id,
            "started_at_ms": self.started_at_ms,
            "finished_at_ms": self.finished_at_ms,
            "topics": {
                t: [
                    {
                        "partition": p.partition,
                        "high_watermark": p.high_watermark,
                        "records": p.records,
                        "attempts": p.attempts,
                    }
                    for p in ps
                ]
                for t, ps in self.topics.items()
            },  # fmt: skip
            "groups": self.groups,
            "producers": self.producers,
            "deleted_backups": self.deleted_backups,
            "errors": self.errors,
        }


def back_up_topics(
    storage: Storage, topics: Sequence[str] | None = None, *, now_ms: int | None = None, keep: int | None = None
) -> BackupReport:
    """Back up ``topics`` (every topic when None), the groups and the producer ids, then prune old backups.

    ``now_ms`` stamps the backup (its id and ``started_at_ms``; default: the
    storage clock); ``keep`` complete backups are kept (default
    ``LLOG_BACKUP_KEEP``). A partition that cannot be read is reported in
    ``errors`` and left out; the backup is still completed with the rest.

    Backing up every topic (``topics`` None, the scheduled run) first checks
    the namespace identity, read-only (``verify_namespace``): against an Oxia
    that lost its state every read would come back empty and the run would
    write a backup of nothing, so it raises ``NamespaceMismatch`` and writes
    and prunes nothing. Named topics are not checked: each must exist in
    Oxia (``UnknownTopic``), so a rebuild can back up what it rebuilt before
    the namespace is adopted; pruning keeps every partition's newest backup.
    """
    if topics is None:
        verify_namespace(storage, "No backup was written and none was pruned")
    keep = backup_keep_from_env() if keep is None else keep
    started = int(storage.clock() * 1000) if now_ms is None else now_ms
    layout = BackupLayout(storage.root)
    backup_id = new_object_id(started)
    report = BackupReport(backup_id, started)
    registry_keys = RegistryKeys(storage.root)
    pk = registry_keys.partition_key
    groups = _read_groups(storage.oxia, storage.root)  # before the partitions (module docstring)
    topic_records = _scan(storage.oxia, storage.root, registry_keys.topics_prefix, registry_keys.topics_scan_end, pk)
    registry = _scan(storage.oxia, storage.root, registry_keys.prefix, registry_keys.scan_end, pk)
    records = TopicRegistry(storage.oxia, root=storage.root).records()
    registered = PartitionRegistry(storage.oxia, root=storage.root).entries(current=keys_ids(records))
    names = sorted(set(records) | set(registered)) if topics is None else sorted({validate_topic(t) for t in topics})
    for name in names:
        if name not in records and name not in registered:
            raise UnknownTopic(name)
    # A registered partition in the folder its entry names; one its record names but never registered, the record's.
    wanted: list[PartitionKeys] = []
    for t in names:
        entries = {e.partition: e.keys(storage.root) for e in registered.get(t, [])}
        named = records[t].partition_numbers if t in records else ()
        wanted += [entries.get(p) or records[t].partition_keys(p, storage.root) for p in sorted({*entries, *named})]

    def back_up(keys: PartitionKeys) -> PartitionBackup | LlogError:
        topic, partition = keys.topic, keys.partition
        try:
            snapshot = snapshot_partition(storage, keys)
            if snapshot is None:
                return PartitionBackup(partition, None, 0, 1)
            storage.blobs.put(
                S3Location(storage.bucket, layout.partition(backup_id, topic, partition)), snapshot.encode()
            )
        except LlogError as exc:
            return exc
        return PartitionBackup(partition, snapshot.high_watermark, len(snapshot.records), snapshot.attempts)

    with ThreadPoolExecutor(PARTITION_CONCURRENCY, thread_name_prefix="llog-backup") as pool:
        results = list(pool.map(back_up, wanted))
    for keys, result in zip(wanted, results, strict=True):
        if isinstance(result, LlogError):
            report.errors.append(f"{keys.topic}/{keys.partition}: {result.error_type}: {result}")
        else:
            report.topics.setdefault(keys.topic, []).append(result)
    producer_keys = ProducerKeys(storage.root)
    producers = _scan(storage.oxia, storage.root, producer_keys.prefix, producer_keys.scan_end, pk)
    selected = set(report.topics)
    catalog = CatalogSnapshot(
        {k: v for k, v in topic_records.items() if registry_keys.parse_topic(f"{storage.root}/{k}") in selected},
        {k: v for k, v in registry.items() if (registry_keys.parse(f"{storage.root}/{k}") or ("",))[0] in selected},
        groups,
        producers,
    )
    storage.blobs.put(S3Location(storage.bucket, layout.catalog(backup_id)), catalog.encode())
    report.groups, report.producers = len(groups), len(producers)
    report.finished_at_ms = int(storage.clock() * 1000)
    summary = BackupSummary(
        backup_id,
        started,
        report.finished_at_ms,
        {t: [p.partition for p in ps if p.high_watermark is not None] for t, ps in report.topics.items()},
        report.groups,
        report.producers,
        report.errors,
    )
    storage.blobs.put(S3Location(storage.bucket, layout.summary(backup_id)), summary.encode())  # complete from here
    report.deleted_backups = prune_backups(storage, keep)
    log.info("backup %s: %d topic(s), %d error(s)", backup_id, len(report.topics), len(report.errors))
    return report


# --- listing, pruning, reading -----------------------------------------------------------------


def backup_ids(storage: Storage) -> list[str]:
    """Every backup folder's id, oldest first (complete or not)."""
    prefix = BackupLayout(storage.root).prefix
    return sorted(p[len(prefix) : -1] for p in storage.blobs.list_prefixes(storage.bucket, prefix))


def read_summary(storage: Storage, backup_id: str) -> BackupSummary:
    """The summary of a complete backup; ``BackupNotFound`` if there is none with that id."""
    key = BackupLayout(storage.root).summary(backup_id)
    try:
        return BackupSummary.decode(storage.blobs.get(S3Location(storage.bucket, key)), key)
    except BlobNotFound:
        raise BackupNotFound(f"no complete backup {backup_id!r} under {storage.root}/") from None


def complete_backups(storage: Storage) -> list[BackupSummary]:
    """The complete backups, newest first."""
    found = []
    for backup_id in reversed(backup_ids(storage)):
        try:
            found.append(read_summary(storage, backup_id))
        except BackupNotFound:
            continue  # in progress, or died before its summary
    return found


def prune_backups(storage: Storage, keep: int) -> list[str]:
    """Delete every backup older than the newest ``keep`` complete ones; the ids deleted.

    Incomplete backups newer than the oldest kept one stay: they may still be
    running. So does, whatever its age, the newest complete backup holding
    each topic/partition that any complete backup holds: a backup that left
    partitions out (an error, a backup of named topics, or one of an Oxia
    that lost them) never makes the last copy of a partition go. The price:
    a deleted topic's last backup stays until deleted by hand.
    """
    ids = backup_ids(storage)
    complete = complete_backups(storage)  # newest first
    if len(complete) < keep:
        return []
    oldest_kept = complete[keep - 1].backup_id
    newest_holding: dict[tuple[str, int], str] = {}
    for summary in complete:
        for topic, partitions in summary.topics.items():
            for partition in partitions:
                newest_holding.setdefault((topic, partition), summary.backup_id)
    last_copies = set(newest_holding.values())
    doomed = [i for i in ids if i < oldest_kept and i not in last_copies]
    layout = BackupLayout(storage.root)
    for backup_id in doomed:
        objects = [o.key for o in storage.blobs.list(storage.bucket, layout.folder(backup_id))]
        storage.blobs.delete(storage.bucket, objects)
    return doomed


def read_partition_snapshot(storage: Storage, backup_id: str, topic: str, partition: int) -> PartitionSnapshot:
    key = BackupLayout(storage.root).partition(backup_id, topic, partition)
    return PartitionSnapshot.decode(storage.blobs.get(S3Location(storage.bucket, key)), key)


def read_catalog(storage: Storage, backup_id: str) -> CatalogSnapshot:
    key = BackupLayout(storage.root).catalog(backup_id)
    return CatalogSnapshot.decode(storage.blobs.get(S3Location(storage.bucket, key)), key)


# --- restore -------------------------------------------------------------------------------


def live_keys(oxia: OxiaStore, root: str, topic: str, partitions: Iterable[PartitionKeys]) -> list[str]:
    """Keys under ``root`` that make ``topic`` (or one of ``partitions``) live: its record, registry entries, and
    any key of those partitions. At most one per range; empty: nothing of it exists."""
    registry_keys = RegistryKeys(root)
    pk = registry_keys.partition_key
    record = registry_keys.topic(topic)
    found = [] if oxia.get(record, partition_key=pk) is None else [record]
    ranges = [(registry_keys.topic_prefix(topic), registry_keys.topic_scan_end(topic), pk)]
    for keys in partitions:
        ranges += [(start, end, keys.partition_key) for start, end in keys.oxia_ranges]
    return found + [
        r.key for start, end, key in ranges for r in oxia.range_scan(start, end, partition_key=key, limit=1)
    ]


@dataclass
class RestoreReport:
    backup_id: str
    topics: dict[str, list[int]] = field(default_factory=dict)
    records: int = 0
    groups_restored: int = 0
    groups_skipped: list[str] = field(default_factory=list)  # already present: kept as they are
    producers_restored: int = 0
    producers_skipped: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "backup_id": self.backup_id,
            "topics": self.topics,
            "records": self.records,
            "groups_restored": self.groups_restored,
            "groups_skipped": self.groups_skipped,
            "producers_restored": self.producers_restored,
            "producers_skipped": self.producers_skipped,
        }


def _create(oxia: OxiaStore, key: str, value: str, partition_key: str) -> bool:
    try:
        oxia.put(key, value.encode(), partition_key=partition_key, expected_version_id=CREATE_ONLY)
    except VersionConflict:
        return False
    return True


def restore_backup(
    storage: Storage, backup_id: str | None = None, topics: Sequence[str] | None = None
) -> RestoreReport:
    """Write a backup (default: the newest complete one) into a namespace where its topics have no state.

    ``topics`` (default: every topic of the backup) must each be in it.
    Raises ``BackupNotFound``, or ``NamespaceNotEmpty`` (naming the keys
    found) before anything is written if any restored topic has a key, or if
    S3 under the root holds a manifest of a range ending past a partition's
    backed-up high watermark: records were acknowledged and compacted after
    the backup, and restoring it in place would give their offsets to new
    records (``llog.protocol.rebuild`` is the way back then). That catches
    only what compaction published: WAL blobs written after the backup, and
    objects the backup's entries name but GC has deleted since, are not
    checked (docs/RECOVERY.md).
    """
    if backup_id is None:
        newest = complete_backups(storage)
        if not newest:
            raise BackupNotFound(f"no complete backup under {storage.root}/")
        summary = newest[0]
    else:
        summary = read_summary(storage, backup_id)
    names = sorted(summary.topics) if topics is None else sorted({validate_topic(t) for t in topics})
    missing = [t for t in names if t not in summary.topics]
    if missing:
        raise BackupNotFound(f"backup {summary.backup_id} holds no topic {', '.join(missing)}")
    snapshots = {t: [read_partition_snapshot(storage, summary.backup_id, t, p) for p in summary.topics[t]]
                 for t in names}  # fmt: skip
    restored = {t: [s.keys(storage.root) for s in snapshots[t]] for t in names}
    live = [key for t in names for key in live_keys(storage.oxia, storage.root, t, restored[t])]
    if live:
        raise NamespaceNotEmpty(
            f"refusing to restore over live state: {', '.join(live[:5])}{' …' if len(live) > 5 else ''} "
            f"exist(s); restore into an empty namespace (or another LLOG_ROOT_PREFIX)"
        )
    catalog = read_catalog(storage, summary.backup_id)
    newer = [key for ss in snapshots.values() for snapshot in ss for key in _manifests_past(storage, snapshot)]
    if newer:
        raise NamespaceNotEmpty(
            f"refusing to restore backup {summary.backup_id} in place: S3 holds manifests of ranges compacted "
            f"after it ({', '.join(newer[:3])}{' …' if len(newer) > 3 else ''}); restoring would hand out "
            "acknowledged offsets again. Use `llog rebuild` (docs/RECOVERY.md)"
        )
    report = RestoreReport(summary.backup_id)
    registry_keys = RegistryKeys(storage.root)
    for topic in names:
        partitions = summary.topics[topic]

        def restore(snapshot: PartitionSnapshot) -> int:
            entry = _relative(storage.root, registry_keys.partition(snapshot.topic, snapshot.partition))
            return restore_partition(storage.oxia, storage.root, snapshot, catalog.registry.get(entry))

        with ThreadPoolExecutor(PARTITION_CONCURRENCY, thread_name_prefix="llog-restore") as pool:
            report.records += sum(pool.map(restore, snapshots[topic]))
        report.topics[topic] = partitions
        record = catalog.topic_records.get(_relative(storage.root, registry_keys.topic(topic)))
        if record is not None:  # last: the topic exists once all its partitions do
            if not _create(storage.oxia, registry_keys.topic(topic), record, registry_keys.partition_key):
                raise NamespaceNotEmpty(f"{registry_keys.topic(topic)} appeared while restoring {topic}")
            report.records += 1
            PartitionRegistry(storage.oxia, root=storage.root).register_again(restored[topic])
    group_keys = GroupKeys(storage.root)
    for group, value in sorted(catalog.groups.items()):
        if _create(storage.oxia, group_keys.group(group), value, group_keys.partition_key(group)):
            report.groups_restored += 1
        else:
            report.groups_skipped.append(group)
    for key, value in sorted(catalog.producers.items()):
        if _create(storage.oxia, f"{storage.root}/{key}", value, registry_keys.partition_key):
            report.producers_restored += 1
        else:
            report.producers_skipped += 1
    return report


def _manifests_past(storage: Storage, snapshot: PartitionSnapshot) -> list[str]:
    """Manifest keys under the restore's root of ranges ending past the snapshot's high watermark (one LIST)."""
    keys = snapshot.keys(storage.root)
    return [
        o.key
        for o in storage.blobs.list(storage.bucket, keys.manifest_prefix)
        if (span := keys.parse_manifest_key(o.key)) is not None and span[1] > snapshot.high_watermark
    ]


def restore_partition(oxia: OxiaStore, root: str, snapshot: PartitionSnapshot, registered: str | None) -> int:
    """Write a partition's snapshot under ``root``: registry entry (``registered``, or a new one), the other
    keys, ``meta/control`` last.

    Sequence keys are written by name: a well-formed key of the sequence is
    what the server's next sequential put counts from (docs/SEQUENTIAL_APPEND.md, §1).
    """
    keys = snapshot.keys(root)
    registry_keys = RegistryKeys(root)
    if registered is None:
        PartitionRegistry(oxia, root=root).register(keys)
    else:
        _create(oxia, registry_keys.partition(snapshot.topic, snapshot.partition), registered,
                registry_keys.partition_key)  # fmt: skip
    control = _relative(root, keys.control)
    ordered = sorted((k for k in snapshot.records if k != control), key=lambda k: "/meta/" in k)
    for key in [*ordered, control] if control in snapshot.records else ordered:
        if not _create(oxia, f"{root}/{key}", snapshot.records[key], keys.partition_key):
            raise NamespaceNotEmpty(f"{root}/{key} appeared while restoring {snapshot.topic}/{snapshot.partition}")
    return len(snapshot.records) + 1
