"""Fitch parsimony: tree lengths against a plain recursive Fitch, and the change of every SPR move
against the moved tree's length recomputed from scratch."""

import numpy as np
import pytest

from phylorl.phylo import apply_spr, enumerate_moves, parse_model, random_tree
from phylorl.phylo.parsimony import parsimony_length, parsimony_tips, spr_parsimony_deltas
from phylorl.phylo.simulate import dataset_rng, simulate_dataset


def plain_fitch(tree, codes, weights, root):
    """Fitch length with a plain recursion from internal node ``root`` (three children there)."""

    def visit(v, parent):
        if v < tree.n_leaves:
            return codes[v].astype(np.int64), np.zeros(codes.shape[1])
        sets, cost = None, np.zeros(codes.shape[1])
        for u in tree.neighbors[v]:
            if u < 0 or u == parent:
                continue
            child, child_cost = visit(int(u), v)
            cost += child_cost
            if sets is None:
                sets = child
            else:
                both = sets & child
                cost += both == 0
                sets = np.where(both != 0, both, sets | child)
        return sets, cost

    _, cost = visit(root, -1)
    return float(cost @ weights)


@pytest.fixture(scope="module")
def data():
    sim = simulate_dataset(
        14, 400, dataset_rng(3, 0), model=parse_model("GTR{1,3,1,1,3}+FQ+G4{0.5}"), gap_fraction=0.05
    )
    patterns = sim.alignment.patterns()
    return sim.alignment, parsimony_tips(patterns.codes), patterns.weights


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_length_equals_a_plain_recursive_fitch_from_any_root(data, seed):
    alignment, tips, weights = data
    rng = np.random.default_rng(seed)
    tree = random_tree(alignment.taxa, rng)
    length = parsimony_length(tree, tips, weights)
    for root in rng.choice(np.arange(tree.n_leaves, tree.n_nodes), 3, replace=False):
        assert length == pytest.approx(plain_fitch(tree, tips, weights, int(root)), abs=1e-9)


@pytest.mark.parametrize("seed, radius", [(0, None), (1, None), (2, 3)])
def test_every_move_change_equals_the_moved_tree_recomputed(data, seed, radius):
    alignment, tips, weights = data
    tree = random_tree(alignment.taxa, np.random.default_rng(seed))
    moves = enumerate_moves(tree, radius=radius)
    deltas, length = spr_parsimony_deltas(tree, moves, tips, weights)
    assert length == pytest.approx(parsimony_length(tree, tips, weights))
    expected = np.empty(len(moves))
    for i, move in enumerate(moves):
        moved = tree.copy()
        apply_spr(moved, move)
        expected[i] = parsimony_length(moved, tips, weights) - length
    np.testing.assert_allclose(deltas, expected, atol=1e-9)
    assert (deltas < 0).any() and (deltas > 0).any()  # a random tree has better and worse neighbours


def test_tips_must_match_the_tree(data):
    alignment, tips, weights = data
    tree = random_tree(alignment.taxa, np.random.default_rng(0))
    with pytest.raises(ValueError, match="rows"):
        spr_parsimony_deltas(tree, enumerate_moves(tree), tips[:-1], weights)


def test_any_weights_count_as_the_plain_fitch_counts_them(data):
    # the kernels count patterns per weight class of each 64-pattern word: fractional and repeated weights
    # in any order must weigh exactly as the plain recursion does
    alignment, tips, _ = data
    rng = np.random.default_rng(5)
    weights = np.round(rng.uniform(0.1, 3.0, tips.shape[1]), 1)
    tree = random_tree(alignment.taxa, rng)
    assert parsimony_length(tree, tips, weights) == pytest.approx(
        plain_fitch(tree, tips, weights, tree.n_leaves), rel=1e-12
    )
    moves = enumerate_moves(tree)
    deltas, length = spr_parsimony_deltas(tree, moves, tips, weights)
    for i in rng.choice(len(moves), 25, replace=False):
        moved = tree.copy()
        apply_spr(moved, moves[i])
        assert deltas[i] == pytest.approx(parsimony_length(moved, tips, weights) - length, abs=1e-9)
