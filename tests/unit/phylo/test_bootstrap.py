"""NJ bootstrap split supports against a slow reference that builds every resampled alignment."""

import numpy as np
import pytest

from phylorl.phylo import nj_tree, parse_model
from phylorl.phylo.alignment import Alignment
from phylorl.phylo.bootstrap import edge_supports, nj_bootstrap_supports
from phylorl.phylo.simulate import dataset_rng, simulate_dataset
from phylorl.phylo.splits import edge_splits, splits
from phylorl.phylo.starts import jc_distances, weighted_jc_distances


@pytest.fixture(scope="module")
def alignment():
    return simulate_dataset(
        10, 300, dataset_rng(11, 0), model=parse_model("HKY{3}+FQ+G4{0.4}"), gap_fraction=0.05
    ).alignment


def slow_supports(alignment, replicates, seed):
    """Resample columns explicitly (the same multinomial draws), then JC distances + NJ + splits."""
    patterns = alignment.patterns()
    rng = np.random.default_rng(seed)
    counts = {}
    for _ in range(replicates):
        drawn = rng.multinomial(alignment.n_sites, patterns.weights / patterns.weights.sum())
        columns = np.repeat(np.arange(patterns.n_patterns), drawn)
        replicate = Alignment(alignment.taxa, patterns.codes[:, columns])
        for split in splits(nj_tree(replicate)):
            counts[split] = counts.get(split, 0) + 1
    return {split: c / replicates for split, c in counts.items()}


def test_weighted_distances_equal_distances_of_the_alignment(alignment):
    patterns = alignment.patterns()
    np.testing.assert_allclose(
        weighted_jc_distances(patterns.codes, patterns.weights), jc_distances(alignment), atol=1e-12
    )


def test_supports_equal_the_slow_reference(alignment):
    fast = nj_bootstrap_supports(alignment, replicates=30, seed=4)
    slow = slow_supports(alignment, 30, 4)
    assert fast.keys() == slow.keys()
    for split, support in slow.items():
        assert fast[split] == pytest.approx(support)
    assert max(fast.values()) == 1.0 and min(fast.values()) < 1.0  # informative, not all or nothing


def test_edge_supports_look_up_each_edge_split(alignment):
    supports = nj_bootstrap_supports(alignment, replicates=20, seed=1)
    tree = nj_tree(alignment)
    values = edge_supports(tree, supports)
    n = tree.n_leaves
    for e, mask in enumerate(edge_splits(tree)):
        trivial = mask.bit_count() in (1, n - 1)
        assert values[e] == (1.0 if trivial else supports.get(mask, 0.0))
    assert (values < 1.0).any()
