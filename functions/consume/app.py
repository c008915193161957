"""``POST /consume``: parse with ``http_contract``, fetch with ``ConsumeService``, answer per docs/HTTP_API.md.

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
from functions.common.http import create_resolver, json_body, json_response, resolver_handler
from functions.common.lazy import Lazy
from functions.common.telemetry import Telemetry
from llog.config import Limits

if TYPE_CHECKING:
    from llog.service.consume import ConsumeService


def create_service() -> ConsumeService:
    from llog.service.consume import ConsumeService

    return ConsumeService.from_env()


telemetry = Telemetry(names.CONSUME)
_service: Lazy[ConsumeService] = Lazy(create_service, lambda service: service.close())
_limits: Lazy[Limits] = Lazy(Limits.from_env)


def set_service(service: ConsumeService | None) -> None:
    """Use ``service`` (owned by the caller) instead of one from the environment."""
    _service.set(service)


def reset() -> None:
    """Forget the service (closing it if it was created here) and the limits."""
    _service.reset()
    _limits.reset()


def create_app() -> APIGatewayRestResolver:
    app = create_resolver(telemetry)

    @app.post("/consume")
    def consume() -> Response[str]:
        from llog.service.http_contract import consume_response, parse_consume_request

        limits = _limits.get()
        request = parse_consume_request(json_body(app.current_event, limits), limits)
        results = _service.get().consume(request)
        status, body = consume_response(results)
        telemetry.metric("RecordsConsumed", MetricUnit.Count, sum(len(r.records) for r in results))
        telemetry.metric("BytesConsumed", MetricUnit.Bytes, sum(r.nbytes for r in results))
        telemetry.errors(None if r.error is None else r.error.error_type for r in results)
        return json_response(status, body)

    return app


handler = resolver_handler(telemetry, create_app)
