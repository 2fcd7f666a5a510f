"""The learner's update replayed as CUDA graphs equals the eager update (needs a CUDA device: skipped
elsewhere; run on a lent GPU machine with ``pytest tests/gpu``)."""

import dataclasses
import math

import numpy as np
import pytest
import torch
from helpers import batch_of

import phylorl.agent.learner as learner_module
from phylorl.agent.capture import WARMUP
from phylorl.agent.config import AgentConfig
from phylorl.agent.learner import Learner
from phylorl.nets.config import NetworkConfig
from phylorl.nets.synthetic import random_transition

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

NET = NetworkConfig(hidden=64, action_hidden=64, head_hidden=64)


@pytest.fixture(autouse=True)
def large_adam_epsilon(monkeypatch):
    """Adam's epsilon large enough that a gradient component that is zero up to rounding cannot flip the sign
    of a whole learning-rate step (of one learner and not the other)."""
    monkeypatch.setattr(learner_module, "ADAM_EPS", 1e-4)


@pytest.fixture(autouse=True)
def full_precision():
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = before


def batches(n_taxa, count, size=16, seed=0, labelled=False):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        trs = [random_transition(n_taxa, rng) for _ in range(size)]
        if labelled:
            trs = [_with_labels(t, rng) for t in trs]
        out.append(batch_of(trs, device="cuda"))
    return out


def _with_labels(t, rng):
    return dataclasses.replace(
        t, next_labels=rng.normal(size=t.next_obs.n_actions).astype(np.float32), discount=0.0
    )


def pair(agent_cfg):
    """An eager learner and a graphed one, from the same parameters. The eager one computes with the same
    gathers as the graphs (``capture_safe``; tests/unit/nets checks those against embedding_bag)."""
    eager = Learner(NET, agent_cfg, "cuda", seed=3)
    for net in (eager.q1, eager.q2, eager.target1, eager.target2):
        net.capture_safe = True
    graphed = Learner(NET, AgentConfig(**{**agent_cfg.__dict__, "cuda_graphs": True}), "cuda", seed=3)
    return eager, graphed


def assert_same_learners(a, b, rtol=2e-4, counters=True):
    """Every parameter within ``rtol`` or within 2% of one learning-rate step of the other learner's: a
    missed, repeated or stale update moves parameters by about a whole step (Adam's steps are ~lr)."""
    step = 0.02 * a.agent_cfg.lr
    for name in ("q1", "q2", "target1", "target2"):
        for (k, pa), pb in zip(getattr(a, name).state_dict().items(), getattr(b, name).state_dict().values()):
            scale = float(pa.abs().max()) or 1.0
            torch.testing.assert_close(pb, pa, rtol=rtol, atol=max(rtol * scale, step), msg=f"{name}.{k}")
    assert math.isclose(a.alpha, b.alpha, rel_tol=1e-5)
    assert not counters or (a.updates, a.weights_version) == (b.updates, b.weights_version)


@torch.no_grad()
def sync(dst: Learner, src: Learner) -> None:
    """Copy ``src``'s whole state into ``dst`` *in place* (the graphs keep pointing at ``dst``'s tensors):
    networks, targets, alpha and both optimisers' moments and step counts."""
    for name in ("q1", "q2", "target1", "target2"):
        for pd, ps in zip(getattr(dst, name).state_dict().values(), getattr(src, name).state_dict().values()):
            pd.copy_(ps)
    dst.log_alpha.copy_(src.log_alpha)
    for opt_d, opt_s in ((dst.q_optimizer, src.q_optimizer), (dst.alpha_optimizer, src.alpha_optimizer)):
        params_d = [p for g in opt_d.param_groups for p in g["params"]]
        params_s = [p for g in opt_s.param_groups for p in g["params"]]
        for pd, ps in zip(params_d, params_s):
            for key, value in opt_s.state[ps].items():
                opt_d.state[pd][key].copy_(value)


def step_alike(eager: Learner, graphed: Learner, data: list, steps: int) -> None:
    """``steps`` updates of both learners over ``data`` in turn, each from the eager learner's state (copied
    in place), with the same metrics, priorities and resulting state."""
    for step in range(steps):
        batch = data[step % len(data)]
        sync(graphed, eager)
        m_e, p_e = eager.step(batch)
        m_g, p_g = graphed.step(batch)
        for key in m_e:
            assert m_g[key] == pytest.approx(m_e[key], rel=1e-3, abs=1e-5), (step, key)
        np.testing.assert_allclose(p_g, p_e, rtol=1e-3, atol=1e-5)
        assert_same_learners(eager, graphed)


@pytest.mark.parametrize("labelled,fused", [(False, False), (True, False), (False, True), (True, True)])
def test_each_graphed_update_equals_the_eager_one_from_the_same_state(labelled, fused):
    # Trajectories of two learners drift apart from the first update's float32 rounding (even the graphed
    # learner's eager warm-ups, on a side stream, pick other cuBLAS kernels), and the demonstrations' loss
    # amplifies it; so each update starts from the eager learner's state, copied in place. ``fused``: both
    # learners run their next-move passes with the fused Triton head (the graphs replay its kernel).
    cfg = AgentConfig(demo_weight=1.0 if labelled else 0.0, lr=1e-3, fused_head=fused)
    eager, graphed = pair(cfg)
    step_alike(eager, graphed, batches(20, 3, labelled=labelled), WARMUP + 4)
    assert graphed.graphs.eager_updates == WARMUP and graphed.graphs.replays == 4
    assert len(graphed.graphs.captured) == 1


def test_a_non_finite_batch_is_skipped_by_the_graphs_too():
    eager, graphed = pair(AgentConfig())
    data = batches(12, 2)
    for step in range(WARMUP + 1):
        eager.step(data[0])
        graphed.step(data[0])
    bad = data[0]
    bad.reward[0] = float("nan")
    for learner in (eager, graphed):
        metrics, priorities = learner.step(bad)
        assert metrics["skipped"] == 1.0 and priorities is None
    assert_same_learners(eager, graphed)  # nothing moved, in either
    assert graphed.skipped == eager.skipped == 1
    bad.reward[0] = 0.5
    eager.step(data[1])
    graphed.step(data[1])
    assert_same_learners(eager, graphed)


def test_each_batch_shape_gets_its_own_capture():
    eager, graphed = pair(AgentConfig())
    small, large = batches(8, 1, seed=1)[0], batches(14, 1, seed=2)[0]
    for step in range(2 * (WARMUP + 2)):
        batch = small if step % 2 else large
        eager.step(batch)
        graphed.step(batch)
        assert_same_learners(eager, graphed)
    assert len(graphed.graphs.captured) == 2 and graphed.graphs.replays == 4


def test_a_batch_already_on_the_device_is_used_as_it_is(monkeypatch):
    """``"cuda"`` is taken as the current device's index: a batch's tensors name it (``cuda:0``), so that a
    learner on plain ``"cuda"`` does not move every batch again, a call per tensor."""
    learner = Learner(NET, AgentConfig(), "cuda", seed=0)
    assert learner.device == torch.device("cuda", torch.cuda.current_device())
    batch = batches(8, 1)[0]
    assert batch.reward.device == learner.device

    def moved(*args, **kwargs):
        raise AssertionError("a batch already on the learner's device was moved again")

    monkeypatch.setattr(learner_module, "on_device", moved)
    values, priorities = learner.step(batch)
    assert priorities is not None and math.isfinite(values["loss/q1"])


def test_an_eager_learners_cached_weights_follow_its_fused_optimiser():
    # fused Adam (every CUDA learner's) leaves the parameters' version counters where they were, by which the
    # networks key their derived weights for the no-grad passes (the online policy's entropy): the learner
    # moves them
    learner = Learner(NET, AgentConfig(), "cuda", seed=4)
    assert learner.q_optimizer.param_groups[0]["fused"]
    with torch.no_grad():
        before = learner.q1.derived_weights()["tree_bias"].clone()
    learner.step(batches(10, 1)[0])
    with torch.no_grad():
        cached, fresh = learner.q1.derived_weights()["tree_bias"], learner.q1._derive()["tree_bias"]
    assert not torch.equal(before, fresh) and torch.equal(cached, fresh)
