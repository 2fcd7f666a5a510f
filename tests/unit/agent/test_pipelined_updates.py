"""``AgentConfig.pipelined_updates``: an update launched without waiting for it (its results read at the next launch),
a non-finite one skipped on the device. On the CPU everything runs in order, so these check the arithmetic and the
bookkeeping; ``tests/gpu/test_cuda_graphs.py`` checks the captured graphs with it."""

import numpy as np
import pytest
import torch

from phylorl.agent.config import AgentConfig
from phylorl.agent.learner import Learner
from test_learner import SMALL, all_tensors, toy_batches

CFG = dict(lr=1e-3, tau=0.1, target_update_period=1, adam_eps=1e-4)
"""Targets follow every update; Adam's epsilon large enough that a gradient component that is zero up to rounding (the
fused and unfused optimisers round differently) cannot flip the sign of a whole learning-rate step."""


def _close(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.isclose(a[k], b[k], rtol=1e-5, atol=1e-6) for k in a)


def test_pipelined_updates_equal_synced_ones_one_launch_late():
    batches = toy_batches(5, seed=2)
    synced = Learner(SMALL, AgentConfig(**CFG), seed=4)
    pipelined = Learner(SMALL, AgentConfig(**CFG, pipelined_updates=True), seed=4)
    assert pipelined.q_optimizer.param_groups[0]["fused"] and pipelined.alpha_optimizer.param_groups[0]["fused"]
    want = [synced.step(b) for b in batches]
    got = [pipelined.launch(b, tag=i) for i, b in enumerate(batches)] + [pipelined.finish()]
    assert got[0] is None and pipelined.finish() is None  # nothing before the first; nothing left after the last
    for i, (metrics, priorities, tag) in enumerate(got[1:]):
        assert tag == i and _close(metrics, want[i][0]), i
        np.testing.assert_allclose(priorities, want[i][1], rtol=1e-5, atol=1e-6)
    assert pipelined.updates == pipelined.weights_version == synced.updates == 5 and pipelined.skipped == 0
    mine, theirs = all_tensors(pipelined), all_tensors(synced)
    assert len(mine) == len(theirs) > 50
    for a, b in zip(mine, theirs):
        torch.testing.assert_close(a.float(), b.float(), rtol=1e-5, atol=1e-6)
    metrics, priorities = pipelined.step(batches[0])  # step: launched and read back at once
    assert _close(metrics, synced.step(batches[0])[0]) and pipelined.weights_version == 6


def test_a_non_finite_pipelined_update_is_skipped_on_the_device():
    learner = Learner(SMALL, AgentConfig(**CFG, pipelined_updates=True), seed=3)
    good, bad, later = toy_batches(3, seed=7)
    bad.reward[1] = float("nan")
    assert learner.launch(good, "good") is None
    before = [t.clone() for t in all_tensors(learner)]  # the optimiser's state (steps included) and the targets
    metrics, priorities, tag = learner.launch(bad, "bad")
    assert tag == "good" and priorities is not None and metrics["skipped"] == 0.0
    after = all_tensors(learner)
    assert len(before) == len(after) and all(torch.equal(a, b) for a, b in zip(before, after))
    assert learner.weights_version == learner.updates == 2  # counted when launched, not yet known to be skipped
    metrics, priorities, tag = learner.launch(later, "later")
    assert tag == "bad" and priorities is None and metrics["skipped"] == 1.0 and learner.skipped == 1
    assert learner.updates == 2 and learner.weights_version == 3  # its version stays taken: one was launched since
    metrics, priorities, tag = learner.finish()
    assert tag == "later" and np.isfinite(priorities).all()
    assert not all(torch.equal(a, b) for a, b in zip(before, all_tensors(learner)))  # the later one trained

    version, updates = learner.weights_version, learner.updates
    metrics, priorities = learner.step(bad)  # launched and read back at once: the version is given back
    assert priorities is None and (learner.weights_version, learner.updates, learner.skipped) == (version, updates, 2)


def test_a_checkpoint_keeps_each_learners_own_optimiser_options(tmp_path):
    synced = Learner(SMALL, AgentConfig(**CFG), seed=1)
    for b in toy_batches(2):
        synced.step(b)
    synced.save(tmp_path / "synced.pt")
    pipelined = Learner(SMALL, AgentConfig(**CFG, pipelined_updates=True), seed=1)
    pipelined.load_state_dict(torch.load(tmp_path / "synced.pt", weights_only=True))
    for optimizer in (pipelined.q_optimizer, pipelined.alpha_optimizer):
        assert optimizer.param_groups[0]["fused"] is True  # the saved groups said False
    batch = toy_batches(1, seed=9)[0]
    want = synced.step(batch)
    got = pipelined.step(batch)
    assert _close(got[0], want[0])
    pipelined.save(tmp_path / "pipelined.pt")
    synced.load_state_dict(torch.load(tmp_path / "pipelined.pt", weights_only=True))
    assert synced.q_optimizer.param_groups[0]["fused"] is False and synced.alpha_optimizer.param_groups[0]["fused"] \
        is False


def test_launch_needs_the_option_and_step_refuses_an_update_in_flight():
    batch = toy_batches(1)[0]
    with pytest.raises(RuntimeError, match="needs AgentConfig.pipelined_updates"):
        Learner(SMALL, AgentConfig(), seed=0).launch(batch)
    learner = Learner(SMALL, AgentConfig(pipelined_updates=True), seed=0)
    learner.launch(batch)
    with pytest.raises(RuntimeError, match="update in flight"):
        learner.step(batch)


def test_the_networks_cached_weights_follow_a_fused_optimisers_step():
    # fused Adam leaves the parameters' version counters where they were; the learner moves them, or the networks'
    # no-grad caches (keyed by them) would serve the weights from before the step
    learner = Learner(SMALL, AgentConfig(**CFG, pipelined_updates=True), seed=2)
    with torch.no_grad():
        stale = learner.q1.derived_weights()["tree_bias"].clone()
    learner.step(toy_batches(1)[0])
    with torch.no_grad():
        cached, fresh = learner.q1.derived_weights()["tree_bias"], learner.q1._derive()["tree_bias"]
    assert not torch.equal(stale, fresh) and torch.equal(cached, fresh)
