"""``POST /produce``: ``llog.api.native.routes.produce`` (parse, append with ``ProduceService``, answer per
docs/HTTP_API.md).

``POST /producers`` issues an idempotent producer id, or bumps a given id's epoch.

200 when every partition's batch was appended, 409 for partial or other
failures (each result says ``ok``, ``error_type``, ``error``, ``retriable``),
503 when all failed with back-pressure; 400/413 for a malformed request or a
partition past an explicit topic's count, 404 (``UnknownTopic``) for a
deleted topic or a keyed entry (no partition) of a topic never created; none
of these writes anything. A keyed entry gives one result per partition its
records were routed to.

The service is created on the first request of an execution environment
(``ProduceService.from_env()``: one S3 PUT per request, partitions
initialized on first write); ``llog serve`` injects its batching service with
``set_service``. The service's modules (writer, Oxia and S3 clients) are
imported with it, not with this module (the Lambda init phase).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.metrics import MetricUnit

from functions.common import names
from functions.common.http import (
    answer_error,
    create_resolver,
    json_response,
    request_body,
    resolver_handler,
)
from functions.common.lazy import Lazy
from functions.common.telemetry import Telemetry
from llog.config import Limits
from llog.format.codec import records_bytes

if TYPE_CHECKING:
    from llog.api.native.routes import Produced
    from llog.protocol.append import SharedAppendGroup
    from llog.service.produce import ProduceService


def create_service() -> ProduceService:
    from llog.service.produce import ProduceService

    return ProduceService.from_env()


telemetry = Telemetry(names.PRODUCE)
_service: Lazy[ProduceService] = Lazy(create_service, lambda service: service.close())
_limits: Lazy[Limits] = Lazy(Limits.from_env)


def set_service(service: ProduceService | None) -> None:
    """Use ``service`` (owned by the caller) instead of one from the environment."""
    _service.set(service)


def reset() -> None:
    """Forget the service (closing it if it was created here) and the limits."""
    _service.reset()
    _limits.reset()


def group_bytes(group: SharedAppendGroup) -> int:
    return records_bytes(group.records)


def count(produced: Produced) -> None:
    """``RecordsProduced``, ``BytesProduced`` and the errors of an answered produce (not under llog serve, which
    counts for itself: no pass over the records)."""
    if telemetry.enabled():
        groups, results = produced.groups, produced.results
        ok = [i for i, r in enumerate(results) if r.ok]
        telemetry.metric("RecordsProduced", MetricUnit.Count, sum(results[i].count for i in ok))
        telemetry.metric("BytesProduced", MetricUnit.Bytes, sum(group_bytes(groups[i]) for i in ok))
        telemetry.errors(r.error_type for r in results)


def produce_document(body: str | bytes | None) -> tuple[int, Any]:
    """``POST /produce``: the answer's status and document; what it raises is answered by ``answer_error``."""
    from llog.api.native import routes

    produced = routes.produce(_service.get, body, _limits.get())
    count(produced)
    return produced.status, produced.body


def serve_produce(body: bytes | None, request_id: str) -> tuple[int, dict[str, str], Any]:
    """``POST /produce`` for ``llog serve`` without the resolver: the handler's answer, ``X-Request-Id`` included.

    The resolver's event, routing and middleware were a quarter of llog serve's
    CPU per produce request at 32 clients. llog serve takes this path only
    for requests without an ``Origin`` header: CORS answers are the resolver's.
    """
    try:
        status, document = produce_document(body or None)  # an empty body is API Gateway's null
        headers: dict[str, str] = {}
    except Exception as exc:
        status, document, headers = answer_error(telemetry, exc, request_id)
    return status, {**headers, "X-Request-Id": request_id}, document


def create_app() -> APIGatewayRestResolver:
    app = create_resolver(telemetry)

    @app.post("/produce")
    def produce() -> Response[str]:
        return json_response(*produce_document(request_body(app.current_event)))

    @app.post("/producers")
    def producers() -> Response[str]:
        from llog.api.native import routes

        return json_response(*routes.producers(_service.get, request_body(app.current_event), _limits.get()))

    return app


handler = resolver_handler(telemetry, create_app)
