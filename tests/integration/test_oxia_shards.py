"""OxiaStore's calls that send one request per shard, against an Oxia standalone with four shards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devserver.devstack import OxiaProcess, find_oxia_binary
from llog.config import OxiaConfig
from llog.store.oxia import OxiaStore
from llog.store.oxia_client import oxia_key_order
from llog.store.oxia_wire import SequentialPut
from tests.conftest import TOOLS_BIN

pytestmark = pytest.mark.oxia

SHARDS = 4


@pytest.fixture(scope="module")
def sharded_store(tmp_path_factory: pytest.TempPathFactory, oxia_server: object) -> Iterator[OxiaStore]:
    """``oxia_server`` first: it fails (or skips) the run when there is no Oxia binary, as every Oxia test does."""
    binary = find_oxia_binary([TOOLS_BIN])
    assert binary is not None
    process = OxiaProcess(binary, Path(tmp_path_factory.mktemp("oxia-sharded")), shards=SHARDS)
    process.start()
    try:
        with OxiaStore(OxiaConfig(process.address, request_timeout_ms=3_000)) as store:
            yield store
    finally:
        process.stop()


def partition_keys_on_every_shard(store: OxiaStore) -> list[str]:
    discovery = store._get_client().shards
    by_shard: dict[int, str] = {}
    for i in range(200):
        by_shard.setdefault(discovery.leader("k", f"pk-{i}")[0], f"pk-{i}")
    assert len(by_shard) == SHARDS
    return list(by_shard.values())


def test_get_many_answers_as_get_does_with_one_request_per_shard(sharded_store: OxiaStore) -> None:
    pks = partition_keys_on_every_shard(sharded_store)
    for pk in pks:
        sharded_store.put(f"/get-many/{pk}/a", f"{pk}-a".encode(), partition_key=pk)
        sharded_store.put(f"/get-many/{pk}/b", b"", partition_key=pk)  # an empty value is still found
    keys = [(f"/get-many/{pk}/{name}", pk) for name in ("b", "missing", "a") for pk in reversed(pks)]
    before = sharded_store.counters.snapshot().get("get")

    found = sharded_store.get_many(keys)

    after = sharded_store.counters.snapshot()["get"]
    assert after.calls - (before.calls if before else 0) == SHARDS
    assert found == [sharded_store.get(key, partition_key=pk) for key, pk in keys]
    assert [f is None for f in found] == [name == "missing" for name in ("b", "missing", "a") for _ in pks]
    assert found[0] is not None
    assert found[0].value == b""
    assert sharded_store.get_many([]) == []


def test_put_sequential_many_across_shards(sharded_store: OxiaStore) -> None:
    pks = partition_keys_on_every_shard(sharded_store)
    puts = [SequentialPut(f"/seq-many/{pk}/seq", pk.encode(), pk, (1,)) for pk in pks for _ in range(2)]

    answers = sharded_store.put_sequential_many(puts)

    keys = [a.key for a in answers if not isinstance(a, Exception)]
    assert keys == [f"/seq-many/{pk}/seq-{n:020d}" for pk in pks for n in (1, 2)]
    owners = [pk for pk in pks for _ in range(2)]
    read = [sharded_store.get(k, partition_key=pk) for k, pk in zip(keys, owners, strict=True)]
    assert [r.value if r else None for r in read] == [pk.encode() for pk in owners]


def test_range_scan_reads_the_partitions_shard_in_key_order_across_responses_up_to_its_limit(
    sharded_store: OxiaStore,
) -> None:
    pks = partition_keys_on_every_shard(sharded_store)
    for pk in pks[1:]:  # the same keys on the other shards are not the partition's
        sharded_store.put(f"/scan/{pk}/other", b"x", partition_key=pk)
    pk = pks[0]
    # 6 MB: more than one gRPC message (4 MiB), so the server answers in several responses
    value = bytes(range(256)) * 80
    keys = [f"/scan/{i:04d}" for i in range(300)]
    for key in keys:
        sharded_store.put(key, value, partition_key=pk)
    sharded_store.put("/scan/empty", b"", partition_key=pk)

    everything = sharded_store.range_scan("/scan/", "/scan/~", partition_key=pk)

    assert [r.key for r in everything] == [*keys, "/scan/empty"]
    assert everything[:3] + everything[-1:] == [sharded_store.get(r.key, partition_key=pk) for r in
                                                everything[:3] + everything[-1:]]  # fmt: skip
    assert everything[-1].value == b""
    assert {r.value for r in everything[:-1]} == {value}
    assert sharded_store.range_scan("/scan/", "/scan/~", partition_key=pk, limit=250) == everything[:250]
    assert sharded_store.range_scan("/scan/0100", "/scan/0103", partition_key=pk) == everything[100:103]
    assert sharded_store.range_scan("/scan/", "/scan/~", partition_key=pk, limit=0) == []


KEYS_OF_EVERY_DEPTH = ["/order/a", "/order/a/b", "/order/b", "/order/a//", "/order/a-b", "/order/a/b/c", "/order/ab",
                       "/order/", "/order/a/", "/order/~", "/order/A", "/order/a/a"]  # fmt: skip


def test_oxia_key_order_is_the_servers_and_merges_a_listing_of_every_shard(sharded_store: OxiaStore) -> None:
    """One shard lists its keys in the server's order, which ``oxia_key_order`` reproduces (depth first, ``/``
    above every byte); a listing of every shard is merged in that order."""
    pks = partition_keys_on_every_shard(sharded_store)
    for key in KEYS_OF_EVERY_DEPTH:
        sharded_store.put(key, b"", partition_key=pks[0])
    # A range from one depth to another holds every key of the depths between: keep this test's.
    listed = [k for k in sharded_store.list_keys("/order/", "/order/~/~/~/~", partition_key=pks[0])
              if k.startswith("/order/")]  # fmt: skip
    assert listed == sorted(KEYS_OF_EVERY_DEPTH, key=oxia_key_order)
    assert listed != sorted(KEYS_OF_EVERY_DEPTH)  # the order is not Python's
    spread = [f"/spread/{pk}/{key}" for pk in pks for key in ("x", "x/y")]
    for pk in pks:
        for key in ("x", "x/y"):
            sharded_store.put(f"/spread/{pk}/{key}", b"", partition_key=pk)
    merged = [k for k in sharded_store.list_keys("/spread/", "/spread/~/~/~") if k.startswith("/spread/")]
    assert merged == sorted(spread, key=oxia_key_order)
