"""``llog serve`` on the session's Oxia server and moto S3, for the client's tests."""

from __future__ import annotations

import json
import urllib.request
from concurrent.futures import Future
from typing import Any

import pytest

from devserver.serve import LlogServer
from llog_client.producer import RecordMetadata


def call(server: LlogServer, method: str, path: str, body: Any = None) -> Any:
    """One request to ``server`` with urllib (not the client under test); the decoded JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path, data=data, method=method,
                                     headers={"content-type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def read_partition(server: LlogServer, topic: str, partition: int) -> list[dict[str, Any]]:
    """Every record of the partition, read with ``POST /consume``."""
    records: list[dict[str, Any]] = []
    offset = 1
    while True:
        body = {"topic_partitions": [{"topic": topic, "partition": partition, "fetch_offset": offset}]}
        (result,) = call(server, "POST", "/consume", body)["results"]
        if result.get("error_type") == "PartitionNotInitialized":
            return records
        assert result["ok"], result
        if not result["records"]:
            return records
        records += result["records"]
        offset = result["next_fetch_offset"]


def results(futures: list[Future[RecordMetadata]]) -> list[RecordMetadata]:
    return [future.result(timeout=0) for future in futures]


@pytest.fixture
def server(live_server: LlogServer) -> LlogServer:
    """The client's tests call it ``server``: ``llog serve`` (tests/conftest.py's ``live_server``)."""
    return live_server
