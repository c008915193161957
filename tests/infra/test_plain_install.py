"""``pip install ./client ./llog_layer .`` (no checkout on the path) gives every ``llog`` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.bundling

PROBE = """
import json, sys
from importlib import resources
import server.serve, functions, llog.cli, llog_client.cli
files = [m.__file__ for m in (llog.cli, server.serve, functions, llog_client.cli)]
document = json.loads(resources.files("functions").joinpath("openapi.json").read_bytes())
sys.stdout.write(json.dumps({"files": files, "title": document["info"]["title"]}) + "\\n")
llog.cli.main(["--help"])
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("plain")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
         "--target", str(target), str(ROOT / "client"), str(ROOT / "llog_layer"), str(ROOT)],
        check=True, capture_output=True, text=True, timeout=600,
    )
    return target


def test_the_commands_come_from_the_installed_packages(installed: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(installed)}
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    first, _, help_text = result.stdout.partition("\n")
    probe = json.loads(first)
    assert all(Path(f).is_relative_to(installed) for f in probe["files"]), probe["files"]
    assert probe["title"]
    for command in ("compact", "gc", "migrate", "serve", "invoke", "produce", "consume"):
        assert command in help_text
