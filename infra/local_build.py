"""The llog stack and its layer built for this machine: what the Lambda emulator runs (devserver/emulator.py).

``python -m infra.local_build`` reads ``{"context": {...}, "stack_out": DIR, "layer_out": DIR}`` on stdin,
synthesizes the stack of cdk.json's context and ``context`` into ``stack_out`` with its own bundling
skipped (its layer is for arm64), bundles :class:`~infra.layer.LlogLayer` for the architecture this machine
can load into ``layer_out`` (CDK skips bundling an asset whose directory exists, so an unchanged layer is
reused), and prints ``{"template": PATH, "layer_asset": DIR}`` as its last line.
"""

from __future__ import annotations

import json
import platform
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk

from infra.layer import Architecture, LlogLayer
from infra.settings import LlogSettings
from infra.stack import LlogStack

ROOT = Path(__file__).resolve().parents[1]


def host_architecture() -> Architecture:
    """The layer architecture this machine can load (infra/layer.py's names)."""
    architectures: dict[str, Architecture] = {
        "x86_64": "x86_64",
        "amd64": "x86_64",
        "aarch64": "arm64",
        "arm64": "arm64",
    }
    return architectures[platform.machine().lower()]


def build(context: Mapping[str, Any], stack_out: str, layer_out: str) -> dict[str, str]:
    settings_context = {**json.loads((ROOT / "cdk.json").read_text())["context"], **context}
    app = cdk.App(context={**settings_context, "aws:cdk:bundling-stacks": []}, outdir=stack_out)
    settings = LlogSettings.from_context(app.node.try_get_context)
    stack = LlogStack(app, settings.stack_name, settings=settings)
    template = Path(app.synth().directory) / f"{stack.stack_name}.template.json"
    layer_app = cdk.App(context=settings_context, outdir=layer_out)
    layer_stack = cdk.Stack(layer_app, "LayerOnly")
    LlogLayer(layer_stack, "LlogLayer", architecture=host_architecture())
    layer_template = json.loads((Path(layer_app.synth().directory) / "LayerOnly.template.json").read_text())
    (layer,) = (r for r in layer_template["Resources"].values() if r["Type"] == "AWS::Lambda::LayerVersion")
    layer_asset = Path(layer_out) / ("asset." + layer["Properties"]["Content"]["S3Key"].removesuffix(".zip"))
    return {"template": str(template), "layer_asset": str(layer_asset)}


if __name__ == "__main__":
    print(json.dumps(build(**json.loads(sys.stdin.read()))))
