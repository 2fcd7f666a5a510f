"""The replay service's fast serialisers produce and read standard phylorl.v1 protobuf bytes."""

import numpy as np
import pytest

from phylorl.wire import codec, record
from phylorl.wire.synthetic import random_transition
from phylorl.wire.v1 import replay_pb2
from services.replay import wire


def records(n):
    rng = np.random.default_rng(0)
    return [record.encode_transition(random_transition(6, 30, rng)) for _ in range(n)]


def test_insert_request_reads_as_the_runtime_message():
    data = records(3)
    raw = wire.encode_insert_request(data, np.array([1.0, 0.5, 2.0]), timeout_ms=250)
    request = replay_pb2.InsertRequest.FromString(raw)
    assert request.timeout_ms == 250 and request.WhichOneof("payload") == "packed"
    np.testing.assert_array_equal(codec.ndarray_from_proto(request.priorities), [1.0, 0.5, 2.0])
    assert [bytes(r) for r in codec.unpack_records(request.packed)] == data


def test_decode_insert_request_from_runtime_bytes():
    data = records(2)
    request = replay_pb2.InsertRequest(timeout_ms=7)
    codec.pack_records(data, request.packed)
    payload = wire.decode_insert_request(request.SerializeToString())
    assert [bytes(r) for r in payload.records] == data
    assert payload.priorities is None and payload.timeout_ms == 7


def test_decode_insert_request_with_plain_transitions():
    transitions = [random_transition(5, 8, np.random.default_rng(s)) for s in range(2)]
    request = replay_pb2.InsertRequest()
    for t in transitions:
        codec.transition_to_proto(t, request.transitions.transitions.add())
    payload = wire.decode_insert_request(request.SerializeToString())
    assert [bytes(r) for r in payload.records] == [record.encode_transition(t) for t in transitions]


def test_decode_insert_request_rejects_foreign_records_and_empty_requests():
    with pytest.raises(ValueError, match="packed record 1 is not a transition record"):
        wire.decode_insert_request(wire.encode_insert_request(records(1) + [b"junk"], None, 0))
    with pytest.raises(ValueError, match="carries no transitions"):
        wire.decode_insert_request(replay_pb2.InsertRequest(timeout_ms=5).SerializeToString())


def test_sample_response_round_trip_and_runtime_equivalence():
    data = records(4)
    small = replay_pb2.SampleResponse(size=9)
    codec.ndarray_to_proto(np.array([3, 1, 3, 8]), small.keys)
    raw = wire.encode_sample_response(small, data)
    expected = replay_pb2.SampleResponse()
    expected.CopyFrom(small)
    codec.pack_records(data, expected.transitions)
    assert replay_pb2.SampleResponse.FromString(raw) == expected
    got_small, got_records = wire.decode_sample_response(expected.SerializeToString())
    assert got_small == expected and [bytes(r) for r in got_records] == data
