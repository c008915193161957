"""What an access key may do (``KeyPermissions``), its id and secret, and its stored document."""

from __future__ import annotations

import re

import pytest

from llog.errors import CorruptMetadata, InvalidArgument
from llog.format.kv.access_keys import (
    AccessKeyKeys,
    AccessKeyRecord,
    is_access_key_id,
    new_access_key_id,
    validate_access_key_id,
)
from llog.service.keys import KeyPermissions, new_secret, validate_key_name


def test_by_default_a_key_reads_and_writes_every_stream_but_administers_none() -> None:
    permissions = KeyPermissions()
    assert permissions.streams == ("*",)
    assert permissions.allows("orders", "read")
    assert permissions.allows("orders", "write")
    assert not permissions.allows("orders", "admin")


@pytest.mark.parametrize(
    ("patterns", "stream", "allowed"),
    [
        (("orders",), "orders", True),
        (("orders",), "orders-eu", False),
        (("orders-*",), "orders-eu", True),
        (("orders-*",), "orders", False),
        (("orders-??",), "orders-eu", True),
        (("orders-[ae]u",), "orders-eu", True),
        (("orders-[!e]u",), "orders-eu", False),
        (("audit", "orders-*"), "audit", True),
        (("Orders",), "orders", False),  # case-sensitive, as topic names are
        (("*",), "any.topic_name-1", True),
    ],
)
def test_stream_patterns_match_as_fnmatch_case_sensitively(
    patterns: tuple[str, ...], stream: str, allowed: bool
) -> None:
    assert KeyPermissions(patterns).allows(stream, "read") is allowed


def test_each_action_is_granted_on_its_own() -> None:
    admin_only = KeyPermissions(("*",), read=False, write=False, admin=True)
    assert [admin_only.allows("s", a) for a in ("read", "write", "admin")] == [False, False, True]
    read_only = KeyPermissions(("s",), read=True, write=False)
    assert [read_only.allows("s", a) for a in ("read", "write", "admin")] == [True, False, False]
    assert not read_only.allows("t", "read")


def test_an_unknown_action_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="unknown action 'delete'"):
        KeyPermissions().allows("s", "delete")


def test_a_list_of_patterns_becomes_a_tuple() -> None:
    assert KeyPermissions(["a", "b*"]).streams == ("a", "b*")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("streams", "message"),
    [
        ((), "1 to 64 stream patterns"),
        (tuple(f"s{i}" for i in range(65)), "1 to 64 stream patterns"),
        (("",), "invalid stream pattern"),
        (("a/b",), "invalid stream pattern"),
        (("a b",), "invalid stream pattern"),
        (("x" * 257,), "invalid stream pattern"),
        ("orders", "a sequence of patterns"),
    ],
)
def test_malformed_stream_patterns_are_refused(streams: tuple[str, ...], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        KeyPermissions(streams)


def test_a_key_allowed_nothing_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="at least one of read, write and admin"):
        KeyPermissions(read=False, write=False, admin=False)


def test_access_key_ids_look_like_aws_ones() -> None:
    ids = {new_access_key_id() for _ in range(200)}
    assert len(ids) == 200
    for access_key_id in ids:
        assert re.fullmatch(r"LLOG[A-Z2-7]{16}", access_key_id)
        assert is_access_key_id(access_key_id)
        assert validate_access_key_id(access_key_id) == access_key_id


@pytest.mark.parametrize("text", ["", "LLOG", "LLOGAAAAAAAAAAAAAAA1", "llogaaaaaaaaaaaaaaaa", "LLOGAAAAAAAAAAAAAAAA/",
                                  "AKIAAAAAAAAAAAAAAAAA", "LLOG/AAAAAAAAAAAAAAA", None, 12])  # fmt: skip
def test_anything_else_is_no_access_key_id(text: object) -> None:
    assert not is_access_key_id(text)
    with pytest.raises(InvalidArgument):
        validate_access_key_id(text)


def test_secrets_are_40_characters_of_url_safe_base64() -> None:
    secrets = {new_secret() for _ in range(200)}
    assert len(secrets) == 200
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{40}", s) for s in secrets)


@pytest.mark.parametrize("name", ["", "x" * 129, "tab\there", "line\nbreak"])
def test_key_names_are_1_to_128_printable_characters(name: str) -> None:
    with pytest.raises(InvalidArgument, match="invalid key name"):
        validate_key_name(name)
    assert validate_key_name("ingest (team été)") == "ingest (team été)"


def test_keys_sit_at_one_depth_on_the_catalogue_shard() -> None:
    keys = AccessKeyKeys("r/x")
    key = keys.access_key("LLOGABCDEFGHIJKLMNOP")
    assert key == "r/x/__catalog/access-keys/LLOGABCDEFGHIJKLMNOP"
    assert keys.prefix <= key < keys.scan_end
    assert keys.parse_access_key(key) == "LLOGABCDEFGHIJKLMNOP"
    assert keys.parse_access_key("r/x/__catalog/access-keys/nope") is None
    assert keys.parse_access_key("r/x/__catalog/topics/LLOGABCDEFGHIJKLMNOP") is None
    assert keys.iterator_key == "r/x/__catalog/kinesis-iterator-key"
    assert keys.partition_key == "__catalog"
    with pytest.raises(InvalidArgument):
        keys.access_key("../../x")


def test_a_stored_key_of_the_wrong_shape_is_corrupt_metadata() -> None:  # its bytes: test_document_golden.py
    with pytest.raises(CorruptMetadata, match="k: Object missing required field"):
        AccessKeyRecord.decode(b'{"name":"x"}', "k")
