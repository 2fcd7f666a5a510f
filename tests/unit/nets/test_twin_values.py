"""TwinQ.values: the online networks' forward of an update as one stacked pass equals the two networks, values
and gradients, with and without the gathers of capture-safe networks."""

import numpy as np
import pytest
import torch
from test_qnet import assert_equal_paths, one_per_state, perturbed  # noqa: E402  (same directory)

from phylorl.nets.config import NetworkConfig
from phylorl.nets.synthetic import random_observation
from phylorl.nets.twin import TwinQ
from phylorl.records.collate import state_inputs

CONFIGS = [
    NetworkConfig(),
    NetworkConfig(hidden=32, heads=4, action_hidden=16, head_hidden=24, gat_layers=2, gat_self_loops=False),
]


def taken_moves(sizes, seed):
    """A batch of trees with one move each (the update's taken moves)."""
    rng = np.random.default_rng(seed)
    graphs, actions = state_inputs([random_observation(n, rng, rich=True) for n in sizes])
    return graphs, one_per_state(actions, int(rng.integers(actions.states.sizes.min())))


def values_and_grads(nets, run):
    for net in nets:
        net.zero_grad(set_to_none=True)
    q = run()
    (q.square().mean() + q[0].mean() - 2 * q[1].mean()).backward()
    return q.detach(), [p.grad.clone() for net in nets for p in net.parameters()]


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("sizes", [[20] * 4, [5, 11, 4, 20, 7]])
@pytest.mark.parametrize("gathers", [False, True])
def test_stacked_pass_equals_the_two_networks_with_gradients(cfg, sizes, gathers):
    q1, q2 = perturbed(cfg, seed=1).train(), perturbed(cfg, seed=2).train()
    for net in (q1, q2):
        net.capture_safe = gathers
    graphs, actions = taken_moves(sizes, seed=len(sizes))
    twin = TwinQ(q1, q2, cache=False)
    assert twin.applies_with_grad(graphs, actions)
    stacked, stacked_grads = values_and_grads((q1, q2), lambda: twin.values(graphs, actions))
    plain, plain_grads = values_and_grads(
        (q1, q2), lambda: torch.stack([q1(graphs, actions), q2(graphs, actions)])
    )
    assert stacked.shape == (2, len(sizes))
    assert_equal_paths(stacked, plain)
    assert all(g.abs().sum() > 0 for g in plain_grads[:3])  # the loss reaches the encoders of both networks
    floor = 1e-7 * max(float(g.abs().max()) for g in plain_grads)
    for mine, theirs in zip(stacked_grads, plain_grads):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5 * float(theirs.abs().max()) + floor)


def test_stacked_pass_declines_many_actions_and_dropout_in_training():
    graphs, actions = taken_moves([6, 8], seed=0)
    drop = NetworkConfig(hidden=32, heads=4, action_hidden=16, head_hidden=24, dropout=0.2)
    q1, q2 = perturbed(drop, seed=1).train(), perturbed(drop, seed=2).train()
    assert not TwinQ(q1, q2).applies_with_grad(graphs, actions)
    with pytest.raises(ValueError, match="no dropout"):
        TwinQ(q1, q2).values(graphs, actions)
    q1.eval(), q2.eval()  # dropout is off in eval mode
    assert TwinQ(q1, q2).applies_with_grad(graphs, actions)
    rng = np.random.default_rng(1)
    # every move: more actions than nodes
    graphs, every = state_inputs([random_observation(6, rng, rich=True)])
    assert not TwinQ(q1, q2).applies_with_grad(graphs, every)
