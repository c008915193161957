"""Scheduled invocations: one EventBridge Scheduler role per construct that invokes its functions only.

Shared by ``infra.compaction`` (the planner and GC) and ``infra.recovery`` (verify and backup).
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Aws, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from cdk_nag import NagPackSuppression, NagSuppressions, RegexAppliesTo
from constructs import Construct

SCHEDULE_RETRY_ATTEMPTS = 2


class ScheduledInvocation:
    """What to invoke on a schedule: the function, its schedule expression, and how late a run may start."""

    def __init__(
        self,
        function: lambda_.IFunction,
        expression: str,
        description: str,
        max_event_age: Duration,
        payload: Mapping[str, str] | None = None,
    ):
        self.function = function
        self.expression = expression
        self.description = description
        self.max_event_age = max_event_age
        self.payload = payload  # the event the function receives (None: the scheduler's own)


def schedule_invocations(
    scope: Construct, *, role_description: str, what: str, invocations: Mapping[str, ScheduledInvocation]
) -> tuple[iam.Role, dict[str, scheduler.Schedule]]:
    """``scope``'s ``SchedulerRole`` and one schedule per invocation (keyed by construct id), retrying failures.

    The role may invoke these functions (and their versions) only; ``what`` names them in its nag reason.
    """
    role = iam.Role(
        scope,
        "SchedulerRole",
        assumed_by=iam.ServicePrincipal(
            "scheduler.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}}
        ),
        description=role_description,
    )
    schedules = {
        construct_id: scheduler.Schedule(
            scope,
            construct_id,
            description=invocation.description,
            schedule=scheduler.ScheduleExpression.expression(invocation.expression),
            target=targets.LambdaInvoke(
                invocation.function,
                input=None
                if invocation.payload is None
                else scheduler.ScheduleTargetInput.from_object(dict(invocation.payload)),
                retry_attempts=SCHEDULE_RETRY_ATTEMPTS,
                max_event_age=invocation.max_event_age,
                role=role,
            ),
        )
        for construct_id, invocation in invocations.items()
    }
    # After the schedules: their grants create the role's default policy.
    NagSuppressions.add_resource_suppressions(
        role,
        [
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason=f"lambda:InvokeFunction on '<function arn>:*' covers the versions and aliases of the "
                f"{what} functions only (CDK's grantInvoke); no other function.",
                applies_to=[RegexAppliesTo(regex=r"/^Resource::<[A-Za-z0-9]+\.Arn>:\*$/g")],
            )
        ],
        apply_to_children=True,
    )
    return role, schedules
