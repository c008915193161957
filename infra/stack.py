"""LlogStack: the whole llog deployment of one stage, one construct per concern.

Constructs: ``network``, ``storage``, ``oxia``, ``layer``, ``access_keys`` (the KMS key that seals the Kinesis
API's access keys, for whatever answers that API), ``functions`` (the Lambda
functions, in ``network.private_subnets`` with ``oxia.client_security_group``), ``compaction``
(task queue, dead-letter queue, worker event source, planner and GC schedules), ``recovery``
(the verify and backup schedules), ``api`` (the REST API, with ``llog:frontDoor=http`` the
HTTP API of ``HttpFrontDoor``, with ``llog:frontDoor=serve`` the ``ServeFleet``: llog serve on
Oxia's ECS cluster behind an internal load balancer), ``observability`` (dashboard and alarms of all of them) and
``analytics`` (the Glue export job, its bucket, database and schedule). Glue is outside the VPC:
it reads S3 only, through the manifests compaction publishes after each commit, never Oxia.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Fn, RemovalPolicy, Stack, Tags
from aws_cdk import aws_logs as logs
from constructs import Construct

from functions.common import cors, names, routes
from infra.access_keys import AccessKeySealing
from infra.analytics import Analytics
from infra.api import Api
from infra.compaction import Compaction
from infra.functions import SPECS, Functions
from infra.http_api import HttpFrontDoor
from infra.layer import LlogLayer
from infra.network import Network
from infra.observability import Observability
from infra.oxia import OxiaCluster
from infra.recovery import Recovery
from infra.serve_fleet import ServeFleet
from infra.settings import LlogSettings
from infra.storage import Storage

_RETENTION = {
    1: logs.RetentionDays.ONE_DAY, 3: logs.RetentionDays.THREE_DAYS, 5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK, 14: logs.RetentionDays.TWO_WEEKS, 30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS, 90: logs.RetentionDays.THREE_MONTHS, 120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS, 180: logs.RetentionDays.SIX_MONTHS, 365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS, 545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS, 1096: logs.RetentionDays.THREE_YEARS, 1827: logs.RetentionDays.FIVE_YEARS,
    2192: logs.RetentionDays.SIX_YEARS, 2557: logs.RetentionDays.SEVEN_YEARS, 2922: logs.RetentionDays.EIGHT_YEARS,
    3288: logs.RetentionDays.NINE_YEARS, 3653: logs.RetentionDays.TEN_YEARS,
}  # fmt: skip


def retention_days(days: int) -> logs.RetentionDays:
    return _RETENTION[days]


class LlogStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, settings: LlogSettings, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.settings = settings
        removal = RemovalPolicy.RETAIN if settings.production else RemovalPolicy.DESTROY
        retention = retention_days(settings.log_retention_days)
        Tags.of(self).add("project", "llog")
        Tags.of(self).add("llog:stage", settings.stage)

        self.network = Network(
            self,
            "Network",
            max_azs=settings.max_azs,
            nat_gateways=settings.nat_gateways,
            log_retention=retention,
            removal_policy=removal,
        )
        self.storage = Storage(
            self,
            "Storage",
            production=settings.production,
            encryption=settings.bucket_encryption,
            access_log_retention_days=settings.access_log_retention_days,
        )
        self.oxia = OxiaCluster(
            self,
            "Oxia",
            vpc=self.network.vpc,
            subnets=self.network.private_subnets,
            stage=settings.stage,
            mode=settings.oxia_mode,
            size=settings.oxia_size,
            storage=settings.oxia_storage,
            shards=settings.oxia_shards,
            namespace=settings.oxia_namespace,
            log_retention=retention,
            removal_policy=removal,
        )
        self.layer = LlogLayer(self, "LlogLayer")
        self.access_keys = AccessKeySealing(self, "AccessKeys", stage=settings.stage, removal_policy=removal)
        self.functions = Functions(
            self,
            "Functions",
            stage=settings.stage,
            layer=self.layer.layer,
            vpc=self.network.vpc,
            subnets=self.network.private_subnets,
            security_group=self.oxia.client_security_group,
            environment=self.function_environment(),
            extra_environment={
                names.GC: {
                    "LLOG_GC_GRACE_MS": str(settings.gc_grace_period_hours * 3_600_000),
                    **settings.retention_environment(),
                },
                # Verification counts unreferenced compacted objects older than GC's grace as orphans.
                names.VERIFY: {"LLOG_GC_GRACE_MS": str(settings.gc_grace_period_hours * 3_600_000)},
                # The API functions add Access-Control-Allow-Origin for these origins (none: no CORS).
                **{name: cors.environment(settings.cors_origins) for name in names.NATIVE_API_FUNCTIONS},
                names.KINESIS: self.kinesis_environment(),
            },
            bucket=self.storage.bucket,
            root_prefix=settings.root_prefix,
            log_retention=retention,
            removal_policy=removal,
            api_functions=settings.front_door != "serve",  # the serve fleet answers the API itself
        )
        self.compaction = Compaction(
            self,
            "Compaction",
            stage=settings.stage,
            planner=self.functions[names.COMPACTION_PLANNER],
            worker=self.functions[names.COMPACTION_WORKER],
            gc=self.functions[names.GC],
            worker_timeout=SPECS[names.COMPACTION_WORKER].timeout,
            max_concurrency=settings.compaction_max_concurrency,
            compaction_schedule=settings.compaction_schedule,
            gc_schedule=settings.gc_schedule,
            wal_gc_schedule=settings.wal_gc_schedule,
            removal_policy=removal,
        )
        self.recovery = Recovery(
            self,
            "Recovery",
            stage=settings.stage,
            verify=self.functions[names.VERIFY],
            backup=self.functions[names.BACKUP],
            verify_schedule=settings.verify_schedule,
            backup_schedule=settings.backup_schedule,
        )
        if names.KINESIS in self.functions.constructs:
            self.access_keys.grant_sealing(self.functions.constructs[names.KINESIS].role)
        planner = self.functions[names.COMPACTION_PLANNER]
        planner.add_environment("LLOG_COMPACTION_QUEUE_URL", self.compaction.queue.queue_url)
        planner.add_environment("LLOG_COMPACTION_SCHEDULE", settings.compaction_schedule)
        planner.add_environment("LLOG_COMPACTION_MIN_LAG", str(settings.compaction_min_lag))
        planner.add_environment("LLOG_COMPACTION_MAX_DELAY_MS", str(settings.compaction_max_delay_minutes * 60_000))
        self.api: Api | HttpFrontDoor | ServeFleet
        if settings.front_door == "serve":
            self.api = ServeFleet(
                self,
                "ServeFleet",
                cluster=self.oxia.cluster,
                vpc=self.network.vpc,
                subnets=self.network.private_subnets,
                oxia_client_security_group=self.oxia.client_security_group,
                endpoint=settings.serve_endpoint,
                namespace=self.oxia.dns_namespace,
                # The tasks answer the API: the API functions' CORS origins and the Kinesis settings are theirs.
                environment={
                    **self.function_environment(),
                    **cors.environment(settings.cors_origins),
                    **self.kinesis_environment(),
                    "LLOG_SERVE_AUTH": settings.serve_auth,
                },  # fmt: skip
                bucket=self.storage.bucket,
                root_prefix=settings.root_prefix,
                tasks=settings.serve_tasks,
                log_retention=retention,
                removal_policy=removal,
            )
            self.access_keys.grant_sealing(self.api.task_definition.task_role)
        elif settings.front_door == "http":
            self.api = HttpFrontDoor(
                self,
                "HttpApi",
                stage=settings.stage,
                functions=self.functions.by_name,
                throttle_rate=settings.api_throttle_rate,
                throttle_burst=settings.api_throttle_burst,
                cors_origins=settings.cors_origins,
                log_retention=retention,
                removal_policy=removal,
            )
        else:
            self.api = Api(
                self,
                "Api",
                stage=settings.stage,
                functions=self.functions.by_name,
                auth=settings.api_auth,
                throttle_rate=settings.api_throttle_rate,
                throttle_burst=settings.api_throttle_burst,
                cors_origins=settings.cors_origins,
                log_retention=retention,
                removal_policy=removal,
            )
        self.observability = Observability(
            self, "Observability", stage=settings.stage, bucket=self.storage.bucket, oxia=self.oxia
        )
        self.observability.add_functions("Functions", self.functions.by_name)
        self.observability.add_dead_letter_queues([self.compaction.dead_letter_queue])
        self.observability.add_api(self.api.metrics())
        if isinstance(self.api, ServeFleet):
            self.observability.add_serve_fleet(
                cluster_name=self.oxia.cluster.cluster_name,
                services={
                    s.node.id: (s.service_name, n)
                    for s, n in zip(self.api.services, self.api.desired_counts, strict=True)
                },  # fmt: skip
            )
        self.observability.add_llog_metrics(compaction_lag_threshold=settings.compaction_lag_alarm_threshold)
        self.observability.add_recovery(
            backup_schedule=settings.backup_schedule, verify_schedule=settings.verify_schedule
        )
        self.analytics = Analytics(
            self,
            "Analytics",
            stage=settings.stage,
            production=settings.production,
            data_bucket=self.storage.bucket,
            access_log_bucket=self.storage.access_log_bucket,
            root_prefix=settings.root_prefix,
            topics=settings.export_topics,
            schedule=settings.export_schedule,
            table_format=settings.export_table_format,
            worker_type=settings.glue_worker_type,
            workers=settings.glue_workers,
            timeout_minutes=settings.export_timeout_minutes,
            database_name=settings.glue_database,
        )
        self.observability.add_glue_job(self.analytics.job_name, self.analytics.failure_rule)

        CfnOutput(self, "BucketName", value=self.storage.bucket.bucket_name, description="WAL and compacted objects")
        CfnOutput(
            self,
            "OxiaServiceAddress",
            value=self.oxia.service_address,
            description="LLOG_OXIA_SERVICE_ADDRESS for clients in the VPC (client security group)",
        )
        CfnOutput(
            self,
            "OxiaClientSecurityGroupId",
            value=self.oxia.client_security_group.security_group_id,
            description="Security group that Oxia admits on its public port (the functions)",
        )
        CfnOutput(self, "LlogLayerArn", value=self.layer.layer.layer_version_arn, description="llog Lambda layer")
        CfnOutput(
            self,
            "ApiUrl",
            value=self.api.url,
            description=f"llog {settings.front_door.upper()} API (append /produce, /consume, ...)",
        )
        CfnOutput(
            self,
            "KinesisEndpointUrl",
            value=self.api.url + routes.KINESIS_PATH.lstrip("/"),
            description="endpoint_url of an AWS SDK's Kinesis client, with a key from llog keys create",
        )
        CfnOutput(
            self,
            "AccessKeysKmsKeyArn",
            value=self.access_keys.key.key_arn,
            description="LLOG_KEYS_KMS_KEY_ID of llog keys create (it needs kms:Encrypt on this key)",
        )
        if isinstance(self.api, ServeFleet):
            CfnOutput(
                self,
                "ServeClientSecurityGroupId",
                value=self.api.client_security_group.security_group_id,
                description="Security group whose members reach the serve fleet (ApiUrl)",
            )
            for i, (zone, url) in enumerate(self.api.zone_urls):
                CfnOutput(self, f"ServeZone{i}Url", value=url,
                          description=f"the serve fleet's tasks in zone {i}, for clients in that zone")  # fmt: skip
                CfnOutput(self, f"ServeZone{i}", value=zone, description=f"availability zone of ServeZone{i}Url")
            if self.api.zone_urls:
                zone_map = Fn.join(",", [Fn.join("=", [zone, url]) for zone, url in self.api.zone_urls])
                CfnOutput(self, "ServeZoneUrls", value=zone_map,
                          description="LLOG_URL of the Python client, which uses its own zone's URL")  # fmt: skip
        CfnOutput(self, "CompactionQueueUrl", value=self.compaction.queue.queue_url, description="compaction tasks")
        if isinstance(self.api, Api) and self.api.api_key is not None:
            CfnOutput(
                self,
                "ApiKeyId",
                value=self.api.api_key.key_id,
                description="aws apigateway get-api-key --include-value --api-key <id>",
            )
        CfnOutput(self, "DashboardUrl", value=self.observability.dashboard_url, description="CloudWatch dashboard")
        CfnOutput(
            self,
            "AnalyticsBucketName",
            value=self.analytics.bucket.bucket_name,
            description="exported tables (tables/<table>/) and the export's state",
        )
        CfnOutput(
            self,
            "ExportJobName",
            value=self.analytics.job.ref,
            description="aws glue start-job-run --job-name <this> (runs on its schedule too)",
        )
        CfnOutput(
            self,
            "GlueDatabaseName",
            value=self.analytics.database.ref,
            description="Glue/Athena database of the exported table(s)",
        )

    def kinesis_environment(self) -> dict[str, str]:
        """What answers the Kinesis API reads besides ``function_environment``: the account of its stream ARNs and
        the key that seals its access keys."""
        return {"LLOG_KINESIS_ACCOUNT_ID": self.account, **self.access_keys.environment}

    def function_environment(self) -> dict[str, str]:
        """The ``LLOG_*`` environment every llog function in this stack gets."""
        return {
            "LLOG_OXIA_SERVICE_ADDRESS": self.oxia.service_address,
            "LLOG_OXIA_NAMESPACE": self.settings.oxia_namespace,
            "LLOG_ROOT_PREFIX": self.settings.root_prefix,
            "LLOG_S3_BUCKET": self.storage.bucket.bucket_name,
            "LLOG_APPEND_PROTOCOL": self.settings.append_protocol,
        }
