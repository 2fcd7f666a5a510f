import numpy as np
import pytest
import torch
from oracles.collate import collate_observations
from oracles.network import encode as reference_encode
from oracles.network import gat_layer, q_values

from phylorl.nets.config import NetworkConfig
from phylorl.nets.gat import dense_gat, dense_slots
from phylorl.nets.inputs import ActionBatch
from phylorl.nets.qnet import QNetwork, count_parameters
from phylorl.nets.segment import Segments
from phylorl.nets.synthetic import random_observation
from phylorl.records.collate import state_inputs

SMALL = NetworkConfig(hidden=32, heads=4, action_hidden=16, head_hidden=24)
BASIC = NetworkConfig(hidden=32, heads=4, action_hidden=16, head_hidden=24, features="basic")


def assert_equal_paths(fast, ref, rel=1e-5):
    """float32 agreement: every element within ``rel`` of the reference's scale (and its own size)."""
    scale = float(ref.detach().abs().max())
    torch.testing.assert_close(fast, ref, rtol=rel, atol=rel * scale)


def batch(sizes, seed=0, rich=True):
    rng = np.random.default_rng(seed)
    return state_inputs([random_observation(n, rng, rich=rich) for n in sizes])


def one_per_state(actions: ActionBatch, k: int) -> ActionBatch:
    """Move ``k`` of each state alone (fewer actions than nodes: the head's other branch)."""
    rows = torch.cumsum(actions.states.sizes, 0) - actions.states.sizes + k
    count = actions.states.count
    return ActionBatch(
        actions.nodes[rows],
        actions.meta[rows],
        Segments(torch.arange(count), torch.ones(count, dtype=torch.int64), count, 1),
    )


def perturbed(cfg, seed=0):
    """A network whose biases are non-zero too (PyG zero-initialises GAT biases)."""
    torch.manual_seed(seed)
    net = QNetwork(cfg)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return net


def test_parameter_count_as_designed():
    assert count_parameters(QNetwork(NetworkConfig(action_features="indices", features="basic"))) == 531_457
    # gather: the action encoder reads 4 node embeddings + 3 metadata floats (1027 -> 256)
    assert count_parameters(QNetwork(NetworkConfig(features="basic"))) == 531_457 - 7 * 256 + 1027 * 256


def test_shapes():
    net = QNetwork(SMALL)
    graphs, actions = batch([5, 8, 6])
    nodes, tree = net.encode(graphs)
    assert nodes.shape == (8 + 14 + 10, 32) and tree.shape == (3, 96)
    assert net(graphs, actions).shape == (actions.nodes.shape[0],)


@pytest.mark.parametrize("self_loops", [True, False])
def test_dense_gat_equals_pyg_gatconv(self_loops):
    torch.manual_seed(1)
    net = perturbed(NetworkConfig(hidden=32, heads=4, gat_self_loops=self_loops), seed=1)
    graphs, _ = batch([4, 9, 6, 13])
    x = torch.randn(graphs.x.shape[0], 32)
    conv = net.convs[0]
    ref = gat_layer(conv, x, graphs.edge_index, graphs.edge_attr)
    fast = dense_gat(conv, x, dense_slots(graphs, 4, self_loops))
    assert_equal_paths(fast, ref)


@pytest.mark.parametrize("action_features", ["gather", "indices"])
@pytest.mark.parametrize("sizes", [[5, 11, 4, 20, 7], [9, 9, 9]])
def test_fast_equals_reference_on_all_moves(action_features, sizes):
    net = perturbed(NetworkConfig(action_features=action_features))
    graphs, actions = batch(sizes, seed=len(sizes))
    n_ref, t_ref = reference_encode(net, graphs)
    n_fast, t_fast = net.encode(graphs)
    assert_equal_paths(n_fast, n_ref)
    assert_equal_paths(t_fast, t_ref)
    assert_equal_paths(net(graphs, actions), q_values(net, graphs, actions))


@pytest.mark.parametrize("action_features", ["gather", "indices"])
def test_fast_equals_reference_on_one_action_per_state(action_features):
    # fewer actions than nodes: the fast head applies the folded matrix per action
    net = perturbed(NetworkConfig(action_features=action_features))
    graphs, actions = batch([6, 12, 8], seed=3)
    actions = one_per_state(actions, 2)
    assert_equal_paths(net(graphs, actions), q_values(net, graphs, actions))


def test_fast_gradients_equal_reference():
    net = perturbed(SMALL)
    graphs, actions = batch([5, 8, 6], seed=4)
    grads = []
    for forward in (net, lambda g, a: q_values(net, g, a)):
        net.zero_grad()
        forward(graphs, actions).square().mean().backward()
        grads.append([p.grad.clone() for p in net.parameters()])
    # float32 noise floor: gradients sum ~1000 per-action terms of size up to max |g|
    floor = 1e-7 * max(float(g.abs().max()) for g in grads[1])
    for g_fast, g_ref in zip(*grads):
        torch.testing.assert_close(g_fast, g_ref, rtol=1e-4, atol=1e-4 * float(g_ref.abs().max()) + floor)


def test_factorised_head_equals_naive_concat():
    """W [tree; W_enc u + b_enc] + b computed literally, against the network's fast first layer."""
    net = perturbed(SMALL)
    graphs, actions = batch([7, 7, 7, 7], seed=5)
    with torch.no_grad():
        nodes, tree = net.encode(graphs)
        u = torch.cat([nodes[actions.nodes].flatten(1), actions.meta], dim=1)
        action = u @ net.action_encoder.weight.t() + net.action_encoder.bias
        naive = torch.cat([tree[actions.states.index], action], 1) @ net.head1.weight.t() + net.head1.bias
        assert_equal_paths(net.first_layer(nodes, tree, graphs, actions), naive)


def test_the_oracle_runs_on_a_loaded_state_dict():
    a, b = perturbed(SMALL, seed=1), QNetwork(SMALL)
    b.load_state_dict(a.state_dict())
    graphs, actions = batch([6, 10])
    assert_equal_paths(b(graphs, actions), q_values(a, graphs, actions))


def test_dropout_draws_from_the_given_generator_in_both_paths():
    net = perturbed(NetworkConfig(hidden=32, heads=4, action_hidden=16, head_hidden=24, dropout=0.5)).train()
    graphs, actions = batch([6, 9])
    q_fast = net(graphs, actions, generator=torch.Generator().manual_seed(7))
    q_ref = q_values(net, graphs, actions, generator=torch.Generator().manual_seed(7))
    assert_equal_paths(q_fast, q_ref)
    q_other = net(graphs, actions, generator=torch.Generator().manual_seed(8))
    assert not torch.allclose(q_fast, q_other)
    net.eval()
    torch.testing.assert_close(
        net(graphs, actions, generator=torch.Generator().manual_seed(7)),
        net(graphs, actions, generator=torch.Generator().manual_seed(8)),
    )


def test_gather_sees_where_a_move_is_and_indices_see_labels():
    """Relabelling the nodes of a tree leaves 'gather' Q-values unchanged (same tree, same moves)."""
    import dataclasses

    rng = np.random.default_rng(6)
    obs = random_observation(8, rng, rich=True)
    # the internal nodes renamed (leaves stay first)
    perm = np.concatenate([np.arange(8), 8 + rng.permutation(6)])
    neighbors = np.full_like(obs.neighbors, -1)
    neighbors[perm] = np.where(obs.neighbors >= 0, perm[obs.neighbors], -1)
    relabelled = dataclasses.replace(
        obs, neighbors=neighbors, edges=perm[obs.edges].astype(np.int32), moves=perm[obs.moves]
    )
    for features, same in (("gather", True), ("indices", False)):
        net = perturbed(NetworkConfig(hidden=32, heads=4, action_features=features))
        q = net(*collate_observations([obs]))
        q_relabelled = net(*collate_observations([relabelled]))
        assert torch.allclose(q, q_relabelled, rtol=1e-5, atol=1e-5) == same


def test_wrong_feature_widths_raise():
    net = QNetwork(NetworkConfig(hidden=32))
    graphs, actions = batch([5], rich=False)
    with pytest.raises(ValueError, match="1 edge features, the network \\(rich\\) reads 1 and 3"):
        net(graphs, actions)
    with pytest.raises(ValueError, match="divisible"):
        NetworkConfig(hidden=30, heads=4)
    with pytest.raises(ValueError, match="action_features"):
        NetworkConfig(action_features="ids")


def test_chunked_evaluation_gives_the_same_values():
    net = perturbed(SMALL).eval()
    graphs, actions = batch([6, 9, 7], seed=8)
    with torch.no_grad():
        whole = net(graphs, actions)
        torch.testing.assert_close(net(graphs, actions, chunk=37), whole, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("sizes", [[5, 11, 4, 20, 7], [9, 9, 9]])
@pytest.mark.parametrize("one_action", [False, True])
def test_capture_safe_path_equals_the_fast_path_with_gradients(sizes, one_action):
    # the CUDA-graph learner's gathers (no embedding_bag): same values and gradients up to rounding
    net = perturbed(SMALL, seed=2)
    graphs, actions = batch(sizes, seed=len(sizes))
    if one_action:
        actions = one_per_state(actions, 1)
    out, grads = [], []
    for safe in (False, True):
        net.capture_safe = safe
        net.zero_grad()
        q = net(graphs, actions)
        (q.square().mean() + q.mean()).backward()
        out.append(q.detach())
        grads.append([p.grad.clone() for p in net.parameters()])
    assert_equal_paths(out[1], out[0])
    floor = 1e-7 * max(float(g.abs().max()) for g in grads[0])
    for safe, plain in zip(grads[1], grads[0]):
        torch.testing.assert_close(safe, plain, rtol=1e-5, atol=1e-5 * float(plain.abs().max()) + floor)
