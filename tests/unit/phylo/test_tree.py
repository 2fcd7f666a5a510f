"""Helpers added to Tree: taxon_names and preorder."""

from collections import namedtuple

import numpy as np
import pytest

from phylorl.phylo.starts import random_tree
from phylorl.phylo.tree import Tree, taxon_names

Named = namedtuple("Named", "taxa codes")


def test_taxon_names_from_alignment_like_and_sequence():
    assert taxon_names(Named(("a", "b_c", "d"), None)) == ("a", "b_c", "d")
    assert taxon_names(["x", "y", "z"]) == ("x", "y", "z")


@pytest.mark.parametrize(
    "bad, message",
    [
        (["a", "b", "a"], "duplicate taxon names: \\['a'\\]"),
        ("abc", "sequence of taxon names"),
        ([1, 2, 3], "strings"),
    ],
)
def test_taxon_names_rejects(bad, message):
    with pytest.raises(ValueError, match=message):
        taxon_names(bad)


def test_preorder_on_hand_built_tree():
    # ((0,1)4, 2, 3) as edges around node 5; node 4 holds leaves 0 and 1
    tree = Tree.from_edges([[0, 4], [1, 4], [4, 5], [2, 5], [3, 5]], np.full(5, 0.1), "ABCD")
    order, parent = tree.preorder(root=0)
    assert order.tolist() == [0, 4, 1, 5, 2, 3]
    assert parent.tolist() == [-1, 4, 5, 5, 0, 4]


def test_preorder_visits_every_node_once_with_parent_before_child():
    tree = random_tree([f"t{i}" for i in range(40)], np.random.default_rng(3))
    for root in (0, 17, 50):
        order, parent = tree.preorder(root)
        assert sorted(order.tolist()) == list(range(tree.n_nodes))
        position = np.empty(tree.n_nodes, dtype=int)
        position[order] = np.arange(tree.n_nodes)
        assert parent[root] == -1
        for v in range(tree.n_nodes):
            if v != root:
                assert position[parent[v]] < position[v]
                tree.edge_between(v, int(parent[v]))  # raises if not adjacent
