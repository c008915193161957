"""The registry of partitions: how every component finds the topics and partitions that exist.

A partition is registered (``{root}/__catalog/partitions/{topic}:{p}``,
docs/PROTOCOL.md) *before* its ``meta/control`` record is created, so the
invariant "every initialized partition is registered" holds at every crash
point; a crash in between leaves a registered partition that is not
initialized yet, which discovery callers skip (``PartitionNotInitialized``)
and the next ``initialize_partition`` completes. Registration is a
create-only put: idempotent, and it never rewrites an entry. An entry is
removed only when a deleted topic's partition has been reclaimed, after
everything else of it (``llog.protocol.topics``).

Discovery reads the registry with scans bounded to its one key depth. A
scan under the root prefix cannot find partitions on Oxia v0.17.1, which
sorts keys by depth first (docs/PROTOCOL.md, "Key order").
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

from llog.errors import VersionConflict
from llog.format.keys import DEFAULT_ROOT_PREFIX, RegistryKeys
from llog.store.oxia import CREATE_ONLY, OxiaStore

log = logging.getLogger(__name__)


class PartitionRegistry:
    def __init__(
        self, oxia: OxiaStore, *, root: str = DEFAULT_ROOT_PREFIX, clock: Callable[[], float] = time.time
    ) -> None:
        self.oxia = oxia
        self.keys = RegistryKeys(root)
        self._clock = clock

    def register(self, topic: str, partition: int) -> bool:
        """Record that ``topic``/``partition`` exists (or is about to); True if this call added it."""
        value = json.dumps({"registered_at_ms": int(self._clock() * 1000)}).encode()
        try:
            self.oxia.put(
                self.keys.partition(topic, partition),
                value,
                partition_key=self.keys.partition_key,
                expected_version_id=CREATE_ONLY,
            )
        except VersionConflict:
            return False
        return True

    def deregister(self, topic: str, partition: int) -> None:
        """Remove a partition's entry: the last step of reclaiming a deleted topic (``llog.protocol.topics``)."""
        self.oxia.delete(self.keys.partition(topic, partition), partition_key=self.keys.partition_key)

    def partitions(self, topic: str | None = None) -> dict[str, list[int]]:
        """Registered partitions by topic, topics in name order, partitions in numeric order.

        With ``topic``, only that topic's (an empty dict if it has none).
        """
        if topic is None:
            start, end = self.keys.prefix, self.keys.scan_end
        else:
            start, end = self.keys.topic_prefix(topic), self.keys.topic_scan_end(topic)
        found: dict[str, list[int]] = {}
        for key in self.oxia.list_keys(start, end, partition_key=self.keys.partition_key):
            parsed = self.keys.parse(key)
            if parsed is None:
                log.warning("registry: ignoring %r, not a registry key", key)
                continue
            found.setdefault(parsed[0], []).append(parsed[1])
        return {t: sorted(found[t]) for t in sorted(found)}
