"""Import direction, read from the source (docs/ARCHITECTURE.md, "Rules that keep the layers honest").

Every import counts: at module level, inside functions, under ``if TYPE_CHECKING:``, and
``importlib.import_module("…")`` / ``__import__("…")`` with a literal name (an f-string counts by
its literal package prefix). Names computed at run time (``llog/__init__.py``'s lazy table) are not
seen; that module is the top of the library, so it may import anything anyway.

The layers of ``llog``, lowest first; a module may import its own layer and the ones below it:

* ``errors``: ``llog/errors.py``, which imports nothing of llog.
* ``format``: ``llog/format/`` (with ``llog/format/kv/``, the stored documents), what is stored; it may import
  ``errors`` only.
* ``base``: every other module directly in ``llog/`` (``config``, ``backoff`` and any helper added
  there later, e.g. a retry helper). These may import each other, ``errors`` and ``format``.
  ``format`` sits below them, not beside them, because ``config`` takes two pure names of it today
  (``AppendProtocol``, the root-prefix check) while ``format`` needs nothing of ``config``.
* ``store`` ← ``protocol`` ← ``service`` ← ``api``: the sub-packages of the same names (the protocol's verbs,
  the append and the read included; ``api`` holds the APIs llog speaks over the services, ``api.native`` the
  HTTP API's bodies).
* ``top``: ``llog/__init__.py`` and ``llog/cli.py``, which may import anything in llog.

A new sub-package of ``llog`` is in no layer until it is added to ``SUBPACKAGES``; any import
into or out of it is reported.

Outside the layers:

* ``llog_client`` (``client/llog_client``, the HTTP client, shipped in the layer next to ``llog``)
  imports nothing of ``llog``, ``functions``, ``server`` or ``devserver``: it installs and runs without them.
  Inside ``llog`` only ``llog.service`` imports it (keyed produce routes with its partitioner).
* ``llog`` never imports the packages that are not in the Lambda layer (``functions``, ``server``,
  ``devserver``, ``tests``, ``infra``, ``bench``, ``scripts``, the Glue job's ``llog_export``) nor
  Powertools; only ``llog.store`` imports the client libraries (``grpc``, ``betterproto2``,
  ``xxhash``, ``boto3``, ``botocore``); ``llog.format`` imports no I/O library (``os`` is allowed:
  ``format.keys`` takes random bytes from ``os.urandom`` for object ids).
* ``functions`` never imports ``server`` or ``devserver``; ``server`` (what the serve fleet's image
  holds) never imports ``devserver``; none of the three imports ``tests``, ``infra``, ``bench`` or
  ``scripts``, which are not installed with them.
* ``glue_jobs`` ships with ``llog`` only (the packages zip): it never imports ``functions``,
  ``server``, ``devserver``, ``tests``, ``infra``, ``bench`` or ``scripts``, and imports ``llog`` only up to
  ``protocol``.

Each violation is reported as ``module -> imported (rule)``, all of them in one failure.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# (area, the directory module names are relative to, the directory scanned)
AREAS: tuple[tuple[str, Path, Path], ...] = (
    ("llog", ROOT / "llog_layer", ROOT / "llog_layer" / "llog"),
    ("functions", ROOT, ROOT / "functions"),
    ("server", ROOT, ROOT / "server"),
    ("devserver", ROOT, ROOT / "devserver"),
    ("glue_jobs", ROOT / "glue_jobs", ROOT / "glue_jobs"),
    ("llog_client", ROOT / "client", ROOT / "client" / "llog_client"),
)

LAYERS = ("errors", "format", "base", "store", "protocol", "service", "api", "top")
SUBPACKAGES = ("format", "store", "protocol", "service", "api")
TOP = ("llog", "llog.cli")

NOT_IN_THE_LAYER = ("functions", "server", "devserver", "tests", "infra", "bench", "scripts", "llog_export")
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "llog": (*NOT_IN_THE_LAYER, "aws_lambda_powertools"),
    "functions": ("server", "devserver", "tests", "infra", "bench", "scripts"),
    "server": ("devserver", "tests", "infra", "bench", "scripts"),
    "devserver": ("tests", "infra", "bench", "scripts"),
    "glue_jobs": ("functions", "server", "devserver", "tests", "infra", "bench", "scripts"),
    "llog_client": ("llog", "functions", "server", "devserver", "tests", "infra", "bench", "scripts", "llog_export"),
}
STORE_ONLY = ("grpc", "betterproto2", "xxhash", "boto3", "botocore", "awscrt")
IO_LIBRARIES = (
    *STORE_ONLY, "s3transfer", "urllib3", "requests", "socket", "ssl", "http", "urllib.request", "asyncio",
    "selectors", "select", "subprocess", "shutil", "tempfile", "pathlib", "sqlite3", "mmap",
)  # fmt: skip
GLUE_CEILING = "protocol"
CLIENT_IMPORTER = "llog.service"


@dataclass(frozen=True, order=True)
class Violation:
    module: str
    imported: str
    rule: str

    def __str__(self) -> str:
        return f"{self.module} -> {self.imported} ({self.rule})"


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def llog_layer(module: str, packages: frozenset[str] = frozenset()) -> str | None:
    """The layer of an ``llog`` module, or ``None`` for a sub-package (one of ``packages``) in no layer."""
    if module in TOP:
        return "top"
    parts = module.split(".")
    if parts[1] == "errors":
        return "errors"
    if parts[1] in SUBPACKAGES:
        return parts[1]
    return "base" if len(parts) == 2 and module not in packages else None


def dynamic_import_name(call: ast.Call) -> str | None:
    """The literal module name of ``import_module("…")`` or ``__import__("…")``, if there is one."""
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if called not in ("import_module", "__import__") or not call.args:
        return None
    argument = call.args[0]
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return argument.value
    if isinstance(argument, ast.JoinedStr) and argument.values:
        head = argument.values[0]
        if isinstance(head, ast.Constant) and isinstance(head.value, str) and "." in head.value:
            return head.value.rsplit(".", 1)[0]
    return None


def imported_modules(source: str, module: str, *, is_package: bool, known: frozenset[str]) -> Iterator[str]:
    """Every module ``source`` imports; ``from p import n`` is ``p.n`` when that is a known module."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield submodule if submodule in known else base
        elif isinstance(node, ast.Call) and (name := dynamic_import_name(node)) is not None:
            yield name


def broken_rules(area: str, module: str, imported: str, packages: frozenset[str]) -> Iterator[str]:
    for package in FORBIDDEN[area]:
        if within(imported, package):
            yield f"{area} never imports {package}"
    if area == "llog":
        for library in STORE_ONLY:
            if within(imported, library) and not within(module, "llog.store"):
                yield f"only llog.store imports {library}"
        if within(module, "llog.format") and any(within(imported, library) for library in IO_LIBRARIES):
            yield "format does no I/O"
        if within(imported, "llog_client") and not within(module, CLIENT_IMPORTER):
            yield f"only {CLIENT_IMPORTER} imports llog_client"
    if not within(imported, "llog"):
        return
    imported_layer = llog_layer(imported, packages)
    if imported_layer is None:
        yield f"{'.'.join(imported.split('.')[:2])} is in no layer"
    elif area == "glue_jobs" and imported != "llog" and LAYERS.index(imported_layer) > LAYERS.index(GLUE_CEILING):
        yield f"glue_jobs imports llog only up to {GLUE_CEILING}"
    elif area == "llog":
        module_layer = llog_layer(module, packages)
        if module_layer is not None and LAYERS.index(imported_layer) > LAYERS.index(module_layer):
            yield f"layer: {module_layer} may not import {imported_layer}"


def violations(
    area: str, module: str, source: str, *, is_package: bool = False, known: frozenset[str] = frozenset()
) -> list[Violation]:
    packages = frozenset(name.rpartition(".")[0] for name in known)
    found = {
        Violation(module, imported, rule)
        for imported in imported_modules(source, module, is_package=is_package, known=known)
        for rule in broken_rules(area, module, imported, packages)
    }
    return sorted(found)


@dataclass(frozen=True)
class SourceModule:
    area: str
    name: str
    path: Path
    is_package: bool


def source_modules() -> list[SourceModule]:
    modules = []
    for area, names_root, directory in AREAS:
        for path in sorted(directory.rglob("*.py")):
            parts = path.relative_to(names_root).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            modules.append(SourceModule(area, name, path, is_package))
    return modules


def test_imports_follow_the_layers() -> None:
    modules = source_modules()
    known = frozenset(m.name for m in modules)
    found = [
        violation
        for m in modules
        for violation in violations(m.area, m.name, m.path.read_text(), is_package=m.is_package, known=known)
    ]
    assert not found, f"{len(found)} imports against the layering:\n" + "\n".join(map(str, found))


def test_every_area_is_scanned_and_every_llog_module_has_a_layer() -> None:
    modules = source_modules()
    assert {m.area for m in modules} == {area for area, _, _ in AREAS}
    packages = frozenset(m.name for m in modules if m.is_package)
    unlayered = [m.name for m in modules if m.area == "llog" and llog_layer(m.name, packages) is None]
    assert not unlayered, f"add their sub-packages to SUBPACKAGES: {unlayered}"


SYNTHETIC_FORMAT_MODULE = """
import importlib
import os
from typing import TYPE_CHECKING

import boto3

from llog.errors import CorruptBatch
from . import keys

if TYPE_CHECKING:
    from llog.service.consume import ConsumeService


def load(name):
    from ..protocol import append
    importlib.import_module(f"functions.{name}.app")
    return importlib.import_module("server.serve"), __import__("socket")
"""


def test_the_checker_sees_every_kind_of_import() -> None:
    known = frozenset({"llog", "llog.format", "llog.format.keys", "llog.protocol", "llog.protocol.append"})
    found = violations("llog", "llog.format.codec", SYNTHETIC_FORMAT_MODULE, known=known)
    assert [str(v) for v in found] == [
        "llog.format.codec -> boto3 (format does no I/O)",
        "llog.format.codec -> boto3 (only llog.store imports boto3)",
        "llog.format.codec -> functions (llog never imports functions)",
        "llog.format.codec -> llog.protocol.append (layer: format may not import protocol)",
        "llog.format.codec -> llog.service.consume (layer: format may not import service)",
        "llog.format.codec -> server.serve (llog never imports server)",
        "llog.format.codec -> socket (format does no I/O)",
    ]


@pytest.mark.parametrize(
    ("area", "module", "source", "expected"),
    [
        ("llog", "llog.config", "from llog.format.keys import validate_root_prefix\nfrom llog.backoff import B", []),
        ("llog", "llog.retry", "import time\nfrom llog.config import env_int\nfrom llog.errors import E", []),
        ("llog", "llog.errors", "from llog.config import env_int", ["layer: errors may not import base"]),
        ("llog", "llog.format.keys", "from llog.backoff import Backoff", ["layer: format may not import base"]),
        ("llog", "llog.config", "from llog.store.oxia import OxiaStore", ["layer: base may not import store"]),
        ("llog", "llog.protocol.gc", "from llog.protocol.catalog import LogCatalog", []),
        ("llog", "llog.protocol.compaction", "from llog.service.produce import P",
         ["layer: protocol may not import service"]),
        ("llog", "llog.protocol.append", "from llog import Record", ["layer: protocol may not import top"]),
        ("llog", "llog.cli", "from llog.service.admin import AdminService", []),
        ("llog", "llog.service.admin", "import grpc", ["only llog.store imports grpc"]),
        ("llog", "llog.store.oxia", "import grpc\nimport xxhash", []),
        ("llog", "llog.service.x", "from aws_lambda_powertools import Logger",
         ["llog never imports aws_lambda_powertools"]),
        ("llog", "llog.plugins.x", "from llog.errors import E", []),
        ("llog", "llog.errors", "from llog.plugins.x import y", ["llog.plugins is in no layer"]),
        ("functions", "functions.produce.app", "from devserver import serve\nfrom tests import faults",
         ["functions never imports devserver", "functions never imports tests"]),
        ("server", "server.serve", "from functions.admin import app\nfrom tests.faults import H",
         ["server never imports tests"]),
        ("server", "server.serve", "from devserver.devstack import free_port", ["server never imports devserver"]),
        ("devserver", "devserver.devstack", "from server.serve import LlogServer", []),
        ("glue_jobs", "llog_export.job", "import llog\nfrom llog.protocol.manifest import ManifestStore", []),
        ("glue_jobs", "llog_export.job", "from llog.service.consume import ConsumeService",
         ["glue_jobs imports llog only up to protocol"]),
        ("llog", "llog.service.produce", "from llog_client.partitioner import partition_for_key", []),
        ("llog", "llog.protocol.topics", "from llog_client.partitioner import partition_for_key",
         ["only llog.service imports llog_client"]),
        ("llog", "llog.cli", "import llog_client.cli", ["only llog.service imports llog_client"]),
        ("llog_client", "llog_client.producer", "import urllib3\nfrom llog_client.errors import LlogClientError", []),
        ("llog_client", "llog_client.cli", "from llog.cli import COMMAND_GROUP\nfrom devserver import serve",
         ["llog_client never imports devserver", "llog_client never imports llog"]),
    ],
)  # fmt: skip
def test_rules(area: str, module: str, source: str, expected: list[str]) -> None:
    assert sorted(v.rule for v in violations(area, module, source)) == expected
