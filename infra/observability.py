"""The CloudWatch dashboard and alarms, built from what exists.

The data bucket (request rates, errors, latency, size) and the Oxia processes (running task
count, CPU, memory) are built in; LlogStack hands in the rest: :meth:`add_functions` (the
functions: invocations, errors, throttles, duration p99; an error alarm each),
:meth:`add_dead_letter_queues` (depth; alarm at one message), :meth:`add_api` (requests,
4xx/5xx, latency; 5xx alarm), :meth:`add_llog_metrics` (the functions' EMF metrics in
namespace ``llog``, consumer lag per group and partition; compaction-lag alarm) and
:meth:`add_glue_job` (a Glue job's runs: failed runs, records and bytes; an alarm on every failed run, and
on offsets the export skipped: lost or expired) and
:meth:`add_recovery` (the recovery point bound, backups and verification; alarms on damage and on
partitions a backup left out). Alarms have no
action until :meth:`add_alarm_action` gives them one (for example an SNS topic); actions given
earlier also apply to alarms added later.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from functions.common import names
from infra.oxia import OxiaCluster
from infra.storage import REQUEST_METRICS_ID

# The export job's metrics (glue_jobs/llog_export/metrics.py, which infra does not import: tests check they agree).
EXPORT_SERVICE = "export"
EXPORT_LOST_OFFSETS = "ExportLostOffsets"
EXPORT_EXPIRED_OFFSETS = "ExportExpiredOffsets"
PERIOD = Duration.minutes(1)
ALARM_PERIOD = Duration.minutes(5)  # the front door's 5xx alarm counts over this
WIDTH = 24


def _metric(
    namespace: str,
    name: str,
    dimensions: Mapping[str, str],
    statistic: str = "Sum",
    *,
    period: Duration = PERIOD,
    label: str | None = None,
) -> cw.Metric:
    return cw.Metric(
        namespace=namespace,
        metric_name=name,
        dimensions_map=dimensions,
        statistic=statistic,
        period=period,
        label=label,
    )


@dataclass(frozen=True)
class ApiMetrics:
    """The front door's metrics (REST and HTTP APIs and the serve fleet's load balancer name them differently)."""

    count: cw.Metric
    client_errors: cw.Metric
    server_errors: cw.Metric | cw.MathExpression
    latency: cw.IMetric  # p99, ms
    integration_latency: cw.IMetric | None  # p99, ms (the serve fleet has none: the tasks answer themselves)


class Observability(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        bucket: s3.IBucket,
        oxia: OxiaCluster,
        functions: Sequence[lambda_.IFunction] = (),
        dead_letter_queues: Sequence[sqs.IQueue] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        self.stage = stage
        self.alarms: list[cw.Alarm] = []
        self._actions: list[cw.IAlarmAction] = []
        self.dashboard = cw.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"llog-{stage}",
            default_interval=Duration.hours(3),
        )
        self.dashboard.add_widgets(
            cw.TextWidget(
                markdown=f"# llog `{stage}`\nProduce, consume, compaction and GC rows appear as those parts "
                "are deployed. Oxia bootstrap address: `" + oxia.service_address + "`.",
                width=WIDTH,
                height=2,
            )
        )
        self._add_bucket(bucket)
        self._add_oxia(oxia)
        if functions:
            self.add_functions("Functions", functions)
        if dead_letter_queues:
            self.add_dead_letter_queues(dead_letter_queues)

    @property
    def dashboard_url(self) -> str:
        return (
            f"https://{Aws.REGION}.console.aws.amazon.com/cloudwatch/home?region={Aws.REGION}"
            f"#dashboards:name={self.dashboard.dashboard_name}"
        )

    # -- extension points -------------------------------------------------------------------

    def add_alarm_action(self, action: cw.IAlarmAction) -> None:
        self._actions.append(action)
        for alarm in self.alarms:
            alarm.add_alarm_action(action)

    def add_functions(
        self, title: str, functions: Sequence[lambda_.IFunction] | Mapping[str, lambda_.IFunction]
    ) -> None:
        """A dashboard row for ``functions`` (a list, or a mapping from a name) and an error alarm for each."""
        named = dict(functions) if isinstance(functions, Mapping) else {f.node.id: f for f in functions}
        items = list(named.items())
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title=f"{title}: invocations",
                left=[f.metric_invocations(period=PERIOD, label=n) for n, f in items],
                width=6,
            ),
            cw.GraphWidget(
                title=f"{title}: errors", left=[f.metric_errors(period=PERIOD, label=n) for n, f in items], width=6
            ),
            cw.GraphWidget(
                title=f"{title}: throttles",
                left=[f.metric_throttles(period=PERIOD, label=n) for n, f in items],
                width=6,
            ),
            cw.GraphWidget(
                title=f"{title}: duration p99",
                left=[f.metric_duration(period=PERIOD, statistic="p99", label=n) for n, f in items],
                width=6,
            ),
        )
        for name, f in items:
            self._alarm(
                f"Errors-{name}",
                f.metric_errors(period=Duration.minutes(5)),
                threshold=1,
                description=f"llog {self.stage}: function {name} reported errors",
            )

    def add_dead_letter_queues(self, queues: Sequence[sqs.IQueue]) -> None:
        """A dashboard row for the dead-letter queues and an alarm as soon as one holds a message."""
        qs = list(queues)
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Dead-letter queues: messages",
                left=[q.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum") for q in qs],
                width=WIDTH,
            )
        )
        for q in qs:
            self._alarm(
                f"Dlq-{q.node.id}",
                q.metric_approximate_number_of_messages_visible(period=Duration.minutes(5), statistic="Maximum"),
                threshold=1,
                description=f"llog {self.stage}: messages in dead-letter queue {q.node.id}",
            )

    def add_api(self, api: ApiMetrics) -> None:
        """A dashboard row for the front door (requests, 4xx/5xx, latency) and an alarm on 5xx answers."""
        self.dashboard.add_widgets(
            cw.GraphWidget(title="API: requests", left=[api.count], width=6),
            cw.GraphWidget(title="API: 4xx / 5xx", left=[api.client_errors, api.server_errors], width=6),
            cw.GraphWidget(
                title="API: latency p99 (ms)",
                left=[m for m in (api.latency, api.integration_latency) if m is not None],
                width=12,
            ),
        )
        self._alarm(
            "Api5xx",
            api.server_errors.with_(period=ALARM_PERIOD),
            threshold=5,
            description=f"llog {self.stage}: the API answered with server errors",
        )

    def add_serve_fleet(self, *, cluster_name: str, services: Mapping[str, tuple[str, int]]) -> None:
        """Per ECS service of the serve fleet (``id: (name, desired count)``), an alarm when it runs fewer tasks
        than it should (Container Insights' count)."""
        running = {
            construct_id: _metric("ECS/ContainerInsights", "RunningTaskCount",
                                  {"ClusterName": cluster_name, "ServiceName": name}, "Minimum")
            for construct_id, (name, _) in services.items()
        }  # fmt: skip
        self.dashboard.add_widgets(
            cw.GraphWidget(title="Serve fleet: running tasks", left=list(running.values()), width=6)
        )
        for construct_id, (_, desired) in services.items():
            self._alarm(
                f"ServeFleet{construct_id}Tasks",
                running[construct_id],
                threshold=desired,
                comparison=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
                evaluation_periods=3,
                missing=cw.TreatMissingData.BREACHING,
                description=f"llog {self.stage}: the serve fleet's {construct_id} runs fewer than its {desired} tasks",
            )

    def add_llog_metrics(self, *, compaction_lag_threshold: int) -> None:
        """The functions' EMF metrics (namespace ``llog``) and an alarm on the compaction lag."""

        def metric(name: str, service: str, statistic: str = "Sum") -> cw.Metric:
            return _metric(names.METRIC_NAMESPACE, name, {"service": service}, statistic)

        lag = metric("MaxCompactionLag", names.COMPACTION_PLANNER, "Maximum")
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="llog: records produced / consumed",
                left=[metric("RecordsProduced", names.PRODUCE), metric("RecordsConsumed", names.CONSUME)],
                width=6,
            ),
            cw.GraphWidget(
                title="llog: bytes produced / consumed",
                left=[metric("BytesProduced", names.PRODUCE), metric("BytesConsumed", names.CONSUME)],
                width=6,
            ),
            cw.GraphWidget(title="llog: max compaction lag (offsets)", left=[lag], width=6),
            cw.GraphWidget(
                title="llog: records compacted", left=[metric("RecordsCompacted", names.COMPACTION_WORKER)], width=6
            ),
        )
        # Whether GC keeps up (docs/GC.md, "Schedules"): blobs past the grace it listed, deleted, and kept because
        # a partition still references them (what compaction's lag pins).
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="llog: WAL blobs GC listed / deleted / kept referenced",
                left=[metric(name, names.GC) for name in ("WalBlobsSeen", "WalBlobsDeleted", "WalBlobsReferenced")],
                width=WIDTH,
            )
        )
        # One line per group, topic and partition, whichever exist: the planner emits ConsumerLag for
        # every partition a consumer group has committed in (docs/GROUPS.md).
        consumer_lag = cw.MathExpression(
            expression=(
                f"SEARCH('{{{names.METRIC_NAMESPACE},service,group,topic,partition}} "
                f"MetricName=\"ConsumerLag\" service=\"{names.COMPACTION_PLANNER}\"', 'Maximum', 60)"
            ),
            using_metrics={},
            label="",
            period=PERIOD,
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="llog: consumer lag by group, topic and partition (offsets)", left=[consumer_lag], width=WIDTH
            )
        )
        self._alarm(
            "CompactionLag",
            lag.with_(period=Duration.minutes(5)),
            threshold=compaction_lag_threshold,
            comparison=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=3,
            description=f"llog {self.stage}: a partition is more than {compaction_lag_threshold} offsets "
            "behind compaction for 15 minutes",
        )

    def add_recovery(self, *, backup_schedule: str, verify_schedule: str) -> None:
        """A row for recovery (docs/RECOVERY.md): the recovery point bound, backups, verification; their alarms.

        After losing Oxia, committed compacted ranges survive in S3 and the latest backup holds the index
        up to its time, so what can be lost is at most what was appended since the last backup *and* not
        compacted yet: the RPO is bounded by min(compaction lag, backup interval). The lag graph is the
        planner's ``MaxCompactionLag``; the backup interval is the schedule, shown next to it.
        """

        def metric(name: str, service: str, statistic: str = "Sum") -> cw.Metric:
            return _metric(names.METRIC_NAMESPACE, name, {"service": service}, statistic, period=Duration.hours(1))

        lag = _metric(names.METRIC_NAMESPACE, "MaxCompactionLag", {"service": names.COMPACTION_PLANNER}, "Maximum")
        problems = metric("VerifyProblems", names.VERIFY, "Maximum")
        backup_errors = metric("BackupErrors", names.BACKUP, "Maximum")
        self.dashboard.add_widgets(
            cw.GraphWidget(title="llog: recovery point: max compaction lag (offsets)", left=[lag], width=6),
            cw.TextWidget(
                markdown="**Recovery point objective** (docs/RECOVERY.md) <= min(compaction lag, backup interval)."
                f"\n\nBackup interval: `{backup_schedule}` (`llog:backupSchedule`)."
                f"\n\nVerification: `{verify_schedule}` (`llog:verifySchedule`).",
                width=6,
                height=6,
            ),
            cw.GraphWidget(
                title="llog: backups (hourly)",
                left=[metric("BackupCompleted", names.BACKUP), backup_errors],
                right=[metric("PartitionsBackedUp", names.BACKUP, "Maximum")],
                width=6,
            ),
            cw.GraphWidget(
                title="llog: verification (hourly)",
                left=[problems, metric("OrphanedObjects", names.VERIFY, "Maximum")],
                right=[metric("PartitionsVerified", names.VERIFY, "Maximum")],
                width=6,
            ),
        )
        # Each run emits one datapoint: the alarm keeps its state between runs (missing data ignored).
        self._alarm(
            "VerifyProblems",
            problems,
            threshold=1,
            missing=cw.TreatMissingData.IGNORE,
            description=f"llog {self.stage}: verification found damage; `llog verify` names the keys "
            "(docs/RECOVERY.md, \"Verify a partition\")",
        )
        self._alarm(
            "BackupErrors",
            backup_errors,
            threshold=1,
            missing=cw.TreatMissingData.IGNORE,
            description=f"llog {self.stage}: the last backup left partitions out (see the backup function's log)",
        )

    def add_glue_job(self, job_name: str, failures: events.IRule) -> None:
        """A dashboard row for Glue job ``job_name`` and an alarm as soon as ``failures`` matches an event.

        ``failures`` is an EventBridge rule on the job's "Glue Job State Change" events for failed
        states; Glue publishes no metric for a failed or timed-out run, the rule's
        ``TriggeredRules`` count is that metric. The job metrics (``--enable-metrics``, namespace
        ``Glue``, ``JobRunId=ALL``) show what the runs read and wrote.
        """
        failed = _metric("AWS/Events", "TriggeredRules", {"RuleName": failures.rule_name}, period=Duration.minutes(5))

        def job(name: str, label: str) -> cw.Metric:
            dimensions = {"JobName": job_name, "JobRunId": "ALL", "Type": "count"}
            return _metric("Glue", name, dimensions, period=Duration.minutes(5), label=label)

        self.dashboard.add_widgets(
            cw.GraphWidget(title=f"Glue {job_name}: failed runs", left=[failed.with_(label="failed runs")], width=8),
            cw.GraphWidget(
                title=f"Glue {job_name}: records read",
                left=[job("glue.driver.aggregate.recordsRead", "records read")],
                width=8,
            ),
            cw.GraphWidget(
                title=f"Glue {job_name}: S3 bytes read / written",
                left=[
                    job("glue.ALL.s3.filesystem.read_bytes", "read"),
                    job("glue.ALL.s3.filesystem.write_bytes", "written"),
                ],
                width=8,
            ),
        )
        self._alarm(
            f"GlueJobFailed-{job_name}",
            failed,
            threshold=1,
            description=f"llog {self.stage}: a run of Glue job {job_name} failed, timed out or ended in error",
        )
        # Each run puts one datapoint of each (glue_jobs/llog_export/metrics.py): an alarm keeps its state
        # between runs (missing data ignored), and a skipped range is found again by every run until one
        # exports past it (docs/ANALYTICS.md, "Offsets the table will never hold").
        for name, what in (
            (EXPORT_LOST_OFFSETS, "lost offsets: a LOST range (a rebuild could not recover it) has no records"),
            (EXPORT_EXPIRED_OFFSETS, "expired offsets: retention removed ranges before the export reached them"),
        ):
            skipped = _metric(names.METRIC_NAMESPACE, name, {"service": EXPORT_SERVICE}, "Maximum",
                              period=Duration.minutes(5))  # fmt: skip
            self._alarm(
                f"{name}-{job_name}",
                skipped,
                threshold=1,
                missing=cw.TreatMissingData.IGNORE,
                description=f"llog {self.stage}: Glue job {job_name} skipped {what}; the table will not hold "
                "them (the run's log names each range)",
            )

    # -- what exists today ------------------------------------------------------------------

    def _add_bucket(self, bucket: s3.IBucket) -> None:
        def request(name: str, statistic: str = "Sum") -> cw.Metric:
            dimensions = {"BucketName": bucket.bucket_name, "FilterId": REQUEST_METRICS_ID}
            return _metric("AWS/S3", name, dimensions, statistic)

        def storage(name: str, storage_type: str) -> cw.Metric:
            dimensions = {"BucketName": bucket.bucket_name, "StorageType": storage_type}
            return _metric("AWS/S3", name, dimensions, "Average", period=Duration.days(1))

        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="S3: requests",
                left=[request("PutRequests"), request("GetRequests"), request("DeleteRequests")],
                width=6,
            ),
            cw.GraphWidget(title="S3: errors", left=[request("4xxErrors"), request("5xxErrors")], width=6),
            cw.GraphWidget(
                title="S3: latency p99 (ms)",
                left=[request("FirstByteLatency", "p99"), request("TotalRequestLatency", "p99")],
                width=6,
            ),
            cw.GraphWidget(
                title="S3: stored bytes / objects (daily)",
                left=[storage("BucketSizeBytes", "StandardStorage")],
                right=[storage("NumberOfObjects", "AllStorageTypes")],
                width=6,
            ),
        )
        self._alarm(
            "S3ServerErrors",
            request("5xxErrors").with_(period=Duration.minutes(5)),
            threshold=10,
            description=f"llog {self.stage}: S3 returned server errors for the data bucket",
        )

    def _add_oxia(self, oxia: OxiaCluster) -> None:
        running: list[cw.IMetric] = []
        cpu: list[cw.IMetric] = []
        memory: list[cw.IMetric] = []
        for node in oxia.nodes:
            dimensions = {"ClusterName": oxia.cluster.cluster_name, "ServiceName": node.service.service_name}
            tasks = _metric("ECS/ContainerInsights", "RunningTaskCount", dimensions, "Minimum")
            running.append(tasks.with_(label=node.name))
            cpu.append(node.service.metric_cpu_utilization(period=PERIOD, label=node.name))
            memory.append(node.service.metric_memory_utilization(period=PERIOD, label=node.name))
            self._alarm(
                f"OxiaDown-{node.name}",
                tasks,
                threshold=1,
                comparison=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
                evaluation_periods=3,
                missing=cw.TreatMissingData.BREACHING,
                description=f"llog {self.stage}: Oxia {node.role} {node.name} has no running task",
            )
        self.dashboard.add_widgets(
            cw.GraphWidget(title=f"Oxia ({oxia.mode}): running tasks", left=running, width=8),
            cw.GraphWidget(title="Oxia: CPU %", left=cpu, width=8),
            cw.GraphWidget(title="Oxia: memory %", left=memory, width=8),
        )

    def _alarm(
        self,
        construct_id: str,
        metric: cw.IMetric,
        *,
        threshold: float,
        description: str,
        comparison: cw.ComparisonOperator = cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluation_periods: int = 1,
        missing: cw.TreatMissingData = cw.TreatMissingData.NOT_BREACHING,
    ) -> cw.Alarm:
        alarm = cw.Alarm(
            self,
            construct_id,
            metric=metric,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=evaluation_periods,
            treat_missing_data=missing,
            alarm_description=description,
        )
        for action in self._actions:
            alarm.add_alarm_action(action)
        self.alarms.append(alarm)
        return alarm
