"""Analytics: a scheduled Glue (PySpark) job that exports llog's compacted records to a table.

* The job (``glue_jobs/export_job.py``) reads S3 only: the manifests compaction publishes after
  each commit (``{root}/{topic}/partitions/{p}/manifests/``) and the compacted objects they name.
  It never talks to Oxia, so it runs without a VPC or a Glue connection (and reaches PyPI for
  ``--additional-python-modules`` directly).
* ``bucket`` holds the table at ``tables/<table>/`` (``output_path``) with the job's own state
  below it (``_llog_export/``, ``_llog_staging/``), Glue's ``--TempDir`` at ``glue-temp/`` and, in
  Iceberg mode, the warehouse at ``warehouse/``. SSE-S3, TLS only, access logs to the
  access-log bucket of :class:`~infra.storage.Storage`, removal as there.
* Code: the script asset, and a zip of the ``llog`` and ``llog_export`` packages for
  ``--extra-py-files``, built by :class:`GluePackagesBundler` without Docker. Its asset hash is
  computed from the sources, so template tests that skip bundling still get a stable hash.
* Role: least privilege, no managed policy. GetObject on ``<data bucket>/<root>/*`` and
  ListBucket with ``s3:prefix`` = ``<root>/*`` (read-only on llog), read/write/delete on the
  analytics bucket, GetObject on the two assets, the Data Catalog of its own database only,
  CloudWatch Logs under ``/aws-glue/*``, ``cloudwatch:PutMetricData`` in namespaces ``Glue`` and ``llog``.
* Security configuration: SSE-S3 for what Glue writes to S3; CloudWatch Logs (SSE-KMS) and job
  bookmarks (CSE-KMS) encrypted with ``key``, as cdk-nag's GL1 and GL3 require.
* One run at a time (and the job's own run lease, ``--lease_minutes``: the timeout and 10 minutes),
  no retries, a SCHEDULED trigger (the job is idempotent and resumes, so the next scheduled run is
  the retry). ``failure_rule`` matches the job's failed runs; LlogStack hands
  it to :meth:`Observability.add_glue_job <infra.observability.Observability.add_glue_job>`.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from pathlib import Path

import jsii
from aws_cdk import ArnFormat, AssetHashType, Aws, BundlingOptions, Duration, ILocalBundling, RemovalPolicy, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from cdk_nag import NagPackSuppression, NagSuppressions, RegexAppliesTo
from constructs import Construct

from functions.common import names
from infra.layer import LLOG_SOURCE_DIR, ROOT, bundling_options
from infra.settings import ALL_TOPICS, ExportTableFormat
from infra.storage import private_bucket

GLUE_JOBS_DIR = ROOT / "glue_jobs"
SCRIPT = GLUE_JOBS_DIR / "export_job.py"
# The packages of --extra-py-files, each at the root of the zip.
PACKAGES: tuple[Path, ...] = (LLOG_SOURCE_DIR / "llog", GLUE_JOBS_DIR / "llog_export")
GLUE_VERSION = "6.0"  # Spark 4.1.1, Python 3.13
# llog's third-party imports, C extensions (not loadable from a zip): crc32c (llog.format.codec) and msgspec
# (llog.format.kv, the stored documents).
ADDITIONAL_PYTHON_MODULES = "crc32c==2.8,msgspec==0.23.0"
TABLE = "records"
TABLES_PREFIX = "tables/"
TEMP_PREFIX = "glue-temp/"
WAREHOUSE_PREFIX = "warehouse/"
FAILED_STATES = ("FAILED", "TIMEOUT", "ERROR")
# A run's lease on the table outlasts the longest run Glue allows by this much (llog_export.lease: a run
# must not outlive its lease; a run Glue stopped at its timeout blocks the next one until the lease expires).
LEASE_BEYOND_TIMEOUT_MINUTES = 10
_IGNORED = ("__pycache__", "*.pyc", "*.pyo")
# How cdk-nag prints an ARN's partition, region and account: tokens, or literals when the stack has an env.
_ARN_PREFIX = r"arn:(<AWS::Partition>|aws[a-z-]*):"
_REGION_ACCOUNT = r"(<AWS::Region>|[a-z0-9-]+):(<AWS::AccountId>|[0-9]{12})"


@jsii.implements(ILocalBundling)
class GluePackagesBundler:
    """Copies the packages into the bundling output directory; CDK zips that directory.

    Copying needs nothing but Python, so it never defers to Docker; the Docker command exists
    because ``BundlingOptions`` requires one, and does the same copy.
    """

    def __init__(self, packages: Sequence[Path] = PACKAGES) -> None:
        self.packages = tuple(packages)

    # jsii calls this with the BundlingOptions as a second positional argument.
    def try_bundle(self, output_dir: str, options: BundlingOptions) -> bool:
        self.bundle(Path(output_dir))
        return True

    def bundle(self, output_dir: Path) -> Path:
        """Write ``output_dir/<package>/…`` for every package (no byte code) and return ``output_dir``."""
        for package in self.packages:
            ignore = shutil.ignore_patterns(*_IGNORED)
            shutil.copytree(package, output_dir / package.name, ignore=ignore, dirs_exist_ok=True)
        return output_dir

    def docker_command(self) -> list[str]:
        """The same copy inside a container that mounts the repository root at ``/asset-input``."""
        sources = " ".join(f"/asset-input/{p.relative_to(ROOT).as_posix()}" for p in self.packages)
        return [
            "bash",
            "-c",
            f"cp -r {sources} /asset-output/ && find /asset-output -name __pycache__ -prune -exec rm -rf {{}} +",
        ]

    def fingerprint(self) -> str:
        """Hash of every file that ends up in the zip."""
        digest = hashlib.sha256()
        for package in self.packages:
            for path in sorted(package.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
                    digest.update(f"{package.name}/{path.relative_to(package).as_posix()}".encode() + b"\0")
                    digest.update(path.read_bytes())
        return digest.hexdigest()


def iceberg_conf(warehouse: str) -> str:
    """The ``--conf`` value for an Iceberg catalog ``glue_catalog`` on the Glue Data Catalog.

    Glue takes one ``--conf`` job argument; further Spark settings are chained inside its value
    as ``a=b --conf c=d`` (the documented way).
    """
    settings = [
        "spark.sql.extensions=org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.glue_catalog=org.apache.iceberg.spark.SparkCatalog",
        f"spark.sql.catalog.glue_catalog.warehouse={warehouse}",
        "spark.sql.catalog.glue_catalog.catalog-impl=org.apache.iceberg.aws.glue.GlueCatalog",
        "spark.sql.catalog.glue_catalog.io-impl=org.apache.iceberg.aws.s3.S3FileIO",
    ]
    return " --conf ".join(settings)


class Analytics(Construct):
    """``bucket``, ``job`` (CfnJob) named ``job_name``, ``database_name``, ``output_path`` and ``failure_rule``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        production: bool,
        data_bucket: s3.IBucket,
        access_log_bucket: s3.IBucket,
        root_prefix: str,
        topics: Sequence[str] = (ALL_TOPICS,),
        schedule: str,
        table_format: ExportTableFormat,
        worker_type: str,
        workers: int,
        timeout_minutes: int,
        database_name: str,
        table_name: str = TABLE,
    ) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.RETAIN if production else RemovalPolicy.DESTROY
        stack = Stack.of(self)
        self.job_name = f"llog-{stage}-export"
        self.database_name = database_name
        self.table_name = table_name

        # Versioning off: the export rewrites its state file and deletes its staging objects;
        # versions would keep all of that. Temporary files of Glue expire.
        self.bucket = private_bucket(
            self,
            "Bucket",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="abort-incomplete-multipart-uploads",
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                ),
                s3.LifecycleRule(id="expire-glue-temp", prefix=TEMP_PREFIX, expiration=Duration.days(7)),
            ],
            server_access_logs_bucket=access_log_bucket,
            server_access_logs_prefix="analytics-bucket/",
            removal_policy=removal,
        )
        self.output_path = f"s3://{self.bucket.bucket_name}/{TABLES_PREFIX}{table_name}/"
        self.temp_dir = f"s3://{self.bucket.bucket_name}/{TEMP_PREFIX}"
        self.warehouse = f"s3://{self.bucket.bucket_name}/{WAREHOUSE_PREFIX}"

        self.script = s3_assets.Asset(self, "Script", path=str(SCRIPT))
        self.bundler = GluePackagesBundler()
        self.packages = s3_assets.Asset(
            self,
            "Packages",
            path=str(ROOT),
            asset_hash_type=AssetHashType.CUSTOM,
            asset_hash=self.bundler.fingerprint(),
            bundling=bundling_options(self.bundler),
        )

        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=Aws.ACCOUNT_ID,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=database_name, description=f"llog {stage}: tables exported from the log by {self.job_name}"
            ),
        )
        self.database.apply_removal_policy(removal)

        # cdk-nag GL1/GL3: the job's CloudWatch logs (SSE-KMS) and bookmarks (CSE-KMS) need a customer key.
        self.key = kms.Key(
            self,
            "Key",
            description=f"llog {stage}: Glue export job logs and bookmarks",
            enable_key_rotation=True,
            removal_policy=removal,
        )
        glue_logs_arn = stack.format_arn(
            service="logs", resource="log-group", resource_name="/aws-glue/*", arn_format=ArnFormat.COLON_RESOURCE_NAME
        )
        # CloudWatch Logs encrypts the Glue log groups with the key (Glue's documented key policy),
        # for log groups under /aws-glue/ only.
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchLogsForGlue",
                principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
                actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
                resources=["*"],
                conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn": glue_logs_arn}},
            )
        )
        self.security_configuration = glue.CfnSecurityConfiguration(
            self,
            "SecurityConfiguration",
            name=self.job_name,
            encryption_configuration=glue.CfnSecurityConfiguration.EncryptionConfigurationProperty(
                s3_encryptions=[glue.CfnSecurityConfiguration.S3EncryptionProperty(s3_encryption_mode="SSE-S3")],
                cloud_watch_encryption=glue.CfnSecurityConfiguration.CloudWatchEncryptionProperty(
                    cloud_watch_encryption_mode="SSE-KMS", kms_key_arn=self.key.key_arn
                ),
                job_bookmarks_encryption=glue.CfnSecurityConfiguration.JobBookmarksEncryptionProperty(
                    job_bookmarks_encryption_mode="CSE-KMS", kms_key_arn=self.key.key_arn
                ),
            ),
        )

        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("glue.amazonaws.com"),
            description=f"llog {stage}: Glue export job {self.job_name}",
        )
        self._grant(
            data_bucket=data_bucket,
            root_prefix=root_prefix,
            glue_logs_arn=glue_logs_arn,
        )

        arguments: dict[str, str] = {
            "--llog_bucket": data_bucket.bucket_name,
            "--llog_root_prefix": root_prefix,
            "--topics": ",".join(topics),
            "--output_path": self.output_path,
            "--database": database_name,
            "--table": table_name,
            "--table_format": table_format,
            "--extra-py-files": self.packages.s3_object_url,
            "--additional-python-modules": ADDITIONAL_PYTHON_MODULES,
            "--enable-glue-datacatalog": "true",
            "--enable-metrics": "true",
            "--enable-continuous-cloudwatch-log": "true",
            "--enable-observability-metrics": "true",
            # The job keeps its own exactly-once cursor (_llog_export/ under the output path).
            "--job-bookmark-option": "job-bookmark-disable",
            "--TempDir": self.temp_dir,
            "--lease_minutes": str(timeout_minutes + LEASE_BEYOND_TIMEOUT_MINUTES),
        }
        if table_format == "iceberg":
            arguments["--datalake-formats"] = "iceberg"
            arguments["--conf"] = iceberg_conf(self.warehouse)
        self.job = glue.CfnJob(
            self,
            "Job",
            name=self.job_name,
            description=f"llog {stage}: export compacted records to {database_name}.{table_name} ({table_format})",
            role=self.role.role_arn,
            command=glue.CfnJob.JobCommandProperty(
                name="glueetl", python_version="3", script_location=self.script.s3_object_url
            ),
            glue_version=GLUE_VERSION,
            worker_type=worker_type,
            number_of_workers=workers,
            timeout=timeout_minutes,
            # Idempotent and resumable: the next scheduled run is the retry.
            max_retries=0,
            # The export's state file (_llog_export/) must have exactly one writer: one run at a time.
            execution_property=glue.CfnJob.ExecutionPropertyProperty(max_concurrent_runs=1),
            security_configuration=self.security_configuration.ref,
            default_arguments=arguments,
        )
        self.job.node.add_dependency(self.database)
        # The role's policy must exist before a run can start.
        policy = self.role.node.try_find_child("DefaultPolicy")
        if policy is not None:
            self.job.node.add_dependency(policy)

        self.trigger = glue.CfnTrigger(
            self,
            "Schedule",
            name=f"{self.job_name}-schedule",
            description=f"llog {stage}: run {self.job_name} on {schedule}",
            type="SCHEDULED",
            schedule=schedule,
            start_on_creation=True,
            actions=[glue.CfnTrigger.ActionProperty(job_name=self.job.ref)],  # the job's own arguments
        )

        self.failure_rule = events.Rule(
            self,
            "FailureRule",
            description=f"llog {stage}: a run of {self.job_name} failed, timed out or ended in error",
            event_pattern=events.EventPattern(
                source=["aws.glue"],
                detail_type=["Glue Job State Change"],
                detail={"jobName": [self.job_name], "state": list(FAILED_STATES)},
            ),
        )

    def _grant(self, *, data_bucket: s3.IBucket, root_prefix: str, glue_logs_arn: str) -> None:
        stack = Stack.of(self)
        llog_objects = f"{data_bucket.bucket_arn}/{root_prefix}/*"
        statements = [
            # llog: read-only, and only below the root prefix.
            iam.PolicyStatement(sid="ReadLlogObjects", actions=["s3:GetObject"], resources=[llog_objects]),
            iam.PolicyStatement(
                sid="ListLlogRootPrefix",
                actions=["s3:ListBucket"],
                resources=[data_bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{root_prefix}/*"]}},
            ),
            # The analytics bucket is the job's own: table, state, staging, temp, warehouse.
            iam.PolicyStatement(
                sid="AnalyticsObjects",
                actions=[
                    "s3:GetObject",
                    "s3:PutObject",
                    "s3:DeleteObject",
                    "s3:AbortMultipartUpload",
                    "s3:ListMultipartUploadParts",
                ],
                resources=[self.bucket.arn_for_objects("*")],
            ),  # fmt: skip
            iam.PolicyStatement(
                sid="AnalyticsBucket",
                actions=["s3:ListBucket", "s3:ListBucketMultipartUploads", "s3:GetBucketLocation"],
                resources=[self.bucket.bucket_arn],
            ),
            # The script and the packages zip: exactly those two objects of the CDK asset bucket.
            iam.PolicyStatement(
                sid="ReadCode",
                actions=["s3:GetObject"],
                resources=[
                    self.script.bucket.arn_for_objects(self.script.s3_object_key),
                    self.packages.bucket.arn_for_objects(self.packages.s3_object_key),
                ],
            ),
            # The Data Catalog: this database and its tables (and partitions) only.
            iam.PolicyStatement(
                sid="DataCatalog",
                actions=[
                    "glue:GetDatabase",
                    "glue:GetTable",
                    "glue:GetTables",
                    "glue:CreateTable",
                    "glue:UpdateTable",
                    "glue:DeleteTable",
                    "glue:GetPartition",
                    "glue:GetPartitions",
                    "glue:BatchGetPartition",
                    "glue:CreatePartition",
                    "glue:BatchCreatePartition",
                    "glue:UpdatePartition",
                    "glue:BatchUpdatePartition",
                    "glue:DeletePartition",
                    "glue:BatchDeletePartition",
                ],
                resources=[
                    stack.format_arn(service="glue", resource="catalog"),
                    stack.format_arn(service="glue", resource="database", resource_name=self.database_name),
                    stack.format_arn(service="glue", resource="table", resource_name=f"{self.database_name}/*"),
                ],
            ),
            # Spark's catalog client looks up the "default" database when the session starts.
            iam.PolicyStatement(
                sid="DefaultDatabaseLookup",
                actions=["glue:GetDatabase"],
                resources=[
                    stack.format_arn(service="glue", resource="catalog"),
                    stack.format_arn(service="glue", resource="database", resource_name="default"),
                ],
            ),
            # Glue's log groups (driver/executor output and continuous logs), encrypted with the key.
            iam.PolicyStatement(
                sid="GlueLogs",
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:AssociateKmsKey"],
                resources=[glue_logs_arn],
            ),
            # Job and observability metrics, and the export's own (lost and expired offsets, namespace
            # llog); PutMetricData has no resource, the namespaces are the limit.
            iam.PolicyStatement(
                sid="GlueMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": ["Glue", names.METRIC_NAMESPACE]}},
            ),
            # Job bookmarks (CSE-KMS) with the security configuration's key.
            iam.PolicyStatement(
                sid="SecurityConfigurationKey",
                actions=["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"],
                resources=[self.key.key_arn],
            ),
        ]
        if data_bucket.encryption_key is not None:
            # llog:bucketEncryption=kms: reading llog objects decrypts with the bucket's key.
            statements.append(
                iam.PolicyStatement(
                    sid="LlogBucketKey", actions=["kms:Decrypt"], resources=[data_bucket.encryption_key.key_arn]
                )
            )
        for statement in statements:
            self.role.add_to_policy(statement)

        NagSuppressions.add_resource_suppressions(
            self.role,
            [
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason=f"Object reads on the data bucket are limited to the llog root prefix ({root_prefix}/*); "
                    "llog's object keys carry new UUIDs, so no narrower list exists.",
                    applies_to=[RegexAppliesTo(regex=r"/^Resource::<[A-Za-z0-9]+\.Arn>\/[A-Za-z0-9._-]+\/\*$/g")],
                ),
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="The analytics bucket belongs to this job alone: the table, its export state and "
                    "staging, Glue's temporary directory and the Iceberg warehouse are all written by it.",
                    applies_to=[RegexAppliesTo(regex=r"/^Resource::<[A-Za-z0-9]+\.Arn>\/\*$/g")],
                ),
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason=f"The job creates and updates the tables (and partitions) of its own database "
                    f"{self.database_name} only; table names are chosen at run time.",
                    applies_to=[
                        RegexAppliesTo(
                            regex=rf"/^Resource::{_ARN_PREFIX}glue:{_REGION_ACCOUNT}:table\/{self.database_name}\/\*$/g"
                        )
                    ],
                ),
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="Glue names its log groups per job run and security configuration, always under "
                    "/aws-glue/; the role may write there and nowhere else in CloudWatch Logs.",
                    applies_to=[
                        RegexAppliesTo(
                            regex=rf"/^Resource::{_ARN_PREFIX}logs:{_REGION_ACCOUNT}:log-group:\/aws-glue\/\*$/g"
                        )
                    ],
                ),
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="cloudwatch:PutMetricData supports no resource-level permissions; the statement is "
                    "limited to the Glue and llog metric namespaces by the cloudwatch:namespace condition.",
                    applies_to=["Resource::*"],
                ),
            ],
            apply_to_children=True,
        )
