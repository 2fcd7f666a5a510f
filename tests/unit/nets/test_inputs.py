import numpy as np
import pytest

from phylorl.types import Observation
from phylorl.nets.inputs import collate_graphs, collate_observations
from phylorl.nets.synthetic import random_observation


def quartet() -> Observation:
    """Leaves 0..3, internal 4 (joins 0, 1) and 5 (joins 2, 3); edges e0..e4 with lengths 0.1..0.5."""
    edges = [(0, 4), (1, 4), (4, 5), (2, 5), (3, 5)]
    edge_index = np.array([[u for u, v in edges for _ in (0, 1)], [v for u, v in edges for _ in (0, 1)]])
    edge_index[:, 1::2] = edge_index[::-1, 1::2]
    edge_attr = np.repeat(np.array([0.1, 0.2, 0.3, 0.4, 0.5], dtype=np.float32), 2)[:, None]
    is_leaf = np.array([[1], [1], [1], [1], [0], [0]], dtype=np.float32)
    actions = np.array([[4, 0, 5, 2], [5, 2, 4, 1]])
    meta = np.array([[0.1, 0.4, 2.0], [0.4, 0.2, 2.0]], dtype=np.float32)
    return Observation(is_leaf, edge_index, edge_attr, actions, meta)


def test_neighbor_table_of_a_quartet():
    g = collate_graphs([quartet()])
    nbr, attr, mask = g.neighbors.numpy(), g.neighbor_attr.numpy()[..., 0], g.neighbor_mask.numpy()
    assert mask.sum(1).tolist() == [1, 1, 1, 1, 3, 3]
    assert nbr[0].tolist() == [4, 0, 0]  # one real neighbour, padding repeats the node
    assert sorted(nbr[4].tolist()) == [0, 1, 5]
    got = {int(u): float(a) for u, a in zip(nbr[5], attr[5])}
    assert got == pytest.approx({4: 0.3, 2: 0.4, 3: 0.5})
    assert attr[0].tolist() == pytest.approx([0.1, 0.0, 0.0])


def test_offsets_and_segments_over_trees_of_different_sizes():
    rng = np.random.default_rng(1)
    obs = [random_observation(n, rng) for n in (4, 7, 5)]
    graphs, actions = collate_observations(obs)
    assert graphs.node_offset.tolist() == [0, 6, 18]
    assert graphs.nodes.sizes.tolist() == [6, 12, 8] and graphs.nodes.size is None
    assert actions.states.sizes.tolist() == [o.n_actions for o in obs]
    # every action's global node ids fall inside its own tree
    lo = graphs.node_offset[actions.states.index].unsqueeze(1)
    hi = lo + graphs.nodes.sizes[actions.states.index].unsqueeze(1)
    assert bool(((actions.nodes >= lo) & (actions.nodes < hi)).all())
    # the table lists exactly the edges of edge_index
    ei = graphs.edge_index.numpy()
    table = {(int(s), int(t)) for t in range(graphs.x.shape[0])
             for s, m in zip(graphs.neighbors[t].tolist(), graphs.neighbor_mask[t].tolist()) if m}
    assert table == set(zip(ei[0].tolist(), ei[1].tolist()))


def test_uniform_sizes_are_detected():
    rng = np.random.default_rng(2)
    graphs, actions = collate_observations([random_observation(6, rng) for _ in range(3)])
    assert graphs.nodes.size == 10 and actions.states.size == 2 * 3 * 5


def test_bad_inputs_raise_clear_errors():
    o = quartet()
    bad = Observation(o.node_features, o.edge_index.copy(), o.edge_attr, o.actions, o.action_meta)
    bad.edge_index[1, 0] = 9
    with pytest.raises(ValueError, match="outside 0..5"):
        collate_graphs([bad])
    loop = Observation(o.node_features, o.edge_index.copy(), o.edge_attr, o.actions, o.action_meta)
    loop.edge_index[:, 0] = 4
    with pytest.raises(ValueError, match="self loop"):
        collate_graphs([loop])
    with pytest.raises(ValueError, match="empty"):
        collate_graphs([])
    act = Observation(o.node_features, o.edge_index, o.edge_attr, o.actions + 10, o.action_meta)
    with pytest.raises(ValueError, match="action names a node"):
        collate_observations([act])


def test_a_node_with_four_neighbours_is_rejected():
    o = quartet()
    ei = np.concatenate([o.edge_index, [[0, 4], [4, 0]]], axis=1)  # node 4 gets a fourth neighbour
    ea = np.concatenate([o.edge_attr, [[0.1], [0.1]]]).astype(np.float32)
    with pytest.raises(ValueError, match="node 4 .* 4 incoming edges"):
        collate_graphs([Observation(o.node_features, ei, ea, o.actions, o.action_meta)])


def test_map_tensors_reaches_into_tuples_of_batches():
    """``move_to(collate_observations(...), device)`` must move the pair, not hand it back untouched."""
    import torch

    from phylorl.nets.inputs import collate_observations, map_tensors
    from phylorl.nets.synthetic import random_observation

    pair = collate_observations([random_observation(6, np.random.default_rng(0))])
    seen = []
    def visit(t):
        seen.append(t)
        return t.to(torch.float64) if t.is_floating_point() else t

    moved = map_tensors(pair, visit)
    assert isinstance(moved, tuple) and len(moved) == 2
    assert moved[0].x.dtype == torch.float64 and moved[1].meta.dtype == torch.float64
    assert len(seen) > 10  # every tensor of both batches was visited
