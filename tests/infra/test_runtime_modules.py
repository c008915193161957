"""The Lambda layer and the Glue packages zip ship runtime modules only (docs/ARCHITECTURE.md, "What ships where").

Neither carries the repository's code outside the library (``server``, ``devserver``, ``functions``,
``tests``, ``bench``, ``scripts``, ``infra``) nor a module whose name marks it as part of the server
or the development tools (``devstack``, ``billing``, ``batching``, ``serve``), and the ``llog`` in each is exactly
``llog_layer/llog``: nothing added, nothing lost. That every ``llog`` module imports with the
layer's pins alone is ``test_bundling.py``'s CPython 3.13 import test.

Marked ``bundling``: the ``bundle`` and ``glue_packages`` fixtures (``conftest.py``) build both.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

pytestmark = pytest.mark.bundling

ROOT = Path(__file__).resolve().parents[2]
LLOG_SOURCE = ROOT / "llog_layer" / "llog"
CLIENT_SOURCE = ROOT / "client" / "llog_client"
LLOG_EXPORT_SOURCE = ROOT / "glue_jobs" / "llog_export"
DEVELOPMENT_PACKAGES = frozenset(
    {"server", "devserver", "functions", "tests", "bench", "scripts", "infra", "glue_jobs"}
)
DEVELOPMENT_ONLY_WORDS = frozenset({"devstack", "billing", "batching", "serve"})
NAME_WORD = re.compile(r"[^_.\-]+")


def package_files(package: Path) -> set[str]:
    """The files of ``package``, relative to it, without byte code."""
    return {
        path.relative_to(package).as_posix()
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo")
    }


def development_names(paths: set[str]) -> list[str]:
    """The paths with a part named after development code (``devserver``, ``billing.py``, ``serve_x``, …)."""
    flagged = DEVELOPMENT_PACKAGES | DEVELOPMENT_ONLY_WORDS
    return sorted(
        path
        for path in paths
        if any(word in flagged for part in PurePosixPath(path).parts for word in NAME_WORD.findall(part))
    )


def tree_difference(shipped: Path, source: Path) -> dict[str, list[str]]:
    shipped_files, source_files = package_files(shipped), package_files(source)
    return {"added": sorted(shipped_files - source_files), "lost": sorted(source_files - shipped_files)}


def test_layer_holds_no_development_code(bundle: Path) -> None:
    site = bundle / "python"
    top_level = {path.name for path in site.iterdir()}
    assert not development_names(top_level), top_level
    assert "llog_export" not in top_level
    assert not development_names(package_files(site / "llog"))


def test_layer_llog_is_the_source_tree(bundle: Path) -> None:
    assert tree_difference(bundle / "python" / "llog", LLOG_SOURCE) == {"added": [], "lost": []}
    assert tree_difference(bundle / "python" / "llog_client", CLIENT_SOURCE) == {"added": [], "lost": []}


def test_glue_packages_hold_no_development_code(glue_packages: tuple[Path, dict[str, Any]]) -> None:
    asset, _ = glue_packages
    assert not development_names(package_files(asset))


def test_glue_packages_are_the_source_trees(glue_packages: tuple[Path, dict[str, Any]]) -> None:
    asset, _ = glue_packages
    assert tree_difference(asset / "llog", LLOG_SOURCE) == {"added": [], "lost": []}
    assert tree_difference(asset / "llog_export", LLOG_EXPORT_SOURCE) == {"added": [], "lost": []}


def test_the_name_check_sees_development_modules() -> None:
    paths = {
        "store/oxia.py",
        "service/produce.py",
        "service/observer.py",
        "server/http11.py",
        "devserver/invoke.py",
        "billing.py",
        "batching/x.py",
        "store/devstack_s3.py",
        "tests/test_x.py",
        "llog_devserver-0.1.0.dist-info",
    }
    assert development_names(paths) == [
        "batching/x.py",
        "billing.py",
        "devserver/invoke.py",
        "llog_devserver-0.1.0.dist-info",
        "server/http11.py",
        "store/devstack_s3.py",
        "tests/test_x.py",
    ]
