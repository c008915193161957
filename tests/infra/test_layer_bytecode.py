"""The layer carries CPython 3.13 byte code: an unchecked-hash ``.pyc`` for every source, reproducibly.

``/opt`` is read-only in Lambda, so a layer without ``__pycache__/*.cpython-313.pyc`` is compiled
from source on every cold start (infra/layer.py). These tests read what the bundler writes: the
16-byte header (magic, flags, source hash) of each ``.pyc``, checked against the sources by a
CPython 3.13, and the bytes of two builds. The layer-building tests are marked ``bundling``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.layer import PYTHON_VERSION, PipLayerBundler, find_compiler, python_version

CACHE_TAG = "cpython-" + PYTHON_VERSION.replace(".", "")
UNCHECKED_HASH = 0b01  # PEP 552 flags: hash-based (bit 0), check_source (bit 1) off
COMPILER = find_compiler(sys.executable)
# CI has pyenv's CPython 3.13 and must run these: there a missing compiler fails them instead of skipping.
needs_compiler = pytest.mark.skipif(
    COMPILER is None and not os.environ.get("CI"), reason=f"no CPython {PYTHON_VERSION} here"
)

# Run by a CPython 3.13: the .pyc files whose magic or source hash is not the runtime's for their source.
_VERIFY = """
import importlib.util, json, sys
from pathlib import Path
wrong = []
for pyc in sorted(Path(sys.argv[1]).rglob("*.pyc")):
    source = pyc.parent.parent / (pyc.name.split(".")[0] + ".py")
    header = pyc.read_bytes()[:16]
    if header[:4] != importlib.util.MAGIC_NUMBER or header[8:] != importlib.util.source_hash(source.read_bytes()):
        wrong.append(str(pyc))
print(json.dumps(wrong))
"""


def sources(tree: Path) -> list[Path]:
    return sorted(p for p in tree.rglob("*.py") if "__pycache__" not in p.parts)


def cached(source: Path) -> Path:
    return source.parent / "__pycache__" / f"{source.stem}.{CACHE_TAG}.pyc"


def header_flags(pyc: Path) -> int:
    return int.from_bytes(pyc.read_bytes()[4:8], "little")


def tree_bytes(tree: Path) -> dict[str, bytes]:
    return {p.relative_to(tree).as_posix(): p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()}


def wrong_headers(tree: Path) -> list[str]:
    assert COMPILER is not None
    result = subprocess.run([COMPILER[0], "-I", "-c", _VERIFY, str(tree)], capture_output=True, text=True, check=True)
    wrong: list[str] = json.loads(result.stdout)
    return wrong


def sample_package(root: Path) -> Path:
    package = root / "llog"
    (package / "store").mkdir(parents=True)
    (package / "__init__.py").write_text("VERSION = 1\n")
    # A set literal in a membership test is a frozenset constant: its marshalled order follows the hash seed.
    (package / "store" / "__init__.py").write_text("def known(x):\n    return x in {'a', 'b', 'c', 'd', 'e'}\n")
    return package


def test_the_compiler_is_a_cpython_313(tmp_path: Path) -> None:
    not_python = tmp_path / "python3.13"
    not_python.write_text("#!/bin/sh\necho CPython 3 13 0\nexit 1\n")
    not_python.chmod(0o755)
    assert python_version(str(not_python)) is None
    assert python_version(str(tmp_path / "absent")) is None
    assert python_version(sys.executable) == (
        ".".join(map(str, sys.version_info[:3])) if sys.version_info[:2] == (3, 13) else None
    )
    if COMPILER is not None:
        assert python_version(COMPILER[0]) == COMPILER[1]
        assert find_compiler(COMPILER[0]) == COMPILER  # the bundler's own python first when it is 3.13


@needs_compiler
def test_every_source_gets_an_unchecked_hash_pyc_independent_of_where_it_is_built(tmp_path: Path) -> None:
    first, second = sample_package(tmp_path / "one"), sample_package(tmp_path / "two")
    PipLayerBundler(compiler=COMPILER).compile(first.parent)
    PipLayerBundler(compiler=COMPILER).compile(second.parent)
    for source in sources(first):
        assert header_flags(cached(source)) == UNCHECKED_HASH, source
    assert wrong_headers(first.parent) == []
    assert tree_bytes(first) == tree_bytes(second)


def test_without_a_compiler_the_layer_ships_sources_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    package = sample_package(tmp_path)
    PipLayerBundler(compiler=None).compile(tmp_path)
    assert not list(package.rglob("*.pyc"))
    assert "sources only" in capsys.readouterr().err


@pytest.mark.bundling
@needs_compiler
def test_the_layer_has_an_unchecked_hash_pyc_for_every_source(bundle: Path) -> None:
    site = bundle / "python"
    llog_sources = sources(site / "llog")
    assert llog_sources
    for source in llog_sources:
        assert header_flags(cached(source)) == UNCHECKED_HASH, source
    missing = [str(s.relative_to(site)) for s in sources(site) if not cached(s).is_file()]
    assert missing == []
    assert {p.name.split(".")[1] for p in site.rglob("*.pyc")} == {CACHE_TAG}
    assert wrong_headers(site) == []


@pytest.mark.bundling
@needs_compiler
def test_two_builds_of_the_layer_are_identical(bundle: Path, tmp_path: Path) -> None:
    """``bundle`` is built by ``cdk synth``; this one directly: the same bytes, so the same zip content."""
    again = PipLayerBundler().bundle(tmp_path / "again")
    assert tree_bytes(again.parent) == tree_bytes(bundle)
