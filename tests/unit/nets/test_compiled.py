"""``torch.compile``-d encoders (``AgentConfig.compile_networks``) compute what the eager fast path does.

Compiled with inductor's CPU backend here (a C++ compiler); tests/gpu/test_compiled_gpu.py runs the CUDA one
inside captured updates.
"""

import numpy as np
import pytest
import torch
from helpers import batch_of
from test_qnet import assert_equal_paths, batch, perturbed  # noqa: E402  (same directory)

from phylorl.agent.config import AgentConfig
from phylorl.agent.learner import Learner
from phylorl.nets.config import NetworkConfig
from phylorl.nets.inputs import ActionBatch
from phylorl.nets.segment import segments_from_sizes
from phylorl.nets.synthetic import random_transition
from phylorl.nets.twin import TwinQ


@pytest.fixture(autouse=True)
def fresh_compiler():
    """Each test starts with no compiled code, so the variants of earlier tests do not count towards the limit
    of compilations per function (``qnet.RECOMPILE_LIMIT``)."""
    torch._dynamo.reset()


CFG = NetworkConfig(hidden=32, heads=4, action_hidden=16, head_hidden=32, gat_layers=2, features="basic")


@pytest.mark.parametrize("capture_safe", [False, True])
def test_compiled_encoder_equals_eager_values_and_gradients(capture_safe):
    eager, comp = perturbed(CFG, seed=1), perturbed(CFG, seed=1)
    comp.compiled = True
    for net in (eager, comp):
        net.capture_safe = capture_safe
    for sizes in ([9, 9, 9], [5, 11, 4, 20]):  # a second shape: the dynamic recompile
        graphs, actions = batch(sizes, seed=len(sizes), rich=False)
        q_eager, q_comp = eager(graphs, actions), comp(graphs, actions)
        assert_equal_paths(q_comp, q_eager)
        (q_eager**2).sum().backward()
        (q_comp**2).sum().backward()
        top = max(float(p.grad.abs().max()) for p in eager.parameters())
        for a, b in zip(eager.parameters(), comp.parameters()):
            # relative 1e-5 of each gradient's own size, plus float32 rounding of the largest terms (a
            # gradient that is zero up to rounding, as att_dst's can be when the softmax cancels it, is only
            # bounded)
            scale = float(a.grad.abs().max())
            torch.testing.assert_close(b.grad, a.grad, rtol=1e-5, atol=1e-5 * scale + 1e-8 * top)
            a.grad = b.grad = None
        with torch.no_grad():  # the no-grad variant compiles separately
            assert_equal_paths(comp(graphs, actions), eager(graphs, actions))


def test_compiled_twin_equals_the_eager_twin_and_follows_new_weights():
    q1, q2 = perturbed(CFG, seed=1).eval(), perturbed(CFG, seed=2).eval()
    eager, comp = TwinQ(q1, q2), TwinQ(q1, q2, compiled=True)
    graphs, actions = batch([7, 12, 20], seed=3, rich=False)
    assert_equal_paths(comp(graphs, actions), eager(graphs, actions))
    with torch.no_grad():
        for p in q1.parameters():
            p.mul_(1.5)
    assert_equal_paths(comp(graphs, actions), eager(graphs, actions))


def test_compiled_stacked_pass_equals_the_eager_one_with_gradients():
    # TwinQ.values (AgentConfig.stacked_update) compiled: the online networks' forward of an update
    q1, q2 = perturbed(CFG, seed=1), perturbed(CFG, seed=2)
    graphs, all_moves = batch([7, 12, 20], seed=3, rich=False)
    first = torch.cumsum(all_moves.states.sizes, 0) - all_moves.states.sizes
    actions = ActionBatch(
        nodes=all_moves.nodes[first],
        meta=all_moves.meta[first],
        states=segments_from_sizes(torch.ones(3, dtype=torch.long), size=1),
    )
    out = []
    for twin in (TwinQ(q1, q2, cache=False), TwinQ(q1, q2, cache=False, compiled=True)):
        q = twin.values(graphs, actions)
        (q.square().sum() + q[1].sum()).backward()
        out.append((q.detach(), [p.grad.clone() for net in (q1, q2) for p in net.parameters()]))
        q1.zero_grad(set_to_none=True), q2.zero_grad(set_to_none=True)
    (q_eager, g_eager), (q_comp, g_comp) = out
    assert_equal_paths(q_comp, q_eager)
    top = max(float(g.abs().max()) for g in g_eager)
    for a, b in zip(g_eager, g_comp):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5 * float(a.abs().max()) + 1e-8 * top)


def test_compiled_learner_updates_equal_eager_ones_over_batches_of_every_shape():
    # trees of one size and of mixed sizes, in changing numbers: each changing dimension recompiles once as
    # dynamic, and the run never reaches dynamo's limit (which fullgraph=True would make an error)
    rng = np.random.default_rng(0)
    plans = (
        [8] * 4,
        [8] * 4,
        [10] * 4,
        [12] * 6,
        [6, 9, 7],
        [14] * 3,
        [5, 19],
        [16] * 5,
        [11] * 2,
        [7, 7, 8],
    )
    batches = [batch_of([random_transition(n, rng, rich=False) for n in sizes]) for sizes in plans]
    eager = Learner(CFG, AgentConfig(), "cpu", seed=0)
    comp = Learner(CFG, AgentConfig(compile_networks=True), "cpu", seed=0)
    assert all(net.compiled for net in (comp.q1, comp.q2, comp.target1, comp.target2))
    for b in batches:
        m_eager, p_eager = eager.step(b)
        m_comp, p_comp = comp.step(b)
        for key in ("loss/q1", "loss/q2", "entropy/mean"):
            assert m_comp[key] == pytest.approx(m_eager[key], rel=1e-4)
        np.testing.assert_allclose(p_comp, p_eager, rtol=1e-4, atol=1e-5)
    # Adam moves a weight by about lr a step whatever its gradient's size, so a float32 rounding difference
    # in a near-zero gradient element (the compiled kernels sum in another order) can move that weight by up
    # to a step: no weight apart by more than one step, nearly all within 1e-4 of the scale (the losses and
    # priorities above are compared after every update)
    lr = AgentConfig().lr
    for a, b in zip(eager.q1.parameters(), comp.q1.parameters()):
        torch.testing.assert_close(b, a, rtol=0, atol=lr)
        close = torch.isclose(b, a, rtol=1e-4, atol=1e-4 * float(a.detach().abs().max()))
        assert close.float().mean() >= 0.95, f"{(~close).sum()} of {close.numel()} weights differ"


def test_without_a_compiler_the_learner_says_so_at_once(monkeypatch):
    from torch._inductor import config

    # what CXX=/nonexistent/g++ at start-up sets
    monkeypatch.setattr(config.cpp, "cxx", (None, "/nonexistent/g++"))
    with pytest.raises(ValueError, match="compile_networks on the cpu needs a C\\+\\+ compiler"):
        Learner(CFG, AgentConfig(compile_networks=True), "cpu", seed=0)
