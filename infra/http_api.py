"""The HTTP API front door (``llog:frontDoor=http``): the routes of ``functions/common/routes.py`` on an
API Gateway HTTP API, at $1.00 per million requests instead of the REST API's $3.50 (docs/COST.md).

* The same routes and owners as the REST API (infra/api.py): each route's method and path goes to
  the function that owns it; every other method but ``OPTIONS`` (``ROUTE_METHODS``) on every other
  path, ``/`` and the known paths included, goes to the admin function (``/{proxy+}`` and ``/``),
  which answers 405 with ``Allow`` for a known path and 404 for the rest, in JSON.
* Auth: IAM (SigV4) on every route but the Kinesis API's: every method of ``/kinesis`` goes to the kinesis
  function, which checks the Kinesis SDKs' signature itself (infra/api.py says why). HTTP APIs have no API keys
  or usage plans, so ``llog:apiAuth`` must be ``iam`` (infra/settings.py refuses ``api_key``). An HTTP API
  passes a body it does not take for text (CBOR) base64-encoded by itself: no binary media types to set.
* Payload format 1.0: the functions receive the REST API's event shape (``resource``, ``path``,
  ``httpMethod``, ``multiValueHeaders``, ``requestContext.requestId``), which Powertools'
  ``APIGatewayRestResolver`` (functions/common/http.py) serves unchanged.
* Stage ``$default`` (no stage segment in the URL), deployed automatically, throttled stage-wide,
  JSON access logs to a log group.
* CORS (``llog:corsOrigins``, none by default): the API's ``cors_preflight`` configuration, whose
  headers the gateway puts on every answer to a listed origin. The gateway answers a preflight by
  itself, without invoking a function or asking for a signature, where no route matches
  ``OPTIONS``; an ``ANY`` route or a ``$default`` route would (both match every method), so there
  are none: no route has ``OPTIONS``. A page still has to sign every other request with SigV4
  (docs/CONSOLE.md). Without CORS an ``OPTIONS`` is the gateway's own 404 (``{"message": "Not
  Found"}``), as is a method an HTTP API route cannot have (``TRACE``).

What it gives up against the REST API (docs/DEPLOY.md, "Front door"): API keys and usage plans,
request-body validation at the gateway (the handlers validate every body anyway, with the same
400 ``InvalidRequest``), llog's JSON error shape on the gateway's own answers (an HTTP API answers
a failed signature with ``{"message": "Forbidden"}`` and throttling with ``{"message": "Too Many
Requests"}``), X-Ray tracing of the gateway (the functions still trace), execution logs, and a
WAF web ACL (HTTP APIs cannot have one). Payload limits are the same in practice: 10 MB at the
gateway, 6 MB for a synchronous Lambda invocation (``LLOG_MAX_REQUEST_BYTES``); the integration
timeout is 30 s (REST: 29 s).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import jsii
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from cdk_nag import NagPackSuppression, NagSuppressions
from constructs import Construct

from functions.common import cors, names, routes
from infra.observability import PERIOD, ApiMetrics

DEFAULT_STAGE = "$default"
# The methods a route of this API has: all an HTTP API route can have, but OPTIONS (the gateway's preflights) and
# ANY (which matches OPTIONS too).
ROUTE_METHODS = tuple(m for m in apigwv2.HttpMethod if m not in (apigwv2.HttpMethod.OPTIONS, apigwv2.HttpMethod.ANY))


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogs:
    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        # HTTP API context variables ($context.identity.caller/user and resourcePath are REST API ones).
        fields = {
            "requestId": "$context.requestId",
            "ip": "$context.identity.sourceIp",
            "requestTime": "$context.requestTime",
            "httpMethod": "$context.httpMethod",
            "routeKey": "$context.routeKey",
            "path": "$context.path",
            "status": "$context.status",
            "protocol": "$context.protocol",
            "responseLength": "$context.responseLength",
            "userArn": "$context.identity.userArn",
            "integrationError": "$context.integrationErrorMessage",
        }
        return apigw.AccessLogFormat.custom(json.dumps(fields, separators=(",", ":")))


class HttpFrontDoor(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        functions: Mapping[str, lambda_.IFunction],
        throttle_rate: int,
        throttle_burst: int,
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
        cors_origins: tuple[str, ...] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        self.access_log_group = logs.LogGroup(
            self, "AccessLogs", retention=log_retention, removal_policy=removal_policy
        )
        integration = {
            name: integrations.HttpLambdaIntegration(
                f"{name}Integration", fn, payload_format_version=apigwv2.PayloadFormatVersion.VERSION_1_0
            )
            for name, fn in functions.items()
        }
        self.api = apigwv2.HttpApi(
            self,
            "HttpApi",
            api_name=f"llog-{stage}",
            description=f"llog {stage}: produce, consume, admin and the Kinesis API",
            create_default_stage=False,
            default_authorizer=authorizers.HttpIamAuthorizer(),
            disable_execute_api_endpoint=False,
            cors_preflight=apigwv2.CorsPreflightOptions(
                allow_origins=list(cors_origins),
                allow_headers=list(cors.ALLOW_HEADERS),
                allow_methods=[apigwv2.CorsHttpMethod(method) for method in cors.ALLOW_METHODS],
                max_age=Duration.seconds(cors.MAX_AGE_S),
            )
            if cors_origins
            else None,
        )
        self.routes: list[apigwv2.HttpRoute] = []
        for route in routes.ROUTES:
            self.routes += self.api.add_routes(
                path=route.resource, methods=[apigwv2.HttpMethod(route.method)], integration=integration[route.function]
            )
        kinesis = self.api.add_routes(path=routes.KINESIS_PATH, methods=list(ROUTE_METHODS),
                                      integration=integration[names.KINESIS],
                                      authorizer=apigwv2.HttpNoneAuthorizer())  # fmt: skip
        for kinesis_route in kinesis:
            NagSuppressions.add_resource_suppressions(
                kinesis_route,
                [
                    NagPackSuppression(
                        id="AwsSolutions-APIG4",
                        reason="The Kinesis API is signed with SigV4 for service kinesis, which IAM authorization "
                        "cannot check; the kinesis function verifies the signature against the keys llog issued "
                        "before any operation runs.",
                    )
                ],
            )
        self.routes += kinesis
        # The rest (a route's other methods, unknown paths): the admin function's 405 or 404. A route matches a
        # path and a method exactly before a /{proxy+} one.
        for path in ("/", routes.CATCH_ALL_RESOURCE):
            admin = integration[names.ADMIN]
            self.routes += self.api.add_routes(path=path, methods=list(ROUTE_METHODS), integration=admin)
        self.stage = apigwv2.HttpStage(
            self,
            "Stage",
            http_api=self.api,
            stage_name=DEFAULT_STAGE,
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(rate_limit=throttle_rate, burst_limit=throttle_burst),
            access_log_settings=_AccessLogs(self.access_log_group),
        )

    @property
    def url(self) -> str:
        return self.stage.url

    def metrics(self) -> ApiMetrics:
        return ApiMetrics(
            count=self.stage.metric_count(period=PERIOD),
            client_errors=self.stage.metric_client_error(period=PERIOD),
            server_errors=self.stage.metric_server_error(period=PERIOD),
            latency=self.stage.metric_latency(period=PERIOD, statistic="p99"),
            integration_latency=self.stage.metric_integration_latency(period=PERIOD, statistic="p99"),
        )
