"""EXPERIMENT (issue 39): llog serve's Application behind uvicorn (httptools, uvloop) instead of server.http11."""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn

from server.http11 import Answer, Application, HttpServer, Request


def asgi_app(server: HttpServer) -> Any:
    app: Application = server.app
    max_bytes = server.limits.max_connection_bytes

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        query = scope["query_string"]
        target = scope["raw_path"].decode("latin-1") + ("?" + query.decode("latin-1") if query else "")
        headers = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in scope["headers"]]
        client = scope.get("client")
        request = Request(scope["method"], target, headers, client[0] if client else "", scope["http_version"])
        refusal = app.check_head(request)
        length = request.header("content-length")
        if refusal is None and int(length or 0) > max_bytes:
            refusal = app.refused(413, f"the request body is {length} bytes; a connection may hold {max_bytes}",
                                  "max_connection_bytes")  # fmt: skip
        try:
            if refusal is None:
                if length is not None:
                    chunks = []
                    more = True
                    while more:
                        message = await receive()
                        if message["type"] == "http.disconnect":
                            return
                        chunks.append(message.get("body", b""))
                        more = message.get("more_body", False)
                    request.body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
                answer: Answer = await app.answer(request)
            else:
                answer = refusal
            close = answer.close or app.closing
            out = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in answer.headers]
            out.append((b"content-length", str(len(answer.body)).encode()))
            if close:
                out.append((b"connection", b"close"))
            await send({"type": "http.response.start", "status": answer.status, "headers": out})
            await send({"type": "http.response.body", "body": answer.body})
        finally:
            app.finished(request)

    return asgi


async def serve(server: HttpServer, stopped: asyncio.Event, idle_timeout_s: float) -> None:
    config = uvicorn.Config(
        asgi_app(server), http="httptools", lifespan="off", access_log=False, log_config=None,
        timeout_keep_alive=int(idle_timeout_s), server_header=False,
    )  # fmt: skip
    front = uvicorn.Server(config)
    task = asyncio.get_running_loop().create_task(front.serve(sockets=[server._socket]))
    await stopped.wait()
    front.should_exit = True
    await task
