"""The Kinesis API in the stack: the KMS key that seals its access keys, granted (Encrypt and Decrypt on it alone)
to what answers the API and to nothing else, the settings it reads, and the outputs a client and an operator use."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Template

from functions.common import names
from infra.access_keys import KEYS_KMS_KEY_ENV
from infra.stack import LlogStack
from tests.infra.helpers import resources
from tests.infra.test_functions import as_list, llog_functions
from tests.infra.test_serve_fleet import fleet_template, serve_task

__all__ = ["fleet_template"]  # the fixture, shared


def sealing_key(stack: LlogStack) -> str:
    return stack.get_logical_id(stack.access_keys.key.node.default_child)  # type: ignore[arg-type]


def statements_on(template: Template, key_id: str) -> list[tuple[list[Any], dict[str, Any]]]:
    """(the roles, the statement) of every identity-policy statement that names the key."""
    arn = {"Fn::GetAtt": [key_id, "Arn"]}
    return [
        (policy["Properties"]["Roles"], statement)
        for policy in resources(template, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if arn in as_list(statement["Resource"])
    ]


def test_the_key_rotates_and_is_kept_with_production_data(dev_stack: LlogStack, prod_stack: LlogStack) -> None:
    for stack, policy in ((dev_stack, "Delete"), (prod_stack, "Retain")):
        key = Template.from_stack(stack).to_json()["Resources"][sealing_key(stack)]
        assert key["Type"] == "AWS::KMS::Key"
        assert key["Properties"]["EnableKeyRotation"] is True
        assert "access keys" in key["Properties"]["Description"]
        assert key["DeletionPolicy"] == policy


def test_only_the_kinesis_function_may_seal_and_open(dev_stack: LlogStack, dev_template: Template) -> None:
    kinesis_role = dev_stack.get_logical_id(dev_stack.functions.constructs[names.KINESIS].role.node.default_child)  # type: ignore[arg-type]
    ((roles, statement),) = statements_on(dev_template, sealing_key(dev_stack))
    assert roles == [{"Ref": kinesis_role}]
    assert sorted(as_list(statement["Action"])) == ["kms:Decrypt", "kms:Encrypt"]
    assert statement["Resource"] == {"Fn::GetAtt": [sealing_key(dev_stack), "Arn"]}


def test_the_kinesis_function_reads_the_key_and_the_account(dev_stack: LlogStack, dev_template: Template) -> None:
    functions = llog_functions(dev_template)
    env = functions[names.KINESIS]["Environment"]["Variables"]
    assert env[KEYS_KMS_KEY_ENV] == {"Fn::GetAtt": [sealing_key(dev_stack), "Arn"]}
    assert env["LLOG_KINESIS_ACCOUNT_ID"] == {"Ref": "AWS::AccountId"}  # of its stream ARNs
    assert env["LLOG_S3_BUCKET"] == functions[names.PRODUCE]["Environment"]["Variables"]["LLOG_S3_BUCKET"]
    assert functions[names.KINESIS]["Handler"] == "functions.kinesis.app.handler"
    for name, fn in functions.items():
        if name != names.KINESIS:
            assert KEYS_KMS_KEY_ENV not in fn["Environment"]["Variables"], name


def test_the_serve_fleet_answers_kinesis_with_the_same_key(fleet_stack: LlogStack, fleet_template: Template) -> None:
    (container,) = serve_task(fleet_template)["ContainerDefinitions"]
    environment = {e["Name"]: e["Value"] for e in container["Environment"]}
    assert environment[KEYS_KMS_KEY_ENV] == {"Fn::GetAtt": [sealing_key(fleet_stack), "Arn"]}
    assert environment["LLOG_KINESIS_ACCOUNT_ID"] == {"Ref": "AWS::AccountId"}
    task_role = fleet_stack.get_logical_id(fleet_stack.api.task_definition.task_role.node.default_child)  # type: ignore[union-attr, arg-type]
    ((roles, statement),) = statements_on(fleet_template, sealing_key(fleet_stack))
    assert roles == [{"Ref": task_role}]
    assert sorted(as_list(statement["Action"])) == ["kms:Decrypt", "kms:Encrypt"]


def test_the_outputs_name_the_endpoint_and_the_key(dev_stack: LlogStack, dev_template: Template) -> None:
    outputs = dev_template.to_json()["Outputs"]
    endpoint = json.dumps(outputs["KinesisEndpointUrl"]["Value"])
    assert "/kinesis" in endpoint or '"kinesis"' in endpoint
    assert "RestApi" in endpoint  # the REST API's stage URL, which ends with a slash
    assert outputs["AccessKeysKmsKeyArn"]["Value"] == {"Fn::GetAtt": [sealing_key(dev_stack), "Arn"]}
