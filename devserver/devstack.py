"""Local backing services for development and tests, all on loopback ports:
a real Oxia standalone process, a moto S3 server (in memory) and VersityGW
(a real S3-compatible server keeping objects on disk, its POSIX backend).

Used by the test suite (Oxia and moto once per session, VersityGW for the
S3-compatibility tests) and by ``make dev`` (Oxia and VersityGW, both with
their data on disk). Not used in Lambda: moto is a development dependency
and is imported lazily.
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

import boto3
import botocore.config
import botocore.exceptions

from llog.config import OxiaConfig, S3Config
from llog.errors import BlobStoreUnavailable, ConfigurationError, OxiaUnavailable
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore

# versitygw reads its root credentials from the first of these that is set: only ours may be.
_VGW_CREDENTIAL_VARS = frozenset({"ROOT_ACCESS_KEY_ID", "ROOT_ACCESS_KEY", "ROOT_SECRET_ACCESS_KEY", "ROOT_SECRET_KEY"})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _find_binary(name: str, env_var: str, search_dirs: Sequence[Path]) -> str | None:
    explicit = os.environ.get(env_var)
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    on_path = shutil.which(name)
    if on_path:
        return on_path
    for d in search_dirs:
        candidate = d / name
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def find_oxia_binary(search_dirs: Sequence[Path] = ()) -> str | None:
    """``$OXIA_BIN``, then ``oxia`` on PATH, then ``oxia`` in ``search_dirs``."""
    return _find_binary("oxia", "OXIA_BIN", search_dirs)


def find_versitygw_binary(search_dirs: Sequence[Path] = ()) -> str | None:
    """``$VERSITYGW_BIN``, then ``versitygw`` on PATH, then ``versitygw`` in ``search_dirs``."""
    return _find_binary("versitygw", "VERSITYGW_BIN", search_dirs)


def _stop_process(proc: subprocess.Popen[bytes] | None, timeout_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout_s``."""
    if proc is None:
        return
    proc.terminate()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout_s)


def _log_tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


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
        self,
        binary: str,
        data_dir: Path,
        *,
        port: int | None = None,
        log_path: Path | None = None,
        fsync: bool = False,
        new_session: bool = False,
        shards: int = 1,
    ) -> None:
        """``new_session``: run in a session of its own, so that a Ctrl-C in the
        terminal reaches only the parent, which then stops it in order. ``shards``:
        of the default namespace (a test spreads keys over several)."""
        self.binary = binary
        self.data_dir = data_dir
        self.port = port or free_port()
        self.log_path = log_path or data_dir / "oxia.log"
        self.fsync = fsync
        self.new_session = new_session
        self.shards = shards
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
            f"--shards={self.shards}",
        ]
        with open(self.log_path, "ab") as log_file:
            self._proc = subprocess.Popen(
                args, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=self.new_session
            )
        try:
            wait_until_serving(self.address, timeout_s)
        except OxiaUnavailable:
            self.stop()
            tail = _log_tail(self.log_path)
            raise OxiaUnavailable(f"oxia standalone did not start on {self.address}; log tail:\n{tail}") from None

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        _stop_process(proc)

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


# VersityGW's POSIX backend root under its data directory (VersityGW.root_dir): one directory per bucket.
VERSITYGW_BUCKETS = "buckets"


class VersityGW:
    """VersityGW (``versitygw posix``): a real S3-compatible server keeping objects on disk.

    Layout of ``data_dir``: ``buckets/`` is the POSIX backend's root (bucket
    ``b``'s object ``k/e/y`` is the file ``buckets/b/k/e/y``, user metadata in
    extended attributes), ``versitygw.log`` its output. Objects survive
    ``stop()`` and ``start()``; the server does not fsync them (docs/S3_COMPATIBILITY.md).
    """

    def __init__(
        self,
        binary: str,
        data_dir: Path,
        *,
        port: int | None = None,
        region: str = "us-east-1",
        access_key_id: str = "testing",
        secret_access_key: str = "testing",
        new_session: bool = False,
    ) -> None:
        self.binary = binary
        self.data_dir = data_dir
        self.port = port or free_port()
        self.region = region
        self.access_key_id = access_key_id
        self.secret_access_key = secret_access_key
        self.new_session = new_session
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def root_dir(self) -> Path:
        """The POSIX backend's root: one directory per bucket."""
        return self.data_dir / VERSITYGW_BUCKETS

    @property
    def log_path(self) -> Path:
        return self.data_dir / "versitygw.log"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.address}"

    def start(self, timeout_s: float = 30.0) -> None:
        self.root_dir.mkdir(parents=True, exist_ok=True)
        # Credentials through the environment (not argv, which `ps` shows); no stray VGW_* setting applies.
        env = {k: v for k, v in os.environ.items() if not k.startswith("VGW_") and k not in _VGW_CREDENTIAL_VARS}
        env.update(ROOT_ACCESS_KEY=self.access_key_id, ROOT_SECRET_KEY=self.secret_access_key)
        args = [
            self.binary,
            "--port",
            self.address,
            "--region",
            self.region,
            "--quiet",  # no request log on stdout
            # As S3 does; without it versitygw closes the connection after every response, so each S3 call
            # paid a new TCP connection (more latency and client CPU than S3 costs).
            "--keep-alive",
            "posix",
            str(self.root_dir),
        ]
        with open(self.log_path, "ab") as log_file:
            self._proc = subprocess.Popen(
                args, stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=self.new_session
            )
        deadline = time.monotonic() + timeout_s
        last_error: Exception | None = None
        client = self._client()
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                last_error = RuntimeError(f"versitygw exited with status {self._proc.returncode}")
                break
            try:
                client.list_buckets()  # signed: the credentials work too
                return
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
                last_error = exc  # not listening yet, or refusing
                time.sleep(0.1)
        self.stop()
        raise BlobStoreUnavailable(
            f"versitygw did not start on {self.address}: {last_error}; log tail:\n{_log_tail(self.log_path)}"
        )

    def _client(self) -> Any:
        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            config=botocore.config.Config(
                retries={"max_attempts": 1}, connect_timeout=1, read_timeout=2, s3={"addressing_style": "path"}
            ),
        )

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        _stop_process(proc)

    def restart(self) -> None:
        self.stop()
        self.start()

    def config(self, bucket: str) -> S3Config:
        return S3Config(
            bucket=bucket,
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            access_key_id=self.access_key_id,
            secret_access_key=self.secret_access_key,
        )

    def create_bucket(self, bucket: str) -> S3Config:
        """Create ``bucket`` unless it exists (VersityGW answers BucketAlreadyOwnedByYou, which is fine)."""
        config = self.config(bucket)
        BlobStore(config).create_bucket(bucket)
        return config
