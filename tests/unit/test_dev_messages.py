"""What ``make dev`` (scripts/dev.py) says: the banner once it serves, and its refusal of a broken data directory.

The stack itself (start, restart with data kept, refusing an index without its objects) is run in
tests/integration/test_s3_servers.py; here only the text, built from the same values.
"""

from __future__ import annotations

from pathlib import Path

from devserver.devstack import OxiaProcess, VersityGW
from functions.common import routes
from scripts import dev
from server import console
from server.serve import SERVE_PATHS

URL = "http://127.0.0.1:8080"


def a_banner(tmp_path: Path) -> str:
    oxia = OxiaProcess("oxia", tmp_path / "oxia", port=6648)
    s3 = VersityGW("versitygw", tmp_path / "s3", port=4566)
    env = {"LLOG_OXIA_SERVICE_ADDRESS": oxia.address}
    return dev.banner(URL, dev.serve_front(), oxia, s3, 60, 3600, True, env, ("LLOGKEY", "SECRET"))


def test_the_banner_names_every_route_llog_serve_answers_and_the_console(tmp_path: Path) -> None:
    text = a_banner(tmp_path)
    flat = " ".join(text.split())  # routes of one function may wrap over lines
    for route in routes.ROUTES:
        assert f"{route.method} {route.resource}" in flat, route
    for path in SERVE_PATHS:
        assert f"GET {path}" in flat, path
    assert f"POST {routes.KINESIS_PATH}" in flat
    assert f"  console          {URL}{console.ROUTE}   " in text
    assert f"  HTTP API         {URL}   " in text
    assert f"  Kinesis API      {URL}/kinesis   key LLOGKEY, secret SECRET   " in text
    assert "  export LLOG_OXIA_SERVICE_ADDRESS=127.0.0.1:6648" in text
    served = text[text.index("  HTTP API") : text.index("  Oxia standalone")].splitlines()
    assert max(len(line) for line in served) <= 118
    assert all(line.startswith(("  ", "    ")) and not line.endswith(" ") for line in served)


def test_objects_without_their_index_are_offered_llog_rebuild_before_make_dev_reset(tmp_path: Path) -> None:
    objects = tmp_path / "s3" / "buckets" / "wal-bucket" / "logs"
    for folder in ("payments", "orders", "wal-shared", "__catalog"):
        (objects / folder).mkdir(parents=True)
    assert ".venv/bin/llog adopt-namespace" not in str(dev.broken_data(tmp_path, "wal-bucket", "logs"))
    (objects / "__catalog" / "namespace.json").write_text("{}")  # GC has run: it waits for adopt-namespace

    text = dev.broken_data(tmp_path, "wal-bucket", "logs")

    assert text is not None
    assert text.splitlines()[0].endswith(f"{tmp_path / 's3'} exists but {tmp_path / 'oxia'} does not:")
    rebuild, reset = text.index(".venv/bin/llog rebuild --topic TOPIC"), text.index("`make dev-reset`")
    assert rebuild < reset
    assert 'docs/RECOVERY.md, "Rebuild from S3"' in text
    assert f"for each topic folder in {objects}\n     (orders, payments):" in text  # not wal-shared or __catalog
    assert f"mkdir {tmp_path / 'oxia'} && LLOG_DEV_COMPACTION_INTERVAL_S=86400 LLOG_DEV_GC_INTERVAL_S=86400" in text
    assert text.index(".venv/bin/llog adopt-namespace") < text.index("3. stop that make dev")
    assert "these records with them" in text.splitlines()[-1]


def test_an_index_without_its_objects_is_offered_only_make_dev_reset(tmp_path: Path) -> None:
    (tmp_path / "oxia").mkdir()
    text = dev.broken_data(tmp_path, "wal-bucket", "logs")
    assert text is not None
    assert "oxia exists but" in text
    assert "rebuild" not in text
    assert text.endswith("Run `make dev-reset` to delete both and start from an empty log.")


def test_both_or_neither_directory_is_served(tmp_path: Path) -> None:
    assert dev.broken_data(tmp_path, "wal-bucket", "logs") is None
    (tmp_path / "oxia").mkdir()
    (tmp_path / "s3").mkdir()
    assert dev.broken_data(tmp_path, "wal-bucket", "logs") is None
