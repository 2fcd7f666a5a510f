"""Minimal protobuf wire writing agrees with the protobuf runtime."""

import pytest

from phylorl.wire import codec, protowire
from phylorl.wire.v1 import common_pb2, replay_pb2


@pytest.mark.parametrize("value, encoded", [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"),
                                            (300, b"\xac\x02"), (2**63, b"\x80" * 9 + b"\x01")])
def test_varint_matches_the_protobuf_encoding(value, encoded):
    assert protowire.varint(value) == encoded


def test_packed_records_field_is_what_the_runtime_builds():
    records = [b"PRLT\x01" + bytes([i]) * (100 * i) for i in range(5)]
    for source in (records, codec.PackedRecords.from_records(records)):
        pieces = codec.packed_records_field(4, source)
        response = replay_pb2.SampleResponse.FromString(b"".join(pieces))
        expected = replay_pb2.SampleResponse()
        codec.pack_records(records, expected.transitions)
        assert response == expected
        assert [bytes(r) for r in codec.unpack_records(response.transitions)] == records


def test_unpacked_records_are_views_of_a_runtime_message():
    records = [b"a" * 10, b"", b"bcd"]
    message = common_pb2.PackedTransitions.FromString(codec.pack_records(records).SerializeToString())
    views = codec.unpack_records(message)
    assert [bytes(v) for v in views] == records and all(isinstance(v, memoryview) for v in views)


def test_malformed_input():
    with pytest.raises(ValueError, match="unknown dtype"):  # no offsets
        codec.unpack_records(common_pb2.PackedTransitions(data=b"x"))
    with pytest.raises(ValueError, match="non-negative"):
        protowire.varint(-1)
