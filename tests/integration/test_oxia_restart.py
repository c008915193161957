"""Restarting the Oxia server (data directory kept) loses no acknowledged append.

Runs last in its module on purpose: it restarts the session's shared server.
"""

from __future__ import annotations

import time

import pytest

from llog.errors import StorageUnavailable
from llog.reader import LogReader
from llog.writer import AppendResult, LogWriter
from tests.conftest import OxiaServer

pytestmark = pytest.mark.oxia


def append_with_retry(writer: LogWriter, topic: str, payload: bytes, deadline_s: float = 30) -> AppendResult:
    """What a producer does on a retriable error: try again, within a bound."""
    stop = time.monotonic() + deadline_s
    while True:
        try:
            return writer.append(topic, 0, [payload])
        except StorageUnavailable:
            if time.monotonic() > stop:
                raise
            time.sleep(0.2)


def test_acknowledged_appends_survive_a_server_restart(
    oxia_server: OxiaServer, writer: LogWriter, reader: LogReader, topic: str
) -> None:
    writer.initialize_partition(topic, 0)
    acknowledged: dict[int | None, bytes] = {}
    for phase in ("before", "after"):
        if phase == "after":
            oxia_server.restart()
        for i in range(5):
            payload = f"{phase}-{i}".encode()
            acknowledged[append_with_retry(writer, topic, payload).start_offset] = payload

    assert sorted(o or 0 for o in acknowledged) == list(range(1, 11))
    assert {r.offset: r.value for r in reader.iter_from(topic, 0, 1)} == acknowledged

    start = time.monotonic()
    writer.close()  # the client saw a reconnect: closing must still not hang
    assert time.monotonic() - start < 10
