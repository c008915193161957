"""Kinesis sequence numbers for llog offsets: 56-digit decimal strings that round-trip to (partition, offset).

Kinesis's sequence numbers are decimal strings of 56 digits that increase within a shard; clients treat them
as opaque, compare them within a shard and send them back (AT_/AFTER_SEQUENCE_NUMBER iterators, checkpoints).
llog's are laid out at fixed widths so that comparing two of a shard as strings or as integers agrees::

    49 | partition (12 digits) | 22 zeros | offset (20 digits)

The leading ``49`` keeps every number 56 digits with no leading zero, as Kinesis's look; the zeros are room
that a later layout (a sub-record number, a topic incarnation) may take without changing the width; the
offset's 20 digits hold any unsigned 64-bit offset. A string that is not such a number raises
``InvalidArgumentException`` with Kinesis's wording, and so does a number of another shard.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llog.api.kinesis.errors import InvalidArgumentException
from llog.api.kinesis.shards import SHARD_ID_DIGITS, shard_id

SEQUENCE_DIGITS = 56
_LEAD = "49"
_RESERVED_DIGITS = 22
OFFSET_DIGITS = 20
MAX_OFFSET = 10**OFFSET_DIGITS - 1
_SEQUENCE = re.compile(rf"{_LEAD}([0-9]{{{SHARD_ID_DIGITS}}})0{{{_RESERVED_DIGITS}}}([0-9]{{{OFFSET_DIGITS}}})")


@dataclass(frozen=True, order=True)
class SequencePosition:
    """The record a sequence number names."""

    partition: int
    offset: int


def sequence_number(partition: int, offset: int) -> str:
    """The sequence number of the record at ``offset`` of ``partition``."""
    if not 0 <= offset <= MAX_OFFSET:
        raise ValueError(f"offset {offset} has no sequence number")
    return f"{_LEAD}{shard_id(partition)[-SHARD_ID_DIGITS:]}{'0' * _RESERVED_DIGITS}{offset:0{OFFSET_DIGITS}d}"


def parse_sequence_number(text: str) -> SequencePosition:
    """The (partition, offset) of a sequence number llog gave; anything else is ``InvalidArgumentException``."""
    match = _SEQUENCE.fullmatch(text)
    if match is None:
        raise InvalidArgumentException(f"Invalid SequenceNumber {text!r}: not a sequence number of this stream")
    return SequencePosition(int(match.group(1)), int(match.group(2)))


def offset_in_shard(text: str, partition: int, parameter: str = "StartingSequenceNumber") -> int:
    """The offset of sequence number ``text``, which must be of ``partition``'s shard (``parameter`` names it)."""
    try:
        position = parse_sequence_number(text)
    except InvalidArgumentException:
        raise InvalidArgumentException(
            f"{parameter} {text} used in a call to shard {shard_id(partition)} is invalid"
        ) from None
    if position.partition != partition:
        raise InvalidArgumentException(
            f"Invalid {parameter}. It encodes {shard_id(position.partition)}, while it was used in a call to "
            f"a shard with {shard_id(partition)}"
        )
    return position.offset
