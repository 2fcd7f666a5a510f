"""Publishing the learner's live parameters to the inference endpoint: copies taken at publication, networks
written again only when no reader needs them, and ``GetWeights`` always the weights of the version it names."""

from __future__ import annotations

import io

import grpc
import numpy as np
import pytest
import torch

from phylorl.agent.learner import Learner
from phylorl.nets.config import NetworkConfig
from phylorl.wire.v1 import inference_pb2, inference_pb2_grpc
from services.learner.inference import BatchingInference, Recycled
from services.learner.server import make_server, weights_response

SMALL = NetworkConfig(hidden=32, action_hidden=32, head_hidden=32)


def _served(blob: bytes) -> dict:
    return torch.load(io.BytesIO(blob))


@pytest.fixture
def inference():
    endpoint = BatchingInference(SMALL, torch.device("cpu"), max_batch=8, max_delay_s=0.01, max_queue=8)
    yield endpoint
    endpoint.close()


def test_a_publication_of_live_parameters_serves_them_as_they_were_then(inference):
    learner = Learner(SMALL, device="cpu", seed=0)
    for version in range(4):  # past the first publications: retired networks are written again from here
        inference.publish(learner.policy_tensors(), learner.alpha, version)
        with torch.no_grad():
            for p in learner.q1.parameters():
                p.add_(1.0)  # as the next update changes them
    published = {k: v.detach().clone() for k, v in learner.q1.state_dict().items()}
    snapshot = inference.publish(learner.policy_tensors(), learner.alpha, 9)
    with torch.no_grad():
        for p in learner.q1.parameters():
            p.mul_(-3.0)
    served = _served(snapshot.blob)
    assert served["version"] == 9
    assert all(torch.equal(served["weights"]["q1"][k], v) for k, v in published.items())
    assert all(torch.equal(p, published[k]) for k, p in snapshot.pair[0].named_parameters())


def test_weights_of_another_shape_are_refused_naming_the_keys(inference):
    learner = Learner(SMALL, device="cpu", seed=0)
    for version in range(3):
        inference.publish(learner.policy_tensors(), learner.alpha, version)
    bad = learner.policy_tensors()
    bad["q2"] = {**bad["q2"], "extra.weight": torch.zeros(2)}
    with pytest.raises(ValueError, match=r"policy weights q2: keys differ.*extra\.weight"):
        inference.publish(bad, learner.alpha, 5)


def test_a_recycled_snapshot_never_serves_other_weights_and_get_weights_serves_the_current(inference):
    learner = Learner(SMALL, device="cpu", seed=0)
    first = inference.publish(learner.policy_tensors(), learner.alpha, 1)
    asked = inference.publish(learner.policy_tensors(), learner.alpha, 2)  # retires 1
    kept = asked.blob  # serialised before its networks are reused: stays as it is
    with torch.no_grad():
        for p in learner.q2.parameters():
            p.add_(5.0)
    current = inference.publish(learner.policy_tensors(), learner.alpha, 3)  # writes 1's networks again
    assert current.pair is first.pair
    with pytest.raises(Recycled, match="version 1"):
        first.blob
    assert inference.publish(learner.policy_tensors(), learner.alpha, 4).pair is asked.pair
    assert asked.blob == kept and _served(kept)["version"] == 2
    response = weights_response(inference, known_version=0)
    assert response.version == 4 and _served(response.weights)["version"] == 4
    assert all(torch.equal(_served(response.weights)["weights"]["q2"][k], p)
               for k, p in learner.q2.named_parameters())
    assert weights_response(inference, known_version=4).weights == b""


def test_networks_whose_blob_is_being_made_are_not_written_again(inference):
    learner = Learner(SMALL, device="cpu", seed=0)
    first = inference.publish(learner.policy_tensors(), learner.alpha, 1)
    inference.publish(learner.policy_tensors(), learner.alpha, 2)  # retires 1: the next publication's spare
    before = [p.clone() for p in first.pair[1].parameters()]
    with first._lock:  # as GetWeights serialising version 1 on another thread
        with torch.no_grad():
            for p in learner.q2.parameters():
                p.add_(1.0)
        newest = inference.publish(learner.policy_tensors(), learner.alpha, 3)
    assert newest.pair is not first.pair
    assert all(torch.equal(a, b) for a, b in zip(before, first.pair[1].parameters()))
    assert _served(first.blob)["version"] == 1


@pytest.mark.parametrize("kind", ["threads", "asyncio"])
def test_get_weights_over_grpc_before_and_after_the_first_publication(kind):
    endpoint = BatchingInference(SMALL, torch.device("cpu"), max_batch=8, max_delay_s=0.01, max_queue=8)
    server = make_server(kind, endpoint, "127.0.0.1", 0)
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    stub = inference_pb2_grpc.InferenceServiceStub(channel)
    try:
        with pytest.raises(grpc.RpcError) as error:
            stub.GetWeights(inference_pb2.GetWeightsRequest(known_version=0), timeout=10)
        assert error.value.code() == grpc.StatusCode.UNAVAILABLE
        learner = Learner(SMALL, device="cpu", seed=1)
        endpoint.publish(learner.policy_tensors(), learner.alpha, 6)
        reply = stub.GetWeights(inference_pb2.GetWeightsRequest(known_version=0), timeout=10)
        served = _served(reply.weights)
        assert reply.version == 6 and served["version"] == 6
        assert all(np.array_equal(served["weights"]["q1"][k].numpy(), p.detach().numpy())
                   for k, p in learner.q1.named_parameters())
    finally:
        channel.close()
        server.stop(1.0)
        endpoint.close()


@pytest.mark.parametrize("graphs", [False, True])
def test_a_temperature_published_as_a_tensor_is_served_as_it_was_then(graphs):
    """``Learner.policy_alpha`` (a tensor computed on the learner's stream, never read on its host) answers as the
    number would, the blob carries the number, and a tensor that is not one 0-d value is refused."""
    from phylorl.phylo import enumerate_moves, move_metadata, random_tree
    from phylorl.env.tree_observation import build_observation

    rng = np.random.default_rng(5)
    observations = []
    for _ in range(3):
        tree = random_tree([f"t{i}" for i in range(9)], rng)
        moves = enumerate_moves(tree)
        observations.append(build_observation(tree, moves, move_metadata(tree, moves)))
    learner = Learner(SMALL, device="cpu", seed=0)
    with torch.no_grad():
        learner.log_alpha.fill_(np.log(0.3))  # a temperature the answers' soft values depend on
    answers = {}
    for kind in ("number", "tensor"):
        endpoint = BatchingInference(SMALL, torch.device("cpu"), max_batch=8, max_delay_s=0.01, max_queue=8,
                                     cuda_graphs=graphs)
        try:
            alpha = learner.alpha if kind == "number" else learner.policy_alpha()
            snapshot = endpoint.publish(learner.policy_tensors(), alpha, 4)
            if kind == "tensor":
                with torch.no_grad():
                    learner.log_alpha.add_(1.0)  # as the next update changes it: the snapshot keeps its own
                with pytest.raises(ValueError, match="alpha must be a number or a 0-d tensor"):
                    endpoint.publish(learner.policy_tensors(), torch.ones(2), 5)
            answers[kind] = endpoint.act(observations, greedy=True, timeout_s=60)
            served = _served(snapshot.blob)
            assert isinstance(served["alpha"], float) and served["alpha"] == pytest.approx(0.3, rel=1e-6)
        finally:
            endpoint.close()
    for got, want in zip(answers["tensor"][:3], answers["number"][:3]):
        np.testing.assert_allclose(got, want, rtol=1e-6)
