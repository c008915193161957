"""Compaction queue, dead-letter queue, the worker's event source, and the planner and GC schedules."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Template

from functions.common import names
from infra.compaction import MAX_RECEIVE_COUNT
from infra.functions import WORKER_TIMEOUT
from infra.schedules import SCHEDULE_RETRY_ATTEMPTS
from infra.stack import LlogStack
from tests.infra.helpers import make_stack, resources


def queues(stack: LlogStack, template: Template) -> tuple[dict[str, Any], dict[str, Any]]:
    found = resources(template, "AWS::SQS::Queue")
    queue = found[stack.get_logical_id(stack.compaction.queue.node.default_child)]  # type: ignore[arg-type]
    dlq = found[stack.get_logical_id(stack.compaction.dead_letter_queue.node.default_child)]  # type: ignore[arg-type]
    return queue["Properties"], dlq["Properties"]


def test_queue_has_a_dead_letter_queue_and_long_visibility(dev_stack: LlogStack, dev_template: Template) -> None:
    queue, dlq = queues(dev_stack, dev_template)
    dlq_id = dev_stack.get_logical_id(dev_stack.compaction.dead_letter_queue.node.default_child)  # type: ignore[arg-type]
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": MAX_RECEIVE_COUNT,
    }
    assert queue["VisibilityTimeout"] >= 6 * WORKER_TIMEOUT.to_seconds()
    for props in (queue, dlq):
        assert props["SqsManagedSseEnabled"] is True


def test_queues_enforce_tls(dev_template: Template) -> None:
    policies = resources(dev_template, "AWS::SQS::QueuePolicy")
    assert len(policies) == 2
    for policy in policies.values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
        )


def test_worker_consumes_with_bounded_concurrency(dev_stack: LlogStack, dev_template: Template) -> None:
    (mapping,) = resources(dev_template, "AWS::Lambda::EventSourceMapping").values()
    props = mapping["Properties"]
    worker = dev_stack.get_logical_id(dev_stack.functions["compaction_worker"].node.default_child)  # type: ignore[arg-type]
    queue = dev_stack.get_logical_id(dev_stack.compaction.queue.node.default_child)  # type: ignore[arg-type]
    assert props["FunctionName"] == {"Ref": worker}
    assert props["EventSourceArn"] == {"Fn::GetAtt": [queue, "Arn"]}
    assert props["BatchSize"] == 1
    assert props["ScalingConfig"] == {"MaximumConcurrency": 50}  # docs/SCALE.md
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def planner_rule(template: Template) -> tuple[str, str]:
    """The planner's LLOG_COMPACTION_MIN_LAG and LLOG_COMPACTION_MAX_DELAY_MS (docs/SCALE.md)."""
    (planner,) = [
        f["Properties"]["Environment"]["Variables"]
        for f in resources(template, "AWS::Lambda::Function").values()
        if "LLOG_COMPACTION_QUEUE_URL" in f["Properties"].get("Environment", {}).get("Variables", {})
    ]
    return planner["LLOG_COMPACTION_MIN_LAG"], planner["LLOG_COMPACTION_MAX_DELAY_MS"]  # fmt: skip


def test_the_planners_size_or_age_rule_defaults_to_every_lagging_partition(dev_template: Template) -> None:
    assert planner_rule(dev_template) == ("1", "600000")


def test_max_concurrency_and_the_planners_rule_are_settings() -> None:
    stack = make_stack({"llog:stage": "conc", "llog:compactionMaxConcurrency": "25",
                        "llog:compactionMinLag": "1000", "llog:compactionMaxDelayMinutes": "30"})  # fmt: skip
    template = Template.from_stack(stack)
    (mapping,) = resources(template, "AWS::Lambda::EventSourceMapping").values()
    assert mapping["Properties"]["ScalingConfig"] == {"MaximumConcurrency": 25}
    assert planner_rule(template) == ("1000", "1800000")


def schedules(template: Template, construct: str = "Compaction") -> dict[str, dict[str, Any]]:
    """The schedules of one construct of the stack (infra/recovery.py has the others), by expression."""
    return {s["Properties"]["ScheduleExpression"]: s["Properties"] for logical_id, s in
            resources(template, "AWS::Scheduler::Schedule").items() if logical_id.startswith(construct)}  # fmt: skip


def test_planner_and_gc_schedules(dev_stack: LlogStack, dev_template: Template) -> None:
    found = schedules(dev_template)
    assert set(found) == {"rate(1 minute)", "rate(1 hour)", "rate(10 minutes)"}
    events = {"rate(1 minute)": None, "rate(1 hour)": None, "rate(10 minutes)": names.GC_WAL_EVENT}
    for expression, name in (("rate(1 minute)", "compaction_planner"), ("rate(1 hour)", "gc"),
                             ("rate(10 minutes)", "gc")):  # fmt: skip
        target = found[expression]["Target"]
        fn = dev_stack.get_logical_id(dev_stack.functions[name].node.default_child)  # type: ignore[arg-type]
        assert target["Arn"] == {"Fn::GetAtt": [fn, "Arn"]}
        assert target["RetryPolicy"]["MaximumRetryAttempts"] == SCHEDULE_RETRY_ATTEMPTS
        assert found[expression]["State"] == "ENABLED"
        assert found[expression]["FlexibleTimeWindow"] == {"Mode": "OFF"}
        sent = target.get("Input")
        assert (None if sent is None else json.loads(sent)) == events[expression]


def test_schedules_follow_the_settings() -> None:
    stack = make_stack({"llog:stage": "sched", "llog:compactionSchedule": "rate(5 minutes)",
                        "llog:gcSchedule": "cron(0 3 * * ? *)", "llog:walGcSchedule": "rate(2 minutes)",
                        "llog:gcGracePeriodHours": 48,
                        "llog:retentionHours": 168, "llog:retentionTopics": {"audit": {}}})  # fmt: skip
    template = Template.from_stack(stack)
    assert set(schedules(template)) == {"rate(5 minutes)", "cron(0 3 * * ? *)", "rate(2 minutes)"}
    gc = stack.get_logical_id(stack.functions["gc"].node.default_child)  # type: ignore[arg-type]
    env = resources(template, "AWS::Lambda::Function")[gc]["Properties"]["Environment"]["Variables"]
    assert env["LLOG_GC_GRACE_MS"] == str(48 * 3_600_000)
    # the GC function applies retention: a week by default, the audit topic kept forever
    assert env["LLOG_RETENTION_MS"] == str(168 * 3_600_000)
    assert (env["LLOG_RETENTION_BYTES"], env["LLOG_RETENTION_TOPICS"]) == ("0", '{"audit": {}}')


def test_scheduler_role_may_invoke_only_the_planner_and_gc(dev_stack: LlogStack, dev_template: Template) -> None:
    role = dev_stack.get_logical_id(dev_stack.compaction.scheduler_role.node.default_child)  # type: ignore[arg-type]
    statements = []
    for policy in resources(dev_template, "AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    text = json.dumps(statements)
    for name in ("compaction_planner", "gc"):
        assert dev_stack.get_logical_id(dev_stack.functions[name].node.default_child) in text  # type: ignore[arg-type]
    for name in ("produce", "consume", "admin", "compaction_worker"):
        assert dev_stack.get_logical_id(dev_stack.functions[name].node.default_child) not in text  # type: ignore[arg-type]
    assert {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])} == {
        "lambda:InvokeFunction"
    }
