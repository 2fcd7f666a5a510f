import numpy as np
import pytest
import torch

from phylorl.nets.config import NetworkConfig
from phylorl.nets.gat import dense_gat, dense_slots
from phylorl.nets.inputs import collate_observations
from phylorl.nets.qnet import QNetwork, count_parameters
from phylorl.nets.synthetic import random_observation

SMALL = NetworkConfig(hidden=32, heads=4, action_hidden=16, head_hidden=24)


def assert_equal_paths(fast, ref, rel=1e-5):
    """float32 agreement: every element within ``rel`` of the reference's scale (and its own size)."""
    scale = float(ref.detach().abs().max())
    torch.testing.assert_close(fast, ref, rtol=rel, atol=rel * scale)


def batch(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return collate_observations([random_observation(n, rng) for n in sizes])


def perturbed(cfg, seed=0):
    """A network whose biases are non-zero too (PyG zero-initialises GAT biases)."""
    torch.manual_seed(seed)
    net = QNetwork(cfg)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return net


def test_parameter_count_as_designed():
    assert count_parameters(QNetwork(NetworkConfig(action_features="indices"))) == 531_457
    # gather: the action encoder reads 4 node embeddings + 3 metadata floats (1027 -> 256)
    assert count_parameters(QNetwork(NetworkConfig())) == 531_457 - 7 * 256 + 1027 * 256


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
    ref = conv(x, graphs.edge_index, graphs.edge_attr)
    fast = dense_gat(conv, x, dense_slots(graphs, 4, self_loops))
    assert_equal_paths(fast, ref)


@pytest.mark.parametrize("action_features", ["gather", "indices"])
@pytest.mark.parametrize("sizes", [[5, 11, 4, 20, 7], [9, 9, 9]])
def test_fast_equals_reference_on_all_moves(action_features, sizes):
    net = perturbed(NetworkConfig(action_features=action_features))
    graphs, actions = batch(sizes, seed=len(sizes))
    n_ref, t_ref = net.encode(graphs, fast=False)
    n_fast, t_fast = net.encode(graphs, fast=True)
    assert_equal_paths(n_fast, n_ref)
    assert_equal_paths(t_fast, t_ref)
    assert_equal_paths(net(graphs, actions, fast=True), net(graphs, actions, fast=False))


@pytest.mark.parametrize("action_features", ["gather", "indices"])
def test_fast_equals_reference_on_one_action_per_state(action_features):
    # fewer actions than nodes: the fast head applies the folded matrix per action
    net = perturbed(NetworkConfig(action_features=action_features))
    rng = np.random.default_rng(3)
    obs = [random_observation(n, rng) for n in (6, 12, 8)]
    for o in obs:
        o.actions, o.action_meta = o.actions[2:3], o.action_meta[2:3]
    graphs, actions = collate_observations(obs)
    assert_equal_paths(net(graphs, actions, fast=True), net(graphs, actions, fast=False))


def test_fast_gradients_equal_reference():
    net = perturbed(SMALL)
    graphs, actions = batch([5, 8, 6], seed=4)
    grads = []
    for fast in (True, False):
        net.zero_grad()
        net(graphs, actions, fast=fast).square().mean().backward()
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
        assert_equal_paths(net.first_layer(nodes, tree, graphs, actions, fast=True), naive)


def test_reference_and_fast_share_one_state_dict():
    a, b = perturbed(SMALL, seed=1), QNetwork(SMALL)
    b.load_state_dict(a.state_dict())
    graphs, actions = batch([6, 10])
    assert_equal_paths(b(graphs, actions, fast=True), a(graphs, actions, fast=False))


def test_dropout_draws_from_the_given_generator_in_both_paths():
    net = perturbed(NetworkConfig(hidden=32, heads=4, action_hidden=16, head_hidden=24, dropout=0.5)).train()
    graphs, actions = batch([6, 9])
    q_fast = net(graphs, actions, fast=True, generator=torch.Generator().manual_seed(7))
    q_ref = net(graphs, actions, fast=False, generator=torch.Generator().manual_seed(7))
    assert_equal_paths(q_fast, q_ref)
    q_other = net(graphs, actions, fast=True, generator=torch.Generator().manual_seed(8))
    assert not torch.allclose(q_fast, q_other)
    net.eval()
    torch.testing.assert_close(net(graphs, actions, generator=torch.Generator().manual_seed(7)),
                               net(graphs, actions, generator=torch.Generator().manual_seed(8)))


def test_gather_sees_where_a_move_is_and_indices_see_labels():
    """Relabelling the nodes of a tree leaves 'gather' Q-values unchanged (same tree, same moves)."""
    rng = np.random.default_rng(6)
    obs = random_observation(8, rng)
    perm = rng.permutation(obs.n_nodes)
    relabelled = type(obs)(obs.node_features[np.argsort(perm)], perm[obs.edge_index], obs.edge_attr,
                           perm[obs.actions], obs.action_meta)
    for features, same in (("gather", True), ("indices", False)):
        net = perturbed(NetworkConfig(hidden=32, heads=4, action_features=features))
        q = net(*collate_observations([obs]))
        q_relabelled = net(*collate_observations([relabelled]))
        assert torch.allclose(q, q_relabelled, rtol=1e-5, atol=1e-5) == same


def test_wrong_feature_widths_raise():
    net = QNetwork(NetworkConfig(node_features=2, hidden=32))
    graphs, actions = batch([5])
    with pytest.raises(ValueError, match="node features"):
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
    rng = np.random.default_rng(len(sizes))
    obs = [random_observation(n, rng) for n in sizes]
    if one_action:
        for o in obs:
            o.actions, o.action_meta = o.actions[1:2], o.action_meta[1:2]
    graphs, actions = collate_observations(obs)
    out, grads = [], []
    for safe in (False, True):
        net.capture_safe = safe
        net.zero_grad()
        q = net(graphs, actions, fast=True)
        (q.square().mean() + q.mean()).backward()
        out.append(q.detach())
        grads.append([p.grad.clone() for p in net.parameters()])
    assert_equal_paths(out[1], out[0])
    floor = 1e-7 * max(float(g.abs().max()) for g in grads[0])
    for safe, plain in zip(grads[1], grads[0]):
        torch.testing.assert_close(safe, plain, rtol=1e-5, atol=1e-5 * float(plain.abs().max()) + floor)
