"""Identical sequences: found, dropped from alignment and tree, and put back on a cherry with their twin."""

from __future__ import annotations

import numpy as np
import pytest

from phylorl.phylo import LikelihoodEngine, parse_model
from phylorl.phylo.alignment import Alignment
from phylorl.phylo.duplicates import (
    find_duplicates,
    prune_tree,
    reduce_alignment,
    reduced_model,
    restore_tree,
)
from phylorl.phylo.simulate import simulate_dataset
from phylorl.phylo.starts import MIN_BRANCH_LENGTH, random_tree
from phylorl.phylo.topology_key import topology_key

MODEL = "GTR{1.2,3.1,0.8,1.1,2.9}+F+G4{0.7}"


def _with_copies(seed: int = 0) -> Alignment:
    """A simulated 10-taxon alignment with taxon 2 copied twice and taxon 7 once (13 taxa)."""
    base = simulate_dataset(10, 300, np.random.default_rng(seed)).alignment
    rows = [*range(10), 2, 7, 2]
    return Alignment(tuple(base.taxa) + ("copy2a", "copy7", "copy2b"), base.codes[rows])


def test_find_duplicates_names_each_copy_and_its_first_twin():
    alignment = _with_copies()
    found = find_duplicates(alignment)
    assert found.twin == {10: 2, 11: 7, 12: 2} and found.dropped == 3
    assert found.kept == tuple(range(10))
    assert reduce_alignment(alignment, found).taxa == alignment.taxa[:10]
    assert find_duplicates(simulate_dataset(8, 200, np.random.default_rng(1)).alignment) is None
    tiny = Alignment(
        ("a", "b", "c", "d", "e"), np.array([[1, 2, 4], [1, 2, 4], [1, 2, 4], [2, 2, 4], [4, 2, 4]])
    )
    assert find_duplicates(tiny) is None  # three distinct sequences: nothing left to search


def test_pruning_and_restoring_keep_the_topology_and_the_log_likelihood():
    alignment = _with_copies()
    found = find_duplicates(alignment)
    full = LikelihoodEngine(alignment, parse_model(MODEL))
    # the model's frequencies: the full alignment's
    full.loglik(random_tree(alignment.taxa, np.random.default_rng(0)))
    reduced_alignment = reduce_alignment(alignment, found)
    reduced = LikelihoodEngine(reduced_alignment, parse_model(reduced_model(str(full.model.spec), alignment)))
    tree = random_tree(alignment.taxa, np.random.default_rng(3))
    pruned = prune_tree(tree, found)
    assert pruned.n_leaves == 10 and pruned.taxa == reduced_alignment.taxa
    assert pruned.lengths.sum() == pytest.approx(
        tree.lengths.sum()
        - sum(
            # only pendant branches left
            tree.lengths[tree.node_edges[leaf, 0]]
            for leaf in found.twin
        ),
        abs=1e-9,
    )
    searched = reduced.optimize_branch_lengths(pruned, rounds=20, tol=1e-8)
    restored = restore_tree(pruned, found, alignment.taxa)
    assert restored.taxa == alignment.taxa
    assert topology_key(prune_tree(restored, found)) == topology_key(pruned)
    for dropped, twin in found.twin.items():  # next to its twin: only minimal branches between them
        assert _path_length(restored, dropped, twin) <= 3 * MIN_BRANCH_LENGTH + 1e-15
    scored = full.optimize_branch_lengths(restored, rounds=20, tol=1e-8)
    assert scored == pytest.approx(searched, abs=0.05)  # the copies' pendant branches cost ~1e-6 per site


def test_reduced_model_fixes_the_full_alignments_empirical_frequencies():
    alignment = _with_copies()
    model = reduced_model(MODEL, alignment)
    assert parse_model(model).freqs == pytest.approx(tuple(alignment.empirical_frequencies()), abs=1e-12)
    assert reduced_model("JC", alignment) == "JC"
    assert reduced_model("GTR+FQ+G4", alignment) == "GTR+FQ+G4"
    no_t = Alignment(
        tuple("abcde"), np.array([[1, 2, 4, 1], [1, 2, 4, 2], [1, 4, 4, 1], [2, 2, 4, 4], [4, 1, 1, 1]])
    )
    assert reduced_model("HKY+F", no_t) is None  # a base absent: no fixed frequency can say it


def _path_length(tree, a: int, b: int) -> float:
    order, parent = tree.preorder(root=a)
    length, v = 0.0, b
    while v != a:
        length += tree.lengths[tree.edge_between(v, int(parent[v]))]
        v = int(parent[v])
    return length
