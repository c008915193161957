"""The REST API: the routes of ``functions/common/routes.py`` as Lambda proxy integrations.

* Each route's resource and method goes to the function that owns it; ``ANY`` on the same
  resource goes to that function too, which answers 405 (JSON, with ``Allow``) for the other
  methods. ``ANY /`` and ``ANY /{proxy+}`` (and ``ANY`` on the intermediate resources
  ``/topics/{topic}`` and ``/topics/{topic}/partitions``) go to the admin function, which
  answers 404 in JSON, so API Gateway's own 403 "Missing Authentication Token" never answers
  an unknown path of an authorized caller.
* Auth (``llog:apiAuth``): ``iam`` (default): every method uses IAM (SigV4). ``api_key``:
  every method requires an API key of the usage plan, except fence/unfence/compact (and every method
  on their resources), which stay IAM-only.
* The Kinesis API (``routes.KINESIS_PATH``): every method of ``/kinesis`` goes to the kinesis function
  with no authorization at the gateway, in both modes. The AWS SDKs sign a Kinesis request with SigV4 for
  service ``kinesis``, which IAM authorization (service ``execute-api``) refuses, and send no API key; the
  function verifies that signature against the keys llog issued (``llog keys``) before anything runs, and
  refuses the rest with Kinesis's own errors. Its CBOR bodies (``KINESIS_BINARY_MEDIA_TYPES``, the API's
  binary media types) reach the function base64-encoded, byte for byte as signed; no other route's body has
  that type, so theirs arrive as before. No preflight: the function answers no cross-origin request.
* Request validation: ``POST /produce`` and ``POST /consume`` need a JSON object body with a
  non-empty ``topic_partitions`` array (``gateway_model``: the top-level shape of their definitions in
  ``llog.api.native.bodies``). Everything finer
  (and limits such as ``LLOG_MAX_PARTITIONS_PER_REQUEST``) stays with the handlers. The
  gateway's own errors answer in the handlers' JSON error shape
  (``{"error", "error_type", "retriable"}``); a failed validation is a 400 ``InvalidRequest``,
  like the handler's.
* Stage: JSON access logs to a log group, X-Ray tracing, execution logging of errors,
  throttling (stage-wide method settings, and the usage plan in ``api_key`` mode).
* CORS (``llog:corsOrigins``, none by default): an ``OPTIONS`` method on every resource answers
  the browser's preflight at the gateway (a mock integration: no API key, no IAM, no function),
  and the gateway's own error answers carry ``Access-Control-Allow-Origin``, so a page can read
  them; the functions add it to theirs (``functions.common.cors``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from cdk_nag import NagPackSuppression, NagSuppressions
from constructs import Construct, IConstruct

from functions.common import cors, names, routes
from infra.observability import PERIOD, ApiMetrics
from infra.settings import ApiAuth
from llog.api.kinesis import wire
from llog.api.native import bodies

ADMIN_IAM_ONLY_SUFFIXES = ("/fence", "/unfence", "/compact")
# Operator writes that stay IAM-only when clients use API keys: creating, growing and deleting topics.
ADMIN_IAM_ONLY_METHODS = frozenset(
    {("POST", "/topics"), ("POST", "/topics/{topic}/partitions"), ("DELETE", "/topics/{topic}")}
)
CATCH_ALL = "{proxy+}"
# What the AWS SDK for Java v2 speaks to Kinesis by default: binary, so API Gateway must pass it base64-encoded.
# A binary answer goes back as bytes when the request's first Accept is one of these too.
KINESIS_BINARY_MEDIA_TYPES = (wire.CBOR_CONTENT_TYPE,)

# API Gateway's validation message has unescaped quotes: a fixed text keeps the body valid JSON.
VALIDATION_MESSAGE = '"the request body must be a JSON object with a non-empty topic_partitions array"'


def _error_template(error: str, error_type: str, retriable: bool) -> dict[str, str]:
    body = f'{{"error":{error},"error_type":"{error_type}","retriable":{str(retriable).lower()}}}'
    return {"application/json": body}


def gateway_model(body: type[msgspec.Struct]) -> apigw.JsonSchema:
    """The gateway's check of a request body, derived from its definition: its top-level shape only (an object,
    the required fields with their JSON types and lengths). Everything finer is the handler's, whose errors name
    the field and the rule."""
    definition = msgspec.json.schema(body)["$defs"][body.__name__]
    required = definition["required"]
    properties = {}
    for name in required:
        field = definition["properties"][name]
        properties[name] = apigw.JsonSchema(
            type=apigw.JsonSchemaType[field["type"].upper()], min_items=field.get("minItems")
        )
    return apigw.JsonSchema(
        schema=apigw.JsonSchemaVersion.DRAFT4,
        title=body.__name__,
        type=apigw.JsonSchemaType.OBJECT,
        required=required,
        properties=properties,
    )


def is_iam_only(resource: str, method: str = "ANY") -> bool:
    return resource.endswith(ADMIN_IAM_ONLY_SUFFIXES) or (method, resource) in ADMIN_IAM_ONLY_METHODS


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        functions: Mapping[str, lambda_.IFunction],
        auth: ApiAuth,
        throttle_rate: int,
        throttle_burst: int,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
        cors_origins: tuple[str, ...] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        self.auth = auth
        self.access_log_group = logs.LogGroup(
            self, "AccessLogs", retention=log_retention, removal_policy=removal_policy
        )
        self.api = apigw.RestApi(
            self,
            "RestApi",
            rest_api_name=f"llog-{stage}",
            description=f"llog {stage}: produce, consume, admin and the Kinesis API",
            binary_media_types=list(KINESIS_BINARY_MEDIA_TYPES),
            endpoint_types=[apigw.EndpointType.REGIONAL],
            # API Gateway writes access and execution logs through the account's CloudWatch role.
            cloud_watch_role=True,
            cloud_watch_role_removal_policy=RemovalPolicy.RETAIN,
            api_key_source_type=apigw.ApiKeySourceType.HEADER if auth == "api_key" else None,
            deploy_options=apigw.StageOptions(
                stage_name=stage,
                access_log_destination=apigw.LogGroupLogDestination(self.access_log_group),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
                tracing_enabled=True,
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,
                metrics_enabled=True,
                throttling_rate_limit=throttle_rate,
                throttling_burst_limit=throttle_burst,
            ),
            disable_execute_api_endpoint=False,
        )
        self._add_gateway_responses(cors_origins)
        self.validator = self.api.add_request_validator(
            "BodyValidator", validate_request_body=True, validate_request_parameters=True
        )
        self.request_models: dict[str, apigw.Model] = {}
        # Keyed by path: the produce and consume functions own other POST routes with other bodies.
        for path, body in (
            ("/produce", bodies.ProduceRequest),
            ("/consume", bodies.ConsumeRequest),
            ("/offsets", bodies.OffsetsRequest),
        ):
            title = body.__name__
            self.request_models[path] = self.api.add_model(
                f"{title}Model",
                content_type="application/json",
                model_name=title,
                schema=gateway_model(body),
            )

        self._integrations = {
            name: apigw.LambdaIntegration(fn, proxy=True, allow_test_invoke=False) for name, fn in functions.items()
        }
        self.methods: list[apigw.Method] = []
        owners: dict[str, str] = {}
        for route in routes.ROUTES:
            resource = self._resource(route.resource)
            owners[route.resource] = route.function
            body_model = self.request_models.get(route.resource) if route.method == "POST" else None
            self._method(
                resource,
                route.method,
                route.function,
                iam_only=is_iam_only(route.resource, route.method),
                model=body_model,
            )
        self.kinesis_methods = self._add_kinesis()
        # ANY on every resource: the owner answers 405, the admin function 404 elsewhere.
        for resource in self._native_resources():
            path = resource.path
            owner = owners.get(path, names.ADMIN)
            self._method(resource, "ANY", owner, iam_only=is_iam_only(path))
        self._method(self.api.root, "ANY", names.ADMIN, iam_only=False)
        proxy = self.api.root.add_resource(CATCH_ALL)
        self._method(proxy, "ANY", names.ADMIN, iam_only=False)
        # Preflights: an OPTIONS method beats ANY on its resource; {proxy+}'s covers unknown paths.
        self.preflight_methods: list[apigw.Method] = []
        if cors_origins:
            for preflighted in (self.api.root, *self._native_resources()):
                self.preflight_methods.append(
                    preflighted.add_cors_preflight(
                        allow_origins=list(cors_origins),
                        allow_headers=list(cors.ALLOW_HEADERS),
                        allow_methods=list(cors.ALLOW_METHODS),
                        max_age=Duration.seconds(cors.MAX_AGE_S),
                    )
                )

        self.usage_plan: apigw.UsagePlan | None = None
        self.api_key: apigw.IApiKey | None = None
        if auth == "api_key":
            self.usage_plan = self.api.add_usage_plan(
                "UsagePlan",
                name=f"llog-{stage}",
                description=f"llog {stage}: API-key clients of produce, consume and the read-only admin routes",
                throttle=apigw.ThrottleSettings(rate_limit=throttle_rate, burst_limit=throttle_burst),
                api_stages=[apigw.UsagePlanPerApiStage(api=self.api, stage=self.api.deployment_stage)],
            )
            self.api_key = self.api.add_api_key("DefaultKey", api_key_name=f"llog-{stage}-default")
            self.usage_plan.add_api_key(self.api_key)

        suppressions = [
            NagPackSuppression(
                id="AwsSolutions-APIG3",
                reason="No WAF web ACL yet: every method needs IAM (SigV4), an API key or (/kinesis) a SigV4 "
                "signature the kinesis function checks, and the stage is throttled; a regional web ACL can be "
                "associated later without changing the API.",
            ),
            NagPackSuppression(
                id="AwsSolutions-COG4",
                reason="The callers are services and operators with AWS credentials (IAM/SigV4), API keys or "
                "llog-issued Kinesis access keys; there is no end-user directory, so no Cognito user pool "
                "authorizer.",
            ),
        ]
        if auth == "api_key":
            suppressions.append(
                NagPackSuppression(
                    id="AwsSolutions-APIG4",
                    reason="llog:apiAuth=api_key: produce, consume and the read-only routes are authorized by "
                    "a required API key of the usage plan (AuthorizationType NONE plus ApiKeyRequired); "
                    "fence/unfence/compact stay IAM-only.",
                )
            )
        NagSuppressions.add_resource_suppressions(self.api, suppressions, apply_to_children=True)
        cloud_watch_role = self.api.node.try_find_child("CloudWatchRole")
        if cloud_watch_role is not None:
            NagSuppressions.add_resource_suppressions(
                cloud_watch_role,
                [
                    NagPackSuppression(
                        id="AwsSolutions-IAM4",
                        reason="AmazonAPIGatewayPushToCloudWatchLogs is the AWS-managed policy API Gateway's "
                        "account-level logging role is made for; it is used by API Gateway alone.",
                        applies_to=[
                            "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                            "AmazonAPIGatewayPushToCloudWatchLogs"
                        ],
                    )
                ],
                apply_to_children=True,
            )

    @property
    def url(self) -> str:
        return self.api.url

    def metrics(self) -> ApiMetrics:
        dimensions = {"ApiName": self.api.rest_api_name, "Stage": self.api.deployment_stage.stage_name}

        def metric(name: str, statistic: str = "Sum") -> cw.Metric:
            return self.api.metric(name, dimensions_map=dimensions, statistic=statistic, period=PERIOD)

        return ApiMetrics(
            count=metric("Count"),
            client_errors=metric("4XXError"),
            server_errors=metric("5XXError"),
            latency=metric("Latency", "p99"),
            integration_latency=metric("IntegrationLatency", "p99"),
        )

    # -- helpers ----------------------------------------------------------------------------

    def _resource(self, path: str) -> apigw.Resource:
        resource = self.api.root
        for part in path.strip("/").split("/"):
            child = resource.get_resource(part)
            resource = child if child is not None else resource.add_resource(part)
        assert isinstance(resource, apigw.Resource)
        return resource

    def _native_resources(self) -> list[apigw.Resource]:
        """Every resource but the Kinesis API's."""
        found: list[apigw.Resource] = []

        def walk(node: IConstruct) -> None:
            for child in node.node.children:
                if isinstance(child, apigw.Resource) and child.path != routes.KINESIS_PATH:
                    found.append(child)
                    walk(child)

        walk(self.api.root)
        return found

    def _add_kinesis(self) -> list[apigw.Method]:
        """POST (every operation) and ANY (Kinesis's error for the other methods) on ``/kinesis``, unauthorized
        at the gateway: the function checks the SigV4 signature itself (the module's docstring says why)."""
        resource = self._resource(routes.KINESIS_PATH)
        added = []
        for http_method in ("POST", "ANY"):
            method = resource.add_method(http_method, self._integrations[names.KINESIS],
                                         authorization_type=apigw.AuthorizationType.NONE,
                                         api_key_required=False)  # fmt: skip
            NagSuppressions.add_resource_suppressions(
                method,
                [
                    NagPackSuppression(
                        id="AwsSolutions-APIG4",
                        reason="The Kinesis API is signed with SigV4 for service kinesis, which IAM authorization "
                        "cannot check and API keys do not apply to (the SDKs send none); the kinesis function "
                        "verifies the signature against the keys llog issued before any operation runs.",
                    )
                ],
            )
            added.append(method)
        self.methods += added
        return added

    def _method(
        self,
        resource: apigw.IResource,
        http_method: str,
        function: str,
        *,
        iam_only: bool,
        model: apigw.Model | None = None,
    ) -> apigw.Method:
        iam = self.auth == "iam" or iam_only
        options: dict[str, Any] = {
            "authorization_type": apigw.AuthorizationType.IAM if iam else apigw.AuthorizationType.NONE,
            "api_key_required": not iam,
        }
        if model is not None:
            options["request_validator"] = self.validator
            options["request_models"] = {"application/json": model}
        method = resource.add_method(http_method, self._integrations[function], **options)
        self.methods.append(method)
        return method

    def _add_gateway_responses(self, cors_origins: tuple[str, ...]) -> None:
        headers: dict[str, str] | None = None
        if len(cors_origins) == 1:
            headers = {"Access-Control-Allow-Origin": f"'{cors_origins[0]}'"}
        elif cors_origins:
            # A gateway response cannot choose among origins, so it echoes the caller's. What it reveals is
            # the gateway's own error message, which the same request from anywhere else gets too (API keys
            # and SigV4 are explicit headers, never ambient credentials); the preflight and the functions'
            # answers still admit the listed origins only.
            headers = {"Access-Control-Allow-Origin": "method.request.header.origin", "Vary": "'Origin'"}
        responses = (
            (apigw.ResponseType.DEFAULT_4_XX, "$context.error.messageString", "$context.error.responseType", False),
            (apigw.ResponseType.DEFAULT_5_XX, "$context.error.messageString", "$context.error.responseType", True),
            (apigw.ResponseType.THROTTLED, "$context.error.messageString", "Throttled", True),
            (apigw.ResponseType.QUOTA_EXCEEDED, "$context.error.messageString", "QuotaExceeded", True),
            (apigw.ResponseType.BAD_REQUEST_BODY, VALIDATION_MESSAGE, "InvalidRequest", False),
        )
        for response_type, error, error_type, retriable in responses:
            self.api.add_gateway_response(
                f"Response{response_type.response_type}",
                type=response_type,
                templates=_error_template(error, error_type, retriable),
                response_headers=headers,
            )
