"""Cold-start benchmark: the init phase of each Lambda handler, measured in fresh interpreters.

A Lambda execution environment starts by importing the handler module; the
handlers create their clients lazily on the first request, so the import is
the whole init phase that this repository controls. For each function this
starts ``--repeats`` fresh ``python`` processes that import
``functions.<name>.app`` and report the import's wall time. For scale, the
same is measured for the heaviest dependencies alone (boto3, the Oxia client,
Powertools' event handler, the X-Ray SDK that Powertools' Tracer loads).
Medians, all from one run.

    .venv/bin/python bench/cold_start.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from functions.common import names

ROOT = Path(__file__).resolve().parents[1]
DEPENDENCIES = ("boto3", "oxia", "aws_lambda_powertools.event_handler", "aws_xray_sdk.core")
_PROBE = """
import sys, time
start = time.perf_counter()
__import__(sys.argv[1])
print(time.perf_counter() - start)
"""


def import_seconds(module: str, repeats: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    runs = []
    for _ in range(repeats + 1):  # the first run warms the page cache and writes nothing else
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, module], env=env, capture_output=True, text=True, check=True, cwd=ROOT
        )
        runs.append(float(done.stdout.strip()))
    return statistics.median(runs[1:])


def table(repeats: int = 7) -> str:
    lines = ["| module | what | import median ms |", "|---|---|---:|"]
    for name in names.FUNCTIONS:
        module = f"functions.{name}.app"
        lines.append(f"| `{module}` | handler init | {import_seconds(module, repeats) * 1000:.0f} |")
    for module in DEPENDENCIES:
        lines.append(f"| `{module}` | dependency alone | {import_seconds(module, repeats) * 1000:.0f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    print(table(parser.parse_args().repeats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
