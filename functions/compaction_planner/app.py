"""Scheduled compaction planner: one SQS message per partition that needs compaction.

EventBridge Scheduler invokes it (``LLOG_COMPACTION_SCHEDULE``, default every
minute). It discovers partitions from their ``meta/control`` records, keeps
those whose compaction lag reaches ``LLOG_COMPACTION_MIN_LAG`` (default 1),
and enqueues them in random order on ``LLOG_COMPACTION_QUEUE_URL``; the
worker function consumes that queue with bounded concurrency. Its clients:
Oxia (the catalog) and SQS; the modules of both are imported by the first
invocation, not with this module (the Lambda init phase).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.common import names
from functions.common.lazy import Lazy
from functions.common.telemetry import Telemetry
from llog.config import CompactionScheduleConfig, root_prefix_from_env

if TYPE_CHECKING:
    from llog.protocol.catalog import LogCatalog
    from llog.store.queue import TaskQueue


def create_catalog() -> LogCatalog:
    from llog.protocol.catalog import LogCatalog
    from llog.store.oxia import OxiaStore

    return LogCatalog(OxiaStore.from_env(), root=root_prefix_from_env())


def create_queue() -> TaskQueue:
    from llog.store.queue import TaskQueue

    return TaskQueue.from_env()


telemetry = Telemetry(names.COMPACTION_PLANNER)
_catalog: Lazy[LogCatalog] = Lazy(create_catalog, lambda catalog: catalog.oxia.close())
_queue: Lazy[TaskQueue] = Lazy(create_queue)


def reset() -> None:
    """Forget this environment's clients (tests start each case fresh)."""
    _catalog.reset()
    _queue.reset()


@telemetry.lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    from llog.service.compaction import plan_compaction

    plan = plan_compaction(_catalog.get(), min_lag=CompactionScheduleConfig.from_env().min_lag)
    sent = _queue.get().send([task.to_message() for task in plan.tasks])
    telemetry.metric("PartitionsSeen", MetricUnit.Count, plan.partitions_seen)
    telemetry.metric("CompactionTasksEnqueued", MetricUnit.Count, sent)
    telemetry.metric("MaxCompactionLag", MetricUnit.Count, max(plan.lag_by_partition.values(), default=0))
    telemetry.logger.info(
        "compaction planned",
        extra={
            "partitions": plan.partitions_seen,
            "tasks": len(plan.tasks),
            "enqueued": sent,
            "lag": {f"{t}/{p}": lag for (t, p), lag in plan.lag_by_partition.items() if lag},
        },
    )
    return {"partitions": plan.partitions_seen, "tasks": len(plan.tasks), "enqueued": sent}
