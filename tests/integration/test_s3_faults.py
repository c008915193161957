"""S3 failures injected into the real botocore client talking to moto: 503 SlowDown, 500s, timeouts.

Hooks on botocore's ``before-send`` event answer in place of the server, so
botocore's own retry logic and our error mapping run unchanged.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import botocore.awsrequest
import botocore.exceptions
import pytest
from botocore.compat import HTTPHeaders

from devserver.devstack import free_port
from llog.client.writer import LogWriter, SharedAppendGroup
from llog.config import OxiaConfig, S3Config
from llog.errors import BlobStoreUnavailable
from llog.format.keys import S3Location
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from tests.conftest import BUCKET
from tests.faults import HARNESS


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Any:
        yield self.data


def error_response(status: int, code: str) -> Callable[..., Any]:
    def respond(request: Any, **_: Any) -> botocore.awsrequest.AWSResponse:
        body = f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode()
        return botocore.awsrequest.AWSResponse(request.url, status, HTTPHeaders(), _Body(body))

    return respond


def timeout(request: Any, **_: Any) -> None:
    raise botocore.exceptions.ReadTimeoutError(endpoint_url=request.url)


class Faults:
    """Fail the first ``times`` calls of an operation with ``fault``, then let them through."""

    def __init__(self, store: BlobStore, operation: str, fault: Callable[..., Any], times: int) -> None:
        self.calls = 0
        self.times = times
        self.fault = fault
        store.events.register(f"before-send.s3.{operation}", self)

    def __call__(self, request: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls > self.times:
            return None
        HARNESS["S3 faults injected"] += 1
        return self.fault(request, **kwargs)


@pytest.fixture
def store(s3_config: S3Config) -> BlobStore:
    return BlobStore(S3Config(**{**s3_config.__dict__, "max_attempts": 3}))


@pytest.fixture
def location(root: str) -> S3Location:
    return S3Location(BUCKET, f"{root}/faults/{uuid.uuid4()}")


@pytest.mark.parametrize(
    ("fault", "name"),
    [(error_response(503, "SlowDown"), "SlowDown"), (error_response(500, "InternalError"), "500"),
     (timeout, "timeout")],
)
def test_transient_put_failures_are_retried_until_durable(
    store: BlobStore, location: S3Location, fault: Callable[..., Any], name: str
) -> None:
    faults = Faults(store, "PutObject", fault, times=2)
    store.put(location, b"payload")
    assert faults.calls == 3
    assert store.get(location) == b"payload"


@pytest.mark.parametrize(
    ("operation", "call"),
    [("PutObject", lambda s, loc: s.put(loc, b"payload")), ("GetObject", lambda s, loc: s.get_range(loc, 0, 3))],
)
def test_persistent_failures_end_in_a_clear_retriable_error(
    store: BlobStore, location: S3Location, operation: str, call: Callable[[BlobStore, S3Location], object]
) -> None:
    store.put(location, b"payload")
    faults = Faults(store, operation, error_response(503, "SlowDown"), times=100)
    with pytest.raises(BlobStoreUnavailable, match="SlowDown") as excinfo:
        call(store, location)
    assert excinfo.value.retriable
    assert faults.calls >= store.config.max_attempts  # botocore retried before giving up


def test_range_get_retries_then_returns_exact_bytes(store: BlobStore, location: S3Location) -> None:
    store.put(location, bytes(range(200)))
    Faults(store, "GetObject", timeout, times=2)
    assert store.get_range(location, 10, 50) == bytes(range(10, 60))


def test_an_append_whose_blob_never_became_durable_is_never_acknowledged(store: BlobStore, root: str) -> None:
    Faults(store, "PutObject", error_response(500, "InternalError"), times=100)
    oxia = OxiaStore(OxiaConfig(f"127.0.0.1:{free_port()}", connect_timeout_ms=500))
    writer = LogWriter(Storage(oxia, store, BUCKET, root))

    results = writer.append_shared([SharedAppendGroup("orders", 0, [b"a"]), SharedAppendGroup("orders", 1, [b"b"])])

    assert [(r.ok, r.error_type) for r in results] == [(False, "BlobStoreUnavailable")] * 2
    assert all(r.start_offset is None for r in results)
    assert oxia.counters.total_calls() == 0  # no offsets were reserved for bytes S3 does not hold
