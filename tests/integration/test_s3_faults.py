"""S3 failures against moto: 503 SlowDown, 500s, timeouts, dropped and hung connections.

GETs: hooks on botocore's ``before-send`` event answer in place of the server,
so botocore's own retry logic and our error mapping run unchanged. PUTs go
through the AWS Common Runtime, which botocore's hooks never see: a proxy in
front of moto (``tests/s3_proxy.py``) answers them with the fault instead, so
the CRT's retries run unchanged.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import botocore.awsrequest
import botocore.exceptions
import pytest
from botocore.compat import HTTPHeaders

from devserver.devstack import free_port
from llog.config import OxiaConfig, S3Config
from llog.errors import BlobNotFound, BlobStoreUnavailable, ConfigurationError
from llog.format.keys import S3Location
from llog.protocol.append import LogWriter, SharedAppendGroup
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from tests.conftest import BUCKET
from tests.faults import HARNESS
from tests.s3_proxy import S3Proxy, s3_proxy


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
def proxy(s3_config: S3Config) -> Iterator[S3Proxy]:
    assert s3_config.endpoint_url
    with s3_proxy(s3_config.endpoint_url) as proxy:
        yield proxy


@pytest.fixture
def proxied(s3_config: S3Config, proxy: S3Proxy) -> BlobStore:
    """A store whose calls pass the proxy; a hung call gives up after 3 attempts x (0.5 + 1.5) s."""
    return BlobStore(
        replace(s3_config, endpoint_url=proxy.endpoint_url, max_attempts=3, connect_timeout_s=0.5, read_timeout_s=1.5)
    )


@pytest.fixture
def location(root: str) -> S3Location:
    return S3Location(BUCKET, f"{root}/faults/{uuid.uuid4()}")


@pytest.mark.parametrize("answer", [(503, "SlowDown"), (500, "InternalError"), "drop"])
def test_transient_put_failures_are_retried_until_durable(
    proxied: BlobStore, proxy: S3Proxy, location: S3Location, answer: tuple[int, str] | str
) -> None:
    proxy.fail("PUT", answer, times=2)
    proxied.put(location, b"payload")
    assert len(proxy.requests("PUT")) == 3
    assert proxied.get(location) == b"payload"


def test_persistent_put_failures_end_in_a_clear_retriable_error(
    proxied: BlobStore, proxy: S3Proxy, location: S3Location
) -> None:
    proxy.fail("PUT", (503, "SlowDown"), times=100)
    with pytest.raises(BlobStoreUnavailable, match="SlowDown") as excinfo:
        proxied.put(location, b"payload")
    assert excinfo.value.retriable
    assert len(proxy.requests("PUT")) == proxied.config.max_attempts  # retried before giving up
    with pytest.raises(BlobNotFound):
        proxied.head(location)


@pytest.mark.parametrize(("status", "code"), [(403, "AccessDenied"), (404, "NoSuchBucket")])
def test_a_refused_put_is_a_configuration_error_and_is_not_retried(
    proxied: BlobStore, proxy: S3Proxy, location: S3Location, status: int, code: str
) -> None:
    proxy.fail("PUT", (status, code), times=100)
    with pytest.raises(ConfigurationError, match=f"S3 put of {location.uri} refused: {code}: HTTP {status}: injected"):
        proxied.put(location, b"payload")
    assert len(proxy.requests("PUT")) == 1


def test_a_put_that_hangs_is_given_up_at_its_deadline(proxied: BlobStore, proxy: S3Proxy, location: S3Location) -> None:
    proxy.fail("PUT", "hang", times=100)
    started = time.monotonic()
    with pytest.raises(BlobStoreUnavailable, match="did not finish within 6s") as excinfo:
        proxied.put(location, b"payload")
    assert excinfo.value.retriable
    assert time.monotonic() - started < 30


def test_persistent_get_failures_end_in_a_clear_retriable_error(store: BlobStore, location: S3Location) -> None:
    store.put(location, b"payload")
    faults = Faults(store, "GetObject", error_response(503, "SlowDown"), times=100)
    with pytest.raises(BlobStoreUnavailable, match="SlowDown") as excinfo:
        store.get_range(location, 0, 3)
    assert excinfo.value.retriable
    assert faults.calls >= store.config.max_attempts  # botocore retried before giving up


def test_range_get_retries_then_returns_exact_bytes(store: BlobStore, location: S3Location) -> None:
    store.put(location, bytes(range(200)))
    Faults(store, "GetObject", timeout, times=2)
    assert store.get_range(location, 10, 50) == bytes(range(10, 60))


def test_an_append_whose_blob_never_became_durable_is_never_acknowledged(
    proxied: BlobStore, proxy: S3Proxy, root: str
) -> None:
    proxy.fail("PUT", (500, "InternalError"), times=100)
    oxia = OxiaStore(OxiaConfig(f"127.0.0.1:{free_port()}", connect_timeout_ms=500))
    writer = LogWriter(Storage(oxia, proxied, BUCKET, root))

    results = writer.append_shared([SharedAppendGroup("orders", 0, [b"a"]), SharedAppendGroup("orders", 1, [b"b"])])

    assert [(r.ok, r.error_type) for r in results] == [(False, "BlobStoreUnavailable")] * 2
    assert all(r.start_offset is None for r in results)
    assert oxia.counters.total_calls() == 0  # no offsets were reserved for bytes S3 does not hold
