"""cdk-nag's AwsSolutions pack: no unsuppressed finding, and every suppression has a written reason."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Annotations, Match, Template

from infra.stack import LlogStack
from tests.infra.helpers import make_app, make_stack

NAG = Match.string_like_regexp("AwsSolutions-.*")


def suppressions(template: Template) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for resource in template.to_json().get("Resources", {}).values():
        found += resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    found += template.to_json().get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    return found


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_no_unsuppressed_findings(stage: str, dev_stack: LlogStack, prod_stack: LlogStack) -> None:
    stack = dev_stack if stage == "dev" else prod_stack
    annotations = Annotations.from_stack(stack)
    assert annotations.find_error("*", NAG) == []
    assert annotations.find_warning("*", NAG) == []


def test_kms_variant_has_no_findings_either() -> None:
    stack = make_stack({"llog:stage": "kms", "llog:bucketEncryption": "kms"})
    annotations = Annotations.from_stack(stack)
    assert annotations.find_error("*", NAG) == []
    assert annotations.find_warning("*", NAG) == []


def test_every_suppression_has_a_written_reason(dev_template: Template, prod_template: Template) -> None:
    for template in (dev_template, prod_template):
        for rule in suppressions(template):
            assert rule["id"].startswith("AwsSolutions-")
            assert len(rule.get("reason", "").split()) >= 5, rule


def test_the_pack_does_catch_findings() -> None:
    # The same app setup, on a bucket that breaks the rules: synthesis fails and names them.
    stack = cdk.Stack(make_app(), "Canary")
    s3.Bucket(stack, "Open")
    with pytest.raises(RuntimeError, match=r"AwsSolutions-S10"):
        Template.from_stack(stack)
