"""Scheduling compaction: which partitions need it (planner), and one worker's turn on a partition.

The serverless shape (a compactor service split in two, docs/ARCHITECTURE.md): a scheduled
planner discovers partitions, keeps those whose compaction lag reaches a
threshold, and emits one task per partition in random order; a worker takes
the partition's claim, compacts until caught up or out of time, and releases
the claim. The same functions run in Lambda (EventBridge Scheduler → planner
→ SQS → worker) and in-process under ``make dev``.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from llog.errors import InvalidArgument, LlogError, PartitionNotInitialized, SessionExpired
from llog.format.keys import PartitionKeys, partition_keys, validate_partition, validate_topic, validate_topic_id
from llog.protocol.catalog import LogCatalog, PartitionStatus
from llog.protocol.claims import CompactorClaims
from llog.protocol.compaction import CompactionOutcome, CompactionResult, Compactor

log = logging.getLogger(__name__)

PLANNER_READ_CONCURRENCY = 16  # partitions whose status the planner reads at once


@dataclass(frozen=True)
class CompactionTask:
    """A partition to compact, of the incarnation the planner found registered (``topic_id``, None for the
    legacy folder, ``llog.format.keys``): a task that outlives its topic compacts nothing of a newer one."""

    topic: str
    partition: int
    lag: int
    topic_id: str | None = None

    def keys(self, root: str) -> PartitionKeys:
        return partition_keys(self.topic, self.partition, root, self.topic_id)

    def to_message(self) -> str:
        doc: dict[str, Any] = {"topic": self.topic, "partition": self.partition, "lag": self.lag}
        if self.topic_id is not None:  # absent: the legacy folder, as in messages from before topic ids
            doc["topic_id"] = self.topic_id
        return json.dumps(doc)

    @classmethod
    def from_message(cls, body: str) -> CompactionTask:
        try:
            doc: Any = json.loads(body)
            topic_id = doc.get("topic_id")
            return cls(
                validate_topic(doc["topic"]),
                validate_partition(doc["partition"]),
                int(doc.get("lag", 0)),
                None if topic_id is None else validate_topic_id(topic_id),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InvalidArgument(f"not a compaction task message: {exc}") from None


@dataclass(frozen=True)
class Plan:
    tasks: list[CompactionTask]
    partitions_seen: int
    lag_by_partition: dict[tuple[str, int], int]


def plan_compaction(
    catalog: LogCatalog,
    *,
    min_lag: int,
    max_delay_ms: int,
    now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    rng: random.Random | None = None,
) -> Plan:
    """Every partition due for compaction, shuffled: its uncompacted offsets (next offset - cursor) reach
    ``min_lag``, or it has some and the oldest was appended ``max_delay_ms`` ago (size or age, as a delivery
    stream buffers: a larger ``min_lag`` makes fewer, larger compacted objects, and the age bounds how long a
    quiet partition waits, docs/SCALE.md). A partition with a compaction under way is due too, to finish it.

    The partitions' statuses are read ``PLANNER_READ_CONCURRENCY`` at a time: one after another, their reads
    would fill a one-minute tick at about 20,000 partitions (docs/SCALE.md)."""
    every = [(topic, keys) for topic, partitions in catalog.partitions().items() for keys in partitions]
    least = max(min_lag, 1)

    def status(keys: PartitionKeys) -> PartitionStatus | None:
        try:
            return catalog.status(keys, oldest_below_lag=least)
        except PartitionNotInitialized:
            return None  # deleted between listing and reading

    with ThreadPoolExecutor(PLANNER_READ_CONCURRENCY, thread_name_prefix="planner") as pool:
        statuses = list(pool.map(status, [keys for _, keys in every]))
    now = now_ms()
    due_before_ms = now - max_delay_ms
    tasks = []
    lags: dict[tuple[str, int], int] = {}
    for (topic, keys), found in zip(every, statuses, strict=True):
        if found is None:
            continue
        lag = lags[(topic, keys.partition)] = found.compaction_lag
        # An oldest entry not found (compacted or removed since the status, unreadable) is due: a task then finds
        # its work. So is one stamped past now by more than the delay (a writer's clock ahead): at most twice it.
        oldest = found.oldest_uncompacted_ms
        aged = lag > 0 and (oldest is None or oldest <= due_before_ms or oldest > now + max_delay_ms)
        if lag >= least or aged or found.compaction is not None:
            tasks.append(CompactionTask(topic, keys.partition, lag, keys.topic_id))
    (rng or random).shuffle(tasks)
    return Plan(tasks, len(every), lags)


class TaskEnd(StrEnum):
    """How a worker's turn on a partition ended (metric ``CompactionTask_{value}``)."""

    CAUGHT_UP = "caught_up"  # nothing left to compact
    BUDGET_SPENT = "budget_spent"  # out of time with work left
    CLAIM_HELD = "claim_held"  # another worker holds the partition's claim
    CLAIM_LOST = "claim_lost"  # the claim went (with the session) during the turn


@dataclass
class TaskOutcome:
    """One worker turn on one partition."""

    task: CompactionTask
    outcome: TaskEnd
    runs: list[CompactionResult] = field(default_factory=list)

    @property
    def records(self) -> int:
        return sum(r.records for r in self.runs if r.outcome is CompactionOutcome.COMPACTED)

    @property
    def bytes_written(self) -> int:
        return sum(r.bytes_written for r in self.runs)

    @property
    def recoveries(self) -> int:
        return sum(1 for r in self.runs if r.outcome is CompactionOutcome.RESUMED or r.recovered_pending)


def run_compaction_task(
    task: CompactionTask,
    compactor: Compactor,
    claims: CompactorClaims,
    *,
    budget_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> TaskOutcome:
    """Claim the partition, compact until caught up or ``budget_s`` is spent, release.

    Caught up means a range reached the index's tail (or there was nothing to compact): entries appended
    while the task runs are the next task's, so that a busy partition does not hold a worker for its whole
    budget while the others wait (docs/SCALE.md).

    The claim is re-checked before every ``compact_once``: after a freeze the
    session may be gone, and a worker that lost its claim stops at once.
    """
    deadline = clock() + budget_s
    keys = task.keys(claims.root)
    try:
        claim = claims.claim(keys)
    except SessionExpired:
        claim = claims.claim(keys)  # the store dropped the dead session
    if claim is None:
        return TaskOutcome(task, TaskEnd.CLAIM_HELD)
    outcome = TaskOutcome(task, TaskEnd.BUDGET_SPENT)
    try:
        while clock() < deadline:
            if not claims.held(claim):
                outcome.outcome = TaskEnd.CLAIM_LOST
                break
            result = compactor.compact(keys)
            outcome.runs.append(result)
            if result.outcome is CompactionOutcome.NOTHING_TO_DO or result.reached_tail:
                outcome.outcome = TaskEnd.CAUGHT_UP
                break
    except SessionExpired:
        outcome.outcome = TaskEnd.CLAIM_LOST
    finally:
        try:
            claims.release(claim)
        except LlogError as exc:  # the claim dies with the session anyway
            log.warning("could not release the claim on %s/%s: %s", task.topic, task.partition, exc)
    return outcome
