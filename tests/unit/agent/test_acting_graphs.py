"""The graphed acting path's CPU parts: state padding equals collating copies of the last state and leaves the
first states' answers unchanged; buckets; GraphedActing (eager on a CPU) answers as select_actions with the
weights it loaded, and follows a new version. Its captured replays are compared on a GPU
(tests/gpu/test_inference_gpu.py)."""

import numpy as np
import pytest
import torch

from phylorl.agent.acting import policy_networks, select_actions
from phylorl.agent.acting_graphs import GraphedActing, bucket, pad_states
from phylorl.agent.batch_transfer import Stager
from phylorl.agent.learner import Learner
from phylorl.nets.config import NetworkConfig
from phylorl.nets.inputs import collate_observations, map_tensors
from phylorl.nets.twin import twin_or_none
from phylorl.nets.synthetic import random_observation

NET = NetworkConfig(hidden=32, action_hidden=32, head_hidden=32)


def _observations(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [random_observation(n, rng) for n in sizes]


def _flat(obj) -> list:
    found = []
    map_tensors(obj, lambda t: found.append(t) or t)
    return found


def test_buckets_are_powers_of_two_then_multiples_of_sixteen_capped_at_the_batch_limit():
    assert [bucket(c, 64) for c in (1, 2, 3, 5, 8, 9, 16, 17, 33, 48, 49, 64)] == \
        [1, 2, 4, 8, 8, 16, 16, 32, 48, 48, 64, 64]
    assert bucket(40, 40) == 40 and bucket(70, 64) == 70 and bucket(12, 10) == 12
    with pytest.raises(ValueError, match="at least one state"):
        bucket(0, 64)


@pytest.mark.parametrize("sizes, count", [([9, 12, 7], 8), ([10], 4), ([6, 8], 2)])
def test_padding_equals_collating_copies_of_the_last_state(sizes, count):
    observations = _observations(sizes)
    padded = pad_states(*collate_observations(observations), count)
    expected = collate_observations(observations + [observations[-1]] * (count - len(observations)))
    got, want = _flat(padded), _flat(expected)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and torch.equal(g, w)
    assert padded[0].nodes.count == count and padded[1].states.size == expected[1].states.size
    with pytest.raises(ValueError, match="cannot pad"):
        pad_states(*collate_observations(observations), len(observations) - 1)


def test_graphed_acting_answers_as_select_actions_with_the_weights_it_loaded():
    observations = _observations([9, 12, 7, 12, 10])
    inputs = collate_observations(observations)
    padded = pad_states(*inputs, bucket(len(observations), 64))
    acting = GraphedActing(NET, torch.device("cpu"))
    stager = Stager()
    for version, seed in ((1, 0), (2, 5)):
        weights = Learner(NET, device="cpu", seed=seed).policy_weights()
        pair = policy_networks(NET, weights)
        acting.load(pair, 0.3, version)
        chosen, q, v = (t[: len(observations)] for t in acting(stager.stage(padded), greedy=True))
        want = select_actions(twin_or_none(pair, frozen=True), *inputs, 0.3, greedy=True)
        assert torch.equal(chosen, want[0])
        assert torch.allclose(q, want[1], rtol=1e-5, atol=1e-6) and torch.allclose(v, want[2], rtol=1e-5, atol=1e-6)
        generator = torch.Generator().manual_seed(3)
        sampled = acting(stager.stage(padded), greedy=False, generator=generator)[0][: len(observations)]
        generator.manual_seed(3)
        padded_want = select_actions(twin_or_none(pair, frozen=True), *padded, 0.3, greedy=False,
                                     generator=generator)[0][: len(observations)]
        assert torch.equal(sampled, padded_want)  # the same noise draws the same moves
    assert acting.version == 2 and acting.eager == 4 and acting.replays == 0  # a CPU never captures


def test_a_shape_whose_capture_fails_is_answered_eagerly_and_never_captured_again(monkeypatch):
    from phylorl.agent import acting_graphs

    tries = []

    def failing_capture(owner, block, greedy):
        tries.append(greedy)
        raise RuntimeError("CUDA error: operation failed due to a previous error during capture\nmore")

    observations = _observations([9, 11])
    inputs = collate_observations(observations)
    acting = GraphedActing(NET, torch.device("cpu"))
    acting.captures = True  # as on a GPU; the capture itself is replaced by one that fails
    monkeypatch.setattr(acting_graphs, "_Captured", failing_capture)
    pair = policy_networks(NET, Learner(NET, device="cpu", seed=1).policy_weights())
    acting.load(pair, 0.2, 1)
    want = select_actions(twin_or_none(pair, frozen=True), *inputs, 0.2, greedy=True)
    stager = Stager()
    for _ in range(acting_graphs.WARMUP + 3):
        chosen, q, _ = acting(stager.stage(inputs), greedy=True)
        assert torch.equal(chosen, want[0]) and torch.allclose(q, want[1], rtol=1e-5, atol=1e-6)
    assert tries == [True]  # tried once, after the warm-up
    assert list(acting.failed.values()) == ["RuntimeError: CUDA error: operation failed due to a previous error "
                                            "during capture"]
    assert acting.eager == acting_graphs.WARMUP + 3 and not acting.captured
