"""Parsimony start trees: each stepwise insertion against every insertion tried by hand and scored from
scratch, the lengths the builders report against the finished trees' lengths recomputed, parsimony SPR never
lengthening a tree, and draws differing by seed only."""

import numpy as np
import pytest

from phylorl.phylo import Tree, parse_model
from phylorl.phylo.parsimony import bit_planes, parsimony_length, parsimony_tips
from phylorl.phylo.parsimony_starts import parsimony_spr, parsimony_tree, stepwise_addition
from phylorl.phylo.simulate import dataset_rng, simulate_dataset
from phylorl.phylo.splits import splits


@pytest.fixture(scope="module")
def data():
    sim = simulate_dataset(
        16, 300, dataset_rng(7, 0), model=parse_model("GTR{1,3,1,1,3}+FQ+G4{0.5}"), gap_fraction=0.05
    )
    patterns = sim.alignment.patterns()
    tips = parsimony_tips(patterns.codes)
    weights = np.asarray(patterns.weights, np.float64)
    return sim.alignment, tips, weights, bit_planes(tips, weights)


def _length(edge_list, tips, weights):
    """Fitch length of the tree over the leaves named in ``edge_list`` (leaves < 1000, internal nodes >=
    1000)."""
    leaves = sorted({v for e in edge_list for v in e if v < 1000})
    internal = sorted({v for e in edge_list for v in e if v >= 1000})
    ids = {v: i for i, v in enumerate(leaves)} | {v: len(leaves) + i for i, v in enumerate(internal)}
    edges = np.array([(ids[a], ids[b]) for a, b in edge_list], np.int32)
    tree = Tree.from_edges(edges, np.full(len(edges), 0.1), [f"t{v}" for v in leaves])
    return parsimony_length(tree, np.ascontiguousarray(tips[leaves]), weights)


@pytest.mark.parametrize("seed", [0, 1])
def test_stepwise_addition_inserts_each_taxon_where_it_adds_least(data, seed):
    alignment, tips, weights, (bits, classes) = data
    n = alignment.n_taxa
    order = np.random.default_rng(seed).permutation(n).astype(np.int64)
    edges, length = stepwise_addition(bits, *classes, order)
    tree = Tree.from_edges(edges.astype(np.int32), np.full(2 * n - 3, 0.1), alignment.taxa)
    assert length == parsimony_length(tree, tips, weights)
    # by hand: every insertion of every taxon scored from scratch, the shortest kept (first on ties)
    a, b, c = (int(v) for v in order[:3])
    edge_list, node = [(1000, a), (1000, b), (1000, c)], 1001
    for leaf in order[3:].tolist():
        tried = [
            edge_list[:i] + edge_list[i + 1 :] + [(u, node), (node, v), (node, leaf)]
            for i, (u, v) in enumerate(edge_list)
        ]
        edge_list = min(tried, key=lambda cand: _length(cand, tips, weights))
        node += 1
    assert _length(edge_list, tips, weights) == length


def test_parsimony_spr_reports_its_change_and_never_lengthens(data):
    alignment, tips, weights, (bits, classes) = data
    for seed in range(3):
        order = np.random.default_rng(seed).permutation(alignment.n_taxa).astype(np.int64)
        edges, length = stepwise_addition(bits, *classes, order)
        tree = Tree.from_edges(edges.astype(np.int32), np.full(len(edges), 0.1), alignment.taxa)
        moves, change = parsimony_spr(
            tree.neighbors, tree.node_edges, tree.edges, tree.lengths, tree.n_leaves, bits, *classes, 4, 10
        )
        tree.validate()
        assert change <= 0 and (moves > 0) == (change < 0)
        assert parsimony_length(tree, tips, weights) == length + change


def test_parsimony_tree_is_seeded_and_reaches_spr_optimum_within_its_radius(data):
    alignment, tips, weights, planes = data
    one = parsimony_tree(alignment, np.random.default_rng(3), spr_radius=3, spr_rounds=50, planes=planes)
    two = parsimony_tree(alignment, np.random.default_rng(3), spr_radius=3, spr_rounds=50)
    assert splits(one) == splits(two) and np.array_equal(one.edges, two.edges)
    assert np.all(one.lengths > 0)
    # no move of radius <= 3 shortens it further
    again = one.copy()
    moves, change = parsimony_spr(
        again.neighbors,
        again.node_edges,
        again.edges,
        again.lengths,
        again.n_leaves,
        planes[0],
        *planes[1],
        3,
        5,
    )
    assert moves == 0 and change == 0
