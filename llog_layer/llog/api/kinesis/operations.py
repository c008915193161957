"""The Kinesis Data Streams operations, each over llog's services (docs/KINESIS.md).

A stream is an explicit topic (one created by ``POST /topics``, ``llog topics create`` or CreateStream), a
shard one of its partitions; a topic created implicitly by the native produce has no hash key ranges and is
no stream. A record's ``PartitionKey`` is stored as its key (UTF-8), its ``Data`` as its value, and the time
llog accepted it as its timestamp, so the native ``/consume`` reads what ``PutRecord`` wrote and GetRecords
what ``/produce`` wrote (a record without a key reads with an empty ``PartitionKey``).

Each operation takes the request document (``wire``'s shape) and a ``Kinesis`` (the services, the caller's
permissions, the clock) and returns the answer document; a refusal is a ``KinesisError``, raised before
anything is written. Which permission each needs is ``OPERATIONS``' action: ``read``, ``write`` or
``admin``.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from llog.api.kinesis import wire
from llog.api.kinesis.errors import (
    AccessDeniedException,
    InvalidArgumentException,
    KinesisError,
    LimitExceededException,
    ResourceInUseException,
    ResourceNotFoundException,
    SerializationException,
    ServiceUnavailable,
    ValidationException,
)
from llog.api.kinesis.iterators import ShardIterator, decode_iterator, encode_iterator
from llog.api.kinesis.sequence import MAX_OFFSET, OFFSET_DIGITS, offset_in_shard, sequence_number
from llog.api.kinesis.shards import hash_key_range, partition_of, shard_for, shard_id
from llog.errors import (
    InvalidArgument,
    InvalidPartitionCount,
    InvalidTopicName,
    LlogError,
    OffsetOutOfRange,
    PartitionNotInitialized,
    RecordsLost,
    TopicDeleted,
    TopicExists,
    UnknownTopic,
)
from llog.format.codec import Record
from llog.format.keys import validate_topic
from llog.format.kv.document import INITIAL_OFFSET
from llog.limits import MAX_PARTITIONS
from llog.protocol.append import AppendResult, SharedAppendGroup
from llog.protocol.topics import TopicRecord
from llog.service.admin import AdminService
from llog.service.consume import ConsumeRequest, ConsumeService, FetchPartition, OffsetQuery
from llog.service.produce import ProduceService

log = logging.getLogger(__name__)

MAX_RECORD_BYTES = 1024 * 1024  # Data plus PartitionKey of one record
MAX_PUT_RECORDS = 500
MAX_PUT_RECORDS_BYTES = 5 * 1024 * 1024
MAX_GET_RECORDS = 10_000
MAX_GET_RECORDS_BYTES = 10 * 1024 * 1024
ON_DEMAND_SHARDS = 4  # what CreateStream gives an on-demand stream
MAX_LIST_STREAMS = 10_000
DEFAULT_LIST_STREAMS = 100
MAX_LIST_SHARDS = 10_000
# What DescribeStream says of a stream whose retention is unlimited: Kinesis's longest (a year). llog keeps
# its records for as long as its retention settings say.
MAX_RETENTION_HOURS = 8760
MAX_ARRIVAL_MS = 253_402_300_799_999  # the last millisecond of the year 9999
_STREAM_NAME = re.compile(r"[a-zA-Z0-9_.-]{1,128}")
_STREAM_ARN = re.compile(r"arn:aws[a-z-]*:kinesis:[a-z0-9-]+:[0-9]{12}:stream/([a-zA-Z0-9_.-]{1,128})")


@dataclass(frozen=True)
class Kinesis:
    """What an operation runs against: the services (created on first use), the caller's rights, the clock."""

    produce: Callable[[], ProduceService]
    consume: Callable[[], ConsumeService]
    admin: Callable[[], AdminService]
    iterator_key: Callable[[], bytes]
    allows: Callable[[str, str], bool]  # (stream, action) for the caller's key
    reads_any: Callable[[], bool]  # whether the key may read some stream
    region: str
    account: str
    now_ms: Callable[[], int]
    max_answer_bytes: int | None = None  # behind Lambda: its response payload limit; None: Kinesis's limits alone

    def arn(self, stream: str) -> str:
        return f"arn:aws:kinesis:{self.region}:{self.account}:stream/{stream}"

    def require(self, stream: str, action: str) -> None:
        if not self.allows(stream, action):
            raise AccessDeniedException(
                f"the access key has no {action} permission on stream {stream} (llog keys create --streams ...)"
            )


# --- streams -------------------------------------------------------------------------------------------------------


def _validation(member: str, value: object, constraint: str) -> ValidationException:
    return ValidationException(
        f"1 validation error detected: Value '{value}' at '{member}' failed to satisfy constraint: {constraint}"
    )


def stream_of(document: dict[str, Any]) -> str:
    """The stream a request names, by ``StreamName`` or ``StreamARN``; ``ValidationException`` for neither."""
    name = wire.string(document, "StreamName", required=False)
    arn = wire.string(document, "StreamARN", required=False)
    if arn is not None:
        match = _STREAM_ARN.fullmatch(arn)
        if match is None:
            raise _validation("streamARN", arn, "Member must satisfy regular expression pattern: "
                              "arn:aws.*:kinesis:.*:\\d{12}:stream/\\S+")  # fmt: skip
        if name is not None and name != match.group(1):
            raise InvalidArgumentException(f"StreamName {name} and StreamARN {arn} name different streams")
        name = match.group(1)
    if name is None:
        raise InvalidArgumentException("Either StreamName or StreamARN should be provided.")
    if not _STREAM_NAME.fullmatch(name):
        raise _validation("streamName", name, "Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+")
    return name


@dataclass(frozen=True)
class Stream:
    name: str
    topic_id: str
    shards: int
    created_at_ms: int
    retention_ms: int | None


def _not_found(stream: str, kinesis: Kinesis) -> ResourceNotFoundException:
    return ResourceNotFoundException(f"Stream {stream} under account {kinesis.account} not found.")


def describe(kinesis: Kinesis, stream: str) -> Stream:
    """The stream's topic, if it is one (explicit, not deleted): one read of its topic record."""
    try:
        record = kinesis.admin().topic_record(validate_topic(stream))
    except (UnknownTopic, InvalidArgument):
        raise _not_found(stream, kinesis) from None
    assert record.topic_id is not None  # an explicit topic this version reads has one
    return Stream(stream, record.topic_id, record.partitions, record.created_at_ms, record.config.retention_ms)


def _offsets(kinesis: Kinesis, stream: Stream, partition: int) -> tuple[int, int]:
    """A shard's log start and next offset (a partition never written: both the first offset)."""
    try:
        status = kinesis.admin().status(stream.name, partition)
    except PartitionNotInitialized:
        return INITIAL_OFFSET, INITIAL_OFFSET
    return status["log_start_offset"], status["next_offset"]


def _limit(document: dict[str, Any], name: str, most: int, default: int) -> int:
    """A page size member: ``default`` when absent, 1 to ``most`` when given."""
    value = wire.integer(document, name, required=False)
    if value is None:
        return default
    if not 1 <= value <= most:
        raise _validation(name[:1].lower() + name[1:], value, f"Member must have value between 1 and {most}")
    return value


def _object(document: dict[str, Any], name: str) -> dict[str, Any]:
    """A structure member; ``{}`` when absent."""
    value = document.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SerializationException(f"{name} must be an object")
    return value


def _create_stream(kinesis: Kinesis, document: dict[str, Any]) -> dict[str, Any]:
    stream = stream_of(document)
    mode = wire.string(_object(document, "StreamModeDetails"), "StreamMode", required=False) or "PROVISIONED"
    count = wire.integer(document, "ShardCount", required=False)
    if mode == "ON_DEMAND":
        if count is not None:
            raise InvalidArgumentException("ShardCount must not be given for an ON_DEMAND stream")
        count = ON_DEMAND_SHARDS
    elif mode != "PROVISIONED":
        raise _validation("streamModeDetails.streamMode", mode,
                          "Member must satisfy enum value set: [PROVISIONED, ON_DEMAND]")  # fmt: skip
    if count is None:
        raise InvalidArgumentException("ShardCount is required for a PROVISIONED stream")
    if count < 1:
        raise _validation("shardCount", count, "Member must have value greater than or equal to 1")
    if count > MAX_PARTITIONS:
        raise LimitExceededException(f"a stream has at most {MAX_PARTITIONS} shards here; {count} were asked for")
    tags = None if document.get("Tags") is None else _tags(document["Tags"], "tags")
    if tags is not None and len(tags) > MAX_TAGS:
        raise _validation("tags", "...", f"Member must have length less than or equal to {MAX_TAGS}")
    try:
        created, _ = kinesis.admin().create_topic(validate_topic(stream), count, None)
    except (TopicExists, TopicDeleted):  # a stream deleted and not reclaimed yet is Kinesis's DELETING stream
        created = False
    except InvalidTopicName as exc:
        raise InvalidArgumentException(f"StreamName {stream} cannot be used: {exc}") from None
    except InvalidPartitionCount as exc:  # a topic its produces created, with more partitions than asked
        raise InvalidArgumentException(f"Stream {stream} cannot be created with {count} shards: {exc}") from None
    if not created:
        raise ResourceInUseException(f"Stream {stream} under account {kinesis.account} already exists.")
    if tags:  # a second write: a crash between the two leaves the stream created without its tags
        _configure(kinesis, stream, lambda record: _retag(record, tags, (), stream))
    return {}


def _shard(stream: Stream, partition: int) -> dict[str, Any]:
    """A shard as Kinesis describes it; its starting sequence number is its first offset's, whatever retention
    removed since (as a Kinesis shard's is fixed when it opens)."""
    keys = hash_key_range(partition, stream.shards)
    return {
        "ShardId": shard_id(partition),
        "HashKeyRange": {"StartingHashKey": str(keys.start), "EndingHashKey": str(keys.end)},
        "SequenceNumberRange": {"StartingSequenceNumber": sequence_number(partition, INITIAL_OFFSET)},
    }


def _retention_hours(stream: Stream) -> int:
    if stream.retention_ms is None:
        return MAX_RETENTION_HOURS
    return max(1, -(-stream.retention_ms // 3_600_000))


def _created(stream: Stream) -> datetime:
    return datetime.fromtimestamp(stream.created_at_ms / 1000, UTC)


def _stream_fields(kinesis: Kinesis, stream: Stream) -> dict[str, Any]:
    """What DescribeStream and DescribeStreamSummary both say of a stream."""
    return {
        "StreamName": stream.name,
        "StreamARN": kinesis.arn(stream.name),
        "StreamStatus": "ACTIVE",
        "StreamModeDetails": {"StreamMode": "ON_DEMAND"},
        "RetentionPeriodHours": _retention_hours(stream),
        "StreamCreationTimestamp": _created(stream),
        "EnhancedMonitoring": [{"ShardLevelMetrics": []}],
        "EncryptionType": "NONE",
    }


def _describe_stream(kinesis: Kinesis, document: dict[str, Any]) -> dict[str, Any]:
    stream = describe(kinesis, stream_of(document))
    limit = _limit(document, "Limit", MAX_LIST_SHARDS, MAX_LIST_SHARDS)
    start = wire.string(document, "ExclusiveStartShardId", required=False)
    first = 0 if start is None else partition_of(start, stream.shards, stream.name) + 1
    shards = [_shard(stream, p) for p in range(first, min(first + limit, stream.shards))]
    description = {**_stream_fields(kinesis, stream), "Shards": shards, "HasMoreShards": first + limit < stream.shards}
    return {"StreamDescription": description}


def _describe_stream_summary(kinesis: Kinesis, document: dict[str, Any]) -> dict[str, Any]:
    stream = describe(kinesis, stream_of(document))
    summary = {**_stream_fields(kinesis, stream), "OpenShardCount": stream.shards, "ConsumerCount": 0}
    return {"StreamDescriptionSummary": summary}


def _list_streams(kinesis: Kinesis, document: dict[str, Any]) -> dict[str, Any]:
    limit = _limit(document, "Limit", MAX_LIST_STREAMS, DEFAULT_LIST_STREAMS)
    after = wire.string(document, "NextToken", required=False) or wire.string(
        document, "ExclusiveStartStreamName", required=False
    )
    listed = kinesis.admin().topics()["topics"]
    names = sorted(
        t["topic"] for t in listed if t["explicit"] and (after is None or t["topic"] > after) and kinesis.allows(
            t["topic"], "read")
    )  # fmt: skip
    page = names[:limit]
    more = len(names) > limit
    answer: dict[str, Any] = {
        "StreamNames": page,
        "HasMoreStreams": more,
        "StreamSummaries": [
            {
                "StreamName": n,
                "StreamARN": kinesis.arn(n),
                "StreamStatus": "ACTIVE",
                "StreamModeDetails": {"StreamMode": "ON_DEMAND"},
            }
            for n in page
        ],  # fmt: skip
    }
    if more:
        answer["NextToken"] = page[-1]
    return answer


def _list_shards(kinesis: Kinesis, document: dict[str, Any]) -> dict[str, Any]:
    token = wire.string(document, "NextToken", required=False)
    if token is not None:
        if document.get("StreamName") is not None or document.get("StreamARN") is not None:
            raise InvalidArgumentException("NextToken and StreamName cannot be provided together.")
        stream_name, _, start = token.partition("|")
        kinesis.require(stream_name, "read")  # before the stream is looked up: a refusal says nothing of it
        stream = describe(kinesis, stream_name)
    else:
        stream = describe(kinesis, stream_of(document))
        start = wire.string(document, "ExclusiveStartShardId", required=False) or ""
    limit = _limit(document, "MaxResults", MAX_LIST_SHARDS, MAX_LIST_SHARDS)
    first = partition_of(start, stream.shards, stream.name) + 1 if start else 0
    shard_filter = _object(document, "ShardFilter")
    kind = wire.string(shard_filter, "Type", required=False)
    if kind == "AFTER_SHARD_ID":
        after = wire.string(shard_filter, "ShardId", required=False) or ""
        first = max(first, partition_of(after, stream.shards, stream.name) + 1)
    elif kind not in (None, "AT_LATEST", "AT_TRIM_HORIZON", "FROM_TRIM_HORIZON", "AT_TIMESTAMP", "FROM_TIMESTAMP"):
        raise InvalidArgumentException(f"ShardFilter type {kind} is not supported")
    # Shards never close here (no resharding): every filter but AFTER_SHARD_ID lists them all.
    page = range(first, min(first + limit, stream.shards))
    answer: dict[str, Any] = {"Shards": [_shard(stream, p) for p in page]}
    if first + limit < stream.shards:
        answer["NextToken"] = f"{stream.name}|{shard_id(page[-1])}"
    return answer


def _delete_stream(kinesis: Kinesis, document: dict[str, Any]) -> dict[str, Any]:
    stream = describe(kinesis, stream_of(document))
    kinesis.admin().delete_topic(stream.name)
    return {}


def _describe_limits(kinesis: Kinesis, document: dict[str, Any]) -> dict[str, Any]:
    """The shards and streams the key may read (a key that may read none is refused)."""
    if not kinesis.reads_any():
        raise AccessDeniedException("the access key has no read permission (llog keys create --read)")
    streams = [t for t in kinesis.admin().topics()["topics"] if t["explicit"] and kinesis.allows(t["topic"], "read")]
    return {
        "ShardLimit": MAX_PARTITIONS * max(1, len(streams)),
        "OpenShardCount": sum(len(t["partitions"]) for t in streams),
        "OnDemandStreamCount": len(streams),
        "OnDemandStreamCountLimit": 1_000_000,
    }


# --- writes --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Put:
    partition: int
    record: Record
    size: int


def _put(document: dict[str, Any], shards: int, index: int | None) -> _Put:
    """One record of a PutRecord (``index`` None) or of PutRecords (its index, named in a refusal)."""
    where = "" if index is None else f"records.{index + 1}.member."
    raw = document.get("Data")
    if raw is None:
        raise _validation(f"{where}data", None, "Member must not be null")
    data = wire.blob(raw, f"{where}Data")
    key = wire.string(document, "PartitionKey")
    assert key is not None
    explicit = wire.string(document, "ExplicitHashKey", required=False)
    partition = shard_for(key, explicit, shards)
    key_bytes = key.encode("utf-8", "replace")
    size = len(data) + len(key_bytes)
    if size > MAX_RECORD_BYTES:
        raise _validation(f"{where}data", "java.nio.HeapByteBuffer",
                          f"Member must have length less than or equal to {MAX_RECORD_BYTES}")  # fmt: skip
    return _Put(partition, Record(data, key_bytes), size)


def _append(kinesis: Kinesis, stream: Stream, puts: Sequence[_Put]) -> dict[int, AppendResult]:
    """One append group per shard (records in request order within it), appended together."""
    by_partition: dict[int, list[Record]] = {}
    for put in puts:
        by_partition.setdefault(put.partition, []).append(put.record)
    groups = [SharedAppendGroup(stream.name, p, records) for p, records in by_partition.items()]
    _, results = kinesis.produce().produce_groups(groups)
    return {result.partition: result for result in results}


def _put_failure(error: LlogError) -> KinesisError:
    if isinstance(error, UnknownTopic):
        return ResourceNotFoundException(str(error))
    if error.retriable:
        return ServiceUnavailable(f"{error.error_type}: {error}")
    return InvalidArgumentException(f"{error.error_type}: {error}")


def _put_record(kinesis: Kinesis, document: dict[str, Any]) -> dict[str, Any]:
    stream = describe(kinesis, stream_of(document))
    put = _put(document, stream.shards, None)
    result = _append(kinesis, stream, [put])[put.partition]
    if result.error is not None:
        raise _put_failure(result.error)
    assert result.start_offset is not None
    return {"ShardId": shard_id(put.partition), "SequenceNumber": sequence_number(put.partition, result.start_offset),
            "EncryptionType": "NONE"}  # fmt: skip


def _put_records(kinesis: Kinesis, document: dict[str, Any]) -> dict[str, Any]:
    stream = describe(kinesis, stream_of(document))
    entries = document.get("Records")
    if not isinstance(entries, list) or not entries:
        raise _validation("records", entries, "Member must have length greater than or equal to 1")
    if len(entries) > MAX_PUT_RECORDS:
        raise _validation("records", "...", f"Member must have length less than or equal to {MAX_PUT_RECORDS}")
    puts = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise InvalidArgumentException(f"Records[{i}] must be an object")
        puts.append(_put(entry, stream.shards, i))
    total = sum(p.size for p in puts)
    if total > MAX_PUT_RECORDS_BYTES:
        raise InvalidArgumentException(
            f"Records size exceeds {MAX_PUT_RECORDS_BYTES // (1024 * 1024)} MB limit: {total} bytes"
        )
    results = _append(kinesis, stream, puts)
    next_offset = {p: r.start_offset for p, r in results.items() if r.ok}
    answers: list[dict[str, Any]] = []
    shard_ids = {p: shard_id(p) for p in results}
    first_digits = {p: sequence_number(p, 0)[:-OFFSET_DIGITS] for p in results}  # formatted once per shard
    failed = 0
    for put in puts:
        result = results[put.partition]
        if result.error is None:
            offset = next_offset[put.partition]
            assert offset is not None
            next_offset[put.partition] = offset + 1
            sequence = f"{first_digits[put.partition]}{offset:0{OFFSET_DIGITS}d}"
            answers.append({"ShardId": shard_ids[put.partition], "SequenceNumber": sequence})
        else:
            failed += 1
            error = _put_failure(result.error)
            code = "ProvisionedThroughputExceededException" if error.retriable else "InternalFailure"
            answers.append({"ErrorCode": code, "ErrorMessage": error.message})
    return {"FailedRecordCount": failed, "Records": answers, "EncryptionType": "NONE"}


# --- reads ---------------------------------------------------------------------------------------------------------


def _get_shard_iterator(kinesis: Kinesis, document: dict[str, Any]) -> dict[str, Any]:
    stream = describe(kinesis, stream_of(document))
    shard = wire.string(document, "ShardId")
    assert shard is not None
    partition = partition_of(shard, stream.shards, stream.name)
    log_start, next_offset = _offsets(kinesis, stream, partition)
    kind = wire.string(document, "ShardIteratorType")
    sequence = wire.string(document, "StartingSequenceNumber", required=False)
    if kind in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"):
        if sequence is None:
            raise InvalidArgumentException(f"StartingSequenceNumber is required for {kind}")
        offset = offset_in_shard(sequence, partition) + (kind == "AFTER_SEQUENCE_NUMBER")
        if offset > next_offset:
            raise InvalidArgumentException(
                f"StartingSequenceNumber {sequence} used in GetShardIterator on shard {shard} in stream "
                f"{stream.name} under account {kinesis.account} is invalid because it did not come from this stream."
            )
        offset = max(offset, log_start)
    elif kind == "TRIM_HORIZON":
        offset = log_start
    elif kind == "LATEST":
        offset = next_offset
    elif kind == "AT_TIMESTAMP":
        if document.get("Timestamp") is None:
            raise InvalidArgumentException("Timestamp is required for AT_TIMESTAMP")
        at_ms = wire.timestamp_ms(document["Timestamp"], "Timestamp")
        (answer,) = kinesis.consume().list_offsets([OffsetQuery(stream.name, partition, max(at_ms, 0))])
        if answer.error is not None:
            raise _put_failure(answer.error)
        found = answer.found
        if found is None:
            offset = next_offset
        elif found.offset is None:  # no record that late: the end as the lookup found it
            offset = found.high_watermark + 1
        else:
            offset = found.offset
    else:
        raise _validation("shardIteratorType", kind, "Member must satisfy enum value set: [AT_SEQUENCE_NUMBER, "
                          "AFTER_SEQUENCE_NUMBER, TRIM_HORIZON, LATEST, AT_TIMESTAMP]")  # fmt: skip
    iterator = ShardIterator(stream.name, stream.topic_id, partition, offset, kinesis.now_ms())
    return {"ShardIterator": encode_iterator(iterator, kinesis.iterator_key())}


def _get_records(kinesis: Kinesis, document: dict[str, Any]) -> dict[str, Any]:
    text = wire.string(document, "ShardIterator")
    assert text is not None
    limit = _limit(document, "Limit", MAX_GET_RECORDS, MAX_GET_RECORDS)
    now_ms = kinesis.now_ms()
    iterator = decode_iterator(text, kinesis.iterator_key(), now_ms)
    kinesis.require(iterator.stream, "read")
    stream = describe(kinesis, iterator.stream)
    if stream.topic_id != iterator.topic_id:  # deleted and created again since the iterator was issued
        raise _not_found(iterator.stream, kinesis)
    records, next_offset, high_watermark = _fetch(kinesis, iterator, limit)
    if kinesis.max_answer_bytes is not None:
        kept = _within(records, kinesis.max_answer_bytes)
        if kept < len(records):
            records, next_offset = records[:kept], records[kept].offset
    last_ms = records[-1].timestamp_ms if records else now_ms
    behind = 0 if next_offset > high_watermark else max(0, now_ms - last_ms)
    following = ShardIterator(iterator.stream, iterator.topic_id, iterator.partition, next_offset, now_ms)
    return {
        "Records": [
            {
                "SequenceNumber": sequence_number(iterator.partition, r.offset),
                "ApproximateArrivalTimestamp": _arrival(r.timestamp_ms),
                "Data": r.value,
                "PartitionKey": (r.key or b"").decode("utf-8", "replace"),
            }
            for r in records
        ],
        "NextShardIterator": encode_iterator(following, kinesis.iterator_key()),
        "MillisBehindLatest": behind,
    }


ANSWER_BYTES_PER_RECORD = 200  # a record's JSON around its data: sequence number, time, key and member names


def _within(records: Sequence[Any], max_bytes: int) -> int:
    """How many of ``records`` a GetRecords answer of at most ``max_bytes`` holds (their data base64-encoded, as
    JSON has it); at least one, so a reader always moves on."""
    total = 0
    for count, record in enumerate(records):
        total += -(-len(record.value) // 3) * 4 + len(record.key or b"") + ANSWER_BYTES_PER_RECORD
        if total > max_bytes and count > 0:
            return count
    return len(records)


def _arrival(timestamp_ms: int) -> datetime:
    """A record's time as a date, within the years a date holds (the native API takes any 64-bit time)."""
    return datetime.fromtimestamp(min(max(timestamp_ms, 0), MAX_ARRIVAL_MS) / 1000, UTC)


def _fetch(kinesis: Kinesis, iterator: ShardIterator, limit: int) -> tuple[list[Any], int, int]:
    """Up to ``limit`` records from the iterator's offset: ``(records, next offset, high watermark)``.

    An offset retention removed reads from the log start, as a Kinesis iterator past its data does; a range a
    rebuild marked lost is skipped (and logged): Kinesis clients know no such failure.
    """
    offset = iterator.offset
    for _ in range(3):
        request = ConsumeRequest(
            [FetchPartition(iterator.stream, iterator.partition, offset, MAX_GET_RECORDS_BYTES)],
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=MAX_GET_RECORDS_BYTES,
        )
        (fetched,) = kinesis.consume().consume(request)
        error = fetched.error
        if error is None:
            records = fetched.records[:limit]
            following = records[-1].offset + 1 if len(records) < len(fetched.records) else fetched.next_fetch_offset
            return records, min(following, MAX_OFFSET), fetched.high_watermark or 0
        if isinstance(error, OffsetOutOfRange) and offset < fetched.log_start_offset:
            offset = fetched.log_start_offset
        elif isinstance(error, RecordsLost):
            log.warning("GetRecords skipped offsets %d up to %d of %s/%d: %s", offset, fetched.next_fetch_offset,
                        iterator.stream, iterator.partition, error)  # fmt: skip
            offset = fetched.next_fetch_offset
        elif isinstance(error, UnknownTopic):
            raise ResourceNotFoundException(str(error))
        else:
            raise _put_failure(error)
    raise ServiceUnavailable("the shard's log start moved while it was read; retry")


# --- retention and tags -------------------------------------------------------------------------------------------

MIN_RETENTION_HOURS = 24
MAX_TAGS = 50
MAX_TAGS_PER_CALL = 10
_TAG_KEY = re.compile(r"[\w.:/=+\-@ ]{1,128}")


def _hours(document: dict[str, Any]) -> int:
    hours = wire.integer(document, "RetentionPeriodHours")
    assert hours is not None
    if hours < MIN_RETENTION_HOURS:
        raise InvalidArgumentException(
            f"Minimum allowed retention period is {MIN_RETENTION_HOURS} hours. Requested retention period "
            f"({hours} hours) is too short."
        )
    if hours > MAX_RETENTION_HOURS:
        raise InvalidArgumentException(
            f"Maximum allowed retention period is {MAX_RETENTION_HOURS} hours. Requested retention period "
            f"({hours} hours) is too long."
        )
    return hours


def _set_retention(kinesis: Kinesis, document: dict[str, Any], *, longer: bool) -> dict[str, Any]:
    """Increase (``longer``) or DecreaseStreamRetentionPeriod: the topic's ``retention_ms``, by compare-and-set."""
    stream = stream_of(document)
    hours = _hours(document)

    def change(record: TopicRecord) -> TopicRecord:
        current = record.config.retention_ms
        current_hours = MAX_RETENTION_HOURS if current is None else -(-current // 3_600_000)
        if (hours < current_hours) if longer else (hours > current_hours):
            shorter, call = ("shorter", "Decrease") if longer else ("longer", "Increase")
            raise InvalidArgumentException(
                f"Requested retention period ({hours} hours) for stream {stream} can not be {shorter} than existing "
                f"retention period ({current_hours} hours). Use {call}StreamRetentionPeriod API."
            )
        if current is None and hours == MAX_RETENTION_HOURS:
            return record  # unlimited reads as the longest Kinesis period; asking for it keeps it unlimited
        return replace(record, config=replace(record.config, retention_ms=hours * 3_600_000))

    _configure(kinesis, stream, change)
    return {}


def _configure(kinesis: Kinesis, stream: str, change: Callable[[TopicRecord], TopicRecord]) -> None:
    try:
        kinesis.admin().configure_topic(validate_topic(stream), change)
    except (UnknownTopic, InvalidArgument):
        raise _not_found(stream, kinesis) from None


def _tags(value: Any, member: str) -> dict[str, str]:
    if not isinstance(value, dict) or not value:
        raise _validation(member, value, "Member must have length greater than or equal to 1")
    for key, tag in value.items():
        if not isinstance(key, str) or not _TAG_KEY.fullmatch(key) or key.startswith("aws:"):
            raise InvalidArgumentException(f"Tag key {key!r} is not valid: 1 to 128 characters, not starting aws:")
        if not isinstance(tag, str) or len(tag) > 256 or not _unicode(tag):
            raise InvalidArgumentException(f"Tag value of {key!r} must be text of at most 256 characters")
    return value


def _unicode(text: str) -> bool:
    """Text every encoding can carry (JSON allows a lone surrogate such as ``"\\ud800"``; CBOR and UTF-8 do not)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _retag(record: TopicRecord, add: dict[str, str], remove: Sequence[str], stream: str) -> TopicRecord:
    tags = {k: v for k, v in record.tags if k not in remove} | add
    if len(tags) > MAX_TAGS:
        raise LimitExceededException(
            f"Failed to add tags to stream {stream} because a given request would cause the stream to exceed the "
            f"maximum allowed number of tags ({MAX_TAGS}). To add additional tags, you must remove some existing tags."
        )
    return replace(record, tags=tuple(sorted(tags.items())))


def _add_tags(kinesis: Kinesis, document: dict[str, Any]) -> dict[str, Any]:
    stream = stream_of(document)
    add = _tags(document.get("Tags"), "tags")
    if len(add) > MAX_TAGS_PER_CALL:
        raise _validation("tags", "...", f"Member must have length less than or equal to {MAX_TAGS_PER_CALL}")
    _configure(kinesis, stream, lambda record: _retag(record, add, (), stream))
    return {}


def _remove_tags(kinesis: Kinesis, document: dict[str, Any]) -> dict[str, Any]:
    stream = stream_of(document)
    keys = document.get("TagKeys")
    if not isinstance(keys, list) or not 1 <= len(keys) <= MAX_TAGS or not all(isinstance(k, str) for k in keys):
        raise _validation("tagKeys", keys, f"Member must have length between 1 and {MAX_TAGS}")
    _configure(kinesis, stream, lambda record: _retag(record, {}, keys, stream))
    return {}


def _list_tags(kinesis: Kinesis, document: dict[str, Any]) -> dict[str, Any]:
    stream = stream_of(document)
    try:
        record = kinesis.admin().topic_record(validate_topic(stream))
    except (UnknownTopic, InvalidArgument):
        raise _not_found(stream, kinesis) from None
    after = wire.string(document, "ExclusiveStartTagKey", required=False)
    limit = _limit(document, "Limit", MAX_TAGS, MAX_TAGS)
    tags = [(k, v) for k, v in record.tags if after is None or k > after]
    return {"Tags": [{"Key": k, "Value": v} for k, v in tags[:limit]], "HasMoreTags": len(tags) > limit}


# --- the table -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Operation:
    action: str  # the permission it needs on its stream: read, write or admin
    run: Callable[[Kinesis, dict[str, Any]], dict[str, Any]]
    names_stream: bool = True  # False: ListStreams, DescribeLimits, GetRecords (its iterator names the stream)


OPERATIONS: dict[str, Operation] = {
    "CreateStream": Operation("admin", _create_stream),
    "DescribeStream": Operation("read", _describe_stream),
    "DescribeStreamSummary": Operation("read", _describe_stream_summary),
    "ListStreams": Operation("read", _list_streams, names_stream=False),
    "ListShards": Operation("read", _list_shards, names_stream=False),
    "PutRecord": Operation("write", _put_record),
    "PutRecords": Operation("write", _put_records),
    "GetShardIterator": Operation("read", _get_shard_iterator),
    "GetRecords": Operation("read", _get_records, names_stream=False),
    "DeleteStream": Operation("admin", _delete_stream),
    "IncreaseStreamRetentionPeriod": Operation("admin", functools.partial(_set_retention, longer=True)),
    "DecreaseStreamRetentionPeriod": Operation("admin", functools.partial(_set_retention, longer=False)),
    "AddTagsToStream": Operation("admin", _add_tags),
    "RemoveTagsFromStream": Operation("admin", _remove_tags),
    "ListTagsForStream": Operation("read", _list_tags),
    "DescribeLimits": Operation("read", _describe_limits, names_stream=False),
}


def run(operation: str, kinesis: Kinesis, document: dict[str, Any]) -> dict[str, Any]:
    """The answer of ``operation`` (a name from ``OPERATIONS``), its permission checked first."""
    found = OPERATIONS[operation]
    if found.names_stream or (operation == "ListShards" and document.get("NextToken") is None):
        kinesis.require(stream_of(document), found.action)
    return found.run(kinesis, document)
