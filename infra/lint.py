"""cfn-lint's exemptions, kept on the resources they concern (docs/DEPLOY.md, "cfn-lint").

cfn-lint reads ``Metadata: {"cfn-lint": {"config": {"ignore_checks": [...]}}}`` of a resource and skips those
checks on it. Next to that configuration each exemption says why, under ``"reasons"`` (a check id to a
sentence): cfn-lint ignores that key and tests/infra/test_cfn_lint.py requires a reason for every ignored check.

Two checks are exempted, each only where CDK builds resources that way:

* W3005 (a DependsOn that a Ref or GetAtt already implies): each Lambda function (llog's and those of CDK's
  custom resource providers) depends on its role explicitly as well as through ``Role``'s GetAtt, and the serve
  fleet's balanced ECS service on the target group it references. The duplicates change no deployment order;
  the edges that matter (a function after its role's policy, the custom resources after what they act on, the
  service after the listener) are not exempted.
* W3010 (a hard-coded availability zone): in a stack synthesized for an account and region, CDK writes the AZs
  it looked up into the subnets, and the data servers' EBS volumes follow their subnets. Offline synthesis
  (no account) selects them with Fn::GetAZs instead, and nothing is exempted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from aws_cdk import CfnResource, Stack, Token
from constructs import Construct

CFN_LINT = "cfn-lint"

# W3005 on a function whose role CDK adds to DependsOn next to the GetAtt of the role's ARN.
REDUNDANT_ROLE_DEPENDENCY = {
    "W3005": "CDK adds the function's role to DependsOn besides the GetAtt of its ARN in Role; the duplicate "
    "edge changes no deployment order (the one on the role's policy, which does, is not redundant)."
}


def ignore_checks(resource: CfnResource, reasons: Mapping[str, str]) -> None:
    """Exempt ``resource`` from the cfn-lint checks ``reasons`` names (check id -> why); merges with earlier ones."""
    metadata = cast(dict[str, Any], resource.get_metadata(CFN_LINT) or {})
    all_reasons = {**metadata.get("reasons", {}), **reasons}
    resource.add_metadata(CFN_LINT, {"config": {"ignore_checks": sorted(all_reasons)}, "reasons": all_reasons})


def ignore_checks_of_provider(scope: Construct, provider_id: str, reasons: Mapping[str, str]) -> None:
    """The same for the function of one of CDK's stack-wide custom resource providers (``Custom::...Provider``),
    which CDK creates once per stack for every construct that needs it (found by its construct id)."""
    provider = Stack.of(scope).node.find_child(provider_id)
    ignore_checks(cast(CfnResource, provider.node.find_child("Handler")), reasons)


def ignore_literal_zone(resource: CfnResource, zone: str, why: str) -> None:
    """Exempt ``resource`` from W3010 when ``zone`` is a literal AZ (see above); ``why`` it needs one AZ."""
    if not Token.is_unresolved(zone):
        ignore_checks(resource, {"W3010": "The stack is synthesized for one account and region, whose AZs CDK "
                                 f"looked up (cdk.context.json). {why}"})  # fmt: skip
