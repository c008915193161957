"""What a page of another site can make Chromium send to ``llog serve``, and that none of it is served.

A page of another origin (another local server: Chromium's Private Network Access blocks a public page's
requests to 127.0.0.1, other browsers do not, and a page of the same network is not blocked) sends
what needs no CORS preflight: a ``text/plain`` ``fetch`` in ``no-cors`` mode, a bodiless one, and a form
posted as ``text/plain`` whose text is JSON. Then DNS rebinding: a browser resolving ``evil.example`` to
127.0.0.1 gives a page of evil.example the server as its own origin, and it reads and writes with its
own name in ``Host``. Each is refused (415, 421) and nothing is written (functions/common/browser.py,
``AllowedHosts`` in server/serve.py); the console's own requests still work (test_console.py).
"""

from __future__ import annotations

import http.server
import json
import threading
import urllib.request
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from server.serve import LlogServer
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.browser.test_console import new_topic, produce

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.oxia
EVIL = "http://evil.example"


def get(server: LlogServer, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(server.url + path, timeout=30) as answer:
        doc: dict[str, Any] = json.load(answer)
    return doc


def partition_state(server: LlogServer, topic: str) -> tuple[int, str]:
    doc = get(server, f"/topics/{topic}/partitions/0")
    return doc["high_watermark"], doc["log_state"]


@pytest.fixture
def attacker(browser: Browser) -> Iterator[Page]:
    """A page of http://127.0.0.1:<another port>, served by a server of its own."""

    class Blank(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            page = b"<!doctype html><title>another site</title>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Blank)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    context = browser.new_context()
    context.set_default_timeout(15_000)
    tab = context.new_page()
    tab.goto(f"http://127.0.0.1:{site.server_address[1]}/attack.html")
    try:
        yield tab
    finally:
        context.close()
        site.shutdown()
        thread.join(10)


def test_a_page_of_another_site_cannot_produce_fence_or_create_topics(attacker: Page, console_server: LlogServer):
    topic = new_topic("csrf")
    produce(console_server, topic, 0, ["before"])
    before = partition_state(console_server, topic)
    base = console_server.url
    created = new_topic("csrf-created")
    produced = json.dumps({"topic_partitions": [{"topic": topic, "partition": 0, "records": ["forged"]}]})
    attacker.evaluate(
        """async ([base, produced, create]) => {
            const opts = {method: "POST", mode: "no-cors"};
            await fetch(base + "/produce", {...opts, headers: {"content-type": "text/plain"}, body: produced});
            await fetch(base + "/topics", {...opts, body: create});  // text/plain;charset=UTF-8: a string body
        }""",
        [base, produced, json.dumps({"topic": created, "partitions": 1})],
    )
    attacker.set_content(f'<form method="post" enctype="text/plain" action="{base}/topics/{topic}/partitions/0/fence">')
    with attacker.expect_navigation():
        attacker.evaluate("document.forms[0].submit()")
    assert partition_state(console_server, topic) == before  # nothing produced, not fenced
    assert created not in [t["topic"] for t in get(console_server, "/topics")["topics"]]
    assert json.loads(attacker.locator("body").inner_text())["error_type"] == "UnsupportedMediaType"


@pytest.fixture
def rebound(browser: Browser, console_server: LlogServer) -> Iterator[Page]:
    """A page of evil.example once its name resolves to 127.0.0.1: a Chromium told so, at a URL of that name
    (the attacker's script then runs in it: ``evaluate``)."""
    rule = "--host-resolver-rules=MAP evil.example 127.0.0.1"
    chromium = browser.browser_type.launch(executable_path=str(CHROMIUM), args=[*CHROMIUM_ARGS, rule])
    try:
        tab = chromium.new_context().new_page()
        tab.goto(f"{EVIL}:{console_server.port}/attack.html")
        yield tab
    finally:
        chromium.close()


def test_a_rebound_name_reads_and_writes_nothing(rebound: Page, console_server: LlogServer):
    topic = new_topic("rebind")
    produce(console_server, topic, 0, ["before"])
    before = partition_state(console_server, topic)
    body = json.dumps({"topic_partitions": [{"topic": topic, "partition": 0, "records": ["forged"]}]})
    statuses = rebound.evaluate(
        """async ([topic, body]) => {
            const read = await fetch("/topics");  // same origin now: the page could read the answer
            const json = {"content-type": "application/json"};
            const write = await fetch("/produce", {method: "POST", headers: json, body});
            const remove = await fetch(`/topics/${topic}`, {method: "DELETE"});
            return [read.status, (await read.json()).error_type, write.status, remove.status];
        }""",
        [topic, body],
    )
    assert statuses == [421, "MisdirectedRequest", 421, 421]
    assert partition_state(console_server, topic) == before
