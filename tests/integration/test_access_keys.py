"""Access keys of the Kinesis API on a real Oxia (``llog.service.keys``), ``llog keys`` from the command line,
and sealing with KMS (moto's, in the session's moto server)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from devserver.devstack import MotoS3
from llog.cli import main
from llog.config import OxiaConfig
from llog.errors import ConfigurationError, SealingFailed
from llog.format.kv.access_keys import AccessKeyKeys, AccessKeyRecord, IteratorKeyRecord
from llog.service.keys import AccessKey, AccessKeys, KeyPermissions
from llog.store.kms import KmsSealer
from llog.store.oxia import OxiaStore
from llog.store.sealing import KEY_BYTES, LocalSealer, SecretSealer

pytestmark = pytest.mark.oxia


class Clock:
    def __init__(self, now: float = 1_760_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def sealer(tmp_path: Path) -> LocalSealer:
    return LocalSealer.from_file(tmp_path / "sealing.key")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def new_keys(oxia_store: OxiaStore, root: str, sealer: SecretSealer, clock: Clock) -> Callable[..., AccessKeys]:
    """Another process's ``AccessKeys`` on the same deployment (same Oxia, root and sealing key)."""

    def make(**options: Any) -> AccessKeys:
        return AccessKeys(oxia_store, root=root, sealer=options.pop("sealer", sealer), clock=clock, **options)

    return make


@pytest.fixture
def keys(new_keys: Callable[..., AccessKeys]) -> AccessKeys:
    return new_keys()


def test_a_created_key_is_looked_up_with_its_secret_and_permissions(keys: AccessKeys, clock: Clock) -> None:
    permissions = KeyPermissions(("orders-*",), read=True, write=False)
    key, secret = keys.create("ingest", permissions)

    assert key == AccessKey(key.access_key_id, "ingest", permissions, int(clock.now * 1000))
    assert len(key.access_key_id) == 20
    assert key.access_key_id.startswith("LLOG")
    assert len(secret) == 40
    assert keys.lookup(key.access_key_id) == (secret, permissions)


def test_list_shows_every_key_oldest_first_without_secrets(keys: AccessKeys, clock: Clock) -> None:
    assert keys.list() == []
    created = []
    for name in ("b", "a", "c"):
        created.append(keys.create(name, KeyPermissions())[0])
        clock.now += 1
    assert keys.list() == created


def test_the_secret_is_stored_sealed_never_in_plain(
    keys: AccessKeys, oxia_store: OxiaStore, root: str, sealer: LocalSealer
) -> None:
    key, secret = keys.create("ingest", KeyPermissions())
    layout = AccessKeyKeys(root)
    raw = oxia_store.get(layout.access_key(key.access_key_id), partition_key=layout.partition_key)

    assert raw is not None
    assert secret.encode() not in raw.value
    record = AccessKeyRecord.decode(raw.value)
    assert (record.name, record.streams, record.read, record.write, record.admin) == ("ingest", ("*",), True, True,
                                                                                      False)  # fmt: skip
    assert sealer.open(record.sealed_secret) == secret.encode()


def test_an_unknown_or_malformed_id_is_none_and_revoking_it_is_false(keys: AccessKeys) -> None:
    assert keys.lookup("LLOGAAAAAAAAAAAAAAAA") is None
    assert keys.lookup("../__catalog/namespace") is None
    assert keys.revoke("LLOGAAAAAAAAAAAAAAAA") is False
    assert keys.revoke("nonsense") is False


def test_a_revoke_is_seen_at_once_here_and_by_another_process_within_the_ttl(
    keys: AccessKeys, new_keys: Callable[..., AccessKeys], clock: Clock
) -> None:
    other = new_keys(cache_ttl_s=10.0)
    key, secret = keys.create("ingest", KeyPermissions())
    assert other.lookup(key.access_key_id) == (secret, KeyPermissions())

    assert keys.revoke(key.access_key_id) is True
    assert keys.lookup(key.access_key_id) is None
    assert keys.revoke(key.access_key_id) is False
    assert keys.list() == []

    clock.now += 9.9
    assert other.lookup(key.access_key_id) == (secret, KeyPermissions())  # still cached
    clock.now += 0.2
    assert other.lookup(key.access_key_id) is None


def test_a_lookup_that_read_the_key_before_a_revoke_leaves_nothing_cached(
    keys: AccessKeys, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, _ = keys.create("racing", KeyPermissions())
    read = keys._read
    read_done, revoked = threading.Event(), threading.Event()

    def read_then_wait(access_key_id: str) -> Any:
        found = read(access_key_id)  # the key, read before the revoke deletes it
        read_done.set()
        revoked.wait(10)
        return found

    monkeypatch.setattr(keys, "_read", read_then_wait)
    racing = threading.Thread(target=keys.lookup, args=(key.access_key_id,))
    racing.start()
    assert read_done.wait(10)
    assert keys.revoke(key.access_key_id)
    revoked.set()
    racing.join(10)
    monkeypatch.setattr(keys, "_read", read)
    assert keys.lookup(key.access_key_id) is None  # not the racing lookup's read, cached for the TTL


def test_the_cache_saves_oxia_reads_until_the_ttl(
    keys: AccessKeys, new_keys: Callable[..., AccessKeys], oxia_store: OxiaStore, clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    key, _ = keys.create("ingest", KeyPermissions())
    other = new_keys(cache_ttl_s=5.0)
    reads = []
    real_get = oxia_store.get

    def counted_get(*args: Any, **kwargs: Any) -> Any:
        reads.append(args[0])
        return real_get(*args, **kwargs)

    monkeypatch.setattr(oxia_store, "get", counted_get)
    for _ in range(3):
        assert other.lookup(key.access_key_id) is not None
        assert other.lookup("LLOGAAAAAAAAAAAAAAAA") is None
    assert len(reads) == 2  # one for the key, one for the absent one
    clock.now += 5
    other.lookup(key.access_key_id)
    assert len(reads) == 3


def test_a_secret_sealed_under_another_key_fails_to_open(
    keys: AccessKeys, new_keys: Callable[..., AccessKeys], tmp_path: Path
) -> None:
    key, _ = keys.create("ingest", KeyPermissions())
    elsewhere = new_keys(sealer=LocalSealer.from_file(tmp_path / "another.key"))
    with pytest.raises(SealingFailed):
        elsewhere.lookup(key.access_key_id)
    assert [k.access_key_id for k in elsewhere.list()] == [key.access_key_id]  # listing needs no secret


def test_the_iterator_key_is_created_once_and_shared(
    new_keys: Callable[..., AccessKeys], oxia_store: OxiaStore, root: str, sealer: LocalSealer
) -> None:
    first, second = new_keys(), new_keys()
    key = first.iterator_key()
    assert len(key) == KEY_BYTES
    assert first.iterator_key() == key
    assert second.iterator_key() == key

    layout = AccessKeyKeys(root)
    raw = oxia_store.get(layout.iterator_key, partition_key=layout.partition_key)
    assert raw is not None
    assert key not in raw.value
    assert sealer.open(IteratorKeyRecord.decode(raw.value).sealed_key) == key


def test_processes_racing_to_create_the_iterator_key_agree_on_one(
    new_keys: Callable[..., AccessKeys], oxia_store: OxiaStore, root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    racers = [new_keys() for _ in range(2)]
    start = threading.Barrier(len(racers))
    real_put = oxia_store.put
    puts = []

    def put_after_both_read(*args: Any, **kwargs: Any) -> int:
        puts.append(args[0])
        return real_put(*args, **kwargs)

    real_get = oxia_store.get

    def get_then_wait(*args: Any, **kwargs: Any) -> Any:
        found = real_get(*args, **kwargs)
        if found is None:
            start.wait(timeout=10)  # both have read "absent" before either creates it
        return found

    monkeypatch.setattr(oxia_store, "put", put_after_both_read)
    monkeypatch.setattr(oxia_store, "get", get_then_wait)
    got: list[bytes] = []
    threads = [threading.Thread(target=lambda k=k: got.append(k.iterator_key())) for k in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert len(puts) == 2  # both tried to create it, create-only
    assert len(got) == 2
    assert got[0] == got[1]
    layout = AccessKeyKeys(root)
    assert oxia_store.list_keys(f"{root}/__catalog/", f"{root}/__catalog/~", partition_key="__catalog") == [
        layout.iterator_key
    ]


# --- llog keys -------------------------------------------------------------------------------------------------


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, oxia_config: OxiaConfig, root: str, tmp_path: Path) -> Path:
    """``llog`` talks to the test's Oxia under its root, sealing with a key file; returns the file."""
    key_file = tmp_path / "sealing.key"
    monkeypatch.setenv("LLOG_OXIA_SERVICE_ADDRESS", oxia_config.service_address)
    monkeypatch.setenv("LLOG_ROOT_PREFIX", root)
    monkeypatch.setenv("LLOG_KEYS_SEALING_KEY_FILE", str(key_file))
    monkeypatch.delenv("LLOG_KEYS_KMS_KEY_ID", raising=False)
    return key_file


def test_llog_keys_create_list_and_revoke(
    cli_env: Path, oxia_store: OxiaStore, root: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keys", "create", "--name", "eu", "--streams", "orders-eu-*", "audit", "--read", "--admin",
                 "--json"]) == 0  # fmt: skip
    created = json.loads(capsys.readouterr().out)
    assert created["streams"] == ["orders-eu-*", "audit"]
    assert (created["read"], created["write"], created["admin"]) == (True, False, True)

    assert main(["keys", "create", "--name", "ingest"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("access key id      LLOG")
    assert lines[1].startswith("secret access key  ")
    assert "shown this once" in err
    ingest_id, ingest_secret = lines[0].split()[-1], lines[1].split()[-1]

    keys = AccessKeys(oxia_store, root=root, sealer=LocalSealer.from_file(cli_env))
    assert keys.lookup(ingest_id) == (ingest_secret, KeyPermissions(("*",), read=True, write=True, admin=False))
    eu_permissions = KeyPermissions(("orders-eu-*", "audit"), read=True, write=False, admin=True)
    assert keys.lookup(created["access_key_id"]) == (created["secret_access_key"], eu_permissions)

    assert main(["keys", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {k["access_key_id"] for k in listed} == {created["access_key_id"], ingest_id}
    assert all("secret_access_key" not in k for k in listed)
    assert main(["keys", "list"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 2
    assert any(line.startswith(ingest_id) and "read,write\t*\tingest" in line for line in table)

    assert main(["keys", "revoke", ingest_id]) == 0
    assert capsys.readouterr().out == f"revoked {ingest_id}\n"
    assert main(["keys", "revoke", ingest_id]) == 1
    assert f"llog keys revoke: no access key '{ingest_id}'" in capsys.readouterr().err


def test_llog_keys_errors_are_one_line_and_exit_status_1(
    cli_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keys", "create", "--name", "x", "--streams", "a/b"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("llog keys: InvalidArgument: invalid stream pattern 'a/b'")
    assert err.count("\n") == 1

    monkeypatch.delenv("LLOG_KEYS_SEALING_KEY_FILE")
    assert main(["keys", "list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("llog keys: ConfigurationError: no key seals")
    assert err.count("\n") == 1


# --- KMS -------------------------------------------------------------------------------------------------------


@pytest.fixture
def kms_client(moto_s3: MotoS3) -> Any:
    """A KMS client of the session's moto server (it serves every service moto has)."""
    import botocore.session

    return botocore.session.Session().create_client(
        "kms", endpoint_url=moto_s3.endpoint_url, region_name="us-east-1", aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )  # fmt: skip


def test_kms_seals_and_opens_and_refuses_what_another_key_sealed(kms_client: Any) -> None:
    first = KmsSealer(kms_client.create_key()["KeyMetadata"]["KeyId"], client=kms_client)
    second = KmsSealer(kms_client.create_key()["KeyMetadata"]["KeyId"], client=kms_client)
    sealed = first.seal(b"secret")
    assert b"secret" not in sealed
    assert first.open(sealed) == b"secret"
    with pytest.raises(SealingFailed):
        first.open(b"not a ciphertext")
    altered = bytearray(sealed)
    altered[-1] ^= 0x01
    with pytest.raises(SealingFailed):
        first.open(bytes(altered))
    # AWS answers IncorrectKeyException (SealingFailed, tests/unit/test_sealing.py), moto AccessDeniedException.
    with pytest.raises(ConfigurationError, match="cannot decrypt: AccessDeniedException"):
        second.open(sealed)


def test_a_missing_kms_key_is_a_configuration_error(kms_client: Any) -> None:
    with pytest.raises(ConfigurationError, match="cannot encrypt: NotFoundException"):
        KmsSealer("alias/none-such", client=kms_client).seal(b"secret")


def test_access_keys_sealed_with_kms(kms_client: Any, oxia_store: OxiaStore, root: str) -> None:
    sealer = KmsSealer(kms_client.create_key()["KeyMetadata"]["KeyId"], client=kms_client)
    keys = AccessKeys(oxia_store, root=root, sealer=sealer)
    key, secret = keys.create("ingest", KeyPermissions())
    assert keys.lookup(key.access_key_id) == (secret, KeyPermissions())
    assert len(keys.iterator_key()) == KEY_BYTES
    assert AccessKeys(oxia_store, root=root, sealer=sealer).iterator_key() == keys.iterator_key()
