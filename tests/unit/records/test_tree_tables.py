"""``tree_tables_into`` (the batch decoder's, on scratch reused from tree to tree) gives what ``tree_tables``
gives."""

import numpy as np

from phylorl.phylo import random_tree
from phylorl.records.reader import tree_tables, tree_tables_into


def _arrays(n_taxa: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    tree = random_tree([f"t{i}" for i in range(n_taxa)], np.random.default_rng(seed))
    return np.ascontiguousarray(tree.neighbors, dtype=np.int32), np.ascontiguousarray(
        tree.edges, dtype=np.int32
    )


def test_scratch_reused_across_trees_of_any_size_and_error_gives_the_same_tables():
    largest = 2 * 27 - 2
    rng = np.random.default_rng(0)
    # scratch as a batch decoder leaves it: the last tree's values, here garbage
    node_edges, seen = rng.integers(-5, 50, (largest, 3)).astype(np.int32), rng.random(largest) < 0.5
    stack = rng.integers(0, 50, largest)
    cases = []
    for n_taxa, seed in ((27, 1), (8, 2), (20, 3), (3, 4)):
        neighbors, edges = _arrays(n_taxa, seed)
        cases.append((neighbors, edges, n_taxa))
        broken = neighbors.copy()  # an inner node naming one neighbour twice: the edge list no longer matches
        broken[n_taxa, 0] = broken[n_taxa, 1]
        cases.append((broken, edges, n_taxa))
        cases.append((neighbors, edges[::-1].copy(), n_taxa))  # the same tree, edges listed in another order
        cases.append((neighbors, edges[:-1].copy(), n_taxa))  # an edge missing
    errors = set()
    for neighbors, edges, n_taxa in cases:
        want, error = tree_tables(neighbors, edges, n_taxa)
        n_nodes = neighbors.shape[0]
        got, got_error = tree_tables_into(neighbors, edges, n_taxa, node_edges[:n_nodes], seen, stack)
        assert got_error == error
        if not error:
            assert np.array_equal(got, want)
        errors.add(error)
    assert errors == {0, 1, 3}  # both valid trees and refused ones were checked
