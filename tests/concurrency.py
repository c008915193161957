"""Histories of concurrent partition operations, checked for linearizability (docs/RELIABILITY.md).

The concurrent harness (``tests/integration/test_concurrent.py``) records every
append, fence, unfence and read it makes, with the monotonic time of its call
and of its answer, in a ``History``. ``check_linearizable`` hands the history to
``llog-lincheck`` (``tests/lincheck``, built by ``make setup``), which checks
each partition's operations against the sequential specification of a log with
Porcupine: every acknowledged append took the next offsets at one instant
between its call and its answer, an append whose outcome is unknown took effect
once or never, an idempotent retry answered as a duplicate names where its
batch is, a fenced partition took no append, and every read returned the log's
records at the offsets it asked for.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINCHECK_UNAVAILABLE = ROOT / ".tools" / "llog-lincheck-unavailable"


def lincheck_binary() -> str:
    """The checker ``make setup`` built; skipped (or, with ``LLOG_REQUIRE_LINCHECK=1``, failed) without it."""
    binary = os.environ.get("LLOG_LINCHECK_BIN") or str(ROOT / ".tools" / "bin" / "llog-lincheck")
    if not os.access(binary, os.X_OK):
        reason = LINCHECK_UNAVAILABLE.read_text().strip() if LINCHECK_UNAVAILABLE.exists() else "run make setup"
        if os.environ.get("LLOG_REQUIRE_LINCHECK"):
            pytest.fail(f"llog-lincheck is required (LLOG_REQUIRE_LINCHECK is set): {reason}")
        pytest.skip(f"no llog-lincheck: {reason}")
    return binary


@dataclass
class Operation:
    partition: str
    client: int
    call: int
    input: dict[str, Any]
    output: dict[str, Any] = field(default_factory=dict)
    returned: int = 0  # 0: never answered (its caller died): it may take effect at any time after its call

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "client": self.client,
            "call": self.call,
            "return": self.returned,
            "input": self.input,
            "output": self.output,
        }


class History:
    """Operations as their callers saw them; safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.operations: list[Operation] = []

    def call(self, partition: str, client: int, **op_input: Any) -> Operation:
        """Record an operation's call (before it reaches storage); answer it with :meth:`answer`."""
        op = Operation(partition, client, time.monotonic_ns(), op_input)
        with self._lock:
            self.operations.append(op)
        return op

    @staticmethod
    def answer(op: Operation, outcome: str, **output: Any) -> None:
        """``outcome``: ok, unknown (may or may not have taken effect), failed (took none), fenced."""
        op.output = {"outcome": outcome, **output}
        op.returned = time.monotonic_ns()

    def counts(self) -> dict[str, int]:
        counted: dict[str, int] = {}
        for op in self.operations:
            name = f"{op.input['kind']} {op.output.get('outcome', 'unanswered')}"
            counted[name] = counted.get(name, 0) + 1
        return dict(sorted(counted.items()))


@dataclass(frozen=True)
class LinearizabilityResult:
    linearizable: bool
    partitions: int
    operations: int
    detail: str


def check_linearizable(
    history: History, *, drawing: Path | None = None, saved: Path | None = None, timeout_s: int = 120
) -> LinearizabilityResult:
    """Run ``llog-lincheck`` on ``history``; ``drawing``: where to draw a history that is not linearizable;
    ``saved``: where to write the history itself (what ``llog-lincheck`` reads on stdin). A check that does not
    end within ``timeout_s`` is inconclusive: not linearizable as far as ``linearizable`` says, ``detail``
    "Unknown" (Porcupine's own word), never a pass."""
    args = [lincheck_binary(), "-timeout", f"{timeout_s}s"]
    if drawing is not None:
        args += ["-html", str(drawing)]
    document = json.dumps({"operations": [op.to_json() for op in history.operations]})
    if saved is not None:
        saved.write_text(document)
    try:
        done = subprocess.run(args, input=document, capture_output=True, text=True, timeout=timeout_s + 30, check=False)
    except subprocess.TimeoutExpired:  # it did not stop at its own timeout: as inconclusive as one that did
        return LinearizabilityResult(False, 0, len(history.operations), "Unknown")
    if done.returncode not in (0, 1, 2) or not done.stdout.strip():
        raise RuntimeError(f"llog-lincheck failed ({done.returncode}): {done.stderr or done.stdout}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return LinearizabilityResult(
        summary["linearizable"], summary["partitions"], summary["operations"], summary.get("result", "")
    )
