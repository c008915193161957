"""The Glue export: job, arguments, schedule, security configuration, role, bucket, database, alarm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match, Template

from functions.common import names
from infra.analytics import ADDITIONAL_PYTHON_MODULES, PACKAGES, GluePackagesBundler, iceberg_conf
from infra.observability import EXPORT_EXPIRED_OFFSETS, EXPORT_LOST_OFFSETS, EXPORT_SERVICE
from infra.stack import LlogStack
from llog_export import metrics
from tests.infra.helpers import make_stack, resources

NAG = Match.string_like_regexp("AwsSolutions-.*")


def job(template: Template) -> dict[str, Any]:
    (found,) = resources(template, "AWS::Glue::Job").values()
    return found


def arguments(template: Template) -> dict[str, Any]:
    args: dict[str, Any] = job(template)["Properties"]["DefaultArguments"]
    return args


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def role_statements(stack: LlogStack, template: Template) -> list[dict[str, Any]]:
    role_id = stack.get_logical_id(stack.analytics.role.node.default_child)  # type: ignore[arg-type]
    out: list[dict[str, Any]] = []
    for policy in resources(template, "AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            out += policy["Properties"]["PolicyDocument"]["Statement"]
    return out


def grants(stack: LlogStack, template: Template, prefix: str) -> dict[str, list[tuple[str, Any]]]:
    """Action (with ``prefix``) -> [(resource JSON, condition)] of the Glue role."""
    out: dict[str, list[tuple[str, Any]]] = {}
    for statement in role_statements(stack, template):
        assert statement["Effect"] == "Allow"
        for action in as_list(statement["Action"]):
            if action.startswith(prefix):
                for resource in as_list(statement["Resource"]):
                    out.setdefault(action, []).append(
                        (json.dumps(resource, sort_keys=True), statement.get("Condition"))
                    )
    return out


def bucket_ref(stack: LlogStack) -> dict[str, str]:
    return {"Ref": stack.get_logical_id(stack.analytics.bucket.node.default_child)}  # type: ignore[arg-type]


def under_analytics_bucket(stack: LlogStack, suffix: str) -> dict[str, Any]:
    return {"Fn::Join": ["", ["s3://", bucket_ref(stack), suffix]]}


@pytest.fixture(scope="module")
def custom_stack() -> LlogStack:
    return make_stack(
        {
            "llog:stage": "my-stage",
            "llog:exportTopics": "orders,payments",
            "llog:exportSchedule": "cron(0 */6 * * ? *)",
            "llog:glueWorkerType": "G.2X",
            "llog:glueWorkers": "5",
            "llog:exportTimeoutMinutes": 120,
            "llog:rootPrefix": "logs",
        }
    )


def test_job_is_a_glue_6_spark_job_with_one_run_at_a_time(dev_stack: LlogStack, dev_template: Template) -> None:
    props = job(dev_template)["Properties"]
    assert props["Name"] == "llog-dev-export" == dev_stack.analytics.job_name
    assert props["GlueVersion"] == "6.0"
    assert props["Command"]["Name"] == "glueetl"
    assert props["Command"]["PythonVersion"] == "3"
    assert props["Command"]["ScriptLocation"]["Fn::Sub"].endswith(".py")
    assert (props["WorkerType"], props["NumberOfWorkers"], props["Timeout"]) == ("G.1X", 2, 60)
    assert props["MaxRetries"] == 0
    assert props["ExecutionProperty"] == {"MaxConcurrentRuns": 1}
    role = dev_stack.get_logical_id(dev_stack.analytics.role.node.default_child)  # type: ignore[arg-type]
    assert props["Role"] == {"Fn::GetAtt": [role, "Arn"]}
    assert "Connections" not in props  # S3 only: no VPC, no Glue connection


def test_job_has_the_security_configuration(dev_stack: LlogStack, dev_template: Template) -> None:
    (config_id, config) = next(iter(resources(dev_template, "AWS::Glue::SecurityConfiguration").items()))
    assert job(dev_template)["Properties"]["SecurityConfiguration"] == {"Ref": config_id}
    key = dev_stack.get_logical_id(dev_stack.analytics.key.node.default_child)  # type: ignore[arg-type]
    encryption = config["Properties"]["EncryptionConfiguration"]
    assert encryption["S3Encryptions"] == [{"S3EncryptionMode": "SSE-S3"}]
    assert encryption["CloudWatchEncryption"] == {
        "CloudWatchEncryptionMode": "SSE-KMS",
        "KmsKeyArn": {"Fn::GetAtt": [key, "Arn"]},
    }
    assert encryption["JobBookmarksEncryption"] == {
        "JobBookmarksEncryptionMode": "CSE-KMS",
        "KmsKeyArn": {"Fn::GetAtt": [key, "Arn"]},
    }
    dev_template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    (key_props,) = [k["Properties"] for k_id, k in resources(dev_template, "AWS::KMS::Key").items() if k_id == key]
    logs_statement = [s for s in key_props["KeyPolicy"]["Statement"] if s.get("Sid") == "CloudWatchLogsForGlue"]
    assert len(logs_statement) == 1
    assert "/aws-glue/*" in json.dumps(logs_statement[0]["Condition"])


def test_default_arguments(dev_stack: LlogStack, dev_template: Template) -> None:
    args = arguments(dev_template)
    data_bucket = dev_stack.get_logical_id(dev_stack.storage.bucket.node.default_child)  # type: ignore[arg-type]
    extra_py_files = args.pop("--extra-py-files")
    assert args == {
        "--llog_bucket": {"Ref": data_bucket},
        "--llog_root_prefix": "llog",
        "--topics": "*",
        "--output_path": under_analytics_bucket(dev_stack, "/tables/records/"),
        "--database": "llog_dev",
        "--table": "records",
        "--table_format": "parquet",
        "--additional-python-modules": "crc32c==2.8,msgspec==0.23.0",
        "--enable-glue-datacatalog": "true",
        "--enable-metrics": "true",
        "--enable-continuous-cloudwatch-log": "true",
        "--enable-observability-metrics": "true",
        "--job-bookmark-option": "job-bookmark-disable",
        "--TempDir": under_analytics_bucket(dev_stack, "/glue-temp/"),
        "--lease_minutes": "70",  # the run lease outlasts the 60-minute timeout
    }
    # The packages zip is a CDK file asset (bootstrap bucket, content-addressed key).
    url = extra_py_files["Fn::Sub"]
    assert url.startswith("s3://cdk-hnb659fds-assets-${AWS::AccountId}-${AWS::Region}/")
    assert url.endswith(".zip")
    assert dev_stack.analytics.packages.asset_hash in url
    assert ADDITIONAL_PYTHON_MODULES == "crc32c==2.8,msgspec==0.23.0"


def test_output_path_is_on_the_analytics_bucket(dev_stack: LlogStack) -> None:
    resolved = dev_stack.resolve(dev_stack.analytics.output_path)
    assert resolved == under_analytics_bucket(dev_stack, "/tables/records/")


def test_database(dev_stack: LlogStack, dev_template: Template, prod_template: Template) -> None:
    (database,) = resources(dev_template, "AWS::Glue::Database").values()
    assert database["Properties"]["DatabaseInput"]["Name"] == "llog_dev" == dev_stack.analytics.database_name
    assert database["Properties"]["CatalogId"] == {"Ref": "AWS::AccountId"}
    assert database["DeletionPolicy"] == "Delete"
    (prod_database,) = resources(prod_template, "AWS::Glue::Database").values()
    assert prod_database["Properties"]["DatabaseInput"]["Name"] == "llog_prod"
    assert prod_database["DeletionPolicy"] == "Retain"


def test_trigger_runs_the_job_on_the_schedule(dev_stack: LlogStack, dev_template: Template) -> None:
    (trigger,) = resources(dev_template, "AWS::Glue::Trigger").values()
    props = trigger["Properties"]
    assert props["Type"] == "SCHEDULED"
    assert props["Schedule"] == "cron(15 * * * ? *)"
    assert props["StartOnCreation"] is True
    job_id = dev_stack.get_logical_id(dev_stack.analytics.job)
    assert props["Actions"] == [{"JobName": {"Ref": job_id}}]  # no Arguments: the job's own


def test_settings_reach_the_job(custom_stack: LlogStack) -> None:
    template = Template.from_stack(custom_stack)
    props = job(template)["Properties"]
    assert props["Name"] == "llog-my-stage-export"
    assert (props["WorkerType"], props["NumberOfWorkers"], props["Timeout"]) == ("G.2X", 5, 120)
    args = props["DefaultArguments"]
    assert args["--topics"] == "orders,payments"
    assert args["--lease_minutes"] == "130"
    assert args["--database"] == "llog_my_stage"
    assert args["--llog_root_prefix"] == "logs"
    (trigger,) = resources(template, "AWS::Glue::Trigger").values()
    assert trigger["Properties"]["Schedule"] == "cron(0 */6 * * ? *)"
    (database,) = resources(template, "AWS::Glue::Database").values()
    assert database["Properties"]["DatabaseInput"]["Name"] == "llog_my_stage"
    s3 = grants(custom_stack, template, "s3:")
    data_bucket = custom_stack.get_logical_id(custom_stack.storage.bucket.node.default_child)  # type: ignore[arg-type]
    objects = {"Fn::Join": ["", [{"Fn::GetAtt": [data_bucket, "Arn"]}, "/logs/*"]]}
    assert (json.dumps(objects, sort_keys=True), None) in s3["s3:GetObject"]


def test_iceberg_mode_adds_the_iceberg_catalog(iceberg_stack: LlogStack) -> None:
    args = arguments(Template.from_stack(iceberg_stack))
    assert args["--table_format"] == "iceberg"
    assert args["--datalake-formats"] == "iceberg"
    conf = json.dumps(args["--conf"])
    for setting in (
        "spark.sql.catalog.glue_catalog=org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.glue_catalog.catalog-impl=org.apache.iceberg.aws.glue.GlueCatalog",
        "spark.sql.catalog.glue_catalog.io-impl=org.apache.iceberg.aws.s3.S3FileIO",
        "spark.sql.extensions=org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.glue_catalog.warehouse=s3://",
        "/warehouse/",
    ):
        assert setting in conf, setting
    assert args["--conf"] == iceberg_stack.resolve(iceberg_conf(iceberg_stack.analytics.warehouse))


def test_iceberg_conf_chains_one_conf_argument() -> None:
    conf = iceberg_conf("s3://b/warehouse/")
    assert not conf.startswith("--conf")
    parts = conf.split(" --conf ")
    assert len(parts) == 5
    assert all(part.count("=") == 1 for part in parts)
    assert "spark.sql.catalog.glue_catalog.warehouse=s3://b/warehouse/" in parts


def test_parquet_mode_has_no_iceberg_arguments(dev_template: Template) -> None:
    args = arguments(dev_template)
    assert "--datalake-formats" not in args
    assert "--conf" not in args


def test_role_is_assumed_by_glue_without_managed_policies(dev_stack: LlogStack, dev_template: Template) -> None:
    role_id = dev_stack.get_logical_id(dev_stack.analytics.role.node.default_child)  # type: ignore[arg-type]
    role = resources(dev_template, "AWS::IAM::Role")[role_id]["Properties"]
    (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "glue.amazonaws.com"}
    assert "ManagedPolicyArns" not in role
    assert "Policies" not in role


def test_role_reads_llog_only_below_the_root_prefix(dev_stack: LlogStack, dev_template: Template) -> None:
    data_bucket = dev_stack.get_logical_id(dev_stack.storage.bucket.node.default_child)  # type: ignore[arg-type]
    llog_arn = {"Fn::GetAtt": [data_bucket, "Arn"]}
    objects = json.dumps({"Fn::Join": ["", [llog_arn, "/llog/*"]]}, sort_keys=True)
    s3 = grants(dev_stack, dev_template, "s3:")
    on_llog = {action: [r for r in found if data_bucket in r[0]] for action, found in s3.items()}
    on_llog = {action: found for action, found in on_llog.items() if found}
    assert on_llog == {
        "s3:GetObject": [(objects, None)],
        "s3:ListBucket": [(json.dumps(llog_arn, sort_keys=True), {"StringLike": {"s3:prefix": ["llog/*"]}})],
    }


def test_role_has_no_s3_wildcards(dev_stack: LlogStack, dev_template: Template) -> None:
    for statement in role_statements(dev_stack, dev_template):
        actions = as_list(statement["Action"])
        assert "*" not in actions
        assert not [a for a in actions if a.endswith("*")], statement
        if any(a.startswith("s3:") for a in actions):
            assert "*" not in as_list(statement["Resource"]), statement


def test_role_writes_the_analytics_bucket_and_reads_the_code(dev_stack: LlogStack, dev_template: Template) -> None:
    s3 = grants(dev_stack, dev_template, "s3:")
    analytics = dev_stack.get_logical_id(dev_stack.analytics.bucket.node.default_child)  # type: ignore[arg-type]
    objects = json.dumps({"Fn::Join": ["", [{"Fn::GetAtt": [analytics, "Arn"]}, "/*"]]}, sort_keys=True)
    for action in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"):
        assert (objects, None) in s3[action], action
    bucket = json.dumps({"Fn::GetAtt": [analytics, "Arn"]}, sort_keys=True)
    assert (bucket, None) in s3["s3:ListBucket"]
    code = [r for r, _ in s3["s3:GetObject"] if "cdk-hnb659fds-assets" in r]
    assert len(code) == 2
    for asset in (dev_stack.analytics.script, dev_stack.analytics.packages):
        assert len([r for r in code if asset.asset_hash in r]) == 1
    assert all("/*" not in r for r in code)  # exactly the two objects, not the asset bucket


def test_role_catalog_logs_metrics_and_key(dev_stack: LlogStack, dev_template: Template) -> None:
    glue = grants(dev_stack, dev_template, "glue:")
    for action in ("glue:CreateTable", "glue:UpdateTable", "glue:GetTable", "glue:BatchCreatePartition"):
        resources_ = {r for r, _ in glue[action]}
        text = json.dumps(sorted(resources_))
        assert ":catalog" in text
        assert ":database/llog_dev" in text
        assert ":table/llog_dev/*" in text
        assert len(resources_) == 3, action
    # Writes never reach another database.
    for action, found in glue.items():
        for resource, _ in found:
            assert (
                ":database/" not in resource
                or "llog_dev" in resource
                or (action == "glue:GetDatabase" and ":database/default" in resource)
            ), (action, resource)
            assert ":table/" not in resource or ":table/llog_dev/*" in resource
    logs = grants(dev_stack, dev_template, "logs:")
    assert set(logs) == {"logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:AssociateKmsKey"}
    for found in logs.values():
        assert [r for r, _ in found] == [r for r, _ in found if ":log-group:/aws-glue/*" in r]
    metrics = grants(dev_stack, dev_template, "cloudwatch:")
    assert metrics == {
        "cloudwatch:PutMetricData": [('"*"', {"StringEquals": {"cloudwatch:namespace": ["Glue", "llog"]}})]
    }
    key = dev_stack.get_logical_id(dev_stack.analytics.key.node.default_child)  # type: ignore[arg-type]
    kms = grants(dev_stack, dev_template, "kms:")
    assert set(kms) == {"kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"}
    for found in kms.values():
        assert found == [(json.dumps({"Fn::GetAtt": [key, "Arn"]}), None)]


def test_kms_data_bucket_adds_decrypt_on_its_key() -> None:
    stack = make_stack({"llog:stage": "kmsglue", "llog:bucketEncryption": "kms"})
    template = Template.from_stack(stack)
    storage_key = stack.get_logical_id(stack.storage.key.node.default_child)  # type: ignore[union-attr, arg-type]
    kms = grants(stack, template, "kms:")
    assert (json.dumps({"Fn::GetAtt": [storage_key, "Arn"]}), None) in kms["kms:Decrypt"]
    assert all(storage_key not in r for r, _ in kms["kms:Encrypt"])


def analytics_bucket(stack: LlogStack, template: Template) -> dict[str, Any]:
    bucket_id = stack.get_logical_id(stack.analytics.bucket.node.default_child)  # type: ignore[arg-type]
    found: dict[str, Any] = resources(template, "AWS::S3::Bucket")[bucket_id]
    return found


def test_analytics_bucket_is_encrypted_private_and_logged(dev_stack: LlogStack, dev_template: Template) -> None:
    bucket = analytics_bucket(dev_stack, dev_template)
    props = bucket["Properties"]
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
    ]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    log_bucket = dev_stack.get_logical_id(dev_stack.storage.access_log_bucket.node.default_child)  # type: ignore[arg-type]
    assert props["LoggingConfiguration"] == {"DestinationBucketName": {"Ref": log_bucket},
                                             "LogFilePrefix": "analytics-bucket/"}  # fmt: skip
    assert "VersioningConfiguration" not in props
    rules = {r["Id"]: r for r in props["LifecycleConfiguration"]["Rules"]}
    assert rules["abort-incomplete-multipart-uploads"]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}
    assert rules["expire-glue-temp"]["Prefix"] == "glue-temp/"
    assert "Prefix" not in rules["abort-incomplete-multipart-uploads"]
    assert bucket["DeletionPolicy"] == "Delete"


def test_analytics_bucket_policy_denies_requests_without_tls(dev_stack: LlogStack, dev_template: Template) -> None:
    bucket_id = dev_stack.get_logical_id(dev_stack.analytics.bucket.node.default_child)  # type: ignore[arg-type]
    (policy,) = [p for p in resources(dev_template, "AWS::S3::BucketPolicy").values()
                 if p["Properties"]["Bucket"] == {"Ref": bucket_id}]  # fmt: skip
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s["Action"] == "s3:*" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in statements
    )
    assert any(s["Effect"] == "Deny" and s.get("Condition") == {"NumericLessThan": {"s3:TlsVersion": 1.2}}
               for s in statements)  # fmt: skip


def test_production_keeps_the_bucket_and_the_key(prod_stack: LlogStack, prod_template: Template) -> None:
    bucket = analytics_bucket(prod_stack, prod_template)
    assert bucket["DeletionPolicy"] == "Retain"
    key = prod_stack.get_logical_id(prod_stack.analytics.key.node.default_child)  # type: ignore[arg-type]
    assert resources(prod_template, "AWS::KMS::Key")[key]["DeletionPolicy"] == "Retain"


def test_failed_runs_raise_an_alarm(dev_stack: LlogStack, dev_template: Template) -> None:
    rule_id = dev_stack.get_logical_id(dev_stack.analytics.failure_rule.node.default_child)  # type: ignore[arg-type]
    rule = resources(dev_template, "AWS::Events::Rule")[rule_id]["Properties"]
    assert rule["EventPattern"] == {
        "source": ["aws.glue"],
        "detail-type": ["Glue Job State Change"],
        "detail": {"jobName": ["llog-dev-export"], "state": ["FAILED", "TIMEOUT", "ERROR"]},
    }
    alarms = {k: a["Properties"] for k, a in resources(dev_template, "AWS::CloudWatch::Alarm").items()
              if a["Properties"].get("MetricName") == "TriggeredRules"}  # fmt: skip
    assert len(alarms) == 1
    ((alarm_id, alarm),) = alarms.items()
    assert alarm["Namespace"] == "AWS/Events"
    assert alarm["Dimensions"] == [{"Name": "RuleName", "Value": {"Ref": rule_id}}]
    assert alarm["Threshold"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["EvaluationPeriods"] == 1
    assert alarm["TreatMissingData"] == "notBreaching"
    # One of Observability's alarms, so alarm actions added there notify it too.
    assert alarm_id in [dev_stack.get_logical_id(a.node.default_child) for a in dev_stack.observability.alarms]  # type: ignore[arg-type]
    (dashboard,) = resources(dev_template, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert "Glue llog-dev-export: failed runs" in body
    assert "glue.driver.aggregate.recordsRead" in body


def test_offsets_the_export_skipped_raise_an_alarm_until_a_run_exports_past_them(
    dev_stack: LlogStack, dev_template: Template
) -> None:
    assert (metrics.NAMESPACE, metrics.SERVICE) == (names.METRIC_NAMESPACE, EXPORT_SERVICE)
    alarms = {a["Properties"]["MetricName"]: (k, a["Properties"])
              for k, a in resources(dev_template, "AWS::CloudWatch::Alarm").items()
              if a["Properties"].get("Namespace") == "llog" and "Export" in a["Properties"]["MetricName"]}  # fmt: skip
    assert (
        set(alarms) == {metrics.LOST_OFFSETS, metrics.EXPIRED_OFFSETS} == {EXPORT_LOST_OFFSETS, EXPORT_EXPIRED_OFFSETS}
    )
    observed = [dev_stack.get_logical_id(a.node.default_child) for a in dev_stack.observability.alarms]  # type: ignore[arg-type]
    for alarm_id, alarm in alarms.values():
        assert alarm["Dimensions"] == [{"Name": "service", "Value": "export"}]
        assert (alarm["Statistic"], alarm["Threshold"], alarm["ComparisonOperator"]) == (
            "Maximum",
            1,
            "GreaterThanOrEqualToThreshold",
        )
        assert alarm["TreatMissingData"] == "ignore"  # one datapoint per run: the state holds between runs
        assert alarm_id in observed


def test_outputs(dev_stack: LlogStack, dev_template: Template) -> None:
    outputs = dev_template.find_outputs("*")
    assert outputs["AnalyticsBucketName"]["Value"] == bucket_ref(dev_stack)
    assert outputs["ExportJobName"]["Value"] == {"Ref": dev_stack.get_logical_id(dev_stack.analytics.job)}
    assert outputs["GlueDatabaseName"]["Value"] == {"Ref": dev_stack.get_logical_id(dev_stack.analytics.database)}


def test_packages_bundler_copies_both_packages_without_byte_code(tmp_path: Path) -> None:
    out = GluePackagesBundler().bundle(tmp_path / "out")
    assert sorted(p.name for p in out.iterdir()) == ["llog", "llog_export"]
    assert (out / "llog" / "format" / "codec.py").is_file()
    assert (out / "llog_export" / "__init__.py").is_file()
    assert not list(out.rglob("__pycache__"))
    assert not list(out.rglob("*.pyc"))


def test_packages_hash_follows_the_sources(tmp_path: Path) -> None:
    first_pkg, second_pkg = tmp_path / "llog", tmp_path / "llog_export"
    for package in (first_pkg, second_pkg):
        package.mkdir()
        (package / "__init__.py").write_text("X = 1\n")
    bundler = GluePackagesBundler((first_pkg, second_pkg))
    first = bundler.fingerprint()
    (second_pkg / "__pycache__").mkdir()
    (second_pkg / "__pycache__" / "m.cpython-313.pyc").write_bytes(b"\0")
    assert bundler.fingerprint() == first
    (second_pkg / "__init__.py").write_text("X = 2\n")
    assert bundler.fingerprint() != first
    assert GluePackagesBundler().fingerprint() == GluePackagesBundler(PACKAGES).fingerprint()


def test_docker_fallback_copies_the_same_packages() -> None:
    command = GluePackagesBundler().docker_command()
    assert command[:2] == ["bash", "-c"]
    assert "/asset-input/llog_layer/llog /asset-input/glue_jobs/llog_export /asset-output/" in command[2]
    assert "__pycache__" in command[2]


def test_no_nag_findings_with_a_concrete_environment() -> None:
    # `cdk synth` gives the stack an account and region: ARNs then carry literals, not tokens.
    stack = make_stack({"llog:stage": "envd"}, env=cdk.Environment(account="123456789012", region="eu-west-1"))
    annotations = Annotations.from_stack(stack)
    assert annotations.find_error("*", NAG) == []
    assert annotations.find_warning("*", NAG) == []
    stack = make_stack({"llog:stage": "regiond"}, env=cdk.Environment(region="us-east-1"))
    assert Annotations.from_stack(stack).find_error("*", NAG) == []
