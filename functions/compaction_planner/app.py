"""Scheduled compaction planner: one SQS message per partition that needs compaction.

EventBridge Scheduler invokes it (``LLOG_COMPACTION_SCHEDULE``, default every
minute). It discovers partitions from their ``meta/control`` records, keeps
those whose compaction lag reaches ``LLOG_COMPACTION_MIN_LAG`` (default 1),
and enqueues them in random order on ``LLOG_COMPACTION_QUEUE_URL``; the
worker function consumes that queue with bounded concurrency.
"""

from __future__ import annotations

import os
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.common.lazy import Lazy
from llog.config import env_int, root_prefix_from_env
from llog.errors import ConfigurationError
from llog.protocol.catalog import LogCatalog
from llog.service.compaction import CompactionTask, plan_compaction
from llog.store.oxia import OxiaStore

SERVICE = "compaction_planner"
SQS_BATCH = 10  # SendMessageBatch limit

logger = Logger(service=SERVICE)
metrics = Metrics(namespace="llog", service=SERVICE)
_catalog: Lazy[LogCatalog] = Lazy(lambda: LogCatalog(OxiaStore.from_env(), root=root_prefix_from_env()),
                                  lambda c: c.oxia.close())
_sqs: Lazy[Any] = Lazy(lambda: boto3.client("sqs"))


def reset() -> None:
    """Forget this environment's clients (tests start each case fresh)."""
    _catalog.reset()
    _sqs.reset()


def enqueue(tasks: list[CompactionTask]) -> int:
    """Send the tasks to the compaction queue; returns how many were accepted."""
    queue_url = os.environ.get("LLOG_COMPACTION_QUEUE_URL")
    if not queue_url:
        raise ConfigurationError("LLOG_COMPACTION_QUEUE_URL is not set (the compaction task queue)")
    sent = 0
    for start in range(0, len(tasks), SQS_BATCH):
        chunk = tasks[start : start + SQS_BATCH]
        response = _sqs.get().send_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(i), "MessageBody": task.to_message()} for i, task in enumerate(chunk)],
        )
        sent += len(response.get("Successful", []))
        for failure in response.get("Failed", []):
            logger.error("could not enqueue a compaction task", extra={"failure": failure})
    return sent


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    plan = plan_compaction(_catalog.get(), min_lag=env_int(os.environ, "LLOG_COMPACTION_MIN_LAG", 1))
    sent = enqueue(plan.tasks)
    metrics.add_metric(name="PartitionsSeen", unit=MetricUnit.Count, value=plan.partitions_seen)
    metrics.add_metric(name="CompactionTasksEnqueued", unit=MetricUnit.Count, value=sent)
    metrics.add_metric(name="MaxCompactionLag", unit=MetricUnit.Count,
                       value=max(plan.lag_by_partition.values(), default=0))
    logger.info("compaction planned", extra={
        "partitions": plan.partitions_seen, "tasks": len(plan.tasks), "enqueued": sent,
        "lag": {f"{t}/{p}": lag for (t, p), lag in plan.lag_by_partition.items() if lag},
    })
    return {"partitions": plan.partitions_seen, "tasks": len(plan.tasks), "enqueued": sent}
