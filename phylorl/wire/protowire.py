"""Just enough of the protobuf wire format to write and read large ``bytes`` fields without copies.

A serialised message is the concatenation of its fields, each ``tag`` (field number and wire
type, a varint) then the value; a length-delimited value (``bytes``, sub-message) is a varint
length then that many bytes. So a message whose bulk is one big ``bytes`` field can be written as
``small_part.SerializeToString()`` followed by the bulk field built here from its pieces in a
single ``b"".join``, and read by slicing the received buffer: any protobuf library reads the
result as the same message.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

VARINT, I64, LEN, I32 = 0, 1, 2, 5


class Field(NamedTuple):
    number: int
    wire_type: int
    value: int | memoryview   # int for VARINT/I64/I32 (raw bits), the payload for LEN
    start: int                # first byte of the field (its tag) in the buffer
    end: int                  # one past its last byte


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


def read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    """Decode the varint at ``pos``; returns ``(value, position after it)``."""
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("protobuf message truncated inside a varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("protobuf varint longer than 10 bytes")


def iter_fields(buf: bytes | memoryview) -> Iterator[Field]:
    """Top-level fields of a serialised message, in wire order; LEN payloads are zero-copy views."""
    view = memoryview(buf)
    pos = 0
    while pos < len(view):
        start = pos
        key, pos = read_varint(view, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == VARINT:
            value, pos = read_varint(view, pos)
        elif wire_type == LEN:
            length, pos = read_varint(view, pos)
            if pos + length > len(view):
                raise ValueError(f"protobuf field {number} claims {length} bytes past the end of the message")
            value, pos = view[pos:pos + length], pos + length
        elif wire_type in (I64, I32):
            size = 8 if wire_type == I64 else 4
            if pos + size > len(view):
                raise ValueError(f"protobuf message truncated inside field {number}")
            value, pos = int.from_bytes(view[pos:pos + size], "little"), pos + size
        else:
            raise ValueError(f"protobuf field {number} has unsupported wire type {wire_type}")
        yield Field(number, wire_type, value, start, pos)
