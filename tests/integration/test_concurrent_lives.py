"""The concurrent harness's account of the second topic's lives (``test_concurrent.Run.life``), on a real Oxia.

An Oxia restart can meet a delete after its compare-and-set marked the record deleted (a fence that follows
fails): the life actor gets an error, yet the life is deleted, and reclaimed once its grace and delay pass. The
actor must end that life from the record it finds next, not check its records as if it had not been deleted.
"""

from __future__ import annotations

import threading
import time

import pytest

from llog.config import GcConfig
from llog.errors import OxiaUnavailable
from llog.format.kv.control import AppendProtocol
from llog.protocol.gc import GarbageCollector, GcReport
from llog.protocol.topics import TopicRecord, TopicRegistry
from llog.store.oxia import OxiaStore
from llog.store.s3 import BlobStore
from tests.conftest import OxiaServer
from tests.integration.test_concurrent import GRACE_MS, RECLAIM_DELAY_MS, Run, shorten_lives

pytestmark = pytest.mark.oxia

# An Oxia restart that outlasts the deleted life's grace and reclaim delay: the record is gone when it ends.
RESTART_PAST_RECLAIM_S = (GRACE_MS + RECLAIM_DELAY_MS) / 1000 + 1.5
LIVES_AFTER = 2  # the life after the one whose delete lost its answer (checked and deleted), and the next one
DEADLINE_S = 60.0


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("restart_s", "seen"), [(0.0, "repeated"), (RESTART_PAST_RECLAIM_S, "seen reclaimed")],
    ids=["record-deleted", "record-reclaimed"],
)  # fmt: skip
def test_a_delete_whose_answer_an_oxia_restart_lost_ends_its_life(
    oxia_server: OxiaServer, oxia_store: OxiaStore, blob_store: BlobStore, monkeypatch: pytest.MonkeyPatch,
    restart_s: float, seen: str,
) -> None:  # fmt: skip
    shorten_lives(monkeypatch)
    run = Run(oxia_store, blob_store, AppendProtocol.CAS, oxia_server)
    lost: list[int] = []  # the life whose delete lost its answer (an index in ``run.lives``)
    delete = TopicRegistry.delete

    def delete_that_loses_its_first_answer(registry: TopicRegistry, topic: str) -> TopicRecord:
        record = delete(registry, topic)
        if lost:
            return record
        lost.append(len(run.lives) - 1)
        time.sleep(restart_s)
        raise OxiaUnavailable("the delete's answer was lost to an Oxia restart")

    monkeypatch.setattr(TopicRegistry, "delete", delete_that_loses_its_first_answer)

    def reclaim() -> None:
        collector = GarbageCollector(run.storage, config=GcConfig(grace_ms=GRACE_MS))
        registry = TopicRegistry(run.storage.oxia, root=run.root)
        while not run.stop.wait(0.1):
            collector.reclaim_deleted_topics(registry.records(), GcReport())

    threads = [threading.Thread(target=actor) for actor in (run.life(), run.life_producer(0), reclaim)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + DEADLINE_S
    while not (lost and len(run.lives) > lost[0] + LIVES_AFTER) and not run.failures and time.monotonic() < deadline:
        time.sleep(0.1)
    run.stop.set()
    for thread in threads:
        thread.join(30)
    assert not run.failures, "\n".join(run.failures)
    assert lost, f"no delete lost its answer; tally {run.tally}"
    assert len(run.lives) > lost[0] + LIVES_AFTER, f"lives {run.lives}, tally {run.tally}"
    ended = run.lives[lost[0]]
    assert max(ended.deleted, ended.reclaimed) < float("inf")
    assert any(a.called >= ended.began for a in run.life_acks)  # it had records to lose
    assert run.tally[f"life deletes that lost their answer, {seen}"] == 1
