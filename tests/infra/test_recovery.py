"""Recovery: the verify and backup schedules, their role, settings, dashboard row and alarms."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Template

from infra.schedules import SCHEDULE_RETRY_ATTEMPTS
from infra.settings import LlogSettings, SettingsError
from infra.stack import LlogStack
from tests.infra.helpers import make_stack, resources
from tests.infra.test_compaction import schedules
from tests.infra.test_observability import alarms, dashboard_body


def logical_id(stack: LlogStack, name: str) -> str:
    return stack.get_logical_id(stack.functions[name].node.default_child)  # type: ignore[arg-type]


def test_verify_runs_daily_and_backup_hourly_by_default(dev_stack: LlogStack, dev_template: Template) -> None:
    found = schedules(dev_template, "Recovery")
    assert set(found) == {"rate(1 day)", "rate(1 hour)"}
    for expression, name in (("rate(1 day)", "verify"), ("rate(1 hour)", "backup")):
        target = found[expression]["Target"]
        assert target["Arn"] == {"Fn::GetAtt": [logical_id(dev_stack, name), "Arn"]}
        assert target["RetryPolicy"]["MaximumRetryAttempts"] == SCHEDULE_RETRY_ATTEMPTS
        assert found[expression]["State"] == "ENABLED"


def test_schedules_follow_the_settings() -> None:
    stack = make_stack({"llog:stage": "rec", "llog:backupSchedule": "rate(15 minutes)",
                        "llog:verifySchedule": "cron(0 4 ? * SUN *)"})  # fmt: skip
    template = Template.from_stack(stack)
    assert set(schedules(template, "Recovery")) == {"rate(15 minutes)", "cron(0 4 ? * SUN *)"}
    assert "rate(15 minutes)" in dashboard_body(template)  # the backup interval, next to the compaction lag


@pytest.mark.parametrize("key", ["backupSchedule", "verifySchedule"])
def test_a_bad_schedule_is_refused(key: str) -> None:
    with pytest.raises(SettingsError, match=f"llog:{key}"):
        LlogSettings.from_context({f"llog:{key}": "hourly"}.get)


def test_the_scheduler_role_may_invoke_only_verify_and_backup(dev_stack: LlogStack, dev_template: Template) -> None:
    role = dev_stack.get_logical_id(dev_stack.recovery.scheduler_role.node.default_child)  # type: ignore[arg-type]
    statements: list[dict[str, Any]] = []
    for policy in resources(dev_template, "AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    text = json.dumps(statements)
    for name in dev_stack.functions.by_name:
        assert (logical_id(dev_stack, name) in text) is (name in ("verify", "backup")), name
    assert {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])} == {
        "lambda:InvokeFunction"
    }


def test_verify_counts_orphans_with_the_gc_grace(dev_stack: LlogStack, dev_template: Template) -> None:
    env = resources(dev_template, "AWS::Lambda::Function")[logical_id(dev_stack, "verify")]["Properties"]
    assert env["Environment"]["Variables"]["LLOG_GC_GRACE_MS"] == str(24 * 3_600_000)
    assert env["Timeout"] == 900


def test_the_dashboard_shows_the_recovery_point_bound(dev_template: Template) -> None:
    body = dashboard_body(dev_template).replace("\\", "")
    for text in ("recovery point: max compaction lag", "Recovery point objective", "min(compaction lag, backup "
                 "interval)", "`rate(1 hour)` (`llog:backupSchedule`)", '["llog","VerifyProblems"',
                 '["llog","BackupCompleted"', '["llog","BackupErrors"', "PartitionsVerified"):  # fmt: skip
        assert text in body, text


def test_alarms_on_damage_and_on_partitions_a_backup_left_out(dev_template: Template) -> None:
    found = {a["MetricName"]: a for a in alarms(dev_template) if a["Namespace"] == "llog"}
    for metric, service in (("VerifyProblems", "verify"), ("BackupErrors", "backup")):
        alarm = found[metric]
        assert alarm["Dimensions"] == [{"Name": "service", "Value": service}]
        assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
        assert alarm["TreatMissingData"] == "ignore"  # one datapoint per run: keep the state in between
