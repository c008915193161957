"""Sealing secrets with a local key (``LocalSealer``), its key file, and choosing the sealer from settings."""

from __future__ import annotations

import base64
import os
import stat
import threading
from pathlib import Path

import botocore.exceptions
import pytest

from llog.config import SealingConfig
from llog.errors import ConfigurationError, SealerUnavailable, SealingFailed
from llog.store.kms import KmsSealer, _kms_error
from llog.store.sealing import KEY_BYTES, LocalSealer, read_or_create_key_file, sealer_for


@pytest.fixture
def sealer() -> LocalSealer:
    return LocalSealer(os.urandom(KEY_BYTES))


def test_a_sealed_secret_opens_again_and_never_holds_the_plain_bytes(sealer: LocalSealer) -> None:
    plain = b"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    sealed = sealer.seal(plain)
    assert plain not in sealed
    assert sealer.open(sealed) == plain
    assert sealer.seal(plain) != sealed  # a fresh nonce every time
    assert sealer.open(sealer.seal(b"")) == b""


@pytest.mark.parametrize("position", [0, 1, 13, -1])
def test_an_altered_byte_anywhere_fails_to_open(sealer: LocalSealer, position: int) -> None:
    sealed = bytearray(sealer.seal(b"secret"))
    sealed[position] ^= 0x01
    with pytest.raises(SealingFailed):
        sealer.open(bytes(sealed))


@pytest.mark.parametrize("sealed", [b"", b"\x01", b"\x01" + bytes(27)])
def test_what_is_too_short_to_be_sealed_fails_to_open(sealer: LocalSealer, sealed: bytes) -> None:
    with pytest.raises(SealingFailed, match="not a secret sealed by a local sealing key"):
        sealer.open(sealed)


def test_another_key_fails_to_open(sealer: LocalSealer) -> None:
    with pytest.raises(SealingFailed, match="another key"):
        LocalSealer(os.urandom(KEY_BYTES)).open(sealer.seal(b"secret"))


def test_a_key_of_another_size_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="32 bytes, not 16"):
        LocalSealer(bytes(16))


def test_a_missing_key_file_is_created_for_its_owner_alone_and_then_reused(tmp_path: Path) -> None:
    path = tmp_path / "dev" / "sealing.key"
    key = read_or_create_key_file(path)
    assert len(key) == KEY_BYTES
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert base64.b64decode(path.read_text()) == key
    assert read_or_create_key_file(path) == key
    assert [p.name for p in path.parent.iterdir()] == ["sealing.key"]  # no draft left behind
    sealed = LocalSealer.from_file(path).seal(b"secret")
    assert LocalSealer.from_file(path).open(sealed) == b"secret"


def test_processes_creating_the_key_file_at_once_all_read_the_one_that_won(tmp_path: Path) -> None:
    path = tmp_path / "sealing.key"
    start = threading.Barrier(8)
    keys: list[bytes] = []

    def create() -> None:
        start.wait()
        keys.append(read_or_create_key_file(path))

    threads = [threading.Thread(target=create) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(keys) == 8
    assert len(set(keys)) == 1
    assert base64.b64decode(path.read_text()) == keys[0]
    assert [p.name for p in tmp_path.iterdir()] == ["sealing.key"]


@pytest.mark.parametrize(("content", "message"), [("not base64!", "cannot be read"), ("AAAA\n", "holds 3 bytes")])
def test_a_key_file_that_holds_no_key_is_a_clear_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "sealing.key"
    path.write_text(content)
    with pytest.raises(ConfigurationError, match=f"LLOG_KEYS_SEALING_KEY_FILE .*{message}"):
        read_or_create_key_file(path)


def test_the_sealer_is_kms_when_its_key_is_set_else_the_local_file(tmp_path: Path) -> None:
    kms = sealer_for(SealingConfig(kms_key_id="alias/llog", key_file=str(tmp_path / "k")))
    assert isinstance(kms, KmsSealer)
    assert kms.key_id == "alias/llog"
    assert not (tmp_path / "k").exists()
    assert isinstance(sealer_for(SealingConfig(key_file=str(tmp_path / "k"))), LocalSealer)
    assert SealingConfig.from_env({"LLOG_KEYS_KMS_KEY_ID": "k1", "LLOG_KEYS_SEALING_KEY_FILE": "/f"}) == (
        SealingConfig("k1", "/f")
    )


def test_without_either_setting_the_error_names_both() -> None:
    with pytest.raises(ConfigurationError, match="LLOG_KEYS_KMS_KEY_ID .* LLOG_KEYS_SEALING_KEY_FILE"):
        sealer_for(SealingConfig.from_env({}))


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("InvalidCiphertextException", SealingFailed),
        ("IncorrectKeyException", SealingFailed),  # Decrypt told another key than the ciphertext's
        ("NotFoundException", ConfigurationError),
        ("DisabledException", ConfigurationError),
        ("AccessDeniedException", ConfigurationError),
        ("ThrottlingException", SealerUnavailable),
        ("KMSInternalException", SealerUnavailable),
    ],
)
def test_kms_answers_become_llog_errors(code: str, error: type[Exception]) -> None:
    answer = botocore.exceptions.ClientError({"Error": {"Code": code, "Message": "m"}}, "Decrypt")
    assert type(_kms_error(answer, "alias/k", "decrypt")) is error


def test_kms_out_of_reach_is_retriable_and_without_a_region_a_configuration_error() -> None:
    unreachable = _kms_error(botocore.exceptions.EndpointConnectionError(endpoint_url="https://kms"), "k", "encrypt")
    assert isinstance(unreachable, SealerUnavailable)
    assert unreachable.retriable
    assert isinstance(_kms_error(botocore.exceptions.NoRegionError(), "k", "encrypt"), ConfigurationError)
