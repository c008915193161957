"""OxiaStore's ephemeral records and their sessions (llog/store/oxia_client.py ``Sessions``), on a real Oxia."""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid

import pytest

from llog.config import OxiaConfig
from llog.errors import LlogError, SessionExpired
from llog.store.oxia import OxiaStore
from llog.store.oxia_client import _Session
from llog.store.oxia_proto.io.oxia.proto import v1 as pb

pytestmark = pytest.mark.oxia


def test_an_ephemeral_record_lives_with_its_session_and_a_session_the_server_lost_is_replaced(
    oxia_store: OxiaStore,
) -> None:
    pk = f"sessions-{uuid.uuid4().hex}"
    oxia_store.put(f"/{pk}/claim", b"a", partition_key=pk, ephemeral=True)
    client = oxia_store._get_client()
    shard, stub = client.shards.leader(pk, pk)
    session = client.sessions.get(shard)
    # The server forgets the session (as after a freeze longer than its timeout): its records go with it.
    stub.close_session(pb.CloseSessionRequest(shard=shard, session_id=session.session_id))
    assert oxia_store.get(f"/{pk}/claim", partition_key=pk) is None

    with pytest.raises(SessionExpired):
        oxia_store.put(f"/{pk}/claim", b"b", partition_key=pk, ephemeral=True)
    oxia_store.put(f"/{pk}/claim", b"c", partition_key=pk, ephemeral=True)  # on a new session

    assert client.sessions.get(shard).session_id != session.session_id
    record = oxia_store.get(f"/{pk}/claim", partition_key=pk)
    assert record is not None
    assert record.value == b"c"


def test_a_late_session_expired_answer_does_not_close_the_replacement_session(
    oxia_store: OxiaStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two threads put with a session the server lost: the second answer must not drop the first's new session."""
    pk = f"race-{uuid.uuid4().hex}"
    oxia_store.put(f"/{pk}/a", b"a", partition_key=pk, ephemeral=True)
    client = oxia_store._get_client()
    shard, stub = client.shards.leader(pk, pk)
    stale = client.sessions.get(shard)
    stub.close_session(pb.CloseSessionRequest(shard=shard, session_id=stale.session_id))  # the server loses S1
    with pytest.raises(SessionExpired):  # thread X meets it first ...
        oxia_store.put(f"/{pk}/x", b"x", partition_key=pk, ephemeral=True)
    oxia_store.put(f"/{pk}/x", b"x", partition_key=pk, ephemeral=True)  # ... and claims on S2
    with monkeypatch.context() as patched:
        patched.setattr(client.sessions, "get", lambda shard: stale)  # thread Y took S1 before X dropped it
        with pytest.raises(SessionExpired):
            oxia_store.put(f"/{pk}/y", b"y", partition_key=pk, ephemeral=True)
    time.sleep(0.5)  # a dropped session is closed on a thread of its own
    assert oxia_store.get(f"/{pk}/x", partition_key=pk) is not None, "X's claim went with S2"


def test_the_smallest_accepted_session_timeout_keeps_an_idle_session(oxia_config: OxiaConfig) -> None:
    config = dataclasses.replace(oxia_config, session_timeout_ms=2_000)  # the least OxiaConfig accepts
    pk = f"idle-{uuid.uuid4().hex}"
    with OxiaStore(config) as store:
        store.put(f"/{pk}/claim", b"x", partition_key=pk, ephemeral=True)
        time.sleep(5)  # no freeze: the keep-alive thread runs all along
        assert store.get(f"/{pk}/claim", partition_key=pk) is not None


def test_no_session_outlives_a_closed_store(oxia_config: OxiaConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store closed while an ephemeral put is under way opens no session (nor channel) after its close."""
    config = dataclasses.replace(oxia_config, session_timeout_ms=3_000)
    store = OxiaStore(config)
    store.get("/warm", partition_key="warm")
    client = store._get_client()
    real_get = client.sessions.get

    def get(shard: int) -> _Session:  # close() lands while the put is between its routing and its session
        store.close()
        return real_get(shard)

    monkeypatch.setattr(client.sessions, "get", get)
    with pytest.raises(LlogError):
        store.put("/claim", b"x", partition_key="warm", ephemeral=True)
    time.sleep(3 * 3)  # three session timeouts
    assert not [t for t in threading.enumerate() if t.name.startswith("oxia-session")]
