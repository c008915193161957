"""Unit tests of functions/common: the error mapping, routes, events, lazy services."""

from __future__ import annotations

import base64
import json
import threading

import msgspec
import pytest
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response

import llog
from functions.common import names, routes
from functions.common.lazy import Lazy, PerThread
from llog.api.native.errors import RequestRejected, error_answer, error_document, status_for
from llog.errors import UnknownTopic
from server import events
from server.batching import BackPressureRejected

# --- the one error mapping ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (RequestRejected("bad"), 400),
        (RequestRejected("big", status=413, error_type="PayloadTooLarge"), 413),
        (llog.InvalidArgument("x"), 400),
        (llog.InvalidTopicName("x"), 400),
        (llog.InvalidPartition("x"), 400),
        (llog.BatchTooLarge("x"), 400),
        (llog.OffsetOutOfRange("t", 0, 9, 1, 3), 400),
        (llog.PartitionNotInitialized("t", 0), 404),
        (llog.LogFenced("t", 0), 409),
        (llog.OxiaUnavailable("x"), 503),
        (llog.BlobStoreUnavailable("x"), 503),
        (BackPressureRejected("x"), 503),
        (llog.AppendConflict("x"), 503),
        (llog.AppendOutcomeUnknown("x"), 503),
        (llog.InconsistentReadState("x"), 503),
        (llog.SessionExpired("x"), 503),
        (llog.VersionConflict("x"), 503),
        (llog.ConfigurationError("LLOG_X is not set"), 500),
        (llog.CorruptBatch("x"), 500),
        (llog.BlobNotFound("x"), 500),
        (llog.LlogError("x"), 500),
        (ValueError("x"), 500),
    ],
)
def test_status_for(error, status):
    assert status_for(error) == status


def test_error_answers():
    status, body, headers = error_answer(llog.OxiaUnavailable("down"))
    assert (status, msgspec.to_builtins(body), headers) == (
        503, {"error": "down", "error_type": "OxiaUnavailable", "retriable": True}, {"Retry-After": "1"}
    )
    status, body, headers = error_answer(RequestRejected("too many", error_type="LimitExceeded"))
    assert (status, headers) == (400, {})
    assert msgspec.to_builtins(body) == {"error": "too many", "error_type": "LimitExceeded", "retriable": False}
    status, body, headers = error_answer(UnknownTopic("t", "no topic t"))
    assert (status, msgspec.to_builtins(body)) == (
        404, {"error": "no topic t", "error_type": "UnknownTopic", "retriable": False, "topic": "t"}
    )


def test_unexpected_exceptions_do_not_leak_their_message():
    doc = msgspec.to_builtins(error_document(KeyError("secret internals"), "req-1"))
    assert doc == {"error": "internal error (request req-1)", "error_type": "InternalError", "retriable": False}


# --- routes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "function", "resource", "params", "allowed"),
    [
        ("/produce", "produce", "/produce", None, ("POST",)),
        ("/consume", "consume", "/consume", None, ("POST",)),
        ("/health", "admin", "/health", None, ("GET",)),
        ("/topics", "admin", "/topics", None, ("GET", "POST")),
        ("/topics/orders/partitions/3", "admin", "/topics/{topic}/partitions/{partition}",
         {"topic": "orders", "partition": "3"}, ("GET",)),
        ("/topics/o/partitions/x/fence", "admin", "/topics/{topic}/partitions/{partition}/fence",
         {"topic": "o", "partition": "x"}, ("POST",)),
        ("/topics/a/b/partitions/0", "admin", "/{proxy+}", {"proxy": "topics/a/b/partitions/0"}, ()),
        ("/", "admin", "/{proxy+}", {"proxy": ""}, ()),
        ("/produce/", "admin", "/{proxy+}", {"proxy": "produce/"}, ()),
    ],
)
def test_routes_match(path, function, resource, params, allowed):
    found = routes.match(path)
    assert (found.function, found.resource, found.path_parameters, found.allowed_methods) == (
        function, resource, params, allowed
    )


def test_every_api_function_has_a_route():
    assert {r.function for r in routes.ROUTES} == set(names.NATIVE_API_FUNCTIONS)


# --- events ---------------------------------------------------------------------------------------


def test_rest_event_shape():
    event = events.rest_event(
        "POST", "/topics/orders/partitions/1/fence", headers=[("X-A", "1"), ("X-A", "2"), ("Host", "h")],
        query="a=1&a=2&b=", body='{"x": 1}', stage="prod", request_id="r-1", source_ip="10.0.0.1",
    )
    assert event["resource"] == "/topics/{topic}/partitions/{partition}/fence"
    assert event["pathParameters"] == {"topic": "orders", "partition": "1"}
    assert event["headers"] == {"X-A": "2", "Host": "h"}
    assert event["multiValueHeaders"] == {"X-A": ["1", "2"], "Host": ["h"]}
    assert event["queryStringParameters"] == {"a": "2", "b": ""}
    assert event["multiValueQueryStringParameters"] == {"a": ["1", "2"], "b": [""]}
    assert (event["body"], event["isBase64Encoded"]) == ('{"x": 1}', False)
    context = event["requestContext"]
    assert (context["requestId"], context["stage"]) == ("r-1", "prod")
    assert context["path"] == "/prod/topics/orders/partitions/1/fence"
    assert context["identity"]["sourceIp"] == "10.0.0.1"


def test_rest_event_bodies():
    assert events.rest_event("GET", "/health")["body"] is None
    assert events.rest_event("POST", "/produce", body=b"")["body"] is None
    assert events.rest_event("POST", "/produce", body="é".encode())["body"] == "é"
    binary = events.rest_event("POST", "/produce", body=b"\xff\x00")
    assert (binary["body"], binary["isBase64Encoded"]) == (base64.b64encode(b"\xff\x00").decode(), True)
    assert events.rest_event("GET", "/health")["headers"] is None


def test_response_parts():
    status, headers, body = events.response_parts(
        {
            "statusCode": 405,
            "multiValueHeaders": {"Allow": ["POST"], "X": ["1", "2"]},
            "headers": {"allow": "GET", "Y": "3"},
            "body": "é",
            "isBase64Encoded": False,
        }
    )
    assert (status, body) == (405, "é".encode())
    assert headers == [("Allow", "POST"), ("X", "1"), ("X", "2"), ("Y", "3")]
    assert events.response_parts({"statusCode": 200, "body": "AAE=", "isBase64Encoded": True})[2] == b"\x00\x01"
    assert events.response_parts({"statusCode": 204, "body": None}) == (204, [], b"")


# --- lazy ---------------------------------------------------------------------------------------------


def test_lazy_creates_once_and_closes_what_it_created():
    created: list[object] = []
    closed: list[object] = []

    def factory() -> object:
        created.append(object())
        return created[-1]

    lazy: Lazy[object] = Lazy(factory, closed.append)
    assert lazy.peek() is None
    first = lazy.get()
    assert lazy.get() is first
    assert len(created) == 1
    lazy.reset()
    assert closed == [first]
    assert lazy.get() is not first


def test_lazy_does_not_cache_a_failed_creation():
    attempts = []

    def factory() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise llog.ConfigurationError("LLOG_X is not set")
        return "ok"

    lazy: Lazy[str] = Lazy(factory)
    with pytest.raises(llog.ConfigurationError):
        lazy.get()
    assert lazy.get() == "ok"


def test_lazy_injected_values_are_not_closed():
    closed: list[str] = []
    lazy: Lazy[str] = Lazy(lambda: "own", closed.append)
    lazy.set("injected")
    assert lazy.get() == "injected"
    lazy.reset()
    assert closed == []
    assert lazy.get() == "own"


def test_lazy_creates_once_under_concurrency():
    created = []
    barrier = threading.Barrier(8)

    def factory() -> int:
        created.append(1)
        return len(created)

    lazy: Lazy[int] = Lazy(factory)

    def worker() -> None:
        barrier.wait()
        lazy.get()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert created == [1]


def test_per_thread_objects():
    per: PerThread[object] = PerThread(object)
    mine = per.get()
    assert per.get() is mine
    other: list[object] = []
    t = threading.Thread(target=lambda: other.append(per.get()))
    t.start()
    t.join(5)
    assert other[0] is not mine


def test_a_resolver_sees_its_own_request_while_another_thread_resolves() -> None:
    """Powertools keeps the current event on its base class; llog serve runs handlers on many threads."""
    from functions.common.http import create_resolver, json_response, resolver_handler
    from functions.common.telemetry import LocalContext, Telemetry
    from tests.functions.conftest import load_event

    telemetry = Telemetry("thread-test")
    first_inside, second_done = threading.Event(), threading.Event()

    def create_app() -> APIGatewayRestResolver:
        app = create_resolver(telemetry)

        @app.post("/produce")
        def produce() -> Response[str]:
            seen = app.current_event.body
            if seen == "first":
                first_inside.set()
                second_done.wait(10)  # the other thread resolves its own request meanwhile
            return json_response(200, {"seen": seen, "seen_last": app.current_event.body})

        return app

    handler = resolver_handler(telemetry, create_app)
    answers: dict[str, dict[str, str]] = {}

    def call(body: str) -> None:
        event = load_event("produce", raw_body=body)
        answers[body] = json.loads(handler(event, LocalContext("thread-test"))["body"])

    first = threading.Thread(target=call, args=("first",))
    first.start()
    assert first_inside.wait(10)
    call("second")
    second_done.set()
    first.join(10)

    assert answers == {"first": {"seen": "first", "seen_last": "first"},
                       "second": {"seen": "second", "seen_last": "second"}}  # fmt: skip
