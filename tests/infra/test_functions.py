"""The functions: runtime, VPC placement, layer, tracing, logs, environment, code asset and IAM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from functions.common import names
from infra.functions import API_TIMEOUT, COMPACTION_BUDGET_MS, SPECS, WORKER_TIMEOUT
from infra.stack import LlogStack
from tests.infra.helpers import ROOT, resources


def llog_functions(template: Template) -> dict[str, dict[str, Any]]:
    """Function name (from the handler) -> properties, for the llog functions."""
    out = {}
    for fn in resources(template, "AWS::Lambda::Function").values():
        handler = fn["Properties"].get("Handler", "")
        if handler.startswith("functions."):
            out[handler.split(".")[1]] = fn["Properties"]
    return out


def test_every_function_is_python313_arm64(dev_template: Template) -> None:
    fns = llog_functions(dev_template)
    assert sorted(fns) == sorted(names.FUNCTIONS)
    for name, fn in fns.items():
        assert fn["Handler"] == f"functions.{name}.app.handler"
        assert fn["Runtime"] == "python3.13"
        assert fn["Architectures"] == ["arm64"]
        assert fn["TracingConfig"] == {"Mode": "Active"}


def test_every_function_is_in_the_private_subnets_with_the_oxia_client_group(
    dev_stack: LlogStack, dev_template: Template
) -> None:
    client_sg = dev_stack.get_logical_id(dev_stack.oxia.client_security_group.node.default_child)  # type: ignore[arg-type]
    private = {
        dev_stack.get_logical_id(s.node.default_child)  # type: ignore[arg-type]
        for s in dev_stack.network.vpc.private_subnets
    }
    for name, fn in llog_functions(dev_template).items():
        vpc = fn["VpcConfig"]
        assert vpc["SecurityGroupIds"] == [{"Fn::GetAtt": [client_sg, "GroupId"]}], name
        assert {s["Ref"] for s in vpc["SubnetIds"]} == private, name


def test_the_layer_is_attached_to_every_function(dev_stack: LlogStack, dev_template: Template) -> None:
    layer = dev_stack.get_logical_id(dev_stack.layer.layer.node.default_child)  # type: ignore[arg-type]
    for name, fn in llog_functions(dev_template).items():
        assert fn["Layers"] == [{"Ref": layer}], name


def test_log_groups_have_the_stage_retention(dev_template: Template, prod_template: Template) -> None:
    for template, days in ((dev_template, 14), (prod_template, 90)):
        groups = resources(template, "AWS::Logs::LogGroup")
        for name, fn in llog_functions(template).items():
            ref = fn["LoggingConfig"]["LogGroup"]["Ref"]
            assert groups[ref]["Properties"]["RetentionInDays"] == days, name


def test_timeouts_memory_and_environment(dev_template: Template) -> None:
    fns = llog_functions(dev_template)
    for name in names.API_FUNCTIONS:
        assert fns[name]["Timeout"] == API_TIMEOUT.to_seconds() < 29
    assert fns["compaction_worker"]["Timeout"] == WORKER_TIMEOUT.to_seconds()
    assert fns["gc"]["Timeout"] == 900
    budget = int(fns["compaction_worker"]["Environment"]["Variables"]["LLOG_COMPACTION_BUDGET_MS"])
    assert budget == COMPACTION_BUDGET_MS
    assert budget + 30_000 <= WORKER_TIMEOUT.to_seconds() * 1000  # well inside the timeout
    consume_wait = int(fns["consume"]["Environment"]["Variables"]["LLOG_CONSUME_MAX_WAIT_MS"])
    assert consume_wait < API_TIMEOUT.to_seconds() * 1000
    for name, fn in fns.items():
        env = fn["Environment"]["Variables"]
        assert env["LLOG_OXIA_SERVICE_ADDRESS"] == "oxia.llog-dev.internal:6648", name
        assert env["LLOG_ROOT_PREFIX"] == "llog"
        assert env["LLOG_OXIA_NAMESPACE"] == "default"
        assert "Ref" in env["LLOG_S3_BUCKET"]
        assert env["POWERTOOLS_SERVICE_NAME"] == name
        assert fn["MemorySize"] == SPECS[name].memory_mib
    assert "Ref" in fns["compaction_planner"]["Environment"]["Variables"]["LLOG_COMPACTION_QUEUE_URL"]
    assert fns["gc"]["Environment"]["Variables"]["LLOG_GC_GRACE_MS"] == str(24 * 3_600_000)
    # more than twice the 60 s commit delays
    assert int(fns["gc"]["Environment"]["Variables"]["LLOG_GC_GRACE_MS"]) > 2 * 60_000


def asset_files(stack: LlogStack, template: Template, name: str) -> list[str]:
    fn = llog_functions(template)[name]
    key: str = fn["Code"]["S3Key"]
    outdir = Path(cdk.Stage.of(stack).outdir)  # type: ignore[union-attr]
    # CDK appends the source directory's extension to the staged name, so a
    # checkout at a path like /tmp/tmp.AbC stages "asset.<hash>.AbC".
    stem = "asset." + key.removesuffix(".zip")
    staged = [p for p in outdir.iterdir() if p.is_dir() and (p.name == stem or p.name.startswith(stem + "."))]
    assert len(staged) == 1, sorted(p.name for p in outdir.iterdir())
    asset = staged[0]
    return sorted(p.relative_to(asset).as_posix() for p in asset.rglob("*") if p.is_file())


@pytest.mark.parametrize("name", names.FUNCTIONS)
def test_code_asset_holds_only_its_function_and_the_shared_code(
    name: str, dev_stack: LlogStack, dev_template: Template
) -> None:
    files = asset_files(dev_stack, dev_template, name)
    expected = ["functions/__init__.py"]
    for package in ("common", name):
        expected += sorted(
            p.relative_to(ROOT).as_posix()
            for p in (ROOT / "functions" / package).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
        )
    assert files == sorted(expected)
    assert f"functions/{name}/app.py" in files
    assert not [f for f in files if f.startswith(("tests/", ".venv/", "llog_layer/", "node_modules/", "infra/"))]
    assert not [f for f in files if "__pycache__" in f]


def policy_statements(template: Template) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for policy in resources(template, "AWS::IAM::Policy").values():
        out += policy["Properties"]["PolicyDocument"]["Statement"]
    for role in resources(template, "AWS::IAM::Role").values():
        for policy in role["Properties"].get("Policies", []):
            out += policy["PolicyDocument"]["Statement"]
    return out


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_no_s3_wildcards_anywhere(dev_template: Template, prod_template: Template) -> None:
    for template in (dev_template, prod_template):
        for statement in policy_statements(template):
            actions = as_list(statement["Action"])
            assert "s3:*" not in actions
            assert "*" not in actions
            if any(a.startswith("s3:") for a in actions):
                assert statement["Resource"] != "*", statement
                assert "*" not in as_list(statement["Resource"]), statement


def role_statements(stack: LlogStack, template: Template, name: str) -> list[dict[str, Any]]:
    role = stack.functions.constructs[name].role
    role_id = stack.get_logical_id(role.node.default_child)  # type: ignore[arg-type]
    out: list[dict[str, Any]] = []
    for policy in resources(template, "AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            out += policy["Properties"]["PolicyDocument"]["Statement"]
    return out


def s3_grants(stack: LlogStack, template: Template, name: str) -> dict[str, Any]:
    """S3 action -> resource (JSON) for one function."""
    out = {}
    for statement in role_statements(stack, template, name):
        for action in as_list(statement["Action"]):
            if action.startswith("s3:"):
                out[action] = (json.dumps(statement["Resource"], sort_keys=True), statement.get("Condition"))
    return out


def test_s3_grants_are_least_privilege_on_the_root_prefix(dev_stack: LlogStack, dev_template: Template) -> None:
    bucket = dev_stack.get_logical_id(dev_stack.storage.bucket.node.default_child)  # type: ignore[arg-type]
    objects = json.dumps({"Fn::Join": ["", [{"Fn::GetAtt": [bucket, "Arn"]}, "/llog/*"]]}, sort_keys=True)
    bucket_arn = json.dumps({"Fn::GetAtt": [bucket, "Arn"]}, sort_keys=True)
    assert s3_grants(dev_stack, dev_template, "produce") == {"s3:PutObject": (objects, None)}
    assert s3_grants(dev_stack, dev_template, "consume") == {"s3:GetObject": (objects, None)}
    assert s3_grants(dev_stack, dev_template, "admin") == {  # POST .../compact
        "s3:GetObject": (objects, None),
        "s3:PutObject": (objects, None),
    }
    assert s3_grants(dev_stack, dev_template, "kinesis") == {  # PutRecord(s) and GetRecords
        "s3:GetObject": (objects, None),
        "s3:PutObject": (objects, None),
    }
    assert s3_grants(dev_stack, dev_template, "compaction_planner") == {}
    assert s3_grants(dev_stack, dev_template, "compaction_worker") == {
        "s3:GetObject": (objects, None),
        "s3:PutObject": (objects, None),
    }
    assert s3_grants(dev_stack, dev_template, "gc") == {
        "s3:GetObject": (objects, None),
        "s3:DeleteObject": (objects, None),
        "s3:ListBucket": (bucket_arn, {"StringLike": {"s3:prefix": ["llog/*"]}}),
    }
    assert s3_grants(dev_stack, dev_template, "verify") == {
        "s3:GetObject": (objects, None),
        "s3:ListBucket": (bucket_arn, {"StringLike": {"s3:prefix": ["llog/*"]}}),
    }
    assert s3_grants(dev_stack, dev_template, "backup") == {
        "s3:GetObject": (objects, None),
        "s3:PutObject": (objects, None),
        "s3:DeleteObject": (objects, None),
        "s3:ListBucket": (bucket_arn, {"StringLike": {"s3:prefix": ["llog/*"]}}),
    }


def test_queue_grants(dev_stack: LlogStack, dev_template: Template) -> None:
    def sqs_actions(name: str) -> set[str]:
        return {
            a
            for s in role_statements(dev_stack, dev_template, name)
            for a in as_list(s["Action"])
            if a.startswith("sqs:")
        }

    assert "sqs:SendMessage" in sqs_actions("compaction_planner")
    assert "sqs:ReceiveMessage" not in sqs_actions("compaction_planner")
    assert {"sqs:ReceiveMessage", "sqs:DeleteMessage"} <= sqs_actions("compaction_worker")
    assert "sqs:SendMessage" not in sqs_actions("compaction_worker")
    for name in ("produce", "consume", "admin", "gc"):
        assert sqs_actions(name) == set(), name


def test_kms_bucket_key_is_granted_to_the_s3_users() -> None:
    from tests.infra.helpers import make_stack

    stack = make_stack({"llog:stage": "kmsfn", "llog:bucketEncryption": "kms"})
    template = Template.from_stack(stack)
    for name, expected in (("produce", True), ("consume", True), ("admin", True), ("gc", True), ("verify", True),
                           ("backup", True)):  # fmt: skip
        actions = {a for s in role_statements(stack, template, name) for a in as_list(s["Action"])}
        assert ("kms:Decrypt" in actions) is expected, name
    kinesis = {a for s in role_statements(stack, template, "kinesis") for a in as_list(s["Action"])}
    assert "kms:GenerateDataKey" in kinesis  # it writes objects too


# Every function: its network interfaces in the VPC, its log stream and X-Ray traces.
COMMON_ACTIONS = {
    "ec2:AssignPrivateIpAddresses",
    "ec2:CreateNetworkInterface",
    "ec2:DeleteNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:UnassignPrivateIpAddresses",
    "logs:CreateLogStream",
    "logs:PutLogEvents",
    "xray:PutTelemetryRecords",
    "xray:PutTraceSegments",
}
QUEUE_CONSUMER = {"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl",
                  "sqs:ReceiveMessage"}  # fmt: skip
OWN_ACTIONS = {
    "produce": {"s3:PutObject"},
    "consume": {"s3:GetObject"},
    "admin": {"s3:GetObject", "s3:PutObject"},  # POST .../compact
    "kinesis": {"s3:GetObject", "s3:PutObject", "kms:Decrypt", "kms:Encrypt"},  # and its access keys' KMS key
    "compaction_planner": {"sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"},
    "compaction_worker": {"s3:GetObject", "s3:PutObject"} | QUEUE_CONSUMER,
    "gc": {"s3:DeleteObject", "s3:GetObject", "s3:ListBucket"},
    "verify": {"s3:GetObject", "s3:ListBucket"},  # reads only
    "backup": {"s3:DeleteObject", "s3:GetObject", "s3:ListBucket", "s3:PutObject"},  # prunes old backups
}


def test_each_function_is_granted_exactly_what_it_needs(dev_stack: LlogStack, dev_template: Template) -> None:
    """The whole action list per role, so a new grant (or a broader one) fails here until it is reviewed."""
    assert set(dev_stack.functions.constructs) == set(OWN_ACTIONS)
    for name, own in OWN_ACTIONS.items():
        statements = role_statements(dev_stack, dev_template, name)
        actions = {a for s in statements for a in as_list(s["Action"])}
        assert actions == COMMON_ACTIONS | own, name
        assert all(s["Effect"] == "Allow" and "NotAction" not in s and "NotResource" not in s for s in statements)
        role = dev_stack.functions.constructs[name].role
        role_id = dev_stack.get_logical_id(role.node.default_child)  # type: ignore[arg-type]
        assert "ManagedPolicyArns" not in resources(dev_template, "AWS::IAM::Role")[role_id]["Properties"], name
