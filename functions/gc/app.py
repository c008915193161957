"""Scheduled retention (docs/RETENTION.md) and garbage collection of S3 objects nothing references (docs/GC.md).

The hourly schedule runs everything; the frequent one (``{"steps": "wal"}``) the WAL blobs alone.

A run that finds Oxia's state lost (``NamespaceMismatch``, docs/GC.md "The namespace guard") deletes
nothing, counts one ``GcErrors`` and fails the invocation.

The collector's modules (Oxia and S3 clients) are imported by the first invocation, not with this module.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.common import names
from functions.common.lazy import Lazy
from functions.common.telemetry import Telemetry
from llog.errors import NamespaceMismatch

if TYPE_CHECKING:
    from llog.protocol.gc import GarbageCollector


def create_collector() -> GarbageCollector:
    from llog.protocol.gc import GarbageCollector

    return GarbageCollector.from_env()


telemetry = Telemetry(names.GC)
_collector: Lazy[GarbageCollector] = Lazy(create_collector, lambda collector: collector.close())


def reset() -> None:
    """Forget this environment's clients (tests start each case fresh)."""
    _collector.reset()


@telemetry.lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        report = _collector.get().collect(wal_only=event == names.GC_WAL_EVENT)
    except NamespaceMismatch as exc:
        # Oxia lost its state: the run deleted nothing and fails (the function's error alarm) until
        # the topics are rebuilt and the namespace adopted (docs/RECOVERY.md).
        telemetry.metric("GcErrors", MetricUnit.Count, 1)
        telemetry.logger.error("garbage collection refused: %s", exc, extra={"error_type": exc.error_type})
        raise
    telemetry.metric("WalBlobsDeleted", MetricUnit.Count, report.wal_blobs_deleted)
    telemetry.metric("WalBlobsSeen", MetricUnit.Count, report.wal_blobs_seen)
    # Past the grace and still referenced: what lagging compaction pins (docs/GC.md, "Schedules").
    telemetry.metric("WalBlobsReferenced", MetricUnit.Count, report.wal_referenced_kept)
    telemetry.metric("CompactedObjectsDeleted", MetricUnit.Count, report.compacted_deleted)
    telemetry.metric("BytesDeleted", MetricUnit.Bytes, report.wal_bytes_deleted + report.compacted_bytes_deleted)
    telemetry.metric("RetentionPartitionsTruncated", MetricUnit.Count, report.retention_partitions_truncated)
    telemetry.metric("RetentionRangesRemoved", MetricUnit.Count, report.retention_ranges_removed)
    telemetry.metric("RetentionBytesDeleted", MetricUnit.Bytes, report.retention_bytes_deleted)
    telemetry.metric("TopicsReclaimed", MetricUnit.Count, report.topics_reclaimed)
    telemetry.metric("ProducersExpired", MetricUnit.Count, report.producers_expired)
    telemetry.metric("GcErrors", MetricUnit.Count, len(report.errors))
    # Foreign or damaged objects under wal-shared/, kept: a warning every run, not an error (docs/GC.md).
    telemetry.metric("WalUnreadableKept", MetricUnit.Count, report.wal_unreadable_kept)
    telemetry.logger.info("garbage collected", extra=asdict(report))
    return asdict(report)
