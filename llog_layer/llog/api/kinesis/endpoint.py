"""One Kinesis API request, from its bytes to its answer: target, signature, permission, operation, encoding.

The Lambda handler (``functions/kinesis``) and ``llog serve`` both answer through ``answer``. In order:
the ``X-Amz-Target`` names an operation llog serves (``UnknownOperationException`` otherwise); the SigV4
signature is good and its key issued and not revoked (``sigv4``; an access key id is looked up in
``AccessKeys``); the body decodes in its encoding (``wire``); the key may do the operation's action on its
stream (``AccessDeniedException``); then the operation runs (``operations``). Every refusal happens before
the operation, so it writes nothing. An error is answered as Kinesis does: its status, an
``x-amzn-ErrorType`` header and a ``{"__type", "message"}`` body; storage that is down is
``ServiceUnavailable`` (503, retried by the SDKs), and anything unexpected is an ``InternalFailure`` (500)
whose message says nothing of it (it is logged with the request id).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from llog.api.kinesis import operations, sigv4, wire
from llog.api.kinesis.errors import (
    InternalFailure,
    InvalidArgumentException,
    KinesisError,
    ResourceNotFoundException,
    ServiceUnavailable,
    UnknownOperationException,
)
from llog.errors import InvalidArgument, LlogError, TopicDeleted, UnknownTopic
from llog.service.admin import AdminService
from llog.service.consume import ConsumeService
from llog.service.produce import ProduceService

log = logging.getLogger(__name__)

DEFAULT_ACCOUNT = "000000000000"
# The largest body read: a PutRecords of Kinesis's 5 MiB, base64 in JSON (4/3 of it), with 500 partition keys.
# (Behind API Gateway and Lambda, Lambda's 6 MB request payload is the lower limit.)
MAX_REQUEST_BYTES = 8 * 1024 * 1024
Answer = tuple[int, list[tuple[str, str]], bytes]


def error_answer(content_type: str, error: KinesisError, request_id: str) -> Answer:
    """An error as Kinesis answers it: its status, ``x-amzn-ErrorType`` and the ``__type``/``message`` body."""
    headers = [("Content-Type", content_type), ("x-amzn-RequestId", request_id),
               ("x-amzn-ErrorType", f"{error.type_name}:")]  # fmt: skip
    return error.status, headers, wire.encode(content_type, error.body())


def too_large(length: int, request_id: str) -> Answer:
    """The answer to a body over ``MAX_REQUEST_BYTES``, refused before it is read."""
    error = InvalidArgumentException(
        f"the request body is {length} bytes; llog reads Kinesis requests of at most {MAX_REQUEST_BYTES} bytes"
    )
    return error_answer(wire.JSON_CONTENT_TYPE, error, request_id)


class Permissions(Protocol):
    @property
    def read(self) -> bool: ...

    def allows(self, stream: str, action: str) -> bool: ...


INTERNAL_MESSAGE = "An internal error occurred (llog logged it with the request id)."


def _kinesis_error(error: LlogError, request_id: str) -> KinesisError:
    """An error of llog's services, as the Kinesis error a client can act on (an operation maps what it expects;
    this is what a race or a store failure leaves: a stream deleted meanwhile, storage unavailable)."""
    if isinstance(error, UnknownTopic | TopicDeleted):
        return ResourceNotFoundException(str(error))
    if isinstance(error, InvalidArgument):
        return InvalidArgumentException(str(error))
    if error.retriable:
        return ServiceUnavailable(f"{error.error_type}: {error}")
    log.error("Kinesis request %s failed: %s", request_id, error.error_type, exc_info=error)
    return InternalFailure(INTERNAL_MESSAGE)


class KeyLookup(Protocol):
    """The issued access keys (``llog.service.keys.AccessKeys``)."""

    def lookup(self, access_key_id: str) -> tuple[str, Permissions] | None: ...

    def iterator_key(self) -> bytes: ...


@dataclass(frozen=True)
class Endpoint:
    """What answers Kinesis requests in one process: its services (created on first use), the keys, the clock."""

    produce: Callable[[], ProduceService]
    consume: Callable[[], ConsumeService]
    admin: Callable[[], AdminService]
    keys: Callable[[], KeyLookup]
    account: str = DEFAULT_ACCOUNT
    clock: Callable[[], float] = time.time
    max_answer_bytes: int | None = None  # the GetRecords answer's bound behind Lambda (its 6 MB response)
    on_close: Callable[[], None] = lambda: None  # what closing it closes (the storage it made, if any)

    def close(self) -> None:
        self.on_close()

    def answer(self, request: sigv4.SignedRequest, request_id: str) -> Answer:
        """The status, headers and body of the answer to ``request``."""
        headers = {name.lower(): value for name, value in request.headers.items()}
        content_type = wire.content_type_of(headers.get("content-type"))
        error: KinesisError
        try:
            payload = wire.encode(content_type, self._run(request, headers, content_type))
        except KinesisError as exc:
            error = exc
        except LlogError as exc:
            error = _kinesis_error(exc, request_id)
        except Exception:
            log.exception("Kinesis request %s failed", request_id)
            error = InternalFailure(INTERNAL_MESSAGE)
        else:
            return 200, [("Content-Type", content_type), ("x-amzn-RequestId", request_id)], payload
        return error_answer(content_type, error, request_id)

    def _run(self, request: sigv4.SignedRequest, headers: Mapping[str, str], content_type: str) -> dict[str, Any]:
        target = headers.get("x-amz-target", "")
        name = target.removeprefix(wire.TARGET_PREFIX)
        if request.method != "POST" or not target.startswith(wire.TARGET_PREFIX) or name not in operations.OPERATIONS:
            raise UnknownOperationException(
                f"llog does not serve the operation {target!r}; docs/KINESIS.md lists the operations it serves"
            )
        now = self.clock()
        keys = self.keys()
        caller, permissions = sigv4.verify_issued(request, keys.lookup, datetime.fromtimestamp(now, UTC))
        document = wire.decode(content_type, request.body)
        kinesis = operations.Kinesis(
            produce=self.produce,
            consume=self.consume,
            admin=self.admin,
            iterator_key=keys.iterator_key,
            allows=permissions.allows,
            reads_any=lambda: permissions.read,
            region=caller.region,
            account=self.account,
            now_ms=lambda: int(self.clock() * 1000),
            max_answer_bytes=self.max_answer_bytes,
        )
        return operations.run(name, kinesis, document)
