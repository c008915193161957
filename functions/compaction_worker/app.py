"""Compaction worker: SQS → claim the partition → compact until caught up or out of time → release.

The SQS event source has a maximum concurrency bound and reports partial batch
failures: a task that fails (storage unavailable, a malformed message) is
retried by SQS and, after ``maxReceiveCount`` attempts, lands in the
dead-letter queue. The time budget stays well inside the Lambda timeout.
The compactor's modules (Oxia and S3 clients) are imported by the first task,
not with this module (the Lambda init phase).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.common import names
from functions.common.lazy import Lazy
from functions.common.telemetry import Telemetry
from llog.config import CompactionScheduleConfig

if TYPE_CHECKING:
    from llog.protocol.claims import CompactorClaims
    from llog.protocol.compaction import Compactor
    from llog.service.compaction import TaskOutcome

SAFETY_MARGIN_S = 10.0  # leave time to release the claim and answer before the Lambda timeout

telemetry = Telemetry(names.COMPACTION_WORKER)
# Report failed items even when all fail: SQS retries exactly those, then moves them to the DLQ.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def create_compactor() -> Compactor:
    from llog.protocol.compaction import Compactor

    return Compactor.from_env()


def create_claims() -> CompactorClaims:
    from llog.protocol.claims import CompactorClaims

    storage = _compactor.get().storage
    worker = CompactionScheduleConfig.from_env().compactor_id or f"worker-{uuid.uuid4()}"
    return CompactorClaims(storage.oxia, worker, root=storage.root)


_compactor: Lazy[Compactor] = Lazy(create_compactor, lambda compactor: compactor.close())
_claims: Lazy[CompactorClaims] = Lazy(create_claims)


def budget_s(context: LambdaContext | None) -> float:
    budget = CompactionScheduleConfig.from_env().budget_ms / 1000
    if context is not None:
        budget = min(budget, context.get_remaining_time_in_millis() / 1000 - SAFETY_MARGIN_S)
    return max(budget, 0.0)


def record_metrics(outcome: TaskOutcome) -> None:
    from llog.service.compaction import TaskEnd

    telemetry.metric(f"CompactionTask_{outcome.outcome.value}", MetricUnit.Count, 1)
    telemetry.metric("RecordsCompacted", MetricUnit.Count, outcome.records)
    telemetry.metric("BytesCompacted", MetricUnit.Bytes, outcome.bytes_written)
    telemetry.metric("CompactionRecoveries", MetricUnit.Count, outcome.recoveries)
    claims = "ClaimsSkipped" if outcome.outcome is TaskEnd.CLAIM_HELD else "ClaimsTaken"
    telemetry.metric(claims, MetricUnit.Count, 1)
    stages: dict[str, float] = {}
    for run in outcome.runs:
        for stage, seconds in run.stage_seconds.items():
            stages[stage] = stages.get(stage, 0.0) + seconds
    for stage, seconds in stages.items():
        telemetry.metric(f"CompactionStage_{stage}", MetricUnit.Milliseconds, seconds * 1000)


def process(record: SQSRecord, lambda_context: LambdaContext | None = None) -> dict[str, Any]:
    from llog.service.compaction import CompactionTask, run_compaction_task

    task = CompactionTask.from_message(record.body)  # a malformed message fails -> retried -> DLQ
    outcome = run_compaction_task(task, _compactor.get(), _claims.get(), budget_s=budget_s(lambda_context))
    record_metrics(outcome)
    telemetry.logger.info("compaction task done", extra={
        "topic": task.topic, "partition": task.partition, "outcome": outcome.outcome.value,
        "runs": len(outcome.runs), "records": outcome.records, "bytes": outcome.bytes_written,
    })
    return {"outcome": outcome.outcome.value, "records": outcome.records}


def reset() -> None:
    """Forget this environment's clients (tests start each case fresh)."""
    _claims.reset()
    _compactor.reset()


@telemetry.lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(event=event, record_handler=process, processor=processor, context=context)
