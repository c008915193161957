"""``llog serve`` processes for tests: started on a port (a free one by default), killed, started again on it.

``serve_process`` runs one for the length of a ``with`` block (its stdout and stderr left to the test);
``ServeTask`` is one a test kills (SIGKILL, as a crashed task) and starts again on the same port, so that
clients pointed at its URL see connection errors and lost answers, then the new process.

Run as ``python -m tests.serve_tasks --port N``, this module is ``llog serve`` with module constants set
from ``$LLOG_TEST_CONSTANTS`` (JSON, ``{"llog.service.produce:TOPIC_CACHE_TTL_MS": 300}``) before it
starts: what a test's ``monkeypatch`` does in its own process, for a server in another one.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONSTANTS_ENV = "LLOG_TEST_CONSTANTS"
START_S = 60  # a loaded machine takes seconds to import and start a process


def start_serve(
    env: dict[str, str], port: int = 0, module: str = "server.serve"
) -> tuple[subprocess.Popen[str], str]:
    """``python -m <module> --port <port>`` with ``env`` (stdout and stderr piped), and its URL once it listens."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    url = None
    deadline = time.monotonic() + START_S
    while url is None and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if "listening on" in line:
            url = line.split("listening on ", 1)[1].split()[0]
        elif not line and proc.poll() is not None:
            break
    if url is None:
        proc.kill()
        _, err = proc.communicate(timeout=30)
        raise ServeDidNotStart(f"llog serve did not start (exit code {proc.returncode}): {err[-2000:]}")
    return proc, url


class ServeDidNotStart(AssertionError):
    pass


def port_outside_the_ephemeral_range() -> int:
    """A free port below Linux's ephemeral range (32768-60999): no client's connection takes it while its server is
    down between a kill and a restart (a port the kernel picked for a server could be, and the restart's bind fail)."""
    for _ in range(100):
        port = random.randrange(20_000, 32_000)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise AssertionError("no free port in 20000-32000")


@contextlib.contextmanager
def serve_process(env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``llog serve --port 0`` with ``env`` (stdout and stderr piped) and its URL once it listens;
    killed at the end if still running."""
    proc, url = start_serve(env)
    try:
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


class ServeTask:
    """An ``llog serve`` process on a port of its own, which the test may kill and start again there.

    Its output is read on threads of its own (the last lines are kept for a failure's message), so that a
    chatty server never blocks on a full pipe.
    """

    def __init__(self, env: dict[str, str], module: str = "server.serve") -> None:
        self.env = env
        self.module = module
        self.port = 0  # chosen at the first start
        self.url = ""
        self.starts = 0
        self.output: deque[str] = deque(maxlen=50)
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        """Start the process on its port (a free one outside the ephemeral range, the first time). The port may
        still be taken a moment after a kill (by a test's own probe, say): the start is tried again meanwhile."""
        self.port = self.port or port_outside_the_ephemeral_range()
        deadline = time.monotonic() + START_S
        while True:
            try:
                proc, url = start_serve(self.env, self.port, self.module)
                break
            except ServeDidNotStart as exc:
                if "address already in use" not in str(exc).lower() or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        self._proc, self.url, self.starts = proc, url, self.starts + 1
        for stream in (proc.stdout, proc.stderr):
            threading.Thread(target=self._drain, args=(stream,), daemon=True, name="serve output").start()

    def _drain(self, stream: Any) -> None:
        for line in stream:
            self.output.append(line.rstrip())

    def kill(self) -> None:
        """SIGKILL: requests under way get no answer; the batcher's unflushed appends are lost."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(30)

    def restart(self) -> None:
        self.kill()
        self.start()

    def __enter__(self) -> ServeTask:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.kill()


def post_json(url: str, doc: Any, timeout_s: float = 30) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=json.dumps(doc).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _set_constants(constants: dict[str, Any]) -> None:
    for where, value in constants.items():
        module, name = where.split(":")
        target = importlib.import_module(module)
        if not hasattr(target, name):
            raise SystemExit(f"{CONSTANTS_ENV}: {module} has no {name}")
        setattr(target, name, value)


if __name__ == "__main__":
    _set_constants(json.loads(os.environ.get(CONSTANTS_ENV) or "{}"))
    from server.serve import main

    sys.exit(main())
