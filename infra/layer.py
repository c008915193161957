"""The ``llog`` Lambda layer (python3.13, arm64), bundled without Docker.

:class:`PipLayerBundler` is a CDK ``ILocalBundling``: it runs this interpreter's pip with
``--platform manylinux… --implementation cp --python-version 3.13 --abi cp313
--only-binary=:all: --no-deps -r infra/layer-requirements.txt`` into ``<output>/python`` and
copies the ``llog`` and ``llog_client`` packages next to it (``llog.service`` routes keys with
``llog_client.partitioner``; both are sources of this repository, not wheels), then compiles the
whole tree with a CPython 3.13 (``compileall --invalidation-mode unchecked-hash``). Only when pip
is not available does it return ``False``, and CDK falls back to the same commands inside the
Lambda build image (Docker).

Why the byte code: ``/opt`` is read-only in Lambda, so without ``__pycache__/*.cpython-313.pyc``
in the layer every cold start compiles ``llog`` and every dependency from source (about half of
a handler's init time). Unchecked-hash ``.pyc`` files are used without a stat of the source, and
compiled with ``-d /opt/python`` and a fixed hash seed they are byte-for-byte reproducible. The
magic number must be the runtime's, so only a CPython 3.13 compiles; without one the layer ships
sources only (it works, with a slower cold start) and the build says so.

The asset hash is computed from the sources of both packages, the requirements file, the pip options and the
compiler (or "sources only"), so an unchanged layer is not rebuilt or re-uploaded, and template
tests can skip bundling (context ``aws:cdk:bundling-stacks: []``) and still get a stable hash.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, Protocol, cast

import jsii
from aws_cdk import AssetHashType, BundlingOptions, ILocalBundling
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

ROOT = Path(__file__).resolve().parents[1]
LLOG_SOURCE_DIR = ROOT / "llog_layer"
CLIENT_SOURCE_DIR = ROOT / "client"
# The repository's packages the layer carries as sources, each at the top of python/.
LAYER_PACKAGES: tuple[Path, ...] = (LLOG_SOURCE_DIR / "llog", CLIENT_SOURCE_DIR / "llog_client")
LAYER_REQUIREMENTS = Path(__file__).resolve().with_name("layer-requirements.txt")

Architecture = Literal["arm64", "x86_64"]
PYTHON_VERSION = "3.13"
RUNTIME = lambda_.Runtime.PYTHON_3_13
# Lambda's python3.13 runtime is Amazon Linux 2023 (glibc 2.34): manylinux2014 and 2_28 wheels run.
PLATFORMS: dict[Architecture, tuple[str, ...]] = {
    "arm64": ("manylinux2014_aarch64", "manylinux_2_28_aarch64"),
    "x86_64": ("manylinux2014_x86_64", "manylinux_2_28_x86_64"),
}
_IGNORED = ("__pycache__", "*.pyc", "*.pyo")
# Where Lambda mounts the layer's python/ directory: the path recorded in the byte code (tracebacks).
LAYER_SITE = "/opt/python"
# -f: never keep a .pyc that was not made here; the fixed hash seed fixes the order of frozenset constants.
COMPILE_OPTIONS = ("-m", "compileall", "-q", "-f", "-j", "0", "--invalidation-mode", "unchecked-hash", "-d", LAYER_SITE)
COMPILE_ENVIRONMENT = {"PYTHONHASHSEED": "0"}
_VERSION_PROBE = "import platform, sys; print(platform.python_implementation(), *sys.version_info[:3])"


def read_requirements(path: Path = LAYER_REQUIREMENTS) -> list[str]:
    """The requirement lines of ``path`` (comments and blank lines dropped)."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def pip_options(architecture: Architecture) -> list[str]:
    """pip options that select wheels for the Lambda runtime instead of this machine."""
    abi = "cp" + PYTHON_VERSION.replace(".", "")
    options = ["--no-deps", "--no-compile", "--only-binary=:all:", "--implementation", "cp",
               "--python-version", PYTHON_VERSION, "--abi", abi]  # fmt: skip
    for platform in PLATFORMS[architecture]:
        options += ["--platform", platform]
    return options


def python_version(python: str) -> str | None:
    """``"3.13.0"`` for a CPython 3.13 ``python``, else ``None`` (a pyenv shim of another version fails too)."""
    try:
        probe = subprocess.run([python, "-c", _VERSION_PROBE], capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return None
    implementation, *version = probe.stdout.split() or [""]
    if probe.returncode != 0 or implementation != "CPython" or version[:2] != PYTHON_VERSION.split("."):
        return None
    return ".".join(version)


def find_compiler(python: str) -> tuple[str, str] | None:
    """A CPython 3.13 and its version: ``python`` itself, ``python3.13`` on PATH, pyenv's, ``.venv-lambda``'s."""
    pyenv = sorted((Path.home() / ".pyenv" / "versions").glob(f"{PYTHON_VERSION}.*/bin/python{PYTHON_VERSION}"))
    candidates = [python, shutil.which(f"python{PYTHON_VERSION}"), *map(str, pyenv)]
    candidates.append(str(ROOT / ".venv-lambda" / "bin" / "python"))
    for candidate in filter(None, candidates):
        version = python_version(candidate)
        if version is not None:
            return candidate, version
    return None


@jsii.implements(ILocalBundling)
class PipLayerBundler:
    """Builds the layer directory with the local pip; ``False`` (use Docker) if there is no pip."""

    def __init__(
        self,
        *,
        packages: Sequence[Path] = LAYER_PACKAGES,
        requirements: Path = LAYER_REQUIREMENTS,
        architecture: Architecture = "arm64",
        python: str = sys.executable,
        compiler: tuple[str, str] | None | Literal["find"] = "find",
    ) -> None:
        """``compiler``: the CPython 3.13 that compiles the layer and its version; ``None`` ships sources only."""
        self.packages = tuple(packages)
        self.requirements = requirements
        self.architecture: Architecture = architecture
        self.python = python
        self._compiler = compiler

    @functools.cached_property
    def compiler(self) -> tuple[str, str] | None:
        return find_compiler(self.python) if self._compiler == "find" else self._compiler

    def pip_available(self) -> bool:
        if self.python == sys.executable:
            return importlib.util.find_spec("pip") is not None
        probe = subprocess.run([self.python, "-m", "pip", "--version"], capture_output=True, check=False)
        return probe.returncode == 0

    # jsii calls this with the BundlingOptions as a second positional argument.
    def try_bundle(self, output_dir: str, options: BundlingOptions) -> bool:
        if not self.pip_available():
            print(f"llog layer: no pip for {self.python}; falling back to Docker bundling", file=sys.stderr)
            return False
        self.bundle(Path(output_dir))
        return True

    def bundle(self, output_dir: Path) -> Path:
        """Write ``output_dir/python/…`` (the layer's zip root) and return that directory."""
        target = output_dir / "python"
        target.mkdir(parents=True, exist_ok=True)
        command = [self.python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
                   "--target", str(target), *pip_options(self.architecture), "-r", str(self.requirements)]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(
                f"llog layer: pip failed ({result.returncode}): {' '.join(command)}\n{result.stdout}{result.stderr}"
            )
        shutil.rmtree(target / "bin", ignore_errors=True)  # console scripts are of no use in a layer
        for package in self.packages:
            ignore = shutil.ignore_patterns(*_IGNORED)
            shutil.copytree(package, target / package.name, ignore=ignore, dirs_exist_ok=True)
        self.compile(target)
        return target

    def compile(self, target: Path) -> None:
        """Write the runtime's ``.pyc`` next to every source of ``target``; without a CPython 3.13, say so."""
        if self.compiler is None:
            print(
                f"llog layer: WARNING: no CPython {PYTHON_VERSION} (python{PYTHON_VERSION} on PATH, pyenv, or"
                " .venv-lambda): the layer ships sources only, and every cold start compiles them",
                file=sys.stderr,
            )
            return
        command = [self.compiler[0], *COMPILE_OPTIONS, str(target)]
        result = subprocess.run(
            command, capture_output=True, text=True, check=False, env={**os.environ, **COMPILE_ENVIRONMENT}
        )
        if result.returncode != 0:
            output = result.stdout + result.stderr
            raise RuntimeError(f"llog layer: compileall failed ({result.returncode}): {' '.join(command)}\n{output}")

    def docker_command(self) -> list[str]:
        """The same installation and compilation inside the Lambda build image (the fallback; its python is 3.13).

        The image mounts the repository root at ``/asset-input``.
        """
        pins = " ".join(f"'{r}'" for r in read_requirements(self.requirements))
        options = " ".join(pip_options(self.architecture))
        environment = " ".join(f"{name}={value}" for name, value in COMPILE_ENVIRONMENT.items())
        sources = " ".join(f"/asset-input/{package.relative_to(ROOT).as_posix()}" for package in self.packages)
        return [
            "bash",
            "-c",
            f"pip install --quiet --disable-pip-version-check --target /asset-output/python {options} {pins}"
            f" && cp -r {sources} /asset-output/python/"
            " && find /asset-output/python -name __pycache__ -prune -exec rm -rf {} +"
            f" && {environment} python {' '.join(COMPILE_OPTIONS)} /asset-output/python",
        ]

    def bytecode(self) -> str:
        """What byte code the bundle carries: compiled here, compiled in Docker (no local pip), or none."""
        if self.pip_available():
            return "sources only" if self.compiler is None else f"unchecked-hash pyc by CPython {self.compiler[1]}"
        return "unchecked-hash pyc by the build image's CPython"

    def fingerprint(self) -> str:
        """Hash of everything that determines the bundle's content."""
        digest = hashlib.sha256()
        digest.update(f"{self.architecture} {PYTHON_VERSION} {pip_options(self.architecture)}\n".encode())
        digest.update(f"{self.bytecode()} {COMPILE_OPTIONS}\n".encode())
        digest.update(self.requirements.read_bytes())
        for package in self.packages:
            for path in sorted(package.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
                    digest.update(f"{package.name}/{path.relative_to(package).as_posix()}".encode() + b"\0")
                    digest.update(path.read_bytes())
        return digest.hexdigest()


class LocalBundler(Protocol):
    """A local bundler with the Docker command CDK falls back to."""

    def docker_command(self) -> list[str]: ...


def bundling_options(bundler: LocalBundler) -> BundlingOptions:
    """Bundle with ``bundler`` on this machine; Docker (the Lambda build image) only if it declines."""
    return BundlingOptions(
        image=RUNTIME.bundling_image, command=bundler.docker_command(), local=cast(ILocalBundling, bundler)
    )


class LlogLayer(Construct):
    """``layer``: the llog library, llog_client and their run-time dependencies for python3.13 on ``architecture``."""

    def __init__(self, scope: Construct, construct_id: str, *, architecture: Architecture = "arm64") -> None:
        super().__init__(scope, construct_id)
        self.bundler = PipLayerBundler(architecture=architecture)
        self.architecture = lambda_.Architecture.ARM_64 if architecture == "arm64" else lambda_.Architecture.X86_64
        code = lambda_.Code.from_asset(
            str(ROOT),
            asset_hash_type=AssetHashType.CUSTOM,
            asset_hash=self.bundler.fingerprint(),
            bundling=bundling_options(self.bundler),
        )
        self.layer = lambda_.LayerVersion(
            self,
            "Layer",
            code=code,
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[self.architecture],
            description=f"llog, the Oxia client and Powertools for {RUNTIME.name} on {architecture}",
        )
