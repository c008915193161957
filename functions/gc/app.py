"""Scheduled retention (docs/RETENTION.md) and garbage collection of S3 objects nothing references (docs/GC.md)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.common.lazy import Lazy
from llog.protocol.gc import GarbageCollector

SERVICE = "gc"

logger = Logger(service=SERVICE)
metrics = Metrics(namespace="llog", service=SERVICE)
_collector: Lazy[GarbageCollector] = Lazy(GarbageCollector.from_env, GarbageCollector.close)


def reset() -> None:
    """Forget this environment's clients (tests start each case fresh)."""
    _collector.reset()


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    report = _collector.get().collect()
    metrics.add_metric(name="WalBlobsDeleted", unit=MetricUnit.Count, value=report.wal_blobs_deleted)
    metrics.add_metric(name="CompactedObjectsDeleted", unit=MetricUnit.Count, value=report.compacted_deleted)
    metrics.add_metric(name="BytesDeleted", unit=MetricUnit.Bytes,
                       value=report.wal_bytes_deleted + report.compacted_bytes_deleted)
    metrics.add_metric(name="RetentionPartitionsTruncated", unit=MetricUnit.Count,
                       value=report.retention_partitions_truncated)
    metrics.add_metric(name="RetentionRangesRemoved", unit=MetricUnit.Count, value=report.retention_ranges_removed)
    metrics.add_metric(name="RetentionBytesDeleted", unit=MetricUnit.Bytes, value=report.retention_bytes_deleted)
    metrics.add_metric(name="GcErrors", unit=MetricUnit.Count, value=len(report.errors))
    # Foreign or damaged objects under wal-shared/, kept: a warning every run, not an error (docs/GC.md).
    metrics.add_metric(name="WalUnreadableKept", unit=MetricUnit.Count, value=report.wal_unreadable_kept)
    logger.info("garbage collected", extra=asdict(report))
    return asdict(report)
