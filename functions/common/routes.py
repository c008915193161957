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
from dataclasses import dataclass, field
from functools import cached_property

PRODUCE = "produce"
CONSUME = "consume"
ADMIN = "admin"
FUNCTIONS = (PRODUCE, CONSUME, ADMIN)

CATCH_ALL_RESOURCE = "/{proxy+}"


@dataclass(frozen=True)
class Route:
    function: str
    method: str
    resource: str  # API Gateway template, e.g. "/topics/{topic}/partitions/{partition}"
    summary: str = field(default="", compare=False)

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.resource))
        return re.compile(regex)

    @property
    def powertools_rule(self) -> str:
        """The same path in Powertools' syntax (``<name>`` for a parameter)."""
        return re.sub(r"\{(\w+)\}", r"<\1>", self.resource)


ROUTES: tuple[Route, ...] = (
    Route(PRODUCE, "POST", "/produce", "Append records to one or more partitions"),
    Route(CONSUME, "POST", "/consume", "Fetch records from one or more partitions (long-poll)"),
    Route(ADMIN, "GET", "/health", "Liveness of this function instance"),
    Route(ADMIN, "GET", "/topics", "Every initialized partition, by topic"),
    Route(ADMIN, "GET", "/topics/{topic}/partitions/{partition}", "State of one partition"),
    Route(ADMIN, "POST", "/topics/{topic}/partitions/{partition}/fence", "Stop appends to a partition"),
    Route(ADMIN, "POST", "/topics/{topic}/partitions/{partition}/unfence", "Reopen a fenced partition"),
)


@dataclass(frozen=True)
class Match:
    function: str
    resource: str
    path_parameters: dict[str, str] | None
    allowed_methods: tuple[str, ...]  # empty for an unknown path


def resources(function: str | None = None) -> dict[str, tuple[str, ...]]:
    """Resource -> allowed methods (of one function, or all)."""
    out: dict[str, tuple[str, ...]] = {}
    for route in ROUTES:
        if function is None or route.function == function:
            out[route.resource] = (*out.get(route.resource, ()), route.method)
    return out


def match(path: str) -> Match:
    """The function and API Gateway resource for ``path`` (the method does not matter here)."""
    for route in ROUTES:
        found = route.pattern.fullmatch(path)
        if found:
            return Match(route.function, route.resource, found.groupdict() or None, resources()[route.resource])
    return Match(ADMIN, CATCH_ALL_RESOURCE, {"proxy": path.lstrip("/")}, ())
