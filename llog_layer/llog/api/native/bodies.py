"""Every body of the native HTTP API (docs/HTTP_API.md), request and answer, as one typed definition each.

The routes decode requests into these types and encode answers from them, and
``functions/openapi.json``'s schemas are generated from them (``server.openapi``),
so the contract is written once. Two kinds of constraint:

* checked by the decoder (types, required fields, unknown fields where refused,
  fixed ranges): a violation is a 400 ``InvalidRequest`` naming the field;
* ``_documented``: in the schema only, checked by ``contract`` with a typed error
  (``InvalidTopicName``, ``InvalidPartition``) or against a setting that can
  change (``LLOG_MAX_PARTITIONS_PER_REQUEST``: ``LimitExceeded``), so the schema
  shows the default.

A union of two object types cannot be decoded without a tag, so a produce record
(a string, ``{"base64"}`` or a record object) is decoded as a string or a mapping
that ``contract`` reads, and the produce answer's results are typed by the schema.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from llog.api.native.errors import Error
from llog.config import default_int
from llog.format.keys import PRODUCER_ID_PATTERN, RESERVED_TOPICS, TOPIC_PATTERN
from llog.format.kv.groups import GROUP_PATTERN, MEMBER_ID_PATTERN, RESERVED_GROUPS
from llog.limits import (
    DEFAULT_SESSION_TIMEOUT_MS,
    MAX_PARTITIONS,
    MAX_SESSION_TIMEOUT_MS,
    MAX_TOPICS_PER_MEMBER,
    MIN_SESSION_TIMEOUT_MS,
)

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MAX = 2**31 - 1
MAX_OFFSETS_PER_COMMIT = 10_000


def _documented(**schema: Any) -> Meta:
    """A constraint the schema shows and ``contract`` checks (see the module docstring)."""
    return Meta(extra_json_schema=schema)


def _ref(struct: type[Struct]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{struct.__name__}"}


# --- values ---------------------------------------------------------------------------------------------------------

Topic = Annotated[
    str,
    _documented(
        minLength=1,
        maxLength=249,
        pattern=f"^{TOPIC_PATTERN}$",
        **{"not": {"enum": list(RESERVED_TOPICS)}},
        description=f"1-249 characters from [A-Za-z0-9._-]; {', '.join(f'`{t}`' for t in RESERVED_TOPICS)} "
        "are reserved.",
        examples=["orders"],
    ),
]
Partition = Annotated[int, _documented(minimum=0, maximum=INT32_MAX, format="int32", examples=[0])]
# Any JSON value: a count that is not an integer is an InvalidPartitionCount as much as 0 is (contract).
PartitionCount = Annotated[Any, _documented(type="integer", minimum=1, maximum=MAX_PARTITIONS, examples=[6])]
Group = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=249,
        pattern=f"^{GROUP_PATTERN}$",
        extra_json_schema={"not": {"enum": list(RESERVED_GROUPS)}},
        description="A consumer group: 1-249 characters from [A-Za-z0-9._-], not `.` or `..`.",
        examples=["billing"],
    ),
]
MemberId = Annotated[
    str,
    Meta(
        pattern=f"^{MEMBER_ID_PATTERN}$",
        description="A member id the group gave out (join answers it).",
        examples=["0f9c2d1e8b7a4c3d9e8f7a6b5c4d3e2f"],
    ),
]
ProducerId = Annotated[str, _documented(pattern=f"^{PRODUCER_ID_PATTERN}$")]
Offset = Annotated[int, Meta(ge=0, le=INT64_MAX, extra_json_schema={"format": "int64"})]
Int64 = Annotated[int, Meta(ge=INT64_MIN, le=INT64_MAX, extra_json_schema={"format": "int64"})]
Positive = Annotated[int, Meta(ge=1, le=INT64_MAX, extra_json_schema={"format": "int64"})]
Epoch = Annotated[int, Meta(ge=0, le=INT32_MAX)]
Generation = Annotated[int, Meta(ge=0, examples=[1])]


class Base64Bytes(Struct, forbid_unknown_fields=True):
    """Arbitrary bytes, base64-encoded."""

    base64: Annotated[
        str, Meta(description="Standard base64 (RFC 4648, with padding).", extra_json_schema={"format": "byte"})
    ]


Bytes = Annotated[
    str | Base64Bytes,
    Meta(
        description='Bytes: a JSON string (its UTF-8 encoding) or `{"base64": "..."}`. In answers, bytes that are '
        "text (valid UTF-8 with no control characters other than tab, newline and carriage return) are a string, "
        'anything else `{"base64": ...}`; either form decodes to exactly the bytes produced.'
    ),
]


# --- produce --------------------------------------------------------------------------------------------------------


class RecordObject(Struct, forbid_unknown_fields=True):
    """A record with a key, headers or a timestamp. Unknown fields are rejected."""

    value: Bytes
    key: Bytes | None = None
    headers: Annotated[dict[str, Bytes] | None, Meta(description="Header name -> bytes.")] = None
    timestamp_ms: Annotated[
        Int64 | None, Meta(description="Milliseconds since the epoch; the append time when absent.")
    ] = None


ProduceRecord = Annotated[
    str | dict[str, Any],
    Meta(
        extra_json_schema={
            "oneOf": [{"type": "string", "description": "UTF-8 text"}, _ref(Base64Bytes), _ref(RecordObject)]
        }
    ),
]


class ProduceTopicPartition(Struct):
    topic: Topic
    records: Annotated[list[ProduceRecord], Meta(min_length=1)]
    partition: Annotated[
        Partition | None,
        Meta(
            description="Omitted or null: each record goes to Kafka's partition for its key among the explicit "
            "topic's partitions (murmur2), records without a key to one partition per request, round-robin."
        ),
    ] = None
    sequence: Annotated[
        Offset | None,
        Meta(
            description="With the request's producer_id (then required): the sequence number of the entry's first "
            "record for this producer and partition (docs/IDEMPOTENCE.md).",
        ),
    ] = None
    expected_offset: Annotated[
        Positive | None,
        Meta(
            description="Conditional append: appended only if the partition's next offset equals it, else the result "
            "is an OffsetMismatch with next_offset (HTTP 412). Partitions of the cas protocol only; sequential ones "
            "answer 400 ConditionalAppendUnsupported.",
        ),
    ] = None


class ProduceRequest(
    Struct,
):
    """At most LLOG_MAX_PARTITIONS_PER_REQUEST entries and LLOG_MAX_RECORDS_PER_REQUEST records in all; the body at
    most LLOG_MAX_REQUEST_BYTES. A partition may appear more than once (each entry is its own batch)."""

    topic_partitions: Annotated[
        list[ProduceTopicPartition],
        Meta(min_length=1, extra_json_schema={"maxItems": default_int("LLOG_MAX_PARTITIONS_PER_REQUEST")}),
    ]
    producer_id: Annotated[
        ProducerId | None,
        Meta(
            description="An idempotent producer's id (POST /producers); needs producer_epoch, and a sequence in "
            "every entry. A retry of the same (producer, partition, sequence) returns the original offsets with "
            "duplicate: true and writes nothing."
        ),
    ] = None
    producer_epoch: Annotated[
        Epoch | None,
        Meta(
            description="The producer's epoch (POST /producers); an older epoch than the current one is "
            "ProducerFenced.",
        ),
    ] = None


class ProduceSuccess(Struct, omit_defaults=True, forbid_unknown_fields=True):
    topic: str
    partition: int
    ok: Literal[True]
    count: Annotated[int, Meta(ge=1)]
    start_offset: Annotated[int, Meta(ge=1)]
    end_offset: Annotated[int, Meta(ge=1)]
    index_key: Annotated[str | None, Meta(description="null for a duplicate")]
    wal_uri: Annotated[str | None, Meta(description="null for a duplicate")]
    duplicate: Annotated[
        Literal[True] | None,
        Meta(
            description="Present on an idempotent retry of a batch already appended: the offsets are the "
            "original's, nothing was written."
        ),
    ] = None


class ProduceFailure(Struct, omit_defaults=True, forbid_unknown_fields=True):
    topic: str
    partition: int
    ok: Literal[False]
    count: Annotated[int, Meta(ge=1)]
    error_type: Annotated[
        str,
        Meta(
            description="LogFenced, OxiaUnavailable, BlobStoreUnavailable, BackPressureRejected, AppendConflict, "
            "AppendOutcomeUnknown, ProducerFenced, OutOfOrderSequence, UnknownProducer, SequenceInFlight "
            "(retriable), OffsetMismatch, ...",
            examples=["LogFenced"],
        ),
    ]
    error: str
    retriable: bool
    next_offset: Annotated[Positive | None, Meta(description="With OffsetMismatch: the partition's next offset.")] = (
        None
    )


class ProduceResponse(Struct, forbid_unknown_fields=True):
    results: Annotated[
        list[Any],
        Meta(
            description="One result per request entry, in request order.",
            extra_json_schema={"items": {"oneOf": [_ref(ProduceSuccess), _ref(ProduceFailure)]}},
        ),
    ]
    success_count: Annotated[int, Meta(ge=0)]
    error_count: Annotated[int, Meta(ge=0)]


class ProducerRequest(Struct, forbid_unknown_fields=True):
    producer_id: Annotated[
        ProducerId | None,
        Meta(description="Omit for a new producer id; give an issued id to bump its epoch (fencing the older ones)."),
    ] = None


class Producer(Struct, forbid_unknown_fields=True):
    producer_id: str
    producer_epoch: Annotated[int, Meta(ge=0)]


# --- consume --------------------------------------------------------------------------------------------------------


class FetchTopicPartition(Struct):
    topic: Topic
    partition: Partition
    fetch_offset: Annotated[
        Offset, Meta(description="First offset to return; offsets start at 1, high_watermark + 1 is the tail.")
    ]
    partition_max_bytes: Annotated[
        Positive | UnsetType,
        Meta(
            description="Default LLOG_CONSUME_DEFAULT_PARTITION_MAX_BYTES.",
            extra_json_schema={"default": default_int("LLOG_CONSUME_DEFAULT_PARTITION_MAX_BYTES")},
        ),
    ] = UNSET


class ConsumeRequest(Struct):
    """Each topic-partition at most once; at most LLOG_MAX_PARTITIONS_PER_REQUEST entries."""

    topic_partitions: Annotated[
        list[FetchTopicPartition],
        Meta(min_length=1, extra_json_schema={"maxItems": default_int("LLOG_MAX_PARTITIONS_PER_REQUEST")}),
    ]
    max_wait_ms: Annotated[
        Offset,
        Meta(
            description="Long-poll bound; at most LLOG_CONSUME_MAX_WAIT_MS.",
            extra_json_schema={"maximum": default_int("LLOG_CONSUME_MAX_WAIT_MS")},
        ),
    ] = 0
    min_bytes: Offset = 1
    max_bytes: Annotated[
        Positive | UnsetType,
        Meta(
            description="Capped at LLOG_CONSUME_MAX_RESPONSE_BYTES (record bytes).",
            extra_json_schema={"default": default_int("LLOG_CONSUME_MAX_RESPONSE_BYTES")},
        ),
    ] = UNSET


class ConsumedRecord(Struct, forbid_unknown_fields=True):
    offset: Annotated[int, Meta(ge=1)]
    timestamp_ms: Int64
    key: Bytes | None
    headers: dict[str, Bytes]
    value: Bytes


class PartitionFetch(Struct, omit_defaults=True, forbid_unknown_fields=True):
    topic: str
    partition: int
    ok: bool
    high_watermark: Annotated[
        int | None, Meta(description="Last readable offset (0: empty); null when unknown (an error).")
    ]
    log_start_offset: Annotated[
        int,
        Meta(
            description="First readable offset; retention moves it forward (docs/RETENTION.md). Below it: "
            "OffsetOutOfRange."
        ),
    ]
    next_fetch_offset: int
    records: list[ConsumedRecord]
    error_type: Annotated[
        str | None,
        Meta(
            description="Only when ok is false: OffsetOutOfRange, PartitionNotInitialized, OxiaUnavailable, "
            "BlobStoreUnavailable, CorruptData, ...",
            examples=["OffsetOutOfRange"],
        ),
    ] = None
    error: str | None = None
    retriable: bool | None = None


class ConsumeResponse(Struct, forbid_unknown_fields=True):
    results: Annotated[list[PartitionFetch], Meta(description="One result per requested partition, in request order.")]


class OffsetQuery(Struct, forbid_unknown_fields=True):
    topic: Topic
    partition: Partition
    timestamp_ms: Annotated[
        Offset | Literal["earliest", "latest"],
        Meta(description='A time in ms since the epoch, "earliest" or "latest".'),
    ]


class OffsetsRequest(Struct, forbid_unknown_fields=True):
    topic_partitions: Annotated[
        list[OffsetQuery],
        Meta(min_length=1, extra_json_schema={"maxItems": default_int("LLOG_MAX_PARTITIONS_PER_REQUEST")}),
    ]


class OffsetResult(Struct, omit_defaults=True, forbid_unknown_fields=True):
    topic: str
    partition: int
    ok: bool
    # With the partition's offsets (and null there when no record is that late); absent after an error.
    offset: Annotated[int | None | UnsetType, Meta(description="null: no record is at or after the time")] = UNSET
    timestamp_ms: Annotated[
        int | None | UnsetType, Meta(description="The timestamp of the record at offset (for a time query).")
    ] = UNSET
    log_start_offset: int | None = None
    high_watermark: int | None = None
    error_type: str | None = None
    error: str | None = None
    retriable: bool | None = None


class OffsetsResponse(Struct, forbid_unknown_fields=True):
    results: list[OffsetResult]


# --- topics and partitions ------------------------------------------------------------------------------------------

LogState = Literal["OPEN", "FENCED"]
AppendProtocolName = Literal["sequential", "cas"]


class TopicConfig(Struct, forbid_unknown_fields=True):
    append_protocol: Annotated[
        AppendProtocolName | None,
        Meta(
            description="How the topic's partitions assign offsets (docs/SEQUENTIAL_APPEND.md); default: the "
            "deployment's LLOG_APPEND_PROTOCOL. Null in an implicit topic's description."
        ),
    ] = None
    retention_ms: Annotated[
        int | None,
        _documented(
            minimum=1,
            maximum=INT64_MAX,
            description="Compacted ranges older than this are removed (docs/RETENTION.md); null: the deployment's "
            "LLOG_RETENTION_MS.",
        ),
    ] = None
    retention_bytes: Annotated[
        int | None,
        _documented(
            minimum=1,
            maximum=INT64_MAX,
            description="Per partition: the oldest compacted ranges are removed while it is larger; null: the "
            "deployment's LLOG_RETENTION_BYTES.",
        ),
    ] = None


class CreateTopicRequest(Struct, forbid_unknown_fields=True):
    topic: Topic
    partitions: PartitionCount = 1
    # Read by the protocol's TopicConfig.parse, whose errors name the setting.
    config: Annotated[dict[str, Any], Meta(extra_json_schema=_ref(TopicConfig))] | None = None


class GrowTopicRequest(Struct, forbid_unknown_fields=True):
    partitions: PartitionCount


class TopicSummary(Struct, forbid_unknown_fields=True):
    topic: str
    partitions: list[Annotated[int, Meta(ge=0)]]
    explicit: Annotated[bool, Meta(description="Created with POST /topics (true), or implicitly by produce (false).")]


class Topics(Struct, forbid_unknown_fields=True):
    topics: list[TopicSummary]


class TopicPartitionState(Struct, forbid_unknown_fields=True):
    partition: Annotated[int, Meta(ge=0)]
    high_watermark: Annotated[int, Meta(ge=0, description="The last readable offset (0: empty).")]
    log_start: Annotated[int, Meta(ge=1, description="The first readable offset.")]
    next_offset: Annotated[int, Meta(ge=1)]
    log_state: Literal["OPEN", "FENCED", "NOT_INITIALIZED"]


class TopicDescription(Struct, forbid_unknown_fields=True):
    topic: str
    partitions: Annotated[
        int, Meta(ge=0, description="The partition count; for an implicit topic, its registered partitions.")
    ]
    config: TopicConfig
    created_at_ms: Annotated[int | None, Meta(description="Null for an implicit topic.")]
    topic_id: Annotated[
        str | None,
        Meta(description="The identity of this incarnation of the name; null for a topic from before topic records."),
    ]
    explicit: Annotated[bool, Meta(description="Created with POST /topics (true), or implicitly by produce (false).")]
    partition_status: list[TopicPartitionState]


class TopicDeleted(Struct, forbid_unknown_fields=True):
    topic: str
    deleted: Literal[True]


class CompactionInProgress(Struct, forbid_unknown_fields=True):
    compaction_id: str
    state: str
    start_offset: int
    end_offset: int


class PartitionStatus(Struct, forbid_unknown_fields=True):
    topic: str
    partition: int
    log_state: LogState
    log_start_offset: Annotated[
        int,
        Meta(
            description="First readable offset; retention moves it forward (docs/RETENTION.md). Below it: "
            "OffsetOutOfRange."
        ),
    ]
    high_watermark: int
    next_offset: int
    compaction_cursor: int
    compaction_lag: int
    pending: Annotated[dict[str, Any] | None, Meta(description="An append committed but not yet indexed.")]
    compaction: CompactionInProgress | None


class PartitionState(Struct, forbid_unknown_fields=True):
    """The answer of fence and unfence."""

    topic: str
    partition: int
    log_state: LogState
    high_watermark: int
    next_offset: int


class PartitionStorage(Struct, forbid_unknown_fields=True):
    topic: str
    partition: int
    append_protocol: AppendProtocolName
    log_start_offset: int
    high_watermark: int
    compacted_objects: Annotated[
        int, Meta(description="Compacted objects the index references (each holds this partition alone).")
    ]
    compacted_bytes: Annotated[
        int,
        Meta(description="Their sizes as recorded in the index (0 for an object written before sizes were recorded)."),
    ]
    wal_batches: Annotated[int, Meta(description="Uncompacted batches: slices of shared WAL objects.")]
    wal_bytes: Annotated[int, Meta(description="The byte length of those slices.")]
    stored_bytes: Annotated[int, Meta(description="compacted_bytes + wal_bytes.")]
    compaction_cursor: Annotated[int, Meta(description="The first offset not compacted yet.")]
    compaction_lag: Annotated[int, Meta(description="Offsets appended but not compacted yet.")]
    oldest_uncompacted_at_ms: Annotated[
        int | None,
        Meta(description="When the oldest uncompacted batch was appended; null when there is none."),
    ]
    compaction_lag_ms: Annotated[int | None, Meta(description="The age of that batch; null when there is none.")]


class CompactionRun(Struct, forbid_unknown_fields=True):
    """One ``compact_once`` call."""

    topic: str
    partition: int
    outcome: Literal["compacted", "resumed", "nothing_to_do"]
    start_offset: int | None
    end_offset: int | None
    records: int
    bytes_written: int
    source_entries: Annotated[int, Meta(description="Index entries (batches) the run read.")]
    recovered_pending: Annotated[bool, Meta(description="Whether the run first recovered a pending append.")]
    resumed_from: Annotated[
        str | None, Meta(description="The state of the unfinished compaction it resumed; null for a new one.")
    ]
    stage_seconds: Annotated[dict[str, float], Meta(description="Time spent per stage of the run.")]
    reached_tail: Annotated[
        bool, Meta(description="Whether its range took every WAL entry the index held when it was selected.")
    ] = False


class CompactionPass(Struct, forbid_unknown_fields=True):
    topic: str
    partition: int
    caught_up: Annotated[bool, Meta(description="false: the budget ran out with work left (call again).")]
    records: Annotated[int, Meta(description="Records rewritten into compacted objects.")]
    bytes_written: int
    compaction_lag_before: int
    runs: Annotated[list[CompactionRun], Meta(description="Each compact_once call, as `llog compact` prints it.")]
    status: PartitionStatus


class Health(Struct, forbid_unknown_fields=True):
    status: Literal["ok"]
    broker_id: Annotated[str, Meta(description="LLOG_BROKER_ID, else function_name/instance_id.")]
    function_name: str
    function_version: str | None
    instance_id: Annotated[str, Meta(description="Random per execution environment (or process).")]
    host: Annotated[str | None, Meta(description="Where llog serve listens; null in Lambda.")]
    port: int | None
    started_at_ms: Int64


# --- consumer groups ------------------------------------------------------------------------------------------------


class GroupAssignment(Struct, forbid_unknown_fields=True):
    topic: Topic
    partitions: list[Annotated[int, Meta(ge=0)]]


class GroupJoinRequest(Struct, forbid_unknown_fields=True):
    topics: Annotated[list[Topic], Meta(min_length=1, extra_json_schema={"maxItems": MAX_TOPICS_PER_MEMBER})]
    session_timeout_ms: Annotated[
        int,
        _documented(
            minimum=MIN_SESSION_TIMEOUT_MS,
            maximum=MAX_SESSION_TIMEOUT_MS,
            description="The member's lease: without a heartbeat (or commit) for this long it leaves the group.",
        ),
    ] = DEFAULT_SESSION_TIMEOUT_MS
    member_id: Annotated[MemberId | None, Meta(description="Omit (or null) to join as a new member.")] = None


class GroupJoinResponse(Struct, forbid_unknown_fields=True):
    group: Group
    member_id: MemberId
    generation: Generation
    assignments: list[GroupAssignment]
    heartbeat_interval_ms: Annotated[int, Meta(description="A third of the session timeout.")]


class GroupHeartbeatRequest(Struct, forbid_unknown_fields=True):
    member_id: MemberId
    generation: Generation


class GroupHeartbeatResponse(Struct, forbid_unknown_fields=True):
    generation: Generation
    rejoin: bool


class GroupLeaveRequest(Struct, forbid_unknown_fields=True):
    member_id: MemberId


class GroupLeaveResponse(Struct, forbid_unknown_fields=True):
    group: Group
    member_id: MemberId
    left: Literal[True]


class OffsetCommit(Struct, forbid_unknown_fields=True):
    topic: Topic
    partition: Partition
    offset: Annotated[Offset, Meta(description="The next offset to read (Kafka's meaning).")]


class GroupCommitRequest(Struct, forbid_unknown_fields=True):
    member_id: MemberId
    generation: Generation
    offsets: Annotated[
        list[OffsetCommit],
        Meta(min_length=1, max_length=MAX_OFFSETS_PER_COMMIT, description="A partition at most once."),
    ]


class GroupCommitResponse(Struct, forbid_unknown_fields=True):
    group: Group
    committed: list[OffsetCommit]


class GroupMember(Struct, forbid_unknown_fields=True):
    member_id: MemberId
    topics: list[Topic]
    expires_at_ms: Annotated[int, Meta(description="When the member's lease ends unless it heartbeats.")]
    assignments: list[GroupAssignment]


class GroupPartitionLag(Struct, forbid_unknown_fields=True):
    topic: Topic
    partition: Annotated[int, Meta(ge=0)]
    committed: Annotated[int | None, Meta(description="The next offset to read; null: none committed.")]
    log_start: Annotated[int | None, Meta(description="null when the partition does not exist (any more).")]
    high_watermark: Annotated[int | None, Meta(description="The last offset in the log.")]
    lag: Offset | None
    below_log_start: Annotated[
        bool, Meta(description="Retention removed offsets the group had not read; reading resumes at log_start.")
    ]
    committed_for_earlier_topic: Annotated[
        int | None,
        Meta(description="An offset committed for a deleted topic of the same name: not applied to this one."),
    ]


class GroupDescription(Struct, forbid_unknown_fields=True):
    group: Group
    generation: Generation
    members: list[GroupMember]
    offsets: list[GroupPartitionLag]


class Groups(Struct, forbid_unknown_fields=True):
    groups: list[Group]


REQUESTS: tuple[type[Struct], ...] = (
    ProduceRequest,
    RecordObject,  # named by ProduceRecord's schema only
    ProducerRequest,
    ConsumeRequest,
    OffsetsRequest,
    CreateTopicRequest,
    GrowTopicRequest,
    GroupJoinRequest,
    GroupHeartbeatRequest,
    GroupLeaveRequest,
    GroupCommitRequest,
)
ANSWERS: tuple[type[Struct], ...] = (
    ProduceResponse,
    ProduceSuccess,
    ProduceFailure,
    Producer,
    ConsumeResponse,
    OffsetsResponse,
    Error,
    Health,
    Topics,
    TopicDescription,
    TopicDeleted,
    PartitionStatus,
    PartitionState,
    PartitionStorage,
    CompactionPass,
    GroupJoinResponse,
    GroupHeartbeatResponse,
    GroupLeaveResponse,
    GroupCommitResponse,
    GroupDescription,
    Groups,
)

Body = TypeVar("Body", bound=Struct)


def answer(body: type[Body], document: Any) -> Body:
    """A service's answer document as its definition: a field it lacks or mistypes is a bug, found here."""
    return msgspec.convert(document, body)
