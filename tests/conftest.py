"""Session-wide backing services: one real Oxia standalone server and one moto S3 server.

Both listen on free loopback ports with their data in a session temp dir.
The Oxia binary comes from ``make setup`` (``.tools/bin/oxia``), ``$OXIA_BIN``
or ``PATH``; ``LLOG_TEST_OXIA_ADDRESS`` points the suite at a running server
instead (tests that restart the server then skip). When no server can be had,
the tests that need one are skipped with the reason ``make setup`` recorded;
``LLOG_REQUIRE_OXIA=1`` turns that into a failure.

Tests share the bucket and the server, so each works under a root prefix of
its own (the ``root`` fixture); the run fails if any S3 object was left under
the default one (``fail_on_default_root_keys``).
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest
from hypothesis import settings

from devserver.devstack import MotoS3, OxiaProcess, find_oxia_binary, free_port, wait_until_serving
from llog.config import OxiaConfig, S3Config
from llog.format.keys import DEFAULT_ROOT_PREFIX
from llog.protocol.append import LogWriter
from llog.protocol.compaction import Compactor
from llog.protocol.read import LogReader
from llog.protocol.registry import PartitionRegistry
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from llog.store.storage import Storage
from server.serve import LlogServer
from tests.faults import HARNESS
from tests.protocols import CAS

ROOT = Path(__file__).resolve().parents[1]
TOOLS_BIN = ROOT / ".tools" / "bin"
UNAVAILABLE_REASON = ROOT / ".tools" / "oxia-unavailable"
BUCKET = "llog-test"

# `make soak` multiplies the examples of every property and fuzz test (docs/RELIABILITY.md).
FUZZ_SCALE = max(1, int(os.environ.get("LLOG_FUZZ_SCALE", "1")))
# No deadline per example: the tests check behaviour, not speed, and a stall of the shared CI machine
# longer than Hypothesis's default 200 ms would fail an example that is correct.
settings.register_profile("llog", max_examples=100 * FUZZ_SCALE, deadline=None)
settings.load_profile("llog")


def moto_s3_env(s3_config: S3Config, root: str) -> dict[str, str]:
    """The variables that point llog at the session's moto S3, under ``root``."""
    assert s3_config.endpoint_url is not None
    return {
        "LLOG_S3_BUCKET": BUCKET,
        "LLOG_S3_ENDPOINT_URL": s3_config.endpoint_url,
        "LLOG_S3_REGION_NAME": "us-east-1",
        "LLOG_S3_ACCESS_KEY_ID": "testing",
        "LLOG_S3_SECRET_ACCESS_KEY": "testing",
        "LLOG_ROOT_PREFIX": root,
    }


def serve_env(s3_config: S3Config, root: str) -> dict[str, str]:
    """The environment of an ``llog serve`` on the session's moto S3 under ``root``."""
    return {**moto_s3_env(s3_config, root), "LLOG_BATCH_MAX_DELAY_MS": "20"}


def keyed_serve_env(s3_config: S3Config, oxia_address: str, root: str, keys_dir: Path) -> dict[str, str]:
    """``serve_env`` on the session's Oxia, with a sealing key file in ``keys_dir``: the server opens the keys it
    issued (the Kinesis API, ``LLOG_SERVE_AUTH=sigv4``)."""
    return {**serve_env(s3_config, root), "LLOG_OXIA_SERVICE_ADDRESS": oxia_address,
            "LLOG_KEYS_SEALING_KEY_FILE": str(keys_dir / "sealing.key")}  # fmt: skip


def unreachable_oxia_env() -> dict[str, str]:
    """An Oxia address nothing listens on, with short timeouts and no retries."""
    return {
        "LLOG_OXIA_SERVICE_ADDRESS": f"127.0.0.1:{free_port()}",
        "LLOG_OXIA_CONNECT_TIMEOUT_MS": "300",
        "LLOG_OXIA_REQUEST_TIMEOUT_MS": "500",
        "LLOG_OXIA_CLOSE_TIMEOUT_MS": "500",
        "LLOG_OXIA_MAX_RETRIES": "0",
    }


def set_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """Sets every variable of ``env`` for the test."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def start_server(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> LlogServer:
    """``llog serve`` on a free loopback port, configured by ``env``."""
    set_env(monkeypatch, env)
    return LlogServer("127.0.0.1", 0).start()


@contextlib.contextmanager
def serving(env: dict[str, str]) -> Iterator[LlogServer]:
    """``start_server`` for a module or a session: its settings are undone, and the server shut down, at the end."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        server = start_server(monkeypatch, env)
        try:
            yield server
        finally:
            server.shutdown()


def fuzz_examples(n: int) -> int:
    """``n`` examples in ``make test``, ``LLOG_FUZZ_SCALE`` times as many in ``make soak``."""
    return n * FUZZ_SCALE


def fail_on_default_root_keys(keys: list[str], what: str) -> None:
    """The guard that keeps tests apart: none may write under the default root prefix.

    Every test has a root of its own (the ``root`` fixture). Listings under a
    root (shared WAL blobs, manifests, the billing scan, the registry of
    partitions) see everything below it, so what a test left under the shared
    default ``llog`` showed up in other tests (a foreign blob in GC's WAL
    listing, say). Checked once per session: S3 objects when the moto server
    stops (every append PUTs a WAL blob first), registered partitions when the
    Oxia server stops (every created partition is registered first).
    """
    if keys:
        shown = "\n  ".join(keys[:20]) + (f"\n  ... and {len(keys) - 20} more" if len(keys) > 20 else "")
        pytest.fail(
            f"tests wrote {len(keys)} {what} under the default root prefix {DEFAULT_ROOT_PREFIX!r}; every test "
            f"must pass its own root (the `root` fixture, or LLOG_ROOT_PREFIX) to what it builds:\n  {shown}",
            pytrace=False,
        )


def _oxia_unavailable(reason: str) -> NoReturn:
    if os.environ.get("LLOG_REQUIRE_OXIA"):
        pytest.fail(f"an Oxia server is required (LLOG_REQUIRE_OXIA is set): {reason}")
    pytest.skip(f"no Oxia server: {reason}")


@dataclass
class OxiaServer:
    address: str
    process: OxiaProcess | None

    def restart(self, *, kill: bool = False) -> None:
        """Stop the server (SIGTERM, or SIGKILL as a crash would) and start it on the same data."""
        if self.process is None:
            pytest.skip("the Oxia server is external (LLOG_TEST_OXIA_ADDRESS); it cannot be restarted here")
        if kill:
            self.process.kill()
            self.process.start()
        else:
            self.process.restart()
        HARNESS["Oxia restarts after SIGKILL" if kill else "Oxia restarts after SIGTERM"] += 1


@pytest.fixture(scope="session")
def oxia_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OxiaServer]:
    external = os.environ.get("LLOG_TEST_OXIA_ADDRESS")
    if external:
        wait_until_serving(external)
        yield OxiaServer(external, None)
        return
    binary = find_oxia_binary([TOOLS_BIN])
    if binary is None:
        reason = UNAVAILABLE_REASON.read_text().strip() if UNAVAILABLE_REASON.exists() else "run make setup"
        _oxia_unavailable(reason)
        return
    process = OxiaProcess(binary, tmp_path_factory.mktemp("oxia"))
    process.start()
    try:
        yield OxiaServer(process.address, process)
        with OxiaStore(OxiaConfig(process.address, max_retries=2)) as store:
            registered = PartitionRegistry(store).partitions()
        fail_on_default_root_keys([f"{t}/{p}" for t, ps in registered.items() for p in ps], "partition(s)")
    finally:
        process.stop()


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[MotoS3]:
    server = MotoS3()
    server.start()
    server.create_bucket(BUCKET)
    try:
        yield server
        leaked = [o.key for o in BlobStore(server.config(BUCKET)).list(BUCKET, f"{DEFAULT_ROOT_PREFIX}/")]
        fail_on_default_root_keys(leaked, "S3 object(s)")
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3_config(moto_s3: MotoS3) -> S3Config:
    return moto_s3.config(BUCKET)


@pytest.fixture
def oxia_config(oxia_server: OxiaServer) -> OxiaConfig:
    return OxiaConfig(oxia_server.address, request_timeout_ms=3_000, connect_timeout_ms=5_000, close_timeout_ms=3_000)


@pytest.fixture
def oxia_store(oxia_config: OxiaConfig) -> Iterator[OxiaStore]:
    with OxiaStore(oxia_config) as store:
        yield store


@pytest.fixture
def blob_store(s3_config: S3Config) -> BlobStore:
    return BlobStore(s3_config)


@pytest.fixture
def root() -> str:
    """A root prefix of the test's own: listings (topics, WAL blobs, manifests) see only its data."""
    return f"r-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def storage(oxia_store: OxiaStore, blob_store: BlobStore, root: str) -> Storage:
    """The test's stores under its own root, with the wall clock (``dataclasses.replace`` it to move time)."""
    return Storage(oxia_store, blob_store, BUCKET, root)


@pytest.fixture
def writer(storage: Storage) -> LogWriter:
    """A writer whose new partitions use the CAS protocol (``tests/protocols.py``)."""
    return LogWriter(storage, config=CAS)


@pytest.fixture
def reader(storage: Storage) -> LogReader:
    return LogReader(storage)


@pytest.fixture
def compactor(storage: Storage) -> Compactor:
    return Compactor(storage)


@pytest.fixture
def topic() -> str:
    """A fresh topic per test: tests share one Oxia server and never see each other's data."""
    return f"t-{uuid.uuid4().hex[:12]}"


def pytest_sessionfinish(session: pytest.Session) -> None:
    """``make soak``'s tally of crashes, restarts and faults (``tests/faults.py``), when it asks for one."""
    report = os.environ.get("LLOG_HARNESS_REPORT")
    if report:
        Path(report).write_text(json.dumps(dict(sorted(HARNESS.items())), indent=2))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Skips grouped by reason: one line each, so a missing Oxia server is said once, plainly."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    if reasons:
        terminalreporter.section("skipped tests (not run, not passed)")
        for reason, count in sorted(reasons.items(), key=lambda item: -item[1]):
            terminalreporter.write_line(f"{count} skipped: {reason}")


@pytest.fixture
def live_server(
    monkeypatch: pytest.MonkeyPatch, s3_config: S3Config, root: str, oxia_server: OxiaServer
) -> Iterator[LlogServer]:
    """``llog serve`` on the session's Oxia server and moto S3, under the test's root."""
    srv = start_server(monkeypatch, {**serve_env(s3_config, root), "LLOG_OXIA_SERVICE_ADDRESS": oxia_server.address})
    try:
        yield srv
    finally:
        srv.shutdown()
