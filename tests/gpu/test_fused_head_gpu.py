"""The fused Triton head compiled for a GPU equals the unfused head: relative 1e-5 in float32, 1e-2 with TF32
products; a learner using it updates as one that does not (needs a CUDA device: skipped elsewhere; run on a
lent GPU machine with ``pytest tests/gpu``). ``tests/unit/nets/test_fused_head.py`` checks the same kernel on
the CPU in Triton's interpreter, and against the PyG reference path."""

import numpy as np
import pytest
import torch
from helpers import batch_of

from phylorl.agent.config import AgentConfig
from phylorl.agent.learner import Learner
from phylorl.nets.config import NetworkConfig
from phylorl.nets.qnet import QNetwork
from phylorl.nets.synthetic import random_transition
from phylorl.nets.twin import TwinQ

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

TF32_TOLERANCE = 1e-2
"""TF32 keeps 10 of float32's 23 mantissa bits in the second layer's inputs: about 1e-3 relative per product,
summed over 256 terms of both signs."""


@pytest.fixture()
def tf32_off():
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = before


def perturbed(cfg, seed):
    torch.manual_seed(seed)
    net = QNetwork(cfg)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return net.cuda().eval()


def relative(a, b) -> float:
    return float((a - b).abs().max() / b.abs().max())


def next_states(n_taxa=20, size=16, seed=0):
    rng = np.random.default_rng(seed)
    return batch_of([random_transition(n_taxa, rng) for _ in range(size)], device="cuda")


@pytest.mark.parametrize("tf32", [False, True])
def test_compiled_kernel_equals_the_unfused_head_at_the_design_size(tf32):
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        q1, q2 = perturbed(NetworkConfig(), 1), perturbed(NetworkConfig(), 2)
        batch = next_states()
        with torch.no_grad():
            plain = TwinQ(q1, q2)(batch.next_graphs, batch.next_actions, reduce="mean")
            torch.backends.cuda.matmul.allow_tf32 = False  # the reference in full float32
            exact = torch.stack([q(batch.next_graphs, batch.next_actions) for q in (q1, q2)]).mean(0)
            torch.backends.cuda.matmul.allow_tf32 = tf32
            fused = TwinQ(q1, q2, fused=True)(batch.next_graphs, batch.next_actions, reduce="mean")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    assert fused.shape == (16 * 1122,)
    assert relative(fused, exact) <= (TF32_TOLERANCE if tf32 else 1e-5)
    assert relative(plain, exact) <= (TF32_TOLERANCE if tf32 else 1e-5)


def test_learner_with_the_fused_head_updates_as_without(tf32_off):
    cfg = NetworkConfig(hidden=64, action_hidden=64, head_hidden=64)
    batches = [next_states(12, 8, seed) for seed in range(2)]
    plain = Learner(cfg, AgentConfig(), "cuda", seed=4)
    fused = Learner(cfg, AgentConfig(fused_head=True), "cuda", seed=4)
    assert fused.twins is not None and plain.twins is None
    for batch in batches:
        m_plain, p_plain = plain.step(batch)
        m_fused, p_fused = fused.step(batch)
        for key in ("target/mean", "loss/q1", "loss/q2"):
            assert m_fused[key] == pytest.approx(m_plain[key], rel=1e-5, abs=1e-6), key
        # the entropy of softmax(Q / alpha) magnifies Q's rounding by 1 / alpha (20 at the initial alpha)
        assert m_fused["entropy/mean"] == pytest.approx(m_plain["entropy/mean"], rel=1e-3)
        np.testing.assert_allclose(p_fused, p_plain, rtol=1e-4, atol=1e-5)
