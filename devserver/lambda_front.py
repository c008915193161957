"""The REST API of a synthesized template in front of the emulated functions: ``LLOG_DEV_FRONT=lambda make dev``.

An HTTP server that does, from the template alone, what API Gateway's REST API does with a request before
and after the Lambda proxy integration (infra/api.py defines them):

* **routing**: the resource tree (``AWS::ApiGateway::Resource``) and its methods; a literal path part wins
  over ``{name}``, which wins over ``{name+}``; the method itself, else ``ANY``. No method: 403
  ``MISSING_AUTHENTICATION_TOKEN``, as API Gateway answers.
* **request validation**: a method with a body-validating ``RequestValidatorId`` and a ``RequestModels``
  schema (JSON Schema draft 4, checked with ``jsonschema_rs``) refuses a body that is not JSON or does not
  match: 400 ``BAD_REQUEST_BODY``. A body over API Gateway's 10 MB payload limit: 413.
* **the proxy event**: the REST API's payload format 1.0 (as events/ has them): ``resource``, ``path``,
  ``pathParameters``, single and multi-value headers and query strings, ``requestContext`` with the stage,
  request id and source IP. A body whose ``Content-Type`` is one of the API's ``BinaryMediaTypes`` (the
  Kinesis API's CBOR) is passed base64-encoded, any other as text. The front's URLs have no stage segment,
  as a custom domain name with an empty base path: ``requestContext.path`` is the path the client asked for,
  as API Gateway sets it (the path a Kinesis client signed, which the kinesis function verifies).
* **the answer**: the function's ``statusCode``, headers and body; a base64 body (``isBase64Encoded``) is
  turned back into bytes when the request's first ``Accept`` type is a binary media type, else passed as the
  text it is, as API Gateway does. A failed invocation is 502, no answer within the integration timeout of
  29 s is 504.
* **gateway responses**: API Gateway's own errors take the template's ``GatewayResponse`` of their type
  (else ``DEFAULT_4XX``/``DEFAULT_5XX``), with ``$context`` variables filled in.

Each function is a :class:`~devserver.emulator.FunctionPool`: concurrent requests (long polls) get
environments of their own, up to a limit, as Lambda scales.

Not done here, and said by make dev's banner: authorization (no SigV4 or API key is checked: the dev stage's
methods need IAM, and any request passes; ``/kinesis`` has none at the gateway, and its function checks the
signature as deployed), throttling and usage plans, WAF, and the stage's access logs.
"""

from __future__ import annotations

import base64
import fnmatch
import itertools
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import jsonschema_rs

from devserver.emulator import (
    EmulatedFunction,
    FunctionError,
    FunctionPool,
    FunctionTemplate,
    Synthesized,
    find_rie,
    find_runtime_python,
    function_environment,
    function_templates,
    lay_out,
)

log = logging.getLogger("llog.dev.lambda_front")

# API Gateway's limits of a REST API (quotas that cannot be raised).
MAX_PAYLOAD_BYTES = 10 * 1024 * 1024
INTEGRATION_TIMEOUT_S = 29.0


@dataclass(frozen=True)
class Method:
    """One method of the REST API: what serves it and what API Gateway checks first."""

    http_method: str
    resource_path: str
    function: str  # the logical id of the Lambda function of its proxy integration
    body_schema: Mapping[str, Any] | None  # the request model's schema, when its validator checks bodies


@dataclass(frozen=True)
class GatewayError:
    """An answer API Gateway gives itself, before or instead of the function's."""

    status: int
    response_type: str
    message: str


class RestApi:
    """The REST API of a synthesized template: its routes and its gateway responses."""

    def __init__(self, template: Mapping[str, Any]) -> None:
        resources = template["Resources"]
        apis = [k for k, r in resources.items() if r["Type"] == "AWS::ApiGateway::RestApi"]
        if len(apis) != 1:
            raise ValueError(f"the template has {len(apis)} REST APIs; the lambda front serves exactly one")
        parents = {k: r["Properties"] for k, r in resources.items() if r["Type"] == "AWS::ApiGateway::Resource"}
        functions = {k for k, r in resources.items() if r["Type"] == "AWS::Lambda::Function"}

        def path(resource_id: Any) -> str:
            if isinstance(resource_id, dict) and "Ref" in resource_id:
                resource = parents[resource_id["Ref"]]
                return path(resource["ParentId"]).rstrip("/") + "/" + str(resource["PathPart"])
            return "/"  # Fn::GetAtt [<RestApi>, RootResourceId]

        validates_body = {
            k for k, r in resources.items()
            if r["Type"] == "AWS::ApiGateway::RequestValidator" and r["Properties"].get("ValidateRequestBody")
        }  # fmt: skip
        models = {k: r["Properties"]["Schema"] for k, r in resources.items() if r["Type"] == "AWS::ApiGateway::Model"}
        self.methods: dict[tuple[str, str], Method] = {}
        for resource in resources.values():
            if resource["Type"] != "AWS::ApiGateway::Method":
                continue
            props = resource["Properties"]
            uri = json.dumps(props.get("Integration", {}).get("Uri", ""))
            targets = [f for f in functions if f in uri]
            if not targets:
                continue  # CORS preflights (MOCK integrations): not in the dev stage
            schema = None
            if props.get("RequestValidatorId", {}).get("Ref") in validates_body:
                model = props.get("RequestModels", {}).get("application/json")
                schema = models[model["Ref"]] if model else None
            method = Method(props["HttpMethod"], path(props["ResourceId"]), targets[0], schema)
            self.methods[(method.http_method, method.resource_path)] = method
        self.responses = {
            r["Properties"]["ResponseType"]: r["Properties"]
            for r in resources.values()
            if r["Type"] == "AWS::ApiGateway::GatewayResponse"
        }
        self._resource_paths = sorted({resource_path for _, resource_path in self.methods})
        stages = [r["Properties"]["StageName"] for r in resources.values() if r["Type"] == "AWS::ApiGateway::Stage"]
        self.stage = stages[0] if stages else "dev"
        self.binary_media_types = tuple(resources[apis[0]]["Properties"].get("BinaryMediaTypes", ()))

    def is_binary(self, media_type: str | None) -> bool:
        """Whether API Gateway takes ``media_type`` (a Content-Type, or the first type of an Accept) for binary."""
        if not media_type:
            return False
        essence = media_type.split(";")[0].strip().lower()
        return any(fnmatch.fnmatchcase(essence, pattern.lower()) for pattern in self.binary_media_types)

    def route(self, http_method: str, path: str) -> tuple[Method, dict[str, str]] | None:
        """The method that serves ``http_method`` on ``path``, and its path parameters; None: no such method."""
        best: tuple[tuple[int, ...], str, dict[str, str]] | None = None
        for resource_path in self._resource_paths:
            matched = _match(resource_path, path)
            if matched is None:
                continue
            rank, parameters = matched
            if best is None or rank > best[0]:
                best = (rank, resource_path, parameters)
        if best is None:
            return None
        _, resource_path, parameters = best
        method = self.methods.get((http_method, resource_path)) or self.methods.get(("ANY", resource_path))
        return (method, parameters) if method is not None else None

    def gateway_response(self, error: GatewayError, request_id: str) -> tuple[int, dict[str, str], bytes]:
        """API Gateway's answer for ``error``: the template's gateway response of its type, else the default."""
        default = "DEFAULT_5XX" if error.status >= 500 else "DEFAULT_4XX"
        response = self.responses.get(error.response_type) or self.responses.get(default) or {}
        status = int(response.get("StatusCode", error.status))
        body_template = response.get("ResponseTemplates", {}).get("application/json")
        if body_template is None:
            body = json.dumps({"message": error.message})
        else:
            values = {
                "$context.error.messageString": json.dumps(error.message),
                "$context.error.message": error.message,
                "$context.error.responseType": error.response_type,
                "$context.error.validationErrorString": error.message,
                "$context.requestId": request_id,
            }
            body = re.sub(r"\$context(?:\.[A-Za-z]+)+", lambda m: _filled(values, m.group(0)), body_template)
        headers = {"Content-Type": "application/json", "x-amzn-ErrorType": error.response_type}
        for parameter, value in response.get("ResponseParameters", {}).items():
            if value.startswith("'") and value.endswith("'"):
                headers[parameter.removeprefix("gatewayresponse.header.")] = value[1:-1]
        return status, headers, body.encode()


def _filled(values: Mapping[str, str], variable: str) -> str:
    if variable not in values:
        raise ValueError(f"a gateway response template uses {variable}, which the lambda front does not fill")
    return values[variable]


def _match(resource_path: str, path: str) -> tuple[tuple[int, ...], dict[str, str]] | None:
    """How specifically ``resource_path`` matches ``path`` (higher wins, part by part), and its parameters."""
    wanted = [part for part in resource_path.split("/") if part]
    parts = [unquote(part) for part in path.split("/") if part]
    rank: list[int] = []
    parameters: dict[str, str] = {}
    for i, pattern in enumerate(wanted):
        if pattern.startswith("{") and pattern.endswith("+}"):
            if i >= len(parts):
                return None
            parameters[pattern[1:-2]] = "/".join(parts[i:])
            return (*rank, 0), parameters
        if i >= len(parts):
            return None
        if pattern.startswith("{") and pattern.endswith("}"):
            parameters[pattern[1:-1]] = parts[i]
            rank.append(1)
        elif pattern == parts[i]:
            rank.append(2)
        else:
            return None
    return ((*rank,), parameters) if len(wanted) == len(parts) else None


def proxy_event(
    method: Method, parameters: Mapping[str, str], http_method: str, target: str,
    headers: list[tuple[str, str]], body: bytes, *, stage: str, request_id: str, source_ip: str, binary: bool,
) -> dict[str, Any]:  # fmt: skip
    """The Lambda proxy integration's event (payload format 1.0) API Gateway sends the function; ``binary``: the
    body's type is a binary media type, so it goes base64-encoded."""
    url = urlsplit(target)
    single: dict[str, str] = {}
    multi: dict[str, list[str]] = {}
    for name, value in headers:
        single[name] = value
        multi.setdefault(name, []).append(value)
    query = parse_qsl(url.query, keep_blank_values=True)
    query_multi: dict[str, list[str]] = {}
    for name, value in query:
        query_multi.setdefault(name, []).append(value)
    now = time.time()
    user_agent = single.get("User-Agent") or single.get("user-agent")
    return {
        "resource": method.resource_path,
        "path": url.path,
        "httpMethod": http_method,
        "headers": single or None,
        "multiValueHeaders": multi or None,
        "queryStringParameters": {k: v[-1] for k, v in query_multi.items()} or None,
        "multiValueQueryStringParameters": query_multi or None,
        "pathParameters": dict(parameters) or None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": method.resource_path,
            "httpMethod": http_method,
            "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "requestTimeEpoch": int(now * 1000),
            "path": url.path,
            "protocol": "HTTP/1.1",
            "stage": stage,
            "requestId": request_id,
            "identity": {"sourceIp": source_ip, "userAgent": user_agent},
        },
        "body": _event_body(body, binary=binary),
        "isBase64Encoded": binary and bool(body),
    }


def _event_body(body: bytes, *, binary: bool) -> str | None:
    if not body:
        return None
    return base64.b64encode(body).decode("ascii") if binary else body.decode("utf-8", errors="replace")


class LambdaFront:
    """The REST API on ``host:port``, each of its functions a :class:`FunctionPool` (by logical id)."""

    def __init__(self, api: RestApi, pools: Mapping[str, FunctionPool], host: str, port: int) -> None:
        missing = {m.function for m in api.methods.values()} - set(pools)
        if missing:
            raise ValueError(f"no environments for the functions {sorted(missing)} the REST API integrates")
        self.api, self.pools = api, pools
        self._server = ThreadingHTTPServer((host, port), _handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> LambdaFront:
        self._thread = threading.Thread(target=self._server.serve_forever, name="lambda-front", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (requests in flight finish first), then every environment."""
        if self._thread is not None:
            self._server.shutdown()
        self._server.server_close()
        for pool in self.pools.values():
            pool.stop()

    def answer(
        self, http_method: str, target: str, headers: list[tuple[str, str]], body: bytes, source_ip: str
    ) -> tuple[int, dict[str, list[str]], bytes]:
        """What API Gateway answers this request: status, headers (multi-value) and body."""
        request_id = str(uuid.uuid4())
        routed = self.api.route(http_method, urlsplit(target).path)
        try:
            if routed is None:
                raise _Refused(GatewayError(403, "MISSING_AUTHENTICATION_TOKEN", "Missing Authentication Token"))
            method, parameters = routed
            if len(body) > MAX_PAYLOAD_BYTES:
                raise _Refused(GatewayError(413, "REQUEST_TOO_LARGE", "Request Too Long"))
            if method.body_schema is not None:
                _validate(method.body_schema, body)
            named = {name.lower(): value for name, value in headers}
            event = proxy_event(method, parameters, http_method, target, headers, body, stage=self.api.stage,
                                request_id=request_id, source_ip=source_ip,
                                binary=self.api.is_binary(named.get("content-type")))  # fmt: skip
            try:
                result = self.pools[method.function].invoke(event, timeout_s=INTEGRATION_TIMEOUT_S)
            except FunctionError as error:
                log.warning("%s", error)
                if error.timed_out:
                    raise _Refused(GatewayError(504, "INTEGRATION_TIMEOUT", "Endpoint request timed out")) from None
                raise _Refused(GatewayError(502, "DEFAULT_5XX", "Internal server error")) from None
            accepted = (named.get("accept") or "").split(",")[0]
            status, answer_headers, answer_body = proxy_answer(result, binary=self.api.is_binary(accepted))
        except _Refused as refused:
            status, single, answer_body = self.api.gateway_response(refused.error, request_id)
            answer_headers = {name: [value] for name, value in single.items()}
        answer_headers.setdefault("x-amzn-RequestId", [request_id])
        return status, answer_headers, answer_body


class _Refused(Exception):
    def __init__(self, error: GatewayError) -> None:
        super().__init__(error.message)
        self.error = error


def _validate(schema: Mapping[str, Any], body: bytes) -> None:
    """API Gateway's request validation of a JSON body against its model."""
    try:
        document = json.loads(body) if body else None
    except ValueError:
        raise _Refused(GatewayError(400, "BAD_REQUEST_BODY", "Invalid request body")) from None
    problems = [problem.message for problem in jsonschema_rs.Draft4Validator(dict(schema)).iter_errors(document)]
    if problems:
        detail = "; ".join(problems)
        raise _Refused(GatewayError(400, "BAD_REQUEST_BODY", f"Invalid request body: [{detail}]"))


def proxy_answer(result: Any, *, binary: bool) -> tuple[int, dict[str, list[str]], bytes]:
    """The function's proxy answer as HTTP (a base64 body decoded when the client accepts ``binary``); a malformed
    one is API Gateway's 502."""
    if not isinstance(result, dict) or not isinstance(result.get("statusCode"), int):
        log.warning("malformed Lambda proxy response: %r", result)
        raise _Refused(GatewayError(502, "DEFAULT_5XX", "Internal server error"))
    headers: dict[str, list[str]] = {k: [str(v)] for k, v in (result.get("headers") or {}).items()}
    for name, values in (result.get("multiValueHeaders") or {}).items():
        headers[name] = [str(v) for v in values]
    text = result.get("body") or ""
    body = base64.b64decode(text) if result.get("isBase64Encoded") and binary else text.encode()
    return result["statusCode"], headers, body


def _handler(front: LambdaFront) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "llog-lambda-front"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            status, headers, answer = front.answer(
                self.command, self.path, list(self.headers.items()), body, self.client_address[0]
            )
            self.send_response(status)
            for name, values in headers.items():
                if name.lower() in ("content-length", "connection", "transfer-encoding"):
                    continue
                for value in values:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(answer)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _serve

        def log_message(self, format: str, *args: Any) -> None:
            log.debug(format, *args)

    return Handler


def start_front(
    synthesized: Synthesized, lambda_root: Path, local: Mapping[str, str], endpoints: Mapping[str, str],
    host: str, port: int, *, concurrency: int,
) -> LambdaFront:  # fmt: skip
    """The synthesized REST API on ``host:port``, serving: its functions laid out in ``lambda_root`` (their
    logs there too), each with one warm environment and up to ``concurrency``; ``local`` and ``endpoints`` as
    :func:`~devserver.emulator.function_environment` and :func:`~devserver.emulator.local_endpoints` make them.

    :class:`~devserver.emulator.EmulatorUnavailable` without the emulator or the runtime.
    """
    rie, python = find_rie(), find_runtime_python()
    api = RestApi(synthesized.template)
    integrated = {method.function for method in api.methods.values()}
    specs = {
        name: spec
        for name, spec in function_templates(synthesized.template, synthesized.outdir).items()
        if spec.logical_id in integrated
    }
    opt, tasks = lay_out(synthesized.layer_asset, specs, lambda_root)

    def starter(spec: FunctionTemplate) -> Callable[[], EmulatedFunction]:
        environment = {**function_environment(spec, local), **endpoints}
        numbers = itertools.count()

        def start() -> EmulatedFunction:
            log_path = lambda_root / f"{spec.name}-{next(numbers)}.log"
            return EmulatedFunction(spec, rie=rie, python=python, task_root=tasks[spec.name], opt=opt,
                                    environment=environment, log=log_path).start()  # fmt: skip

        return start

    pools = {spec.logical_id: FunctionPool(starter(spec), concurrency) for spec in specs.values()}
    front = LambdaFront(api, pools, host, port)
    try:
        for pool in pools.values():
            pool.warm()
    except BaseException:
        front.stop()
        raise
    return front
