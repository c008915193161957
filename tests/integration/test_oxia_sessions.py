"""OxiaStore's ephemeral records and their sessions (llog/store/oxia_client.py ``Sessions``), on a real Oxia."""

from __future__ import annotations

import uuid

import pytest

from llog.errors import SessionExpired
from llog.store.oxia import OxiaStore
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
