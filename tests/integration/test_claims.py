"""Compactor claims: ephemeral records tied to an Oxia session."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import signal
import time
from typing import Any

import pytest

from llog.config import OxiaConfig
from llog.protocol.claims import CompactorClaims
from llog.store.oxia import OxiaStore

pytestmark = pytest.mark.oxia


def test_one_claim_per_partition_until_released(oxia_config: OxiaConfig, topic: str, root: str) -> None:
    with OxiaStore(oxia_config) as a_store, OxiaStore(oxia_config) as b_store:
        a, b = CompactorClaims(a_store, "a", root=root), CompactorClaims(b_store, "b", root=root)
        claim = a.try_claim(topic, 0)
        assert claim is not None
        assert a.held(claim)
        assert b.try_claim(topic, 0) is None
        assert b.try_claim(topic, 1) is not None  # other partitions are independent

        a.release(claim)
        assert not a.held(claim)
        taken = b.try_claim(topic, 0)
        assert taken is not None
        assert not a.held(claim)
        a.release(claim)  # releasing a claim we no longer hold leaves the new owner alone
        assert b.held(taken)


def test_a_claim_dies_with_its_session(oxia_config: OxiaConfig, topic: str, root: str) -> None:
    with OxiaStore(oxia_config) as b_store:
        a_store = OxiaStore(oxia_config)
        claim = CompactorClaims(a_store, "a", root=root).try_claim(topic, 0)
        assert claim is not None
        a_store.close()  # closes the session: the server deletes its ephemeral records
        deadline = time.monotonic() + 10
        while CompactorClaims(b_store, "b", root=root).try_claim(topic, 0) is None:
            assert time.monotonic() < deadline, "the claim outlived its session"
            time.sleep(0.1)


def _hold_claim_through_freeze(config: OxiaConfig, root: str, topic: str, ready: Any, thawed: Any, out: Any) -> None:
    claims = CompactorClaims(OxiaStore(config), "frozen", root=root)
    claim = claims.try_claim(topic, 0)
    assert claim is not None
    ready.set()
    thawed.wait(60)  # the parent freezes this process (SIGSTOP) past the session timeout
    out.put(claims.held(claim))


def test_a_claim_is_not_trusted_after_a_freeze(oxia_config: OxiaConfig, topic: str, root: str) -> None:
    """A Lambda frozen longer than the session timeout must find its claim gone."""
    config = dataclasses.replace(oxia_config, session_timeout_ms=2_000)
    ctx = multiprocessing.get_context("spawn")
    ready, thawed, out = ctx.Event(), ctx.Event(), ctx.Queue()
    worker = ctx.Process(target=_hold_claim_through_freeze, args=(config, root, topic, ready, thawed, out))
    worker.start()
    try:
        assert ready.wait(30)
        assert worker.pid is not None
        os.kill(worker.pid, signal.SIGSTOP)
        time.sleep(5)  # > session timeout: the server expires the session and deletes the claim
        with OxiaStore(oxia_config) as other:
            assert CompactorClaims(other, "other", root=root).try_claim(topic, 0) is not None
        os.kill(worker.pid, signal.SIGCONT)
        thawed.set()
        assert out.get(timeout=30) is False
    finally:
        worker.join(10)
        if worker.is_alive():
            worker.kill()
