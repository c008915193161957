"""Fixtures for the Lambda handler tests: environment, events, invocation, S3 object counts.

Handlers read ``LLOG_*`` from the environment on first use and keep their
services for the life of the "execution environment" (the module); every
test gets a fresh environment (a unique ``LLOG_ROOT_PREFIX``, so S3 objects
can be counted per test) and the handlers are reset after it.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest

from devserver.emulator import EmulatorUnavailable, Synthesized, synthesize
from functions.admin import app as admin_app
from functions.common import names
from functions.common.telemetry import LocalContext
from functions.consume import app as consume_app
from functions.produce import app as produce_app
from llog.config import S3Config
from llog.store.s3 import BlobStore
from server.serve import LlogServer
from tests.conftest import BUCKET, OxiaServer, moto_s3_env, set_env, unreachable_oxia_env

EVENTS = Path(__file__).resolve().parents[2] / "events"
HANDLERS: dict[str, ModuleType] = {names.PRODUCE: produce_app, names.CONSUME: consume_app, names.ADMIN: admin_app}
# Each emulated function's cold start (test_emulated.py), reported at the end of the run: (first
# invocation in seconds, init phase in ms).
COLD_STARTS: dict[str, tuple[float, float | None]] = {}


def runtime(find: Callable[[], str]) -> str:
    """The emulator or the runtime; skipped without it, a failure when ``LLOG_REQUIRE_RIE`` (CI) is set."""
    try:
        return find()
    except EmulatorUnavailable as unavailable:
        if os.environ.get("LLOG_REQUIRE_RIE"):
            pytest.fail(f"{unavailable} (LLOG_REQUIRE_RIE is set)")
        pytest.skip(str(unavailable))


@pytest.fixture(scope="session")
def kms_key_arn(s3_config: S3Config) -> str:
    """A KMS key of the session's moto (which serves KMS too), as the stack's key that seals the Kinesis API's access
    keys: ``LLOG_KEYS_KMS_KEY_ID``, with ``AWS_ENDPOINT_URL_KMS`` at moto (``devserver.emulator.local_endpoints``)."""
    kms = boto3.client("kms", endpoint_url=s3_config.endpoint_url, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    arn: str = kms.create_key(Description="llog tests: seals the Kinesis API's access keys")["KeyMetadata"]["Arn"]
    return arn


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The dev stack's template and cdk.out (function code staged), and the layer bundled by ``cdk synth``."""
    return synthesize({"llog:stage": "dev"}, tmp_path_factory.mktemp("cdk.out"), tmp_path_factory.mktemp("layer"))


def load_event(name: str, *, body: Any = None, raw_body: str | None = None, path: str | None = None) -> dict[str, Any]:
    """An event from events/, optionally with another body (a document, or raw text) or path."""
    event: dict[str, Any] = json.loads((EVENTS / f"{name}.json").read_text())
    event = copy.deepcopy(event)
    if body is not None:
        event["body"], event["isBase64Encoded"] = json.dumps(body), False
    if raw_body is not None:
        event["body"], event["isBase64Encoded"] = raw_body, False
    if path is not None:
        event["path"] = path
    event["requestContext"]["requestId"] = str(uuid.uuid4())
    return event


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: Any
    raw: dict[str, Any]


def invoke(function: str, event: dict[str, Any]) -> Answer:
    response = HANDLERS[function].handler(event, LocalContext(f"llog-{function}"))
    headers = {k: v[-1] for k, v in (response.get("multiValueHeaders") or {}).items()}
    text = response["body"]
    if response.get("isBase64Encoded"):
        text = base64.b64decode(text).decode()
    assert headers.get("Content-Type") == "application/json"
    return Answer(response["statusCode"], headers, json.loads(text), response)


@dataclass
class Env:
    root: str
    s3: S3Config

    def objects(self) -> int:
        """S3 objects under this test's root prefix."""
        return sum(1 for _ in BlobStore(self.s3).list(BUCKET, f"{self.root}/"))


@pytest.fixture(autouse=True)
def _reset_handlers() -> Iterator[None]:
    """A new execution environment per test, unless ``llog serve`` (test_openapi_fuzz) owns the handlers."""

    def reset() -> None:
        if LlogServer._active is None:
            for module in HANDLERS.values():
                module.reset()

    reset()
    yield
    reset()


@pytest.fixture
def s3_env(monkeypatch: pytest.MonkeyPatch, s3_config: S3Config, root: str) -> Env:
    set_env(monkeypatch, moto_s3_env(s3_config, root))
    for name in ("LLOG_MAX_REQUEST_BYTES", "LLOG_MAX_PARTITIONS_PER_REQUEST", "LLOG_CONSUME_MAX_WAIT_MS"):
        monkeypatch.delenv(name, raising=False)
    return Env(root, s3_config)


@pytest.fixture
def dead_oxia_env(monkeypatch: pytest.MonkeyPatch, s3_env: Env) -> Env:
    """Oxia at a loopback port nobody listens on: every Oxia call fails fast with OxiaUnavailable."""
    set_env(monkeypatch, unreachable_oxia_env())
    return s3_env


@pytest.fixture
def oxia_env(monkeypatch: pytest.MonkeyPatch, s3_env: Env, oxia_server: OxiaServer) -> Env:
    """The session's real Oxia server (skipped where none can be had)."""
    monkeypatch.setenv("LLOG_OXIA_SERVICE_ADDRESS", oxia_server.address)
    monkeypatch.setenv("LLOG_OXIA_CONNECT_TIMEOUT_MS", "5000")
    monkeypatch.setenv("LLOG_OXIA_REQUEST_TIMEOUT_MS", "3000")
    monkeypatch.setenv("LLOG_OXIA_CLOSE_TIMEOUT_MS", "3000")
    return s3_env


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Each emulated function's cold start (tests/functions/test_emulated.py), when they ran."""
    if not COLD_STARTS:
        return
    terminalreporter.section("Lambda cold starts under aws-lambda-rie (as built by cdk synth)")
    for name, (seconds, init_ms) in sorted(COLD_STARTS.items()):
        init = f"{init_ms:4.0f} ms" if init_ms is not None else "not logged"
        first = f"first invocation {seconds * 1000:4.0f} ms"
        terminalreporter.write_line(f"{name:20} init (start + import) {init}, {first}")
