"""``llog serve``'s HTTP server with nothing behind it: the ceiling bench/serve.py measures its clients against.

Same server class and connection handler as ``devserver.serve`` (HTTP/1.1
keep-alive, Nagle off, a thread per connection, the same listen backlog), but
every request is answered at once with a fixed produce answer: no event, no
handler, no Oxia, no S3. What the benchmark's clients reach against it is the
most any handler behind that server could give on this machine.

    .venv/bin/python -m bench.noop_http --port 8099
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from devserver import serve

ANSWER = b'{"results":[{"topic":"t","partition":0,"ok":true,"count":1,"start_offset":1,"end_offset":1}]}'


class NoopHandler(serve._Handler):
    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)

    def log_message(self, format: str, *args: object) -> None:
        pass  # the access log is llog's work, not the HTTP server's


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/noop_http.py", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    httpd = serve._HTTPServer(("127.0.0.1", args.port), NoopHandler)

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        httpd.serve_forever(poll_interval=0.2)
    finally:
        httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
