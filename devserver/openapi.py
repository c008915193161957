"""``functions/openapi.json``, generated: the operations below with the schemas of ``llog.api.native.bodies``.

    python -m devserver.openapi          # write functions/openapi.json
    python -m devserver.openapi --check  # exit 1 when the committed file differs

Each operation names its route (``functions.common.routes``; the ``serve`` tag marks what only
``llog serve`` answers), its request body type and its answers by status. Every operation of a
function can also answer 405 (another method) and 500; every one with a body or a side effect 415
(``functions.common.browser``); a 503 carries ``Retry-After``. tests/functions/test_openapi_document.py
fails when the committed document is not what this generates.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from functions.common import routes
from llog.api.native import bodies
from llog.api.native.errors import Error

DOCUMENT = Path(__file__).resolve().parents[1] / "functions" / "openapi.json"
OPENAPI_VERSION = "3.1.0"
SCHEMAS = "#/components/schemas/"

Answer = tuple[str, Any]  # (description, a body type, several (oneOf), or a raw content map)


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    operation_id: str
    tag: str
    summary: str
    responses: dict[int, Answer]
    description: str | None = None
    request: type[msgspec.Struct] | None = None
    iam_only: bool = False  # documented with the SigV4 scheme (infra/api.py keeps these IAM-only)
    parameters: tuple[str, ...] = field(default=())


INVALID_BODY = "Malformed JSON, an unknown field or an invalid value; nothing written"
TOO_LARGE = "The body exceeds LLOG_MAX_REQUEST_BYTES; nothing written"
UNAVAILABLE = "Oxia or S3 unavailable (retriable)"
GROUP_UNAVAILABLE = "Oxia unavailable, or the group's record kept changing under the request (retriable)"
BAD_PARTITION = "Invalid topic or partition"
NOT_INITIALIZED = "The partition is not initialized"

# fmt: off
OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "POST", "/produce", "produce", "log", "Append records to one or more partitions",
        description="One shared WAL blob for the whole request; each partition commits on its own (no atomicity "
        "across partitions). Partitions are created on first write.",
        request=bodies.ProduceRequest,
        responses={
            200: ("Every batch was appended", bodies.ProduceResponse),
            400: ("Malformed JSON or an invalid request; nothing was written", Error),
            404: ("UnknownTopic: a deleted topic, or records without a partition for a topic never created; nothing "
                  "written", Error),
            409: ("Some or all batches failed (see each result)", bodies.ProduceResponse),
            412: ("Every failed batch was a conditional append whose expected_offset was not the partition's next "
                  "offset (each result has next_offset); nothing of those was written", bodies.ProduceResponse),
            413: (TOO_LARGE, Error),
            503: ("Every batch was refused with BackPressureRejected (a ProduceResponse), or the service is "
                  "unavailable (an Error)", (bodies.ProduceResponse, Error)),
        },
    ),
    Operation(
        "POST", "/producers", "producers", "log", "Issue an idempotent producer id, or bump an id's epoch",
        description='{} issues a new producer id at epoch 0; {"producer_id": ...} returns the same id with its epoch '
        "raised by one, which fences every older epoch (docs/IDEMPOTENCE.md). Ids expire after "
        "LLOG_PRODUCER_EXPIRY_MS unused.",
        request=bodies.ProducerRequest,
        responses={
            200: ("The producer id and its current epoch", bodies.Producer),
            400: ("Malformed JSON or an invalid producer_id", Error),
            409: ("UnknownProducer: the id was never issued or has expired", Error),
            413: (TOO_LARGE, Error),
            503: ("The service is unavailable; retry", Error),
        },
    ),
    Operation(
        "POST", "/consume", "consume", "log", "Fetch records from one or more partitions",
        description="Returns once min_bytes are available or max_wait_ms passed. Per-partition failures are "
        "reported inline (ok: false) with status 200.",
        request=bodies.ConsumeRequest,
        responses={
            200: ("One result per requested partition", bodies.ConsumeResponse),
            400: ("Malformed JSON or an invalid request", Error),
            404: ("UnknownTopic: a requested topic was deleted", Error),
            413: (TOO_LARGE, Error),
            503: (UNAVAILABLE, Error),
        },
    ),
    Operation(
        "POST", "/offsets", "listOffsets", "log", "Find each partition's offset for a time (Kafka's ListOffsets)",
        description="For each partition, the first offset whose record timestamp is at or after timestamp_ms, the "
        'log start for "earliest", or the high watermark + 1 for "latest". offset is null when no record is that '
        "late. Reads index entries, then at most one batch. Per-partition failures are reported inline (ok: false) "
        "with status 200.",
        request=bodies.OffsetsRequest,
        responses={
            200: ("One result per requested partition", bodies.OffsetsResponse),
            400: ("Malformed JSON or an invalid request", Error),
            413: (TOO_LARGE, Error),
            503: (UNAVAILABLE, Error),
        },
    ),
    Operation(
        "GET", "/groups", "listGroups", "groups", "Every consumer group",
        description="Groups idle past LLOG_GROUP_EXPIRY_MS are deleted first and not listed.",
        responses={200: ("The groups, in name order", bodies.Groups), 503: (GROUP_UNAVAILABLE, Error)},
    ),
    Operation(
        "GET", "/groups/{group}", "describeGroup", "groups", "Members, assignments, committed offsets and lag",
        description="Members whose session expired are not listed (the group has moved to a new generation). "
        "`offsets` has every partition the group covers or has committed; `lag` is what is left to read from "
        "max(committed, log_start) to the end of the log (high_watermark + 1), null without a commit.",
        parameters=("group",),
        responses={
            200: ("The group", bodies.GroupDescription),
            400: ("Invalid group name", Error),
            404: ("UnknownGroup: never joined, or expired", Error),
            503: (GROUP_UNAVAILABLE, Error),
        },
    ),
    Operation(
        "POST", "/groups/{group}/join", "joinGroup", "groups", "Join a consumer group (or rejoin with a member_id)",
        description="Without member_id a new member is created; with a member_id of the group the member rejoins "
        "and keeps it. A new member, another subscription or a changed partition count starts a new generation and "
        "reassigns (sticky).",
        request=bodies.GroupJoinRequest,
        parameters=("group",),
        responses={
            200: ("The member, its generation and its partitions", bodies.GroupJoinResponse),
            400: (INVALID_BODY, Error),
            404: ("UnknownTopic: a topic does not exist", Error),
            409: ("UnknownMember: member_id is not in the group (expired or left): join without it", Error),
            413: (TOO_LARGE, Error),
            503: (GROUP_UNAVAILABLE, Error),
        },
    ),
    Operation(
        "POST", "/groups/{group}/heartbeat", "heartbeatGroup", "groups", "Extend the member's session",
        description="rejoin is true when the group's generation is not the member's: join again with the same "
        "member_id.",
        request=bodies.GroupHeartbeatRequest,
        parameters=("group",),
        responses={
            200: ("The group's generation and whether to rejoin", bodies.GroupHeartbeatResponse),
            400: (INVALID_BODY, Error),
            409: ("UnknownMember: left, expired or never joined", Error),
            413: (TOO_LARGE, Error),
            503: (GROUP_UNAVAILABLE, Error),
        },
    ),
    Operation(
        "POST", "/groups/{group}/leave", "leaveGroup", "groups", "Leave the group (idempotent)",
        description="The member's partitions go to the others (a new generation).",
        request=bodies.GroupLeaveRequest,
        parameters=("group",),
        responses={
            200: ("The member is not in the group", bodies.GroupLeaveResponse),
            400: (INVALID_BODY, Error),
            413: (TOO_LARGE, Error),
            503: (GROUP_UNAVAILABLE, Error),
        },
    ),
    Operation(
        "POST", "/groups/{group}/commit", "commitOffsets", "groups",
        "Commit offsets (the next offset to read per partition)",
        description="All or nothing: the member must be in the group, name its current generation and own every "
        "partition.",
        request=bodies.GroupCommitRequest,
        parameters=("group",),
        responses={
            200: ("Every offset was committed", bodies.GroupCommitResponse),
            400: (INVALID_BODY, Error),
            409: ("UnknownMember, StaleGeneration or NotPartitionOwner; nothing committed", Error),
            413: (TOO_LARGE, Error),
            503: (GROUP_UNAVAILABLE, Error),
        },
    ),
    Operation(
        "GET", "/health", "health", "admin", "Liveness of this instance (no storage call)",
        responses={200: ("Alive", bodies.Health)},
    ),
    Operation(
        "GET", "/topics", "listTopics", "admin", "Every registered partition, by topic",
        responses={200: ("Topics and their partitions, sorted", bodies.Topics), 503: (UNAVAILABLE, Error)},
    ),
    Operation(
        "POST", "/topics", "createTopic", "admin", "Create a topic with its partitions and settings",
        description="Idempotent: the same settings again answer 200 (and complete a create that was interrupted). "
        "A name produce created implicitly is adopted if the count covers its partitions.",
        request=bodies.CreateTopicRequest,
        responses={
            200: ("It exists with the same settings", bodies.TopicDescription),
            201: ("Created", bodies.TopicDescription),
            400: ("Malformed request, invalid name, partition count or config", Error),
            409: ("TopicExists: it exists with other settings; TopicDeleted: a deleted topic of this name is not "
                  "reclaimed yet", Error),
            413: (TOO_LARGE, Error),
            503: (UNAVAILABLE, Error),
        },
    ),
    Operation(
        "GET", "/topics/{topic}", "describeTopic", "admin", "A topic's settings and each partition's offsets",
        parameters=("topic",),
        responses={
            200: ("The topic", bodies.TopicDescription),
            400: ("Invalid topic name", Error),
            404: ("UnknownTopic: never created, or deleted", Error),
            503: (UNAVAILABLE, Error),
        },
    ),
    Operation(
        "DELETE", "/topics/{topic}", "deleteTopic", "admin", "Delete a topic",
        description="Marks it deleted and fences every partition: produce and consume answer 404 UnknownTopic from "
        "then on. Garbage collection reclaims its data after its grace period; then the name can be created again. "
        "Again on a deleted topic: 200.",
        parameters=("topic",),
        responses={
            200: ("Deleted", bodies.TopicDeleted),
            400: ("Invalid topic name", Error),
            404: ("UnknownTopic: no such topic", Error),
            503: (UNAVAILABLE, Error),
        },
    ),
    Operation(
        "POST", "/topics/{topic}/partitions", "growTopic", "admin", "Raise a topic's partition count",
        description="Counts only grow; the same count is a no-op (it completes a grow that was interrupted). Keys "
        "route by the new count from then on.",
        request=bodies.GrowTopicRequest,
        parameters=("topic",),
        responses={
            200: ("The topic after the change", bodies.TopicDescription),
            400: ("Malformed request, or InvalidPartitionCount: below the current count or out of range", Error),
            404: ("UnknownTopic: not an explicit topic (create it first), or deleted", Error),
            413: (TOO_LARGE, Error),
            503: (UNAVAILABLE, Error),
        },
    ),
    Operation(
        "GET", "/topics/{topic}/partitions/{partition}", "partitionStatus", "admin", "State of one partition",
        parameters=("topic", "partition"),
        responses={
            200: ("The partition's state", bodies.PartitionStatus),
            400: (BAD_PARTITION, Error),
            404: (NOT_INITIALIZED, Error),
            503: (UNAVAILABLE, Error),
        },
    ),
    Operation(
        "POST", "/topics/{topic}/partitions/{partition}/fence", "fence", "admin", "Stop appends to a partition",
        description="Finishes a pending append, then rejects appends with LogFenced; reads keep working. Idempotent.",
        parameters=("topic", "partition"),
        iam_only=True,
        responses={
            200: ("The partition's state after the change", bodies.PartitionState),
            400: (BAD_PARTITION, Error),
            404: (NOT_INITIALIZED, Error),
            503: (UNAVAILABLE, Error),
        },
    ),
    Operation(
        "POST", "/topics/{topic}/partitions/{partition}/unfence", "unfence", "admin", "Reopen a fenced partition",
        description="Idempotent.",
        parameters=("topic", "partition"),
        iam_only=True,
        responses={
            200: ("The partition's state after the change", bodies.PartitionState),
            400: (BAD_PARTITION, Error),
            404: (NOT_INITIALIZED, Error),
            503: (UNAVAILABLE, Error),
        },
    ),
    Operation(
        "GET", "/topics/{topic}/partitions/{partition}/storage", "partitionStorage", "admin",
        "What one partition stores, and how old its compaction lag is",
        description="Reads the partition's whole index (one Oxia list per 1,024 entries); sizes come from the index "
        "(no S3 call). WAL slices share objects with other partitions, so they are counted as batches.",
        parameters=("topic", "partition"),
        responses={
            200: ("The partition's storage", bodies.PartitionStorage),
            400: (BAD_PARTITION, Error),
            404: ("The partition is not initialized, or the topic was deleted", Error),
            503: (UNAVAILABLE, Error),
        },
    ),
    Operation(
        "POST", "/topics/{topic}/partitions/{partition}/compact", "compactPartition", "admin",
        "Compact a partition now",
        description="One bounded compaction pass, as `llog compact`: compact_once until nothing is left or the time "
        "budget (10 s, less when the function has less time left) is spent. Safe beside the scheduled compaction "
        "workers. Answers what was done and the partition status afterwards. IAM-authorized when deployed.",
        parameters=("topic", "partition"),
        iam_only=True,
        responses={
            200: ("What the pass did, and the partition status after it", bodies.CompactionPass),
            400: (BAD_PARTITION, Error),
            404: ("The partition is not initialized, or the topic was deleted", Error),
            503: (UNAVAILABLE, Error),
        },
    ),
    Operation(
        "GET", "/metrics", "metrics", "serve", "Process metrics of llog serve (JSON)",
        responses={200: ("HTTP, Oxia, S3 (with the S3 billing estimate), batcher and tail cache counters",
                         {"application/json": {"schema": {"$ref": SCHEMAS + "ServeMetrics"}}})},
    ),
    Operation(
        "GET", "/metrics/prometheus", "metricsPrometheus", "serve", "The same metrics for Prometheus",
        responses={200: ("Text exposition format 0.0.4", {"text/plain": {"schema": {"type": "string"}}})},
    ),
    Operation(
        "GET", "/openapi.json", "openapi", "serve", "This document",
        responses={200: (f"OpenAPI {OPENAPI_VERSION} document", {"application/json": {"schema": {"type": "object"}}})},
    ),
)
# fmt: on

PARAMETERS: dict[str, dict[str, Any]] = {
    "topic": {"name": "topic", "in": "path", "required": True, "schema": {"$ref": SCHEMAS + "Topic"}},
    "group": {"name": "group", "in": "path", "required": True, "schema": {"$ref": SCHEMAS + "Group"}},
    "partition": {
        "name": "partition",
        "in": "path",
        "required": True,
        "schema": {"type": "integer", "minimum": 0, "maximum": bodies.INT32_MAX},
        "description": "A decimal integer (no sign).",
    },
}

COMMON_ANSWERS: dict[int, str] = {
    405: "Method not allowed (Allow lists the methods)",
    500: "Misconfiguration or an unexpected failure",
}
UNSUPPORTED_MEDIA_TYPE = (
    "UnsupportedMediaType: a body without Content-Type: application/json, or a request from a web page (Origin) "
    "without it; what any page can make a browser send. Nothing written"
)
RETRY_AFTER = {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait before retrying."}}

# What llog serve's /metrics answers (server.serve); not a body of the functions.
_STATS = {"type": "number"}
_NULLABLE_INT = {"type": ["integer", "null"]}
_NULLABLE_NUMBER = {"type": ["number", "null"]}
# fmt: off
SERVE_SCHEMAS: dict[str, dict[str, Any]] = {
    "OperationStats": {
        "type": "object",
        "required": ["calls", "errors", "retries", "bytes", "seconds"],
        "properties": {name: _STATS for name in ("calls", "errors", "retries", "bytes", "seconds")},
    },
    "S3Billing": {
        "type": "object",
        "description": "Estimated S3 cost at list prices: request cost of this process (sum across processes) and "
        "the footprint of the root prefix (aggregate with max). Prices are the stated assumptions.",
        "required": ["assumptions", "requests", "request_cost_usd", "storage"],
        "properties": {
            "assumptions": {
                "type": "object",
                "required": [
                    "region", "storage_class", "currency", "storage_usd_per_gb_month",
                    "put_copy_post_list_usd_per_1000", "get_and_other_usd_per_10000", "gb_bytes",
                    "operation_classes", "excludes",
                ],
                "properties": {
                    "region": {"type": "string"},
                    "storage_class": {"type": "string"},
                    "currency": {"type": "string"},
                    "storage_usd_per_gb_month": {"type": "number"},
                    "put_copy_post_list_usd_per_1000": {"type": "number"},
                    "get_and_other_usd_per_10000": {"type": "number"},
                    "gb_bytes": {"type": "integer"},
                    "operation_classes": {
                        "type": "object",
                        "additionalProperties": {"enum": ["put_copy_post_list", "get_and_other", "free"]},
                    },
                    "excludes": {"type": "array", "items": {"type": "string"}},
                },
            },
            "requests": {
                "type": "object",
                "required": ["put_copy_post_list", "get_and_other", "free"],
                "properties": {name: {"type": "integer"} for name in ("put_copy_post_list", "get_and_other", "free")},
            },
            "request_cost_usd": {"type": "number"},
            "storage": {
                "type": "object",
                "description": "From a cached list_objects_v2 scan of the root prefix; null values until the first "
                "scan succeeded",
                "required": [
                    "bucket", "prefix", "enabled", "scan_interval_s", "objects", "bytes", "gb", "monthly_cost_usd",
                    "scanned_at_ms", "age_s", "scan_seconds", "scans", "scan_failures", "scanning", "last_error",
                    "last_error_at_ms",
                ],
                "properties": {
                    "bucket": {"type": "string"},
                    "prefix": {"type": "string"},
                    "enabled": {"type": "boolean"},
                    "scan_interval_s": {"type": "number"},
                    "objects": _NULLABLE_INT,
                    "bytes": _NULLABLE_INT,
                    "gb": _NULLABLE_NUMBER,
                    "monthly_cost_usd": _NULLABLE_NUMBER,
                    "scanned_at_ms": _NULLABLE_INT,
                    "age_s": _NULLABLE_NUMBER,
                    "scan_seconds": _NULLABLE_NUMBER,
                    "scans": {"type": "integer"},
                    "scan_failures": {"type": "integer"},
                    "scanning": {"type": "boolean"},
                    "last_error": {"type": ["string", "null"]},
                    "last_error_at_ms": _NULLABLE_INT,
                },
            },
        },
    },
    "ServeMetrics": {
        "type": "object",
        "required": ["server", "http", "oxia", "s3", "batcher", "tail_cache"],
        "properties": {
            "server": {"type": "object"},
            "http": {"type": "object"},
            "oxia": {"type": "object", "additionalProperties": {"$ref": SCHEMAS + "OperationStats"}},
            "s3": {
                "type": "object",
                "description": 'S3 operations by name, and the S3 billing estimate under "billing"',
                "properties": {"billing": {"$ref": SCHEMAS + "S3Billing"}},
                "additionalProperties": {"$ref": SCHEMAS + "OperationStats"},
            },
            "batcher": {"type": "object"},
            "tail_cache": {"type": "object"},
        },
    },
}
# fmt: on

INFO = {
    "title": "llog HTTP API",
    "version": "0.1.0",
    "description": "Produce to and consume from llog, a diskless leaderless log (records in S3, offsets and index in "
    "Oxia). The contract of the HTTP API, served by the Lambda functions behind API Gateway and by `llog serve`. "
    "Prose: docs/HTTP_API.md. Generated from llog.api.native.bodies by `python -m devserver.openapi`.",
}
SERVERS = [
    {"url": "http://127.0.0.1:8080", "description": "llog serve"},
    {
        "url": "https://{api}.execute-api.{region}.amazonaws.com/{stage}",
        "description": "API Gateway",
        "variables": {
            "api": {"default": "abc123defg"},
            "region": {"default": "us-east-1"},
            "stage": {"default": "prod"},
        },
    },
]
TAGS = [
    {"name": "log", "description": "Produce and consume"},
    {"name": "groups", "description": "Consumer groups: membership, assignment, committed offsets"},
    {"name": "admin", "description": "Operators"},
    {"name": "serve", "description": "Only served by llog serve"},
]
SECURITY_SCHEMES = {
    "sigv4": {
        "type": "apiKey",
        "name": "Authorization",
        "in": "header",
        "description": "AWS Signature Version 4 (API Gateway IAM authorization)",
        "x-amazon-apigateway-authtype": "awsSigv4",
    }
}


def _content(body: Any) -> dict[str, Any]:
    if isinstance(body, dict):
        return body
    if isinstance(body, tuple):
        schema: dict[str, Any] = {"oneOf": [{"$ref": SCHEMAS + t.__name__} for t in body]}
    else:
        schema = {"$ref": SCHEMAS + body.__name__}
    return {"application/json": {"schema": schema}}


def _answers(operation: Operation) -> dict[str, Any]:
    answers = dict(operation.responses)
    if operation.tag != "serve":
        answers.update({status: (text, Error) for status, text in COMMON_ANSWERS.items()})
        if operation.method != "GET":
            answers.setdefault(415, (UNSUPPORTED_MEDIA_TYPE, Error))
    document: dict[str, Any] = {}
    for status, (text, body) in sorted(answers.items()):
        answer: dict[str, Any] = {"description": text}
        if status == 503:
            answer["headers"] = RETRY_AFTER
        answer["content"] = _content(body)
        document[str(status)] = answer
    return document


def _operation(operation: Operation) -> dict[str, Any]:
    document: dict[str, Any] = {
        "operationId": operation.operation_id,
        "tags": [operation.tag],
        "summary": operation.summary,
    }
    if operation.description:
        document["description"] = operation.description
    if operation.iam_only:
        document["security"] = [{"sigv4": []}]
    if operation.parameters:
        document["parameters"] = [PARAMETERS[name] for name in operation.parameters]
    if operation.request is not None:
        document["requestBody"] = {"required": True, "content": _content(operation.request)}
    document["responses"] = _answers(operation)
    return document


def _tidy(schema: Any) -> Any:
    """msgspec's schema, tidied: a declared ``oneOf`` replaces the ``anyOf`` msgspec derived for the same value."""
    if isinstance(schema, dict):
        tidy = {key: _tidy(value) for key, value in schema.items()}
        if "oneOf" in tidy:
            tidy.pop("anyOf", None)
        return tidy
    if isinstance(schema, list):
        return [_tidy(item) for item in schema]
    return schema


def schemas() -> dict[str, Any]:
    """Every body's JSON Schema (2020-12, OpenAPI 3.1's dialect), by type name, with the named values."""
    _, components = msgspec.json.schema_components((*bodies.REQUESTS, *bodies.ANSWERS), ref_template=SCHEMAS + "{name}")
    named = {"Topic": bodies.Topic, "Group": bodies.Group}
    for name, value in named.items():
        components[name] = msgspec.json.schema(value)
    return {name: _tidy(schema) for name, schema in sorted({**components, **SERVE_SCHEMAS}.items())}


def document() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for operation in OPERATIONS:
        paths.setdefault(operation.path, {})[operation.method.lower()] = _operation(operation)
    return {
        "openapi": OPENAPI_VERSION,
        "info": INFO,
        "servers": SERVERS,
        "tags": TAGS,
        "paths": paths,
        "components": {"schemas": schemas(), "securitySchemes": SECURITY_SCHEMES},
    }


def rendered() -> str:
    return json.dumps(document(), indent=2, ensure_ascii=False) + "\n"


def routes_without_operation() -> list[str]:
    """Routes of the functions the document does not describe (and operations of no route): both must be empty."""
    served = {(route.method, route.resource) for route in routes.ROUTES}
    described = {(op.method, op.path) for op in OPERATIONS if op.tag != "serve"}
    return sorted(f"{method} {path}" for method, path in served ^ described)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devserver.openapi", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed document differs")
    args = parser.parse_args(argv)
    text = rendered()
    if args.check:
        if DOCUMENT.read_text() != text:
            print(f"{DOCUMENT} is not what the bodies generate: run python -m devserver.openapi", file=sys.stderr)
            return 1
        return 0
    DOCUMENT.write_text(text)
    print(f"wrote {DOCUMENT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
