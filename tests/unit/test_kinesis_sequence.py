"""Kinesis sequence numbers: fixed-width decimals that round-trip to (partition, offset)."""

from __future__ import annotations

import pytest

from llog.api.kinesis.errors import InvalidArgumentException
from llog.api.kinesis.sequence import (
    MAX_OFFSET,
    SEQUENCE_DIGITS,
    SequencePosition,
    offset_in_shard,
    parse_sequence_number,
    sequence_number,
)

POSITIONS = [(0, 0), (0, 1), (1, 0), (3, 999), (17, 2**63 - 1), (10**12 - 1, MAX_OFFSET)]


@pytest.mark.parametrize(("partition", "offset"), POSITIONS)
def test_a_sequence_number_is_56_digits_and_round_trips(partition: int, offset: int) -> None:
    text = sequence_number(partition, offset)
    assert len(text) == SEQUENCE_DIGITS == 56
    assert text.isdigit()
    assert text[0] != "0"
    assert parse_sequence_number(text) == SequencePosition(partition, offset)
    assert offset_in_shard(text, partition) == offset


def test_the_layout_reads_as_documented() -> None:
    assert sequence_number(3, 42) == "49" + "000000000003" + "0" * 22 + "00000000000000000042"


def test_string_and_integer_order_agree_with_offset_order() -> None:
    offsets = [0, 1, 9, 10, 99, 100, 12345, 2**32, 2**63 - 1, MAX_OFFSET]
    numbers = [sequence_number(5, offset) for offset in offsets]
    assert sorted(numbers) == numbers
    assert sorted(numbers, key=int) == numbers
    assert len(set(numbers)) == len(numbers)


@pytest.mark.parametrize("offset", [-1, MAX_OFFSET + 1])
def test_an_offset_outside_twenty_digits_has_no_sequence_number(offset: int) -> None:
    with pytest.raises(ValueError, match="no sequence number"):
        sequence_number(0, offset)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "0",
        "49554751971385712311965096607999491514675643249030332418",  # a real Kinesis one: reserved digits set
        sequence_number(1, 5)[:-1],
        sequence_number(1, 5) + "0",
        "5" + sequence_number(1, 5)[1:],
        sequence_number(1, 5).replace("49", "48", 1),
        " " + sequence_number(1, 5)[1:],
        sequence_number(1, 5)[:-1] + "x",
    ],
)
def test_anything_else_is_an_invalid_argument(text: str) -> None:
    with pytest.raises(InvalidArgumentException, match="Invalid SequenceNumber") as caught:
        parse_sequence_number(text)
    assert caught.value.status == 400
    with pytest.raises(InvalidArgumentException, match=f"StartingSequenceNumber {text} used in a call to shard"):
        offset_in_shard(text, 1)


def test_a_sequence_number_of_another_shard_is_refused_naming_both() -> None:
    with pytest.raises(InvalidArgumentException) as caught:
        offset_in_shard(sequence_number(2, 7), 0, "ExclusiveStartSequenceNumber")
    assert caught.value.message == (
        "Invalid ExclusiveStartSequenceNumber. It encodes shardId-000000000002, while it was used in a call to "
        "a shard with shardId-000000000000"
    )
