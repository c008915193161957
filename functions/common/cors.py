"""CORS of the HTTP API: which browser pages (origins) may call it, shared by infra and the functions.

``llog:corsOrigins`` (infra/settings.py) lists the origins; infra answers the preflight
(``OPTIONS``) at the gateway with the headers and methods below, and gives the API functions
``LLOG_CORS_ORIGINS`` (comma-separated), from which their resolver (``functions.common.http``)
adds ``Access-Control-Allow-Origin`` to every answer to an allowed ``Origin``, errors included.
Unset or empty: no CORS headers at all. No Powertools here: infra reads this module.
"""

from __future__ import annotations

from functions.common import routes

ORIGINS_ENV = "LLOG_CORS_ORIGINS"  # read by llog.config.cors_origins_from_env
# What the console and the clients send: JSON bodies, API keys, and SigV4's headers (spelled as
# Powertools spells its built-in list, so the two merge without duplicates).
ALLOW_HEADERS = (
    "Content-Type",
    "X-Api-Key",
    "Authorization",
    "X-Amz-Date",
    "X-Amz-Security-Token",
    "X-Amz-Content-Sha256",
)
ALLOW_METHODS = tuple(sorted({route.method for route in routes.ROUTES} | {"OPTIONS"}))
# How long a browser may reuse a preflight's answer (Chromium caps it at 2 hours).
MAX_AGE_S = 600


def environment(origins: tuple[str, ...]) -> dict[str, str]:
    """``LLOG_CORS_ORIGINS`` for the API functions: nothing when there are no origins."""
    return {ORIGINS_ENV: ",".join(origins)} if origins else {}
