"""CORS (``llog:corsOrigins``): none by default; with origins, preflights that need no API key or IAM on every
REST resource and HTTP API path, gateway errors a page can read, and the origins in the API functions' env. The
Kinesis API (``/kinesis``) takes no part: its function answers no cross-origin request."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match, Template

from functions.common import cors, names, routes
from infra.settings import LlogSettings, SettingsError
from infra.stack import LlogStack
from tests.infra.helpers import make_stack, resources
from tests.infra.test_api import methods, native_methods, paths
from tests.infra.test_functions import llog_functions
from tests.infra.test_http_api import routes_by_key

NAG = Match.string_like_regexp("AwsSolutions-.*")
CONSOLE = "http://127.0.0.1:8080"
OTHER = "https://console.example.com"
ALLOW_ORIGIN = "gatewayresponse.header.Access-Control-Allow-Origin"


def settings(**context: Any) -> LlogSettings:
    return LlogSettings.from_context(lambda key: context.get(key.removeprefix("llog:")))


@pytest.fixture(scope="module")
def cors_stack() -> LlogStack:
    return make_stack({"llog:stage": "cors", "llog:corsOrigins": CONSOLE})


@pytest.fixture(scope="module")
def cors_template(cors_stack: LlogStack) -> Template:
    return Template.from_stack(cors_stack)


@pytest.fixture(scope="module")
def cors_key_stack() -> LlogStack:
    return make_stack({"llog:stage": "corskeys", "llog:apiAuth": "api_key", "llog:corsOrigins": [CONSOLE, OTHER]})


@pytest.fixture(scope="module")
def cors_key_template(cors_key_stack: LlogStack) -> Template:
    return Template.from_stack(cors_key_stack)


@pytest.fixture(scope="module")
def cors_http_stack() -> LlogStack:
    return make_stack({"llog:stage": "corshttp", "llog:frontDoor": "http", "llog:corsOrigins": f"{CONSOLE}, {OTHER}"})


@pytest.fixture(scope="module")
def cors_http_template(cors_http_stack: LlogStack) -> Template:
    return Template.from_stack(cors_http_stack)


# --- the setting ---------------------------------------------------------------------------


def test_the_origins_are_a_list_or_a_comma_separated_string_and_empty_by_default() -> None:
    assert settings().cors_origins == ()
    assert settings(corsOrigins="").cors_origins == ()
    assert settings(corsOrigins=[]).cors_origins == ()
    assert settings(corsOrigins=f"{CONSOLE}, {OTHER}").cors_origins == (CONSOLE, OTHER)
    assert settings(corsOrigins=[CONSOLE, "http://[::1]:8080", "http://localhost"]).cors_origins == (
        CONSOLE, "http://[::1]:8080", "http://localhost",
    )  # fmt: skip


@pytest.mark.parametrize(
    "origin",
    [
        "*",
        "http://127.0.0.1:8080/",  # a path, even "/"
        "http://127.0.0.1:8080/console",
        "127.0.0.1:8080",  # no scheme
        "ftp://example.com",
        "http://Example.com",  # a browser sends the host in lower case
        "http://example.com:80",  # ... and without the scheme's default port
        "https://example.com:443",
        "http://example.com:0",
        "http://example.com:65536",
        "http://example.com:08080",
        "http://*.example.com",
        "null",
    ],
)
def test_anything_but_an_origin_is_refused_at_synth(origin: str) -> None:
    with pytest.raises(SettingsError, match=r"llog:corsOrigins: expected a list of origins") as info:
        settings(corsOrigins=[CONSOLE, origin])
    assert "-c llog:corsOrigins" in str(info.value)


def test_duplicates_and_non_strings_are_refused() -> None:
    with pytest.raises(SettingsError, match="llog:corsOrigins: expected a list of distinct origins"):
        settings(corsOrigins=f"{CONSOLE},{CONSOLE}")
    with pytest.raises(SettingsError, match="llog:corsOrigins: expected a list of strings"):
        settings(corsOrigins=8080)


# --- by default: no CORS anywhere ----------------------------------------------------------


def test_by_default_there_is_no_preflight_no_header_and_no_variable(
    dev_template: Template, http_template: Template
) -> None:
    assert not [key for key in methods(dev_template) if key[1] == "OPTIONS"]
    for response in resources(dev_template, "AWS::ApiGateway::GatewayResponse").values():
        assert ALLOW_ORIGIN not in (response["Properties"].get("ResponseParameters") or {})
    for name, fn in llog_functions(dev_template).items():
        assert cors.ORIGINS_ENV not in fn["Environment"]["Variables"], name
    (api,) = resources(http_template, "AWS::ApiGatewayV2::Api").values()
    assert "CorsConfiguration" not in api["Properties"]
    assert not [key for key in routes_by_key(http_template) if key.startswith("OPTIONS ")]


# --- REST API ------------------------------------------------------------------------------


def test_every_resource_has_a_preflight_without_key_or_iam(cors_template: Template) -> None:
    found = native_methods(cors_template)
    assert (routes.KINESIS_PATH, "POST") in methods(cors_template)
    all_paths = set(paths(cors_template).values()) - {routes.KINESIS_PATH} | {"/"}
    assert routes.CATCH_ALL_RESOURCE in all_paths
    preflights = {path: props for (path, method), props in found.items() if method == "OPTIONS"}
    assert set(preflights) == all_paths
    for path, props in preflights.items():
        assert props["AuthorizationType"] == "NONE", path
        assert props["ApiKeyRequired"] is False, path
        assert props["Integration"]["Type"] == "MOCK", path  # answered by the gateway, no function
        (answer,) = props["Integration"]["IntegrationResponses"]
        assert answer["StatusCode"] == "204"
        headers = answer["ResponseParameters"]
        assert headers["method.response.header.Access-Control-Allow-Origin"] == f"'{CONSOLE}'"
        allowed = headers["method.response.header.Access-Control-Allow-Headers"].strip("'").split(",")
        assert {h.lower() for h in allowed} >= {
            "content-type", "x-api-key", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256",
        }  # fmt: skip
        methods_allowed = set(headers["method.response.header.Access-Control-Allow-Methods"].strip("'").split(","))
        assert {route.method for route in routes.ROUTES} <= methods_allowed
    # Everything else keeps its auth: IAM on every method in iam mode.
    for (path, method), props in found.items():
        if method != "OPTIONS":
            assert props["AuthorizationType"] == "AWS_IAM", (path, method)


def test_preflights_need_no_api_key_in_api_key_mode_and_admit_every_origin(cors_key_template: Template) -> None:
    found = native_methods(cors_key_template)
    for (path, method), props in found.items():
        if method == "OPTIONS":
            assert (props["AuthorizationType"], props["ApiKeyRequired"]) == ("NONE", False), path
            # The first origin is the default, the template answers the others with their own.
            (answer,) = props["Integration"]["IntegrationResponses"]
            assert answer["ResponseParameters"]["method.response.header.Access-Control-Allow-Origin"] == f"'{CONSOLE}'"
            assert f'$origin == "{OTHER}"' in answer["ResponseTemplates"]["application/json"]
        else:
            assert props["AuthorizationType"] == "AWS_IAM" or props["ApiKeyRequired"] is True, (path, method)


def test_gateway_errors_carry_the_origin(cors_template: Template, cors_key_template: Template) -> None:
    expected_types = {"DEFAULT_4XX", "DEFAULT_5XX", "THROTTLED", "QUOTA_EXCEEDED", "BAD_REQUEST_BODY"}
    single = resources(cors_template, "AWS::ApiGateway::GatewayResponse").values()
    assert {r["Properties"]["ResponseType"] for r in single} == expected_types
    for response in single:
        assert response["Properties"]["ResponseParameters"][ALLOW_ORIGIN] == f"'{CONSOLE}'"
    # With several origins the gateway cannot choose: it echoes the caller's, and says the answer varies.
    for response in resources(cors_key_template, "AWS::ApiGateway::GatewayResponse").values():
        parameters = response["Properties"]["ResponseParameters"]
        assert parameters[ALLOW_ORIGIN] == "method.request.header.origin"
        assert parameters["gatewayresponse.header.Vary"] == "'Origin'"


def test_the_api_functions_get_the_origins_and_the_others_do_not(cors_template: Template) -> None:
    for name, fn in llog_functions(cors_template).items():
        variables = fn["Environment"]["Variables"]
        if name in names.NATIVE_API_FUNCTIONS:
            assert variables[cors.ORIGINS_ENV] == CONSOLE, name
        else:
            assert cors.ORIGINS_ENV not in variables, name


@pytest.mark.parametrize("stack", ["cors_stack", "cors_key_stack", "cors_http_stack"])
def test_no_unsuppressed_findings_with_cors(stack: str, request: pytest.FixtureRequest) -> None:
    annotations = Annotations.from_stack(request.getfixturevalue(stack))
    assert annotations.find_error("*", NAG) == []
    assert annotations.find_warning("*", NAG) == []


# --- HTTP API ------------------------------------------------------------------------------


def test_the_http_api_has_the_cors_configuration(cors_http_template: Template) -> None:
    (api,) = resources(cors_http_template, "AWS::ApiGatewayV2::Api").values()
    config = api["Properties"]["CorsConfiguration"]
    assert config["AllowOrigins"] == [CONSOLE, OTHER]
    assert {h.lower() for h in config["AllowHeaders"]} == {h.lower() for h in cors.ALLOW_HEADERS}
    assert set(config["AllowMethods"]) == set(cors.ALLOW_METHODS)
    assert config["MaxAge"] == cors.MAX_AGE_S
    assert "AllowCredentials" not in config


def test_the_http_api_answers_preflights_itself_and_every_route_stays_iam(
    cors_http_template: Template, http_template: Template
) -> None:
    """An HTTP API with a CORS configuration answers an OPTIONS that no route matches, without a function or a
    signature; a route with OPTIONS, ANY or $default would take it to a function (unsigned: there was one per path)."""
    found = routes_by_key(cors_http_template)
    assert found
    for key, props in found.items():
        method, path = key.split(" ", 1)
        assert method not in ("OPTIONS", "ANY", "$default"), key
        # The Kinesis API's routes are the function's to authorize (test_http_api.py).
        assert props["AuthorizationType"] == ("NONE" if path == routes.KINESIS_PATH else "AWS_IAM"), key
    assert set(found) == set(routes_by_key(http_template))  # CORS adds no route
    (api,) = resources(cors_http_template, "AWS::ApiGatewayV2::Api").values()
    assert api["Properties"]["CorsConfiguration"]["AllowOrigins"] == [CONSOLE, OTHER]
