"""One URL per availability zone (llog_client/zones.py): the zone map, the zone from ECS or EC2 metadata, the fallback.

The metadata services are real HTTP servers on loopback answering as ECS's task metadata
endpoint (v4) and EC2's IMDSv2 do, token included.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from devserver.devstack import free_port
from llog_client import Producer
from llog_client.errors import LlogClientError
from llog_client.transport import Transport
from llog_client.zones import current_zone, parse_zone_urls, resolve_url
from server.serve import LlogServer
from tests.client.conftest import read_partition

TOKEN = "token-of-this-test"


class MetadataHandler(BaseHTTPRequestHandler):
    """``GET /v4/task`` as ECS answers; IMDSv2's ``PUT /latest/api/token`` and the zone, only with the token."""

    zone = "eu-west-1b"

    def do_GET(self) -> None:
        if self.path == "/v4/task":
            self._answer(200, json.dumps({"Cluster": "c", "AvailabilityZone": self.zone}))
        elif self.path == "/v4-without-zone/task":
            self._answer(200, json.dumps({"Cluster": "c"}))
        elif self.path == "/latest/meta-data/placement/availability-zone":
            if self.headers.get("X-aws-ec2-metadata-token") == TOKEN:
                self._answer(200, self.zone)
            else:
                self._answer(401, "")
        else:
            self._answer(404, "")

    def do_PUT(self) -> None:
        ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        if self.path == "/latest/api/token" and ttl and int(ttl) > 0:
            self._answer(200, TOKEN)
        else:
            self._answer(400, "")

    def _answer(self, status: int, text: str) -> None:
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def metadata() -> Iterator[str]:
    """The base URL of the metadata server."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), MetadataHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_a_zone_map_is_read_in_order_and_a_single_url_is_not_one() -> None:
    assert parse_zone_urls("http://127.0.0.1:8080") is None
    assert parse_zone_urls("https://x.execute-api.eu-west-1.amazonaws.com/prod") is None
    urls = parse_zone_urls("eu-west-1b=http://b:8080/, eu-west-1a=http://a:8080/")
    assert urls == {"eu-west-1b": "http://b:8080/", "eu-west-1a": "http://a:8080/"}
    assert list(urls) == ["eu-west-1b", "eu-west-1a"]


@pytest.mark.parametrize("text", ["a=http://a:8080,b", "a=http://a:8080,b=", "a=http://a:8080,=http://b:8080",
                                  "a=http://a:8080,b=not-a-url", "a=http://a:8080,a=http://b:8080"])  # fmt: skip
def test_a_malformed_zone_map_is_refused_naming_it(text: str) -> None:
    with pytest.raises(LlogClientError, match="zone map") as caught:
        parse_zone_urls(text)
    assert caught.value.error_type == "InvalidUrl"


def test_llog_zone_chooses_without_asking_any_metadata() -> None:
    env = {"LLOG_ZONE": "eu-west-1a", "AWS_EC2_METADATA_SERVICE_ENDPOINT": f"http://127.0.0.1:{free_port()}"}
    assert resolve_url("eu-west-1b=http://b/,eu-west-1a=http://a/", env) == "http://a/"


def test_the_zone_of_an_ecs_task_comes_from_its_task_metadata(metadata: str) -> None:
    env = {"ECS_CONTAINER_METADATA_URI_V4": metadata + "/v4", "AWS_EC2_METADATA_DISABLED": "true"}
    assert current_zone(env) == "eu-west-1b"
    assert resolve_url("eu-west-1a=http://a/,eu-west-1b=http://b/", env) == "http://b/"


def test_the_zone_of_an_ec2_instance_comes_from_imdsv2_with_a_token(metadata: str) -> None:
    env = {"AWS_EC2_METADATA_SERVICE_ENDPOINT": metadata}
    assert current_zone(env) == "eu-west-1b"
    assert current_zone({**env, "AWS_EC2_METADATA_DISABLED": "true"}) is None


def test_without_a_zone_in_the_task_metadata_the_instance_metadata_is_asked(metadata: str) -> None:
    env = {"ECS_CONTAINER_METADATA_URI_V4": f"{metadata}/v4-without-zone",
           "AWS_EC2_METADATA_SERVICE_ENDPOINT": metadata}  # fmt: skip
    assert current_zone(env) == "eu-west-1b"


def test_a_lambda_function_does_not_wait_for_instance_metadata_it_does_not_have(metadata: str) -> None:
    env = {"AWS_LAMBDA_FUNCTION_NAME": "f", "AWS_EC2_METADATA_SERVICE_ENDPOINT": metadata}
    assert current_zone(env) is None
    assert current_zone({"AWS_EC2_METADATA_SERVICE_ENDPOINT": metadata}) == "eu-west-1b"  # the same, not in Lambda


def test_a_map_of_one_zone_needs_no_zone(metadata: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="llog_client"):
        assert resolve_url("eu-west-1a=http://a/", {"AWS_EC2_METADATA_SERVICE_ENDPOINT": metadata}) == "http://a/"
    assert caplog.text == ""  # the metadata (eu-west-1b, not in the map) was not asked


def test_an_unknown_zone_uses_the_first_zones_url_and_warns(metadata: str, caplog: pytest.LogCaptureFixture) -> None:
    nothing_listens = f"http://127.0.0.1:{free_port()}"
    assert current_zone({"AWS_EC2_METADATA_SERVICE_ENDPOINT": nothing_listens}) is None  # a laptop, a Lambda
    with caplog.at_level(logging.WARNING, logger="llog_client"):
        url = resolve_url("eu-west-1c=http://c/,eu-west-1a=http://a/", {"AWS_EC2_METADATA_SERVICE_ENDPOINT": metadata})
    assert url == "http://c/"  # eu-west-1b has no URL here
    assert "zone eu-west-1b has no URL in the zone map; using eu-west-1c's URL http://c/" in caplog.text


def test_a_producer_given_a_zone_map_talks_to_its_own_zones_server(
    server: LlogServer, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other zone's URL leads nowhere: the records arrive only because the producer chose its own zone's."""
    monkeypatch.setenv("LLOG_ZONE", "eu-west-1b")
    zone_map = f"eu-west-1a=http://127.0.0.1:{free_port()},eu-west-1b={server.url}"
    assert Transport(zone_map).url == server.url
    monkeypatch.setenv("LLOG_URL", zone_map)
    with Producer() as producer:
        producer.send(topic, b"near").result(30)
    assert [r["value"] for r in read_partition(server, topic, 0)] == ["near"]
