"""Shared fixtures of the infrastructure tests: each stage's stack is synthesized once per session."""

from __future__ import annotations

import os

# jsii prints a large banner on every start under Node 20 (set before aws_cdk is imported).
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import pytest
from aws_cdk.assertions import Template

from infra.stack import LlogStack
from tests.infra.helpers import make_stack


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
