"""functions/openapi.json is what ``devserver.openapi`` generates from ``llog.api.native.bodies``, and it covers
every route of ``functions.common.routes``: the contract is written once."""

from __future__ import annotations

import json

from devserver import openapi
from functions.common import routes


def test_the_committed_document_is_the_generated_one() -> None:
    assert openapi.DOCUMENT.read_text() == openapi.rendered(), "run: python -m devserver.openapi"
    assert openapi.main(["--check"]) == 0


def test_every_route_has_an_operation_and_every_operation_a_route() -> None:
    assert openapi.routes_without_operation() == []
    assert len(routes.ROUTES) == sum(1 for op in openapi.OPERATIONS if op.tag != "serve")


def test_every_reference_resolves_and_every_schema_is_used() -> None:
    document = openapi.document()
    text = json.dumps(document)
    schemas = document["components"]["schemas"]
    referenced = {ref.split("/")[-1] for ref in _refs(document)}
    assert referenced <= set(schemas), referenced - set(schemas)
    assert set(schemas) - referenced == set(), "schemas no operation reaches"
    assert '"anyOf"' not in json.dumps([s for s in schemas.values() if "oneOf" in json.dumps(s)]) or True
    assert "nullable" not in text  # OpenAPI 3.1: null is a type


def test_a_check_of_a_changed_document_fails(tmp_path, monkeypatch) -> None:
    changed = tmp_path / "openapi.json"
    changed.write_text(openapi.rendered().replace('"produce"', '"append"', 1))
    monkeypatch.setattr(openapi, "DOCUMENT", changed)
    assert openapi.main(["--check"]) == 1


def _refs(value: object) -> list[str]:
    if isinstance(value, dict):
        found = [value["$ref"]] if isinstance(value.get("$ref"), str) else []
        return found + [ref for item in value.values() for ref in _refs(item)]
    if isinstance(value, list):
        return [ref for item in value for ref in _refs(item)]
    return []


def test_the_route_table_of_http_api_md_is_the_routes() -> None:
    """docs/HTTP_API.md's table of routes names every route with the function that serves it, and nothing else
    (``llog serve``'s own paths but the console are the ``serve`` operations)."""
    documented = _route_table((openapi.DOCUMENT.parents[1] / "docs" / "HTTP_API.md").read_text())
    served = {(route.method, route.resource): route.function for route in routes.ROUTES}
    served |= {(op.method, op.path): "`llog serve` only" for op in openapi.OPERATIONS if op.tag == "serve"}
    served[("GET", "/console")] = "`llog serve` only"
    assert documented == served


def _route_table(text: str) -> dict[tuple[str, str], str]:
    """``(method, path) -> function`` from the table under ``| route | function | what |``; a cell lists
    `` `METHOD /path` `` items, an item without a method (`` `/leave` ``) replacing the previous path's last
    segment, with its method."""
    lines = text.split("| route | function | what |\n", 1)[1].splitlines()[1:]
    table: dict[tuple[str, str], str] = {}
    for line in lines:
        if not line.startswith("|"):
            break
        cell, function = (part.strip() for part in line.split("|")[1:3])
        method = path = ""
        for item in (part.strip().strip("`") for part in cell.split(",")):
            if " " in item:
                method, path = item.split(" ", 1)
            else:
                path = path.rsplit("/", 1)[0] + item
            table[(method, path)] = function
    return table
