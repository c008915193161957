"""Scheduled verification of every partition against the protocol's invariants (docs/RECOVERY.md, "Verify a partition").

Reads only. Emits ``VerifyProblems`` (the alarm of infra/observability.py
fires on any), ``PartitionsVerified``, ``PartitionsSkipped`` (left for the
next run when the invocation's time ran out: partitions are verified in
random order, so every one is reached over runs) and ``OrphanedObjects``, and
logs the first problems with their keys. The verifier's modules (Oxia and S3
clients) are imported by the first invocation, not with this module.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.common import names
from functions.common.lazy import Lazy
from functions.common.telemetry import Telemetry

if TYPE_CHECKING:
    from llog.protocol.verify import Verifier

# No partition is started later than this before the invocation's timeout: one partition's check fits in it.
MARGIN_MS = 60_000


def create_verifier() -> Verifier:
    from llog.protocol.verify import Verifier

    return Verifier.from_env()


telemetry = Telemetry(names.VERIFY)
_verifier: Lazy[Verifier] = Lazy(create_verifier, lambda verifier: verifier.close())


def reset() -> None:
    """Forget this environment's clients (tests start each case fresh)."""
    _verifier.reset()


@telemetry.lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    deadline = time.monotonic() + max(context.get_remaining_time_in_millis() - MARGIN_MS, 0) / 1000
    report = _verifier.get().verify(deadline=deadline, shuffle=True)
    telemetry.metric("VerifyProblems", MetricUnit.Count, report.problem_count)
    telemetry.metric("PartitionsVerified", MetricUnit.Count, len(report.partitions))
    telemetry.metric("PartitionsSkipped", MetricUnit.Count, report.skipped)
    telemetry.metric("OrphanedObjects", MetricUnit.Count, report.orphans)
    summary = report.to_json()
    if report.ok:
        telemetry.logger.info("verified", extra={k: v for k, v in summary.items() if k != "partitions"})
    else:
        telemetry.logger.error("verification found problems", extra={"problem_count": report.problem_count,
                                                                       "problems": summary["problems"]})  # fmt: skip
    return summary
