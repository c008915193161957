"""The llog layer: runtime and architecture, its pinned requirements, and the local bundler's commands."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from aws_cdk.assertions import Template

from infra.layer import COMPILE_OPTIONS, LAYER_REQUIREMENTS, PipLayerBundler, pip_options, read_requirements
from tests.infra.helpers import ROOT, resources

NAME = re.compile(r"^([A-Za-z0-9._-]+)")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        name, _, version = line.partition("==")
        out[normalize(name)] = version
    return out


def test_layer_is_for_python313_on_arm64(dev_template: Template) -> None:
    (layer,) = resources(dev_template, "AWS::Lambda::LayerVersion").values()
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
    dev_template.has_output("LlogLayerArn", {})


def test_layer_requirements_are_exact_pins_without_the_code_generator() -> None:
    requirements = read_requirements()
    assert requirements
    for line in requirements:
        assert re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.]+", line), line
    names = set(pins(requirements))
    assert "betterproto2-compiler" not in names
    assert "ruff" not in names
    assert "boto3" not in names  # provided by the Lambda runtime
    assert "botocore" not in names


def test_layer_covers_llog_runtime_dependencies_at_the_tested_versions() -> None:
    layer = pins(read_requirements())
    project = tomllib.loads((ROOT / "llog_layer" / "pyproject.toml").read_text())["project"]
    for dependency in project["dependencies"]:
        match = NAME.match(dependency)
        assert match is not None
        name = normalize(match.group(1))
        if name not in ("boto3", "llog-client"):  # llog-client: copied from client/ as sources
            assert name in layer, f"llog depends on {name} but the layer does not install it"
    dev_lock = pins([line.strip() for line in (ROOT / "requirements-dev.txt").read_text().splitlines()
                     if "==" in line and not line.startswith("#")])  # fmt: skip
    for name, version in layer.items():
        assert dev_lock.get(name) == version, f"{name}: layer pins {version}, the test suite runs {dev_lock.get(name)}"


def test_pip_selects_cp313_manylinux_wheels_without_dependencies() -> None:
    options = pip_options("arm64")
    assert "--no-deps" in options
    assert "--only-binary=:all:" in options
    for flag, value in (("--implementation", "cp"), ("--python-version", "3.13"), ("--abi", "cp313")):
        assert options[options.index(flag) + 1] == value
    platforms = [options[i + 1] for i, o in enumerate(options) if o == "--platform"]
    assert "manylinux2014_aarch64" in platforms
    assert all(p.endswith("_aarch64") for p in platforms)


def test_docker_fallback_installs_the_same_pins() -> None:
    command = PipLayerBundler().docker_command()
    assert command[:2] == ["bash", "-c"]
    for requirement in read_requirements():
        assert f"'{requirement}'" in command[2]
    assert "--no-deps" in command[2]
    assert "cp -r /asset-input/llog_layer/llog /asset-input/client/llog_client /asset-output/python/" in command[2]


def test_docker_fallback_compiles_the_layer_as_the_local_bundler_does() -> None:
    script = PipLayerBundler().docker_command()[2]
    stale_byte_code_removed = script.index("-name __pycache__ -prune -exec rm -rf")
    compiled = script.index(f"PYTHONHASHSEED=0 python {' '.join(COMPILE_OPTIONS)} /asset-output/python")
    assert stale_byte_code_removed < compiled
    assert "--invalidation-mode unchecked-hash -d /opt/python" in script


def test_the_layer_carries_llog_and_the_client_packages_as_sources() -> None:
    assert [package.relative_to(ROOT).as_posix() for package in PipLayerBundler().packages] == [
        "llog_layer/llog",
        "client/llog_client",
    ]


def test_asset_hash_follows_sources_and_requirements(tmp_path: Path) -> None:
    package = tmp_path / "llog"
    package.mkdir()
    (package / "__init__.py").write_text("VERSION = 1\n")
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(LAYER_REQUIREMENTS.read_text())
    bundler = PipLayerBundler(packages=[package], requirements=requirements)
    first = bundler.fingerprint()
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.cpython-313.pyc").write_bytes(b"\0")
    assert bundler.fingerprint() == first  # byte code does not matter
    (package / "__init__.py").write_text("VERSION = 2\n")
    second = bundler.fingerprint()
    assert second != first
    requirements.write_text(requirements.read_text() + "extra==1.0\n")
    assert bundler.fingerprint() != second
    assert PipLayerBundler(packages=[package], requirements=requirements, architecture="x86_64").fingerprint() != (
        bundler.fingerprint()
    )
    client = tmp_path / "llog_client"
    client.mkdir()
    (client / "__init__.py").write_text("VERSION = 2\n")
    assert PipLayerBundler(packages=[package, client], requirements=requirements).fingerprint() != (
        bundler.fingerprint()
    )


def test_asset_hash_says_whether_and_by_which_python_the_layer_is_compiled(tmp_path: Path) -> None:
    package = tmp_path / "llog"
    package.mkdir()
    (package / "__init__.py").write_text("VERSION = 1\n")

    def fingerprint(compiler: tuple[str, str] | None) -> str:
        return PipLayerBundler(packages=[package], compiler=compiler).fingerprint()

    sources_only = fingerprint(None)
    compiled = fingerprint(("/usr/bin/python3.13", "3.13.0"))
    assert len({sources_only, compiled, fingerprint(("/usr/bin/python3.13", "3.13.1"))}) == 3
    assert fingerprint(("/elsewhere/python3.13", "3.13.0")) == compiled  # where the compiler is does not matter


def test_without_pip_the_bundler_defers_to_docker(tmp_path: Path) -> None:
    no_pip = tmp_path / "python-without-pip"
    no_pip.write_text("#!/bin/sh\nexit 1\n")
    no_pip.chmod(0o755)
    bundler = PipLayerBundler(python=str(no_pip))
    assert bundler.try_bundle(str(tmp_path / "out"), None) is False  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()
