"""llog/store/oxia_proto is exactly what scripts/generate-oxia-proto.sh makes from Oxia's client.proto (v0.17.1).

The generation fetches the Go module github.com/oxia-db/oxia/common through Go's module proxy, so it
needs Go (and the proxy): without Go this is skipped, unless ``LLOG_REQUIRE_GO`` (CI) is set.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "llog_layer" / "llog" / "store" / "oxia_proto"


def files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_the_committed_oxia_stubs_are_what_the_generation_script_makes(tmp_path: Path) -> None:
    if shutil.which("go") is None:
        if os.environ.get("LLOG_REQUIRE_GO"):
            pytest.fail("Go is required to re-generate the Oxia stubs (LLOG_REQUIRE_GO is set)")
        pytest.skip("Go is not installed: the Oxia stubs cannot be re-generated here")
    generated = tmp_path / "oxia_proto"
    done = subprocess.run(
        [str(ROOT / "scripts" / "generate-oxia-proto.sh"), str(generated)],
        env={**os.environ, "PY": sys.executable},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert files(generated) == files(COMMITTED), "run scripts/generate-oxia-proto.sh and commit the result"
