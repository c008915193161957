"""Fixtures several integration modules share: one ``llog serve`` with the Kinesis API for the SDK checks."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from llog.config import OxiaConfig, S3Config
from llog.service.keys import AccessKeys, KeyPermissions
from llog.store.oxia import OxiaStore
from llog.store.sealing import LocalSealer
from tests.conftest import OxiaServer, keyed_serve_env
from tests.kinesis_sdks import KinesisEndpoint
from tests.serve_tasks import ServeTask


@pytest.fixture(scope="session")
def kinesis_endpoint(
    oxia_server: OxiaServer, s3_config: S3Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KinesisEndpoint]:
    """``llog serve`` under a root of its own, and a key it issued for every stream and action."""
    root = f"r-{uuid.uuid4().hex[:12]}"
    keys_dir = tmp_path_factory.mktemp("kinesis-keys")
    env = {**os.environ, **keyed_serve_env(s3_config, oxia_server.address, root, keys_dir)}
    sealing_key = keys_dir / "sealing.key"
    with OxiaStore(OxiaConfig(oxia_server.address)) as store:
        keys = AccessKeys(store, root=root, sealer=LocalSealer.from_file(sealing_key))
        key, secret = keys.create("sdk checks", KeyPermissions(streams=("*",), read=True, write=True, admin=True))
    with ServeTask(env) as server:
        yield KinesisEndpoint(f"{server.url.rstrip('/')}/kinesis", key.access_key_id, secret, server.output)
