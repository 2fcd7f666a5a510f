"""The compiled topology key against the split-set digest: equal exactly when the topologies are."""

import numpy as np
import pytest

from phylorl.phylo.newick import read_newick, write_newick
from phylorl.phylo.splits import topology_hash
from phylorl.phylo.spr import enumerate_moves, spr_neighbor
from phylorl.phylo.starts import random_tree
from phylorl.phylo.topology_key import neighbor_key, topology_key


def names(n):
    return [f"t{i}" for i in range(n)]


@pytest.mark.parametrize("n", [4, 5, 7, 12, 20, 70])
def test_key_equals_exactly_when_split_sets_do(n):
    rng = np.random.default_rng(n)
    tree = random_tree(names(n), rng)
    moves = enumerate_moves(tree)
    picked = moves if len(moves) <= 300 else moves[rng.choice(len(moves), 300, replace=False)]
    neighbours = [spr_neighbor(tree, m) for m in picked]
    by_hash = {}
    for t in [tree, *neighbours, random_tree(names(n), rng)]:
        by_hash.setdefault(topology_hash(t), set()).add(topology_key(t))
    assert all(len(keys) == 1 for keys in by_hash.values())  # same topology, same key
    assert len({k for keys in by_hash.values() for k in keys}) == len(by_hash)  # different, different


@pytest.mark.parametrize("n", [6, 20, 70])
def test_key_ignores_node_numbering_and_lengths(n):
    tree = random_tree(names(n), np.random.default_rng(1))
    again = read_newick(write_newick(tree), names(n))  # renumbered internal nodes
    again.lengths[:] = 0.5
    assert not np.array_equal(again.neighbors, tree.neighbors) or n < 6
    assert topology_key(again) == topology_key(tree)


def test_neighbor_key_is_the_key_of_the_moved_tree_and_leaves_the_tree_alone():
    tree = random_tree(names(15), np.random.default_rng(2))
    before = tree.copy()
    for move in enumerate_moves(tree)[::7]:
        assert neighbor_key(tree, move) == topology_key(spr_neighbor(tree, move))
    assert np.array_equal(tree.neighbors, before.neighbors) and np.array_equal(tree.lengths, before.lengths)
    with pytest.raises(ValueError, match="invalid SPR move"):
        neighbor_key(tree, (0, 1, 2, 3))
