"""The HTTP API front door (llog:frontDoor=http): the same routes as the REST API, IAM on every route but the
Kinesis API's, payload format 1.0 (the REST event shape the handlers read), a throttled and logged $default stage,
no REST API resources, and a dashboard and 5xx alarm on the HTTP API's own metrics."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Annotations, Match, Template

from functions.common import names, routes
from infra.http_api import DEFAULT_STAGE, ROUTE_METHODS
from infra.stack import LlogStack
from tests.infra.helpers import function_named_in, resources

NAG = Match.string_like_regexp("AwsSolutions-.*")


def routes_by_key(template: Template) -> dict[str, dict[str, Any]]:
    found = resources(template, "AWS::ApiGatewayV2::Route").values()
    return {r["Properties"]["RouteKey"]: r["Properties"] for r in found}


def target_function(stack: LlogStack, template: Template, route: dict[str, Any]) -> str:
    target = json.dumps(route["Target"])
    integrations = resources(template, "AWS::ApiGatewayV2::Integration")
    (integration,) = [props["Properties"] for key, props in integrations.items() if key in target]
    return function_named_in(stack, integration["IntegrationUri"])


def test_every_route_goes_to_its_function(http_stack: LlogStack, http_template: Template) -> None:
    found = routes_by_key(http_template)
    for route in routes.ROUTES:
        assert target_function(http_stack, http_template, found[f"{route.method} {route.resource}"]) == route.function


def test_every_other_method_but_options_on_every_path_goes_to_admin(
    http_stack: LlogStack, http_template: Template
) -> None:
    """The admin function answers 405 (with Allow) for a route's other methods, 404 for unknown paths. No route
    matches OPTIONS (no ANY, no $default): the gateway answers preflights itself (test_cors.py)."""
    found = routes_by_key(http_template)
    catch_all = {f"{method.value} {path}" for path in ("/", routes.CATCH_ALL_RESOURCE) for method in ROUTE_METHODS}
    kinesis = {f"{method.value} {routes.KINESIS_PATH}" for method in ROUTE_METHODS}
    assert set(found) == {f"{r.method} {r.resource}" for r in routes.ROUTES} | catch_all | kinesis
    for key in catch_all:
        assert target_function(http_stack, http_template, found[key]) == names.ADMIN
    assert {m.value for m in ROUTE_METHODS} == {"DELETE", "GET", "HEAD", "PATCH", "POST", "PUT"}


def test_every_route_requires_iam_but_the_kinesis_apis(http_stack: LlogStack, http_template: Template) -> None:
    """The kinesis function checks the SDKs' SigV4 signature (service ``kinesis``) itself: IAM would refuse it."""
    for key, props in routes_by_key(http_template).items():
        if key.endswith(f" {routes.KINESIS_PATH}"):
            assert props["AuthorizationType"] == "NONE", key
            assert target_function(http_stack, http_template, props) == names.KINESIS, key
        else:
            assert props["AuthorizationType"] == "AWS_IAM", key
    kinesis_routes = [
        route for route in resources(http_template, "AWS::ApiGatewayV2::Route").values()
        if route["Properties"]["RouteKey"].endswith(f" {routes.KINESIS_PATH}")
    ]  # fmt: skip
    assert len(kinesis_routes) == len(ROUTE_METHODS)
    for route in kinesis_routes:
        (apig4,) = [r for r in route["Metadata"]["cdk_nag"]["rules_to_suppress"] if r["id"] == "AwsSolutions-APIG4"]
        assert "kinesis function verifies" in apig4["reason"]


def test_integrations_send_the_rest_event_shape(http_template: Template) -> None:
    integrations = resources(http_template, "AWS::ApiGatewayV2::Integration")
    assert len(integrations) == 4  # produce, consume, admin, kinesis
    for props in integrations.values():
        assert props["Properties"]["IntegrationType"] == "AWS_PROXY"
        # 1.0: resource, path, httpMethod, multiValueHeaders, as APIGatewayRestResolver reads them.
        assert props["Properties"]["PayloadFormatVersion"] == "1.0"


def test_no_rest_api_keys_or_usage_plans(http_template: Template) -> None:
    template = http_template.to_json()["Resources"]
    assert not [k for k, v in template.items() if v["Type"].startswith("AWS::ApiGateway::")]
    (api,) = resources(http_template, "AWS::ApiGatewayV2::Api").values()
    assert api["Properties"]["ProtocolType"] == "HTTP"
    assert api["Properties"]["Name"] == "llog-http"


def test_the_default_stage_is_throttled_and_logged(http_stack: LlogStack, http_template: Template) -> None:
    http_template.has_resource_properties(
        "AWS::ApiGatewayV2::Stage",
        {
            "StageName": DEFAULT_STAGE,
            "AutoDeploy": True,
            "DefaultRouteSettings": {"ThrottlingRateLimit": 100, "ThrottlingBurstLimit": 200},
            "AccessLogSettings": {"DestinationArn": Match.any_value(), "Format": Match.any_value()},
        },
    )
    (stage,) = resources(http_template, "AWS::ApiGatewayV2::Stage").values()
    log_format = json.loads(stage["Properties"]["AccessLogSettings"]["Format"])
    assert {"requestId", "routeKey", "status", "userArn"} <= set(log_format)
    # Only HTTP API context variables: the REST API's $context.identity.caller/user are not among them.
    assert all(v.startswith("$context.") for v in log_format.values())
    assert "$context.identity.caller" not in log_format.values()


def test_api_gateway_may_invoke_the_api_functions(http_stack: LlogStack, http_template: Template) -> None:
    permissions = resources(http_template, "AWS::Lambda::Permission")
    invoked = {
        json.dumps(p["Properties"]["FunctionName"])
        for p in permissions.values()
        if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
    }
    for name in names.API_FUNCTIONS:
        fn = http_stack.functions[name]
        assert any(http_stack.get_logical_id(fn.node.default_child) in i for i in invoked), name  # type: ignore[arg-type]


def test_the_dashboard_and_alarm_use_the_http_api_metrics(http_template: Template) -> None:
    alarms = [
        a["Properties"]
        for a in resources(http_template, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("Namespace") == "AWS/ApiGateway"
    ]
    (alarm,) = alarms
    assert alarm["MetricName"] == "5xx"  # the REST API's is 5XXError
    assert {d["Name"] for d in alarm["Dimensions"]} == {"ApiId", "Stage"}


def test_the_http_front_door_has_no_findings(http_stack: LlogStack) -> None:
    annotations = Annotations.from_stack(http_stack)
    assert annotations.find_error("*", NAG) == []
    assert annotations.find_warning("*", NAG) == []


def test_the_api_url_output_is_the_http_api_stage(http_stack: LlogStack, http_template: Template) -> None:
    outputs = http_template.to_json()["Outputs"]
    assert "HTTP API" in outputs["ApiUrl"]["Description"]
    assert "ApiKeyId" not in outputs
