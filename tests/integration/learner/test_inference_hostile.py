"""Hostile input against the real inference endpoint (gRPC on loopback), property-based: observations
of wrong shapes or dtypes, NaN or infinite values, node ids out of range, too many neighbours, no move.
Every one is answered INVALID_ARGUMENT naming what is wrong, and the endpoint keeps serving."""

from __future__ import annotations

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostile import broken, valid
from phylorl.nets.config import NetworkConfig
from phylorl.wire import codec
from phylorl.wire.v1 import inference_pb2, inference_pb2_grpc
from services.learner.config import SERVER_KINDS

CFG = NetworkConfig(hidden=16, action_hidden=16, head_hidden=16)


@pytest.fixture(params=SERVER_KINDS)
def stub(request, inference_factory):
    channel = grpc.insecure_channel(inference_factory(CFG, server=request.param))
    yield inference_pb2_grpc.InferenceServiceStub(channel)
    channel.close()


def act(stub, observations):
    request = inference_pb2.ActRequest(actor_id="hostile", greedy=True)
    codec.pack_observations(observations, request.states)
    return stub.Act(request, timeout=30)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bad=broken(), position=st.integers(0, 2))
def test_broken_observations_are_invalid_argument_and_the_endpoint_keeps_serving(stub, bad, position):
    observations = [valid(1), valid(2)]
    observations.insert(position, bad)
    with pytest.raises(grpc.RpcError) as raised:
        act(stub, observations)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT, raised.value.details()
    assert raised.value.details().startswith(f"observation {position} of 3:")
    reply = act(stub, [valid(3)])  # still serving
    assert codec.ndarray_from_proto(reply.actions).shape == (1,)


def test_garbage_bytes_and_empty_requests(stub):
    channel_stub = stub
    with pytest.raises(grpc.RpcError) as raised:
        channel_stub.Act(inference_pb2.ActRequest(actor_id="hostile"), timeout=10)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    request = inference_pb2.ActRequest(actor_id="hostile")
    codec.pack_records([b"\x00\x01garbage"], request.states)
    with pytest.raises(grpc.RpcError) as raised:
        channel_stub.Act(request, timeout=10)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert codec.ndarray_from_proto(act(stub, [valid(4)]).actions).shape == (1,)
