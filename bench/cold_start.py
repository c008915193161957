"""Cold-start benchmark: the init phase of each Lambda handler, measured in fresh interpreters.

A Lambda execution environment starts by importing the handler module (the
init phase); the handlers import their storage clients' modules and create
the clients on the first request, and Powertools' Tracer is created (and the
X-Ray SDK imported) by the first invocation too. For each function this starts
``--repeats`` fresh processes that import ``functions.<name>.app`` in a
Lambda-like environment (``LAMBDA_TASK_ROOT`` set, so Powertools decides on
tracing as it does in Lambda) and report the import's wall time. For scale, the
same is measured for the heaviest dependencies alone (botocore's session, which
the S3 and SQS clients load; the Oxia client; Powertools' event handler; the
X-Ray SDK that the Tracer loads). Medians, all from one run.
bench/lambda_warm.py measures the first invocation (the rest of a cold start).

The interpreter is the Lambda runtime's, CPython 3.13, with exactly the layer's
packages (``.venv-lambda``, made by scripts/lambda-venv.sh) when it exists,
else this one; the table says which. The repository's modules are compiled
from source in every run (no ``.pyc`` is written), as in Lambda, whose layer
and function code carry none; the venv's packages have their ``.pyc``.

    .venv/bin/python bench/cold_start.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make `functions` importable
    sys.path.insert(0, str(ROOT))

from functions.common import names  # noqa: E402

LAMBDA_VENV_PYTHON = ROOT / ".venv-lambda" / "bin" / "python"
DEPENDENCIES = ("botocore.session", "oxia", "aws_lambda_powertools.event_handler", "aws_xray_sdk.core")
_PROBE = """
import sys, time
start = time.perf_counter()
__import__(sys.argv[1])
print(time.perf_counter() - start)
"""
_VERSION = "import platform; print(platform.python_implementation(), platform.python_version())"


def lambda_python() -> tuple[str, str]:
    """The interpreter to measure with and how to name it: ``.venv-lambda``'s CPython 3.13, else this one."""
    if LAMBDA_VENV_PYTHON.exists():
        version = subprocess.run([LAMBDA_VENV_PYTHON, "-c", _VERSION], capture_output=True, text=True, check=True)
        return str(LAMBDA_VENV_PYTHON), f"{version.stdout.strip()} (.venv-lambda: the layer's packages)"
    return sys.executable, f"{platform.python_implementation()} {platform.python_version()} (this interpreter)"


def lambda_env(function: str, *, tracing: bool = True) -> dict[str, str]:
    """This process's environment as a Lambda function's: the repository and the llog layer on the path.

    ``LAMBDA_TASK_ROOT`` makes Powertools trace as in Lambda; ``tracing=False`` is a function with
    tracing off (``POWERTOOLS_TRACE_DISABLED``). Nothing is written next to the sources (no ``.pyc``).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAMBDA_", "AWS_LAMBDA_", "POWERTOOLS_"))}
    env.update(
        PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'llog_layer'}",
        PYTHONDONTWRITEBYTECODE="1",
        LAMBDA_TASK_ROOT=str(ROOT),
        AWS_LAMBDA_FUNCTION_NAME=f"llog-{function}",
        AWS_LAMBDA_FUNCTION_MEMORY_SIZE="1024",
        POWERTOOLS_SERVICE_NAME=function,
        POWERTOOLS_TRACE_DISABLED="false" if tracing else "true",
    )
    env.setdefault("AWS_REGION", "us-east-1")
    env.setdefault("AWS_DEFAULT_REGION", env["AWS_REGION"])
    return env


def import_seconds(python: str, module: str, repeats: int) -> float:
    env = lambda_env(module.split(".")[1] if module.startswith("functions.") else "dependency")
    runs = []
    for _ in range(repeats + 1):  # the first run warms the page cache and is not counted
        done = subprocess.run(
            [python, "-c", _PROBE, module], env=env, capture_output=True, text=True, check=True, cwd=ROOT
        )
        runs.append(float(done.stdout.strip()))
    return statistics.median(runs[1:])


def table(repeats: int = 7) -> str:
    python, label = lambda_python()
    lines = [f"Interpreter: {label}.\n", "| module | what | import median ms |", "|---|---|---:|"]
    for name in names.FUNCTIONS:
        module = f"functions.{name}.app"
        lines.append(f"| `{module}` | handler init | {import_seconds(python, module, repeats) * 1000:.0f} |")
    for module in DEPENDENCIES:
        lines.append(f"| `{module}` | dependency alone | {import_seconds(python, module, repeats) * 1000:.0f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    print(table(parser.parse_args().repeats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
