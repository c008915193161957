"""What the three functions share around Powertools' ``APIGatewayRestResolver``.

``create_resolver`` gives a resolver that answers, in JSON
(``{"error", "error_type", "retriable"}``):

* an unknown path with 404 (``NotFound``), a known path with another method
  (any method, TRACE included) with 405 (``MethodNotAllowed``, with ``Allow``):
  the owner's other methods reach the owner behind the REST API, and the admin
  function behind the HTTP API (infra/http_api.py);
* any exception with the status ``llog.api.native.errors`` maps it to
  (Powertools' pydantic validation is not used: requests are parsed by
  ``llog.api.native.contract``, whose rejections are the 400/413 of docs/HTTP_API.md).

Before a route of any method but ``GET``, ``HEAD`` and ``OPTIONS`` runs, the
resolver refuses with 415 ``UnsupportedMediaType`` a request any web page could
send without a CORS preflight (``functions.common.browser``).

With ``LLOG_CORS_ORIGINS`` set (``functions.common.cors``), every one of these
answers, errors included, carries ``Access-Control-Allow-Origin`` for an allowed
``Origin``, and an ``OPTIONS`` request is answered 204 as a preflight (Powertools'
``CORSConfig``; behind the REST API the gateway answers preflights itself).

``llog serve`` runs handlers on many threads at once, so there is one resolver
per thread (``PerThread``), and each keeps its request on itself
(``ThreadOwnResolver``): Powertools stores the current event on ``BaseRouter``,
the class, which every resolver of the process shares.

``llog.api.native.contract`` is imported by the first request that parses a
body, not with this module: it loads the services, hence the Oxia and S3
clients' modules, which a handler's import (the Lambda init phase) should not.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from typing import Any, cast

import msgspec
import orjson
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, CORSConfig, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.common import browser, cors, routes
from functions.common.lazy import PerThread
from functions.common.telemetry import Handler, Telemetry
from llog.api.native.errors import Error, RequestRejected, client_error, error_answer
from llog.config import cors_origins_from_env
from llog.errors import LlogError

JSON = "application/json"


_ENCODER = msgspec.json.Encoder()


def json_bytes(doc: Any) -> bytes:
    """``doc`` as compact UTF-8 JSON, written in C: an answer of ``llog.api.native.bodies`` by msgspec, plain data
    (a consume answer, metrics) by orjson, which writes large strings about twice as fast. UTF-8 text stays 1-4
    bytes a character (not \\uXXXX), which matters under Lambda's 6 MB response limit; integer keys are written as
    strings, as ``json`` does."""
    if isinstance(doc, msgspec.Struct):
        return _ENCODER.encode(doc)
    return orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS)


def json_text(doc: Any) -> str:
    return json_bytes(doc).decode("utf-8")


def json_response(status: int, doc: Any, headers: dict[str, str] | None = None) -> Response[str]:
    return Response(status_code=status, content_type=JSON, body=json_text(doc), headers=headers)


def request_body(event: APIGatewayProxyEvent) -> str | bytes | None:
    """The raw body, base64-decoded when API Gateway passed it as binary."""
    body = event.body
    if body is None or not event.is_base64_encoded:
        return body
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise RequestRejected("the request body is marked base64-encoded but is not valid base64") from None


def request_id(event: APIGatewayProxyEvent) -> str | None:
    try:
        return event.request_context.request_id
    except (KeyError, TypeError, AttributeError):
        return None


class ThreadOwnResolver(APIGatewayRestResolver):
    """A resolver whose current event and context are its own, not the class-wide ones.

    Powertools assigns ``BaseRouter.current_event`` and reads ``self.current_event``;
    an instance attribute set first shadows the shared class attribute, so a
    resolver used by one thread only never sees another thread's request.
    """

    def _to_proxy_event(self, event: dict[str, Any]) -> APIGatewayProxyEvent:
        self.current_event = cast(APIGatewayProxyEvent, super()._to_proxy_event(event))
        return self.current_event

    def resolve(self, event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
        self.lambda_context = context
        return super().resolve(event, context)


def cors_config() -> CORSConfig | None:
    """CORS for the origins of ``LLOG_CORS_ORIGINS``, read once per resolver; None (no CORS) without any."""
    origins = cors_origins_from_env()
    if not origins:
        return None
    return CORSConfig(
        allow_origin=origins[0],
        extra_origins=list(origins[1:]),
        allow_headers=list(cors.ALLOW_HEADERS),
        max_age=cors.MAX_AGE_S,
    )


def refuse_cross_site(app: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response[Any]:
    """A global middleware: ``browser.cross_site_problem`` is a 415 (through the error handler, with CORS headers)."""
    event = app.current_event
    headers = event.headers  # case-insensitive (Powertools)
    problem = browser.cross_site_problem(
        event.http_method, headers.get("content-type"), bool(event.body), headers.get("origin")
    )
    if problem is not None:
        raise RequestRejected(problem, status=browser.UNSUPPORTED_MEDIA_TYPE, error_type=browser.ERROR_TYPE)
    return next_middleware(app)


def answer_error(telemetry: Telemetry, exc: Exception, rid: str | None) -> tuple[int, Error, dict[str, str]]:
    """The answer to an exception that ended a request, logged and counted as the function's."""
    status, body, headers = error_answer(exc, rid)
    if status >= 500 and not (isinstance(exc, LlogError) and exc.retriable):
        telemetry.logger.exception("request failed", extra={"status": status, "error_type": body.error_type})
    else:
        telemetry.logger.warning(
            "request answered with an error",
            extra={"status": status, "error_type": body.error_type, "error": body.error},
        )
    telemetry.errors([body.error_type])
    return status, body, headers


def create_resolver(telemetry: Telemetry) -> APIGatewayRestResolver:
    """A resolver with llog's error, 404 and 405 answers for ``telemetry``'s function, which adds its routes."""
    app = ThreadOwnResolver(cors=cors_config())
    app.use(middlewares=[refuse_cross_site])

    def on_error(exc: Exception) -> Response[str]:
        return json_response(*answer_error(telemetry, exc, request_id(app.current_event)))

    app.exception_handler(Exception)(on_error)

    @app.not_found
    def not_found(exc: NotFoundError) -> Response[str]:
        # No route matched the method and path: 405 if the path is a route's (any method), else 404.
        event = app.current_event
        allowed = routes.match(event.path).allowed_methods
        if allowed:
            telemetry.errors(["MethodNotAllowed"])
            message = f"{event.http_method} is not allowed on {event.path}; use {', '.join(allowed)}"
            return json_response(405, client_error(message, "MethodNotAllowed"), {"Allow": ", ".join(allowed)})
        telemetry.errors(["NotFound"])
        return json_response(404, client_error(f"no route for {event.http_method} {event.path}", "NotFound"))

    return app


def resolver_handler(telemetry: Telemetry, create_app: Callable[[], APIGatewayRestResolver]) -> Handler[dict[str, Any]]:
    """The Lambda handler: one resolver per thread, the request id echoed as ``X-Request-Id``."""
    apps = PerThread(create_app)

    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        response = apps.get().resolve(event, context)
        rid = (event.get("requestContext") or {}).get("requestId")
        if rid:
            response.setdefault("multiValueHeaders", {})["X-Request-Id"] = [str(rid)]
        return response

    return telemetry.lambda_handler(handler)
