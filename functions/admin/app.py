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

import re
import time
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.common import names
from functions.common.http import create_resolver, json_response, request_body, resolver_handler
from functions.common.lazy import Lazy
from functions.common.telemetry import Telemetry
from llog.api.native import bodies
from llog.api.native.bodies import answer
from llog.config import Limits, broker_id_from_env
from llog.errors import InvalidPartition
from llog.format.keys import validate_partition, validate_topic

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


def partition_id(topic: str, partition: str) -> tuple[str, int]:
    """Validated path parameters; ``InvalidTopicName``/``InvalidPartition`` (400) otherwise."""
    topic = validate_topic(unquote(topic))
    if not re.fullmatch(r"[0-9]{1,10}", partition):
        raise InvalidPartition(f"invalid partition {partition!r}: expected a non-negative decimal integer")
    return topic, validate_partition(int(partition))


def compact_budget_s(context: LambdaContext) -> float:
    """``COMPACT_BUDGET_S``, or less when the function has less time left."""
    remaining_s = context.get_remaining_time_in_millis() / 1000 - COMPACT_SAFETY_MARGIN_S
    return max(0.0, min(COMPACT_BUDGET_S, remaining_s))


def create_app() -> APIGatewayRestResolver:
    app = create_resolver(telemetry)

    @app.get("/health")
    def get_health() -> Response[str]:
        return json_response(200, answer(bodies.Health, health(app.lambda_context)))

    @app.get("/topics")
    def get_topics() -> Response[str]:
        return json_response(200, answer(bodies.Topics, _service.get().topics()))

    @app.post("/topics")
    def create_topic() -> Response[str]:
        from llog.api.native.contract import parse_create_topic

        topic, partitions, config = parse_create_topic(request_body(app.current_event), _limits.get())
        created, description = _service.get().create_topic(topic, partitions, config)
        return json_response(201 if created else 200, answer(bodies.TopicDescription, description))

    @app.get("/topics/<topic>")
    def describe_topic(topic: str) -> Response[str]:
        description = _service.get().describe_topic(validate_topic(unquote(topic)))
        return json_response(200, answer(bodies.TopicDescription, description))

    @app.delete("/topics/<topic>")
    def delete_topic(topic: str) -> Response[str]:
        return json_response(
            200, answer(bodies.TopicDeleted, _service.get().delete_topic(validate_topic(unquote(topic))))
        )

    @app.post("/topics/<topic>/partitions")
    def grow_topic(topic: str) -> Response[str]:
        from llog.api.native.contract import parse_grow_topic

        name = validate_topic(unquote(topic))
        partitions = parse_grow_topic(request_body(app.current_event), _limits.get())
        return json_response(200, answer(bodies.TopicDescription, _service.get().grow_topic(name, partitions)))

    @app.get("/topics/<topic>/partitions/<partition>")
    def get_partition(topic: str, partition: str) -> Response[str]:
        t, p = partition_id(topic, partition)
        return json_response(200, answer(bodies.PartitionStatus, _service.get().status(t, p)))

    @app.get("/topics/<topic>/partitions/<partition>/storage")
    def get_partition_storage(topic: str, partition: str) -> Response[str]:
        t, p = partition_id(topic, partition)
        return json_response(200, answer(bodies.PartitionStorage, _service.get().storage_usage(t, p)))

    @app.post("/topics/<topic>/partitions/<partition>/compact")
    def compact(topic: str, partition: str) -> Response[str]:
        t, p = partition_id(topic, partition)
        compacted = _service.get().compact(t, p, budget_s=compact_budget_s(app.lambda_context))
        return json_response(200, answer(bodies.CompactionPass, compacted))

    @app.post("/topics/<topic>/partitions/<partition>/fence")
    def fence(topic: str, partition: str) -> Response[str]:
        t, p = partition_id(topic, partition)
        return json_response(200, answer(bodies.PartitionState, _service.get().fence(t, p)))

    @app.post("/topics/<topic>/partitions/<partition>/unfence")
    def unfence(topic: str, partition: str) -> Response[str]:
        t, p = partition_id(topic, partition)
        return json_response(200, answer(bodies.PartitionState, _service.get().unfence(t, p)))

    return app


handler = resolver_handler(telemetry, create_app)
