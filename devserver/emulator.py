"""The llog functions as Lambda runs them: AWS's Runtime Interface Emulator, awslambdaric, CDK's artifacts.

Used by the emulator tests (tests/functions/test_emulated.py) and by ``LLOG_DEV_FRONT=lambda make dev``
(devserver/lambda_front.py). What runs:

* ``aws-lambda-rie`` (``make setup``: scripts/install-rie.sh) in front of ``python -m awslambdaric <handler>``,
  the runtime interface client the python3.13 managed runtime is built on, with CPython 3.13 from
  ``.venv-lambda-runtime`` (scripts/lambda-runtime-venv.sh): the interpreter and what the managed runtime
  itself provides (awslambdaric, boto3/botocore), nothing of llog's.
* the code CDK stages for each function (``cdk.out/asset.<hash>``, the directory CDK zips) and the layer as
  ``cdk synth`` bundles it (:class:`infra.layer.LlogLayer`), copied into a tree laid out as Lambda's:
  ``opt/python`` (the layer) and ``var/task/<function>`` (the task root).
* from the synthesized template, not restated: the handler string, memory, timeout and every environment
  variable; only the variables that name deployed infrastructure (:data:`LOCAL_SERVICES`) point at local
  stand-ins instead, and the S3/SQS endpoints are added (on AWS the role's credentials and the regional
  endpoints stand in for them).

Lambda's ``/opt`` and ``/var/task`` cannot be written here, so the tree lives in a directory of its own and
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
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devserver.devstack import free_port
from functions.common import names

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / ".tools"
RUNTIME_VENV = ROOT / ".venv-lambda-runtime"
INVOKE_PATH = "/2015-03-31/functions/function/invocations"
PYTHON_VERSION = "3.13"
# The python3.13 managed runtime's AWS_EXECUTION_ENV (awslambdaric reads it to pick its polling mode).
EXECUTION_ENV = f"AWS_Lambda_python{PYTHON_VERSION}"
# The emulator's log line of the init phase: the runtime's start and the handler module's import. (Its
# "Init Duration" on the first REPORT line is not that: it reports about 0 ms.)
INIT_DURATION = re.compile(r"INIT REPORT\(durationMs: ([0-9.]+)\)")

# Template variables whose values name deployed infrastructure (or its account): each gets a local stand-in.
LOCAL_SERVICES = (
    "LLOG_OXIA_SERVICE_ADDRESS",
    "LLOG_S3_BUCKET",
    "LLOG_ROOT_PREFIX",
    "LLOG_COMPACTION_QUEUE_URL",
    "LLOG_KEYS_KMS_KEY_ID",
    "LLOG_KINESIS_ACCOUNT_ID",
)


class EmulatorUnavailable(RuntimeError):
    """The emulator or the runtime is not installed here; the message says why (as make setup recorded it)."""


class FunctionError(RuntimeError):
    """An invocation failed as Lambda reports it: the runtime's init or the handler raised, or no answer came."""

    def __init__(self, function: str, detail: str, log: str = "", *, timed_out: bool = False) -> None:
        super().__init__(f"{function}: {detail}" + (f"\n{log}" if log else ""))
        self.function = function
        self.detail = detail
        self.timed_out = timed_out  # the environment may still be busy with the invocation


def _reason(tool: str, default: str) -> str:
    path = TOOLS / f"{tool}-unavailable"
    return path.read_text().strip() if path.exists() else default


def find_rie() -> str:
    """``aws-lambda-rie``: ``$LLOG_RIE_BIN``, PATH, then ``.tools/bin`` (as scripts/install-rie.sh looks)."""
    named = os.environ.get("LLOG_RIE_BIN")
    if named and not os.access(named, os.X_OK):
        raise EmulatorUnavailable(f"LLOG_RIE_BIN={named} is not executable")
    candidates = [named, shutil.which("aws-lambda-rie"), str(TOOLS / "bin" / "aws-lambda-rie")]
    for candidate in filter(None, candidates):
        if os.access(candidate, os.X_OK):
            return candidate
    raise EmulatorUnavailable(f"no aws-lambda-rie: {_reason('aws-lambda-rie', 'run make setup')}")


def find_runtime_python() -> str:
    """The runtime's CPython 3.13 with awslambdaric (scripts/lambda-runtime-venv.sh)."""
    python = RUNTIME_VENV / "bin" / "python"
    probe = "import sys, awslambdaric; sys.exit(sys.version_info[:2] != (3, 13))"
    if python.exists() and subprocess.run([python, "-c", probe], capture_output=True, check=False).returncode == 0:
        return str(python)
    default = f"{RUNTIME_VENV.name} has no CPython {PYTHON_VERSION} with awslambdaric: run make setup"
    raise EmulatorUnavailable(f"no Lambda runtime (CPython 3.13, awslambdaric): {_reason('lambda-runtime', default)}")


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
                raise ValueError(f"{spec.name}: no local stand-in for {variable} = {value!r}")
            env[variable] = local[variable]
        elif isinstance(value, str):
            env[variable] = value
        else:
            raise ValueError(f"{spec.name}: {variable} = {value!r} names a resource; add it to LOCAL_SERVICES")
    return env


@dataclass
class Invocation:
    seconds: float
    result: Any


class EmulatedFunction:
    """One function under ``aws-lambda-rie`` on a free loopback port (its own runtime API port too).

    Like one Lambda execution environment, it runs one invocation at a time.
    """

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

    def start(self) -> EmulatedFunction:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.command, cwd=self.task_root, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise FunctionError(self.spec.name, f"aws-lambda-rie exited {self.process.returncode}", self.output())
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=1):
                    return self
            except urllib.error.HTTPError:
                return self  # it answers (404 on /)
            except OSError:
                time.sleep(0.05)
        raise FunctionError(self.spec.name, f"aws-lambda-rie did not listen on {self.port}", self.output())

    def stop(self) -> None:
        if self.process is not None and self.running():
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def invoke(self, event: Any, *, timeout_s: float | None = None) -> Any:
        """POST ``event`` to the emulator's invoke endpoint; the handler's result.

        :class:`FunctionError` when the runtime's init or the handler failed, or no answer came in
        ``timeout_s`` (default: the function's timeout and 10 s).
        """
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{INVOKE_PATH}", data=json.dumps(event).encode(), method="POST"
        )
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=timeout_s or self.spec.timeout_s + 10) as response:
                body = response.read()
        except urllib.error.HTTPError as error:  # 502: the runtime failed its init (the error is in the body)
            raise FunctionError(self.spec.name, f"{error}: {error.read()!r}", self.output()[-4000:]) from None
        except TimeoutError as error:
            raise FunctionError(self.spec.name, f"no answer: {error}", self.output()[-4000:], timed_out=True) from None
        except OSError as error:  # the emulator is gone
            raise FunctionError(self.spec.name, f"unreachable: {error}", self.output()[-4000:]) from None
        seconds = time.monotonic() - started
        result = json.loads(body) if body else None
        if isinstance(result, dict) and "errorType" in result:
            raise FunctionError(self.spec.name, f"failed: {result}", self.output()[-4000:])
        if self.cold_start is None:
            self.cold_start = Invocation(seconds, result)
        return result

    def init_duration_ms(self) -> float | None:
        """The init phase of the cold start (runtime start and handler import), as the emulator logged it."""
        match = INIT_DURATION.search(self.output())
        return float(match.group(1)) if match else None


class FunctionPool:
    """A function's execution environments, as Lambda scales them: a request takes an idle one, or starts a
    new one (a cold start) while fewer than ``limit`` run, or waits for one to be free.

    An environment whose invocation failed without an answer (a timeout, a crash) is stopped, not reused.
    """

    def __init__(self, start: Callable[[], EmulatedFunction], limit: int) -> None:
        self._start = start
        self.limit = limit
        self._lock = threading.Condition()
        self._idle: list[EmulatedFunction] = []
        self.environments: list[EmulatedFunction] = []
        self._starting = 0

    def warm(self) -> EmulatedFunction:
        """Start one environment now (make dev's first cold start, before the first request)."""
        environment = self._start()
        with self._lock:
            self.environments.append(environment)
            self._idle.append(environment)
            self._lock.notify()
        return environment

    def invoke(self, event: Any, *, timeout_s: float | None = None) -> Any:
        environment = self._take()
        healthy = False
        try:
            result = environment.invoke(event, timeout_s=timeout_s)
            healthy = True
            return result
        except FunctionError as error:
            healthy = not error.timed_out and environment.running()
            raise
        finally:
            self._give_back(environment, healthy)

    def _take(self) -> EmulatedFunction:
        with self._lock:
            while not self._idle:
                if len(self.environments) + self._starting < self.limit:
                    self._starting += 1
                    break
                self._lock.wait()
            else:
                return self._idle.pop()
        try:
            environment = self._start()
        finally:
            with self._lock:
                self._starting -= 1
                self._lock.notify()
        with self._lock:
            self.environments.append(environment)
        return environment

    def _give_back(self, environment: EmulatedFunction, healthy: bool) -> None:
        if not healthy:
            environment.stop()
        with self._lock:
            if healthy:
                self._idle.append(environment)
            else:
                self.environments.remove(environment)
            self._lock.notify()

    def stop(self) -> None:
        with self._lock:
            environments, self.environments, self._idle = self.environments, [], []
        for environment in environments:
            environment.stop()


def lay_out(layer_asset: Path, specs: Mapping[str, FunctionTemplate], into: Path) -> tuple[Path, dict[str, Path]]:
    """``into/opt`` (the layer's zip root) and ``into/var/task/<name>`` (each function's), as copies."""
    opt = into / "opt"
    shutil.rmtree(opt, ignore_errors=True)
    shutil.copytree(layer_asset, opt)
    tasks = {}
    for name, spec in specs.items():
        tasks[name] = into / "var" / "task" / name
        shutil.rmtree(tasks[name], ignore_errors=True)
        shutil.copytree(spec.code, tasks[name])
    return opt, tasks


@dataclass(frozen=True)
class Synthesized:
    """A stack's template and its cdk.out (function code staged), and the layer as ``cdk synth`` bundles it."""

    template: dict[str, Any]
    outdir: Path
    layer_asset: Path


def synthesize(context: Mapping[str, Any], stack_out: Path, layer_out: Path) -> Synthesized:
    """The llog stack of cdk.json's context and ``context`` into ``stack_out``, and its layer for this machine
    into ``layer_out`` (an existing bundle of the same sources is reused: CDK skips bundling an asset whose
    directory exists).

    The stack's own bundling is skipped: its layer is for arm64; the one bundled here is for the architecture
    this machine can load (infra/local_build.py). It runs in a process of its own, from the checkout (infra/ is
    not an installed package), in a session of its own: jsii's Node.js process ends with it and a Ctrl-C of
    the caller does not reach it.
    """
    stack_out.mkdir(parents=True, exist_ok=True)
    request = {"context": dict(context), "stack_out": str(stack_out), "layer_out": str(layer_out)}
    # jsii prints a large banner on every start under Node 20.
    env = {"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", **os.environ}
    done = subprocess.run([sys.executable, "-m", "infra.local_build"], input=json.dumps(request), text=True,
                          cwd=ROOT, env=env, stdout=subprocess.PIPE, check=False, start_new_session=True)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"cdk synth of the llog stack failed ({done.returncode}); its output is above")
    answer = json.loads(done.stdout.splitlines()[-1])
    template = json.loads(Path(answer["template"]).read_text())
    return Synthesized(template, stack_out, Path(answer["layer_asset"]))


def local_endpoints(s3_endpoint_url: str, region: str, access_key_id: str, secret_access_key: str) -> dict[str, str]:
    """What stands in for the execution role's credentials and the region's endpoints (S3, SQS, KMS: one server)."""
    return {
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "AWS_ACCESS_KEY_ID": access_key_id,
        "AWS_SECRET_ACCESS_KEY": secret_access_key,
        "AWS_ENDPOINT_URL_SQS": s3_endpoint_url,
        "AWS_ENDPOINT_URL_KMS": s3_endpoint_url,
        "LLOG_S3_ENDPOINT_URL": s3_endpoint_url,
        "LLOG_S3_REGION_NAME": region,
        "LLOG_S3_ACCESS_KEY_ID": access_key_id,
        "LLOG_S3_SECRET_ACCESS_KEY": secret_access_key,
    }
