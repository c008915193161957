"""Scheduled backup of the namespace's Oxia state to S3 (docs/RECOVERY.md, "Back up and restore").

Every topic, the consumer groups and the producer ids; each run keeps the
newest ``LLOG_BACKUP_KEEP`` complete backups. Emits ``BackupCompleted`` (1 per
finished backup), ``PartitionsBackedUp`` and ``BackupErrors`` (partitions that
could not be read, left out of this backup; infra/observability.py alarms on
them). Its interval bounds the recovery point objective together with the
compaction lag (docs/RECOVERY.md, "Recovery point objective"). A run that
finds Oxia's state lost (``NamespaceMismatch``, docs/GC.md "The namespace
guard") writes and prunes nothing, counts one ``BackupErrors`` and fails the
invocation. The backup's modules (Oxia and S3 clients) are imported by the
first invocation, not with this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.common import names
from functions.common.lazy import Lazy
from functions.common.telemetry import Telemetry
from llog.errors import NamespaceMismatch

if TYPE_CHECKING:
    from llog.store.storage import Storage


def create_storage() -> Storage:
    from llog.store.storage import Storage

    return Storage.from_env()


telemetry = Telemetry(names.BACKUP)
_storage: Lazy[Storage] = Lazy(create_storage, lambda storage: storage.close())


def reset() -> None:
    """Forget this environment's clients (tests start each case fresh)."""
    _storage.reset()


@telemetry.lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    from llog.protocol.backup import back_up_topics

    try:
        report = back_up_topics(_storage.get())
    except NamespaceMismatch as exc:
        # Oxia lost its state: a backup of it would hold nothing and prune the real ones. The run fails
        # (the function's error alarm) until the topics are rebuilt and the namespace adopted (docs/RECOVERY.md).
        telemetry.metric("BackupErrors", MetricUnit.Count, 1)
        telemetry.logger.error("backup refused: %s", exc, extra={"error_type": exc.error_type})
        raise
    telemetry.metric("BackupCompleted", MetricUnit.Count, 1)
    telemetry.metric("PartitionsBackedUp", MetricUnit.Count,
                     sum(p.high_watermark is not None for ps in report.topics.values() for p in ps))  # fmt: skip
    telemetry.metric("BackupErrors", MetricUnit.Count, len(report.errors))
    summary = report.to_json()
    if report.errors:
        telemetry.logger.error("backup left partitions out", extra={"backup_id": report.backup_id,
                                                                    "errors": report.errors})  # fmt: skip
    telemetry.logger.info("backed up", extra={k: v for k, v in summary.items() if k != "topics"})
    return summary
