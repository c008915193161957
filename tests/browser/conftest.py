"""Real-browser tests of the console: Playwright driving Debian's Chromium against ``llog serve``.

The browser is ``/usr/bin/chromium`` (``make setup`` installs it with apt as
root); Playwright's own browser downloads are never used. Without it (or
without the ``playwright`` package) the tests skip with the reason;
``LLOG_REQUIRE_BROWSER=1`` (CI) turns that into a failure, as
``LLOG_REQUIRE_OXIA`` does for Oxia. One ``llog serve`` per module, on the
session's Oxia and moto S3 under a root of the module's own.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from llog.config import S3Config
from server.serve import LlogServer
from tests.conftest import OxiaServer, serve_env, serving

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
UPLOT = Path(__file__).resolve().parents[2] / "node_modules" / "uplot" / "dist" / "uPlot.esm.js"


def _browser_unavailable(reason: str) -> NoReturn:
    if os.environ.get("LLOG_REQUIRE_BROWSER"):
        pytest.fail(f"a browser is required (LLOG_REQUIRE_BROWSER is set): {reason}")
    pytest.skip(f"no browser: {reason}")


def launch_chromium(playwright: Any) -> Browser:
    """Debian's Chromium, headless, with nothing that reaches the network on its own."""
    browser: Browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    return browser


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        _browser_unavailable(f"{CHROMIUM} is missing (make setup installs it: apt-get install -y chromium, as root)")
    if not UPLOT.exists():
        _browser_unavailable(f"{UPLOT} is missing: run make setup (npm ci)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _browser_unavailable("the playwright package is not installed (make setup)")
    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


@contextlib.contextmanager
def serving_console(oxia_server: OxiaServer, s3_config: S3Config, root: str, **settings: str) -> Iterator[LlogServer]:
    """``llog serve`` under ``root`` on the session's servers, with ``settings`` (``LLOG_*``) besides."""
    with serving(
        {**serve_env(s3_config, root), "LLOG_OXIA_SERVICE_ADDRESS": oxia_server.address, **settings}
    ) as server:
        yield server


@pytest.fixture(scope="module")
def console_server(oxia_server: OxiaServer, s3_config: S3Config) -> Iterator[LlogServer]:
    """``llog serve`` for the module, under a root prefix of its own (tests use topics of their own)."""
    with serving_console(oxia_server, s3_config, f"r-browser-{uuid.uuid4().hex[:8]}") as server:
        yield server


@pytest.fixture
def page(browser: Browser, console_server: LlogServer) -> Iterator[Page]:
    """A fresh browser context (no saved connection settings) on the module's server."""
    context = browser.new_context(base_url=console_server.url, viewport={"width": 1400, "height": 900})
    context.set_default_timeout(15_000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield tab
    finally:
        context.close()
    assert not errors, f"uncaught errors in the page: {errors}"
