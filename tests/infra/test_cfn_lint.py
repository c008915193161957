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
import json
from typing import Any

import pytest
from aws_cdk.assertions import Template
from cfnlint.api import lint
from cfnlint.config import ManualArgs
from cfnlint.rules import Match

from infra.lint import CFN_LINT
from infra.stack import LlogStack
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
def templates() -> dict[str, dict[str, Any]]:
    """Each variant's template, made once per module (filled in as the variants are asked for)."""
    return {}


def template_of(variant: str, request: pytest.FixtureRequest, templates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if variant not in templates:
        if variant in SHARED:
            stack: LlogStack = request.getfixturevalue(SHARED[variant])
        else:
            context, stack_kwargs = OWN[variant]
            stack = make_stack(context, **stack_kwargs)
        templates[variant] = dict(Template.from_stack(stack).to_json())
    return templates[variant]


def cfn_lint(template: dict[str, Any]) -> list[Match]:
    matches: list[Match] = lint(json.dumps(template), config=ManualArgs(regions=[REGION]))
    return matches


def findings(matches: list[Match]) -> list[str]:
    return [f"{m.rule.id} {'/'.join(map(str, m.path))}: {m.message}" for m in matches]


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
    variant: str, request: pytest.FixtureRequest, templates: dict[str, dict[str, Any]]
) -> None:
    template = template_of(variant, request, templates)
    assert findings(cfn_lint(template)) == []
    for name, metadata in exemptions(template).items():
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
    variant: str, request: pytest.FixtureRequest, templates: dict[str, dict[str, Any]]
) -> None:
    """Without the metadata, cfn-lint reports each exempted check on each exempted resource, and nothing else."""
    template = template_of(variant, request, templates)
    exempted = {(name, check) for name, m in exemptions(template).items() for check in m["config"]["ignore_checks"]}
    reported = {(m.path[1], m.rule.id) for m in cfn_lint(without_exemptions(template))}
    assert reported == exempted
    assert {(check, template["Resources"][name]["Type"]) for name, check in exempted} == EXEMPTED_KINDS[variant]


def test_the_functions_still_deploy_after_their_roles_policy(
    request: pytest.FixtureRequest, templates: dict[str, dict[str, Any]]
) -> None:
    """The exempted duplicate (the role) is the only redundant DependsOn: the policy edge, which orders a
    function after the permissions it needs on its first invocation, stays."""
    template = template_of("dev", request, templates)
    resources = template["Resources"]
    functions = [r for n, r in resources.items() if n.startswith("Functions") and r["Type"] == "AWS::Lambda::Function"]
    assert len(functions) == 8
    for function in functions:
        role = function["Properties"]["Role"]["Fn::GetAtt"][0]
        policies = [d for d in function["DependsOn"] if resources[d]["Type"] == "AWS::IAM::Policy"]
        assert [resources[p]["Properties"]["Roles"] for p in policies] == [[{"Ref": role}]]


def test_cfn_lint_reports_what_cloudformation_would_reject(
    request: pytest.FixtureRequest, templates: dict[str, dict[str, Any]]
) -> None:
    """The lint is no formality: a misspelt property and a memory size Lambda refuses are errors."""
    broken = copy.deepcopy(template_of("dev", request, templates))
    function = next(r for r in broken["Resources"].values() if r["Type"] == "AWS::Lambda::Function")
    function["Properties"]["MemorySize"] = 64
    function["Properties"]["Handlr"] = function["Properties"]["Handler"]
    errors = [(m.rule.id, m.path[-1]) for m in cfn_lint(broken) if m.rule.id.startswith("E")]
    assert sorted(errors) == [("E3002", "Handlr"), ("E3034", "MemorySize")]
