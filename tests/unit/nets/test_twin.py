"""TwinQ: min(Q1, Q2) of the twin networks in one pass equals the two networks run one by one."""

import pytest
import torch
from test_qnet import assert_equal_paths, batch, perturbed  # noqa: E402  (same directory)

from phylorl.nets.config import NetworkConfig
from phylorl.nets.inputs import ActionBatch
from phylorl.nets.segment import segments_from_sizes
from phylorl.nets.twin import TwinQ, twin_or_none

CONFIGS = [
    NetworkConfig(),
    NetworkConfig(hidden=32, heads=4, action_hidden=16, head_hidden=24, gat_layers=2, gat_self_loops=False),
]


def separate(q1, q2, graphs, actions):
    with torch.no_grad():
        return torch.minimum(q1(graphs, actions), q2(graphs, actions))


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("sizes", [[20], [5, 11, 4, 20, 7], [9, 9, 9]])
def test_twin_equals_the_two_networks(cfg, sizes):
    q1, q2 = perturbed(cfg, seed=1).eval(), perturbed(cfg, seed=2).eval()
    graphs, actions = batch(sizes, seed=len(sizes))
    assert_equal_paths(TwinQ(q1, q2)(graphs, actions), separate(q1, q2, graphs, actions))


def test_twin_follows_new_weights_and_falls_back_for_few_actions():
    q1, q2 = perturbed(CONFIGS[1], seed=1).eval(), perturbed(CONFIGS[1], seed=2).eval()
    twin = TwinQ(q1, q2)
    graphs, actions = batch([8, 12], seed=3)
    before = twin(graphs, actions)
    for net, seed in ((q1, 5), (q2, 6)):  # in place: the versions move
        net.load_state_dict(perturbed(CONFIGS[1], seed=seed).state_dict())
    after = twin(graphs, actions)
    assert not torch.allclose(before, after)
    assert_equal_paths(after, separate(q1, q2, graphs, actions))
    # one action per state (fewer actions than nodes): the two networks are run as they are
    first = torch.cumsum(actions.states.sizes, 0) - actions.states.sizes
    one = ActionBatch(
        nodes=actions.nodes[first],
        meta=actions.meta[first],
        states=segments_from_sizes(torch.ones(2, dtype=torch.long)),
    )
    assert_equal_paths(twin(graphs, one), separate(q1, q2, graphs, one))


def test_twin_only_for_acting_and_matching_networks():
    q1, q2 = perturbed(CONFIGS[1], seed=1), perturbed(CONFIGS[1], seed=2)
    graphs, actions = batch([6], seed=0)
    with pytest.raises(ValueError, match="eval mode"):
        TwinQ(q1, q2)(graphs, actions)
    with pytest.raises(ValueError, match="same config"):
        TwinQ(q1, perturbed(CONFIGS[0]))
    assert twin_or_none((q1,)) is None
    assert twin_or_none((perturbed(NetworkConfig(action_features="indices")),) * 2) is None


def test_a_frozen_twin_stacks_once_and_answers_as_the_networks_did():
    q1, q2 = perturbed(CONFIGS[1], seed=1).eval(), perturbed(CONFIGS[1], seed=2).eval()
    graphs, actions = batch([8, 12], seed=3)
    frozen = TwinQ(q1, q2, frozen=True)
    first = frozen(graphs, actions)
    assert_equal_paths(first, separate(q1, q2, graphs, actions))
    stacked = frozen._stacked
    for net, seed in ((q1, 5), (q2, 6)):  # a frozen twin is for weights that never change: it keeps its stack
        net.load_state_dict(perturbed(CONFIGS[1], seed=seed).state_dict())
    assert frozen._stacked is stacked
    torch.testing.assert_close(frozen(graphs, actions), first, rtol=0, atol=0)
    assert not torch.allclose(TwinQ(q1, q2)(graphs, actions), first)
