"""The console of ``llog serve``: static ES modules and CSS at ``/console``, uPlot from node_modules.

No build step: the browser loads ``static/`` as it is. uPlot comes from the
npm package pinned in package.json (``npm ci``, which ``make setup`` runs), at
``/console/vendor/``; nothing is fetched from the internet. Without it the
console still works and says the charts need ``make setup``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROUTE = "/console"  # every console path is one route label in /metrics
STATIC = Path(__file__).resolve().parent / "static"
UPLOT = Path(__file__).resolve().parents[2] / "node_modules" / "uplot" / "dist"
VENDOR = {"uPlot.esm.js": "uPlot.esm.js", "uPlot.min.css": "uPlot.min.css"}  # what the page may load from uPlot
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
# A flat name per directory level: no "..", no hidden files.
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")

Answer = tuple[int, list[tuple[str, str]], bytes]


def owns(path: str) -> bool:
    return path == ROUTE or path.startswith(ROUTE + "/")


def serve(path: str) -> Answer:
    """The file at ``path`` (``/console`` is the page), or a JSON 404."""
    rest = path[len(ROUTE) :].strip("/") or "index.html"
    parts = rest.split("/")
    if not all(_NAME.fullmatch(part) for part in parts):
        return _not_found(path)
    if parts[0] == "vendor":
        file = UPLOT / VENDOR[parts[1]] if len(parts) == 2 and parts[1] in VENDOR else None
    else:
        file = STATIC.joinpath(*parts)
    if file is None or file.suffix not in CONTENT_TYPES or not file.is_file():
        return _not_found(path)
    headers = [
        ("Content-Type", CONTENT_TYPES[file.suffix]),
        ("Cache-Control", "no-cache"),  # revalidated: an upgraded console is seen at the next load
        ("X-Content-Type-Options", "nosniff"),
    ]
    return 200, headers, file.read_bytes()


def _not_found(path: str) -> Answer:
    body = {"error": f"no console file at {path}", "error_type": "NotFound", "retriable": False}
    return 404, [("Content-Type", "application/json")], json.dumps(body).encode()
