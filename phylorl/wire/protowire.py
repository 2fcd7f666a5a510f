"""Just enough of the protobuf wire format to write large ``bytes`` fields without copies.

A serialised message is the concatenation of its fields, each ``tag`` (field number and wire
type, a varint) then the value; a length-delimited value (``bytes``, sub-message) is a varint
length then that many bytes. So a message whose bulk is one big ``bytes`` field can be written as
``small_part.SerializeToString()`` followed by the bulk field built here from its pieces in a
single ``b"".join``: any protobuf library reads the result as the same message.
"""

from __future__ import annotations

LEN = 2  # wire type of length-delimited fields


def varint(value: int) -> bytes:
    """Base-128 varint encoding of a non-negative ``value``."""
    if value < 0:
        raise ValueError(f"varint needs a non-negative value, got {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def len_header(number: int, length: int) -> bytes:
    """Tag and length prefix of a length-delimited field ``number`` holding ``length`` bytes."""
    return varint(number << 3 | LEN) + varint(length)
