"""``llog serve``'s own settings, read from the environment."""

from __future__ import annotations

import pytest

from functions.common.browser import AllowedHosts
from llog.config import Limits
from llog.errors import ConfigurationError, LlogError
from server.auth import auth_from_env, body_topics
from server.http11 import HttpLimits
from server.serve import HTTP_LIMIT_SETTINGS, access_log_from_env, http_limits_from_env


@pytest.mark.parametrize(
    ("raw", "choice"), [(None, "errors"), ("", "errors"), ("all", "all"), (" OFF ", "off"), ("errors", "errors")]
)
def test_the_access_log_setting(raw: str | None, choice: str) -> None:
    assert access_log_from_env({} if raw is None else {"LLOG_SERVE_ACCESS_LOG": raw}) == choice


def test_an_unknown_access_log_setting_is_refused_with_its_name_and_choices() -> None:
    with pytest.raises(LlogError, match=r"LLOG_SERVE_ACCESS_LOG must be one of errors, all, off, not 'some'"):
        access_log_from_env({"LLOG_SERVE_ACCESS_LOG": "some"})


def test_the_http_limits_default_to_http11s_and_are_read_from_the_environment() -> None:
    assert http_limits_from_env({}, Limits()) == HttpLimits()
    env = {name: "7" for name in HTTP_LIMIT_SETTINGS.values()}
    env["LLOG_SERVE_MAX_CONNECTION_BYTES"] = str(Limits().max_request_bytes)
    limits = http_limits_from_env(env, Limits())
    assert (limits.max_connections, limits.max_buffered_bytes, limits.head_timeout_s, limits.body_timeout_s) == (
        7, 7, 7.0, 7.0
    )
    assert limits.max_connection_bytes == Limits().max_request_bytes
    larger = Limits(max_request_bytes=HttpLimits().max_connection_bytes * 2)  # unset: a request still fits
    assert http_limits_from_env({}, larger).max_connection_bytes == larger.max_request_bytes


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LLOG_SERVE_MAX_CONNECTIONS": "0"}, "LLOG_SERVE_MAX_CONNECTIONS=0 must be at least 1"),
        ({"LLOG_SERVE_HEAD_TIMEOUT_S": "soon"}, "LLOG_SERVE_HEAD_TIMEOUT_S='soon' is not an integer"),
        ({"LLOG_SERVE_MAX_CONNECTION_BYTES": "1000"}, "must be at least LLOG_MAX_REQUEST_BYTES"),
    ],
)
def test_an_invalid_http_limit_stops_the_server_naming_it(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        http_limits_from_env(env, Limits())


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        (None, True),
        ("localhost", True),
        ("LocalHost:8080", True),
        ("localhost.:8080", True),
        ("127.0.0.1:8080", True),
        ("[::1]:8080", True),
        ("[::1]", True),
        ("10.0.3.7:8080", True),
        ("llog.internal:80", True),
        ("evil.example:8080", False),
        ("localhost.evil.example", False),
        ("127.0.0.1.nip.io:8080", False),
        ("[::1", False),
        ("", False),
    ],
)
def test_allowed_hosts_are_local_names_addresses_and_the_configured_names(host: str | None, allowed: bool) -> None:
    assert AllowedHosts.from_env({"LLOG_SERVE_ALLOWED_HOSTS": " llog.internal ,"}).allows(host) is allowed


def test_a_star_allows_any_host() -> None:
    assert AllowedHosts.from_env({"LLOG_SERVE_ALLOWED_HOSTS": "*"}).allows("evil.example")


@pytest.mark.parametrize(("raw", "choice"), [(None, "none"), ("", "none"), (" SigV4 ", "sigv4"), ("none", "none")])
def test_the_auth_setting(raw: str | None, choice: str) -> None:
    assert auth_from_env({} if raw is None else {"LLOG_SERVE_AUTH": raw}) == choice


def test_an_unknown_auth_setting_is_refused_with_its_name_and_choices() -> None:
    with pytest.raises(LlogError, match=r"LLOG_SERVE_AUTH must be one of none, sigv4, not 'iam'"):
        auth_from_env({"LLOG_SERVE_AUTH": "iam"})


def test_the_topics_a_body_names_are_those_the_routes_act_on() -> None:
    body = (b'{"topic": "a", "topics": ["b", 1], "topic_partitions": [{"topic": "c"}, "x"],'
            b' "offsets": [{"topic": "d", "partition": 0}], "other": {"topic": "e"}}')  # fmt: skip
    assert body_topics(body) == {"a", "b", "c", "d"}
    assert body_topics(b"[1]") is None
    assert body_topics(b"{") is None
    assert body_topics(b"") == set()
