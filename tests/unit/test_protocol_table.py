"""The protocol table at the top of ``llog.protocol`` names things that exist.

Every function it names resolves, every crash point it names is in the
catalogue (``llog.protocol.faults``), every invariant it cites is defined,
every action cites a docs section that exists, and the code reaches only
crash points of the catalogue.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from typing import Any

import pytest

import llog
import llog.protocol
from llog.protocol import faults

LIBRARY = Path(llog.__file__).parent
DOCS = LIBRARY.parents[1] / "docs"
SPEC = llog.protocol.__doc__ or ""
CRASH_POINT_SHAPE = re.compile(r"[a-z]+\.(after|before)_[a-z_]+")
FAULT_CALLS = {"_fault", "_reach", "fault", "fault_hook"}


def table_rows() -> list[list[str]]:
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in SPEC.splitlines()
            if line.startswith("|")]  # fmt: skip
    header, rule, *body = rows
    assert header == ["#", "action", "function", "crash points", "keeps"]
    assert all(set(cell) <= {"-"} for cell in rule)
    return body


ROWS = table_rows()
FUNCTIONS = sorted({row[2] for row in ROWS if row[2]})
TABLE_CRASH_POINTS = sorted({point.strip() for row in ROWS for point in row[3].split(",") if point.strip()})


def resolve(name: str) -> Any:
    """``module.attr.attr`` relative to ``llog.protocol`` unless it starts with ``llog.``."""
    dotted = name if name.startswith("llog.") else f"llog.protocol.{name}"
    parts = dotted.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attr in parts[split:]:
            found = getattr(found, attr)
        return found
    raise AssertionError(f"no module in {name}")


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_function_in_the_table_exists(name: str) -> None:
    assert callable(resolve(name)), name


def test_every_crash_point_in_the_table_is_in_the_catalogue() -> None:
    assert TABLE_CRASH_POINTS
    assert set(TABLE_CRASH_POINTS) <= faults.CRASH_POINTS


def test_every_catalogued_crash_point_is_in_the_table() -> None:
    assert set(TABLE_CRASH_POINTS) >= faults.CRASH_POINTS


def test_actions_are_numbered_in_order_and_each_is_described() -> None:
    actions = [row[0] for row in ROWS if row[0]]
    assert actions == [f"A{n}" for n in range(1, len(actions) + 1)]
    described: set[str] = set()
    for first, last in re.findall(r"^\* A(\d+)(?:-A(\d+))? ", SPEC, re.MULTILINE):
        described.update(f"A{n}" for n in range(int(first), int(last or first) + 1))
    assert described == set(actions)


def test_invariants_cited_are_defined_and_every_one_is_cited() -> None:
    defined = re.findall(r"^\* (I\d+) ", SPEC, re.MULTILINE)
    assert defined == [f"I{n}" for n in range(1, len(defined) + 1)]
    cited = {invariant for row in ROWS for invariant in row[4].split()}
    assert cited == set(defined)


def test_every_cited_docs_section_exists() -> None:
    text = " ".join(SPEC.split())
    citations = re.findall(r"docs/([A-Z_]+\.md), \"([^\"]+)\"", text)
    assert citations
    for doc, section in citations:
        headings = {
            line.lstrip("#").strip() for line in (DOCS / doc).read_text().splitlines() if line.startswith("#")
        }
        assert section in headings, f"docs/{doc} has no section {section!r}"


def test_every_action_cites_the_docs() -> None:
    for entry in re.split(r"\n(?=\* A\d)", SPEC.split("Invariants (")[0])[1:]:
        assert "docs/" in entry or "the same sections" in entry, entry


# --- the code reaches only catalogued crash points ------------------------------------


def catalogued(name: str) -> bool:
    value = getattr(faults, name, None)
    return isinstance(value, str) and value in faults.CRASH_POINTS


def library_modules() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text())) for path in sorted(LIBRARY.rglob("*.py"))]


def test_crash_point_strings_live_only_in_the_catalogue() -> None:
    catalogue = Path(faults.__file__)
    for path, tree in library_modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
                continue
            if CRASH_POINT_SHAPE.fullmatch(node.value):
                assert path == catalogue, f"{path}:{node.lineno} spells out crash point {node.value!r}"
                assert node.value in faults.CRASH_POINTS


def test_every_fault_call_names_a_catalogued_point() -> None:
    calls = 0
    for path, tree in library_modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name not in FAULT_CALLS or not node.args:
                continue
            point = node.args[-1]
            where = f"{path}:{node.lineno}"
            if isinstance(point, ast.Name) and point.id == "point":
                continue  # a component's own ``_fault(point)`` passing its argument on
            assert isinstance(point, ast.Name), f"{where}: name the crash point from llog.protocol.faults"
            assert catalogued(point.id), f"{where}: {point.id} is not in llog.protocol.faults"
            calls += 1
    assert calls >= len(faults.CRASH_POINTS)


def test_every_catalogued_crash_point_is_reached_somewhere() -> None:
    names = {name for name in dir(faults) if catalogued(name)}
    used = {
        node.id
        for path, tree in library_modules()
        if path.name != "faults.py"
        for node in ast.walk(tree)
        if isinstance(node, ast.Name)
    }
    assert names <= used
