"""CUDA graph capture (agent/capture.py) as far as a CPU shows it: buckets, padding, GraphedActing (eager on a
CPU) answering as select_actions with the weights it loaded, the learner's graphs refusing what they cannot
replay. The captured replays are compared on a GPU (tests/gpu/)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from helpers import batch_of

from phylorl.agent.acting import policy_networks, select_actions
from phylorl.agent.capture import CudaGraphs, GraphedActing, bucket, signature
from phylorl.agent.config import AgentConfig
from phylorl.agent.learner import Learner
from phylorl.agent.transfer import Stager
from phylorl.nets.config import NetworkConfig
from phylorl.nets.synthetic import random_observation, random_transition
from phylorl.nets.twin import twin_or_none
from phylorl.records.collate import state_inputs

NET = NetworkConfig(hidden=32, action_hidden=32, head_hidden=32)


def _observations(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [random_observation(n, rng) for n in sizes]


def _padded(observations):
    """The batch the endpoint answers for ``observations``: padded to their bucket with the last one (as
    :func:`~phylorl.agent.acting.assemble` writes it: tests/unit/agent/test_acting.py)."""
    extra = bucket(len(observations), 64) - len(observations)
    return state_inputs(observations + [observations[-1]] * extra)


def test_buckets_are_powers_of_two_then_multiples_of_sixteen_capped_at_the_batch_limit():
    assert [bucket(c, 64) for c in (1, 2, 3, 5, 8, 9, 16, 17, 33, 48, 49, 64)] == [
        1,
        2,
        4,
        8,
        8,
        16,
        16,
        32,
        48,
        48,
        64,
        64,
    ]
    assert bucket(40, 40) == 40 and bucket(70, 64) == 70 and bucket(12, 10) == 12
    with pytest.raises(ValueError, match="at least one state"):
        bucket(0, 64)


def test_graphed_acting_answers_as_select_actions_with_the_weights_it_loaded():
    observations = _observations([9, 12, 7, 12, 10])
    inputs = state_inputs(observations)
    padded = _padded(observations)
    acting = GraphedActing(NET, torch.device("cpu"))
    stager = Stager()
    for version, seed in ((1, 0), (2, 5)):
        weights = Learner(NET, device="cpu", seed=seed).policy_weights()
        pair = policy_networks(NET, weights)
        acting.load(pair, 0.3, version)
        chosen, q, v = (t[: len(observations)] for t in acting(stager.stage(padded), greedy=True))
        want = select_actions(twin_or_none(pair, frozen=True), *inputs, 0.3, greedy=True)
        assert torch.equal(chosen, want[0])
        assert torch.allclose(q, want[1], rtol=1e-5, atol=1e-6) and torch.allclose(
            v, want[2], rtol=1e-5, atol=1e-6
        )
        generator = torch.Generator().manual_seed(3)
        sampled = acting(stager.stage(padded), greedy=False, generator=generator)[0][: len(observations)]
        generator.manual_seed(3)
        padded_want = select_actions(
            twin_or_none(pair, frozen=True), *padded, 0.3, greedy=False, generator=generator
        )[0][: len(observations)]
        assert torch.equal(sampled, padded_want)  # the same noise draws the same moves
    assert acting.version == 2 and acting.eager == 4 and acting.replays == 0  # a CPU never captures
    for alpha in (0.7, 0.7, 1.0):  # a new temperature for the same weights is written (and only then)
        acting.load(pair, alpha, 2)
        v = acting(stager.stage(padded), greedy=True)[2][: len(observations)]
        assert float(acting.alpha) == pytest.approx(alpha)
        want = select_actions(twin_or_none(pair, frozen=True), *inputs, alpha, greedy=True)
        assert torch.allclose(v, want[2], rtol=1e-5, atol=1e-6)


def test_a_shape_whose_capture_fails_is_answered_eagerly_and_never_captured_again(monkeypatch):
    from phylorl.agent import capture

    tries = []

    def failing_capture(owner, block, greedy):
        tries.append(greedy)
        raise RuntimeError("CUDA error: operation failed due to a previous error during capture\nmore")

    observations = _observations([9, 11])
    inputs = state_inputs(observations)
    acting = GraphedActing(NET, torch.device("cpu"))
    acting.captures = True  # as on a GPU; the capture itself is replaced by one that fails
    monkeypatch.setattr(capture, "_Captured", failing_capture)
    pair = policy_networks(NET, Learner(NET, device="cpu", seed=1).policy_weights())
    acting.load(pair, 0.2, 1)
    want = select_actions(twin_or_none(pair, frozen=True), *inputs, 0.2, greedy=True)
    stager = Stager()
    for _ in range(capture.ACTING_WARMUP + 3):
        chosen, q, _ = acting(stager.stage(inputs), greedy=True)
        assert torch.equal(chosen, want[0]) and torch.allclose(q, want[1], rtol=1e-5, atol=1e-6)
    assert tries == [True]  # tried once, after the warm-up
    assert list(acting.failed.values()) == [
        "RuntimeError: CUDA error: operation failed due to a previous error during capture"
    ]
    assert acting.eager == capture.ACTING_WARMUP + 3 and not acting.captured


NET = NetworkConfig(hidden=16, action_hidden=16, head_hidden=16)


def test_on_the_cpu_the_option_changes_nothing():
    learner = Learner(NET, AgentConfig(cuda_graphs=True), "cpu")
    assert learner.graphs is None


def test_graphs_refuse_what_they_cannot_replay():
    with pytest.raises(ValueError, match="dropout"):
        CudaGraphs(Learner(dataclasses.replace(NET, dropout=0.1), AgentConfig(), "cpu"))


def test_the_signature_separates_shapes_and_host_flags_not_contents():
    rng = np.random.default_rng(0)
    a = batch_of([random_transition(8, rng) for _ in range(4)])
    b = batch_of([random_transition(8, rng) for _ in range(4)])
    c = batch_of([random_transition(9, rng) for _ in range(4)])
    assert signature(a) == signature(b)  # same tree size: one capture serves both
    assert signature(a) != signature(c)
    assert signature(a) != signature(dataclasses.replace(a, bootstraps=not a.bootstraps))
