"""Minimal protobuf wire reading/writing agrees with the protobuf runtime."""

import numpy as np
import pytest

from phylorl.wire import codec, protowire
from phylorl.wire.v1 import common_pb2, replay_pb2


@pytest.mark.parametrize("value, encoded", [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"),
                                            (300, b"\xac\x02"), (2**63, b"\x80" * 9 + b"\x01")])
def test_varint_matches_the_protobuf_encoding(value, encoded):
    assert protowire.varint(value) == encoded
    assert protowire.read_varint(memoryview(encoded), 0) == (value, len(encoded))


def test_iter_fields_of_a_runtime_message():
    message = replay_pb2.StatsResponse(size=5, total_priority=2.5, alpha=0.25)
    message.MergeFrom(replay_pb2.StatsResponse(next_key=300))
    raw = message.SerializeToString()
    fields = {f.number: f for f in protowire.iter_fields(raw)}
    assert fields[1].value == 5 and fields[6].value == 300
    assert np.frombuffer(fields[7].value.to_bytes(8, "little"), "<f8")[0] == 2.5
    assert fields[9].wire_type == protowire.I64
    assert b"".join(raw[f.start:f.end] for f in fields.values()) == raw


def test_packed_records_field_is_what_the_runtime_builds():
    records = [b"PRLT\x01" + bytes([i]) * (100 * i) for i in range(5)]
    pieces = codec.packed_records_field(4, records)
    response = replay_pb2.SampleResponse.FromString(b"".join(pieces))
    expected = replay_pb2.SampleResponse()
    codec.pack_records(records, expected.transitions)
    assert response == expected
    field = next(protowire.iter_fields(b"".join(pieces)))
    assert [bytes(r) for r in codec.records_from_wire(field.value)] == records


def test_records_from_wire_of_a_runtime_message():
    records = [b"a" * 10, b"", b"bcd"]
    wire = codec.pack_records(records).SerializeToString()
    views = codec.records_from_wire(wire)
    assert [bytes(v) for v in views] == records and all(isinstance(v, memoryview) for v in views)


def test_truncated_and_malformed_input():
    raw = common_pb2.NDArray(data=b"x" * 50, dtype="uint8").SerializeToString()
    with pytest.raises(ValueError, match="past the end"):
        list(protowire.iter_fields(raw[:-1]))
    with pytest.raises(ValueError, match="inside a varint"):
        list(protowire.iter_fields(b"\x08\x80"))
    with pytest.raises(ValueError, match="wire type 3"):
        list(protowire.iter_fields(b"\x0b"))
    with pytest.raises(ValueError, match="no offsets"):
        codec.records_from_wire(b"\x0a\x01x")
    with pytest.raises(ValueError, match="non-negative"):
        protowire.varint(-1)
