"""The S3 bucket for WAL and compacted objects, and the bucket for its server access logs.

Decisions (docs/DEPLOY.md, "Storage"):

* Encryption: SSE-S3 by default (no per-request KMS charge on every produce and consume);
  ``llog:bucketEncryption=kms`` switches to a customer managed key with rotation and an S3
  Bucket Key. Grants made through the bucket (``bucket.grant_*``) cover the key too.
* Versioning off: objects are immutable and garbage collection deletes them; versioning would
  keep every deleted byte as a noncurrent version.
* Lifecycle: only "abort incomplete multipart uploads after a day". Nothing expires or
  transitions WAL or compacted objects: garbage collection owns deletion, and an expiration
  rule would delete objects the index still references.
* Removal: RETAIN in production stages; DESTROY with auto-delete of objects in the others.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.lint import REDUNDANT_ROLE_DEPENDENCY, ignore_checks_of_provider
from infra.settings import BucketEncryption


def private_bucket(
    scope: Construct,
    construct_id: str,
    *,
    lifecycle_rules: list[s3.LifecycleRule],
    removal_policy: RemovalPolicy,
    encryption_key: kms.IKey | None = None,
    server_access_logs_bucket: s3.IBucket | None = None,
    server_access_logs_prefix: str | None = None,
    metrics: list[s3.BucketMetrics] | None = None,
) -> s3.Bucket:
    """A bucket with what every llog bucket shares: encrypted (SSE-S3, or SSE-KMS with
    ``encryption_key``), no public access, ACLs off, TLS 1.2+ only, unversioned, and
    emptied on deletion in stages that do not retain data."""
    bucket = s3.Bucket(
        scope,
        construct_id,
        encryption=s3.BucketEncryption.KMS if encryption_key else s3.BucketEncryption.S3_MANAGED,
        encryption_key=encryption_key,
        bucket_key_enabled=True if encryption_key else None,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        enforce_ssl=True,
        minimum_tls_version=1.2,
        versioned=False,
        lifecycle_rules=lifecycle_rules,
        metrics=metrics,
        server_access_logs_bucket=server_access_logs_bucket,
        server_access_logs_prefix=server_access_logs_prefix,
        removal_policy=removal_policy,
        auto_delete_objects=removal_policy is RemovalPolicy.DESTROY,
    )
    if removal_policy is RemovalPolicy.DESTROY:  # auto-delete runs on a function of CDK's, one per stack
        ignore_checks_of_provider(scope, "Custom::S3AutoDeleteObjectsCustomResourceProvider", REDUNDANT_ROLE_DEPENDENCY)
    return bucket


# Request metrics filter over the whole bucket (AllRequests, 4xx/5xx, latency in CloudWatch).
REQUEST_METRICS_ID = "EntireBucket"


class Storage(Construct):
    """``bucket`` holds ``{root}/wal-shared/…`` and ``{root}/{topic}/partitions/{p}/data/compacted/…``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        production: bool,
        encryption: BucketEncryption,
        access_log_retention_days: int,
    ) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.RETAIN if production else RemovalPolicy.DESTROY

        # Server access logs must go to an SSE-S3 bucket. The log bucket itself has no access log
        # (cdk-nag's S1 accepts a bucket that is a log destination).
        self.access_log_bucket = private_bucket(
            self,
            "AccessLogs",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-access-logs",
                    expiration=Duration.days(access_log_retention_days),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
            removal_policy=removal,
        )
        self.key: kms.Key | None = None
        if encryption == "kms":
            self.key = kms.Key(
                self,
                "Key",
                description="llog data bucket (WAL and compacted objects)",
                enable_key_rotation=True,
                removal_policy=removal,
            )

        self.bucket = private_bucket(
            self,
            "Data",
            encryption_key=self.key,
            lifecycle_rules=[
                # The only rule: parts of an abandoned multipart upload are invisible to llog and
                # to garbage collection. No expiration or transition of WAL/compacted objects.
                s3.LifecycleRule(
                    id="abort-incomplete-multipart-uploads",
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
            metrics=[s3.BucketMetrics(id=REQUEST_METRICS_ID)],
            server_access_logs_bucket=self.access_log_bucket,
            server_access_logs_prefix="data-bucket/",
            removal_policy=removal,
        )
