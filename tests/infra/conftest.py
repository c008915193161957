"""Shared fixtures of the infrastructure tests: each stage's stack is synthesized once per session.

The stacks of every front door, Oxia storage and other setting that changes resources are here, so that
tests/infra/test_cfn_lint.py lints the same synthesized stacks the other tests check.

So are the real layer and the Glue packages (``bundle``, ``glue_packages``): only tests marked
``bundling`` ask for them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

# jsii prints a large banner on every start under Node 20 (set before aws_cdk is imported).
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from infra.analytics import Analytics
from infra.layer import LlogLayer
from infra.stack import LlogStack
from infra.storage import Storage
from tests.infra.helpers import FLEET_CONTEXT, make_app, make_stack


@pytest.fixture(scope="session")
def dev_stack() -> LlogStack:
    return make_stack({"llog:stage": "dev"})


@pytest.fixture(scope="session")
def prod_stack() -> LlogStack:
    return make_stack({"llog:stage": "prod"})


@pytest.fixture(scope="session")
def dev_template(dev_stack: LlogStack) -> Template:
    return Template.from_stack(dev_stack)


@pytest.fixture(scope="session")
def prod_template(prod_stack: LlogStack) -> Template:
    return Template.from_stack(prod_stack)


@pytest.fixture(scope="session")
def api_key_stack() -> LlogStack:
    return make_stack({"llog:stage": "keys", "llog:apiAuth": "api_key"})


@pytest.fixture(scope="session")
def api_key_template(api_key_stack: LlogStack) -> Template:
    return Template.from_stack(api_key_stack)


@pytest.fixture(scope="session")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The layer's zip root, built by `cdk synth` through the ILocalBundling callback."""
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = make_app(bundling=True, outdir=str(outdir))
    stack = cdk.Stack(app, "LayerOnly")
    LlogLayer(stack, "LlogLayer")
    app.synth()
    (layer,) = Template.from_stack(stack).find_resources("AWS::Lambda::LayerVersion").values()
    key: str = layer["Properties"]["Content"]["S3Key"]
    asset = outdir / ("asset." + key.removesuffix(".zip"))
    assert asset.is_dir(), sorted(p.name for p in outdir.iterdir())
    return asset


@pytest.fixture(scope="session")
def glue_packages(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The staged directory of ``--extra-py-files`` (CDK zips it on upload) and its asset manifest entry."""
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = make_app(bundling=True, outdir=str(outdir))
    stack = cdk.Stack(app, "AnalyticsOnly")
    storage = Storage(stack, "Storage", production=False, encryption="s3_managed", access_log_retention_days=30)
    Analytics(stack, "Analytics", stage="bundle", production=False, data_bucket=storage.bucket,
              access_log_bucket=storage.access_log_bucket, root_prefix="llog", schedule="cron(15 * * * ? *)",
              table_format="parquet", worker_type="G.1X", workers=2, timeout_minutes=60,
              database_name="llog_bundle")  # fmt: skip
    assembly = app.synth()
    (job,) = Template.from_stack(stack).find_resources("AWS::Glue::Job").values()
    url: str = job["Properties"]["DefaultArguments"]["--extra-py-files"]["Fn::Sub"]
    key = url.rsplit("/", 1)[1]
    assert key.endswith(".zip"), key  # Glue takes a .zip in --extra-py-files
    asset_hash = key.removesuffix(".zip")
    manifest = json.loads((Path(assembly.directory) / "AnalyticsOnly.assets.json").read_text())
    entry = manifest["files"][asset_hash]
    asset = outdir / entry["source"]["path"]
    assert asset.is_dir(), sorted(p.name for p in outdir.iterdir())
    return asset, entry


@pytest.fixture(scope="session")
def http_stack() -> LlogStack:
    return make_stack({"llog:stage": "http", "llog:frontDoor": "http"})


@pytest.fixture(scope="session")
def http_template(http_stack: LlogStack) -> Template:
    return Template.from_stack(http_stack)


@pytest.fixture(scope="session")
def efs_prod_stack() -> LlogStack:
    return make_stack({"llog:stage": "prod", "llog:oxiaStorage": "efs"})


@pytest.fixture(scope="session")
def fleet_stack() -> LlogStack:
    return make_stack(FLEET_CONTEXT)


@pytest.fixture(scope="session")
def dns_stack() -> LlogStack:
    return make_stack({**FLEET_CONTEXT, "llog:stage": "fleetdns", "llog:serveEndpoint": "dns"})


@pytest.fixture(scope="session")
def iceberg_stack() -> LlogStack:
    return make_stack({"llog:stage": "ice", "llog:exportTableFormat": "iceberg"})
