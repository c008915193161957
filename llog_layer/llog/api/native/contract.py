"""Parse the native HTTP API's requests into the services' calls, and render their results as its answers.

Every body is decoded into its definition in ``bodies`` (types, required and
unknown fields checked in C), then the rules a definition cannot state are
checked here with the error a client can act on: a topic name or partition
(``InvalidTopicName``, ``InvalidPartition``), a limit that is a setting
(``LimitExceeded``, naming it), fields that go together. Anything malformed
raises ``RequestRejected`` (with its HTTP status) before any storage is
touched. Answers are built as their definitions and encoded by the caller.
Nothing here knows about API Gateway or Powertools: the Lambda handlers and
``llog serve`` both call it.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from typing import Any, TypeVar

import msgspec
from msgspec import UNSET

from llog.api.native import bodies
from llog.api.native.bodies import Body
from llog.api.native.errors import RequestRejected
from llog.config import Limits
from llog.errors import InvalidArgument, OffsetMismatch
from llog.format.codec import Record
from llog.format.keys import validate_partition, validate_producer_id, validate_topic
from llog.limits import MAX_PARTITIONS
from llog.protocol.append import AppendResult, SharedAppendGroup
from llog.protocol.groups import OffsetCommit
from llog.protocol.producers import ProducerIdentity
from llog.service.consume import ConsumeRequest, FetchPartition, OffsetAnswer, OffsetQuery, PartitionFetch
from llog.service.produce import ProduceEntry

_DECODERS: dict[type[Any], msgspec.json.Decoder[Any]] = {}


# --- decoding ------------------------------------------------------------------------------------------------------


def _rejected(error: msgspec.ValidationError, where: str = "") -> RequestRejected:
    """msgspec's "Expected `int`, got `str` - at `$.a[0].b`" as "a[0].b: expected `int`, got `str`"; ``where``
    names the value a ``msgspec.convert`` read."""
    message, _, path = str(error).partition(" - at `$")
    message = message[:1].lower() + message[1:]
    field = path.rstrip("`").lstrip(".")  # "" for the value itself
    if where:
        field = f"{where}{'' if not field or field.startswith('[') else '.'}{field}"
    return RequestRejected(f"{field or 'the request body'}: {message}")


def decode_body(raw: str | bytes | None, body: type[Body], limits: Limits) -> Body:
    """The request body as ``body``: 400 when empty, not JSON or not its shape, 413 over ``max_request_bytes``."""
    if raw is None or raw == "" or raw == b"":
        raise RequestRejected("the request body is empty; expected a JSON object")
    if isinstance(raw, str):
        # Lone surrogates (possible in text handed over by a framework) are kept as bytes here and rejected by the
        # decoder as invalid UTF-8.
        raw = raw.encode("utf-8", "surrogatepass")
    size = len(raw)
    if size > limits.max_request_bytes:
        raise RequestRejected(
            f"the request body is {size} bytes; the limit is {limits.max_request_bytes} bytes (LLOG_MAX_REQUEST_BYTES)",
            status=413,
            error_type="PayloadTooLarge",
        )
    decoder = _DECODERS.get(body)
    if decoder is None:
        decoder = _DECODERS.setdefault(body, msgspec.json.Decoder(body))
    try:
        decoded: Body = decoder.decode(raw)  # RFC 8259 strictly: UTF-8, no NaN, no lone surrogate
    except msgspec.ValidationError as exc:
        raise _rejected(exc) from None
    except msgspec.DecodeError as exc:
        raise RequestRejected(f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise RequestRejected("the request body is not valid JSON: it nests too deeply") from None
    return decoded


def _topic(topic: str, where: str) -> str:
    try:
        return validate_topic(topic)
    except InvalidArgument as exc:
        raise RequestRejected(f"{where}: {exc}", error_type=exc.error_type) from None


def _partition(partition: int, where: str) -> int:
    if partition < 0:
        raise RequestRejected(f"{where}.partition must be a non-negative integer")
    try:
        return validate_partition(partition)
    except InvalidArgument as exc:
        raise RequestRejected(f"{where}: {exc}", error_type=exc.error_type) from None


def _bytes(value: str | bodies.Base64Bytes, where: str) -> bytes:
    """A JSON string (its UTF-8) or ``{"base64": "..."}``."""
    if isinstance(value, str):
        return value.encode("utf-8")
    try:
        return base64.b64decode(value.base64, validate=True)
    except (binascii.Error, ValueError):
        raise RequestRejected(f"{where}.base64 is not valid base64") from None


# C0 controls but tab, newline and carriage return, DEL, and the C1 controls.
_CONTROL_CHARACTERS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_TEXT_ASCII = bytes([0x09, 0x0A, 0x0D, *range(0x20, 0x7F)])  # the ASCII bytes of text: printable, tab, newlines


def encode_bytes(data: bytes) -> str | dict[str, str]:
    """Text as a JSON string, anything else as ``{"base64": ...}`` (docs/HTTP_API.md, "Values").

    Text is valid UTF-8 without control characters other than tab, newline and
    carriage return. Either form round-trips the exact bytes; the rule only
    keeps binary data (such as ``00 01``) from reading as escaped text.
    """
    if data.isascii() and not data.translate(None, _TEXT_ASCII):
        return data.decode("ascii")  # most values: no UTF-8 decoding and no search of the text
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or _CONTROL_CHARACTERS.search(text):
        return {"base64": base64.b64encode(data).decode("ascii")}
    return text


def _records(raws: list[str | dict[str, Any]], where: str) -> list[Record | bytes]:
    """A topic entry's records; a plain string record is its UTF-8 bytes alone (no key, headers or timestamp)."""
    if all(type(raw) is str for raw in raws):  # strings alone, the common case: encoded by map, in C
        return list(map(str.encode, raws))  # type: ignore[arg-type]
    return [raw.encode() if isinstance(raw, str) else _record(raw, f"{where}[{j}]") for j, raw in enumerate(raws)]


def _record(raw: dict[str, Any], where: str) -> Record:
    try:
        if raw.keys() == {"base64"}:
            return Record(_bytes(msgspec.convert(raw, bodies.Base64Bytes), where))
        if "value" not in raw:
            raise RequestRejected(
                f'{where} must be a string, {{"base64": ...}} or an object with "value" '
                '(and optional "key", "headers", "timestamp_ms")'
            )
        record = msgspec.convert(raw, bodies.RecordObject)
    except msgspec.ValidationError as exc:
        raise _rejected(exc, where) from None
    key = None if record.key is None else _bytes(record.key, f"{where}.key")
    headers = tuple((name, _bytes(v, f"{where}.headers.{name}")) for name, v in (record.headers or {}).items())
    return Record(_bytes(record.value, f"{where}.value"), key, headers, record.timestamp_ms)


def _entry_count(entries: list[Any], limits: Limits) -> None:
    if len(entries) > limits.max_partitions_per_request:
        raise RequestRejected(
            f"topic_partitions has {len(entries)} entries; the limit is "
            f"{limits.max_partitions_per_request} (LLOG_MAX_PARTITIONS_PER_REQUEST)",
            error_type="LimitExceeded",
        )


# --- produce -------------------------------------------------------------------------------------------------------


def _producer(request: bodies.ProduceRequest) -> tuple[str, int] | None:
    """The request's idempotent producer (``producer_id``, ``producer_epoch``), if it names one."""
    if request.producer_id is None and request.producer_epoch is None:
        return None
    if request.producer_id is None:
        raise RequestRejected("producer_id must be a string, an id issued by POST /producers")
    try:
        validate_producer_id(request.producer_id)
    except InvalidArgument as exc:
        raise RequestRejected(str(exc)) from None
    if request.producer_epoch is None:
        raise RequestRejected("producer_epoch must be given with producer_id")
    return request.producer_id, request.producer_epoch


def parse_produce_request(raw: str | bytes | None, limits: Limits) -> list[ProduceEntry | SharedAppendGroup]:
    """Each entry names a partition, or (none, or null) routes its records by key among the topic's partitions.

    An entry with a partition may carry the idempotent producer's ``sequence`` and an ``expected_offset``;
    a keyed entry may not (a client that wants them routes its records itself).
    """
    request = decode_body(raw, bodies.ProduceRequest, limits)
    _entry_count(request.topic_partitions, limits)
    producer = _producer(request)
    groups: list[ProduceEntry | SharedAppendGroup] = []
    total = 0
    for i, item in enumerate(request.topic_partitions):
        where = f"topic_partitions[{i}]"
        topic = _topic(item.topic, where)
        total += len(item.records)
        if total > limits.max_records_per_request:
            raise RequestRejected(
                f"the request has more than {limits.max_records_per_request} records (LLOG_MAX_RECORDS_PER_REQUEST)",
                error_type="LimitExceeded",
            )
        records = _records(item.records, f"{where}.records")
        if item.partition is None:
            if producer is not None or item.sequence is not None or item.expected_offset is not None:
                raise RequestRejected(
                    f"{where} has no partition: an idempotent (producer_id) or conditional (expected_offset) "
                    "entry must name its partition"
                )
            groups.append(ProduceEntry(topic, None, records))
        else:
            partition = _partition(item.partition, where)
            groups.append(SharedAppendGroup(topic, partition, records, *_entry_conditions(item, where, producer)))
    return groups


def _entry_conditions(
    item: bodies.ProduceTopicPartition, where: str, producer: tuple[str, int] | None
) -> tuple[str | None, int | None, int | None, int | None]:
    """A topic entry's ``(producer_id, producer_epoch, sequence, expected_offset)`` (docs/HTTP_API.md)."""
    if producer is not None and item.sequence is None:
        raise RequestRejected(f"{where}.sequence is required: the request names a producer_id")
    if producer is None and item.sequence is not None:
        raise RequestRejected(f"{where}.sequence needs a producer_id and producer_epoch in the request")
    pid, epoch = producer if producer is not None else (None, None)
    return pid, epoch, item.sequence, item.expected_offset


def produce_result(result: AppendResult) -> bodies.ProduceSuccess | bodies.ProduceFailure:
    if result.error is None:
        return bodies.ProduceSuccess(
            result.topic,
            result.partition,
            True,
            result.count,
            result.start_offset,  # type: ignore[arg-type]  # set on success
            result.end_offset,  # type: ignore[arg-type]
            result.index_key,
            result.wal_uri,
            True if result.duplicate else None,
        )
    next_offset = result.error.next_offset if isinstance(result.error, OffsetMismatch) else None
    return bodies.ProduceFailure(
        result.topic,
        result.partition,
        False,
        result.count,
        result.error.error_type,
        str(result.error),
        result.error.retriable,
        next_offset,
    )


def produce_response(results: Sequence[AppendResult]) -> tuple[int, bodies.ProduceResponse]:
    """Status per docs/HTTP_API.md: 200 all ok; 503 all failed with back-pressure; 412 when every failure is an
    ``OffsetMismatch``; 409 otherwise."""
    errors = [r for r in results if not r.ok]
    if not errors:
        status = 200
    elif len(errors) == len(results) and all(r.error_type == "BackPressureRejected" for r in errors):
        status = 503
    elif all(isinstance(r.error, OffsetMismatch) for r in errors):
        status = 412
    else:
        status = 409
    answer = bodies.ProduceResponse([produce_result(r) for r in results], len(results) - len(errors), len(errors))
    return status, answer


def parse_producers_request(raw: str | bytes | None, limits: Limits) -> str | None:
    """``POST /producers``: ``{}`` (a new id) or ``{"producer_id": ...}`` (bump its epoch)."""
    producer_id = decode_body(raw, bodies.ProducerRequest, limits).producer_id
    if producer_id is None:
        return None
    try:
        return validate_producer_id(producer_id)
    except InvalidArgument as exc:
        raise RequestRejected(str(exc)) from None


def producer_answer(identity: ProducerIdentity) -> bodies.Producer:
    return bodies.Producer(identity.producer_id, identity.epoch)


# --- topics --------------------------------------------------------------------------------------------------------


def _partition_count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PARTITIONS:
        raise RequestRejected(
            f"partitions must be an integer from 1 to {MAX_PARTITIONS}", error_type="InvalidPartitionCount"
        )
    return value


def parse_create_topic(raw: str | bytes | None, limits: Limits) -> tuple[str, int, dict[str, Any] | None]:
    """``POST /topics``: ``(topic, partitions, config)``; the config is checked by ``TopicConfig.parse``."""
    request = decode_body(raw, bodies.CreateTopicRequest, limits)
    return _topic(request.topic, "the request body"), _partition_count(request.partitions), request.config


def parse_grow_topic(raw: str | bytes | None, limits: Limits) -> int:
    """``POST /topics/{topic}/partitions``: the new partition count."""
    return _partition_count(decode_body(raw, bodies.GrowTopicRequest, limits).partitions)


# --- consume -------------------------------------------------------------------------------------------------------

Fetched = TypeVar("Fetched", bodies.FetchTopicPartition, bodies.OffsetQuery)


def _distinct_partitions(items: list[Fetched], limits: Limits) -> list[tuple[Fetched, str, int]]:
    """Each entry with its checked topic and partition; a partition named twice is refused."""
    _entry_count(items, limits)
    found = []
    seen = set()
    for i, item in enumerate(items):
        where = f"topic_partitions[{i}]"
        topic, partition = _topic(item.topic, where), _partition(item.partition, where)
        if (topic, partition) in seen:
            raise RequestRejected(f"{where} repeats {topic}/{partition}")
        seen.add((topic, partition))
        found.append((item, topic, partition))
    return found


def parse_consume_request(raw: str | bytes | None, limits: Limits) -> ConsumeRequest:
    request = decode_body(raw, bodies.ConsumeRequest, limits)
    partitions = []
    for item, topic, partition in _distinct_partitions(request.topic_partitions, limits):
        max_bytes = (
            limits.default_partition_max_bytes if item.partition_max_bytes is UNSET else item.partition_max_bytes
        )
        partitions.append(FetchPartition(topic, partition, item.fetch_offset, max_bytes))
    if request.max_wait_ms > limits.max_wait_ms:
        raise RequestRejected(
            f"max_wait_ms {request.max_wait_ms} exceeds the limit of {limits.max_wait_ms} ms "
            "(LLOG_CONSUME_MAX_WAIT_MS)",
            error_type="LimitExceeded",
        )
    return ConsumeRequest(
        partitions,
        max_wait_ms=request.max_wait_ms,
        min_bytes=request.min_bytes,
        max_bytes=limits.max_response_bytes
        if request.max_bytes is UNSET
        else min(request.max_bytes, limits.max_response_bytes),
    )


def consume_result(result: PartitionFetch) -> dict[str, Any]:
    """``bodies.PartitionFetch`` as plain data: the one answer not built as its definition, because orjson writes
    its large strings about twice as fast as msgspec (docs/PERFORMANCE_NOTES.md); tests decode it as the
    definition."""
    doc: dict[str, Any] = {
        "topic": result.topic,
        "partition": result.partition,
        "ok": result.error is None,
        "high_watermark": result.high_watermark,
        "log_start_offset": result.log_start_offset,
        "next_fetch_offset": result.next_fetch_offset,
        "records": [
            {
                "offset": r.offset,
                "timestamp_ms": r.timestamp_ms,
                "key": None if r.key is None else encode_bytes(r.key),
                "headers": {name: encode_bytes(value) for name, value in r.headers} if r.headers else {},
                "value": encode_bytes(r.value),
            }
            for r in result.records
        ],
    }
    if result.error is not None:
        doc.update(error_type=result.error.error_type, error=str(result.error), retriable=result.error.retriable)
    return doc


def consume_response(results: Sequence[PartitionFetch]) -> tuple[int, dict[str, Any]]:
    """200 with per-partition results (``bodies.ConsumeResponse``); per-partition failures are reported inline, as
    Kafka's fetch does."""
    return 200, {"results": [consume_result(r) for r in results]}


def parse_offsets_request(raw: str | bytes | None, limits: Limits) -> list[OffsetQuery]:
    """``POST /offsets``: ``topic_partitions`` of ``{topic, partition, timestamp_ms}``; a time may be
    ``"earliest"`` or ``"latest"``."""
    request = decode_body(raw, bodies.OffsetsRequest, limits)
    return [
        OffsetQuery(topic, partition, item.timestamp_ms)
        for item, topic, partition in _distinct_partitions(request.topic_partitions, limits)
    ]


def offsets_response(answers: Sequence[OffsetAnswer]) -> tuple[int, bodies.OffsetsResponse]:
    """200 with one result per partition; a partition's failure is reported inline, as in ``/consume``."""
    results = []
    for answer in answers:
        query, found, error = answer.query, answer.found, answer.error
        result = bodies.OffsetResult(query.topic, query.partition, error is None)
        if found is not None:
            result.offset, result.timestamp_ms = found.offset, found.timestamp_ms
            result.log_start_offset, result.high_watermark = found.log_start, found.high_watermark
        if error is not None:
            result.error_type, result.error, result.retriable = error.error_type, str(error), error.retriable
        results.append(result)
    return 200, bodies.OffsetsResponse(results)


# --- consumer groups -----------------------------------------------------------------------------------------------


def parse_group_join(raw: str | bytes | None, limits: Limits) -> bodies.GroupJoinRequest:
    return decode_body(raw, bodies.GroupJoinRequest, limits)


def parse_group_heartbeat(raw: str | bytes | None, limits: Limits) -> bodies.GroupHeartbeatRequest:
    return decode_body(raw, bodies.GroupHeartbeatRequest, limits)


def parse_group_leave(raw: str | bytes | None, limits: Limits) -> bodies.GroupLeaveRequest:
    return decode_body(raw, bodies.GroupLeaveRequest, limits)


def parse_group_commit(raw: str | bytes | None, limits: Limits) -> tuple[str, int, list[OffsetCommit]]:
    request = decode_body(raw, bodies.GroupCommitRequest, limits)
    offsets = [OffsetCommit(o.topic, o.partition, o.offset) for o in request.offsets]
    return request.member_id, request.generation, offsets
