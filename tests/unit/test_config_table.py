"""``llog.config.SETTINGS`` is the one table of ``LLOG_*`` variables: read only in config.py, all documented."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from llog import config
from llog.config import SETTINGS, CompactionScheduleConfig, Setting, default_int, setting, setting_int
from llog.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "llog_layer" / "llog"
CONFIG = LIBRARY / "config.py"
VARIABLE = re.compile(r"LLOG_[A-Z0-9_]+")


def _reads_environment(tree: ast.AST) -> list[str]:
    """``os.environ``, ``os.getenv`` and ``environ`` imported from os, anywhere in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("environ", "getenv", "environb")
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            found.append(f"os.{node.attr} (line {node.lineno})")
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [f"from os import {a.name} (line {node.lineno})" for a in node.names if "env" in a.name]
    return found


def _code_strings(tree: ast.AST) -> set[str]:
    """``LLOG_*`` names in string constants that are not docstrings."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            names.update(VARIABLE.findall(node.value))
    return names


def test_only_config_reads_the_environment_in_the_library_and_the_functions() -> None:
    offenders = []
    for path in sorted([*LIBRARY.rglob("*.py"), *(ROOT / "functions").rglob("*.py")]):
        if path == CONFIG:
            continue
        offenders += [f"{path.relative_to(ROOT)}: {what}" for what in _reads_environment(ast.parse(path.read_text()))]
    assert offenders == []


def test_the_checker_sees_each_way_of_reading_the_environment() -> None:
    source = "import os\nfrom os import environ\nos.environ.get('A')\nos.getenv('B')\n"
    assert len(_reads_environment(ast.parse(source))) == 3


def test_config_reads_exactly_the_variables_of_the_table() -> None:
    """Every name config.py's code uses is in the table, and every entry of the table is read."""
    tree = ast.parse(CONFIG.read_text())
    table_names = set()
    read_names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Setting":
            first = node.args[0]
            assert isinstance(first, ast.Constant)
            table_names.add(first.value)
        elif isinstance(node, ast.Call):
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and VARIABLE.fullmatch(arg.value):
                    read_names.add(arg.value)
    assert table_names == set(SETTINGS)
    assert read_names == set(SETTINGS), "a setting in the table that nothing reads, or one read but not listed"


def test_no_library_module_names_a_variable_the_table_lacks() -> None:
    unknown = {}
    for path in sorted(LIBRARY.rglob("*.py")):
        names = _code_strings(ast.parse(path.read_text())) - set(SETTINGS)
        if names:
            unknown[str(path.relative_to(ROOT))] = sorted(names)
    assert unknown == {}


def test_the_readme_configuration_table_lists_every_setting_with_its_default() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Configuration") : readme.index("### Metrics")]
    rows = [line for line in section.splitlines() if line.startswith("| `LLOG_")]
    documented: dict[str, str] = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        names, defaults = VARIABLE.findall(cells[0]), re.findall(r"`([^`]*)`", cells[1])
        for i, name in enumerate(names):
            documented[name] = defaults[i] if len(defaults) == len(names) else ""
    assert sorted(documented) == sorted(SETTINGS)
    for name, shown in documented.items():
        if shown and SETTINGS[name].default:
            assert shown == SETTINGS[name].default, f"README shows {name} = {shown}, the code {SETTINGS[name].default}"


def test_every_table_entry_is_described() -> None:
    for entry in SETTINGS.values():
        assert isinstance(entry, Setting)
        assert entry.meaning
        assert entry.name.startswith("LLOG_")


def test_defaults_come_from_the_table() -> None:
    assert setting({}, "LLOG_OXIA_NAMESPACE") == "default"
    assert setting({"LLOG_OXIA_NAMESPACE": "ns"}, "LLOG_OXIA_NAMESPACE") == "ns"
    assert setting_int({}, "LLOG_GC_READ_CONCURRENCY") == default_int("LLOG_GC_READ_CONCURRENCY") == 16
    assert config.WriterConfig().max_cas_attempts == int(SETTINGS["LLOG_WRITER_MAX_CAS_ATTEMPTS"].default)
    with pytest.raises(ConfigurationError, match="LLOG_GC_READ_CONCURRENCY"):
        setting_int({"LLOG_GC_READ_CONCURRENCY": "many"}, "LLOG_GC_READ_CONCURRENCY")


def test_the_compaction_schedule_settings() -> None:
    assert CompactionScheduleConfig.from_env({}) == CompactionScheduleConfig(1, 600_000, 240_000, None, None)
    with pytest.raises(ConfigurationError, match="LLOG_COMPACTION_QUEUE_URL"):
        CompactionScheduleConfig.from_env({}).require_queue_url()
    configured = CompactionScheduleConfig.from_env(
        {
            "LLOG_COMPACTION_MIN_LAG": "50",
            "LLOG_COMPACTION_MAX_DELAY_MS": "900000",
            "LLOG_COMPACTION_QUEUE_URL": "https://q",
            "LLOG_COMPACTOR_ID": "w1",
        }
    )
    assert (configured.min_lag, configured.max_delay_ms, configured.require_queue_url(), configured.compactor_id) == (
        50,
        900_000,
        "https://q",
        "w1",
    )
