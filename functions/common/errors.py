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

Bodies are ``{"error", "error_type", "retriable"}`` (``http_contract.error_body``
plus whether retrying may help), all built by ``client_error``; an
``UnknownTopic`` also names its ``topic`` (a consumer drops that topic's
partitions). Unexpected
exceptions answer ``InternalError`` without their message, which the
function's log keeps.

``llog.service.http_contract`` is imported by the calls that need it, not with
this module: it loads the writer and reader, hence the Oxia and S3 clients'
modules, which a handler's import (the Lambda init phase) should not.
"""

from __future__ import annotations

from typing import Any

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


def status_for(error: BaseException) -> int:
    from llog.service.http_contract import RequestRejected

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


def client_error(message: str, error_type: str, *, retriable: bool = False) -> dict[str, Any]:
    """The body of every error answer, ``{"error", "error_type", "retriable"}``, here or in ``llog serve``."""
    from llog.service.http_contract import error_body

    return {**error_body(message, error_type), "retriable": retriable}


def error_document(error: BaseException, request_id: str | None = None) -> dict[str, Any]:
    if isinstance(error, UnknownTopic):
        return {**client_error(str(error), error.error_type, retriable=error.retriable), "topic": error.topic}
    if isinstance(error, LlogError):
        return client_error(str(error), error.error_type, retriable=error.retriable)
    where = f" (request {request_id})" if request_id else ""
    return client_error(f"internal error{where}", "InternalError")


def error_answer(error: BaseException, request_id: str | None = None) -> tuple[int, dict[str, Any], dict[str, str]]:
    """``(status, body, headers)`` for an error that ends a request."""
    status = status_for(error)
    headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else {}
    return status, error_document(error, request_id), headers
