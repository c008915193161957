"""Helpers of the infrastructure tests: apps with cdk.json's context and cdk-nag, as ``cdk synth`` makes them.

Apps get the context of cdk.json (feature flags and llog defaults), exactly as ``cdk synth``
does, plus ``aws:cdk:bundling-stacks: []`` unless bundling is asked for, so that template
tests do not build the layer. cdk-nag's AwsSolutions pack runs on every app, as in app.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# jsii prints a large banner on every start under Node 20; the tests do not need to see it.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from infra.settings import LlogSettings
from infra.stack import LlogStack

ROOT = Path(__file__).resolve().parents[2]
CDK_CONTEXT: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text())["context"]
# The serve fleet front door's stage of the tests (tests/infra/conftest.py's fleet_stack).
FLEET_CONTEXT = {"llog:stage": "fleet", "llog:frontDoor": "serve"}


def make_app(
    overrides: Mapping[str, Any] | None = None, *, bundling: bool = False, outdir: str | None = None
) -> cdk.App:
    context: dict[str, Any] = {**CDK_CONTEXT, **(overrides or {})}
    if not bundling:
        context["aws:cdk:bundling-stacks"] = []
    app = cdk.App(context=context, outdir=outdir)
    cdk.Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
    return app


def make_stack(overrides: Mapping[str, Any] | None = None, **stack_kwargs: Any) -> LlogStack:
    app = make_app(overrides)
    settings = LlogSettings.from_context(app.node.try_get_context)
    return LlogStack(app, settings.stack_name, settings=settings, **stack_kwargs)


def resources(template: Template, resource_type: str) -> dict[str, dict[str, Any]]:
    return {k: dict(v) for k, v in template.find_resources(resource_type).items()}


def function_named_in(stack: LlogStack, uri: Any) -> str:
    """The one function of the stack whose logical id an integration URI names."""
    text = json.dumps(uri)
    found = [
        name
        for name, fn in stack.functions.by_name.items()
        if stack.get_logical_id(fn.node.default_child) in text  # type: ignore[arg-type]
    ]
    assert len(found) == 1, text
    return found[0]


def find_python313() -> str | None:
    """A CPython 3.13 (the Lambda runtime's and the serve image's version): ``$LLOG_PYTHON313``, on PATH, or pyenv's."""
    candidates = [os.environ.get("LLOG_PYTHON313", ""), shutil.which("python3.13") or ""]
    candidates.append(str(Path.home() / ".pyenv" / "versions" / "3.13.0" / "bin" / "python3.13"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            probe = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"],
                                   capture_output=True, text=True, check=False)  # fmt: skip
            if probe.returncode == 0 and probe.stdout.strip() == "(3, 13)":
                return candidate
    return None
