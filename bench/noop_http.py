"""``llog serve``'s HTTP server with nothing behind it: the ceiling bench/serve.py measures its clients against.

Same server as ``server.serve`` (``server.http11``: one event loop,
HTTP/1.1 keep-alive, Nagle off, the same listen backlog and idle timeout),
but every request is answered on the loop at once with a fixed produce
answer: no handler thread, no event, no Oxia, no S3, no access log. What the
benchmark's clients reach against it is the most any handler behind that
server could give on this machine.

    .venv/bin/python -m bench.noop_http --port 8099
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence

from server import http11, serve
from server.http11 import Answer, HttpServer, Request

ANSWER = Answer(
    200,
    [("Content-Type", "application/json")],
    b'{"results":[{"topic":"t","partition":0,"ok":true,"count":1,"start_offset":1,"end_offset":1}]}',
)


class NoopApplication:
    closing = False

    def check_head(self, request: Request) -> Answer | None:
        return None

    async def answer(self, request: Request) -> Answer:
        return ANSWER

    def finished(self, request: Request) -> None:
        pass

    def refused(self, status: int, reason: str, limit: str | None) -> Answer:
        return Answer(status, body=reason.encode(), close=True)


async def serve_until_terminated(server: HttpServer) -> None:
    stopped = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopped.set)
    await server.serve(stopped)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/noop_http.py", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    server = HttpServer("127.0.0.1", args.port, NoopApplication(), backlog=serve.LISTEN_BACKLOG,
                        idle_timeout_s=serve.IDLE_CONNECTION_TIMEOUT_S)  # fmt: skip
    http11.run(serve_until_terminated(server))
    return 0


if __name__ == "__main__":
    sys.exit(main())
