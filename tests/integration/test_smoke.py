"""``make smoke`` (scripts/smoke.py) as a subprocess: against a real ``llog serve`` on the session's Oxia and moto
S3 it passes every step and deletes its topics; against a closed port, or an API Gateway's refusal (a stdlib
server answering as the gateway does), it fails naming the step and the hint; and the README's examples it
reads parse into the produce and consume bodies."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devserver.devstack import free_port
from llog.config import S3Config
from scripts.smoke import README, ReadmeDrift, on_topic, readme_bodies
from tests.conftest import OxiaServer, serve_env
from tests.serve_tasks import ServeTask

ROOT = Path(__file__).resolve().parents[2]
STEPS = ("produce (README)", "consume (README)", "create topic", "produce (client)", "consume (client)",
         "commit, lag 0", "delete topics")  # fmt: skip
SMOKE_TIMEOUT_S = 180  # the whole run on a loaded machine; it takes seconds


def run_smoke(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **(env or {})}
    env.pop("LLOG_API_KEY", None)  # the test says which auth it means
    return subprocess.run([sys.executable, "scripts/smoke.py", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=SMOKE_TIMEOUT_S)  # fmt: skip


@pytest.fixture
def llog_serve(s3_config: S3Config, root: str, oxia_server: OxiaServer) -> Iterator[ServeTask]:
    env = {**os.environ, **serve_env(s3_config, root), "LLOG_OXIA_SERVICE_ADDRESS": oxia_server.address,
           "LLOG_SERVE_ACCESS_LOG": "off"}  # fmt: skip
    with ServeTask(env) as task:
        yield task


Answer = Callable[[str, str, bytes], tuple[int, bytes]]  # (method, path, body) -> (status, JSON body)


@contextlib.contextmanager
def gateway(answer: Answer) -> Iterator[str]:
    """A stdlib HTTP server on a free port standing for API Gateway, each request answered by ``answer``; its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def handle_request(self) -> None:
            status, body = answer(self.command, self.path, self.rfile.read(int(self.headers["content-length"] or 0)))
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = handle_request

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/dev/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def refusing(status: int, message: str) -> Answer:
    """Every request answered as API Gateway refuses one: ``status`` with ``{"message": ...}``."""
    return lambda method, path, body: (status, json.dumps({"message": message}).encode())


def api_key_stage(upstream: str) -> Answer:
    """A stage with ``llog:apiAuth=api_key`` in front of ``upstream``: the topic writes are IAM-only, so an API key's
    ``POST /topics`` and ``DELETE /topics/<topic>`` are refused (403); the rest is passed through."""

    def answer(method: str, path: str, body: bytes) -> tuple[int, bytes]:
        path = path.removeprefix("/dev")
        if (method, path) == ("POST", "/topics") or (method == "DELETE" and path.startswith("/topics/")):
            return refusing(403, "Forbidden")(method, path, body)
        request = urllib.request.Request(upstream + path, data=body if method != "GET" else None, method=method,
                                         headers={"content-type": "application/json"})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    return answer


@pytest.mark.oxia
@pytest.mark.parametrize(
    "auth",
    [(), ("--api-key", "any"), ("--sigv4-region", "eu-west-1")],
    ids=["no auth", "api key", "sigv4"],
)
def test_smoke_passes_every_step_against_llog_serve_and_deletes_its_topics(
    llog_serve: ServeTask, auth: tuple[str, ...]
) -> None:
    """llog serve ignores the credentials: the auth options' requests (signed ones too) reach it whole."""
    credentials = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    done = run_smoke("--url", llog_serve.url, "--records", "60", *auth, env=credentials)
    assert done.returncode == 0, done.stdout + done.stderr
    outcomes = [line.split()[0] for line in done.stdout.splitlines()[: len(STEPS)]]
    names = [line[5:27].strip() for line in done.stdout.splitlines()[: len(STEPS)]]
    assert (outcomes, names) == (["ok"] * len(STEPS), list(STEPS)), done.stdout
    assert "60 records, partitions [0, 1, 2]" in done.stdout
    assert done.stdout.splitlines()[-1].startswith(f"smoke test passed against {llog_serve.url}")
    with urllib.request.urlopen(llog_serve.url + "/topics", timeout=30) as answer:
        assert [t["topic"] for t in json.load(answer)["topics"]] == []  # the test's own root: only the smoke's


@pytest.mark.oxia
def test_smoke_with_keep_leaves_its_topics(llog_serve: ServeTask) -> None:
    done = run_smoke("--url", llog_serve.url, "--records", "5", "--keep")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "delete topics" not in done.stdout
    with urllib.request.urlopen(llog_serve.url + "/topics", timeout=30) as answer:
        kept = sorted(t["topic"] for t in json.load(answer)["topics"])
    assert len(kept) == 2, kept
    assert f"kept {kept[0]}, {kept[1]} (--keep)" in done.stdout


@pytest.mark.oxia
def test_smoke_with_an_api_key_passes_and_names_the_topics_its_refused_delete_left_behind(
    llog_serve: ServeTask,
) -> None:
    with gateway(api_key_stage(llog_serve.url)) as url:
        done = run_smoke("--url", url, "--records", "20", "--api-key", "key")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the produce creates it with one partition" in done.stdout
    assert "20 records, partitions [0]" in done.stdout
    with urllib.request.urlopen(llog_serve.url + "/topics", timeout=30) as answer:
        left = sorted(t["topic"] for t in json.load(answer)["topics"])
    assert len(left) == 2, left
    [delete] = [line for line in done.stdout.splitlines() if "delete topics" in line]
    assert delete.startswith("warn delete topics"), done.stdout
    assert f"403: topic delete is IAM-only with an API key; left behind: {left[0]}, {left[1]}" in delete


def test_smoke_on_a_closed_port_fails_at_the_first_step_with_the_unreachable_hint() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = run_smoke("--url", url)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("FAIL produce (README)"), done.stdout
    assert f"smoke test FAILED at step 'produce (README)' against {url}" in done.stderr
    assert f"hint: cannot reach {url} (Failed to establish a new connection: [Errno 111] Connection refused)" in (
        done.stderr
    )
    assert "delete topics" not in done.stdout  # nothing was written: nothing to clean up


@pytest.mark.parametrize(
    ("status", "message", "args", "hint"),
    [
        (403, "Forbidden", (), "hint: 403 Forbidden: the API needs SigV4 (pass --sigv4-region REGION with "
         "credentials allowed execute-api:Invoke) or an API key (--api-key)"),
        (403, "Forbidden", ("--api-key", "wrong"), "hint: 403 Forbidden: the API key was refused"),
        (404, "Not Found", (), "hint: 404 Not Found: is --url the stage URL, the stack's ApiUrl output"),
    ],
)  # fmt: skip
def test_smoke_refused_by_the_gateway_fails_at_the_first_step_with_the_auth_or_stage_hint(
    status: int, message: str, args: tuple[str, ...], hint: str
) -> None:
    with gateway(refusing(status, message)) as url:
        done = run_smoke("--url", url, *args)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("FAIL produce (README)"), done.stdout
    assert f"answered {status}, not 200: " + json.dumps({"message": message}) in done.stderr
    assert hint in done.stderr, done.stderr
    assert "delete topics" not in done.stdout  # the gateway answered, not llog: nothing to clean up


def test_the_readme_block_parses_into_the_produce_and_consume_bodies() -> None:
    produce, consume = readme_bodies(README.read_text(encoding="utf-8"))
    assert [(e["topic"], e["partition"]) for e in produce["topic_partitions"]] == [("orders", 0), ("orders", 1)]
    assert produce["topic_partitions"][0]["records"] == ["alpha", "beta"]
    assert [(e["partition"], e["fetch_offset"]) for e in consume["topic_partitions"]] == [(0, 1), (1, 1)]
    assert {e["topic"] for e in on_topic(consume, "smoke-x")["topic_partitions"]} == {"smoke-x"}
    assert consume["topic_partitions"][0]["topic"] == "orders"  # on_topic copies


@pytest.mark.parametrize(
    ("readme", "complaint"),
    [
        ("# llog\n", "no bash block under"),
        ("## The HTTP API\n\n```bash\ncurl -X POST http://h/produce -d '{\"topic_partitions\": [}'\n```\n", "not JSON"),
        ("## The HTTP API\n\n```bash\ncurl -X POST http://h/produce -d '{\"topic_partitions\": "
         "[{\"partition\": 0, \"records\": []}]}'\n```\n", "no POST /consume"),
        ("## The HTTP API\n\n```bash\ncurl -X POST http://h/consume -d '{\"topic_partitions\": [{\"partition\": 0}]}'"
         "\n```\n", "POST /consume body has no topic_partitions with partition and fetch_offset"),
    ],
)  # fmt: skip
def test_a_readme_block_that_no_longer_parses_is_refused(readme: str, complaint: str) -> None:
    with pytest.raises(ReadmeDrift, match=complaint):
        readme_bodies("\n" + readme)
