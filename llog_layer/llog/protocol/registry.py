"""The registry of partitions: how every component finds the topics and partitions that exist.

A partition is registered (``{root}/__catalog/partitions/{topic}:{p}``,
docs/PROTOCOL.md) *before* its ``meta/control`` record is created, so the
invariant "every initialized partition is registered" holds at every crash
point; a crash in between leaves a registered partition that is not
initialized yet, which discovery callers skip (``PartitionNotInitialized``)
and the next ``initialize_partition`` completes. Registration reads the
entry, then creates it if absent (create-only): idempotent, one read once
registered, and it never rewrites an entry of the incarnation in force; one
naming another incarnation (left by a fence racing that incarnation's
reclaim, docs/GC.md) is replaced by the current record's registration. An
entry is removed only when a deleted topic's partition has been reclaimed,
after everything else of it (``llog.protocol.topics``).

Entries are keyed by name, but a name may be deleted and created again: an
entry's value carries the id in its partition's keys (``topic_id``, absent for
a partition in the legacy folder, ``llog.format.keys``), so discovery maps each
entry to the keys of the incarnation that registered it, ignores entries
that do not name the topic's current record's id (``entries``; a topic with no
record owns only entries naming none), and removing one is a
delete conditional on the version read with that id: a reclaim run of an old
incarnation, however late, never removes a newer incarnation's entry.

Discovery reads the registry with scans bounded to its one key depth. A
scan under the root prefix cannot find partitions on Oxia v0.17.1, which
sorts keys by depth first (docs/PROTOCOL.md, "Key order").
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from llog.errors import CorruptMetadata, LlogError, VersionConflict
from llog.format.keys import DEFAULT_ROOT_PREFIX, PartitionKeys, RegistryKeys, partition_keys, validate_topic_id
from llog.store.oxia import CREATE_ONLY, OxiaStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RegisteredPartition:
    """A registry entry: a partition, and the id in its keys (None: the legacy folder)."""

    topic: str
    partition: int
    topic_id: str | None

    def keys(self, root: str) -> PartitionKeys:
        return partition_keys(self.topic, self.partition, root, self.topic_id)


def _entry_topic_id(key: str, value: bytes) -> str | None:
    try:
        topic_id = json.loads(value).get("topic_id")
        return None if topic_id is None else validate_topic_id(topic_id)
    except (ValueError, AttributeError, LlogError) as exc:
        raise CorruptMetadata(f"registry entry {key} is not readable: {exc}") from None


class PartitionRegistry:
    def __init__(
        self, oxia: OxiaStore, *, root: str = DEFAULT_ROOT_PREFIX, clock: Callable[[], float] = time.time
    ) -> None:
        self.oxia = oxia
        self.keys = RegistryKeys(root)
        self._clock = clock

    def register(self, keys: PartitionKeys) -> bool:
        """Record that the partition exists (or is about to), in its keys' folder; True if this call wrote it.

        The entry is read first: one naming ``keys``' folder is left as it is (a partition's every later
        initialization, one read). A missing one is created (create-only); one naming another incarnation
        (one a reclaim left behind, docs/GC.md) is replaced, by a compare-and-set on the version read, only if
        ``keys`` are the topic's current record's: an entry naming the current incarnation is never rewritten,
        whoever registers late.
        """
        key = self.keys.partition(keys.topic, keys.partition)
        doc: dict[str, object] = {"registered_at_ms": int(self._clock() * 1000)}
        if keys.topic_id is not None:
            doc["topic_id"] = keys.topic_id
        while True:
            found = self.oxia.get(key, partition_key=self.keys.partition_key)
            if found is not None and (_entry_topic_id(key, found.value) == keys.topic_id or not self._in_force(keys)):
                return False  # this incarnation's already, or ``keys`` are not the current record's
            try:
                self.oxia.put(key, json.dumps(doc).encode(), partition_key=self.keys.partition_key,
                              expected_version_id=CREATE_ONLY if found is None else found.version_id)  # fmt: skip
            except VersionConflict:
                continue  # registered, replaced or deregistered since it was read: judge it again
            return True

    def register_again(self, partitions: Iterable[PartitionKeys]) -> None:
        """Register partitions whose entries were written before their topic's record (restore, rebuild), once
        that record is in force: until then the entries were not the name's (``entries``), and a registration
        of the folder then in force (the legacy one: a library writer's) may have replaced them. One read each
        where the entry is still the record's."""
        for keys in partitions:
            self.register(keys)

    def _in_force(self, keys: PartitionKeys) -> bool:
        """Whether ``keys`` are those of the topic's record (its ``keys_include_id`` and ``topic_id``, read as
        ``llog.protocol.topics.TopicRecord.keys_id`` reads them); without a record, the legacy folder's are (as
        ``entries`` counts them: a partition a library writer opens without topic records)."""
        key = self.keys.topic(keys.topic)
        found = self.oxia.get(key, partition_key=self.keys.partition_key)
        if found is None:
            return keys.topic_id is None
        try:
            doc = json.loads(found.value)
            return (validate_topic_id(doc["topic_id"]) if doc.get("keys_include_id") else None) == keys.topic_id
        except (ValueError, KeyError, AttributeError, LlogError) as exc:
            raise CorruptMetadata(f"topic record {key} is not readable: {exc}") from None

    def deregister(self, keys: PartitionKeys) -> bool:
        """Remove the partition's entry if it names ``keys``' folder: the last step of reclaiming a deleted
        topic (``llog.protocol.topics``). False if there is none, or it is another incarnation's."""
        key = self.keys.partition(keys.topic, keys.partition)
        while True:
            found = self.oxia.get(key, partition_key=self.keys.partition_key)
            if found is None or _entry_topic_id(key, found.value) != keys.topic_id:
                return False
            try:
                self.oxia.delete(key, partition_key=self.keys.partition_key, expected_version_id=found.version_id)
            except VersionConflict:
                continue  # removed (and perhaps registered again) since it was read: judge it again
            return True

    def entries(
        self, topic: str | None = None, *, current: Mapping[str, str | None]
    ) -> dict[str, list[RegisteredPartition]]:
        """The registered partitions of the topics' current incarnations, each with the id its entry names:
        what discovery builds a partition's keys from.

        ``current`` maps a topic to the id in its record's partition keys (``TopicRecord.keys_id``); a topic
        it does not name has no record, so only entries naming no id (from before topic records) are its. An
        entry naming another id is a reclaimed incarnation's (docs/GC.md): logged and left out.
        """
        start, end = self._bounds(topic)
        found: dict[str, list[RegisteredPartition]] = {}
        for item in self.oxia.range_scan(start, end, partition_key=self.keys.partition_key):
            parsed = self.keys.parse(item.key)
            if parsed is None:
                log.warning("registry: ignoring %r, not a registry key", item.key)
                continue
            entry = RegisteredPartition(*parsed, _entry_topic_id(item.key, item.value))
            if entry.topic_id != current.get(entry.topic):
                log.warning("registry: ignoring %r, it names incarnation %s, not the topic's current one",
                            item.key, entry.topic_id)  # fmt: skip
                continue
            found.setdefault(entry.topic, []).append(entry)
        return {t: sorted(found[t], key=lambda e: e.partition) for t in sorted(found)}

    def _bounds(self, topic: str | None) -> tuple[str, str]:
        if topic is None:
            return self.keys.prefix, self.keys.scan_end
        return self.keys.topic_prefix(topic), self.keys.topic_scan_end(topic)

    def partitions(self, topic: str | None = None) -> dict[str, list[int]]:
        """Registered partitions by topic, topics in name order, partitions in numeric order.

        With ``topic``, only that topic's (an empty dict if it has none). Every entry, whichever incarnation it
        names (keys only, one read): what a layout decision needs is ``entries``.
        """
        start, end = self._bounds(topic)
        found: dict[str, list[int]] = {}
        for key in self.oxia.list_keys(start, end, partition_key=self.keys.partition_key):
            parsed = self.keys.parse(key)
            if parsed is None:
                log.warning("registry: ignoring %r, not a registry key", key)
                continue
            found.setdefault(parsed[0], []).append(parsed[1])
        return {t: sorted(found[t]) for t in sorted(found)}
