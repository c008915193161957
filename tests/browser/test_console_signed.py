"""The console against an ``llog serve`` with ``LLOG_SERVE_AUTH=sigv4``, in Chromium: the page signs each request
(server/console/static/api.js, WebCrypto) with the key entered in its Connection dialog, which this tab keeps."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from llog.config import S3Config
from llog.service.keys import KeyPermissions
from llog_client import Producer, SigV4Auth
from server.serve import LlogServer
from tests.browser.conftest import serving_console
from tests.conftest import OxiaServer

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.oxia


@pytest.fixture(scope="module")
def console_server(oxia_server: OxiaServer, s3_config: S3Config, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[LlogServer]:  # fmt: skip
    """This module's ``llog serve``: every request but the console's pages must be signed."""
    sealing_key = tmp_path_factory.mktemp("keys") / "sealing.key"
    root = f"r-signed-{uuid.uuid4().hex[:8]}"
    with serving_console(
        oxia_server, s3_config, root, LLOG_SERVE_AUTH="sigv4", LLOG_KEYS_SEALING_KEY_FILE=str(sealing_key)
    ) as server:
        yield server


def test_the_console_signs_its_requests_with_the_key_it_was_given(page: Page, console_server: LlogServer) -> None:
    from playwright.sync_api import expect

    key, secret = console_server.services.access_keys().create("console", KeyPermissions(admin=True))
    topic = f"signed-{uuid.uuid4().hex[:8]}"
    with Producer(console_server.url, SigV4Auth.with_key(key.access_key_id, secret)) as producer:
        producer.send(topic, b"written by the client", partition=0).result(30)

    page.goto("/console")
    expect(page.get_by_text("MissingAuthenticationToken")).to_be_visible()  # unsigned: refused

    page.get_by_role("button", name="Connection").click()
    page.get_by_label("Access key id").fill(key.access_key_id)
    page.get_by_label("Secret access key").fill(secret)
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#endpoint")).to_contain_text(f"signed by {key.access_key_id}")
    expect(page.get_by_role("link", name=topic, exact=True)).to_be_visible()

    page.goto(f"/console#/topics/{topic}/0")  # a consume: a signed POST with a body
    expect(page.locator("tr[data-offset='1'] pre.value")).to_have_text("written by the client")

    page.goto("/console#/produce")
    page.get_by_label("Topic", exact=True).fill(topic)
    page.get_by_label("Partition", exact=True).fill("0")
    page.get_by_label("Value", exact=True).fill("written by the page")
    page.get_by_role("button", name="Produce").click()
    page.get_by_text(f"Written to {topic}/0 at offset 2").wait_for()
