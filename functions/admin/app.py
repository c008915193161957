"""Operator routes: health, topics, partition catalog and status, fence and unfence.

* ``GET /health``: this instance (docs/HTTP_API.md; answers without touching Oxia);
* ``GET /topics``: every topic that is not deleted and its registered partitions, from ``LogCatalog.topics()``;
* ``POST /topics`` (201 created, 200 found with the same settings), ``GET /topics/{topic}``,
  ``POST /topics/{topic}/partitions`` (grow), ``DELETE /topics/{topic}``: ``llog.protocol.topics``;
* ``GET /topics/{topic}/partitions/{partition}``: ``LogCatalog.status`` (404 if
  the partition is not initialized);
* ``GET /topics/{topic}/partitions/{partition}/storage``: what the partition keeps (from its index);
* ``POST /topics/{topic}/partitions/{partition}/fence`` and ``/unfence``
  (``LogWriter``; deployed behind IAM authorization);
* ``POST /topics/{topic}/partitions/{partition}/compact``: one bounded compaction pass, as
  ``llog compact`` (``compact_until_caught_up``; deployed behind IAM authorization).

Path parameters are validated (topic name rules, partition a decimal integer
in ``[0, 2**31-1]``) before anything is read: 400 otherwise. The admin
function also answers every unknown path (404), as API Gateway's catch-all.
The service (and the Oxia client's modules) is created by the first request
that needs it, so ``/health`` and unknown paths never load it; S3 (botocore)
only by the first fence, unfence or compaction.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.common import names
from functions.common.http import create_resolver, json_response, request_body, resolver_handler
from functions.common.lazy import Lazy
from functions.common.telemetry import Telemetry
from llog.config import Limits, broker_id_from_env

if TYPE_CHECKING:
    from llog.service.admin import AdminService

telemetry = Telemetry(names.ADMIN)

STARTED_AT_MS = int(time.time() * 1000)
INSTANCE_ID = uuid.uuid4().hex[:16]
_server: dict[str, Any] = {"host": None, "port": None}
# One compaction request's time budget, at most: well inside API Gateway's 29 s integration timeout.
COMPACT_BUDGET_S = 10.0
COMPACT_SAFETY_MARGIN_S = 5.0  # left to read the status and answer before the function times out


def create_service() -> AdminService:
    from llog.service.admin import AdminService

    return AdminService.from_env()


_service: Lazy[AdminService] = Lazy(create_service, lambda service: service.close())
_limits: Lazy[Limits] = Lazy(Limits.from_env)


def set_service(service: AdminService | None) -> None:
    """Use ``service`` (owned by the caller) instead of one from the environment."""
    _service.set(service)


def set_server_info(host: str | None, port: int | None) -> None:
    """Where ``llog serve`` listens, for ``/health``."""
    _server.update(host=host, port=port)


def reset() -> None:
    _service.reset()
    _limits.reset()
    set_server_info(None, None)


def health(context: LambdaContext) -> dict[str, Any]:
    return {
        "status": "ok",
        "broker_id": broker_id_from_env() or f"{context.function_name}/{INSTANCE_ID}",
        "function_name": context.function_name,
        "function_version": context.function_version,
        "instance_id": INSTANCE_ID,
        "host": _server["host"],
        "port": _server["port"],
        "started_at_ms": STARTED_AT_MS,
    }


def compact_budget_s(context: LambdaContext) -> float:
    """``COMPACT_BUDGET_S``, or less when the function has less time left."""
    remaining_s = context.get_remaining_time_in_millis() / 1000 - COMPACT_SAFETY_MARGIN_S
    return max(0.0, min(COMPACT_BUDGET_S, remaining_s))


def create_app() -> APIGatewayRestResolver:
    app = create_resolver(telemetry)

    @app.get("/health")
    def get_health() -> Response[str]:
        from llog.api.native.bodies import Health, answer

        return json_response(200, answer(Health, health(app.lambda_context)))

    @app.get("/topics")
    def get_topics() -> Response[str]:
        from llog.api.native import routes

        return json_response(*routes.list_topics(_service.get))

    @app.post("/topics")
    def create_topic() -> Response[str]:
        from llog.api.native import routes

        return json_response(*routes.create_topic(_service.get, request_body(app.current_event), _limits.get()))

    @app.get("/topics/<topic>")
    def describe_topic(topic: str) -> Response[str]:
        from llog.api.native import routes

        return json_response(*routes.describe_topic(_service.get, topic))

    @app.delete("/topics/<topic>")
    def delete_topic(topic: str) -> Response[str]:
        from llog.api.native import routes

        return json_response(*routes.delete_topic(_service.get, topic))

    @app.post("/topics/<topic>/partitions")
    def grow_topic(topic: str) -> Response[str]:
        from llog.api.native import routes

        return json_response(*routes.grow_topic(_service.get, topic, request_body(app.current_event), _limits.get()))

    @app.get("/topics/<topic>/partitions/<partition>")
    def get_partition(topic: str, partition: str) -> Response[str]:
        from llog.api.native import routes

        return json_response(*routes.partition_status(_service.get, topic, partition))

    @app.get("/topics/<topic>/partitions/<partition>/storage")
    def get_partition_storage(topic: str, partition: str) -> Response[str]:
        from llog.api.native import routes

        return json_response(*routes.partition_storage(_service.get, topic, partition))

    @app.post("/topics/<topic>/partitions/<partition>/compact")
    def compact(topic: str, partition: str) -> Response[str]:
        from llog.api.native import routes

        budget_s = compact_budget_s(app.lambda_context)
        return json_response(*routes.compact(_service.get, topic, partition, budget_s=budget_s))

    @app.post("/topics/<topic>/partitions/<partition>/fence")
    def fence(topic: str, partition: str) -> Response[str]:
        from llog.api.native import routes

        return json_response(*routes.fence(_service.get, topic, partition))

    @app.post("/topics/<topic>/partitions/<partition>/unfence")
    def unfence(topic: str, partition: str) -> Response[str]:
        from llog.api.native import routes

        return json_response(*routes.unfence(_service.get, topic, partition))

    return app


handler = resolver_handler(telemetry, create_app)
