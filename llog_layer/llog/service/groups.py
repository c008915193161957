"""The consumer-group service behind ``/groups`` (docs/HTTP_API.md, "Consumer groups"; docs/GROUPS.md).

Calls ``GroupCoordinator`` with requests ``llog.api.native`` parsed, and
renders its answers. ``describe`` adds each partition's log start and high watermark
(``LogCatalog.status``, read concurrently) to the committed offsets, hence
the lag; ``lags`` does the same for every group (``/metrics``, the
planner's ``ConsumerLag`` metric).
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from llog.config import OxiaConfig, group_expiry_ms_from_env, root_prefix_from_env
from llog.errors import PartitionNotInitialized
from llog.protocol.catalog import LogCatalog
from llog.protocol.groups import GroupCoordinator, GroupState, OffsetCommit
from llog.store.oxia import OxiaStore

STATUS_CONCURRENCY = 16  # partition status reads of one describe at once


@dataclass(frozen=True)
class PartitionLag:
    """A group's position in one partition. ``lag``: offsets still to read, ``None`` without a commit.

    ``committed`` is the next offset to read; reading resumes at ``log_start``
    when it is below it (retention removed the offsets in between), so those
    do not count as lag. ``high_watermark`` is the last offset (llog's meaning),
    so the log ends at ``high_watermark + 1``.
    """

    group: str
    topic: str
    partition: int
    committed: int | None
    log_start: int | None
    high_watermark: int | None
    committed_for_earlier_topic: int | None = None  # committed for a deleted topic of that name: not applied

    @property
    def below_log_start(self) -> bool:
        return self.committed is not None and self.log_start is not None and self.committed < self.log_start

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_start is None or self.high_watermark is None:
            return None
        return max(0, self.high_watermark + 1 - max(self.committed, self.log_start))

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "committed": self.committed,
            "log_start": self.log_start,
            "high_watermark": self.high_watermark,
            "lag": self.lag,
            "below_log_start": self.below_log_start,
            "committed_for_earlier_topic": self.committed_for_earlier_topic,
        }


def _assignments(assignment: Mapping[str, list[int]]) -> list[dict[str, Any]]:
    return [{"topic": t, "partitions": ps} for t, ps in sorted(assignment.items())]


class GroupService:
    def __init__(self, coordinator: GroupCoordinator, catalog: LogCatalog) -> None:
        self.coordinator = coordinator
        self.catalog = catalog

    @classmethod
    def from_env(cls) -> GroupService:
        return cls.on(OxiaStore(OxiaConfig.from_env()), root=root_prefix_from_env())

    @classmethod
    def on(cls, oxia: OxiaStore, *, root: str) -> GroupService:
        """The service on an Oxia store someone else owns (``llog serve``, the planner)."""
        coordinator = GroupCoordinator(oxia, root=root, expiry_ms=group_expiry_ms_from_env())
        return cls(coordinator, LogCatalog(oxia, root=root))

    def close(self) -> None:
        self.coordinator.oxia.close()

    # --- routes ---------------------------------------------------------------------------------

    def join(
        self, group: str, topics: list[str], *, session_timeout_ms: int, member_id: str | None
    ) -> dict[str, Any]:
        joined = self.coordinator.join(group, topics, session_timeout_ms=session_timeout_ms, member_id=member_id)
        return {
            "group": joined.group,
            "member_id": joined.member_id,
            "generation": joined.generation,
            "assignments": _assignments(joined.assignment),
            "heartbeat_interval_ms": joined.heartbeat_interval_ms,
        }

    def heartbeat(self, group: str, member_id: str, generation: int) -> dict[str, Any]:
        beat = self.coordinator.heartbeat(group, member_id, generation)
        return {"generation": beat.generation, "rejoin": beat.rejoin}

    def leave(self, group: str, member_id: str) -> dict[str, Any]:
        self.coordinator.leave(group, member_id)
        return {"group": group, "member_id": member_id, "left": True}

    def commit(self, group: str, member_id: str, generation: int, offsets: list[OffsetCommit]) -> dict[str, Any]:
        committed = self.coordinator.commit(group, member_id, generation, offsets)
        return {
            "group": group,
            "committed": [{"topic": o.topic, "partition": o.partition, "offset": o.offset} for o in committed],
        }

    def describe(self, group: str) -> dict[str, Any]:
        state = self.coordinator.describe(group)
        return {
            "group": group,
            "generation": state.generation,
            "members": [
                {
                    "member_id": m,
                    "topics": v.topics,
                    "expires_at_ms": v.expires_at_ms,
                    "assignments": _assignments(v.assignment),
                }
                for m, v in sorted(state.members.items())
            ],
            "offsets": [lag.to_json() for lag in self._lags(group, state, {})],
        }

    def list_groups(self) -> dict[str, Any]:
        return {"groups": self.coordinator.groups()}

    # --- lag ------------------------------------------------------------------------------------

    def lags(self) -> list[PartitionLag]:
        """Every group's lag in every partition it covers or has committed; one read per group (and per topic
        it committed), nothing written."""
        found = []
        identities: dict[str, str | None] = {}
        for group, state in self.coordinator.states().items():
            found += self._lags(group, state, identities)
        return found

    def _lags(self, group: str, state: GroupState, identities: dict[str, str | None]) -> list[PartitionLag]:
        """``identities``: the topics' identities read so far, filled in here (one topic record read each)."""
        for topic in state.offset_topics.keys() - identities.keys():
            identities[topic] = self.coordinator.topic_identity(topic)
        earlier = state.committed_for_earlier_topics(identities)
        covered = {(t, p) for t, ps in state.partitions.items() for p in ps}
        committed = {(t, p): o for t, ps in state.offsets.items() for p, o in ps.items()}
        partitions = sorted(covered | committed.keys())
        if not partitions:
            return []
        with ThreadPoolExecutor(min(STATUS_CONCURRENCY, len(partitions))) as pool:
            ends = list(pool.map(lambda tp: self._ends(*tp), partitions))
        return [
            PartitionLag(group, t, p, None, start, hw, committed.get((t, p)))
            if t in earlier
            else PartitionLag(group, t, p, committed.get((t, p)), start, hw)
            for (t, p), (start, hw) in zip(partitions, ends, strict=True)
        ]

    def _ends(self, topic: str, partition: int) -> tuple[int | None, int | None]:
        """``(log_start, high_watermark)``; ``None`` for a partition that is not initialized (or deleted)."""
        try:
            status = self.catalog.status(self.catalog.layouts.keys(topic, partition))
        except PartitionNotInitialized:
            return None, None
        return status.log_start_offset, status.high_watermark
