"""CORS of the API functions (``LLOG_CORS_ORIGINS``): ``Access-Control-Allow-Origin`` on every answer to an
allowed ``Origin``, errors included, a 204 preflight for ``OPTIONS``, and nothing at all when it is unset."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from functions.common import cors, names
from functions.common.telemetry import LocalContext
from llog.config import cors_origins_from_env
from tests.functions.conftest import HANDLERS, Env, load_event

CONSOLE = "http://127.0.0.1:8080"
OTHER_CONSOLE = "https://console.example.com"
ALLOW_ORIGIN = "Access-Control-Allow-Origin"


def invoke_in_new_environment(function: str, event: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    """``(status, headers, body)`` from a thread of its own.

    A function makes its resolver once per thread and reads ``LLOG_CORS_ORIGINS`` then, as a Lambda
    execution environment reads its configuration once: a new thread sees this test's setting.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        response = pool.submit(HANDLERS[function].handler, event, LocalContext(f"llog-{function}")).result()
    headers = {name: values[-1] for name, values in (response.get("multiValueHeaders") or {}).items()}
    body = json.loads(response["body"]) if response["body"] else None
    return response["statusCode"], headers, body


def with_origin(event: dict[str, Any], origin: str) -> dict[str, Any]:
    event["headers"]["Origin"] = origin
    event["multiValueHeaders"]["Origin"] = [origin]
    return event


@pytest.fixture
def console_origins(monkeypatch: pytest.MonkeyPatch, dead_oxia_env: Env) -> None:
    monkeypatch.setenv(cors.ORIGINS_ENV, f"{CONSOLE},{OTHER_CONSOLE}")


@pytest.fixture
def no_origins(monkeypatch: pytest.MonkeyPatch, dead_oxia_env: Env) -> None:
    monkeypatch.delenv(cors.ORIGINS_ENV, raising=False)


@pytest.mark.usefixtures("console_origins")
@pytest.mark.parametrize("origin", [CONSOLE, OTHER_CONSOLE])
def test_an_allowed_origin_gets_its_own_origin_back(origin: str) -> None:
    status, headers, body = invoke_in_new_environment(names.ADMIN, with_origin(load_event("health_cors"), origin))
    assert status == 200, body
    assert headers[ALLOW_ORIGIN] == origin
    assert "X-Amz-Content-Sha256" in headers["Access-Control-Allow-Headers"].split(",")


@pytest.mark.usefixtures("console_origins")
def test_an_origin_that_is_not_listed_gets_no_cors_headers() -> None:
    event = with_origin(load_event("health_cors"), "http://127.0.0.1:9999")
    status, headers, _ = invoke_in_new_environment(names.ADMIN, event)
    assert status == 200
    assert not [name for name in headers if name.startswith("Access-Control-")]


@pytest.mark.usefixtures("console_origins")
def test_an_error_answer_carries_the_header_too() -> None:
    # The sample sends "origin" in lower case, as HTTP/2 browsers do.
    status, headers, body = invoke_in_new_environment(names.PRODUCE, load_event("produce_invalid_partition_cors"))
    assert status == 400
    assert body["error_type"] == "InvalidRequest"
    assert headers[ALLOW_ORIGIN] == CONSOLE


@pytest.mark.usefixtures("console_origins")
@pytest.mark.parametrize(
    ("event", "function", "status", "error_type"),
    [("unknown_path", names.ADMIN, 404, "NotFound"), ("produce_wrong_method", names.PRODUCE, 405, "MethodNotAllowed")],
)
def test_not_found_and_method_not_allowed_carry_the_header(
    event: str, function: str, status: int, error_type: str
) -> None:
    answer_status, headers, body = invoke_in_new_environment(function, with_origin(load_event(event), CONSOLE))
    assert (answer_status, body["error_type"]) == (status, error_type)
    assert headers[ALLOW_ORIGIN] == CONSOLE


@pytest.mark.usefixtures("console_origins")
def test_a_preflight_is_answered_204_with_the_allowed_headers_and_methods() -> None:
    status, headers, body = invoke_in_new_environment(names.PRODUCE, load_event("produce_preflight"))
    assert (status, body) == (204, None)
    assert headers[ALLOW_ORIGIN] == CONSOLE
    allowed = {h.lower() for h in headers["Access-Control-Allow-Headers"].split(",")}
    assert {h.lower() for h in cors.ALLOW_HEADERS} <= allowed
    assert "POST" in headers["Access-Control-Allow-Methods"].split(",")
    assert headers["Access-Control-Max-Age"] == str(cors.MAX_AGE_S)


@pytest.mark.usefixtures("no_origins")
def test_without_the_setting_there_is_no_cors_at_all() -> None:
    for function, event in ((names.ADMIN, "health_cors"), (names.PRODUCE, "produce_invalid_partition_cors")):
        _, headers, _ = invoke_in_new_environment(function, load_event(event))
        assert not [name for name in headers if name.startswith("Access-Control-")], event
    # An OPTIONS request is one more method the function does not serve, as before.
    status, headers, body = invoke_in_new_environment(names.PRODUCE, load_event("produce_preflight"))
    assert (status, body["error_type"]) == (405, "MethodNotAllowed")
    assert ALLOW_ORIGIN not in headers


def test_the_origins_are_read_from_a_comma_separated_list() -> None:
    assert cors_origins_from_env({}) == ()
    assert cors_origins_from_env({cors.ORIGINS_ENV: " "}) == ()
    assert cors_origins_from_env({cors.ORIGINS_ENV: f"{CONSOLE}, {OTHER_CONSOLE}"}) == (CONSOLE, OTHER_CONSOLE)
    assert cors.environment(()) == {}
    assert cors.environment((CONSOLE, OTHER_CONSOLE)) == {cors.ORIGINS_ENV: f"{CONSOLE},{OTHER_CONSOLE}"}


# --- requests any page can send without a preflight (functions/common/browser.py) -----------------


def with_content_type(event: dict[str, Any], content_type: str | None) -> dict[str, Any]:
    for headers in (event["headers"], event["multiValueHeaders"]):
        for name in [n for n in headers if n.lower() == "content-type"]:
            del headers[name]
    if content_type is not None:
        event["headers"]["Content-Type"] = content_type
        event["multiValueHeaders"]["Content-Type"] = [content_type]
    return event


@pytest.mark.usefixtures("console_origins")
@pytest.mark.parametrize(
    ("event", "function", "content_type", "origin"),
    [
        ("produce", names.PRODUCE, "text/plain", "http://evil.example"),
        ("produce", names.PRODUCE, "text/plain;charset=UTF-8", None),
        ("topic_create", names.ADMIN, "application/x-www-form-urlencoded", None),
        ("group_join", names.CONSUME, None, None),
        ("fence", names.ADMIN, None, "http://evil.example"),
        ("fence", names.ADMIN, "multipart/form-data; boundary=x", CONSOLE),
    ],
)
def test_a_request_any_page_could_send_is_refused_415_before_its_route_runs(
    event: str, function: str, content_type: str | None, origin: str | None
) -> None:
    """The dead Oxia of ``console_origins`` would answer 503: a 415 says the route never ran."""
    request = with_content_type(load_event(event), content_type)
    if origin is not None:
        request = with_origin(request, origin)
    status, headers, body = invoke_in_new_environment(function, request)
    assert (status, body["error_type"]) == (415, "UnsupportedMediaType"), body
    assert "Content-Type: application/json" in body["error"]
    assert headers.get(ALLOW_ORIGIN) == (CONSOLE if origin == CONSOLE else None)


@pytest.mark.usefixtures("console_origins")
@pytest.mark.parametrize(
    ("event", "function", "content_type"),
    [("produce", names.PRODUCE, "Application/JSON; charset=utf-8"), ("fence", names.ADMIN, None)],
)
def test_json_and_a_bodiless_request_without_origin_reach_their_route(
    event: str, function: str, content_type: str | None
) -> None:
    status, _, body = invoke_in_new_environment(function, with_content_type(load_event(event), content_type))
    assert status != 415, body
    assert body.get("error_type") == "OxiaUnavailable" or body["error_count"] > 0  # the route ran, found Oxia dead
