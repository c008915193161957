"""The data bucket: encryption, public access, TLS only, lifecycle, versioning, logging, removal."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template

from infra.storage import Storage
from tests.infra.helpers import make_app, resources


def data_bucket(template: Template) -> tuple[str, dict[str, Any]]:
    buckets = {k: v for k, v in resources(template, "AWS::S3::Bucket").items() if k.startswith("StorageData")}
    assert len(buckets) == 1
    return next(iter(buckets.items()))


def access_log_bucket(template: Template) -> tuple[str, dict[str, Any]]:
    buckets = {k: v for k, v in resources(template, "AWS::S3::Bucket").items() if k.startswith("StorageAccessLogs")}
    assert len(buckets) == 1
    return next(iter(buckets.items()))


def test_two_storage_buckets_and_the_analytics_bucket(dev_template: Template) -> None:
    buckets = resources(dev_template, "AWS::S3::Bucket")
    assert len(buckets) == 3
    assert len([k for k in buckets if k.startswith("Storage")]) == 2
    assert len([k for k in buckets if k.startswith("Analytics")]) == 1


def test_data_bucket_is_encrypted_with_s3_managed_keys(dev_template: Template) -> None:
    _, bucket = data_bucket(dev_template)
    rules = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rules == [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]


def test_kms_encryption_option_uses_a_rotated_key_and_a_bucket_key() -> None:
    stack = cdk.Stack(make_app(), "KmsStorage")
    Storage(stack, "Storage", production=True, encryption="kms", access_log_retention_days=30)
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    _, bucket = data_bucket(template)
    (rule,) = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert rule["BucketKeyEnabled"] is True


def test_all_public_access_is_blocked(dev_template: Template) -> None:
    for _, bucket in (data_bucket(dev_template), access_log_bucket(dev_template)):
        assert bucket["Properties"]["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }
        assert bucket["Properties"]["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}


def test_bucket_policies_deny_requests_without_tls(dev_template: Template) -> None:
    policies = resources(dev_template, "AWS::S3::BucketPolicy")
    assert len(policies) == 3  # data, access logs, analytics
    for policy in policies.values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        without_resource = [{k: v for k, v in s.items() if k != "Resource"} for s in statements]
        assert {
            "Action": "s3:*",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
        } in without_resource
        assert any(
            s["Effect"] == "Deny" and s.get("Condition") == {"NumericLessThan": {"s3:TlsVersion": 1.2}}
            for s in statements
        )


def test_lifecycle_only_aborts_incomplete_uploads(dev_template: Template, prod_template: Template) -> None:
    for template in (dev_template, prod_template):
        _, bucket = data_bucket(template)
        # Garbage collection owns deletion: no expiration, no transition, no noncurrent rules.
        assert bucket["Properties"]["LifecycleConfiguration"] == {
            "Rules": [
                {
                    "Id": "abort-incomplete-multipart-uploads",
                    "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
                    "Status": "Enabled",
                }
            ]
        }


def test_versioning_is_off(dev_template: Template, prod_template: Template) -> None:
    for template in (dev_template, prod_template):
        _, bucket = data_bucket(template)
        assert "VersioningConfiguration" not in bucket["Properties"]


def test_access_logging_and_request_metrics(dev_template: Template) -> None:
    log_id, log_bucket = access_log_bucket(dev_template)
    _, bucket = data_bucket(dev_template)
    assert bucket["Properties"]["LoggingConfiguration"] == {
        "DestinationBucketName": {"Ref": log_id},
        "LogFilePrefix": "data-bucket/",
    }
    assert bucket["Properties"]["MetricsConfigurations"] == [{"Id": "EntireBucket"}]
    (rule,) = log_bucket["Properties"]["LifecycleConfiguration"]["Rules"]
    assert rule["ExpirationInDays"] == 30


def test_production_buckets_are_retained(prod_template: Template) -> None:
    for _, bucket in (data_bucket(prod_template), access_log_bucket(prod_template)):
        assert bucket["DeletionPolicy"] == "Retain"
        assert bucket["UpdateReplacePolicy"] == "Retain"
    prod_template.resource_count_is("Custom::S3AutoDeleteObjects", 0)
    for fs in resources(prod_template, "AWS::EFS::FileSystem").values():
        assert fs["DeletionPolicy"] == "Retain"


def test_development_buckets_are_destroyed_with_their_objects(dev_template: Template) -> None:
    for _, bucket in (data_bucket(dev_template), access_log_bucket(dev_template)):
        assert bucket["DeletionPolicy"] == "Delete"
    dev_template.resource_count_is("Custom::S3AutoDeleteObjects", 3)  # with the analytics bucket
    for fs in resources(dev_template, "AWS::EFS::FileSystem").values():
        assert fs["DeletionPolicy"] == "Delete"
