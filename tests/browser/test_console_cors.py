"""The console against another origin's API, as against a deployed stack: CORS end to end in Chromium.

The page comes from the module's ``llog serve``; the Connection dialog points it at a second ``llog
serve`` (a process of its own, on its own root prefix) started with ``LLOG_CORS_ORIGINS`` set to the
first one's origin. The second runs the same handlers as the functions, so every call the page makes
is a cross-origin request that Chromium lets the page read only with ``Access-Control-Allow-Origin``,
after a preflight (the API key header makes even a GET preflighted). A page from an origin not in
the list gets nothing. The Metrics page is not covered: ``/metrics`` is llog serve's own route, which
a deployed stack does not have.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from functions.common import cors
from llog.config import S3Config
from server.serve import LlogServer
from tests.conftest import OxiaServer, serve_env

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.oxia
ROOT = Path(__file__).resolve().parents[2]
API_KEY = "console-test-key"  # llog serve ignores it; its header makes every request preflighted


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        doc: dict[str, Any] = json.load(answer)
    return doc


@pytest.fixture(scope="module")
def remote_api(
    console_server: LlogServer, oxia_server: OxiaServer, s3_config: S3Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A second ``llog serve`` that admits the console server's origin; its base URL."""
    log = tmp_path_factory.mktemp("remote-serve") / "serve.log"
    env = {
        **os.environ,
        **serve_env(s3_config, f"r-cors-{uuid.uuid4().hex[:8]}"),
        "LLOG_OXIA_SERVICE_ADDRESS": oxia_server.address,
        cors.ORIGINS_ENV: console_server.url,
    }
    with log.open("wb") as output:  # a file, not a pipe: it logs every request and must never block
        proc = subprocess.Popen(
            [sys.executable, "-m", "server.serve", "--port", "0"], cwd=ROOT, env=env, stderr=output
        )
    try:
        url = None
        deadline = time.monotonic() + 60
        while url is None and proc.poll() is None and time.monotonic() < deadline:
            for line in log.read_text().splitlines():
                if "listening on " in line:
                    url = line.split("listening on ", 1)[1].split()[0]
            time.sleep(0.1)
        assert url is not None, f"the second llog serve did not start: {log.read_text()}"
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def connect(page: Page, base: str) -> None:
    page.get_by_role("button", name="Connection").click()
    page.get_by_label("API base URL").fill(base)
    page.get_by_label("API key (sent as x-api-key)").fill(API_KEY)
    page.get_by_role("button", name="Save").click()


def test_the_console_works_against_an_api_on_another_origin(page: Page, remote_api: str) -> None:
    topic = f"remote-{uuid.uuid4().hex[:8]}"
    post(remote_api + "/topics", {"topic": topic, "partitions": 1})
    post(remote_api + "/produce", {"topic_partitions": [{"topic": topic, "partition": 0, "records": ["first"]}]})
    page.goto("/console")
    connect(page, remote_api)
    # The dialog's close event, which shows the new endpoint, is a task queued after the click returns.
    page.wait_for_function(
        "expected => document.getElementById('endpoint').textContent === expected", arg=f"{remote_api} · API key"
    )

    # GET /topics and /topics/{topic}: the topic exists on the second server only.
    page.get_by_role("link", name=topic, exact=True).wait_for()

    # POST /produce (JSON body) from the form, then POST /consume in the record browser.
    page.goto("/console#/produce")
    page.get_by_label("Topic", exact=True).fill(topic)
    page.get_by_label("Partition", exact=True).fill("0")
    page.get_by_label("Value", exact=True).fill("across origins")
    page.get_by_role("button", name="Produce").click()
    page.get_by_text(f"Written to {topic}/0 at offset 2").wait_for()
    page.get_by_role("link", name="Show it in the record browser").click()
    row = page.locator("tr[data-offset='2']")
    row.wait_for()
    assert row.locator("pre.value").inner_text() == "across origins"

    # An error answer is readable too: the function's 404, not a NetworkError.
    page.goto("/console#/topics/no-such-topic-here")
    error = page.get_by_role("alert")
    error.wait_for()
    assert error.inner_text().startswith("UnknownTopic: ")


def test_a_page_from_an_origin_not_listed_cannot_read_the_api(
    browser: Browser, console_server: LlogServer, remote_api: str
) -> None:
    # The same console from http://localhost:<port>: another origin than http://127.0.0.1:<port>.
    other_origin = console_server.url.replace("127.0.0.1", "localhost")
    assert other_origin != console_server.url
    context = browser.new_context(base_url=other_origin)
    context.set_default_timeout(15_000)
    try:
        page = context.new_page()
        page.goto("/console")
        connect(page, remote_api)
        error = page.get_by_role("alert")
        error.wait_for()
        assert error.inner_text().startswith("NetworkError: GET ")
    finally:
        context.close()


def test_the_server_with_origins_set_still_serves_its_own_console(browser: Browser, remote_api: str) -> None:
    # Same origin: its own origin is not in the list, and the page needs no CORS header.
    topic = f"own-{uuid.uuid4().hex[:8]}"
    post(remote_api + "/produce", {"topic_partitions": [{"topic": topic, "partition": 0, "records": ["x"]}]})
    context = browser.new_context(base_url=remote_api)
    context.set_default_timeout(15_000)
    try:
        page = context.new_page()
        page.goto("/console")
        page.get_by_role("link", name=topic, exact=True).wait_for()
        page.goto(f"/console#/topics/{topic}/0")
        assert page.locator("tr[data-offset='1'] pre.value").inner_text() == "x"
    finally:
        context.close()
