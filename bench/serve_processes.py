"""The servers of the HTTP benchmark (bench/serve.py): subprocesses on loopback ports, ready once probed, and
what ``/proc`` says of a process."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.serve_settings import BUCKET, START_TIMEOUT_S, TIMEOUT_S
from bench.stack import stack_env
from devserver.devstack import free_port
from llog.config import S3Config

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ProcessStat:
    """What ``/proc/<pid>/stat`` says of a process."""

    name: str
    kernel_thread: bool
    cpu_seconds: float  # user + system
    started: int  # clock ticks after boot: with the pid, names the process across pid reuse


def process_stat(directory: Path) -> ProcessStat | None:
    """``directory/stat`` read (None once the process is gone); fields after the name counted from its state."""
    try:
        stat = (directory / "stat").read_text()
    except OSError:
        return None
    rest = stat[stat.rindex(")") + 2 :].split()
    return ProcessStat(name=stat[stat.index("(") + 1 : stat.rindex(")")],
                       kernel_thread=bool(int(rest[6]) & 0x00200000),  # flags & PF_KTHREAD
                       cpu_seconds=(int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK"),  # utime + stime
                       started=int(rest[19]))  # fmt: skip


class Service:
    """A server subprocess on a loopback port, its output in ``log_path``; ready once ``probe`` succeeds."""

    def __init__(self, name: str, args: Sequence[str], env: Mapping[str, str], log_path: Path, port: int,
                 probe: Callable[[Service], object]) -> None:  # fmt: skip
        self.name, self.args, self.env, self.log_path, self.port, self.probe = name, args, env, log_path, port, probe
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def launch(self) -> None:
        with open(self.log_path, "ab") as log_file:
            self._proc = subprocess.Popen(list(self.args), cwd=ROOT, env=dict(self.env), stdout=log_file,
                                          stderr=subprocess.STDOUT)  # fmt: skip

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self._proc is None or self._proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited while starting; log tail:\n{self.log_tail()}")
            try:
                self.probe(self)
                return
            except (OSError, http.client.HTTPException, ValueError) as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} not ready in {START_TIMEOUT_S:.0f} s: {exc}; log tail:\n"
                                       f"{self.log_tail()}") from exc  # fmt: skip
                time.sleep(0.2)

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def cpu_seconds(self) -> float:
        """User plus system CPU the server process has used so far (Linux ``/proc``; 0 elsewhere)."""
        stat = None if self.pid is None else process_stat(Path(f"/proc/{self.pid}"))
        return 0.0 if stat is None else stat.cpu_seconds

    def metrics(self) -> dict[str, Any]:
        """``GET /metrics`` (llog serve)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=TIMEOUT_S) as response:
            doc: dict[str, Any] = json.loads(response.read())
        return doc


def health(service: Service) -> None:
    with urllib.request.urlopen(service.url + "/health", timeout=2) as response:
        response.read()


def llog_serve(name: str, address: str, s3: S3Config, tmp: Path, settings: Mapping[str, str] | None = None) -> Service:
    """``python -m server.serve`` against the stack: the LLOG_* settings of scripts/dev.py and ``settings``,
    nothing inherited."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLOG_")}
    env.update(stack_env(address, s3, BUCKET))
    env.update(settings or {})
    port = free_port()
    args = [sys.executable, "-m", "server.serve", "--port", str(port)]
    return Service(name, args, env, tmp / f"{name}.log", port, health)


@contextmanager
def running(services: Sequence[Service]) -> Iterator[None]:
    """Start them side by side, wait until each is ready; stop them all at the end."""
    try:
        for s in services:
            s.launch()
        for s in services:
            s.wait_ready()
        yield
    finally:
        for s in services:
            s.stop()
