"""``POST /consume``, ``POST /offsets`` and the consumer-group routes ``/groups...``, answered per docs/HTTP_API.md.

Each route is ``llog.api.native.routes``'s: ``POST /consume`` parses, fetches with ``ConsumeService`` and answers.
``POST /offsets``: each partition's offset for a time, ``earliest`` or ``latest``
(Kafka's ListOffsets; docs/RECOVERY.md, "Offset for a timestamp").
``GET /groups``, ``GET /groups/{group}``, ``POST /groups/{group}/join``,
``/heartbeat``, ``/leave``, ``/commit``: ``GroupService`` (docs/GROUPS.md), on
the consume service's Oxia store (one client per execution environment).

200 with one result per requested partition (records, ``high_watermark``,
``next_fetch_offset``; failures such as ``OffsetOutOfRange`` or
``OxiaUnavailable`` reported inline with ``ok: false``); 400/413 for a
malformed request. Long-polls up to ``max_wait_ms`` (at most
``LLOG_CONSUME_MAX_WAIT_MS``, below API Gateway's 29 s).

No tail cache here: a consume function never sees the produce function's
appends, so a cached "empty at the tail" would only delay long-polls.
``llog serve`` injects a service sharing its producer's tail cache with
``set_service``. The service's modules (reader, Oxia and S3 clients) are
imported with it, not with this module (the Lambda init phase).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.metrics import MetricUnit

from functions.common import names
from functions.common.http import create_resolver, json_response, request_body, resolver_handler
from functions.common.lazy import Lazy
from functions.common.telemetry import Telemetry
from llog.config import Limits

if TYPE_CHECKING:
    from llog.service.consume import ConsumeService
    from llog.service.groups import GroupService


def create_service() -> ConsumeService:
    from llog.service.consume import ConsumeService

    return ConsumeService.from_env()


def create_group_service() -> GroupService:
    from llog.service.groups import GroupService

    storage = _service.get().reader.storage
    return GroupService.on(storage.oxia, root=storage.root)


telemetry = Telemetry(names.CONSUME)
_service: Lazy[ConsumeService] = Lazy(create_service, lambda service: service.close())
_groups: Lazy[GroupService] = Lazy(create_group_service)  # its Oxia store is the consume service's
_limits: Lazy[Limits] = Lazy(Limits.from_env)


def set_service(service: ConsumeService | None) -> None:
    """Use ``service`` (owned by the caller) instead of one from the environment."""
    _groups.reset()
    _service.set(service)


def reset() -> None:
    """Forget the services (closing the consume service if it was created here) and the limits."""
    _groups.reset()
    _service.reset()
    _limits.reset()


def create_app() -> APIGatewayRestResolver:
    app = create_resolver(telemetry)

    def body() -> str | bytes | None:
        return request_body(app.current_event)

    @app.post("/consume")
    def consume() -> Response[str]:
        from llog.api.native import routes

        consumed = routes.consume(_service.get, body(), _limits.get())
        results = consumed.results
        telemetry.metric("RecordsConsumed", MetricUnit.Count, sum(len(r.records) for r in results))
        telemetry.metric("BytesConsumed", MetricUnit.Bytes, sum(r.nbytes for r in results))
        telemetry.errors(None if r.error is None else r.error.error_type for r in results)
        return json_response(consumed.status, consumed.body)

    @app.post("/offsets")
    def list_offsets() -> Response[str]:
        from llog.api.native import routes

        status, offsets, answers = routes.list_offsets(_service.get, body(), _limits.get())
        telemetry.errors(None if a.error is None else a.error.error_type for a in answers)
        return json_response(status, offsets)

    @app.get("/groups")
    def list_groups() -> Response[str]:
        from llog.api.native import routes

        return json_response(*routes.list_groups(_groups.get))

    @app.get("/groups/<group>")
    def describe_group(group: str) -> Response[str]:
        from llog.api.native import routes

        return json_response(*routes.describe_group(_groups.get, group))

    @app.post("/groups/<group>/join")
    def join_group(group: str) -> Response[str]:
        from llog.api.native import routes

        return json_response(*routes.join_group(_groups.get, group, body(), _limits.get()))

    @app.post("/groups/<group>/heartbeat")
    def heartbeat(group: str) -> Response[str]:
        from llog.api.native import routes

        return json_response(*routes.heartbeat(_groups.get, group, body(), _limits.get()))

    @app.post("/groups/<group>/leave")
    def leave_group(group: str) -> Response[str]:
        from llog.api.native import routes

        return json_response(*routes.leave_group(_groups.get, group, body(), _limits.get()))

    @app.post("/groups/<group>/commit")
    def commit_offsets(group: str) -> Response[str]:
        from llog.api.native import routes

        status, committed = routes.commit_offsets(_groups.get, group, body(), _limits.get())
        telemetry.metric("OffsetsCommitted", MetricUnit.Count, len(committed.committed))
        return json_response(status, committed)

    return app


handler = resolver_handler(telemetry, create_app)
