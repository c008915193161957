"""The Kinesis API's SDK checks (tests/sdk): programs built by ``make setup`` (scripts/build-sdk-checks.sh) that
drive an ``llog serve`` through the AWS SDKs for Java and JavaScript and exit 0 when every check held.

Without a JDK and Maven, or Node.js and npm, the checks are reported as skipped with the reason the build
recorded; ``LLOG_REQUIRE_SDKS=1`` (set by .ci/run) turns that into a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SDK_DIR = ROOT / "tests" / "sdk"
JAVA_PROJECT = SDK_DIR / "java"
JS_PROJECT = SDK_DIR / "js"
REGION = "us-east-1"
RUN_TIMEOUT_S = 240  # a JVM's start and some sixty calls, each a few Oxia and S3 round trips, on a loaded machine


@dataclass(frozen=True)
class KinesisEndpoint:
    """Where an ``llog serve`` answers the Kinesis API, and a key it issued that may do everything."""

    url: str
    access_key_id: str
    secret_access_key: str
    server_output: Iterable[str]  # its last lines, for a failure's message


def require_sdk(kind: str, tools: Iterable[str], built: Path) -> None:
    """Skip (or fail, under ``LLOG_REQUIRE_SDKS``) unless ``built`` exists and ``tools`` are on PATH."""
    reason_file = ROOT / ".tools" / f"kinesis-sdk-{kind}-unavailable"
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        reason = f"{', '.join(missing)} not installed"
    elif not built.exists():
        reason = reason_file.read_text().strip() if reason_file.exists() else "run make setup"
    else:
        return
    if os.environ.get("LLOG_REQUIRE_SDKS"):
        pytest.fail(f"the {kind} SDK check is required (LLOG_REQUIRE_SDKS is set): {reason}")
    pytest.skip(f"no {kind} SDK check: {reason}")


def stream_name(sdk: str) -> str:
    """A stream of the run's own: the session's server is shared by every check."""
    return f"sdk-{sdk}-{uuid.uuid4().hex[:10]}"


def run_check(command: list[str], endpoint: KinesisEndpoint, stream: str, cwd: Path) -> str:
    """Run one SDK check against ``endpoint``; its output, once it exited 0 and said PASS."""
    arguments = [endpoint.url, REGION, endpoint.access_key_id, endpoint.secret_access_key, stream]
    # The SDKs read credentials and settings from the environment and ~/.aws too (the Java SDK's CBOR_ENABLED
    # chooses its encoding): only the arguments count.
    env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_") and name != "CBOR_ENABLED"}
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    result = subprocess.run(
        [*command, *arguments], cwd=cwd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    output = result.stdout + result.stderr
    failure = (
        f"{' '.join(command)} exited {result.returncode}:\n{output[-6000:]}\n"
        "--- llog serve's last lines:\n" + "\n".join(endpoint.server_output)
    )
    assert result.returncode == 0, failure
    assert "PASS" in result.stdout, failure
    return result.stdout
