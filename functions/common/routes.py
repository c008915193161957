"""The HTTP routes of llog and the function that serves each (API Gateway resources).

One table for the three functions (each registers its own routes and answers
405 for the other methods of them) and for ``llog serve`` (which dispatches a
request to the function that owns its path, and builds the ``resource`` and
``pathParameters`` API Gateway would). Paths no route matches go to the admin
function, which answers 404, as API Gateway's ``{proxy+}`` catch-all would.
No Powertools here: ``llog serve`` imports it before any handler.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from functions.common.names import ADMIN, CONSUME, PRODUCE

CATCH_ALL_RESOURCE = "/{proxy+}"
# The Kinesis Data Streams API (function ``names.KINESIS``): one path for every operation (``X-Amz-Target``), not
# a route of ``ROUTES``, which are llog's own API: Powertools' resolver, the OpenAPI document, IAM or API-key auth
# at the gateway, CORS. Kinesis requests carry a signature for service ``kinesis`` that the function checks itself.
KINESIS_PATH = "/kinesis"


@dataclass(frozen=True)
class Route:
    function: str
    method: str
    resource: str  # API Gateway template, e.g. "/topics/{topic}/partitions/{partition}"

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.resource))
        return re.compile(regex)


ROUTES: tuple[Route, ...] = (
    Route(PRODUCE, "POST", "/produce"),
    Route(PRODUCE, "POST", "/producers"),
    Route(CONSUME, "POST", "/consume"),
    Route(CONSUME, "POST", "/offsets"),
    Route(CONSUME, "GET", "/groups"),
    Route(CONSUME, "GET", "/groups/{group}"),
    Route(CONSUME, "POST", "/groups/{group}/join"),
    Route(CONSUME, "POST", "/groups/{group}/heartbeat"),
    Route(CONSUME, "POST", "/groups/{group}/leave"),
    Route(CONSUME, "POST", "/groups/{group}/commit"),
    Route(ADMIN, "GET", "/health"),
    Route(ADMIN, "GET", "/topics"),
    Route(ADMIN, "POST", "/topics"),
    Route(ADMIN, "GET", "/topics/{topic}"),
    Route(ADMIN, "DELETE", "/topics/{topic}"),
    Route(ADMIN, "POST", "/topics/{topic}/partitions"),
    Route(ADMIN, "GET", "/topics/{topic}/partitions/{partition}"),
    Route(ADMIN, "POST", "/topics/{topic}/partitions/{partition}/fence"),
    Route(ADMIN, "POST", "/topics/{topic}/partitions/{partition}/unfence"),
    Route(ADMIN, "GET", "/topics/{topic}/partitions/{partition}/storage"),
    Route(ADMIN, "POST", "/topics/{topic}/partitions/{partition}/compact"),
)


@dataclass(frozen=True)
class Match:
    function: str
    resource: str
    path_parameters: dict[str, str] | None
    allowed_methods: tuple[str, ...]  # empty for an unknown path


def allowed_methods(resource: str) -> tuple[str, ...]:
    return _ALLOWED_METHODS.get(resource, ())


def match(path: str) -> Match:
    """The function and API Gateway resource for ``path`` (the method does not matter here)."""
    static = _STATIC_MATCHES.get(path)
    if static is not None:
        return static
    for route in ROUTES:
        found = route.pattern.fullmatch(path)
        if found:
            return Match(route.function, route.resource, found.groupdict() or None, allowed_methods(route.resource))
    return Match(ADMIN, CATCH_ALL_RESOURCE, {"proxy": path.lstrip("/")}, ())


# Read once: llog serve matches every request's path. The routes without path parameters are found by a lookup.
_ALLOWED_METHODS = {r.resource: tuple(route.method for route in ROUTES if route.resource == r.resource) for r in ROUTES}
_STATIC_MATCHES = {
    r.resource: Match(r.function, r.resource, None, allowed_methods(r.resource))
    for r in ROUTES
    if "{" not in r.resource
}
