"""The llog Lambda functions: one reusable :class:`LlogFunction` construct, and :class:`Functions`.

Every function (docs/DEPLOY.md, "Functions"):

* python3.13 on arm64, in the VPC's private subnets with Oxia's client security group;
* the llog layer (``llog``, the Oxia client, Powertools, the X-Ray SDK) attached;
* code asset = exactly ``functions/__init__.py``, ``functions/common/**`` and
  ``functions/<name>/**`` of this repository (``Code.from_asset`` of the repository root with a
  Docker-style exclude list: no Docker, no tests, no ``.venv``), handler
  ``functions.<name>.app.handler``;
* its own log group (stage retention), X-Ray tracing active;
* its own role: logs on its log group, the VPC network-interface actions, X-Ray, and the
  grants :class:`Functions` makes (S3 scoped to ``arn:…:bucket/<rootPrefix>/*``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

from aws_cdk import CfnResource, Duration, IgnoreMode, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from cdk_nag import NagPackSuppression, NagSuppressions, RegexAppliesTo
from constructs import Construct

from functions.common import names
from infra.layer import ROOT, RUNTIME
from infra.lint import REDUNDANT_ROLE_DEPENDENCY, ignore_checks

# API Gateway's REST integration timeout is 29 s: an API function must answer before it.
API_TIMEOUT = Duration.seconds(28)
WORKER_TIMEOUT = Duration.minutes(5)
# The worker stops compacting after this and releases its claim (its own 10 s margin applies too).
COMPACTION_BUDGET_MS = 240_000
GC_TIMEOUT = Duration.minutes(15)
RECOVERY_TIMEOUT = Duration.minutes(15)  # verify and backup: Lambda's longest
PLANNER_TIMEOUT = Duration.minutes(1)


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    description: str
    memory_mib: int
    timeout: Duration
    environment: Mapping[str, str] = field(default_factory=dict)


SPECS: Mapping[str, FunctionSpec] = {
    s.name: s
    for s in (
        FunctionSpec(names.PRODUCE, "POST /produce: append records", 1024, API_TIMEOUT),
        # Long-polls stay below the function timeout (and so below API Gateway's 29 s).
        FunctionSpec(
            names.CONSUME, "POST /consume: fetch records", 1024, API_TIMEOUT, {"LLOG_CONSUME_MAX_WAIT_MS": "20000"}
        ),
        FunctionSpec(
            names.ADMIN, "health, topics, partition status, fence/unfence, compact, unknown paths", 512, API_TIMEOUT
        ),
        FunctionSpec(names.KINESIS, "POST /kinesis: the Kinesis API (the function checks SigV4)", 1024, API_TIMEOUT),
        FunctionSpec(
            names.COMPACTION_PLANNER, "scheduled: enqueue partitions that need compaction", 512, PLANNER_TIMEOUT
        ),
        FunctionSpec(
            names.COMPACTION_WORKER,
            "SQS: compact one partition",
            2048,
            WORKER_TIMEOUT,
            {"LLOG_COMPACTION_BUDGET_MS": str(COMPACTION_BUDGET_MS)},
        ),
        FunctionSpec(names.GC, "scheduled: delete S3 objects nothing references", 1024, GC_TIMEOUT),
        FunctionSpec(names.VERIFY, "scheduled: check partitions against the protocol's invariants", 1024,
                     RECOVERY_TIMEOUT),  # fmt: skip
        FunctionSpec(names.BACKUP, "scheduled: back the Oxia state up to S3", 1024, RECOVERY_TIMEOUT),
    )
}


def asset_excludes(name: str) -> list[str]:
    """Docker-ignore patterns over the repository root that keep only what ``name`` imports."""
    return [
        "*",
        "!functions/__init__.py",
        "!functions/common/**",
        f"!functions/{name}/**",
        "**/__pycache__",
        "**/*.pyc",
        "**/*.pyo",
    ]


def suppress_root_prefix_wildcard(role: iam.IRole, root_prefix: str) -> None:
    """cdk-nag reads "<bucket arn>/<prefix>/*" as a wildcard; it is the llog prefix, nothing wider."""
    NagSuppressions.add_resource_suppressions(
        role,
        [
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason=f"Object actions are limited to the llog root prefix ({root_prefix}/*) of the data bucket; "
                "object keys carry new UUIDs, so no narrower list exists.",
                applies_to=[RegexAppliesTo(regex=r"/^Resource::<[A-Za-z0-9]+\.Arn>\/[A-Za-z0-9._-]+\/\*$/g")],
            ),
        ],
        apply_to_children=True,
    )


def function_code(name: str) -> lambda_.AssetCode:
    """The code asset of function ``name``, staged by copying (no bundling, no Docker)."""
    if name not in SPECS:
        raise ValueError(f"unknown llog function {name!r}; expected one of {', '.join(names.FUNCTIONS)}")
    return lambda_.Code.from_asset(str(ROOT), ignore_mode=IgnoreMode.DOCKER, exclude=asset_excludes(name))


class LlogFunction(Construct):
    """One llog function (``function``) with its log group and role; reusable for any ``functions/<name>``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        spec: FunctionSpec,
        stage: str,
        layer: lambda_.ILayerVersion,
        vpc: ec2.IVpc,
        subnets: ec2.SubnetSelection,
        security_group: ec2.ISecurityGroup,
        environment: Mapping[str, str],
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.spec = spec
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=removal_policy)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"llog {stage}: {spec.name} function",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="OwnLogGroup",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="VpcNetworkInterfaces",
                actions=[
                    "ec2:CreateNetworkInterface",
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeSubnets",
                    "ec2:DeleteNetworkInterface",
                    "ec2:AssignPrivateIpAddresses",
                    "ec2:UnassignPrivateIpAddresses",
                ],
                resources=["*"],
            )
        )
        env = {
            **environment,
            "POWERTOOLS_SERVICE_NAME": spec.name,
            "POWERTOOLS_METRICS_NAMESPACE": names.METRIC_NAMESPACE,
            "LLOG_STAGE": stage,
            **spec.environment,
        }
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=lambda_.Architecture.ARM_64,
            handler=f"functions.{spec.name}.app.handler",
            code=function_code(spec.name),
            description=f"llog {stage}: {spec.description}",
            memory_size=spec.memory_mib,
            timeout=spec.timeout,
            layers=[layer],
            vpc=vpc,
            vpc_subnets=subnets,
            security_groups=[security_group],
            allow_public_subnet=False,
            environment=env,
            role=self.role,
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE,
        )
        ignore_checks(cast(CfnResource, self.function.node.default_child), REDUNDANT_ROLE_DEPENDENCY)
        NagSuppressions.add_resource_suppressions(
            self.function,
            [
                NagPackSuppression(
                    id="AwsSolutions-L1",
                    reason="python3.13 on purpose: the llog layer is built from cp313 wheels (grpcio, xxhash, "
                    "crc32c) and the suite runs on 3.13; move runtime and layer together.",
                )
            ],
        )
        NagSuppressions.add_resource_suppressions(
            self.role,
            [
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="The EC2 network-interface actions Lambda needs to run a function in a VPC and "
                    "X-Ray's PutTraceSegments/PutTelemetryRecords support no resource-level permissions "
                    "(the same actions as AWSLambdaVPCAccessExecutionRole and AWSXRayDaemonWriteAccess).",
                    applies_to=["Resource::*"],
                ),
            ],
            apply_to_children=True,
        )


class Functions(Construct):
    """``by_name``: the functions of ``names.FUNCTIONS`` (without the API functions when ``api_functions`` is
    False: the serve fleet answers the API itself); S3 grants scoped to ``<bucket>/<root_prefix>/*``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        layer: lambda_.ILayerVersion,
        vpc: ec2.IVpc,
        subnets: ec2.SubnetSelection,
        security_group: ec2.ISecurityGroup,
        environment: Mapping[str, str],
        extra_environment: Mapping[str, Mapping[str, str]] | None = None,
        bucket: s3.IBucket,
        root_prefix: str,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
        api_functions: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        self.bucket = bucket
        self.root_prefix = root_prefix
        self.constructs: dict[str, LlogFunction] = {}
        for name in names.FUNCTIONS:
            if name in names.API_FUNCTIONS and not api_functions:
                continue
            self.constructs[name] = LlogFunction(
                self,
                "".join(part.capitalize() for part in name.split("_")),
                spec=SPECS[name],
                stage=stage,
                layer=layer,
                vpc=vpc,
                subnets=subnets,
                security_group=security_group,
                environment={**environment, **(extra_environment or {}).get(name, {})},
                log_retention=log_retention,
                removal_policy=removal_policy,
            )
        self.by_name: dict[str, lambda_.Function] = {n: c.function for n, c in self.constructs.items()}

        objects = self.objects_arn
        self._allow(names.PRODUCE, "PutObjects", ["s3:PutObject"], [objects])
        self._allow(names.CONSUME, "GetObjects", ["s3:GetObject"], [objects])
        # The Kinesis API both puts (PutRecord, PutRecords) and gets (GetRecords).
        self._allow(names.KINESIS, "GetPutObjects", ["s3:GetObject", "s3:PutObject"], [objects])
        self._allow(names.COMPACTION_WORKER, "GetPutObjects", ["s3:GetObject", "s3:PutObject"], [objects])
        # POST .../compact (IAM-only) runs a compaction pass in the admin function.
        self._allow(names.ADMIN, "GetPutObjects", ["s3:GetObject", "s3:PutObject"], [objects])
        self._allow(names.GC, "GetDeleteObjects", ["s3:GetObject", "s3:DeleteObject"], [objects])
        # verify reads only; backup writes under {root}/__catalog/backups/ and deletes the backups it prunes.
        self._allow(names.VERIFY, "GetObjects", ["s3:GetObject"], [objects])
        self._allow(names.BACKUP, "GetPutDeleteObjects", ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                    [objects])  # fmt: skip
        for lister in (names.GC, names.VERIFY, names.BACKUP):
            self._allow(
                lister,
                "ListRootPrefix",
                ["s3:ListBucket"],
                [bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{root_prefix}/*"]}},
            )
        # The planner reads only Oxia: no S3.
        key = bucket.encryption_key
        if key is not None:
            # llog:bucketEncryption=kms: writers make data keys, readers decrypt (exact actions, no wildcard).
            writes = ["kms:GenerateDataKey", "kms:Decrypt"]
            for name, actions in ((names.PRODUCE, writes), (names.CONSUME, ["kms:Decrypt"]), (names.KINESIS, writes),
                                  (names.COMPACTION_WORKER, writes), (names.ADMIN, writes),
                                  (names.GC, ["kms:Decrypt"]), (names.VERIFY, ["kms:Decrypt"]),
                                  (names.BACKUP, writes)):  # fmt: skip
                self._allow(name, "BucketKey", actions, [key.key_arn])

    @property
    def objects_arn(self) -> str:
        return f"{self.bucket.bucket_arn}/{self.root_prefix}/*"

    @property
    def functions(self) -> list[lambda_.Function]:
        return list(self.by_name.values())

    def __getitem__(self, name: str) -> lambda_.Function:
        return self.by_name[name]

    def _allow(
        self,
        name: str,
        sid: str,
        actions: list[str],
        resources: list[str],
        conditions: Mapping[str, object] | None = None,
    ) -> None:
        if name not in self.constructs:
            return  # an API function the serve front door does without
        role = self.constructs[name].role
        role.add_to_policy(
            iam.PolicyStatement(
                sid=sid, actions=actions, resources=resources, conditions=dict(conditions) if conditions else None
            )
        )
        if resources == [self.objects_arn]:
            suppress_root_prefix_wildcard(role, self.root_prefix)
