"""The REST API: routes, catch-alls, auth in both modes, validation, gateway responses, stage, usage plan."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Annotations, Match, Template

from functions.common import names, routes
from infra.api import KINESIS_BINARY_MEDIA_TYPES
from infra.stack import LlogStack
from tests.infra.helpers import function_named_in, resources

NAG = Match.string_like_regexp("AwsSolutions-.*")


def paths(template: Template) -> dict[str, str]:
    """Logical id of each API resource -> its full path ("" for the root)."""
    api_resources = resources(template, "AWS::ApiGateway::Resource")
    (api_id,) = resources(template, "AWS::ApiGateway::RestApi")

    def path_of(logical_id: str) -> str:
        props = api_resources[logical_id]["Properties"]
        parent = props["ParentId"]
        prefix = "" if parent == {"Fn::GetAtt": [api_id, "RootResourceId"]} else path_of(parent["Ref"])
        return f"{prefix}/{props['PathPart']}"

    return {k: path_of(k) for k in api_resources}


def methods(template: Template) -> dict[tuple[str, str], dict[str, Any]]:
    """(path, method) -> method properties."""
    by_id = paths(template)
    out = {}
    for method in resources(template, "AWS::ApiGateway::Method").values():
        props = method["Properties"]
        resource = props["ResourceId"]
        path = by_id[resource["Ref"]] if "Ref" in resource else "/"
        out[(path, props["HttpMethod"])] = props
    return out


def target_function(stack: LlogStack, props: dict[str, Any]) -> str:
    return function_named_in(stack, props["Integration"]["Uri"])


def native_methods(template: Template) -> dict[tuple[str, str], dict[str, Any]]:
    """Every method but the Kinesis API's (``test_the_kinesis_api_is_unauthorized_at_the_gateway_only``)."""
    return {key: props for key, props in methods(template).items() if key[0] != routes.KINESIS_PATH}


def test_every_route_goes_to_its_function(dev_stack: LlogStack, dev_template: Template) -> None:
    found = methods(dev_template)
    for route in routes.ROUTES:
        props = found[(route.resource, route.method)]
        assert props["Integration"]["Type"] == "AWS_PROXY"
        assert props["Integration"]["IntegrationHttpMethod"] == "POST"
        assert target_function(dev_stack, props) == route.function, route


def test_any_on_every_resource_and_the_catch_all(dev_stack: LlogStack, dev_template: Template) -> None:
    found = methods(dev_template)
    all_paths = set(paths(dev_template).values()) | {"/"}
    assert routes.CATCH_ALL_RESOURCE in all_paths
    owners = {r.resource: r.function for r in routes.ROUTES} | {routes.KINESIS_PATH: names.KINESIS}
    for path in all_paths:
        props = found[(path, "ANY")]
        # The owner answers 405 for its other methods; the admin function 404 for unknown paths.
        assert target_function(dev_stack, props) == owners.get(path, names.ADMIN), path


def test_iam_mode_authorizes_every_method_with_iam(dev_template: Template) -> None:
    found = native_methods(dev_template)
    # Every route's method, and ANY on every resource (the root and the catch-all included).
    assert len(found) == len(routes.ROUTES) + len(set(paths(dev_template).values()) - {routes.KINESIS_PATH} | {"/"})
    for key, props in found.items():
        assert props["AuthorizationType"] == "AWS_IAM", key
        assert props.get("ApiKeyRequired") in (None, False), key


def test_api_key_mode_requires_keys_and_keeps_fencing_iam_only(api_key_template: Template) -> None:
    found = native_methods(api_key_template)
    topic_writes = {("/topics", "POST"), ("/topics/{topic}/partitions", "POST"), ("/topics/{topic}", "DELETE")}
    assert topic_writes <= set(found)
    for (path, method), props in found.items():
        if path.endswith(("/fence", "/unfence", "/compact")) or (path, method) in topic_writes:
            assert props["AuthorizationType"] == "AWS_IAM", (path, method)
            assert props.get("ApiKeyRequired") in (None, False), (path, method)
        else:
            # no method is open: NONE only together with a required API key
            assert props["AuthorizationType"] == "NONE", (path, method)
            assert props["ApiKeyRequired"] is True, (path, method)
    assert ("/topics/{topic}/partitions/{partition}/fence", "POST") in found
    assert ("/topics/{topic}/partitions/{partition}/unfence", "POST") in found
    assert ("/topics/{topic}/partitions/{partition}/compact", "POST") in found
    (plan,) = resources(api_key_template, "AWS::ApiGateway::UsagePlan").values()
    assert plan["Properties"]["Throttle"] == {"BurstLimit": 200, "RateLimit": 100}
    assert len(plan["Properties"]["ApiStages"]) == 1
    api_key_template.resource_count_is("AWS::ApiGateway::ApiKey", 1)
    api_key_template.resource_count_is("AWS::ApiGateway::UsagePlanKey", 1)
    (api,) = resources(api_key_template, "AWS::ApiGateway::RestApi").values()
    assert api["Properties"]["ApiKeySourceType"] == "HEADER"
    api_key_template.has_output("ApiKeyId", {})


def test_no_method_is_open_in_either_mode(dev_template: Template, api_key_template: Template) -> None:
    for template in (dev_template, api_key_template):
        for key, props in native_methods(template).items():
            assert props["AuthorizationType"] != "NONE" or props.get("ApiKeyRequired") is True, key


def test_the_kinesis_api_is_unauthorized_at_the_gateway_only(
    dev_stack: LlogStack, dev_template: Template, api_key_template: Template
) -> None:
    """Every method of /kinesis goes to the kinesis function, which checks the SDKs' SigV4 signature (service
    ``kinesis``) itself: IAM authorization would refuse it and the SDKs send no API key. The suppression of cdk-nag's
    finding says so on each method, and nothing else of the API is open."""
    for template in (dev_template, api_key_template):
        kinesis = {key: props for key, props in methods(template).items() if key[0] == routes.KINESIS_PATH}
        assert set(kinesis) == {(routes.KINESIS_PATH, "POST"), (routes.KINESIS_PATH, "ANY")}
        for key, props in kinesis.items():
            assert (props["AuthorizationType"], props["ApiKeyRequired"]) == ("NONE", False), key
            assert "RequestValidatorId" not in props, key  # the body is the function's to check, signature first
    for key, props in methods(dev_template).items():
        if key[0] == routes.KINESIS_PATH:
            assert target_function(dev_stack, props) == names.KINESIS, key
    suppressed = [
        method["Metadata"]["cdk_nag"]["rules_to_suppress"]
        for method in resources(dev_template, "AWS::ApiGateway::Method").values()
        if "kinesis" in json.dumps(method["Properties"]["ResourceId"]).lower()
    ]
    assert len(suppressed) == 2
    for rules in suppressed:
        (apig4,) = [rule for rule in rules if rule["id"] == "AwsSolutions-APIG4"]
        assert "kinesis function verifies" in apig4["reason"]


def test_cbor_is_the_only_binary_media_type(dev_template: Template) -> None:
    """CBOR bodies reach the function base64-encoded, as signed; no JSON body of the other routes has that type, so
    theirs arrive as text as before (the Lambda front checks both: tests/functions/test_lambda_front.py)."""
    (api,) = resources(dev_template, "AWS::ApiGateway::RestApi").values()
    assert api["Properties"]["BinaryMediaTypes"] == list(KINESIS_BINARY_MEDIA_TYPES) == ["application/x-amz-cbor-1.1"]
    for model in resources(dev_template, "AWS::ApiGateway::Model").values():
        assert model["Properties"]["ContentType"] == "application/json"


def test_produce_and_consume_validate_the_top_level_body(dev_template: Template) -> None:
    found = methods(dev_template)
    (validator_id, validator) = next(iter(resources(dev_template, "AWS::ApiGateway::RequestValidator").items()))
    assert validator["Properties"]["ValidateRequestBody"] is True
    models = resources(dev_template, "AWS::ApiGateway::Model")
    for path, title in (("/produce", "ProduceRequest"), ("/consume", "ConsumeRequest"), ("/offsets", "OffsetsRequest")):
        props = found[(path, "POST")]
        assert props["RequestValidatorId"] == {"Ref": validator_id}
        model_ref = props["RequestModels"]["application/json"]["Ref"]
        schema = models[model_ref]["Properties"]["Schema"]
        assert schema["type"] == "object"
        assert schema["required"] == ["topic_partitions"]
        assert schema["properties"] == {"topic_partitions": {"type": "array", "minItems": 1}}
        # Limits (maxItems, ...) stay with the handlers, whose answers name the setting.
        assert "maxItems" not in json.dumps(schema)
        assert title in json.dumps(models[model_ref])
    for (path, method), props in found.items():
        if (path, method) not in (("/produce", "POST"), ("/consume", "POST"), ("/offsets", "POST")):
            assert "RequestValidatorId" not in props, (path, method)


def test_gateway_errors_answer_in_the_handlers_json_shape(dev_template: Template) -> None:
    responses = {r["Properties"]["ResponseType"]: r["Properties"] for r in
                 resources(dev_template, "AWS::ApiGateway::GatewayResponse").values()}  # fmt: skip
    assert {"DEFAULT_4XX", "DEFAULT_5XX", "BAD_REQUEST_BODY", "THROTTLED", "QUOTA_EXCEEDED"} <= set(responses)
    for kind, props in responses.items():
        template = props["ResponseTemplates"]["application/json"]
        filled = template.replace("$context.error.messageString", '"message"').replace(
            "$context.error.responseType", "TYPE"
        )
        doc = json.loads(filled)
        assert set(doc) == {"error", "error_type", "retriable"}, kind
    bad_body = json.loads(responses["BAD_REQUEST_BODY"]["ResponseTemplates"]["application/json"])
    assert bad_body["error_type"] == "InvalidRequest"
    assert bad_body["retriable"] is False


def test_stage_logs_traces_and_throttles(dev_template: Template) -> None:
    (stage,) = resources(dev_template, "AWS::ApiGateway::Stage").values()
    props = stage["Properties"]
    assert props["StageName"] == "dev"
    assert props["TracingEnabled"] is True
    access = props["AccessLogSetting"]
    assert "DestinationArn" in access
    json.loads(access["Format"].replace("$context", "x"))  # JSON lines
    (settings,) = props["MethodSettings"]
    assert settings["ThrottlingRateLimit"] == 100
    assert settings["ThrottlingBurstLimit"] == 200
    assert settings["LoggingLevel"] == "ERROR"
    assert settings["DataTraceEnabled"] is False
    dev_template.resource_count_is("AWS::ApiGateway::Account", 1)
    (api,) = resources(dev_template, "AWS::ApiGateway::RestApi").values()
    assert api["Properties"]["EndpointConfiguration"] == {"Types": ["REGIONAL"]}
    dev_template.has_output("ApiUrl", {})


def test_integrations_allow_only_the_api_to_invoke(dev_template: Template) -> None:
    for permission in resources(dev_template, "AWS::Lambda::Permission").values():
        props = permission["Properties"]
        if props["Principal"] == "apigateway.amazonaws.com":
            assert "SourceArn" in props
            assert "/test-invoke-stage/" not in json.dumps(props["SourceArn"])


def test_api_key_mode_has_no_unsuppressed_findings(api_key_stack: LlogStack) -> None:
    annotations = Annotations.from_stack(api_key_stack)
    assert annotations.find_error("*", NAG) == []
    assert annotations.find_warning("*", NAG) == []
