"""The ``llog serve`` front door (``llog:frontDoor=serve``): ECS Fargate tasks, reached through a load balancer or DNS.

Each task runs the process ``make dev`` runs (``python -m server.serve``, image
``infra/serve.Dockerfile``): the routes and handlers of the Lambda functions, plus what only a
long-lived process has, **group commit** (concurrent produce requests share one WAL object and one
Oxia write per partition, docs/PERFORMANCE.md) and a tail cache. It is the front door for
throughput and cost per GB (docs/COST.md); the API Gateway front doors are the ones for
per-request authentication and no idle cost (docs/DEPLOY.md, "Front door").

* **Tasks**: ``tasks`` Fargate tasks (ARM64, 1 vCPU, 2 GiB) on Oxia's ECS cluster, in the private
  subnets, with Oxia's client security group; the functions' ``LLOG_*`` environment; S3 object
  reads and writes on ``<bucket>/<root_prefix>/*`` only (produce writes, consume reads, the admin
  routes' compaction pass writes) and a listing of that prefix (``GET /metrics``' footprint); for the Kinesis
  API at ``/kinesis``, the key that seals its access keys (``LLOG_KEYS_KMS_KEY_ID``, Encrypt and Decrypt on it,
  granted by the stack) and the account of its stream ARNs; logs
  to their own log group; an alarm per service when fewer tasks run than asked. Rolling deploys
  (at least 50% in service) with the circuit breaker. ECS stops a task with SIGTERM, on which
  ``llog serve`` drains (no new requests, in-flight ones answered, its batcher flushed) within the
  60 s stop timeout.
* **Endpoint** (``llog:serveEndpoint``):

  * ``balancer`` (the default): an internal Application Load Balancer in the private subnets, HTTP
    on port 80 to the tasks' port 8080, health check ``GET /health`` (answered without Oxia or S3),
    invalid header fields dropped, a 25 s idle timeout (above the 20 s of the longest long-poll,
    below the 30 s after which llog serve closes an idle connection), connections drained for
    30 s when a task leaves. ``url``: ``http://<its DNS name>/``. It bills
    every byte through it (docs/COST.md), and its metrics feed the dashboard and the 5xx alarm.
  * ``dns``: no load balancer, one service per availability zone (the ``tasks`` spread over them, at
    least one each). Zone *i*'s tasks register A records ``llog-serve-<i>.<namespace>`` in Oxia's
    Cloud Map namespace while their container health check (``GET /health``) passes, as Oxia's
    servers do. A client uses its own zone's name (``zone_urls``; ``url`` is zone 0's), so its
    bytes never cross zones: no per-byte charge at all (docs/COST.md). With no load balancer to
    count requests, the dashboard's API row and the 5xx alarm read the tasks' own EMF metrics.

* **Metrics**: every task reports to CloudWatch every ``EMF_INTERVAL_S`` (EMF lines in its log,
  server/emf.py): the records and bytes it produced and consumed, under the produce and consume
  functions' names (the dashboard's records and bytes rows add them up), and its requests, 4xx,
  5xx and a sample of their latencies (``service=serve``).

* **Access**: only members of ``client_security_group`` reach the endpoint; the network is the
  authentication (no request signing, no API keys), as for Oxia itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import cast

from aws_cdk import CfnResource, Duration, IgnoreMode, RemovalPolicy
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_servicediscovery as servicediscovery
from cdk_nag import NagPackSuppression, NagSuppressions
from constructs import Construct

from functions.common import names
from functions.common.browser import ALLOWED_HOSTS_ENV
from infra.functions import suppress_root_prefix_wildcard
from infra.lint import ignore_checks
from infra.observability import ALARM_PERIOD, PERIOD, ApiMetrics
from infra.settings import ServeEndpoint

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = "infra/serve.Dockerfile"
CONTAINER_PORT = 8080
LISTENER_PORT = 80
TASK_CPU = 1024
TASK_MEMORY_MIB = 2048
# ECS's SIGTERM to SIGKILL: a long-poll (at most 20 s, LLOG_CONSUME_MAX_WAIT_MS) answered, the batcher flushed,
# Oxia closed. Behind the load balancer the task is deregistered (DEREGISTRATION_DELAY) before the SIGTERM.
STOP_TIMEOUT = Duration.seconds(60)
DEREGISTRATION_DELAY = Duration.seconds(30)
# Above the longest long-poll (20 s) and below llog serve's idle keep-alive (IDLE_CONNECTION_TIMEOUT_S, 30 s): the
# load balancer, not the task, closes an idle connection, so no request races a task's close into a 502.
BALANCER_IDLE_TIMEOUT = Duration.seconds(25)
DNS_NAME = "llog-serve"
EMF_INTERVAL_S = 60  # CloudWatch's standard resolution
# Docker-ignore patterns over the repository root: the build context is what the Dockerfile copies.
IMAGE_CONTEXT = [
    "*",
    f"!{DOCKERFILE}",
    "!infra/layer-requirements.txt",
    "!infra/serve-requirements.txt",
    "!llog_layer/llog/**",
    "!client/llog_client/**",
    "!functions/**",
    "!server/**",
    "**/__pycache__",
    "**/*.pyc",
    "**/*.pyo",
]


def image_asset(scope: Construct, construct_id: str) -> ecr_assets.DockerImageAsset:
    """The ``llog serve`` image, for ARM64, built by ``cdk deploy`` from the paths of ``IMAGE_CONTEXT``."""
    return ecr_assets.DockerImageAsset(
        scope,
        construct_id,
        directory=str(ROOT),
        file=DOCKERFILE,
        platform=ecr_assets.Platform.LINUX_ARM64,
        ignore_mode=IgnoreMode.DOCKER,
        exclude=IMAGE_CONTEXT,
    )


class ServeFleet(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: ecs.ICluster,
        vpc: ec2.IVpc,
        subnets: ec2.SubnetSelection,
        oxia_client_security_group: ec2.ISecurityGroup,
        endpoint: ServeEndpoint,
        namespace: servicediscovery.IPrivateDnsNamespace,
        environment: Mapping[str, str],
        bucket: s3.IBucket,
        root_prefix: str,
        tasks: int,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self._cluster = cluster
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=removal_policy)
        self.image = image_asset(self, "Image")
        self.task_definition = ecs.FargateTaskDefinition(
            self,
            "Task",
            cpu=TASK_CPU,
            memory_limit_mib=TASK_MEMORY_MIB,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.ARM64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
        )
        self.container = self.task_definition.add_container(
            "serve",
            image=ecs.ContainerImage.from_docker_image_asset(self.image),
            essential=True,
            environment={**environment, "LLOG_SERVE_EMF_INTERVAL_S": str(EMF_INTERVAL_S)},
            logging=ecs.LogDrivers.aws_logs(stream_prefix="serve", log_group=self.log_group),
            port_mappings=[ecs.PortMapping(container_port=CONTAINER_PORT, protocol=ecs.Protocol.TCP)],
            stop_timeout=STOP_TIMEOUT,
            ulimits=[ecs.Ulimit(name=ecs.UlimitName.NOFILE, soft_limit=65535, hard_limit=65535)],
            # What Cloud Map registers a task by (endpoint "dns"); the image has Python, not curl.
            health_check=ecs.HealthCheck(
                command=["CMD", "python", "-c", "import urllib.request as r; "
                         f"r.urlopen('http://127.0.0.1:{CONTAINER_PORT}/health', timeout=2)"],  # fmt: skip
                interval=Duration.seconds(10),
                timeout=Duration.seconds(5),
                retries=3,
                start_period=Duration.seconds(30),
            ),
        )
        self._grant_objects(bucket, root_prefix)

        self.client_security_group = ec2.SecurityGroup(
            self,
            "ClientSecurityGroup",
            vpc=vpc,
            description=f"llog serve clients: admitted by the fleet endpoint ({endpoint})",
            allow_all_outbound=True,
        )
        self.task_security_group = ec2.SecurityGroup(
            self, "TaskSecurityGroup", vpc=vpc, description="llog serve tasks", allow_all_outbound=True
        )
        self.balancer: elbv2.ApplicationLoadBalancer | None = None
        # (availability zone, URL) of each zone's tasks, with endpoint "dns".
        self.zone_urls: list[tuple[str, str]] = []
        if endpoint == "dns":
            zone_subnets = vpc.select_subnets(
                subnet_type=subnets.subnet_type, subnet_group_name=subnets.subnet_group_name, subnets=subnets.subnets
            ).subnets
            per_zone = max(1, math.ceil(tasks / len(zone_subnets)))
            self.desired_counts = [per_zone] * len(zone_subnets)
            self.services = [
                self._add_service(f"Service{i}", per_zone, ec2.SubnetSelection(subnets=[subnet]),
                                  [self.task_security_group, oxia_client_security_group],
                                  ecs.CloudMapOptions(name=f"{DNS_NAME}-{i}", cloud_map_namespace=namespace,
                                                      dns_record_type=servicediscovery.DnsRecordType.A,
                                                      dns_ttl=Duration.seconds(10)))
                for i, subnet in enumerate(zone_subnets)
            ]  # fmt: skip
            self.zone_urls = [
                (subnet.availability_zone, f"http://{DNS_NAME}-{i}.{namespace.namespace_name}:{CONTAINER_PORT}/")
                for i, subnet in enumerate(zone_subnets)
            ]
            self.task_security_group.add_ingress_rule(
                self.client_security_group, ec2.Port.tcp(CONTAINER_PORT), "llog serve clients"
            )
            self.url = self.zone_urls[0][1]
            self.allowed_hosts = [f"{DNS_NAME}-{i}.{namespace.namespace_name}" for i in range(len(zone_subnets))]
        else:
            self.desired_counts = [tasks]
            self.services = [
                self._add_service("Service", tasks, subnets, [self.task_security_group, oxia_client_security_group])
            ]
            self.balancer = self._add_balancer(vpc, subnets)
            self.url = f"http://{self.balancer.load_balancer_dns_name}/"
            self.allowed_hosts = [self.balancer.load_balancer_dns_name]
        # The names clients reach the tasks by: llog serve refuses any other Host (421, against DNS rebinding).
        self.container.add_environment(ALLOWED_HOSTS_ENV, ",".join(self.allowed_hosts))
        self._suppress_nag_findings()

    def _add_service(
        self,
        construct_id: str,
        desired: int,
        subnets: ec2.SubnetSelection,
        security_groups: list[ec2.ISecurityGroup],
        cloud_map: ecs.CloudMapOptions | None = None,
    ) -> ecs.FargateService:
        return ecs.FargateService(
            self,
            construct_id,
            cluster=self._cluster,
            task_definition=self.task_definition,
            desired_count=desired,
            min_healthy_percent=50,
            max_healthy_percent=200,
            circuit_breaker=ecs.DeploymentCircuitBreaker(rollback=True),
            security_groups=security_groups,
            vpc_subnets=subnets,
            assign_public_ip=False,
            propagate_tags=ecs.PropagatedTagSource.SERVICE,
            enable_ecs_managed_tags=True,
            cloud_map_options=cloud_map,
        )

    def _add_balancer(self, vpc: ec2.IVpc, subnets: ec2.SubnetSelection) -> elbv2.ApplicationLoadBalancer:
        self.balancer_security_group = ec2.SecurityGroup(
            self, "BalancerSecurityGroup", vpc=vpc, description="llog serve load balancer", allow_all_outbound=False
        )
        self.balancer_security_group.add_ingress_rule(
            self.client_security_group, ec2.Port.tcp(LISTENER_PORT), "llog serve clients"
        )
        self.balancer_security_group.add_egress_rule(
            self.task_security_group, ec2.Port.tcp(CONTAINER_PORT), "to the llog serve tasks"
        )
        self.task_security_group.add_ingress_rule(
            self.balancer_security_group, ec2.Port.tcp(CONTAINER_PORT), "from the load balancer"
        )
        balancer = elbv2.ApplicationLoadBalancer(
            self,
            "LoadBalancer",
            vpc=vpc,
            vpc_subnets=subnets,
            internet_facing=False,
            security_group=self.balancer_security_group,
            drop_invalid_header_fields=True,
            idle_timeout=BALANCER_IDLE_TIMEOUT,
        )
        listener = balancer.add_listener(
            "Http", port=LISTENER_PORT, protocol=elbv2.ApplicationProtocol.HTTP, open=False
        )
        listener.add_targets(
            "Tasks",
            port=CONTAINER_PORT,
            protocol=elbv2.ApplicationProtocol.HTTP,
            targets=self.services,
            deregistration_delay=DEREGISTRATION_DELAY,
            health_check=elbv2.HealthCheck(
                path="/health",
                healthy_http_codes="200",
                interval=Duration.seconds(10),
                timeout=Duration.seconds(5),
                healthy_threshold_count=2,
                unhealthy_threshold_count=3,
            ),
        )
        for service in self.services:
            ignore_checks(cast(CfnResource, service.node.default_child), {
                "W3005": "CDK's service depends on the listener (ECS refuses a target group without a load "
                "balancer) and on the target group that LoadBalancers already references; that duplicate "
                "edge changes no deployment order.",
            })  # fmt: skip
        NagSuppressions.add_resource_suppressions(
            balancer,
            [
                NagPackSuppression(
                    id="AwsSolutions-ELB2",
                    reason="llog serve logs every request (request id, method, path, status, duration) to the "
                    "tasks' log group; the internal load balancer adds no caller identity beyond the VPC address.",
                )
            ],
        )
        return balancer

    def metrics(self) -> ApiMetrics:
        """Behind the load balancer, its counts of requests and the tasks' answers (latency in ms, as API
        Gateway's); reached by DNS, what the tasks report themselves (their EMF metrics)."""
        balancer = self.balancer
        if balancer is None:
            return self._reported_metrics()

        def metric(name: str, statistic: str = "Sum") -> cw.Metric:
            return balancer.metrics.custom(name, statistic=statistic, period=PERIOD)

        # The tasks' 5xx answers and the load balancer's own (502/503/504: no healthy task, a closed connection),
        # over the 5 minutes the API alarm counts.
        def five_minutes(name: str) -> cw.Metric:
            return balancer.metrics.custom(name, statistic="Sum", period=ALARM_PERIOD)

        server_errors = cw.MathExpression(
            expression="FILL(tasks, 0) + FILL(balancer, 0)",
            using_metrics={"tasks": five_minutes("HTTPCode_Target_5XX_Count"),
                           "balancer": five_minutes("HTTPCode_ELB_5XX_Count")},
            label="5xx (tasks and load balancer)",
            period=ALARM_PERIOD,
        )  # fmt: skip
        response_ms = cw.MathExpression(
            expression="seconds * 1000",
            using_metrics={"seconds": metric("TargetResponseTime", "p99")},
            label="TargetResponseTime p99 (ms)",
            period=PERIOD,
        )
        return ApiMetrics(
            count=metric("RequestCount"),
            client_errors=metric("HTTPCode_Target_4XX_Count"),
            server_errors=server_errors,
            latency=response_ms,
            integration_latency=None,
        )

    @staticmethod
    def _reported_metrics() -> ApiMetrics:
        def metric(name: str, statistic: str = "Sum") -> cw.Metric:
            return cw.Metric(namespace=names.METRIC_NAMESPACE, metric_name=name,
                             dimensions_map={"service": names.SERVE}, statistic=statistic, period=PERIOD)  # fmt: skip

        return ApiMetrics(
            count=metric("Requests"),
            client_errors=metric("ClientErrors"),
            server_errors=metric("ServerErrors"),
            latency=metric("Latency", "p99"),
            integration_latency=None,
        )

    def _grant_objects(self, bucket: s3.IBucket, root_prefix: str) -> None:
        objects = f"{bucket.bucket_arn}/{root_prefix}/*"
        role = self.task_definition.task_role
        role.add_to_principal_policy(
            iam.PolicyStatement(sid="GetPutObjects", actions=["s3:GetObject", "s3:PutObject"], resources=[objects])
        )
        # GET /metrics' S3 footprint (server/billing.py) lists the root prefix every few minutes.
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ListRootPrefix",
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{root_prefix}/*"]}},
            )
        )
        key = bucket.encryption_key
        if key is not None:
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    sid="BucketKey", actions=["kms:GenerateDataKey", "kms:Decrypt"], resources=[key.key_arn]
                )
            )
        suppress_root_prefix_wildcard(role, root_prefix)

    def _suppress_nag_findings(self) -> None:
        execution_role = self.task_definition.execution_role
        assert execution_role is not None  # the image is in ECR: ECS pulls it with this role
        NagSuppressions.add_resource_suppressions(
            execution_role,
            [
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="ecr:GetAuthorizationToken, which ECS calls to pull the image, has no resource-level "
                    "permissions (the image pull actions themselves name the asset repository).",
                    applies_to=["Resource::*"],
                )
            ],
            apply_to_children=True,
        )
        NagSuppressions.add_resource_suppressions(
            self.task_definition,
            [
                NagPackSuppression(
                    id="AwsSolutions-ECS2",
                    reason="The environment holds the same non-secret LLOG_* settings as the functions' "
                    "(Oxia address, bucket name, root prefix, append protocol); no credential is passed.",
                )
            ],
        )
