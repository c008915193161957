"""Local backing services for development and tests: a real Oxia standalone
process and a moto S3 server, both on loopback ports.

Used by the test suite (one of each per session) and by ``make dev``. Not
used in Lambda: moto is a development dependency and is imported lazily.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llog.blob_store import BlobStore
from llog.config import OxiaConfig, S3Config
from llog.errors import ConfigurationError, OxiaUnavailable
from llog.oxia_store import OxiaStore

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_oxia_binary(search_dirs: Sequence[Path] = ()) -> str | None:
    """``$OXIA_BIN``, then ``oxia`` on PATH, then ``oxia`` in ``search_dirs``."""
    explicit = os.environ.get("OXIA_BIN")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    on_path = shutil.which("oxia")
    if on_path:
        return on_path
    for d in search_dirs:
        candidate = d / "oxia"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def wait_until_serving(address: str, timeout_s: float = 30.0) -> None:
    """Block until an Oxia client can read from ``address``."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        store = OxiaStore(
            OxiaConfig(
                address, connect_timeout_ms=2_000, request_timeout_ms=2_000, max_retries=0, close_timeout_ms=1_000
            )
        )
        try:
            store.get("llog-readiness-probe", partition_key="llog-readiness-probe")
            return
        except OxiaUnavailable as exc:
            last_error = exc
            time.sleep(0.2)
        finally:
            store.close()
    raise OxiaUnavailable(f"Oxia at {address} did not become ready in {timeout_s:.0f}s: {last_error}")


class OxiaProcess:
    """``oxia standalone`` with its data in ``data_dir``; survives ``restart()`` with data kept."""

    def __init__(
        self, binary: str, data_dir: Path, *, port: int | None = None, log_path: Path | None = None, fsync: bool = False
    ) -> None:
        self.binary = binary
        self.data_dir = data_dir
        self.port = port or free_port()
        self.log_path = log_path or data_dir / "oxia.log"
        self.fsync = fsync
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            self.binary,
            "standalone",
            "--public-addr",
            self.address,
            # Loopback, any free port: v0.17.1 reads an empty address as "all interfaces".
            "--metrics-addr",
            "127.0.0.1:0",
            "--data-dir",
            str(self.data_dir / "db"),
            "--wal-dir",
            str(self.data_dir / "wal"),
            f"--wal-sync-data={'true' if self.fsync else 'false'}",
        ]
        with open(self.log_path, "ab") as log_file:
            self._proc = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT)
        try:
            wait_until_serving(self.address, timeout_s)
        except OxiaUnavailable:
            self.stop()
            tail = self.log_path.read_text(errors="replace")[-2000:]
            raise OxiaUnavailable(f"oxia standalone did not start on {self.address}; log tail:\n{tail}") from None

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def kill(self) -> None:
        """Stop abruptly (SIGKILL), as a crash would."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(10)
            self._proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


class MotoS3:
    """moto's S3 server on a loopback port."""

    def __init__(self, port: int = 0, region: str = "us-east-1") -> None:
        try:
            from moto.server import ThreadedMotoServer
        except ImportError as exc:  # pragma: no cover - dev dependency
            raise ConfigurationError("moto[server] is needed for the local S3 server (make setup)") from exc
        self.region = region
        self._server: Any = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self._server.stop()

    @property
    def endpoint_url(self) -> str:
        host, port = self._server.get_host_and_port()
        return f"http://{host}:{port}"

    def config(self, bucket: str) -> S3Config:
        return S3Config(
            bucket=bucket,
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            access_key_id="testing",
            secret_access_key="testing",
        )

    def create_bucket(self, bucket: str) -> S3Config:
        config = self.config(bucket)
        BlobStore(config).create_bucket(bucket)
        return config
