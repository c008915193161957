"""API Gateway REST proxy events (payload v1) built from plain HTTP requests.

``llog serve`` turns each HTTP request into one of these and hands it to the
same handler API Gateway would invoke; tests and ``devserver.invoke`` build
them the same way. The shape is the one in ``events/*.json``.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl

from functions.common import routes


def rest_event(
    method: str,
    path: str,
    *,
    headers: Iterable[tuple[str, str]] | Mapping[str, str] = (),
    query: str = "",
    body: bytes | str | None = None,
    stage: str = "local",
    request_id: str | None = None,
    source_ip: str = "127.0.0.1",
) -> dict[str, Any]:
    """The event API Gateway would send for this request.

    A body that is not valid UTF-8 is passed base64-encoded with
    ``isBase64Encoded`` (as API Gateway does for binary media types).
    """
    pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    single: dict[str, str] = {}
    multi: dict[str, list[str]] = {}
    for name, value in pairs:
        single[name] = value  # API Gateway keeps the last value in "headers"
        multi.setdefault(name, []).append(value)
    query_pairs = parse_qsl(query, keep_blank_values=True)
    query_single = dict(query_pairs) or None
    query_multi: dict[str, list[str]] = {}
    for name, value in query_pairs:
        query_multi.setdefault(name, []).append(value)

    is_base64 = False
    text: str | None
    if body is None or isinstance(body, str):
        text = body
    else:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            text, is_base64 = base64.b64encode(body).decode("ascii"), True
    if text == "":
        text = None  # API Gateway sends null for an empty body

    found = routes.match(path)
    request_id = request_id or str(uuid.uuid4())
    now = time.time()
    return {
        "resource": found.resource,
        "path": path,
        "httpMethod": method,
        "headers": single or None,
        "multiValueHeaders": multi or None,
        "queryStringParameters": query_single,
        "multiValueQueryStringParameters": query_multi or None,
        "pathParameters": found.path_parameters,
        "stageVariables": None,
        "requestContext": {
            "resourceId": "local",
            "resourcePath": found.resource,
            "httpMethod": method,
            "extendedRequestId": request_id,
            "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "path": f"/{stage}{path}",
            "accountId": "000000000000",
            "protocol": "HTTP/1.1",
            "stage": stage,
            "domainPrefix": "localhost",
            "requestTimeEpoch": int(now * 1000),
            "requestId": request_id,
            "identity": {
                "cognitoIdentityPoolId": None,
                "accountId": None,
                "cognitoIdentityId": None,
                "caller": None,
                "sourceIp": source_ip,
                "principalOrgId": None,
                "accessKey": None,
                "cognitoAuthenticationType": None,
                "cognitoAuthenticationProvider": None,
                "userArn": None,
                "userAgent": single.get("User-Agent") or single.get("user-agent"),
                "user": None,
            },
            "domainName": "localhost",
            "apiId": "local",
        },
        "body": text,
        "isBase64Encoded": is_base64,
    }


def response_parts(response: Mapping[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers and body bytes of a proxy integration response."""
    status = int(response.get("statusCode", 500))
    headers: list[tuple[str, str]] = []
    multi = response.get("multiValueHeaders") or {}
    for name, values in multi.items():
        headers.extend((name, str(v)) for v in values)
    seen = {name.lower() for name in multi}
    for name, value in (response.get("headers") or {}).items():
        if name.lower() not in seen:
            headers.append((name, str(value)))
    raw = response.get("body") or ""
    body = base64.b64decode(raw) if response.get("isBase64Encoded") else str(raw).encode("utf-8")
    return status, headers, body
