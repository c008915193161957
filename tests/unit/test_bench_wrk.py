"""``bench.wrk``: real wrk runs against a small HTTP server of the test's own, and the parsing of wrk's result line.

Without wrk the live tests are reported as skipped; ``LLOG_REQUIRE_WRK=1`` (CI)
makes that a failure (``make setup`` installs it as root).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bench import wrk


@dataclass
class Recorder:
    """What the server answers, and the requests it saw."""

    status: int = 200
    answer: bytes = b'{"success_count":1,"error_count":0}'
    requests: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)


@pytest.fixture(scope="module")
def wrk_installed() -> None:
    if wrk.wrk_binary() is None:
        if os.environ.get("LLOG_REQUIRE_WRK"):
            pytest.fail("wrk is required (LLOG_REQUIRE_WRK is set): apt-get install -y wrk")
        pytest.skip("wrk is not installed (apt-get install -y wrk)")


@pytest.fixture
def server(wrk_installed: None) -> Iterator[tuple[str, Recorder]]:
    recorder = Recorder()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as llog serve

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if len(recorder.requests) < 1000:
                recorder.requests.append((self.command, self.path, dict(self.headers.items()), body))
            self.send_response(recorder.status)
            self.send_header("Content-Length", str(len(recorder.answer)))
            self.end_headers()
            self.wfile.write(recorder.answer)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", recorder
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_every_request_carries_the_body_and_headers_and_every_answer_is_counted(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    body = b'{"topic_partitions": [{"topic": "t", "partition": 0, "records": ["]==] \\" x"]}]}'
    result = wrk.run(url, "/produce", body, clients=2, seconds=1, headers={"s2-basin": "b1"},
                     expect='"success_count":1,"error_count":0')  # fmt: skip
    assert result.answers > 10
    assert result.ok == result.answers == result.requests
    assert not result.errors
    assert 0.9 < result.elapsed < 2.0
    assert result.p50_ms is not None
    assert result.p99_ms is not None
    assert result.mean_ms is not None
    assert 0 < result.p50_ms <= result.p99_ms
    assert 0 < result.cpu_seconds < 2 * result.elapsed  # one wrk thread, and its start
    assert len(recorder.requests) >= min(result.answers, 1000) - 2  # wrk may stop with a request unanswered
    for method, path, headers, seen in recorder.requests:
        assert (method, path, seen) == ("POST", "/produce", body)
        assert (headers["Content-Type"], headers["s2-basin"]) == ("application/json", "b1")


def test_an_answer_without_the_expected_text_fails_its_request(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    recorder.answer = b'{"success_count":0,"error_count":1}'
    result = wrk.run(url, "/produce", b"{}", clients=2, seconds=1, expect='"success_count":1,"error_count":0')
    assert result.answers > 0
    assert result.ok == 0
    assert result.errors == {wrk.FAILED_CHECK: result.answers}


def test_an_answer_other_than_200_fails_its_request_whatever_its_body(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    recorder.status = 503
    result = wrk.run(url, "/produce", b"{}", clients=1, seconds=1)
    assert result.answers > 0
    assert result.ok == 0
    assert result.errors == {wrk.FAILED_CHECK: result.answers}


def test_a_server_that_cannot_be_reached_is_an_error_not_a_result(wrk_installed: None) -> None:
    with pytest.raises(RuntimeError, match="unable to connect"):
        wrk.run("http://127.0.0.1:1", "/produce", b"{}", clients=1, seconds=1)


def test_the_result_line_gives_errors_by_kind_and_latencies_in_ms() -> None:
    output = ("Running 5s test @ http://x/produce\n"
              'WRK {"requests": 1000, "micros": 5000000, "failed": 3, "connect": 0, "read": 2, "write": 0, '
              '"timeout": 1, "p50_us": 2500, "p99_us": 9100, "mean_us": 2700.5}\n')  # fmt: skip
    result = wrk.parse(output)
    assert result.errors == {"transport: read": 2, "transport: timeout": 1, wrk.FAILED_CHECK: 3}
    assert (result.answers, result.ok, result.requests) == (1000, 997, 1003)
    assert (result.elapsed, result.p50_ms, result.p99_ms, result.mean_ms) == (5.0, 2.5, 9.1, 2.7005)
    none = wrk.parse('WRK {"requests": 0, "micros": 1000000, "failed": 0, "connect": 0, "read": 0, "write": 0, '
                     '"timeout": 3, "p50_us": 0, "p99_us": 0, "mean_us": 0}')  # fmt: skip
    assert (none.p50_ms, none.requests) == (None, 3)
    with pytest.raises(ValueError, match="no result"):
        wrk.parse("unable to connect to x:1 Connection refused\n")


def test_the_script_takes_only_ascii(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not ASCII"):
        wrk.script(tmp_path / "body", {"x-name": "é"}, None)


def test_a_content_type_given_in_any_case_replaces_the_default(tmp_path: Path) -> None:
    """wrk keys its headers by case: two would be sent, and a server reads either (a SigV4 signature then fails)."""
    lines = wrk.script(tmp_path / "body", {"content-type": "application/x-amz-json-1.1"}, None).lower().splitlines()
    assert [line for line in lines if "content-type" in line] == [
        'wrk.headers["content-type"] = "application/x-amz-json-1.1"'
    ]
    assert 'wrk.headers["Content-Type"] = "application/json"' in wrk.script(tmp_path / "body", {}, None)
