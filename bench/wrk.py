"""Closed-loop HTTP load from wrk (Debian's package ``wrk``): the clients of ``bench/serve.py``'s produce scenarios.

``clients`` keep-alive connections on one wrk thread (C, epoll) send the same
request back to back for ``seconds``. Why not Python threads: on this 2-core
machine 32 ``http.client`` threads share one GIL and cost about 0.2 ms of CPU
per request, so against a server that answers at once they stop near 4,700
requests/s, and the CPU they take is taken from the server they measure; wrk
reaches about 80,000 against the same server (docs/PERFORMANCE_NOTES.md).

Every answer is checked in wrk's Lua ``response`` hook: its status must be
200 and, when ``expect`` is given, its body must contain that text (for a
produce request, ``"success_count":N,"error_count":0``: every partition's
batch acknowledged). Latencies are wrk's, over every answer, from the request
written to the answer read.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

WRK = "wrk"
FAILED_CHECK = "answer not as expected (status, or body)"
TRANSPORT_ERRORS = ("connect", "read", "write", "timeout")
TIMEOUT_S = 30
DEFAULT_HEADERS = {"Content-Type": "application/json"}

# The request comes from files (no quoting of a body into Lua source); the hook counts the answers that fail the
# check in each thread's own Lua state, and ``done`` adds them up and prints one JSON line.
SCRIPT = """
local function slurp(path) local f = assert(io.open(path, "rb")); local s = f:read("*a"); f:close(); return s end
wrk.method = "POST"
wrk.body = slurp(%(body)s)
%(headers)s
local expect = %(expect)s
failed = 0
local threads = {}
function setup(thread) table.insert(threads, thread) end
function response(status, headers, body)
  if status ~= 200 or (expect ~= nil and not string.find(body, expect, 1, true)) then failed = failed + 1 end
end
function done(summary, latency, requests)
  local f = 0
  for _, t in ipairs(threads) do f = f + t:get("failed") end
  local e = summary.errors
  io.write(string.format('WRK {"requests": %%d, "micros": %%d, "failed": %%d, "connect": %%d, "read": %%d, ' ..
    '"write": %%d, "timeout": %%d, "p50_us": %%d, "p99_us": %%d, "mean_us": %%.1f}\\n', summary.requests,
    summary.duration, f, e.connect, e.read, e.write, e.timeout, latency:percentile(50), latency:percentile(99),
    latency.mean))
end
"""


class WrkUnavailable(RuntimeError):
    """wrk is not installed (``make setup`` installs it as root: ``apt-get install -y wrk``)."""


@dataclass
class WrkResult:
    """What wrk saw: answers (checked or not), errors by kind, the run's length and its latencies (ms)."""

    answers: int
    errors: Counter[str] = field(default_factory=Counter)
    elapsed: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None
    cpu_seconds: float = 0.0  # wrk's own, user and system

    @property
    def ok(self) -> int:
        return self.answers - self.errors[FAILED_CHECK]

    @property
    def requests(self) -> int:
        """Answers and requests that got none (a connection's error)."""
        return self.answers + sum(n for kind, n in self.errors.items() if kind != FAILED_CHECK)


def wrk_binary() -> str | None:
    return shutil.which(WRK)


def _lua_string(text: str) -> str:
    return json.dumps(text)  # a JSON string of ASCII text is a Lua string literal


def script(body_path: Path, headers: Mapping[str, str], expect: str | None) -> str:
    """The Lua script; ``headers`` are sent besides ``Content-Type: application/json``, which one of them named
    in any case replaces (wrk's header table is keyed by case, and a request with two is read either way)."""
    for text in (str(body_path), *headers, *headers.values(), expect or ""):
        if not text.isascii():
            raise ValueError(f"not ASCII: {text!r}")
    sent = {name: value for name, value in DEFAULT_HEADERS.items() if name.lower() not in {h.lower() for h in headers}}
    sent.update(headers)
    lines = "\n".join(f"wrk.headers[{_lua_string(k)}] = {_lua_string(v)}" for k, v in sent.items())
    return SCRIPT % {"body": _lua_string(str(body_path)), "headers": lines,
                     "expect": "nil" if expect is None else _lua_string(expect)}  # fmt: skip


def parse(output: str) -> WrkResult:
    """The result from wrk's output (the ``WRK {...}`` line that ``done`` printed)."""
    line = next((line for line in output.splitlines() if line.startswith("WRK ")), None)
    if line is None:
        raise ValueError(f"wrk printed no result: {output[-500:]!r}")
    doc = json.loads(line[4:])
    errors: Counter[str] = Counter({f"transport: {kind}": doc[kind] for kind in TRANSPORT_ERRORS if doc[kind]})
    if doc["failed"]:
        errors[FAILED_CHECK] = doc["failed"]
    answered = doc["requests"] > 0
    return WrkResult(
        answers=doc["requests"],
        errors=errors,
        elapsed=doc["micros"] / 1e6,
        p50_ms=doc["p50_us"] / 1000 if answered else None,
        p99_ms=doc["p99_us"] / 1000 if answered else None,
        mean_ms=doc["mean_us"] / 1000 if answered else None,
    )


def run(url: str, path: str, body: bytes, *, clients: int, seconds: float, headers: Mapping[str, str] | None = None,
        expect: str | None = None) -> WrkResult:  # fmt: skip
    """``clients`` connections POST ``body`` to ``url + path`` back to back for ``seconds`` (whole seconds)."""
    binary = wrk_binary()
    if binary is None:
        raise WrkUnavailable("wrk is not installed: apt-get install -y wrk (make setup does, as root)")
    with tempfile.TemporaryDirectory(prefix="llog-wrk-") as tmp:
        body_path, script_path = Path(tmp) / "body", Path(tmp) / "load.lua"
        body_path.write_bytes(body)
        script_path.write_text(script(body_path, headers or {}, expect))
        command = [binary, "--threads", "1", "--connections", str(clients), "--duration", f"{max(1, round(seconds))}s",
                   "--timeout", f"{TIMEOUT_S}s", "--script", str(script_path), url.rstrip("/") + path]  # fmt: skip
        before = _children_cpu()
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + TIMEOUT_S + 30, check=False)
        used = _children_cpu() - before  # this process's other children are not waited for while wrk runs
    if done.returncode != 0:
        raise RuntimeError(f"wrk exited with {done.returncode}: {done.stderr.strip()[-500:]}")
    result = parse(done.stdout)
    result.cpu_seconds = used
    return result


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
