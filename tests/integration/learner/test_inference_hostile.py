"""Hostile input against the real inference endpoint (gRPC on loopback), property-based: states of wrong
shapes or dtypes, NaN or infinite values, node ids out of range, a tree that is not binary, no move
(:mod:`hostile`). Every one is answered INVALID_ARGUMENT naming the state, and the endpoint keeps serving."""

from __future__ import annotations

import grpc
import pytest
from hostile import broken, observation_record, parts_of, state_bytes, valid
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inference_endpoint import start_inference

from phylorl.nets.config import NetworkConfig
from phylorl.wire import codec
from phylorl.wire.v1 import inference_pb2, inference_pb2_grpc

CFG = NetworkConfig(hidden=16, action_hidden=16, head_hidden=16)


@pytest.fixture(scope="module")
def stub():
    server, inference, address = start_inference(CFG)
    channel = grpc.insecure_channel(address)
    yield inference_pb2_grpc.InferenceServiceStub(channel)
    channel.close()
    server.stop(1.0)
    inference.close()


def act(stub, records: list[bytes]):
    request = inference_pb2.ActRequest(actor_id="hostile", greedy=True)
    codec.pack_records(records, request.states)
    return next(stub.ActStream(iter([request]), timeout=30))


def good(seed: int) -> bytes:
    return observation_record(state_bytes(parts_of(valid(seed))))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bad=broken(), position=st.integers(0, 2))
def test_broken_states_are_invalid_argument_and_the_endpoint_keeps_serving(stub, bad, position):
    records = [good(1), good(2)]
    records.insert(position, observation_record(bad))
    with pytest.raises(grpc.RpcError) as raised:
        act(stub, records)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT, raised.value.details()
    details = raised.value.details()
    assert details.startswith(f"state {position} of 3:") or details.startswith("a state of the 3:"), details
    reply = act(stub, [good(3)])  # still serving
    assert codec.ndarray_from_proto(reply.actions).shape == (1,)


def test_garbage_bytes_and_empty_requests(stub):
    with pytest.raises(grpc.RpcError) as raised:
        next(stub.ActStream(iter([inference_pb2.ActRequest(actor_id="hostile")]), timeout=10))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as raised:
        act(stub, [b"\x00\x01garbage"])
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert codec.ndarray_from_proto(act(stub, [good(4)]).actions).shape == (1,)
