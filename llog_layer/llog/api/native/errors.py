"""The one mapping from errors to HTTP answers, shared by every function and ``llog serve``.

| error | status |
|---|---|
| ``RequestRejected`` (malformed request, over a limit) | its ``.status`` (400, 413) |
| ``InvalidArgument`` (bad topic, partition, record) | 400 |
| ``PartitionNotInitialized`` | 404 |
| ``OffsetOutOfRange`` | 400 |
| ``LogFenced`` | 409 |
| ``UnknownGroup`` | 404 |
| ``UnknownTopic`` | 404 |
| ``TopicExists``, ``TopicDeleted`` (topics) | 409 |
| ``UnknownMember``, ``StaleGeneration``, ``NotPartitionOwner`` (consumer groups) | 409 |
| ``ProducerFenced``, ``OutOfOrderSequence``, ``UnknownProducer`` (idempotent producers) | 409 |
| ``OffsetMismatch`` (conditional append; ``ConditionalAppendUnsupported`` is a 400) | 412 |
| any retriable ``LlogError`` (``OxiaUnavailable``, ``BlobStoreUnavailable``, | 503, ``Retry-After: 1`` |
| ``BackPressureRejected``, ``AppendConflict``, ``AppendOutcomeUnknown``, ...) | |
| anything else (``ConfigurationError``, ``CorruptData``, ``BlobNotFound``, a bug) | 500 |

Bodies are ``bodies.Error`` (``{"error", "error_type", "retriable"}``), all built by
``client_error``; an ``UnknownTopic`` also names its ``topic`` (a consumer drops that
topic's partitions). Unexpected exceptions answer ``InternalError`` without their
message, which the function's log keeps. Nothing here loads the storage clients: a
handler imports it at its cold start.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, Struct

from llog.errors import (
    InvalidArgument,
    LlogError,
    LogFenced,
    NotPartitionOwner,
    OffsetMismatch,
    OffsetOutOfRange,
    OutOfOrderSequence,
    PartitionNotInitialized,
    ProducerFenced,
    StaleGeneration,
    TopicDeleted,
    TopicExists,
    UnknownGroup,
    UnknownMember,
    UnknownProducer,
    UnknownTopic,
)

RETRY_AFTER_S = 1


# One of the answers of ``bodies``, defined here: every handler loads it at its cold start, where ``bodies`` would
# add the creation of all the other definitions.
class Error(Struct, omit_defaults=True, forbid_unknown_fields=True):
    """The body of every error answer."""

    error: Annotated[str, Meta(description="What went wrong, for people.")]
    error_type: Annotated[
        str,
        Meta(
            description="Stable name: InvalidRequest, LimitExceeded, PayloadTooLarge, InvalidTopicName, "
            "InvalidPartition, NotFound, MethodNotAllowed, UnsupportedMediaType, PartitionNotInitialized, "
            "UnknownTopic, TopicExists, TopicDeleted, InvalidPartitionCount, OxiaUnavailable, ConfigurationError, "
            "InternalError, ...",
            examples=["InvalidRequest"],
        ),
    ]
    retriable: Annotated[bool, Meta(description="Whether the same request may succeed later.")]
    topic: Annotated[
        str | None,
        Meta(description="With UnknownTopic: the topic that does not exist (a consumer drops its partitions)."),
    ] = None


class RequestRejected(LlogError):
    """The request is malformed or over a limit; nothing was written."""

    def __init__(self, message: str, *, status: int = 400, error_type: str = "InvalidRequest") -> None:
        super().__init__(message)
        self.status = status
        self._error_type = error_type

    @property
    def error_type(self) -> str:
        return self._error_type


def status_for(error: BaseException) -> int:
    if isinstance(error, RequestRejected):
        return error.status
    if isinstance(error, OffsetMismatch):
        return 412
    if isinstance(error, ProducerFenced | OutOfOrderSequence | UnknownProducer):
        return 409
    if isinstance(error, InvalidArgument | OffsetOutOfRange):
        return 400
    if isinstance(error, PartitionNotInitialized):
        return 404
    if isinstance(error, LogFenced):
        return 409
    if isinstance(error, UnknownGroup):
        return 404
    if isinstance(error, UnknownTopic):
        return 404
    if isinstance(error, TopicExists | TopicDeleted):
        return 409
    if isinstance(error, UnknownMember | StaleGeneration | NotPartitionOwner):
        return 409
    if isinstance(error, LlogError) and error.retriable:
        return 503
    return 500


def client_error(message: str, error_type: str, *, retriable: bool = False, topic: str | None = None) -> Error:
    """The body of every error answer, here or in ``llog serve``."""
    return Error(message, error_type, retriable, topic)


def error_document(error: BaseException, request_id: str | None = None) -> Error:
    if isinstance(error, UnknownTopic):
        return client_error(str(error), error.error_type, retriable=error.retriable, topic=error.topic)
    if isinstance(error, LlogError):
        return client_error(str(error), error.error_type, retriable=error.retriable)
    where = f" (request {request_id})" if request_id else ""
    return client_error(f"internal error{where}", "InternalError")


def error_answer(error: BaseException, request_id: str | None = None) -> tuple[int, Error, dict[str, str]]:
    """``(status, body, headers)`` for an error that ends a request."""
    status = status_for(error)
    headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else {}
    return status, error_document(error, request_id), headers
