"""Compaction and garbage collection: the task queue, its dead-letter queue, the worker's event source, schedules.

* EventBridge Scheduler invokes the planner on ``llog:compactionSchedule`` (default every
  minute); the planner sends one message per partition to ``queue`` (it may only send).
* The worker consumes ``queue`` through an SQS event source: one message per invocation,
  at most ``llog:compactionMaxConcurrency`` concurrent workers, partial batch failures
  reported. A task that keeps failing moves to ``dead_letter_queue`` after
  ``MAX_RECEIVE_COUNT`` receives.
* The queue's visibility timeout is 6x the worker timeout (AWS's advice for event sources).
* EventBridge Scheduler invokes GC on ``llog:gcSchedule`` (default hourly), and its WAL step alone on
  ``llog:walGcSchedule`` (default every 10 minutes).
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from cdk_nag import NagPackSuppression, NagSuppressions
from constructs import Construct

from functions.common import names
from infra.schedules import ScheduledInvocation, schedule_invocations

MAX_RECEIVE_COUNT = 5
VISIBILITY_FACTOR = 6
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
        wal_gc_schedule: str,
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
        self.scheduler_role, schedules = schedule_invocations(
            self,
            role_description=f"llog {stage}: EventBridge Scheduler invokes the compaction planner and GC",
            what="planner and GC",
            invocations={
                "PlannerSchedule": ScheduledInvocation(
                    planner, compaction_schedule, f"llog {stage}: compaction planner", PLANNER_MAX_EVENT_AGE
                ),
                "GcSchedule": ScheduledInvocation(
                    gc, gc_schedule, f"llog {stage}: garbage collection", GC_MAX_EVENT_AGE
                ),
                # The WAL blobs alone, often: each run deletes what passed the grace since the last, so S3's
                # DELETE rate per prefix is spread over the hour (docs/GC.md, "Schedules").
                "WalGcSchedule": ScheduledInvocation(
                    gc,
                    wal_gc_schedule,
                    f"llog {stage}: garbage collection of WAL blobs",
                    GC_MAX_EVENT_AGE,
                    payload=names.GC_WAL_EVENT,
                ),
            },
        )
        self.planner_schedule, self.gc_schedule = schedules["PlannerSchedule"], schedules["GcSchedule"]
        self.wal_gc_schedule = schedules["WalGcSchedule"]
