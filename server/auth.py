"""``LLOG_SERVE_AUTH``: whether ``llog serve``'s own API needs a signed request (``sigv4``) or not (``none``).

With ``none`` (the default of ``llog serve`` and ``make dev``) the network is the authentication: anyone who
reaches the port may produce, consume, delete a topic or fence a partition. With ``sigv4`` (the serve
fleet's default, ``llog:serveAuth``) every request but the probes' ``GET /health``, ``GET /openapi.json`` and
the console's static pages must carry an AWS Signature Version 4 for service ``llog``, made with an access key
llog issued (``llog keys``, the Kinesis API's keys), and the key must hold the route's permission on every
topic the request names:

* ``write``: ``POST /produce``, ``POST /producers``;
* ``read``: ``POST /consume``, ``POST /offsets``, the consumer group routes, and reading topics and partitions;
* ``admin``: creating, growing and deleting topics, fence, unfence, compact, ``GET /metrics`` (it names
  every topic).

The topics are the path's, and for a request with a body those it names (``topic_partitions[].topic``,
``topic``, ``topics``, ``offsets[].topic``). Each refusal is answered 403 (``MissingAuthenticationToken``,
``IncompleteSignature``, ``InvalidSignature``, ``UnrecognizedClient``, ``AccessDenied``) before the route
runs, so it writes nothing. The Kinesis API (``/kinesis``) checks its own signatures (service ``kinesis``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from functions.common.routes import Match
from llog.api.kinesis import sigv4
from llog.api.kinesis.errors import KinesisError
from llog.errors import LlogError
from llog.service.keys import AccessKeys

SERVE_AUTH_ENV = "LLOG_SERVE_AUTH"
CHOICES = ("none", "sigv4")
SERVICE = "llog"
OPEN_PATHS = ("/health", "/openapi.json")  # load balancers' and ECS's probes; the API's description

# The permission each route needs (API Gateway resource templates, as functions.common.routes names them).
ACTIONS: dict[tuple[str, str], str] = {
    ("POST", "/produce"): "write",
    ("POST", "/producers"): "write",
    ("POST", "/consume"): "read",
    ("POST", "/offsets"): "read",
    ("GET", "/groups"): "read",
    ("GET", "/groups/{group}"): "read",
    ("POST", "/groups/{group}/join"): "read",
    ("POST", "/groups/{group}/heartbeat"): "read",
    ("POST", "/groups/{group}/leave"): "read",
    ("POST", "/groups/{group}/commit"): "read",
    ("GET", "/topics"): "read",
    ("POST", "/topics"): "admin",
    ("GET", "/topics/{topic}"): "read",
    ("DELETE", "/topics/{topic}"): "admin",
    ("POST", "/topics/{topic}/partitions"): "admin",
    ("GET", "/topics/{topic}/partitions/{partition}"): "read",
    ("POST", "/topics/{topic}/partitions/{partition}/fence"): "admin",
    ("POST", "/topics/{topic}/partitions/{partition}/unfence"): "admin",
    ("GET", "/topics/{topic}/partitions/{partition}/storage"): "read",
    ("POST", "/topics/{topic}/partitions/{partition}/compact"): "admin",
}
SERVE_ROUTE_ACTION = "admin"  # /metrics and /metrics/prometheus: every topic's traffic and lag


def auth_from_env(env: Mapping[str, str]) -> str:
    """``LLOG_SERVE_AUTH``: ``none`` (the default) or ``sigv4``."""
    choice = env.get(SERVE_AUTH_ENV, "none").strip().lower() or "none"
    if choice not in CHOICES:
        raise LlogError(f"{SERVE_AUTH_ENV} must be one of {', '.join(CHOICES)}, not {choice!r}")
    return choice


@dataclass(frozen=True)
class Refusal:
    status: int
    error_type: str
    message: str


def _refusal(error: KinesisError) -> Refusal:
    return Refusal(403, error.type_name.removesuffix("Exception"), error.message)


def body_topics(body: bytes) -> set[str] | None:
    """The topics a request body names; None when it is not a JSON object (the route refuses it, 400)."""
    try:
        document = json.loads(body) if body else {}
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    found: set[str] = set()

    def add(value: Any) -> None:
        if isinstance(value, str):
            found.add(value)

    add(document.get("topic"))
    for name in ("topic_partitions", "offsets"):
        items = document.get(name)
        for item in items if isinstance(items, list) else ():
            if isinstance(item, dict):
                add(item.get("topic"))
    topics = document.get("topics")
    for topic in topics if isinstance(topics, list) else ():
        add(topic)
    return found


class ServeAuth:
    """The check of ``LLOG_SERVE_AUTH=sigv4`` for one ``llog serve``."""

    def __init__(self, keys: Callable[[], AccessKeys], clock: Callable[[], datetime] | None = None) -> None:
        self._keys = keys
        self._clock = clock or (lambda: datetime.now(UTC))

    @staticmethod
    def open(method: str, path: str, console_page: bool) -> bool:
        """A request anyone may make: the probes, the API's description, the console's pages."""
        return path in OPEN_PATHS or (method == "GET" and console_page)

    def check(self, request: sigv4.SignedRequest, found: Match | None) -> Refusal | None:
        """Why ``request`` is refused (None: signed by an issued key holding its route's permission)."""
        try:
            caller, granted = sigv4.verify_issued(request, self._keys().lookup, self._clock(), service=SERVICE)
        except KinesisError as exc:
            return _refusal(exc)
        if found is None:
            action, topics = SERVE_ROUTE_ACTION, set[str]()
        else:
            action = ACTIONS.get((request.method, found.resource), "read")
            path_topic = (found.path_parameters or {}).get("topic")
            topics = {unquote(path_topic)} if path_topic is not None else set()
            if request.body and granted.streams != ("*",):
                named = body_topics(request.body)
                if named is None:
                    return Refusal(400, "InvalidRequest", "the request body is not a JSON object")
                topics |= named
        if not topics:  # a route that names no topic: the action on any
            if getattr(granted, action):
                return None
            return Refusal(403, "AccessDenied", f"access key {caller.access_key_id} has no {action} permission")
        denied = sorted(t for t in topics if not granted.allows(t, action))
        if denied:
            message = f"access key {caller.access_key_id} has no {action} permission on topic {', '.join(denied)}"
            return Refusal(403, "AccessDenied", message)
        return None
