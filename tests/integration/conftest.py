"""Fixtures of the integration tests: ``llog serve`` on the session's Oxia server and moto S3."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devserver.serve import LlogServer
from llog.config import S3Config
from tests.conftest import OxiaServer, serve_env, start_server


@pytest.fixture
def live_server(
    monkeypatch: pytest.MonkeyPatch, s3_config: S3Config, root: str, oxia_server: OxiaServer
) -> Iterator[LlogServer]:
    srv = start_server(monkeypatch, {**serve_env(s3_config, root), "LLOG_OXIA_SERVICE_ADDRESS": oxia_server.address})
    try:
        yield srv
    finally:
        srv.shutdown()
