"""The HTTP benchmark's peer (bench/serve.py): s2-lite on the same S3 server, idle appends and 32 clients."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bench import load, wrk
from bench.serve_processes import ROOT, Service, running
from bench.serve_requests import loop_row
from bench.serve_settings import PEER_BASIN, PEER_BUCKET, PEER_SCENARIOS, PEER_STREAM, PRODUCE_S, VALUE
from devserver.devstack import free_port
from llog.config import S3Config
from llog.store.s3 import BlobStore


def s2_lite_binary() -> str | None:
    explicit = os.environ.get("S2_LITE_BIN")
    candidate = Path(explicit) if explicit else ROOT / ".tools" / "bin" / "s2-lite"
    return str(candidate) if os.access(candidate, os.X_OK) else None


def _append_payload() -> bytes:
    return json.dumps({"records": [{"body": VALUE}]}).encode()


def _peer_headers() -> dict[str, str]:
    return {"s2-basin": PEER_BASIN}


def _peer_append(service: Service) -> None:
    client = load.HttpClient(service.url, lambda m, u, b: _peer_headers(), 5.0)
    try:
        status, answer = client.post_json(f"/v1/streams/{PEER_STREAM}/records", _append_payload())
    finally:
        client.close()
    if status != 200:
        raise ValueError(f"append answered {status}: {answer[:200]!r}")


def s2_lite(binary: str, s3: S3Config, tmp: Path) -> Service:
    """s2-lite on ``PEER_BUCKET`` of the same S3 server, with one basin and one stream created at startup."""
    init = tmp / "s2-init.json"
    init.write_text(json.dumps({"basins": [{"name": PEER_BASIN, "streams": [{"name": PEER_STREAM}]}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S2"))}
    env.update(
        {
            "AWS_ENDPOINT_URL_S3": s3.endpoint_url or "",
            "AWS_REGION": s3.region_name or "us-east-1",
            "AWS_ACCESS_KEY_ID": s3.access_key_id or "testing",
            "AWS_SECRET_ACCESS_KEY": s3.secret_access_key or "testing",
            "RUST_LOG": "warn",
        }
    )
    port = free_port()
    args = [binary, "--bucket", PEER_BUCKET, "--port", str(port), "--no-dashboard", "--init-file", str(init)]
    return Service("s2-lite", args, env, tmp / "s2-lite.log", port, _peer_append)


def peer_scenarios(s3: S3Config, tmp: Path) -> dict[str, Any]:
    binary = s2_lite_binary()
    if binary is None:
        return {"skipped": "no s2-lite binary ($S2_LITE_BIN or .tools/bin/s2-lite)"}
    BlobStore(s3).create_bucket(PEER_BUCKET)
    service = s2_lite(binary, s3, tmp)
    payload = _append_payload()
    rows = {}
    with running([service]):
        for key, what in PEER_SCENARIOS:
            clients = 32 if key == "clients32" else 1
            result = wrk.run(service.url, f"/v1/streams/{PEER_STREAM}/records", payload, clients=clients,
                             seconds=PRODUCE_S, headers=_peer_headers())  # fmt: skip
            rows[key] = loop_row(what, clients, result, None)
    return {"rows": rows}
