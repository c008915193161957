#!/usr/bin/env python3
"""The llog CDK app: one LlogStack per stage (``-c llog:stage=NAME``), checked by cdk-nag. See docs/DEPLOY.md."""

import os
import sys

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.settings import LlogSettings, SettingsError
from infra.stack import LlogStack

app = cdk.App()
if str(app.node.try_get_context("llog:skipBundling")).lower() == "true":
    app.node.set_context("aws:cdk:bundling-stacks", [])  # synthesize without building the layer
try:
    settings = LlogSettings.from_context(app.node.try_get_context)
except SettingsError as error:
    sys.exit(f"llog: {error}")
env = cdk.Environment(account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION"))
LlogStack(app, settings.stack_name, settings=settings, env=env, description=f"llog ({settings.stage})")
cdk.Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
app.synth()
