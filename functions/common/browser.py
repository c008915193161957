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
from the request's head (``devserver.serve``); the functions' resolver
(``functions.common.http``) refuses it too, so a deployed API behaves alike.

No Powertools here: ``llog serve`` checks each request's head with it.
"""

from __future__ import annotations

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
