"""The HTTP contract of docs/HTTP_API.md (``POST /produce``, ``POST /consume``, topics) as plain functions.

Parsing turns a decoded JSON body into typed requests and raises
``RequestRejected`` (with the HTTP status to answer) for anything malformed,
before any storage is touched. Rendering turns library results into the
response documents and status codes. Nothing here knows about API Gateway or
Powertools: the Lambda handlers and ``llog serve`` both call it.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from llog.config import Limits
from llog.errors import InvalidArgument, LlogError, OffsetMismatch
from llog.format.codec import Headers, Record
from llog.format.keys import validate_partition, validate_producer_id, validate_topic
from llog.protocol.append import AppendResult, SharedAppendGroup
from llog.protocol.producers import ProducerIdentity
from llog.protocol.read import EARLIEST, LATEST
from llog.protocol.topics import MAX_PARTITIONS
from llog.service.consume import ConsumeRequest, FetchPartition, OffsetAnswer, OffsetQuery, PartitionFetch
from llog.service.produce import ProduceEntry

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class RequestRejected(LlogError):
    """The request is malformed or over a limit; nothing was written."""

    def __init__(self, message: str, *, status: int = 400, error_type: str = "InvalidRequest") -> None:
        super().__init__(message)
        self.status = status
        self._error_type = error_type

    @property
    def error_type(self) -> str:
        return self._error_type


# --- decoding helpers ------------------------------------------------------------


def parse_json_body(body: str | bytes | None, limits: Limits) -> Any:
    if body is None or body == "" or body == b"":
        raise RequestRejected("the request body is empty; expected a JSON object")
    if isinstance(body, str):
        # Lone surrogates (possible in text handed over by a framework) are kept
        # as bytes here and rejected below as invalid UTF-8.
        body = body.encode("utf-8", "surrogatepass")
    size = len(body)
    if size > limits.max_request_bytes:
        raise RequestRejected(
            f"the request body is {size} bytes; the limit is {limits.max_request_bytes} bytes",
            status=413,
            error_type="PayloadTooLarge",
        )
    try:
        return orjson.loads(body)  # RFC 8259 strictly: UTF-8, no NaN, no lone surrogate, at most 1,024 levels deep
    except orjson.JSONDecodeError as exc:
        raise RequestRejected(f"the request body is not valid JSON: {exc}") from None


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise RequestRejected(f"{where} must be a JSON object")
    return value


def _non_empty_list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise RequestRejected(f"{where} must be a non-empty list")
    return value


def _int_field(
    doc: Mapping[str, Any],
    name: str,
    where: str,
    *,
    default: int | None = None,
    minimum: int = 0,
    maximum: int = INT64_MAX,
) -> int:
    value = doc.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestRejected(f"{where}.{name} must be an integer")
    if not minimum <= value <= maximum:
        raise RequestRejected(f"{where}.{name} must be between {minimum} and {maximum}")
    return value


def _topic(item: Mapping[str, Any], where: str) -> str:
    topic = item.get("topic")
    if not isinstance(topic, str) or not topic:
        raise RequestRejected(f"{where}.topic must be a non-empty string")
    try:
        return validate_topic(topic)
    except InvalidArgument as exc:
        raise RequestRejected(f"{where}: {exc}", error_type=exc.error_type) from None


def _topic_partition(item: Mapping[str, Any], where: str) -> tuple[str, int]:
    topic = _topic(item, where)
    partition = item.get("partition")
    if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
        raise RequestRejected(f"{where}.partition must be a non-negative integer")
    try:
        return topic, validate_partition(partition)
    except InvalidArgument as exc:
        raise RequestRejected(f"{where}: {exc}", error_type=exc.error_type) from None


def decode_bytes(value: Any, where: str) -> bytes:
    """A JSON string (UTF-8) or ``{"base64": "..."}``."""
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate from a JSON escape such as "\ud800"
            raise RequestRejected(f"{where} is not valid Unicode") from None
    if isinstance(value, dict) and set(value) == {"base64"} and isinstance(value["base64"], str):
        try:
            return base64.b64decode(value["base64"], validate=True)
        except (binascii.Error, ValueError):
            raise RequestRejected(f"{where}.base64 is not valid base64") from None
    raise RequestRejected(f'{where} must be a string or an object {{"base64": "..."}}')


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


def _header_name(name: str, where: str) -> str:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise RequestRejected(f"{where} has a header name that is not valid Unicode") from None
    return name


def _records(raws: list[Any], where: str) -> list[Record | bytes]:
    """A topic entry's records; a plain string record is its UTF-8 bytes alone (no key, headers or timestamp)."""
    if set(map(type, raws)) == {str}:  # strings alone, the common case: encoded by map, in C
        try:
            return list(map(str.encode, raws))
        except UnicodeEncodeError:
            pass  # a lone surrogate: named below
    records: list[Record | bytes] = []
    for j, raw in enumerate(raws):
        if type(raw) is str:
            try:
                records.append(raw.encode("utf-8"))
                continue
            except UnicodeEncodeError:
                pass  # _record names the record
        records.append(_record(raw, f"{where}[{j}]"))
    return records


def _record(raw: Any, where: str) -> Record:
    if isinstance(raw, str) or (isinstance(raw, dict) and set(raw) == {"base64"}):
        return Record(decode_bytes(raw, where))
    if not isinstance(raw, dict) or "value" not in raw:
        raise RequestRejected(
            f'{where} must be a string, {{"base64": ...}} or an object with "value" '
            '(and optional "key", "headers", "timestamp_ms")'
        )
    unknown = set(raw) - {"value", "key", "headers", "timestamp_ms"}
    if unknown:
        raise RequestRejected(f"{where} has unknown fields: {', '.join(sorted(unknown))}")
    key = None if raw.get("key") is None else decode_bytes(raw["key"], f"{where}.key")
    headers: Headers = ()
    if raw.get("headers") is not None:
        header_doc = _object(raw["headers"], f"{where}.headers")
        headers = tuple(
            (_header_name(name, f"{where}.headers"), decode_bytes(v, f"{where}.headers.{name}"))
            for name, v in header_doc.items()
        )
    timestamp = None
    if raw.get("timestamp_ms") is not None:
        timestamp = _int_field(raw, "timestamp_ms", where, minimum=INT64_MIN)
    return Record(decode_bytes(raw["value"], f"{where}.value"), key, headers, timestamp)


def _topic_partitions(body: Mapping[str, Any], limits: Limits) -> list[Any]:
    items = _non_empty_list(body.get("topic_partitions"), "topic_partitions")
    if len(items) > limits.max_partitions_per_request:
        raise RequestRejected(
            f"topic_partitions has {len(items)} entries; the limit is "
            f"{limits.max_partitions_per_request} (LLOG_MAX_PARTITIONS_PER_REQUEST)",
            error_type="LimitExceeded",
        )
    return items


# --- produce -------------------------------------------------------------------------


def _producer(body: Mapping[str, Any]) -> tuple[str, int] | None:
    """The request's idempotent producer (``producer_id``, ``producer_epoch``), if it names one."""
    if body.get("producer_id") is None and body.get("producer_epoch") is None:
        return None
    producer_id = body.get("producer_id")
    if not isinstance(producer_id, str):
        raise RequestRejected("producer_id must be a string, an id issued by POST /producers")
    try:
        validate_producer_id(producer_id)
    except InvalidArgument as exc:
        raise RequestRejected(str(exc)) from None
    if body.get("producer_epoch") is None:
        raise RequestRejected("producer_epoch must be given with producer_id")
    return producer_id, _int_field(body, "producer_epoch", "request", maximum=2**31 - 1)


def parse_produce_request(doc: Any, limits: Limits) -> list[ProduceEntry | SharedAppendGroup]:
    """Each entry names a partition, or (none, or null) routes its records by key among the topic's partitions.

    An entry with a partition may carry the idempotent producer's ``sequence`` and an ``expected_offset``;
    a keyed entry may not (a client that wants them routes its records itself).
    """
    body = _object(doc, "the request body")
    items = _topic_partitions(body, limits)
    producer = _producer(body)
    groups: list[ProduceEntry | SharedAppendGroup] = []
    total = 0
    for i, raw in enumerate(items):
        where = f"topic_partitions[{i}]"
        item = _object(raw, where)
        # Without a partition (or null) the records are routed by key among the topic's partitions.
        keyed = item.get("partition") is None
        topic, partition = (_topic(item, where), None) if keyed else _topic_partition(item, where)
        records_raw = _non_empty_list(item.get("records"), f"{where}.records")
        total += len(records_raw)
        if total > limits.max_records_per_request:
            raise RequestRejected(
                f"the request has more than {limits.max_records_per_request} records (LLOG_MAX_RECORDS_PER_REQUEST)",
                error_type="LimitExceeded",
            )
        records = _records(records_raw, f"{where}.records")
        if partition is None:
            if producer is not None or item.get("sequence") is not None or item.get("expected_offset") is not None:
                raise RequestRejected(
                    f"{where} has no partition: an idempotent (producer_id) or conditional (expected_offset) "
                    "entry must name its partition"
                )
            groups.append(ProduceEntry(topic, None, records))
        else:
            groups.append(SharedAppendGroup(topic, partition, records, *_entry_conditions(item, where, producer)))
    return groups


def _entry_conditions(
    item: Mapping[str, Any], where: str, producer: tuple[str, int] | None
) -> tuple[str | None, int | None, int | None, int | None]:
    """A topic entry's ``(producer_id, producer_epoch, sequence, expected_offset)`` (docs/HTTP_API.md)."""
    sequence = None
    if producer is not None:
        if item.get("sequence") is None:
            raise RequestRejected(f"{where}.sequence is required: the request names a producer_id")
        sequence = _int_field(item, "sequence", where)
    elif item.get("sequence") is not None:
        raise RequestRejected(f"{where}.sequence needs a producer_id and producer_epoch in the request")
    expected = None if item.get("expected_offset") is None else _int_field(item, "expected_offset", where, minimum=1)
    pid, epoch = producer if producer is not None else (None, None)
    return pid, epoch, sequence, expected


def produce_result_json(result: AppendResult) -> dict[str, Any]:
    doc: dict[str, Any] = {"topic": result.topic, "partition": result.partition, "ok": result.ok, "count": result.count}
    if result.error is None:
        doc.update(
            start_offset=result.start_offset,
            end_offset=result.end_offset,
            index_key=result.index_key,
            wal_uri=result.wal_uri,
        )
        if result.duplicate:
            doc["duplicate"] = True
    else:
        doc.update(error_type=result.error_type, error=str(result.error), retriable=result.error.retriable)
        if isinstance(result.error, OffsetMismatch):
            doc["next_offset"] = result.error.next_offset
    return doc


def produce_response(results: Sequence[AppendResult]) -> tuple[int, dict[str, Any]]:
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
    return status, {
        "results": [produce_result_json(r) for r in results],
        "success_count": len(results) - len(errors),
        "error_count": len(errors),
    }


# --- topics --------------------------------------------------------------------------


def _only_fields(doc: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(doc) - set(allowed))
    if unknown:
        raise RequestRejected(f"{where} has unknown fields: {', '.join(unknown)} (known: {', '.join(allowed)})")


def _partition_count(doc: Mapping[str, Any], *, default: int | None = None) -> int:
    value = doc.get("partitions", default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PARTITIONS:
        raise RequestRejected(
            f"partitions must be an integer from 1 to {MAX_PARTITIONS}", error_type="InvalidPartitionCount"
        )
    return value


def parse_create_topic(doc: Any) -> tuple[str, int, dict[str, Any] | None]:
    """``POST /topics``: ``(topic, partitions, config)``; the config is checked by ``TopicConfig.parse``."""
    body = _object(doc, "the request body")
    _only_fields(body, ("topic", "partitions", "config"), "the request body")
    config = body.get("config")
    if config is not None:
        config = dict(_object(config, "config"))
    return _topic(body, "the request body"), _partition_count(body, default=1), config


def parse_grow_topic(doc: Any) -> int:
    """``POST /topics/{topic}/partitions``: the new partition count."""
    body = _object(doc, "the request body")
    _only_fields(body, ("partitions",), "the request body")
    if "partitions" not in body:
        raise RequestRejected("the request body needs partitions, the new partition count")
    return _partition_count(body)


# --- producers -----------------------------------------------------------------------


def parse_producers_request(doc: Any) -> str | None:
    """``POST /producers``: ``{}`` (a new id) or ``{"producer_id": ...}`` (bump its epoch)."""
    body = _object(doc, "the request body")
    _only_fields(body, ("producer_id",), "the request body")
    producer_id = body.get("producer_id")
    if producer_id is None:
        return None
    try:
        return validate_producer_id(producer_id)
    except InvalidArgument as exc:
        raise RequestRejected(str(exc)) from None


def producer_json(identity: ProducerIdentity) -> dict[str, Any]:
    return {"producer_id": identity.producer_id, "producer_epoch": identity.epoch}


# --- consume -------------------------------------------------------------------------


def parse_consume_request(doc: Any, limits: Limits) -> ConsumeRequest:
    body = _object(doc, "the request body")
    items = _topic_partitions(body, limits)
    partitions = []
    seen = set()
    for i, raw in enumerate(items):
        where = f"topic_partitions[{i}]"
        item = _object(raw, where)
        topic, partition = _topic_partition(item, where)
        if (topic, partition) in seen:
            raise RequestRejected(f"{where} repeats {topic}/{partition}")
        seen.add((topic, partition))
        partitions.append(
            FetchPartition(
                topic,
                partition,
                _int_field(item, "fetch_offset", where),
                _int_field(item, "partition_max_bytes", where, default=limits.default_partition_max_bytes, minimum=1),
            )
        )
    max_wait = _int_field(body, "max_wait_ms", "request", default=0)
    if max_wait > limits.max_wait_ms:
        raise RequestRejected(
            f"max_wait_ms {max_wait} exceeds the limit of {limits.max_wait_ms} ms (LLOG_CONSUME_MAX_WAIT_MS)",
            error_type="LimitExceeded",
        )
    return ConsumeRequest(
        partitions,
        max_wait_ms=max_wait,
        min_bytes=_int_field(body, "min_bytes", "request", default=1),
        max_bytes=min(
            _int_field(body, "max_bytes", "request", default=limits.max_response_bytes, minimum=1),
            limits.max_response_bytes,
        ),
    )


def parse_offsets_request(doc: Any, limits: Limits) -> list[OffsetQuery]:
    """``POST /offsets``: ``topic_partitions`` of ``{topic, partition, timestamp_ms}``; a time may be
    ``"earliest"`` or ``"latest"``."""
    body = _object(doc, "the request body")
    _only_fields(body, ("topic_partitions",), "the request body")
    queries = []
    seen = set()
    for i, raw in enumerate(_topic_partitions(body, limits)):
        where = f"topic_partitions[{i}]"
        item = _object(raw, where)
        _only_fields(item, ("topic", "partition", "timestamp_ms"), where)
        topic, partition = _topic_partition(item, where)
        if (topic, partition) in seen:
            raise RequestRejected(f"{where} repeats {topic}/{partition}")
        seen.add((topic, partition))
        timestamp = item.get("timestamp_ms")
        if timestamp not in (EARLIEST, LATEST) and (
            isinstance(timestamp, bool) or not isinstance(timestamp, int) or not 0 <= timestamp <= INT64_MAX
        ):
            raise RequestRejected(
                f'{where}.timestamp_ms must be a time in ms since the epoch (0 to {INT64_MAX}), "earliest" or "latest"'
            )
        queries.append(OffsetQuery(topic, partition, timestamp))
    return queries


def offsets_response(answers: Sequence[OffsetAnswer]) -> tuple[int, dict[str, Any]]:
    """200 with one result per partition; a partition's failure is reported inline, as in ``/consume``."""
    results = []
    for answer in answers:
        query, found = answer.query, answer.found
        doc: dict[str, Any] = {"topic": query.topic, "partition": query.partition, "ok": answer.error is None}
        if found is not None:
            doc.update(
                offset=found.offset,
                timestamp_ms=found.timestamp_ms,
                log_start_offset=found.log_start,
                high_watermark=found.high_watermark,
            )
        if answer.error is not None:
            doc.update(error_type=answer.error.error_type, error=str(answer.error), retriable=answer.error.retriable)
        results.append(doc)
    return 200, {"results": results}


def error_body(error: LlogError | str, error_type: str | None = None) -> dict[str, Any]:
    if isinstance(error, LlogError):
        return {"error": str(error), "error_type": error_type or error.error_type}
    return {"error": error, "error_type": error_type or "Error"}


def consume_result_json(result: PartitionFetch) -> dict[str, Any]:
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
    """200 with per-partition results; per-partition failures are reported inline, as Kafka's fetch does."""
    return 200, {"results": [consume_result_json(r) for r in results]}
