"""Compactor claims: an ephemeral ``meta/compactor-claim`` record per partition (docs/PROTOCOL.md, Compaction).

A worker compacts a partition only while it holds the claim. The record is
tied to the worker's Oxia session, so a worker that dies (or a Lambda that is
frozen past the session timeout) loses it automatically. Claims are an
efficiency measure, not a safety one: compaction steps are idempotent and
guarded by compare-and-set, so two compactors on one partition waste work but
never corrupt it. Still, a claim is never trusted across a freeze: ``held``
re-reads it, and a worker stops at the first check that fails.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from llog.errors import SessionExpired, VersionConflict
from llog.format.keys import PartitionKeys
from llog.protocol.topics import TopicLayouts
from llog.store.oxia import CREATE_ONLY, OxiaStore


@dataclass(frozen=True)
class Claim:
    keys: PartitionKeys  # the partition, of the incarnation its compactor works on
    compactor_id: str
    version_id: int

    @property
    def topic(self) -> str:
        return self.keys.topic

    @property
    def partition(self) -> int:
        return self.keys.partition


class CompactorClaims:
    def __init__(
        self,
        oxia: OxiaStore,
        compactor_id: str,
        *,
        root: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.oxia = oxia
        self.compactor_id = compactor_id
        self.root = root
        self._clock = clock
        self.layouts = TopicLayouts(oxia, root=root)

    def try_claim(self, topic: str, partition: int) -> Claim | None:
        """``claim`` the partition of the topic's current incarnation."""
        return self.claim(self.layouts.keys(topic, partition))

    def claim(self, keys: PartitionKeys) -> Claim | None:
        """Take the partition's claim, or None if another compactor holds it.

        ``SessionExpired`` propagates: the caller's Oxia session died (e.g. a
        freeze), and the store has already dropped it so a retry starts fresh.
        """
        value = json.dumps({"compactor_id": self.compactor_id, "claimed_at_ms": int(self._clock() * 1000)}).encode()
        try:
            version = self.oxia.put(
                keys.compactor_claim,
                value,
                partition_key=keys.partition_key,
                expected_version_id=CREATE_ONLY,
                ephemeral=True,
            )
        except VersionConflict as conflict:
            if not conflict.ambiguous:
                return None
            # An earlier attempt may have created it: if the claim is ours, keep it.
            found = self.oxia.get(keys.compactor_claim, partition_key=keys.partition_key)
            if found is None or json.loads(found.value).get("compactor_id") != self.compactor_id:
                return None
            version = found.version_id
        return Claim(keys, self.compactor_id, version)

    def held(self, claim: Claim) -> bool:
        """True if the claim record is still the one we wrote (our session is alive)."""
        keys = claim.keys
        found = self.oxia.get(keys.compactor_claim, partition_key=keys.partition_key)
        return found is not None and found.version_id == claim.version_id

    def release(self, claim: Claim) -> None:
        keys = claim.keys
        # Already gone with our session, or taken over: nothing of ours to release.
        with contextlib.suppress(VersionConflict, SessionExpired):
            self.oxia.delete(
                keys.compactor_claim, partition_key=keys.partition_key, expected_version_id=claim.version_id
            )
