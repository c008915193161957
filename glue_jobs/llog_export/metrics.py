"""The export's CloudWatch metrics: offsets a run found the table will never hold (docs/ANALYTICS.md).

Each run on Glue puts one datapoint of each: ``ExportLostOffsets`` (gaps no manifest will fill, a
LOST range) and ``ExportExpiredOffsets`` (ranges retention removed before the export reached them),
in the functions' namespace ``llog`` with ``service=export``. The CDK stack alarms on each at one
(``infra.observability.Observability.add_glue_job``). A skipped range is found again by every run until
a run exports a range after it, so the alarm stays in alarm until then.
"""

from __future__ import annotations

from typing import Any

NAMESPACE = "llog"  # functions/common/names.py METRIC_NAMESPACE; infra's test checks they agree
SERVICE = "export"
LOST_OFFSETS = "ExportLostOffsets"
EXPIRED_OFFSETS = "ExportExpiredOffsets"


def metric_data(lost_offsets: int, expired_offsets: int) -> list[dict[str, Any]]:
    """``PutMetricData``'s ``MetricData`` for one run."""
    dimensions = [{"Name": "service", "Value": SERVICE}]
    return [
        {"MetricName": name, "Dimensions": dimensions, "Value": float(value), "Unit": "Count"}
        for name, value in ((LOST_OFFSETS, lost_offsets), (EXPIRED_OFFSETS, expired_offsets))
    ]


def put_metrics(lost_offsets: int, expired_offsets: int) -> None:
    """Put one run's datapoints (on Glue: the job role may put metrics in this namespace)."""
    import boto3

    boto3.client("cloudwatch").put_metric_data(
        Namespace=NAMESPACE, MetricData=metric_data(lost_offsets, expired_offsets)
    )
