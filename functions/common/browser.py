"""Requests any web page can make a browser send: refused on every route that changes state (docs/HTTP_API.md).

A page of any site may send a ``POST`` whose ``Content-Type`` is ``text/plain``,
``application/x-www-form-urlencoded`` or ``multipart/form-data``, or that has no
body and no ``Content-Type``, without a CORS preflight: the browser sends it
and only hides the answer from the page. Were such a request served, a page
open in a browser that reaches ``llog serve`` (``make dev`` on the developer's
machine, a task of the serve fleet from inside its network) could produce,
fence, compact or create topics (cross-site request forgery).

So every method but ``GET``, ``HEAD`` and ``OPTIONS`` must either say
``Content-Type: application/json`` (parameters such as ``charset`` allowed),
which a page can send to another origin only after a preflight that the
server answers for the origins of ``LLOG_CORS_ORIGINS`` alone; or carry no
``Content-Type``, no body and no ``Origin`` (``curl -X POST .../fence``, a
client library's request without a body): browsers send ``Origin`` with every
``POST`` and ``DELETE``. Anything else is refused with 415
``UnsupportedMediaType`` before the handler runs. ``llog serve`` refuses it
from the request's head (``server.serve``); the functions' resolver
(``functions.common.http``) refuses it too, so a deployed API behaves alike.

And ``llog serve`` answers only to the names it is reached by (``AllowedHosts``), against DNS
rebinding. No Powertools here: ``llog serve`` checks each request's head with it, and infra reads
``ALLOWED_HOSTS_ENV``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping

JSON_MEDIA_TYPE = "application/json"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
UNSUPPORTED_MEDIA_TYPE = 415
ERROR_TYPE = "UnsupportedMediaType"


def media_type(content_type: str) -> str:
    """``application/json`` of ``Application/JSON; charset=utf-8``."""
    return content_type.split(";", 1)[0].strip().lower()


def cross_site_problem(method: str, content_type: str | None, has_body: bool, origin: str | None) -> str | None:
    """Why a request of ``method`` with these headers is one any page could send, if it is (None: it is not)."""
    if method.upper() in SAFE_METHODS:
        return None
    if content_type is None:
        if not has_body and origin is None:
            return None
        why = "has a body" if has_body else f"comes from a web page (Origin: {origin})"
        return f"a {method} that {why} must say Content-Type: {JSON_MEDIA_TYPE}"
    if media_type(content_type) == JSON_MEDIA_TYPE:
        return None
    return (
        f"a {method} must say Content-Type: {JSON_MEDIA_TYPE}, not {content_type!r} "
        "(any web page can send that without asking the server first)"
    )


ALLOWED_HOSTS_ENV = "LLOG_SERVE_ALLOWED_HOSTS"


class AllowedHosts:
    """The names a request's ``Host`` may carry: a name pointed at this server by someone else is refused (421).

    DNS rebinding: a page of ``evil.example`` whose name then resolves to
    127.0.0.1 (or to a task's address) reads and writes this server as its own
    origin, CORS or not; its requests say ``Host: evil.example``. Allowed:
    ``localhost`` and any IP address (``127.0.0.1``, ``[::1]``, a task's or a
    load balancer health check's; a page can only name an address it was
    loaded from, which is then this server's own), the names of
    ``LLOG_SERVE_ALLOWED_HOSTS`` (comma-separated; ``*`` allows any), and a
    request without ``Host`` (HTTP/1.0; browsers always send one). Any port:
    rebinding changes what a name resolves to, not the port in the URL.
    """

    LOCAL_NAMES = frozenset({"localhost"})

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.names = self.LOCAL_NAMES | {name.strip().lower().rstrip(".") for name in names if name.strip()}
        self.any = "*" in self.names

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AllowedHosts:
        return cls((env.get(ALLOWED_HOSTS_ENV) or "").split(","))

    def allows(self, host: str | None) -> bool:
        if host is None or self.any:
            return True
        host = host.strip().lower()
        if host.startswith("["):  # [v6 address]:port
            name = host[1 : host.find("]")] if "]" in host else host
        else:
            name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
        name = name.rstrip(".")
        if name in self.names:
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True
