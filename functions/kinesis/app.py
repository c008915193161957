"""``POST /kinesis``: the Amazon Kinesis Data Streams API (``llog.api.kinesis.endpoint``; docs/KINESIS.md).

API Gateway passes the request unauthorized: the SDKs sign for service ``kinesis``, which IAM authorization
cannot check, so the endpoint verifies the SigV4 signature itself against the keys llog issued
(``llog keys``). It verifies the path the client signed, ``requestContext.path`` (with the stage), and the
body's exact bytes (a CBOR body arrives base64-encoded, as a binary media type). ``llog serve`` calls
``answer`` directly, with the request as it arrived.

The services and the key store are created on the first request of an execution environment; ``llog
serve`` injects its own with ``set_endpoint``.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from functions.common.lazy import Lazy

if TYPE_CHECKING:
    from llog.api.kinesis.endpoint import Endpoint
    from llog.api.kinesis.sigv4 import SignedRequest


def create_endpoint() -> Endpoint:
    """The services of a Lambda environment over one Oxia client and one S3 client."""
    from llog.api.kinesis.endpoint import Endpoint
    from llog.config import WriterConfig, kinesis_account_from_env
    from llog.protocol.append import LogWriter
    from llog.protocol.read import LogReader
    from llog.service.admin import AdminService
    from llog.service.consume import ConsumeService
    from llog.service.keys import AccessKeys
    from llog.service.produce import ProduceService
    from llog.store.object_cache import ObjectCache
    from llog.store.sealing import sealer_from_env
    from llog.store.storage import Storage

    storage = Storage.from_env()
    writer = LogWriter(storage, config=WriterConfig.from_env())
    produce = ProduceService(writer)
    consume = ConsumeService(LogReader(storage), object_cache=ObjectCache.from_env())
    admin = AdminService(storage.oxia, root=storage.root, writer=writer)
    keys: Lazy[AccessKeys] = Lazy(lambda: AccessKeys(storage.oxia, root=storage.root, sealer=sealer_from_env()))
    return Endpoint(lambda: produce, lambda: consume, lambda: admin, keys.get, account=kinesis_account_from_env(),
                    max_answer_bytes=MAX_ANSWER_BYTES, on_close=storage.close)  # fmt: skip


# A GetRecords answer within Lambda's 6 MiB response payload, with room for the proxy response around its body
# (which a CBOR answer fills base64-encoded): a client reads the rest with the next iterator.
MAX_ANSWER_BYTES = 5_000_000
_endpoint: Lazy[Endpoint] = Lazy(create_endpoint, lambda endpoint: endpoint.close())


def set_endpoint(endpoint: Endpoint | None) -> None:
    """Use ``endpoint`` (owned by the caller) instead of one from the environment."""
    _endpoint.set(endpoint)


def reset() -> None:
    _endpoint.reset()


def answer(request: SignedRequest, request_id: str) -> tuple[int, list[tuple[str, str]], bytes]:
    return _endpoint.get().answer(request, request_id)


def _body(event: dict[str, Any]) -> bytes:
    body = event.get("body") or ""
    if not event.get("isBase64Encoded"):
        return body.encode("utf-8")
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return b"\x00not base64"  # fails the signature (its hash is not the signed body's), so it is refused


def _headers(event: dict[str, Any], body: bytes) -> dict[str, str]:
    """The request's headers, with ``Content-Length`` where the event has none: the AWS SDK for Java signs it,
    and the length it signed is that of these very bytes, whether or not API Gateway passed the header on."""
    headers = dict(event.get("headers") or {})
    if not any(name.lower() == "content-length" for name in headers):
        headers["Content-Length"] = str(len(body))
    return headers


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from llog.api.kinesis.sigv4 import SignedRequest

    request_context = event.get("requestContext") or {}
    request_id = request_context.get("requestId") or str(uuid.uuid4())
    query = event.get("multiValueQueryStringParameters") or {}
    body = _body(event)
    request = SignedRequest(
        method=event.get("httpMethod", "POST"),
        path=request_context.get("path") or event.get("path") or "/",
        query=urlencode([(k, v) for k, values in query.items() for v in values]),
        headers=_headers(event, body),
        body=body,
    )
    status, headers, body = answer(request, request_id)
    binary = dict(headers).get("Content-Type", "").startswith("application/x-amz-cbor")
    return {
        "statusCode": status,
        "headers": dict(headers),
        "body": base64.b64encode(body).decode("ascii") if binary else body.decode("utf-8"),
        "isBase64Encoded": binary,
    }
