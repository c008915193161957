"""Dashboard, alarms and stack outputs; functions and dead-letter queues slot in later."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Template

from infra.stack import LlogStack
from tests.infra.helpers import make_stack, resources


def alarms(template: Template) -> list[dict[str, Any]]:
    return [a["Properties"] for a in resources(template, "AWS::CloudWatch::Alarm").values()]


def dashboard_body(template: Template) -> str:
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard").values()
    return json.dumps(dashboard["Properties"]["DashboardBody"])


def test_dashboard_shows_bucket_and_oxia(dev_template: Template) -> None:
    dev_template.has_resource_properties("AWS::CloudWatch::Dashboard", {"DashboardName": "llog-dev"})
    body = dashboard_body(dev_template)
    for text in ("S3: requests", "5xxErrors", "FirstByteLatency", "BucketSizeBytes", "RunningTaskCount",
                 "CPUUtilization", "MemoryUtilization", "ECS/ContainerInsights"):  # fmt: skip
        assert text in body, text


def test_alarms_on_oxia_tasks_and_s3_errors(dev_template: Template, prod_template: Template) -> None:
    for template, nodes in ((dev_template, 1), (prod_template, 4)):
        down = [a for a in alarms(template) if a["MetricName"] == "RunningTaskCount"]
        assert len(down) == nodes
        for alarm in down:
            assert alarm["ComparisonOperator"] == "LessThanThreshold"
            assert alarm["Threshold"] == 1
            assert alarm["TreatMissingData"] == "breaching"
        assert [a["Namespace"] for a in alarms(template) if a["MetricName"] == "5xxErrors"] == ["AWS/S3"]


def test_container_insights_provide_the_task_count(dev_template: Template) -> None:
    dev_template.has_resource_properties(
        "AWS::ECS::Cluster", {"ClusterSettings": [{"Name": "containerInsights", "Value": "enabled"}]}
    )


def test_functions_and_dead_letter_queues_add_rows_and_alarms() -> None:
    stack = make_stack({"llog:stage": "obs"})
    produce = lambda_.Function.from_function_arn(
        stack, "Produce", f"arn:aws:lambda:eu-west-1:123456789012:function:{'llog-produce'}"
    )
    dlq = sqs.Queue.from_queue_arn(stack, "CompactionDlq", "arn:aws:sqs:eu-west-1:123456789012:llog-compaction-dlq")
    topic = sns.Topic.from_topic_arn(stack, "Ops", "arn:aws:sns:eu-west-1:123456789012:ops")
    stack.observability.add_alarm_action(cw_action(topic))
    stack.observability.add_functions("Produce", [produce])
    stack.observability.add_dead_letter_queues([dlq])
    template = Template.from_stack(stack)
    body = dashboard_body(template)
    assert "Produce: errors" in body
    assert "Dead-letter queues: messages" in body
    by_metric = {a["MetricName"]: a for a in alarms(template)}
    assert by_metric["Errors"]["Namespace"] == "AWS/Lambda"
    assert by_metric["ApproximateNumberOfMessagesVisible"]["Threshold"] == 1
    for alarm in alarms(template):  # earlier and later alarms alike notify the action
        assert alarm["AlarmActions"] == ["arn:aws:sns:eu-west-1:123456789012:ops"]


def cw_action(topic: sns.ITopic) -> cw.IAlarmAction:
    from aws_cdk import aws_cloudwatch_actions as actions

    return actions.SnsAction(topic)


def test_outputs(dev_stack: LlogStack, dev_template: Template) -> None:
    outputs = dev_template.find_outputs("*")
    assert {"BucketName", "OxiaServiceAddress", "DashboardUrl", "LlogLayerArn", "OxiaClientSecurityGroupId",
            "ApiUrl", "CompactionQueueUrl"} <= set(outputs)  # fmt: skip
    bucket_id = dev_stack.get_logical_id(dev_stack.storage.bucket.node.default_child)  # type: ignore[arg-type]
    assert outputs["BucketName"]["Value"] == {"Ref": bucket_id}
    url = json.dumps(outputs["DashboardUrl"]["Value"])
    assert "console.aws.amazon.com/cloudwatch/home" in url
    assert "#dashboards:name=" in url


def test_function_environment_names_the_shared_resources(dev_stack: LlogStack) -> None:
    env = dev_stack.function_environment()
    assert env["LLOG_OXIA_SERVICE_ADDRESS"] == "oxia.llog-dev.internal:6648"
    assert env["LLOG_OXIA_NAMESPACE"] == "default"
    assert env["LLOG_ROOT_PREFIX"] == "llog"
    assert cdk.Token.is_unresolved(env["LLOG_S3_BUCKET"])


def test_dashboard_shows_functions_api_queue_and_llog_metrics(dev_template: Template) -> None:
    body = dashboard_body(dev_template)
    for text in ("Functions: errors", "Functions: throttles", "Functions: duration p99", "p99",
                 "API: 4xx / 5xx", "4XXError", "5XXError", "AWS/ApiGateway", "Latency",
                 "Dead-letter queues: messages", "ApproximateNumberOfMessagesVisible",
                 "RecordsProduced", "BytesProduced", "RecordsConsumed", "BytesConsumed",
                 "MaxCompactionLag", "compaction_planner", "RecordsCompacted",
                 "WalBlobsSeen", "WalBlobsDeleted", "WalBlobsReferenced"):  # fmt: skip
        assert text in body, text
    plain = body.replace("\\", "")
    for name in ("RecordsProduced", "BytesConsumed", "MaxCompactionLag", "RecordsCompacted"):
        assert f'["llog","{name}"' in plain, name  # the EMF namespace


def test_alarms_on_function_errors_dlq_and_compaction_lag(dev_stack: LlogStack, dev_template: Template) -> None:
    found = alarms(dev_template)
    function_errors = [a for a in found if a["MetricName"] == "Errors" and a["Namespace"] == "AWS/Lambda"]
    assert len(function_errors) == len(dev_stack.functions.functions)
    named = {json.dumps(a["Dimensions"]) for a in function_errors}
    for fn in dev_stack.functions.functions:
        assert dev_stack.get_logical_id(fn.node.default_child) in json.dumps(sorted(named))  # type: ignore[arg-type]
    (dlq,) = [a for a in found if a["MetricName"] == "ApproximateNumberOfMessagesVisible"]
    assert dlq["Threshold"] == 1
    assert dlq["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    (lag,) = [a for a in found if a["MetricName"] == "MaxCompactionLag"]
    assert lag["Namespace"] == "llog"
    assert lag["Dimensions"] == [{"Name": "service", "Value": "compaction_planner"}]
    assert lag["Threshold"] == 100_000
    assert lag["ComparisonOperator"] == "GreaterThanThreshold"
    (api,) = [a for a in found if a["MetricName"] == "5XXError"]
    assert api["Namespace"] == "AWS/ApiGateway"


def test_compaction_lag_threshold_is_a_setting() -> None:
    stack = make_stack({"llog:stage": "lag", "llog:compactionLagAlarmThreshold": 5000})
    (lag,) = [a for a in alarms(Template.from_stack(stack)) if a["MetricName"] == "MaxCompactionLag"]
    assert lag["Threshold"] == 5000
