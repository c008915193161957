"""Fuzz every operation of functions/openapi.json against ``llog serve`` (the Lambda handlers) with Schemathesis.

Schemathesis generates valid and invalid requests from the document; for each
response: never a 5xx other than a retriable 503, status codes, content types
and bodies as documented, and a rejected request (4xx) writes nothing to S3.
Oxia is unreachable here, so valid produce requests end in per-partition
``OxiaUnavailable`` (409) and admin reads in 503 - never 500. Bounded:
``MAX_EXAMPLES`` per operation and mode.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings

from functions.produce import app as produce_app
from llog.config import S3Config
from llog.store.s3 import BlobStore
from server.serve import LlogServer
from tests.conftest import BUCKET, fuzz_examples, serve_env, start_server, unreachable_oxia_env

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is not installed (requirements-dev.txt)")
core_checks = pytest.importorskip("schemathesis.checks")
openapi_checks = pytest.importorskip("schemathesis.specs.openapi.checks")

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "functions" / "openapi.json"
MAX_EXAMPLES = fuzz_examples(40)

schema = schemathesis.openapi.from_path(DOCUMENT)


@pytest.fixture(scope="module")
def s3(s3_config: S3Config) -> BlobStore:
    return BlobStore(s3_config)


@pytest.fixture(scope="module")
def fuzz_server(s3_config: S3Config) -> Iterator[tuple[LlogServer, str]]:
    root = f"fuzz-{uuid.uuid4().hex[:12]}"
    env = {
        **serve_env(s3_config, root),
        **unreachable_oxia_env(),
        "LLOG_OXIA_CONNECT_TIMEOUT_MS": "100",
        "LLOG_OXIA_REQUEST_TIMEOUT_MS": "300",
        "LLOG_OXIA_CLOSE_TIMEOUT_MS": "300",
        "LLOG_BATCH_MAX_DELAY_MS": "0",
        # Keep generated long-polls short: max_wait_ms above this is a documented 400.
        "LLOG_CONSUME_MAX_WAIT_MS": "20000",
    }
    with pytest.MonkeyPatch.context() as mp:
        server = start_server(mp, env)
        try:
            yield server, root
        finally:
            server.shutdown()


def objects_under(s3: BlobStore, root: str) -> int:
    return sum(1 for _ in s3.list(BUCKET, f"{root}/"))


def retriable_503_is_not_a_server_error(response: Any) -> bool:
    if response.status_code != 503:
        return False
    body = json.loads(response.content)
    return bool(body.get("retriable") or all(r.get("retriable") for r in body.get("results", [])))


@schema.parametrize()  # type: ignore[untyped-decorator]
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_api(case: Any, fuzz_server: tuple[LlogServer, str], s3: BlobStore) -> None:
    server, root = fuzz_server
    assert produce_app._service.peek() is server.services.produce
    response = case.call(base_url=server.url, timeout=60)

    checks = [
        openapi_checks.status_code_conformance,
        openapi_checks.content_type_conformance,
        openapi_checks.response_schema_conformance,
    ]
    if not retriable_503_is_not_a_server_error(response):
        checks.append(core_checks.not_a_server_error)
    case.validate_response(response, checks=checks)
    assert response.status_code != 500, response.text
    if 400 <= response.status_code < 500:
        assert objects_under(s3, root) == 0, f"a rejected request wrote to S3: {case.method} {case.path}"
