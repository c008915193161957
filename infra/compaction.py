"""Compaction and garbage collection: the task queue, its dead-letter queue, the worker's event source, schedules.

* EventBridge Scheduler invokes the planner on ``llog:compactionSchedule`` (default every
  minute); the planner sends one message per partition to ``queue`` (it may only send).
* The worker consumes ``queue`` through an SQS event source: one message per invocation,
  at most ``llog:compactionMaxConcurrency`` concurrent workers, partial batch failures
  reported. A task that keeps failing moves to ``dead_letter_queue`` after
  ``MAX_RECEIVE_COUNT`` receives.
* The queue's visibility timeout is 6x the worker timeout (AWS's advice for event sources).
* EventBridge Scheduler invokes GC on ``llog:gcSchedule`` (default hourly).
"""

from __future__ import annotations

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from aws_cdk import aws_sqs as sqs
from cdk_nag import NagPackSuppression, NagSuppressions, RegexAppliesTo
from constructs import Construct

MAX_RECEIVE_COUNT = 5
VISIBILITY_FACTOR = 6
SCHEDULE_RETRY_ATTEMPTS = 2
# A missed planner run is superseded by the next one; a GC run may wait longer.
PLANNER_MAX_EVENT_AGE = Duration.minutes(5)
GC_MAX_EVENT_AGE = Duration.hours(1)


class Compaction(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        planner: lambda_.IFunction,
        worker: lambda_.Function,
        gc: lambda_.IFunction,
        worker_timeout: Duration,
        max_concurrency: int,
        compaction_schedule: str,
        gc_schedule: str,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
            removal_policy=removal_policy,
        )
        NagSuppressions.add_resource_suppressions(
            self.dead_letter_queue,
            [
                NagPackSuppression(
                    id="AwsSolutions-SQS3",
                    reason="This queue is itself the dead-letter queue of the compaction queue; an alarm "
                    "fires as soon as it holds a message.",
                )
            ],
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=Duration.seconds(worker_timeout.to_seconds() * VISIBILITY_FACTOR),
            retention_period=Duration.days(1),
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dead_letter_queue, max_receive_count=MAX_RECEIVE_COUNT),
            removal_policy=removal_policy,
        )
        self.queue.grant_send_messages(planner)
        self.event_source = sources.SqsEventSource(
            self.queue, batch_size=1, max_concurrency=max_concurrency, report_batch_item_failures=True
        )
        worker.add_event_source(self.event_source)

        # One role for both schedules: it may invoke the planner and GC (and their versions) only.
        self.scheduler_role = iam.Role(
            self,
            "SchedulerRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}}
            ),
            description=f"llog {stage}: EventBridge Scheduler invokes the compaction planner and GC",
        )
        self.planner_schedule = self._invoke_on_schedule(
            "PlannerSchedule", f"llog {stage}: compaction planner", compaction_schedule, planner, PLANNER_MAX_EVENT_AGE
        )
        self.gc_schedule = self._invoke_on_schedule(
            "GcSchedule", f"llog {stage}: garbage collection", gc_schedule, gc, GC_MAX_EVENT_AGE
        )
        # After the schedules: their grants create the role's default policy.
        NagSuppressions.add_resource_suppressions(
            self.scheduler_role,
            [
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="lambda:InvokeFunction on '<function arn>:*' covers the versions and aliases of the "
                    "planner and GC functions only (CDK's grantInvoke); no other function.",
                    applies_to=[RegexAppliesTo(regex=r"/^Resource::<[A-Za-z0-9]+\.Arn>:\*$/g")],
                )
            ],
            apply_to_children=True,
        )

    def _invoke_on_schedule(
        self, construct_id: str, description: str, expression: str, function: lambda_.IFunction, max_event_age: Duration
    ) -> scheduler.Schedule:
        """A schedule that invokes ``function`` as ``scheduler_role``, retrying a failed invocation."""
        return scheduler.Schedule(
            self,
            construct_id,
            description=description,
            schedule=scheduler.ScheduleExpression.expression(expression),
            target=targets.LambdaInvoke(
                function, retry_attempts=SCHEDULE_RETRY_ATTEMPTS, max_event_age=max_event_age, role=self.scheduler_role
            ),
        )
