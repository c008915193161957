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

The interpreter is the Lambda runtime's, CPython 3.13 (``.venv-lambda``, made by
scripts/lambda-venv.sh, whose boto3 stands in for the runtime's) when it exists, else
this one; the table says which. With CPython 3.13 the layer is built as infra/layer.py
builds it (for this machine's architecture, so that it imports here) and each module is
measured twice, alternating: "sources only" (no ``.pyc``: every run compiles ``llog``
and the layer's packages, as a layer without byte code does in Lambda, where ``/opt``
is read-only) and "layer precompiled" (the layer as shipped, with its unchecked-hash
``.pyc``). The function code, a copy of ``functions/``, has no ``.pyc`` in either, as
in Lambda. With another interpreter there is one column: the repository's sources on
the path and that interpreter's own packages.

    .venv/bin/python bench/cold_start.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Layout:
    """Where the function code (Lambda's ``/var/task``) and the layer (``/opt/python``) are, under a column name."""

    name: str
    task_root: Path = ROOT
    layer: Path = ROOT / "llog_layer"
    # The repository keeps llog_client (which llog.service imports) beside the layer's
    # sources; a layer built by infra/layer.py holds both packages.
    client: Path | None = ROOT / "client"


REPOSITORY = Layout("sources (repository)")


def lambda_env(function: str, *, tracing: bool = True, layout: Layout = REPOSITORY) -> dict[str, str]:
    """This process's environment as a Lambda function's: the function code and the llog layer on the path.

    ``LAMBDA_TASK_ROOT`` makes Powertools trace as in Lambda; ``tracing=False`` is a function with
    tracing off (``POWERTOOLS_TRACE_DISABLED``). Nothing is written next to the sources (no ``.pyc``).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAMBDA_", "AWS_LAMBDA_", "POWERTOOLS_"))}
    env.update(
        PYTHONPATH=os.pathsep.join(str(p) for p in (layout.task_root, layout.layer, layout.client) if p is not None),
        PYTHONDONTWRITEBYTECODE="1",
        LAMBDA_TASK_ROOT=str(layout.task_root),
        AWS_LAMBDA_FUNCTION_NAME=f"llog-{function}",
        AWS_LAMBDA_FUNCTION_MEMORY_SIZE="1024",
        POWERTOOLS_SERVICE_NAME=function,
        POWERTOOLS_TRACE_DISABLED="false" if tracing else "true",
    )
    env.setdefault("AWS_REGION", "us-east-1")
    env.setdefault("AWS_DEFAULT_REGION", env["AWS_REGION"])
    return env


@contextlib.contextmanager
def layouts(python: str) -> Iterator[tuple[str, list[Layout]]]:
    """What to measure with ``python`` and how to describe it: the built layer without and with byte code on 3.13."""
    # Imported here: infra.layer loads the CDK (and starts its Node process), which only this needs.
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from infra.layer import Architecture, PipLayerBundler, python_version

    version = python_version(python)
    if version is None:
        yield "the repository's sources", [REPOSITORY]
        return
    architecture: Architecture = "arm64" if platform.machine() in ("aarch64", "arm64") else "x86_64"
    with tempfile.TemporaryDirectory(prefix="llog-cold-start-") as scratch:
        task_root = Path(scratch) / "task"
        shutil.copytree(ROOT / "functions", task_root / "functions", ignore=shutil.ignore_patterns("__pycache__"))
        precompiled = PipLayerBundler(architecture=architecture, compiler=(python, version)).bundle(
            Path(scratch) / "pyc"
        )
        sources = shutil.copytree(
            precompiled, Path(scratch) / "sources" / "python", ignore=shutil.ignore_patterns("__pycache__")
        )
        yield (
            f"the layer as infra/layer.py builds it, for {architecture}",
            [
                Layout("sources only", task_root, sources, client=None),
                Layout("layer precompiled", task_root, precompiled, client=None),
            ],
        )


def import_medians(python: str, module: str, measured: list[Layout], repeats: int) -> list[float]:
    """Median import seconds of ``module`` in each layout, the layouts alternating run by run."""
    function = module.split(".")[1] if module.startswith("functions.") else "dependency"
    runs: list[list[float]] = [[] for _ in measured]
    for _ in range(repeats + 1):  # the first round warms the page cache and is not counted
        for layout, samples in zip(measured, runs, strict=True):
            done = subprocess.run(
                [python, "-c", _PROBE, module], env=lambda_env(function, layout=layout),
                capture_output=True, text=True, check=True, cwd=layout.task_root,
            )  # fmt: skip
            samples.append(float(done.stdout.strip()))
    return [statistics.median(samples[1:]) for samples in runs]


def table(repeats: int = 7) -> str:
    python, label = lambda_python()
    with layouts(python) as (where, measured):
        header = " | ".join(f"{layout.name} import median ms" for layout in measured)
        ratio = len(measured) == 2  # sources only and precompiled: one more column, their ratio
        lines = [
            f"Interpreter: {label}; code: {where}.\n",
            f"| module | what | {header} |" + (" precompiled / sources |" if ratio else ""),
            "|---|---|" + "---:|" * (len(measured) + ratio),
        ]
        rows = [(f"functions.{name}.app", "handler init") for name in names.FUNCTIONS]
        for module, what in rows + [(module, "dependency alone") for module in DEPENDENCIES]:
            medians = import_medians(python, module, measured, repeats)
            cells = " | ".join(f"{seconds * 1000:.0f}" for seconds in medians)
            lines.append(f"| `{module}` | {what} | {cells} |" + (f" {medians[1] / medians[0]:.2f} |" if ratio else ""))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    print(table(parser.parse_args().repeats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
