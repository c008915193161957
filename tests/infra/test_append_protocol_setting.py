"""``llog:appendProtocol``: the append protocol of the partitions the functions create (docs/SEQUENTIAL_APPEND.md)."""

from __future__ import annotations

import pytest

from infra.settings import LlogSettings, SettingsError
from infra.stack import LlogStack
from llog.config import append_protocol_from_env
from llog.format.kv.control import AppendProtocol


def settings(**context: str) -> LlogSettings:
    return LlogSettings.from_context(lambda key: context.get(key.removeprefix("llog:")))


def test_the_sequential_protocol_is_the_default_since_it_passed_the_soak_on_real_oxia() -> None:
    assert settings().append_protocol == "sequential"
    assert settings(stage="prod").append_protocol == "sequential"
    assert settings(appendProtocol="auto").append_protocol == "sequential"


def test_cas_is_accepted_and_read_back_by_llogs_own_parser() -> None:
    chosen = settings(appendProtocol="cas").append_protocol
    assert chosen == "cas"
    assert append_protocol_from_env({"LLOG_APPEND_PROTOCOL": chosen}) is AppendProtocol.CAS


def test_an_unknown_protocol_names_the_key() -> None:
    with pytest.raises(SettingsError, match="llog:appendProtocol"):
        settings(appendProtocol="raft")


def test_the_former_name_seed_still_means_cas() -> None:
    assert settings(appendProtocol="seed").append_protocol == "cas"


def test_every_function_gets_the_setting(dev_stack: LlogStack) -> None:
    assert dev_stack.function_environment()["LLOG_APPEND_PROTOCOL"] == "sequential"
