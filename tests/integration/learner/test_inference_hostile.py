"""Hostile input against the real inference endpoint (gRPC on loopback), property-based: observations
of wrong shapes or dtypes, NaN or infinite values, node ids out of range, too many neighbours, no move.
Every one is answered INVALID_ARGUMENT naming what is wrong, and the endpoint keeps serving."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phylorl.env import build_observation
from phylorl.env.observation import Observation
from phylorl.nets.config import NetworkConfig
from phylorl.phylo import enumerate_moves, move_metadata, random_tree
from phylorl.wire import codec
from phylorl.wire.v1 import inference_pb2, inference_pb2_grpc

CFG = NetworkConfig(hidden=16, action_hidden=16, head_hidden=16)


@pytest.fixture
def stub(inference_factory):
    channel = grpc.insecure_channel(inference_factory(CFG))
    yield inference_pb2_grpc.InferenceServiceStub(channel)
    channel.close()


def valid(seed: int = 0, n_taxa: int = 6) -> Observation:
    tree = random_tree([f"t{i}" for i in range(n_taxa)], np.random.default_rng(seed))
    moves = enumerate_moves(tree)
    return build_observation(tree, moves, move_metadata(tree, moves))


def act(stub, observations):
    request = inference_pb2.ActRequest(actor_id="hostile", greedy=True)
    for obs in observations:
        codec.observation_to_proto(obs, request.observations.add())
    return stub.Act(request, timeout=30)


BAD_FLOATS = st.sampled_from([np.nan, np.inf, -np.inf])
FIELDS = ("node_features", "edge_index", "edge_attr", "actions", "action_meta")


@st.composite
def broken(draw):
    """A valid observation with one thing broken."""
    obs = valid(draw(st.integers(0, 50)), draw(st.integers(4, 9)))
    arrays = {name: getattr(obs, name).copy() for name in FIELDS}
    how = draw(st.sampled_from(["shape", "dtype", "nonfinite", "node_id", "negative_id", "degree", "no_moves"]))
    name = draw(st.sampled_from(FIELDS))
    if how == "shape":
        arrays[name] = arrays[name][..., :-1] if arrays[name].shape[-1] > 1 else np.concatenate(
            [arrays[name], arrays[name]], axis=-1)
    elif how == "dtype":
        arrays[name] = arrays[name].astype(np.float32 if arrays[name].dtype.kind in "iu" else np.int64)
    elif how == "nonfinite":
        name = draw(st.sampled_from(["node_features", "edge_attr", "action_meta"]))
        flat = arrays[name].reshape(-1)
        flat[draw(st.integers(0, flat.size - 1))] = draw(BAD_FLOATS)
    elif how in ("node_id", "negative_id"):
        name = draw(st.sampled_from(["edge_index", "actions"]))
        flat = arrays[name].reshape(-1)
        flat[draw(st.integers(0, flat.size - 1))] = (arrays["node_features"].shape[0] + draw(st.integers(0, 1000))
                                                     if how == "node_id" else -1 - draw(st.integers(0, 1000)))
    elif how == "degree":
        extra = np.array([[0, 0, 0, 0], [1, 2, 3, 4]], dtype=arrays["edge_index"].dtype)
        arrays["edge_index"] = np.concatenate([arrays["edge_index"], extra], axis=1)
        arrays["edge_attr"] = np.concatenate([arrays["edge_attr"], arrays["edge_attr"][:4]])
    else:
        arrays["actions"], arrays["action_meta"] = arrays["actions"][:0], arrays["action_meta"][:0]
    return Observation(**arrays)


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
    request.observations.add().node_features.data = b"\x00\x01garbage"
    with pytest.raises(grpc.RpcError) as raised:
        channel_stub.Act(request, timeout=10)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert codec.ndarray_from_proto(act(stub, [valid(4)]).actions).shape == (1,)
