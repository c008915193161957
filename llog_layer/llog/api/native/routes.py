"""The native HTTP API's routes (docs/HTTP_API.md): each parses its request, calls its service and answers.

The Lambda handlers (``functions/*/app.py``) and ``llog serve`` both answer
through these functions, so a request takes one path whichever front door it
came in by: front door → route → ``contract`` (parse) → service → ``contract``
(answer). A route is given its service as a ``Provider``, called only once the
request has been parsed and its path checked, so a bad request is refused
before the service (and its Oxia and S3 clients) is created. Each returns the
answer's status and body (a definition of ``bodies``, or the consume answer's
plain data); what it raises is answered by ``errors``.

``POST /produce`` is also split in two around the append (``produce_prepared``,
``produce_answer``): ``llog serve`` waits for its group commit on its event loop
between them, where a Lambda calls the appender (``produce``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar
from urllib.parse import unquote

from llog.api.native import bodies, contract
from llog.api.native.bodies import answer
from llog.config import Limits
from llog.errors import InvalidPartition
from llog.format.keys import validate_partition, validate_topic
from llog.protocol.append import AppendResult, SharedAppendGroup
from llog.service.admin import AdminService
from llog.service.consume import ConsumeService, OffsetAnswer, PartitionFetch
from llog.service.groups import GroupService
from llog.service.produce import PreparedProduce, ProduceService

T = TypeVar("T")
Provider = Callable[[], T]  # the route's service, created (or found) when the request is known to be good


class Produced(NamedTuple):
    status: int
    body: bodies.ProduceResponse
    groups: list[SharedAppendGroup]  # what was appended, for the caller's metrics
    results: list[AppendResult]


class Consumed(NamedTuple):
    status: int
    body: dict[str, Any]
    results: list[PartitionFetch]


# --- produce -------------------------------------------------------------------------------------------------------


def produce(service: Provider[ProduceService], raw: str | bytes | None, limits: Limits) -> Produced:
    """``POST /produce``: parse, route and check, append, answer."""
    entries = contract.parse_produce_request(raw, limits)
    groups, results = service().produce_groups(entries)
    return Produced(*contract.produce_response(results), groups, results)


def produce_prepared(
    service: ProduceService, raw: str | bytes | None, limits: Limits, *, cached_only: bool
) -> PreparedProduce | None:
    """``POST /produce`` up to its append; None when ``cached_only`` and a check needs an Oxia read first."""
    return service.prepare(contract.parse_produce_request(raw, limits), cached_only=cached_only)


def produce_answer(
    service: ProduceService, prepared: PreparedProduce, appended: Sequence[AppendResult], *, cached_only: bool
) -> Produced | None:
    """``POST /produce`` after its append; None when ``cached_only`` and the answer needs an Oxia read first."""
    finished = service.finish(prepared, appended, cached_only=cached_only)
    if finished is None:
        return None
    groups, results = finished
    return Produced(*contract.produce_response(results), groups, results)


def producers(service: Provider[ProduceService], raw: str | bytes | None, limits: Limits) -> tuple[int, Any]:
    """``POST /producers``: a new idempotent producer id, or a given id's epoch bumped."""
    producer_id = contract.parse_producers_request(raw, limits)
    return 200, contract.producer_answer(service().producer(producer_id))


# --- consume -------------------------------------------------------------------------------------------------------


def consume(service: Provider[ConsumeService], raw: str | bytes | None, limits: Limits) -> Consumed:
    """``POST /consume``: fetch each partition (long-polling up to ``max_wait_ms``); failures reported inline."""
    request = contract.parse_consume_request(raw, limits)
    results = service().consume(request)
    return Consumed(*contract.consume_response(results), results)


def list_offsets(
    service: Provider[ConsumeService], raw: str | bytes | None, limits: Limits
) -> tuple[int, bodies.OffsetsResponse, list[OffsetAnswer]]:
    """``POST /offsets``: each partition's offset for a time, ``earliest`` or ``latest``."""
    queries = contract.parse_offsets_request(raw, limits)
    answers = service().list_offsets(queries)
    return (*contract.offsets_response(answers), answers)


# --- consumer groups -----------------------------------------------------------------------------------------------


def list_groups(groups: Provider[GroupService]) -> tuple[int, Any]:
    return 200, answer(bodies.Groups, groups().list_groups())


def describe_group(groups: Provider[GroupService], group: str) -> tuple[int, Any]:
    return 200, answer(bodies.GroupDescription, groups().describe(unquote(group)))


def join_group(groups: Provider[GroupService], group: str, raw: str | bytes | None, limits: Limits) -> tuple[int, Any]:
    request = contract.parse_group_join(raw, limits)
    joined = groups().join(
        unquote(group), request.topics, session_timeout_ms=request.session_timeout_ms, member_id=request.member_id
    )
    return 200, answer(bodies.GroupJoinResponse, joined)


def heartbeat(groups: Provider[GroupService], group: str, raw: str | bytes | None, limits: Limits) -> tuple[int, Any]:
    request = contract.parse_group_heartbeat(raw, limits)
    beat = groups().heartbeat(unquote(group), request.member_id, request.generation)
    return 200, answer(bodies.GroupHeartbeatResponse, beat)


def leave_group(groups: Provider[GroupService], group: str, raw: str | bytes | None, limits: Limits) -> tuple[int, Any]:
    request = contract.parse_group_leave(raw, limits)
    return 200, answer(bodies.GroupLeaveResponse, groups().leave(unquote(group), request.member_id))


def commit_offsets(
    groups: Provider[GroupService], group: str, raw: str | bytes | None, limits: Limits
) -> tuple[int, bodies.GroupCommitResponse]:
    member_id, generation, offsets = contract.parse_group_commit(raw, limits)
    return 200, answer(bodies.GroupCommitResponse, groups().commit(unquote(group), member_id, generation, offsets))


# --- topics and partitions -----------------------------------------------------------------------------------------


def _topic(topic: str) -> str:
    return validate_topic(unquote(topic))


def _partition_id(topic: str, partition: str) -> tuple[str, int]:
    """Validated path parameters; ``InvalidTopicName``/``InvalidPartition`` (400) otherwise."""
    name = _topic(topic)
    if not re.fullmatch(r"[0-9]{1,10}", partition):
        raise InvalidPartition(f"invalid partition {partition!r}: expected a non-negative decimal integer")
    return name, validate_partition(int(partition))


def list_topics(admin: Provider[AdminService]) -> tuple[int, Any]:
    return 200, answer(bodies.Topics, admin().topics())


def create_topic(admin: Provider[AdminService], raw: str | bytes | None, limits: Limits) -> tuple[int, Any]:
    """201 created, 200 found with the same settings."""
    topic, partitions, config = contract.parse_create_topic(raw, limits)
    created, description = admin().create_topic(topic, partitions, config)
    return 201 if created else 200, answer(bodies.TopicDescription, description)


def describe_topic(admin: Provider[AdminService], topic: str) -> tuple[int, Any]:
    name = _topic(topic)
    return 200, answer(bodies.TopicDescription, admin().describe_topic(name))


def delete_topic(admin: Provider[AdminService], topic: str) -> tuple[int, Any]:
    name = _topic(topic)
    return 200, answer(bodies.TopicDeleted, admin().delete_topic(name))


def grow_topic(admin: Provider[AdminService], topic: str, raw: str | bytes | None, limits: Limits) -> tuple[int, Any]:
    name = _topic(topic)
    partitions = contract.parse_grow_topic(raw, limits)
    return 200, answer(bodies.TopicDescription, admin().grow_topic(name, partitions))


def partition_status(admin: Provider[AdminService], topic: str, partition: str) -> tuple[int, Any]:
    name, number = _partition_id(topic, partition)
    return 200, answer(bodies.PartitionStatus, admin().status(name, number))


def partition_storage(admin: Provider[AdminService], topic: str, partition: str) -> tuple[int, Any]:
    name, number = _partition_id(topic, partition)
    return 200, answer(bodies.PartitionStorage, admin().storage_usage(name, number))


def compact(admin: Provider[AdminService], topic: str, partition: str, *, budget_s: float) -> tuple[int, Any]:
    """One bounded compaction pass, as ``llog compact``, for at most ``budget_s``."""
    name, number = _partition_id(topic, partition)
    return 200, answer(bodies.CompactionPass, admin().compact(name, number, budget_s=budget_s))


def fence(admin: Provider[AdminService], topic: str, partition: str) -> tuple[int, Any]:
    name, number = _partition_id(topic, partition)
    return 200, answer(bodies.PartitionState, admin().fence(name, number))


def unfence(admin: Provider[AdminService], topic: str, partition: str) -> tuple[int, Any]:
    name, number = _partition_id(topic, partition)
    return 200, answer(bodies.PartitionState, admin().unfence(name, number))
