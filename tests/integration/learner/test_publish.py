"""Publishing the learner's live parameters to the inference endpoint: copies taken at publication, weights of
another shape refused, a temperature published as a tensor answered as the number."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from phylorl.agent.learner import Learner
from phylorl.nets.config import NetworkConfig
from phylorl.nets.synthetic import random_observation
from phylorl.records.codec import encode_observation
from phylorl.records.format import PackedRecords
from services.learner.inference import BatchingInference

SMALL = NetworkConfig(hidden=32, action_hidden=32, head_hidden=32)


@pytest.fixture
def inference():
    endpoint = BatchingInference(SMALL, torch.device("cpu"), max_batch=8, max_delay_s=0.01, max_queue=8)
    yield endpoint
    endpoint.close()


def test_a_publication_of_live_parameters_serves_them_as_they_were_then(inference):
    learner = Learner(SMALL, device="cpu", seed=0)
    for version in range(4):
        inference.publish(learner.policy_tensors(), learner.alpha, version)
        with torch.no_grad():
            for p in learner.q1.parameters():
                p.add_(1.0)  # as the next update changes them
    published = {k: v.detach().clone() for k, v in learner.q1.state_dict().items()}
    snapshot = inference.publish(learner.policy_tensors(), learner.alpha, 9)
    with torch.no_grad():
        for p in learner.q1.parameters():
            p.mul_(-3.0)
    assert snapshot.version == 9
    assert all(torch.equal(p, published[k]) for k, p in snapshot.pair[0].named_parameters())


def test_weights_of_another_shape_are_refused_naming_the_keys(inference):
    learner = Learner(SMALL, device="cpu", seed=0)
    for version in range(3):
        inference.publish(learner.policy_tensors(), learner.alpha, version)
    bad = learner.policy_tensors()
    bad["q2"] = {**bad["q2"], "extra.weight": torch.zeros(2)}
    with pytest.raises(ValueError, match=r"policy weights q2: keys differ.*extra\.weight"):
        inference.publish(bad, learner.alpha, 5)


@pytest.mark.parametrize("graphs", [False, True])
def test_a_temperature_published_as_a_tensor_is_served_as_it_was_then(graphs):
    """``Learner.policy_alpha`` (a tensor computed on the learner's stream, never read on its host) answers as
    the number would, and a tensor that is not one 0-d value is refused."""
    rng = np.random.default_rng(5)
    states = PackedRecords.from_records([encode_observation(random_observation(9, rng)) for _ in range(3)])
    learner = Learner(SMALL, device="cpu", seed=0)
    with torch.no_grad():
        learner.log_alpha.fill_(np.log(0.3))  # a temperature the answers' soft values depend on
    answers = {}
    for kind in ("number", "tensor"):
        endpoint = BatchingInference(
            SMALL, torch.device("cpu"), max_batch=8, max_delay_s=0.01, max_queue=8, cuda_graphs=graphs
        )
        try:
            alpha = learner.alpha if kind == "number" else learner.policy_alpha()
            snapshot = endpoint.publish(learner.policy_tensors(), alpha, 4)
            if kind == "tensor":
                with torch.no_grad():
                    learner.log_alpha.add_(1.0)  # as the next update changes it: the snapshot keeps its own
                with pytest.raises(ValueError, match="alpha must be a number or a 0-d tensor"):
                    endpoint.publish(learner.policy_tensors(), torch.ones(2), 5)
            answers[kind] = endpoint.act(states, greedy=True, timeout_s=60)
            assert snapshot.version == 4
        finally:
            endpoint.close()
    for got, want in zip(answers["tensor"][:3], answers["number"][:3]):
        np.testing.assert_allclose(got, want, rtol=1e-6)
