"""Whole-template checks that CloudFormation would otherwise only report at deploy time."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Template


def references(value: Any) -> set[str]:
    """Logical ids that ``value`` refers to through Ref, Fn::GetAtt or Fn::Sub."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                found.add(inner)
            elif key == "Fn::GetAtt":
                target = inner[0] if isinstance(inner, list) else str(inner).split(".")[0]
                found.add(target)
            elif key == "Fn::Sub":
                text = inner[0] if isinstance(inner, list) else inner
                found |= {part.split("}")[0].split(".")[0] for part in str(text).split("${")[1:]}
                if isinstance(inner, list):
                    found |= references(inner[1])
            else:
                found |= references(inner)
    elif isinstance(value, list):
        for inner in value:
            found |= references(inner)
    return found


def dependency_cycle(template: dict[str, Any]) -> list[str] | None:
    resources = template["Resources"]
    graph = {}
    for name, resource in resources.items():
        depends = resource.get("DependsOn", [])
        depends = [depends] if isinstance(depends, str) else depends
        body = {k: v for k, v in resource.items() if k != "DependsOn"}
        graph[name] = (references(body) | set(depends)) & set(resources)
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in graph:
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_cycle_detection_works() -> None:
    template = {"Resources": {"A": {"Properties": {"X": {"Ref": "B"}}}, "B": {"DependsOn": "A"}}}
    assert dependency_cycle(template) == ["A", "B", "A"]


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_no_circular_dependencies(stage: str, dev_template: Template, prod_template: Template) -> None:
    template = dict((dev_template if stage == "dev" else prod_template).to_json())
    assert dependency_cycle(template) is None


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_within_cloudformation_limits(stage: str, dev_template: Template, prod_template: Template) -> None:
    template = (dev_template if stage == "dev" else prod_template).to_json()
    assert len(template["Resources"]) < 500
    assert len(json.dumps(template)) < 1_000_000
