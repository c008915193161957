"""The errors of the Kinesis Data Streams API, each with the HTTP status and ``__type`` Kinesis answers.

Kinesis speaks AWS JSON 1.1: an error is an HTTP status and a body ``{"__type": <name>, "message": <text>}``,
and the SDKs raise the exception class named by ``__type``. Every error of the service model is a 400; of the
errors common to all AWS services, ``MissingAuthenticationToken`` is a 403, ``InternalFailure`` a 500 and
``ServiceUnavailable`` a 503 (the "Common Errors" page of the AWS API references).

| ``__type`` | status | raised for |
|---|---|---|
| ``ResourceNotFoundException`` | 400 | an unknown stream or shard |
| ``ResourceInUseException`` | 400 | a stream that exists already, or is not ACTIVE |
| ``InvalidArgumentException`` | 400 | a bad sequence number, iterator, hash key, shard id |
| ``ExpiredIteratorException`` | 400 | a shard iterator older than five minutes |
| ``ExpiredNextTokenException`` | 400 | a pagination token past its life |
| ``LimitExceededException`` | 400 | too many shards or streams, or too many requests of a kind |
| ``ProvisionedThroughputExceededException`` | 400 | a rate over a shard's throughput (retriable) |
| ``ValidationException`` | 400 | a parameter outside the model's constraints (length, pattern) |
| ``SerializationException`` | 400 | a body that is not JSON (or CBOR), or a member of the wrong type |
| ``AccessDeniedException`` | 400 | a key without the permission the operation needs |
| ``UnknownOperationException`` | 400 | an ``X-Amz-Target`` that names no operation |
| ``IncompleteSignatureException`` | 400 | an ``Authorization`` header that is not a whole SigV4 signature |
| ``InvalidSignatureException`` | 400 | a signature that does not match, or is out of the clock-skew window |
| ``UnrecognizedClientException`` | 400 | an access key id llog did not issue (or revoked) |
| ``MissingAuthenticationTokenException`` | 403 | no ``Authorization`` header at all |
| ``InternalFailure`` | 500 | a bug (the message is not shown) |
| ``ServiceUnavailable`` | 503 | storage unavailable, retriable |
"""

from __future__ import annotations

from typing import ClassVar


class KinesisError(Exception):
    """An error answer of the Kinesis API: ``type_name`` is its ``__type``, ``status`` its HTTP status."""

    type_name: ClassVar[str]
    status: ClassVar[int] = 400
    retriable: ClassVar[bool] = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.type_name = cls.__name__

    def body(self) -> dict[str, str]:
        """The JSON body Kinesis answers with (the CBOR one has the same two fields)."""
        return {"__type": self.type_name, "message": self.message}


class ResourceNotFoundException(KinesisError):
    """The stream or shard does not exist."""


class ResourceInUseException(KinesisError):
    """The stream exists already, or is not ACTIVE for this operation."""


class InvalidArgumentException(KinesisError):
    """A parameter exceeds its restrictions, is not supported, or cannot be used."""


class ExpiredIteratorException(KinesisError):
    """The shard iterator is older than its five minutes."""


class ExpiredNextTokenException(KinesisError):
    """The pagination token is past its life."""


class LimitExceededException(KinesisError):
    """Too many shards or streams, or too many requests of a kind."""


class ProvisionedThroughputExceededException(KinesisError):
    """The request rate for a shard is over its throughput; the SDKs retry it."""

    retriable = True


class ValidationException(KinesisError):
    """A parameter is outside the constraints of the service model."""


class SerializationException(KinesisError):
    """The body is not a document of the request's encoding, or a member has the wrong type."""


class AccessDeniedException(KinesisError):
    """The key has no permission for this operation on this stream."""


class UnknownOperationException(KinesisError):
    """The ``X-Amz-Target`` names no operation llog serves."""


class IncompleteSignatureException(KinesisError):
    """The ``Authorization`` header is not a whole SigV4 signature."""


class InvalidSignatureException(KinesisError):
    """The signature does not match the request, or its date is outside the clock-skew window."""


class UnrecognizedClientException(KinesisError):
    """The access key id is unknown or revoked."""


class MissingAuthenticationTokenException(KinesisError):
    """The request carries no signature at all."""

    status = 403


class InternalFailure(KinesisError):
    """An unexpected error; the message the client sees says nothing of it."""

    status = 500


class ServiceUnavailable(KinesisError):
    """Storage is unavailable for now; the same request may succeed later."""

    status = 503
    retriable = True
