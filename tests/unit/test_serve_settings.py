"""``llog serve``'s own settings, read from the environment."""

from __future__ import annotations

import pytest

from devserver.serve import access_log_from_env
from llog.errors import LlogError


@pytest.mark.parametrize(
    ("raw", "choice"), [(None, "errors"), ("", "errors"), ("all", "all"), (" OFF ", "off"), ("errors", "errors")]
)
def test_the_access_log_setting(raw: str | None, choice: str) -> None:
    assert access_log_from_env({} if raw is None else {"LLOG_SERVE_ACCESS_LOG": raw}) == choice


def test_an_unknown_access_log_setting_is_refused_with_its_name_and_choices() -> None:
    with pytest.raises(LlogError, match=r"LLOG_SERVE_ACCESS_LOG must be one of errors, all, off, not 'some'"):
        access_log_from_env({"LLOG_SERVE_ACCESS_LOG": "some"})
