"""The llog functions as Lambda runs them: AWS's Runtime Interface Emulator, awslambdaric, CDK's artifacts.

What runs (tests/functions/test_emulated.py):

* ``aws-lambda-rie`` (``make setup``: scripts/install-rie.sh) in front of ``python -m awslambdaric <handler>``,
  the runtime interface client the python3.13 managed runtime is built on, with CPython 3.13 from
  ``.venv-lambda-runtime`` (scripts/lambda-runtime-venv.sh): the interpreter and what the managed runtime
  itself provides (awslambdaric, boto3/botocore), nothing of llog's.
* the code CDK stages for each function (``cdk.out/asset.<hash>``, the directory CDK zips) and the layer as
  ``cdk synth`` bundles it (:class:`infra.layer.LlogLayer`), copied into a tree laid out as Lambda's:
  ``opt/python`` (the layer) and ``var/task/<function>`` (the task root).
* from the synthesized template, not restated: the handler string, memory, timeout and every environment
  variable; only the variables that name deployed infrastructure (:data:`LOCAL_SERVICES`) point at the
  test session's Oxia and moto instead, and the S3/SQS endpoints are added (on AWS the role's credentials
  and the regional endpoints stand in for them).

Lambda's ``/opt`` and ``/var/task`` cannot be written here, so the tree lives in a temp directory and
the runtime finds it as Lambda's runtime would: the emulator starts the runtime in its own working
directory (the task root, also ``LAMBDA_TASK_ROOT``), and ``PYTHONPATH`` holds the task root, then
``opt/python/lib/python3.13/site-packages`` and ``opt/python``: the order of the python3.13 runtime's
``sys.path`` before its own site-packages.

The layer is bundled for this machine's architecture: the stack deploys arm64 (infra/functions.py), and
an aarch64 ``grpcio`` cannot load on x86_64. On an arm64 machine it is the deployed layer itself;
elsewhere the one difference is the platform tag of the wheels pip selects (infra/layer.py).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from devserver.devstack import free_port
from functions.common import names

if TYPE_CHECKING:  # infra imports aws_cdk, which starts jsii: not for every test of tests/functions
    from infra.layer import Architecture

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".tools"
RUNTIME_VENV = ROOT / ".venv-lambda-runtime"
INVOKE_PATH = "/2015-03-31/functions/function/invocations"
PYTHON_VERSION = "3.13"
# The python3.13 managed runtime's AWS_EXECUTION_ENV (awslambdaric reads it to pick its polling mode).
EXECUTION_ENV = f"AWS_Lambda_python{PYTHON_VERSION}"
# The emulator's log line of the init phase: the runtime's start and the handler module's import. (Its
# "Init Duration" on the first REPORT line is not that: it reports about 0 ms.)
INIT_DURATION = re.compile(r"INIT REPORT\(durationMs: ([0-9.]+)\)")

# Each function's cold start, filled as the emulators stop: (first invocation in seconds, init phase in ms).
COLD_STARTS: dict[str, tuple[float, float | None]] = {}
# Template variables whose values name deployed infrastructure: the tests give each a local stand-in.
LOCAL_SERVICES = ("LLOG_OXIA_SERVICE_ADDRESS", "LLOG_S3_BUCKET", "LLOG_ROOT_PREFIX", "LLOG_COMPACTION_QUEUE_URL")


def require(what: str, variable: str, reason: str) -> NoReturn:
    """Skip without ``what``; fail instead when ``variable`` (CI) says it is required."""
    if os.environ.get(variable):
        pytest.fail(f"{what} is required ({variable} is set): {reason}")
    pytest.skip(f"no {what}: {reason}")


def _reason(tool: str, default: str) -> str:
    path = TOOLS / f"{tool}-unavailable"
    return path.read_text().strip() if path.exists() else default


def find_rie() -> str:
    """``aws-lambda-rie``: ``$LLOG_RIE_BIN``, PATH, then ``.tools/bin`` (as scripts/install-rie.sh looks)."""
    named = os.environ.get("LLOG_RIE_BIN")
    if named and not os.access(named, os.X_OK):
        require("Lambda Runtime Interface Emulator", "LLOG_REQUIRE_RIE", f"LLOG_RIE_BIN={named} is not executable")
    candidates = [named, shutil.which("aws-lambda-rie"), str(TOOLS / "bin" / "aws-lambda-rie")]
    for candidate in filter(None, candidates):
        if os.access(candidate, os.X_OK):
            return candidate
    require("Lambda Runtime Interface Emulator", "LLOG_REQUIRE_RIE", _reason("aws-lambda-rie", "run make setup"))


def find_runtime_python() -> str:
    """The runtime's CPython 3.13 with awslambdaric (scripts/lambda-runtime-venv.sh)."""
    python = RUNTIME_VENV / "bin" / "python"
    probe = "import sys, awslambdaric; sys.exit(sys.version_info[:2] != (3, 13))"
    if python.exists() and subprocess.run([python, "-c", probe], capture_output=True, check=False).returncode == 0:
        return str(python)
    default = f"{RUNTIME_VENV.name} has no CPython {PYTHON_VERSION} with awslambdaric: run make setup"
    require("Lambda runtime (CPython 3.13, awslambdaric)", "LLOG_REQUIRE_RIE", _reason("lambda-runtime", default))


def host_architecture() -> Architecture:
    """The layer architecture this machine can load (infra/layer.py's names)."""
    architectures: dict[str, Architecture] = {
        "x86_64": "x86_64",
        "amd64": "x86_64",
        "aarch64": "arm64",
        "arm64": "arm64",
    }
    return architectures[platform.machine().lower()]


@dataclass(frozen=True)
class FunctionTemplate:
    """What the synthesized template says about one function."""

    name: str
    logical_id: str
    handler: str
    memory_mib: int
    timeout_s: int
    environment: Mapping[str, Any]
    code: Path  # the staged asset in cdk.out


def function_templates(template: Mapping[str, Any], outdir: Path) -> dict[str, FunctionTemplate]:
    """The llog functions of ``template`` (by name: POWERTOOLS_SERVICE_NAME), their code staged in ``outdir``."""
    found: dict[str, FunctionTemplate] = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        props = resource["Properties"]
        variables = props.get("Environment", {}).get("Variables", {})
        name = variables.get("POWERTOOLS_SERVICE_NAME")
        if name not in names.FUNCTIONS:
            continue  # CDK's own custom-resource handlers
        key: str = props["Code"]["S3Key"]
        found[name] = FunctionTemplate(
            name=name,
            logical_id=logical_id,
            handler=props["Handler"],
            memory_mib=int(props["MemorySize"]),
            timeout_s=int(props["Timeout"]),
            environment=variables,
            code=outdir / ("asset." + key.removesuffix(".zip")),
        )
    return found


def function_environment(spec: FunctionTemplate, local: Mapping[str, str]) -> dict[str, str]:
    """The template's variables, with ``local``'s values for those that name deployed infrastructure.

    A variable the template fills from another resource (``Ref``, ``Fn::GetAtt``) that ``local`` does not
    replace fails here: a new wiring must be given a local stand-in, not silently left out.
    """
    env: dict[str, str] = {}
    for variable, value in spec.environment.items():
        if variable in LOCAL_SERVICES:
            if variable not in local:
                raise AssertionError(f"{spec.name}: no local stand-in for {variable} = {value!r}")
            env[variable] = local[variable]
        elif isinstance(value, str):
            env[variable] = value
        else:
            raise AssertionError(f"{spec.name}: {variable} = {value!r} names a resource; add it to LOCAL_SERVICES")
    return env


@dataclass
class Invocation:
    seconds: float
    result: Any


class EmulatedFunction:
    """One function under ``aws-lambda-rie`` on a free loopback port (its own runtime API port too)."""

    def __init__(
        self, spec: FunctionTemplate, *, rie: str, python: str, task_root: Path, opt: Path,
        environment: Mapping[str, str], log: Path,
    ) -> None:  # fmt: skip
        self.spec = spec
        self.port = free_port()
        self.log = log
        site = opt / "python" / "lib" / f"python{PYTHON_VERSION}" / "site-packages"
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "en_US.UTF-8",
            "TZ": ":UTC",
            **environment,
            "AWS_EXECUTION_ENV": EXECUTION_ENV,
            "AWS_LAMBDA_FUNCTION_NAME": f"llog-{spec.name}",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mib),
            "AWS_LAMBDA_FUNCTION_TIMEOUT": str(spec.timeout_s),
            "LAMBDA_TASK_ROOT": str(task_root),
            "PYTHONPATH": os.pathsep.join([str(task_root), str(site), str(opt / "python")]),
        }
        self.command = [
            rie,
            "--runtime-interface-emulator-address", f"127.0.0.1:{self.port}",
            "--runtime-api-address", f"127.0.0.1:{free_port()}",
            python, "-m", "awslambdaric", spec.handler,
        ]  # fmt: skip
        self.task_root = task_root
        self.process: subprocess.Popen[bytes] | None = None
        self.cold_start: Invocation | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.command, cwd=self.task_root, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                raise AssertionError(f"{self.spec.name}: aws-lambda-rie exited {code}:\n{self.output()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=1):
                    return
            except urllib.error.HTTPError:
                return  # it answers (404 on /)
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"{self.spec.name}: aws-lambda-rie did not listen on {self.port}:\n{self.output()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def invoke(self, event: Any) -> Any:
        """POST ``event`` to the emulator's invoke endpoint; the handler's result (an error fails the test)."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{INVOKE_PATH}", data=json.dumps(event).encode(), method="POST"
        )
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=self.spec.timeout_s + 10) as response:
                body = response.read()
        except urllib.error.HTTPError as error:  # 502: the runtime failed its init (the error is in the body)
            raise AssertionError(f"{self.spec.name}: {error}: {error.read()!r}\n{self.output()[-4000:]}") from None
        seconds = time.monotonic() - started
        result = json.loads(body) if body else None
        if isinstance(result, dict) and "errorType" in result:
            raise AssertionError(f"{self.spec.name} failed: {result}\n{self.output()[-4000:]}")
        if self.cold_start is None:
            self.cold_start = Invocation(seconds, result)
        return result

    def init_duration_ms(self) -> float | None:
        """The init phase of the cold start (runtime start and handler import), as the emulator logged it."""
        match = INIT_DURATION.search(self.output())
        return float(match.group(1)) if match else None


def lay_out(layer_asset: Path, specs: Mapping[str, FunctionTemplate], into: Path) -> tuple[Path, dict[str, Path]]:
    """``into/opt`` (the layer's zip root) and ``into/var/task/<name>`` (each function's), as copies."""
    opt = into / "opt"
    shutil.copytree(layer_asset, opt)
    tasks = {}
    for name, spec in specs.items():
        tasks[name] = into / "var" / "task" / name
        shutil.copytree(spec.code, tasks[name])
    return opt, tasks
