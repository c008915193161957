"""``make screenshots``: the console's pages as PNGs (``docs/img/console-*.png``) on sample data.

A temporary stack (Oxia standalone, moto S3, ``llog serve``) gets sample
topics, a consumer group and some traffic, then Debian's Chromium
(``/usr/bin/chromium``, driven by Playwright) takes each page. Usage:
``python -m devserver.screenshots docs/img``.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import random
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from devserver.devstack import MotoS3, OxiaProcess, find_oxia_binary

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
BUCKET = "llog-console"
TRAFFIC_S = 40  # of produce and consume before the metrics page is taken (a point a second)


class Api:
    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"content-type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.load(answer)

    def produce(self, topic: str, partition: int, records: list[Any]) -> None:
        self.call(
            "POST", "/produce", {"topic_partitions": [{"topic": topic, "partition": partition, "records": records}]}
        )


def order(n: int, rng: random.Random) -> dict[str, Any]:
    items = rng.sample(["tea", "coffee", "milk", "bread", "apples", "rice", "soap"], rng.randint(1, 3))
    return {
        "value": json.dumps(
            {
                "order_id": 10_000 + n,
                "customer": f"c-{rng.randint(1, 40):03d}",
                "items": items,
                "total_eur": round(rng.uniform(3, 90), 2),
                "paid": rng.random() > 0.1,
            }
        ),  # fmt: skip
        "key": f"c-{n % 40:03d}",
        "headers": {"source": "web" if n % 3 else "app", "schema": "order.v2"},
    }


def sample_data(api: Api) -> None:
    rng = random.Random(7)
    api.call("POST", "/topics", {"topic": "orders", "partitions": 3, "config": {"retention_ms": 7 * 86_400_000}})
    api.call("POST", "/topics", {"topic": "payments", "partitions": 2,
                                 "config": {"append_protocol": "cas", "retention_bytes": 1 << 30}})  # fmt: skip
    for batch in range(6):
        for p in range(3):
            api.produce("orders", p, [order(batch * 100 + p * 10 + i, rng) for i in range(25)])
    for p in range(2):
        api.produce("payments", p, [json.dumps({"payment": i, "ok": True}) for i in range(40)])
    api.produce("clicks", 0, [f"GET /products/{rng.randint(1, 500)} 200" for _ in range(120)])
    frames = [{"base64": base64.b64encode(bytes(rng.randrange(256) for _ in range(24))).decode()} for _ in range(30)]
    api.produce("sensor-frames", 0, frames)
    api.call("POST", "/topics/orders/partitions/0/compact")
    api.call("POST", "/topics/payments/partitions/0/compact")


def consumer_group(api: Api) -> None:
    """A group of two members that committed part of ``orders``, and one that committed nothing."""
    session = {"topics": ["orders"], "session_timeout_ms": 300_000}
    first = api.call("POST", "/groups/billing/join", session)
    second = api.call("POST", "/groups/billing/join", session)
    first = api.call("POST", "/groups/billing/join", {**session, "member_id": first["member_id"]})  # the new generation
    for member in (first, second):
        offsets = [
            {"topic": "orders", "partition": p, "offset": 60 + 20 * p}
            for assigned in member["assignments"]
            for p in assigned["partitions"]
        ]
        commit = {"member_id": member["member_id"], "generation": second["generation"], "offsets": offsets}
        api.call("POST", "/groups/billing/commit", commit)
    api.call("POST", "/groups/audit/join", {"topics": ["payments"], "session_timeout_ms": 300_000})


def traffic(api: Api, stop: threading.Event) -> None:
    rng = random.Random(11)
    offset = api.call("GET", "/topics/clicks/partitions/0")["next_offset"]  # a consumer at the tail
    while not stop.is_set():
        batch = rng.randint(20, 120)
        api.produce("clicks", 0, [f"GET /products/{rng.randint(1, 500)} 200" for _ in range(batch)])
        request = {"topic_partitions": [{"topic": "clicks", "partition": 0, "fetch_offset": offset}], "max_wait_ms": 0}
        offset = api.call("POST", "/consume", request)["results"][0]["next_fetch_offset"]
        time.sleep(rng.uniform(0.05, 0.25))


def take(out: Path, url: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for theme in ("light", "dark"):
            context = browser.new_context(viewport={"width": 1440, "height": 900}, device_scale_factor=1)
            context.add_init_script(f"localStorage.setItem('llog.console.theme', '{theme}')")
            page = context.new_page()
            suffix = "" if theme == "light" else "-dark"
            page.goto(f"{url}/console?sample_ms=1000#/metrics")  # sampling starts with the page
            api = Api(url)
            stop = threading.Event()
            runner = threading.Thread(target=traffic, args=(api, stop), daemon=True)
            runner.start()
            page.wait_for_timeout(TRAFFIC_S * 1000 if theme == "light" else 15_000)
            stop.set()
            runner.join()
            page.wait_for_timeout(1500)
            page.screenshot(path=str(out / f"console-metrics{suffix}.png"), full_page=True)
            if theme == "dark":
                context.close()
                break
            shots = [
                ("topics", "#/topics", "table tbody tr"),
                ("topic", "#/topics/orders", "table tbody tr"),
                ("records", "#/topics/orders/1?offset=1&size=20", "tr[data-offset]"),
                ("produce", "#/produce", "#produce-form"),
            ]
            for name, route, ready in shots:
                page.goto(f"{url}/console{route}")
                page.locator(ready).first.wait_for()
                page.wait_for_timeout(300)
                page.screenshot(path=str(out / f"console-{name}.png"), full_page=name not in ("records",))
            page.goto(f"{url}/console#/groups")
            page.locator("section.panel").first.wait_for()
            api.produce("orders", 1, [order(9000 + i, random.Random(i)) for i in range(30)])  # the lag grows
            page.wait_for_selector(".lag-growing", timeout=15_000)
            page.screenshot(path=str(out / "console-groups.png"), full_page=True)
            context.close()
        browser.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devserver.screenshots", description=__doc__)
    parser.add_argument("out", type=Path, help="directory of the PNGs (docs/img)")
    args = parser.parse_args(argv)
    binary = find_oxia_binary([ROOT / ".tools" / "bin"])
    if binary is None or not Path(CHROMIUM).exists():
        print(f"make screenshots needs the Oxia server and {CHROMIUM}: run make setup (as root)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's access log
    from server.serve import LlogServer

    with tempfile.TemporaryDirectory(prefix="llog-screenshots-") as tmp:
        oxia = OxiaProcess(binary, Path(tmp) / "oxia")
        oxia.start()
        s3 = MotoS3()
        s3.start()
        server = None
        try:
            s3.create_bucket(BUCKET)
            os.environ.update({
                "LLOG_OXIA_SERVICE_ADDRESS": oxia.address, "LLOG_S3_BUCKET": BUCKET,
                "LLOG_S3_ENDPOINT_URL": s3.endpoint_url, "LLOG_S3_REGION_NAME": "us-east-1",
                "LLOG_S3_ACCESS_KEY_ID": "testing", "LLOG_S3_SECRET_ACCESS_KEY": "testing",
                "LLOG_ROOT_PREFIX": "llog", "LLOG_BATCH_MAX_DELAY_MS": "20", "LLOG_BILLING_SCAN_INTERVAL_S": "5",
            })  # fmt: skip
            server = LlogServer("127.0.0.1", 0).start()
            api = Api(server.url)
            sample_data(api)
            consumer_group(api)
            take(args.out, server.url)
        finally:
            if server is not None:
                server.shutdown()
            s3.stop()
            oxia.stop()
    for png in sorted(args.out.glob("console-*.png")):
        print(png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
