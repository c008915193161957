"""Kinesis shard iterators: round-trip, expiry after five minutes, and refusal of anything not signed by us."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from llog.api.kinesis.errors import ExpiredIteratorException, InvalidArgumentException
from llog.api.kinesis.iterators import (
    ITERATOR_LIFETIME_MS,
    MAX_ITERATOR_LENGTH,
    ShardIterator,
    decode_iterator,
    encode_iterator,
)

KEY = b"iterator-key-0123456789abcdef"
ISSUED = 1_796_601_600_000  # 2026-12-07T00:00:00Z
ITERATOR = ShardIterator("orders", "0f8e4b6c2a9d4e1f", 3, 12345, ISSUED)


def test_an_iterator_round_trips_within_its_lifetime() -> None:
    text = encode_iterator(ITERATOR, KEY)
    assert decode_iterator(text, KEY, ISSUED) == ITERATOR
    assert decode_iterator(text, KEY, ISSUED + ITERATOR_LIFETIME_MS) == ITERATOR


def test_the_longest_stream_name_fits_in_kinesis_iterator_length() -> None:
    longest = ShardIterator("s" * 128, "f" * 36, 10**12 - 1, 2**64 - 1, ISSUED)
    text = encode_iterator(longest, KEY)
    assert len(text) <= MAX_ITERATOR_LENGTH
    assert decode_iterator(text, KEY, ISSUED) == longest


def test_an_iterator_over_512_characters_is_not_issued() -> None:
    with pytest.raises(ValueError, match="over Kinesis's 512"):
        encode_iterator(ShardIterator("s" * 400, "t", 0, 0, ISSUED), KEY)


def test_an_iterator_expires_five_minutes_after_issue() -> None:
    text = encode_iterator(ITERATOR, KEY)
    with pytest.raises(ExpiredIteratorException) as caught:
        decode_iterator(text, KEY, ISSUED + ITERATOR_LIFETIME_MS + 1)
    assert caught.value.status == 400
    assert caught.value.body()["__type"] == "ExpiredIteratorException"
    assert caught.value.message.startswith(
        "Iterator expired. The iterator was created at time Mon Dec 07 00:00:00 UTC 2026 while right now it is "
        "Mon Dec 07 00:05:00 UTC 2026 which is further in the future than the tolerated delay of 300000"
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _signed(payload: str) -> str:
    """``payload`` signed with ``KEY`` as the encoder signs, so only the payload's content is under test."""
    return f"{payload}.{_b64(hmac.new(KEY, payload.encode(), hashlib.sha256).digest())}"


def test_every_altered_character_is_refused() -> None:
    text = encode_iterator(ITERATOR, KEY)
    for index, character in enumerate(text):
        altered = text[:index] + ("A" if character != "A" else "B") + text[index + 1 :]
        with pytest.raises(InvalidArgumentException, match=r"^Invalid ShardIterator\.$"):
            decode_iterator(altered, KEY, ISSUED)


def test_an_iterator_signed_with_another_key_is_refused() -> None:
    text = encode_iterator(ITERATOR, b"another key")
    with pytest.raises(InvalidArgumentException):
        decode_iterator(text, KEY, ISSUED)


def test_a_forged_payload_with_the_old_signature_is_refused() -> None:
    _, _, signature = encode_iterator(ITERATOR, KEY).partition(".")
    forged = _b64(json.dumps([1, "orders", "0f8e4b6c2a9d4e1f", 3, 0, ISSUED]).encode())
    with pytest.raises(InvalidArgumentException):
        decode_iterator(f"{forged}.{signature}", KEY, ISSUED)


@pytest.mark.parametrize(
    "text",
    ["", ".", "garbage", "a.b", "x" * 600, "é.é", encode_iterator(ITERATOR, KEY).replace(".", "")],
)
def test_garbage_is_an_invalid_argument(text: str) -> None:
    with pytest.raises(InvalidArgumentException):
        decode_iterator(text, KEY, ISSUED)


@pytest.mark.parametrize(
    "fields",
    [
        [2, "orders", "t", 3, 0, ISSUED],
        ["1", "orders", "t", 3, 0, ISSUED],
        [1, "orders", "t", "3", 0, ISSUED],
        [1, "orders", "t", 3, 0],
        {"stream": "orders"},
        "not a list",
    ],
)
def test_a_signed_payload_of_the_wrong_shape_is_refused(fields: object) -> None:
    with pytest.raises(InvalidArgumentException):
        decode_iterator(_signed(_b64(json.dumps(fields).encode())), KEY, ISSUED)


def test_a_signed_payload_that_is_not_json_is_refused() -> None:
    for payload in (_b64(b"not json"), "!!!", _b64(b"\xff\xfe")):
        with pytest.raises(InvalidArgumentException):
            decode_iterator(_signed(payload), KEY, ISSUED)


def test_the_signing_helper_matches_the_encoder() -> None:
    text = encode_iterator(ITERATOR, KEY)
    assert _signed(text.partition(".")[0]) == text


def test_an_empty_key_is_a_bug() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        encode_iterator(ITERATOR, b"")
    with pytest.raises(ValueError, match="must not be empty"):
        decode_iterator("a.b", b"", ISSUED)
