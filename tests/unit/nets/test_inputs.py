"""The network's inputs of tree states, as the records' compiled pass makes them: neighbour tables, offsets,
segments."""

import numpy as np
import pytest
import torch

from phylorl.env.observation import observe
from phylorl.nets.inputs import map_tensors
from phylorl.nets.synthetic import random_observation
from phylorl.phylo import Tree, enumerate_moves
from phylorl.records.collate import state_inputs


def quartet():
    """Leaves 0..3, internal 4 (joins 0, 1) and 5 (joins 2, 3); edges e0..e4 with lengths 0.1..0.5."""
    tree = Tree.from_edges(
        np.array([(0, 4), (1, 4), (4, 5), (2, 5), (3, 5)]),
        np.array([0.1, 0.2, 0.3, 0.4, 0.5]),
        ["a", "b", "c", "d"],
    )
    return observe(tree, enumerate_moves(tree), "basic")


def test_neighbor_table_of_a_quartet():
    graphs, actions = state_inputs([quartet()])
    nbr, attr, mask = (
        graphs.neighbors.numpy(),
        graphs.neighbor_attr.numpy()[..., 0],
        graphs.neighbor_mask.numpy(),
    )
    assert mask.sum(1).tolist() == [1, 1, 1, 1, 3, 3]
    assert nbr[0].tolist() == [4, 0, 0]  # one real neighbour, padding repeats the node
    assert sorted(nbr[4].tolist()) == [0, 1, 5]
    got = {int(u): float(a) for u, a in zip(nbr[5], attr[5])}
    assert got == pytest.approx({4: 0.3, 2: 0.4, 3: 0.5})
    assert attr[0].tolist() == pytest.approx([0.1, 0.0, 0.0])
    assert graphs.x[:, 0].tolist() == [1, 1, 1, 1, 0, 0]
    assert actions.nodes.tolist() == quartet().moves.tolist() and actions.states.count == 1


def test_offsets_and_segments_over_trees_of_different_sizes():
    rng = np.random.default_rng(1)
    obs = [random_observation(n, rng, rich=True) for n in (4, 7, 5)]
    graphs, actions = state_inputs(obs)
    assert graphs.node_offset.tolist() == [0, 6, 18]
    assert graphs.nodes.sizes.tolist() == [6, 12, 8] and graphs.nodes.size is None
    assert actions.states.sizes.tolist() == [o.n_actions for o in obs]
    # every action's global node ids fall inside its own tree
    lo = graphs.node_offset[actions.states.index].unsqueeze(1)
    hi = lo + graphs.nodes.sizes[actions.states.index].unsqueeze(1)
    assert bool(((actions.nodes >= lo) & (actions.nodes < hi)).all())
    # the table lists exactly the edges of edge_index
    ei = graphs.edge_index.numpy()
    table = {
        (int(s), int(t))
        for t in range(graphs.x.shape[0])
        for s, m in zip(graphs.neighbors[t].tolist(), graphs.neighbor_mask[t].tolist())
        if m
    }
    assert table == set(zip(ei[0].tolist(), ei[1].tolist()))


def test_uniform_sizes_are_detected():
    rng = np.random.default_rng(2)
    graphs, actions = state_inputs([random_observation(6, rng) for _ in range(3)])
    assert graphs.nodes.size == 10 and actions.states.size == 2 * 3 * 5


def test_map_tensors_reaches_into_tuples_of_batches():
    """``move_to(state_inputs(...), device)`` must move the pair, not hand it back untouched."""
    pair = state_inputs([random_observation(6, np.random.default_rng(0))])
    seen = []

    def visit(t):
        seen.append(t)
        return t.to(torch.float64) if t.is_floating_point() else t

    moved = map_tensors(pair, visit)
    assert isinstance(moved, tuple) and len(moved) == 2
    assert moved[0].x.dtype == torch.float64 and moved[1].meta.dtype == torch.float64
    assert len(seen) > 10  # every tensor of both batches was visited
