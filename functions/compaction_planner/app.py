"""Scheduled compaction planner: one SQS message per partition that needs compaction.

EventBridge Scheduler invokes it (``LLOG_COMPACTION_SCHEDULE``, default every
minute). It discovers partitions from their ``meta/control`` records, keeps
those whose compaction lag reaches ``LLOG_COMPACTION_MIN_LAG`` (default 1)
or whose oldest uncompacted entry is ``LLOG_COMPACTION_MAX_DELAY_MS`` old,
and enqueues them in random order on ``LLOG_COMPACTION_QUEUE_URL``; the
worker function consumes that queue with bounded concurrency. Its clients:
Oxia (the catalog) and SQS; the modules of both are imported by the first
invocation, not with this module (the Lambda init phase).

Each run then sweeps the consumer groups (docs/GROUPS.md): it deletes the
groups idle past ``LLOG_GROUP_EXPIRY_MS`` and emits ``ConsumerLag`` (EMF,
dimensions ``service``, ``group``, ``topic``, ``partition``) for every
partition a group has committed in, which the dashboard graphs. A failure
there is logged and counted (``Errors``) after the compaction tasks are sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.common import names
from functions.common.lazy import Lazy
from functions.common.telemetry import Telemetry
from llog.config import CompactionScheduleConfig, root_prefix_from_env
from llog.errors import LlogError

if TYPE_CHECKING:
    from llog.protocol.catalog import LogCatalog
    from llog.service.groups import GroupService
    from llog.store.queue import TaskQueue


def create_catalog() -> LogCatalog:
    from llog.protocol.catalog import LogCatalog
    from llog.store.oxia import OxiaStore

    return LogCatalog(OxiaStore.from_env(), root=root_prefix_from_env())


def create_queue() -> TaskQueue:
    from llog.store.queue import TaskQueue

    return TaskQueue.from_env()


def create_groups() -> GroupService:
    from llog.service.groups import GroupService

    catalog = _catalog.get()
    return GroupService.on(catalog.oxia, root=catalog.root)


telemetry = Telemetry(names.COMPACTION_PLANNER)
_catalog: Lazy[LogCatalog] = Lazy(create_catalog, lambda catalog: catalog.oxia.close())
_queue: Lazy[TaskQueue] = Lazy(create_queue)
_groups: Lazy[GroupService] = Lazy(create_groups)  # on the catalog's Oxia store


def reset() -> None:
    """Forget this environment's clients (tests start each case fresh)."""
    _groups.reset()
    _catalog.reset()
    _queue.reset()


def report_consumer_lag() -> int:
    """Expire idle groups, then one ``ConsumerLag`` datapoint per group and partition with a commit; how many."""
    groups = _groups.get()
    groups.coordinator.expire_idle()
    lags = [(x, lag) for x in groups.lags() if (lag := x.lag) is not None]
    if telemetry.enabled():
        for x, lag in lags:
            with single_metric(
                name="ConsumerLag",
                unit=MetricUnit.Count,
                value=lag,
                namespace=names.METRIC_NAMESPACE,
                default_dimensions={"service": telemetry.service},
            ) as metric:
                metric.add_dimension(name="group", value=x.group)
                metric.add_dimension(name="topic", value=x.topic)
                metric.add_dimension(name="partition", value=str(x.partition))
    telemetry.logger.info("consumer lag", extra={"lag": {f"{x.group}/{x.topic}/{x.partition}": n for x, n in lags}})
    return len(lags)


@telemetry.lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    from llog.service.compaction import plan_compaction

    config = CompactionScheduleConfig.from_env()
    plan = plan_compaction(_catalog.get(), min_lag=config.min_lag, max_delay_ms=config.max_delay_ms)
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
    try:
        group_partitions: int | None = report_consumer_lag()
    except LlogError as exc:  # the compaction tasks are sent: report, and let the next run try again
        telemetry.logger.warning("consumer groups not swept", extra={"error": str(exc)})
        telemetry.errors([exc.error_type])
        group_partitions = None
    return {
        "partitions": plan.partitions_seen,
        "tasks": len(plan.tasks),
        "enqueued": sent,
        "group_partitions": group_partitions,
    }
