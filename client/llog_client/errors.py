"""Typed errors of the client: one class per family of the server's ``error_type``s.

Every error answer of llog is ``{"error", "error_type", "retriable"}`` (docs/HTTP_API.md); a produce
result that failed carries the same three fields. :func:`error_from` turns either into the class of
its family, keeping the server's ``error_type``, message and ``retriable``, and the HTTP status.
``retriable`` says whether sending the same request again may succeed; the producer retries exactly
those, the consumer rejoins its group on the membership errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class LlogClientError(Exception):
    """An error answered by llog (or met on the way to it)."""

    retriable = False

    def __init__(
        self,
        message: str,
        *,
        error_type: str | None = None,
        retriable: bool | None = None,
        status: int | None = None,
        topic: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type or type(self).__name__
        self.status = status
        self.topic = topic  # the topic the answer names, if any (``UnknownTopic``; a failed produce result)
        if retriable is not None:
            self.retriable = retriable

    def __str__(self) -> str:
        return f"{self.error_type}: {self.message}"


class InvalidRequestError(LlogClientError):
    """400/413: the request is malformed or over a limit; nothing was written."""


class AccessDeniedError(LlogClientError):
    """401/403: API Gateway refused the credentials (SigV4 or API key), or their absence."""


class NotFoundError(LlogClientError):
    """404: ``UnknownTopic`` (``topic`` names it), ``UnknownGroup``, ``PartitionNotInitialized`` or an unknown path."""


class TopicConflictError(LlogClientError):
    """409 ``TopicExists`` (other settings) or ``TopicDeleted`` (the name is still being reclaimed)."""


class FencedError(LlogClientError):
    """409 ``LogFenced`` (the partition rejects appends) or ``ProducerFenced`` (a newer epoch took over)."""


class ProducerStateError(LlogClientError):
    """409 ``OutOfOrderSequence`` or ``UnknownProducer``: the idempotent producer's state does not match."""


class OffsetMismatchError(LlogClientError):
    """412 ``OffsetMismatch``: a conditional append's ``expected_offset`` was not the next offset."""

    def __init__(self, message: str, *, next_offset: int | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.next_offset = next_offset


class OffsetOutOfRangeError(LlogClientError):
    """``OffsetOutOfRange``: a fetch offset outside the readable range."""


class GroupMembershipError(LlogClientError):
    """409 ``UnknownMember``, ``StaleGeneration`` or ``NotPartitionOwner``: the consumer must rejoin its group."""


class UnavailableError(LlogClientError):
    """A retriable failure (503, API Gateway's 429, ``OxiaUnavailable``, ``BackPressureRejected``,
    ``AppendOutcomeUnknown``...)."""

    retriable = True


class TransportError(UnavailableError):
    """No answer from the server (connection refused or lost, timeout): a write may or may not have happened."""


class ServerError(LlogClientError):
    """500: a bug, damaged data or a configuration error on the server."""


_FAMILIES: dict[str, type[LlogClientError]] = {
    **dict.fromkeys(
        ("InvalidRequest", "LimitExceeded", "InvalidTopicName", "InvalidPartition", "InvalidArgument",
         "InvalidPartitionCount", "ConditionalAppendUnsupported", "BatchTooLarge", "PayloadTooLarge",
         "LengthRequired", "MethodNotAllowed"),
        InvalidRequestError,
    ),
    **dict.fromkeys(("NotFound", "UnknownTopic", "UnknownGroup", "PartitionNotInitialized"), NotFoundError),
    **dict.fromkeys(("TopicExists", "TopicDeleted"), TopicConflictError),
    **dict.fromkeys(("LogFenced", "ProducerFenced"), FencedError),
    **dict.fromkeys(("OutOfOrderSequence", "UnknownProducer"), ProducerStateError),
    "OffsetMismatch": OffsetMismatchError,
    "OffsetOutOfRange": OffsetOutOfRangeError,
    **dict.fromkeys(("UnknownMember", "StaleGeneration", "NotPartitionOwner"), GroupMembershipError),
}  # fmt: skip


def _family(error_type: str, status: int | None, retriable: bool) -> type[LlogClientError]:
    if error_type in _FAMILIES:
        return _FAMILIES[error_type]
    if retriable or status == 503:
        return UnavailableError
    if status is not None and 400 <= status < 500:
        families = {401: AccessDeniedError, 403: AccessDeniedError, 404: NotFoundError, 409: LlogClientError,
                    412: OffsetMismatchError}  # fmt: skip
        return families.get(status, InvalidRequestError)
    return ServerError


def error_from(document: Mapping[str, Any], status: int | None = None) -> LlogClientError:
    """The typed error of an error body or a failed produce result."""
    error_type = str(document.get("error_type") or f"HTTP{status}")
    # A gateway's 502/504 (the function died or timed out) may have written or not: retry it, as a lost
    # connection is (an idempotent producer's retry is deduplicated by the server). Its 429 is throttling
    # (the stage's or a usage plan's rate): retried after a backoff, as Kafka's clients do on a quota.
    retriable = bool(document.get("retriable", status in (429, 502, 503, 504)))
    message = str(document.get("error") or f"HTTP status {status}")
    family = _family(error_type, status, retriable)
    topic = document.get("topic")
    topic = topic if isinstance(topic, str) else None
    if family is OffsetMismatchError:
        next_offset = document.get("next_offset")
        return OffsetMismatchError(
            message,
            next_offset=next_offset if isinstance(next_offset, int) else None,
            error_type=error_type,
            retriable=retriable,
            status=status,
            topic=topic,
        )
    return family(message, error_type=error_type, retriable=retriable, status=status, topic=topic)


class OutcomeUnknownError(LlogClientError):
    """A batch failed for good without an answer that says whether it was written: its records may be in the
    log. ``last_error`` is what its last attempt met (also the exception's ``__cause__``)."""

    def __init__(self, message: str, *, last_error: LlogClientError) -> None:
        super().__init__(message, error_type="OutcomeUnknown", retriable=False, status=last_error.status,
                         topic=last_error.topic)  # fmt: skip
        self.last_error = last_error
        self.__cause__ = last_error
