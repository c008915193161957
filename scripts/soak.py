"""`make soak`: the reliability harness at length, with a summary (docs/RELIABILITY.md).

Runs the property, fuzz, fault and model tests with ``LLOG_FUZZ_SCALE`` times
their ``make test`` examples and a longer model run, then prints (and writes
to ``.soak/report.json``) what ran: examples fuzzed per test, the model's
operations, crashes per crash point, Oxia restarts and S3 faults injected, and
the pytest outcome. Records lost or invented would fail the model test, so a
passing run means zero of each. Every model run ends with ``llog verify`` of
its partitions (docs/RECOVERY.md), which must find no problem: the report's
``model.partitions_verified`` counts them.

    .venv/bin/python scripts/soak.py [--scale 10] [--model-examples 100] [--model-steps 60] [--concurrent-seconds 420]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / ".soak"
TESTS = (
    "tests/unit/test_codec.py",
    "tests/unit/test_wal.py",
    "tests/unit/test_native_contract.py",
    "tests/glue/test_arrow.py",
    "tests/functions/test_openapi_fuzz.py",
    "tests/functions/test_handlers_without_oxia.py",
    "tests/integration/test_failures_without_oxia.py",
    "tests/integration/test_s3_faults.py",
    "tests/integration/test_crash_recovery.py",
    "tests/integration/test_concurrent_appends.py",
    "tests/integration/test_oxia_restart.py",
    "tests/integration/test_model.py",
    "tests/integration/test_sequential_append.py",
    "tests/integration/test_model_sequential.py",
    "tests/integration/test_model_groups.py",
    "tests/integration/test_model_producers.py",
    "tests/integration/test_concurrent.py",
    "tests/integration/test_concurrent_edges.py",
)
# Hypothesis statistics: "- 200 passing, 0 failing, and 22 invalid test cases" (or "examples").
PASSING = re.compile(r"- (\d+) passing, (\d+) failing")
TEST_HEADER = re.compile(r"^(tests/\S+::\S+):$")
SKIPPED = re.compile(r"^(\d+) skipped: (.*)$", re.MULTILINE)
OUTCOME = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")


def fuzzed_per_test(output: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    test = None
    for line in output.splitlines():
        header = TEST_HEADER.match(line.strip())
        if header:
            test = header.group(1)
        found = PASSING.search(line)
        if found and test is not None:
            counts[test] = counts.get(test, 0) + int(found.group(1)) + int(found.group(2))
    return counts


def outcome(output: str) -> dict[str, int]:
    tail = output.strip().splitlines()[-1] if output.strip() else ""
    return {kind: int(n) for n, kind in OUTCOME.findall(tail)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, default=10, help="multiplier of every fuzz test's examples")
    parser.add_argument("--model-examples", type=int, default=100, help="state machine runs")
    parser.add_argument("--model-steps", type=int, default=60, help="steps per state machine run")
    parser.add_argument("--concurrent-seconds", type=int, default=420,
                        help="how long the concurrent harness runs every action at once, per append protocol "
                             "(and its edges' run: clients, serve kills, deletes)")
    args = parser.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    model_report = OUT / "model.json"
    harness_report = OUT / "harness.json"
    model_report.unlink(missing_ok=True)
    harness_report.unlink(missing_ok=True)
    env = {
        **os.environ,
        "LLOG_FUZZ_SCALE": str(args.scale),
        "LLOG_MODEL_EXAMPLES": str(args.model_examples),
        "LLOG_MODEL_STEPS": str(args.model_steps),
        "LLOG_CONCURRENT_SECONDS": str(args.concurrent_seconds),
        "LLOG_MODEL_REPORT": str(model_report),
        "LLOG_HARNESS_REPORT": str(harness_report),
    }
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "timeout=0",
               "--hypothesis-show-statistics", *TESTS]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    (OUT / "pytest.log").write_text(done.stdout + done.stderr)
    fuzzed = fuzzed_per_test(done.stdout)
    report: dict[str, Any] = {
        "command": " ".join(["make soak", f"(scale {args.scale}, model {args.model_examples}x{args.model_steps}, "
                             f"concurrent {args.concurrent_seconds} s)"]),
        "seconds": round(time.monotonic() - started, 1),
        "pytest_exit_code": done.returncode,
        "tests": outcome(done.stdout),
        "inputs_fuzzed": sum(fuzzed.values()),
        "inputs_fuzzed_per_test": fuzzed,
        "model": json.loads(model_report.read_text()) if model_report.exists() else None,
        # Crashes per crash point, Oxia restarts and S3 faults, over every test of the run (tests/faults.py).
        "harness": json.loads(harness_report.read_text()) if harness_report.exists() else None,
        # Any acknowledged record lost, or record invented, fails a model, crash or restart test.
        "records_lost_or_invented": 0 if done.returncode == 0 else "see the failures in .soak/pytest.log",
        # tests/conftest.py ends the run with one "N skipped: reason" line per reason.
        "skipped": {reason: int(n) for n, reason in SKIPPED.findall(done.stdout)},
    }
    (OUT / "report.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "inputs_fuzzed_per_test"}, indent=2))
    print(f"full output: {(OUT / 'pytest.log').relative_to(ROOT)}; report: {(OUT / 'report.json').relative_to(ROOT)}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
