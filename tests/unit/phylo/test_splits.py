"""Splits, RF distance (checked against DendroPy) and topology hashes."""

import dendropy
import numpy as np
import pytest
from dendropy.calculate import treecompare

from phylorl.phylo.newick import read_newick, write_newick
from phylorl.phylo.splits import rf_distance, split_lengths, splits, topology_hash
from phylorl.phylo.spr import enumerate_moves, spr_neighbor
from phylorl.phylo.starts import random_tree
from phylorl.phylo.tree import Tree

NAMES5 = ["A", "B", "C", "D", "E"]


def names(n):
    return [f"t{i}" for i in range(n)]


def test_splits_of_a_hand_tree():
    tree = read_newick("((A,B),C,(D,E));", NAMES5)
    # {A,B} is normalised to its complement {C,D,E} = bits 2,3,4; {D,E} = bits 3,4
    assert splits(tree) == frozenset({0b11100, 0b11000})


def test_split_lengths_keys_every_edge():
    tree = read_newick("((A:1,B:2):3,C:4,(D:5,E:6):7);", NAMES5)
    assert split_lengths(tree) == {
        0b11110: 1.0,
        0b00010: 2.0,
        0b11100: 3.0,
        0b00100: 4.0,
        0b11000: 7.0,
        0b01000: 5.0,
        0b10000: 6.0,
    }


def test_splits_on_a_deep_caterpillar_needs_no_recursion():
    n = 3000  # caterpillar: path of internal nodes n..2n-3; leaves 0, 1 at n; n-2, n-1 at 2n-3
    edges = [(0, n), (1, n), (2 * n - 3, n - 2), (2 * n - 3, n - 1)]
    edges += [(n + k - 1, n + k) for k in range(1, n - 2)]
    edges += [(n + j - 1, j) for j in range(2, n - 2)]
    tree = Tree.from_edges(edges, np.full(2 * n - 3, 0.1), names(n))
    got = splits(tree)
    # the path edge (n+k-1, n+k) separates leaves {k+1, ..., n-1} from the rest
    assert got == frozenset(((1 << n) - 1) ^ ((1 << (k + 1)) - 1) for k in range(1, n - 2))


def test_rf_of_tree_with_itself_and_an_nni():
    tree = random_tree(names(12), np.random.default_rng(0))
    assert rf_distance(tree, tree.copy()) == 0
    nni = enumerate_moves(tree, radius=1)
    assert len(nni) == 2 * (12 - 3)
    for move in nni:
        assert rf_distance(tree, spr_neighbor(tree, move)) == 2
    far = enumerate_moves(tree)
    assert all(rf_distance(tree, spr_neighbor(tree, move)) > 0 for move in far)


def _dendropy_rf(a: Tree, b: Tree) -> int:
    namespace = dendropy.TaxonNamespace()
    trees = [
        dendropy.Tree.get(data=write_newick(t), schema="newick", taxon_namespace=namespace,
                          rooting="force-unrooted", preserve_underscores=True)
        for t in (a, b)
    ]  # fmt: skip
    return treecompare.symmetric_difference(*trees)


def test_rf_agrees_with_dendropy():
    rng = np.random.default_rng(1)
    for n in (5, 9, 16, 30):
        for _ in range(5):
            a, b = random_tree(names(n), rng), random_tree(names(n), rng)
            assert rf_distance(a, b) == _dendropy_rf(a, b)
            move = enumerate_moves(a)[rng.integers(2 * (n - 3) * (2 * n - 7))]
            c = spr_neighbor(a, move)
            assert rf_distance(a, c) == _dendropy_rf(a, c)


def test_rf_maps_leaves_by_name_when_orders_differ():
    a = read_newick("((A,B),C,(D,E));", NAMES5)
    same = read_newick("((A,B),C,(D,E));", ["E", "C", "A", "D", "B"])
    other = read_newick("((A,C),B,(D,E));", ["E", "C", "A", "D", "B"])
    assert rf_distance(a, same) == 0
    assert rf_distance(a, other) == 2
    with pytest.raises(ValueError, match=r"only in first \['E'\], only in second \['F'\]"):
        rf_distance(a, read_newick("((A,B),C,(D,F));", ["A", "B", "C", "D", "F"]))


def test_topology_hash_ignores_lengths_and_numbering():
    a = read_newick("((A:1,B:2):3,C:4,(D:5,E:6):7);", NAMES5)
    b = read_newick("(E:1,D:1,(C:1,(B:1,A:1):1):1);", NAMES5)  # same topology, other nodes/lengths
    c = read_newick("((A,C),B,(D,E));", NAMES5)
    assert not np.array_equal(a.edges, b.edges)
    assert topology_hash(a) == topology_hash(b)
    assert topology_hash(a) != topology_hash(c)
    assert len(topology_hash(a)) == 32 and int(topology_hash(a), 16) >= 0
