"""CloudFormation's linter (cfn-lint, pinned in requirements-dev.txt) over every template variant: no finding.

Variants: dev and prod; each front door (rest, http, serve with a load balancer and with DNS); each Oxia storage
(standalone on EFS; replicated on EBS in a production stage, in a development stage and with three known AZs as
``cdk deploy`` synthesizes it; replicated on EFS); and each other setting that adds or removes resources (API keys,
CORS on the REST and HTTP APIs, a KMS bucket key, the Iceberg export). Stacks the other infrastructure tests
check come from tests/infra/conftest.py's session fixtures, so each is synthesized once per session; the rest
are synthesized here.

cfn-lint runs with its default rules (errors and warnings; its informational I-rules are style hints such as
"prefer Fn::Sub over Fn::Join"), for one region. A check may be exempted only on a resource, in its
``cfn-lint`` metadata, with a reason (infra/lint.py); the exemptions are shown to hide exactly the findings they
name, and the lint is shown to report what CloudFormation would reject. docs/DEPLOY.md, "cfn-lint".
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from aws_cdk.assertions import Template

from functions.common import names
from infra.lint import CFN_LINT
from infra.stack import LlogStack
from tests.infra.cfn_lint_runs import Finding, lint_all
from tests.infra.helpers import make_stack
from tests.infra.test_oxia_ebs import AZS, ENV

REGION = "us-east-1"
CONSOLE = "https://console.example.com"

# Variant -> the session fixture of its stack (tests/infra/conftest.py).
SHARED: dict[str, str] = {
    "dev": "dev_stack",  # REST API with IAM auth, standalone Oxia on EFS, SSE-S3, Parquet, data deleted with the stack
    "prod": "prod_stack",  # replicated Oxia on EBS (EC2 instances, volumes, snapshots), data retained
    "prod-oxia-efs": "efs_prod_stack",
    "api-key": "api_key_stack",
    "http": "http_stack",
    "serve": "fleet_stack",  # llog serve on ECS behind an internal load balancer, no API functions
    "serve-dns": "dns_stack",  # the same reached through Cloud Map names
    "iceberg": "iceberg_stack",
}
# Variants only this module synthesizes: their context and the stack's arguments.
OWN: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "dev-oxia-ebs": ({"llog:stage": "ebsdev", "llog:oxiaMode": "replicated"}, {}),  # EBS volumes deleted with it
    # With an account and region, as cdk deploy synthesizes: three AZs (from the context cache), one server in each.
    "prod-3-azs": (
        {"llog:stage": "prod", f"availability-zones:account={ENV.account}:region={ENV.region}": AZS},
        {"env": ENV},
    ),
    "rest-cors": ({"llog:stage": "corskeys", "llog:apiAuth": "api_key", "llog:corsOrigins": CONSOLE}, {}),
    "http-cors": ({"llog:stage": "corshttp", "llog:frontDoor": "http", "llog:corsOrigins": CONSOLE}, {}),
    "kms": ({"llog:stage": "kms", "llog:bucketEncryption": "kms"}, {}),
}


@pytest.fixture(scope="module")
def templates(request: pytest.FixtureRequest) -> dict[str, dict[str, Any]]:
    """Each variant's template, synthesized once per module."""
    found = {}
    for variant in [*SHARED, *OWN]:
        if variant in SHARED:
            stack: LlogStack = request.getfixturevalue(SHARED[variant])
        else:
            context, stack_kwargs = OWN[variant]
            stack = make_stack(context, **stack_kwargs)
        found[variant] = dict(Template.from_stack(stack).to_json())
    return found


def broken(template: dict[str, Any]) -> dict[str, Any]:
    """A function with a misspelt property and a memory size Lambda refuses, alone in a template."""
    name, function = next((n, copy.deepcopy(r)) for n, r in template["Resources"].items()
                          if r["Type"] == "AWS::Lambda::Function")  # fmt: skip
    function.pop("DependsOn", None)
    function["Properties"]["Role"] = "arn:aws:iam::123456789012:role/llog-test"
    function["Properties"]["MemorySize"] = 64
    function["Properties"]["Handlr"] = function["Properties"]["Handler"]
    return {"AWSTemplateFormatVersion": "2010-09-09", "Resources": {name: function}}


@pytest.fixture(scope="module")
def lints(templates: dict[str, dict[str, Any]]) -> dict[str, list[Finding]]:
    """Every lint this module asks for, run at once (tests/infra/cfn_lint_runs.py): each variant's template,
    the exempted variants' without their exemptions (``bare:``), and a broken function."""
    asked = dict(templates)
    asked.update({f"bare:{variant}": without_exemptions(templates[variant]) for variant in EXEMPTED_KINDS})
    asked["broken"] = broken(templates["dev"])
    return lint_all(asked, REGION)


def findings(found: list[Finding]) -> list[str]:
    return [f"{rule} {'/'.join(map(str, path))}: {message}" for rule, path, message in found]


def exemptions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each resource's ``cfn-lint`` metadata, by logical id."""
    return {
        name: resource["Metadata"][CFN_LINT]
        for name, resource in template["Resources"].items()
        if CFN_LINT in resource.get("Metadata", {})
    }


def without_exemptions(template: dict[str, Any]) -> dict[str, Any]:
    bare = copy.deepcopy(template)
    for resource in bare["Resources"].values():
        resource.get("Metadata", {}).pop(CFN_LINT, None)
    return bare


@pytest.mark.parametrize("variant", [*SHARED, *OWN])
def test_every_variant_passes_cfn_lint_and_each_exemption_has_a_reason(
    variant: str, templates: dict[str, dict[str, Any]], lints: dict[str, list[Finding]]
) -> None:
    assert findings(lints[variant]) == []
    for name, metadata in exemptions(templates[variant]).items():
        reasons = metadata["reasons"]
        assert metadata["config"]["ignore_checks"] == sorted(reasons), name
        assert all(isinstance(why, str) and len(why) > 40 for why in reasons.values()), (name, reasons)


# The variants with every kind of exempted resource: serve (W3005 on the functions, CDK's providers of the
# default security group's and the buckets' custom resources, the balanced ECS service) and prod-3-azs (also
# W3010 on the subnets and the EBS volumes), by check and resource type.
EXEMPTED_KINDS = {
    "serve": {("W3005", "AWS::Lambda::Function"), ("W3005", "AWS::ECS::Service")},
    "prod-3-azs": {("W3005", "AWS::Lambda::Function"), ("W3010", "AWS::EC2::Subnet"), ("W3010", "AWS::EC2::Volume")},
}


@pytest.mark.parametrize("variant", EXEMPTED_KINDS)
def test_the_exemptions_hide_exactly_the_findings_they_name(
    variant: str, templates: dict[str, dict[str, Any]], lints: dict[str, list[Finding]]
) -> None:
    """Without the metadata, cfn-lint reports each exempted check on each exempted resource, and nothing else."""
    template = templates[variant]
    exempted = {(name, check) for name, m in exemptions(template).items() for check in m["config"]["ignore_checks"]}
    reported = {(path[1], rule) for rule, path, _ in lints[f"bare:{variant}"]}
    assert reported == exempted
    assert {(check, template["Resources"][name]["Type"]) for name, check in exempted} == EXEMPTED_KINDS[variant]


def test_the_functions_still_deploy_after_their_roles_policy(templates: dict[str, dict[str, Any]]) -> None:
    """The exempted duplicate (the role) is the only redundant DependsOn: the policy edge, which orders a
    function after the permissions it needs on its first invocation, stays."""
    resources = templates["dev"]["Resources"]
    functions = [r for n, r in resources.items() if n.startswith("Functions") and r["Type"] == "AWS::Lambda::Function"]
    assert len(functions) == len(names.FUNCTIONS)
    for function in functions:
        role = function["Properties"]["Role"]["Fn::GetAtt"][0]
        policies = [d for d in function["DependsOn"] if resources[d]["Type"] == "AWS::IAM::Policy"]
        assert [resources[p]["Properties"]["Roles"] for p in policies] == [[{"Ref": role}]]


def test_cfn_lint_reports_what_cloudformation_would_reject(lints: dict[str, list[Finding]]) -> None:
    """The lint is no formality: a misspelt property and a memory size Lambda refuses are errors."""
    errors = [(rule, path[-1]) for rule, path, _ in lints["broken"] if rule.startswith("E")]
    assert sorted(errors) == [("E3002", "Handlr"), ("E3034", "MemorySize")]
