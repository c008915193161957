"""Three ``llog-client consume --group`` processes share 12 partitions and survive one being killed.

Delivery is at least once (docs/GROUPS.md, "What is and is not guaranteed"): a rebalance does not wait for
the members to rejoin, so a partition that moves from one live member to another is read by both until the
old owner hears of it (at its next heartbeat, or when its next commit is refused as stale), and what was
appended in between is printed by both. Here only a join moves partitions away from a live member (members
of one subscription: the sticky assignment hands a dead member's partitions to the others, taking none from
them), so the test starts producing only once all three processes have joined and each has been told of the
last join: the processes start at different speeds, and a join landing while ``second`` was read printed
some of it twice. ``second`` is then expected exactly once, unless a rebalance other than the killed
member's expiry came before its last record was printed (a survivor whose lease ran out on a starved machine
joins again, which moves partitions): then at least once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
from collections import Counter
from pathlib import Path
from typing import Any

from llog_client.producer import Producer
from server.serve import LlogServer
from tests.client.conftest import call

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 12
SESSION_TIMEOUT_MS = 3000
SETTLE_S = 90


def produce(server: LlogServer, topic: str, values: list[str]) -> None:
    with Producer(server.url) as producer:
        for value in values:
            producer.send(topic, value, key=value)
        producer.flush()


def printed_records(outputs: list[Path]) -> list[dict[str, Any]]:
    records = []
    for output in outputs:
        for line in output.read_text().splitlines():
            if line.endswith("}"):  # a line being written is not complete yet
                records.append({**json.loads(line), "printed_by": output.stem})
    return records


def printed(outputs: list[Path]) -> list[str]:
    return [record["value"] for record in printed_records(outputs)]


def wait_for(outputs: list[Path], expected: set[str], processes: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + SETTLE_S
    while not expected <= set(printed(outputs)):
        assert time.monotonic() < deadline, f"missing {len(expected - set(printed(outputs)))} records"
        assert all(p.poll() is None for p in processes), [p.returncode for p in processes]
        time.sleep(0.2)


def describe(server: LlogServer) -> dict[str, Any]:
    """``GET /groups/workers``; before the first join the group does not exist (404): no member yet."""
    try:
        return dict(call(server, "GET", "/groups/workers"))
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
        return {"generation": 0, "members": []}


def settle(server: LlogServer, members: int, processes: list[subprocess.Popen[bytes]]) -> dict[str, Any]:
    """The group once it has ``members`` members and each has been told of its last rebalance: its lease was
    extended (by a heartbeat, whose answer says rejoin, a commit, refused when stale, or a join) after the
    test saw that generation. What it read before it rejoins may still be read by another member too."""
    deadline = time.monotonic() + SETTLE_S
    seen: tuple[int, float] | None = None  # a generation with the wanted member count, and when it was seen
    while True:
        assert time.monotonic() < deadline, describe(server)
        assert all(p.poll() is None for p in processes), [p.returncode for p in processes]
        group = describe(server)
        if len(group["members"]) != members:
            seen = None
        elif seen is None or seen[0] != group["generation"]:
            seen = (group["generation"], time.time())
        elif all(m["expires_at_ms"] > (seen[1] * 1000 + SESSION_TIMEOUT_MS) for m in group["members"]):
            return group
        time.sleep(0.2)


def test_consumers_share_partitions_and_take_over_a_killed_ones(server: LlogServer, tmp_path: Path) -> None:
    call(server, "POST", "/topics", {"topic": "jobs", "partitions": PARTITIONS})
    outputs = [tmp_path / f"consumer-{i}.jsonl" for i in range(3)]
    command = [sys.executable, "-m", "llog_client.cli", "consume", "jobs", "--group", "workers", "--url", server.url,
               "--from-beginning", "--format", "json", "--session-timeout-ms", str(SESSION_TIMEOUT_MS)]  # fmt: skip
    processes = [
        subprocess.Popen(
            command,
            stdout=output.open("wb"),
            stderr=output.with_suffix(".stderr").open("wb"),
            cwd=ROOT,
            env=os.environ.copy(),
        )  # fmt: skip
        for output in outputs
    ]
    try:
        settle(server, 3, processes)  # all three joined: no later join moves partitions between live members
        first = [f"first-{i}" for i in range(240)]
        produce(server, "jobs", first)
        wait_for(outputs, set(first), processes)
        processes[0].send_signal(signal.SIGKILL)  # no commit, no leave: its lease has to expire
        processes[0].wait()
        described = settle(server, 2, processes[1:])  # its lease expired; the survivors got its partitions
        owned = sorted(p for m in described["members"] for a in m["assignments"] for p in a["partitions"])
        assert owned == list(range(PARTITIONS))
        second = [f"second-{i}" for i in range(240)]
        produce(server, "jobs", second)
        wait_for(outputs[1:], set(second), processes[1:])  # the survivors read every partition now
        rebalanced = describe(server)["generation"] != described["generation"]
    finally:
        for process, stop in zip(processes, (signal.SIGINT, signal.SIGINT, signal.SIGTERM), strict=True):
            if process.poll() is None:
                process.send_signal(stop)  # Ctrl-C or a service manager's stop: commit what was printed, leave
        for process in processes:
            process.wait(timeout=60)
    assert [p.returncode for p in processes[1:]] == [0, 0]
    # At least once across the kill (the killed consumer's uncommitted records are read again by their new
    # owner); exactly once where commits followed processing and no partition moved away from a live member.
    assert set(printed(outputs)) == set(first) | set(second)
    if not rebalanced:
        twice = Counter(v for v in printed(outputs) if v.startswith("second-")) - Counter(second)
        assert not twice, [r for r in printed_records(outputs) if r["value"] in twice]
