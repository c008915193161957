"""The console in Chromium against ``llog serve`` on the real Oxia: topics, produce, paging, values, charts, compact."""

from __future__ import annotations

import base64
import json
import re
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from server.serve import LlogServer
from tests.browser.conftest import UPLOT

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.oxia
DASH = "\u2013"  # the console's ranges: "Offsets 1\u2013200 of 1\u20131,000"


def post(server: LlogServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    import urllib.request

    request = urllib.request.Request(
        server.url + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        doc: dict[str, Any] = json.load(answer)
    return doc


def produce(server: LlogServer, topic: str, partition: int, records: list[Any]) -> None:
    answer = post(
        server, "/produce", {"topic_partitions": [{"topic": topic, "partition": partition, "records": records}]}
    )
    assert all(r["ok"] for r in answer["results"]), answer


def new_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_the_console_lists_the_topics(page: Page, console_server: LlogServer):
    from playwright.sync_api import expect
    orders = new_topic("orders")
    created = post(
        console_server, "/topics", {"topic": orders, "partitions": 2, "config": {"retention_ms": 86_400_000}}
    )
    produce(console_server, orders, 1, ["a", "b", "c"])
    clicks = new_topic("clicks")
    produce(console_server, clicks, 0, ["x"])

    page.goto("/console")

    row = page.locator("tbody tr", has=page.get_by_role("link", name=orders, exact=True))
    cells = row.locator("td")
    assert cells.nth(0).inner_text() == orders
    assert cells.nth(1).inner_text() == "explicit"
    assert cells.nth(2).inner_text() == "2"  # partitions
    assert cells.nth(3).inner_text() == "3"  # records
    assert cells.nth(8).inner_text() == "sequential"
    assert cells.nth(9).inner_text() == "1.0 d"
    clicks_row = page.locator("tbody tr", has=page.get_by_role("link", name=clicks, exact=True))
    assert clicks_row.locator("td").nth(1).inner_text() == "implicit"

    # Keyboard: the topic link is reachable and opens the topic's partitions.
    page.get_by_role("link", name=orders, exact=True).focus()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf"#/topics/{orders}$"))
    # The partitions' own table (its caption names it): until the view has switched, the topics' table is there.
    partitions = page.get_by_role("table", name=f"Partitions of {orders}").locator("tbody tr")
    expect(partitions).to_have_count(2)
    assert partitions.nth(1).locator("td").nth(3).inner_text() == "3"  # high watermark of partition 1
    # The topic's identity: a topic created again under this name would show another.
    assert created["topic_id"]
    assert created["topic_id"] in page.locator(".stats").first.inner_text()


def test_a_record_produced_from_the_form_shows_in_the_record_browser(page: Page, console_server: LlogServer):
    topic = new_topic("form")
    page.goto("/console#/produce")

    page.get_by_label("Topic", exact=True).fill(topic)
    page.get_by_label("Partition", exact=True).fill("0")
    page.get_by_label("Key", exact=True).fill("user-7")
    page.get_by_label("Value", exact=True).fill("hello from the console")
    page.get_by_label("Headers (optional, one name=value a line)").fill("source=browser")
    page.get_by_role("button", name="Produce").click()

    page.get_by_text(f"Written to {topic}/0 at offset 1").wait_for()
    page.get_by_role("link", name="Show it in the record browser").click()
    row = page.locator("tr[data-offset='1']")
    row.wait_for()
    assert row.locator("pre.value").inner_text() == "hello from the console"
    assert "user-7" in row.inner_text()
    assert "source: browser" in row.inner_text()


def test_paging_through_a_thousand_records(page: Page, console_server: LlogServer):
    topic = new_topic("paging")
    for start in range(0, 1000, 250):
        produce(console_server, topic, 0, [f"record-{i}" for i in range(start + 1, start + 251)])

    page.goto(f"/console#/topics/{topic}/0")
    summary = page.locator("#page-summary")
    page.get_by_label("Per page").select_option("200")
    page.wait_for_function(f"document.querySelector('#page-summary').textContent.startsWith('Offsets 1{DASH}200 ')")

    seen: list[str] = []
    for expected_last in range(200, 1001, 200):
        assert summary.inner_text() == f"Offsets {expected_last - 199:,}{DASH}{expected_last:,} of 1{DASH}1,000"
        values = page.locator("table.records tbody pre.value").all_inner_texts()
        assert len(values) == 200
        seen.extend(values)
        next_button = page.get_by_role("button", name=re.compile("^Next"))
        if expected_last == 1000:
            assert next_button.is_disabled()
            break
        next_button.click()
        page.wait_for_function(
            f"document.querySelector('#page-summary').textContent.startsWith('Offsets {expected_last + 1:,}{DASH}')"
        )
    assert seen == [f"record-{i}" for i in range(1, 1001)]

    # Back one page, then straight to an offset typed in.
    page.get_by_role("button", name=re.compile("Previous$")).click()
    page.wait_for_function(f"document.querySelector('#page-summary').textContent.startsWith('Offsets 601{DASH}800 ')")
    page.get_by_label("From offset").fill("42")
    page.get_by_label("From offset").press("Enter")
    page.wait_for_function(f"document.querySelector('#page-summary').textContent.startsWith('Offsets 42{DASH}241 ')")
    assert page.locator("table.records tbody tr").first.get_attribute("data-offset") == "42"


def test_values_render_as_json_and_as_hex(page: Page, console_server: LlogServer):
    topic = new_topic("render")
    document = {"order": 17, "items": ["tea", "milk"], "paid": True}
    produce(console_server, topic, 0, [json.dumps(document), {"base64": base64.b64encode(b"\x00\x01\xffAB").decode()}])

    page.goto(f"/console#/topics/{topic}/0")
    json_row = page.locator("tr[data-offset='1']")
    binary_row = page.locator("tr[data-offset='2']")
    json_row.wait_for()

    # Detected automatically: the JSON value pretty-printed, the binary one as a hex dump.
    assert json_row.locator("pre.value").get_attribute("data-kind") == "json"
    assert json.loads(json_row.locator("pre.value").inner_text()) == document
    assert json_row.locator("pre.value").inner_text() == json.dumps(document, indent=2)
    assert binary_row.locator("pre.value").get_attribute("data-kind") == "hex"
    assert binary_row.locator("pre.value").inner_text() == f"00000000  {'00 01 ff 41 42':<47}  ...AB"

    # Switchable: the JSON record as hex, then as text.
    json_row.get_by_role("button", name="Hex").click()
    hexdump = json_row.locator("pre.value").inner_text()
    assert hexdump.startswith("00000000  7b 22 6f 72 64 65 72 22")
    json_row.get_by_role("button", name="Text").click()
    assert json_row.locator("pre.value").inner_text() == json.dumps(document)
    assert json_row.get_by_role("button", name="Text").get_attribute("aria-pressed") == "true"

    # Copy as JSON: the record as the API returned it.
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    json_row.get_by_role("button", name="Copy JSON").click()
    copied = json.loads(page.evaluate("navigator.clipboard.readText()"))
    assert (copied["offset"], copied["value"]) == (1, json.dumps(document))


@pytest.mark.skipif(not UPLOT.exists(), reason="uPlot is not installed (npm ci)")
def test_the_charts_draw_points_from_metrics(page: Page, console_server: LlogServer):
    topic = new_topic("charts")
    page.goto("/console?sample_ms=300#/metrics")
    chart = page.locator("#chart-records")
    chart.locator("canvas").wait_for()
    for round_ in range(3):
        produce(console_server, topic, 0, [f"v{round_}-{i}" for i in range(20)])
        page.wait_for_timeout(350)
    page.wait_for_function("Number(document.querySelector('#chart-records').dataset.points) >= 3")

    # uPlot's own data: [times, produced/s, consumed/s]; the rounds above made some produced rates non-zero.
    times, produced, consumed = page.evaluate("document.querySelector('#chart-records').uplot.data")
    assert len(times) == len(produced) == len(consumed) >= 3
    assert any(rate and rate > 0 for rate in produced)
    assert all(rate == 0 for rate in consumed if rate is not None)
    legend = page.locator("#chart-records .u-legend").inner_text()
    assert "Produced" in legend
    assert "Consumed" in legend
    for chart_id in ("records", "bytes", "latency", "ops", "cost"):
        assert page.locator(f"#chart-{chart_id} canvas").count() == 1
    assert page.evaluate("document.querySelector('#chart-records').uplot.axes[1].label") == "records/s"
    assert page.locator("#metric-stats").inner_text().count("$") >= 1


def test_compact_now_asks_first_then_compacts(page: Page, console_server: LlogServer):
    topic = new_topic("compact")
    for batch in range(3):
        produce(console_server, topic, 0, [f"b{batch}-{i}" for i in range(5)])

    page.goto(f"/console#/topics/{topic}")
    row = page.locator("table tbody tr").first
    cells = row.locator("td")
    assert cells.nth(8).inner_text() == "15"  # compaction lag
    assert cells.nth(7).inner_text() == "3"  # WAL batches

    row.get_by_role("button", name="Compact now").click()
    dialog = page.get_by_role("dialog")
    assert f"Compact {topic}/0?" in dialog.inner_text()
    dialog.get_by_role("button", name="Cancel").click()
    assert page.get_by_role("dialog").count() == 0

    row.get_by_role("button", name="Compact now").click()
    page.get_by_role("dialog").get_by_role("button", name="Compact", exact=True).click()
    page.get_by_text(f"Compacted 15 records of {topic}/0").wait_for()
    page.wait_for_function(
        "document.querySelector('table tbody tr td:nth-child(9)') && "
        "document.querySelector('table tbody tr td:nth-child(9)').textContent === '0'"
    )
    assert page.locator("table tbody tr").first.locator("td").nth(6).inner_text() == "1"  # one compacted object
