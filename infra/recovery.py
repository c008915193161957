"""Recovery: the schedules of verification and backup (docs/RECOVERY.md).

* EventBridge Scheduler invokes the verify function on ``llog:verifySchedule`` (default
  daily): it checks every partition against the protocol's invariants, reading only, and
  emits ``VerifyProblems`` (an alarm of infra/observability.py fires on any).
* EventBridge Scheduler invokes the backup function on ``llog:backupSchedule`` (default
  hourly): it copies the Oxia state to S3. Its interval bounds the recovery point objective
  with the compaction lag (the dashboard shows both, docs/RECOVERY.md, "Recovery point
  objective").

Both schedules share one role that may invoke these two functions only.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.schedules import ScheduledInvocation, schedule_invocations

# A missed run is superseded by the next one; it may still start late rather than not at all.
VERIFY_MAX_EVENT_AGE = Duration.hours(6)
BACKUP_MAX_EVENT_AGE = Duration.minutes(30)


class Recovery(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        verify: lambda_.IFunction,
        backup: lambda_.IFunction,
        verify_schedule: str,
        backup_schedule: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.backup_schedule_expression = backup_schedule
        self.scheduler_role, schedules = schedule_invocations(
            self,
            role_description=f"llog {stage}: EventBridge Scheduler invokes verification and backup",
            what="verify and backup",
            invocations={
                "VerifySchedule": ScheduledInvocation(
                    verify, verify_schedule, f"llog {stage}: verification", VERIFY_MAX_EVENT_AGE
                ),
                "BackupSchedule": ScheduledInvocation(
                    backup, backup_schedule, f"llog {stage}: backup of the Oxia state", BACKUP_MAX_EVENT_AGE
                ),
            },
        )
        self.verify_schedule, self.backup_schedule = schedules["VerifySchedule"], schedules["BackupSchedule"]
