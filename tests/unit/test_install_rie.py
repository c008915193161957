"""scripts/install-rie.sh and scripts/lambda-runtime-venv.sh (``make setup``'s ``rie`` step): where they look,
and what they record when the emulator or the runtime cannot be had (the emulator tests report that reason).

Each runs from a copy of scripts/ in a temporary checkout, so this repository's .tools is not seen, with a PATH
of its own; nothing is installed (no Go module is fetched, no virtualenv made).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ("install-rie.sh", "tool-lookup.sh", "lambda-runtime-venv.sh")


def checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "llog"
    (repo / "scripts").mkdir(parents=True)
    for name in SCRIPTS:
        shutil.copy2(ROOT / "scripts" / name, repo / "scripts" / name)
    shutil.copy2(ROOT / "requirements-dev.txt", repo / "requirements-dev.txt")
    return repo


def run(repo: Path, script: str, tmp_path: Path, path: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("LLOG_RIE_BIN", "LLOG_LAMBDA_PYTHON")}
    environment.update(PATH=os.pathsep.join(path), HOME=str(tmp_path / "home"), **env)
    return subprocess.run([str(repo / "scripts" / script)], env=environment, capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


def test_an_emulator_on_path_is_used_and_clears_an_old_reason(tmp_path: Path) -> None:
    repo, bin_dir = checkout(tmp_path), tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aws-lambda-rie").write_text("#!/bin/sh\n")
    (bin_dir / "aws-lambda-rie").chmod(0o755)
    (repo / ".tools").mkdir()
    (repo / ".tools" / "aws-lambda-rie-unavailable").write_text("old reason\n")

    result = run(repo, "install-rie.sh", tmp_path, [str(bin_dir), "/usr/bin", "/bin"])

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"aws-lambda-rie: {bin_dir / 'aws-lambda-rie'} (PATH)"
    assert not (repo / ".tools" / "aws-lambda-rie-unavailable").exists()


def test_a_named_emulator_that_is_not_executable_is_an_error_with_the_install_command(tmp_path: Path) -> None:
    repo = checkout(tmp_path)

    result = run(repo, "install-rie.sh", tmp_path, ["/usr/bin", "/bin"], LLOG_RIE_BIN=str(tmp_path / "missing"))

    assert result.returncode == 3
    reason = (repo / ".tools" / "aws-lambda-rie-unavailable").read_text()
    assert reason.strip() == f"LLOG_RIE_BIN={tmp_path / 'missing'} is not an executable file"
    assert "go install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@v0.0.0-" in result.stderr


def test_without_cpython_313_the_runtime_is_recorded_as_unavailable(tmp_path: Path) -> None:
    if any(Path(directory, "python3.13").exists() for directory in ("/usr/bin", "/bin")):
        pytest.skip("a python3.13 in /usr/bin or /bin: it cannot be left off PATH")
    repo = checkout(tmp_path)
    not_313 = shutil.which("python3.11") or "/usr/bin/python3.11"

    result = run(repo, "lambda-runtime-venv.sh", tmp_path, ["/usr/bin", "/bin"], LLOG_LAMBDA_PYTHON=not_313)

    assert result.returncode == 3
    assert "no CPython 3.13" in (repo / ".tools" / "lambda-runtime-unavailable").read_text()
    assert not (repo / ".venv-lambda-runtime").exists()
