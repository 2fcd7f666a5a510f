"""Sum tree: sums, vectorised updates, and sampling frequencies proportional to the weights."""

import numpy as np
import pytest
from scipy import stats

from phylorl.replay.sumtree import SumTree


def test_total_and_get_after_updates_with_repeats():
    tree = SumTree(5)
    tree.set([0, 1, 4], [1.0, 2.0, 3.0])
    tree.set([1, 1, 2], [10.0, 20.0, 0.5])  # a repeated slot keeps its last weight
    np.testing.assert_array_equal(tree.get(np.arange(5)), [1.0, 20.0, 0.5, 0.0, 3.0])
    assert tree.total == 24.5


def test_assign_equals_incremental_updates():
    rng = np.random.default_rng(0)
    weights = rng.exponential(size=37)
    bulk, incremental = SumTree(37), SumTree(37)
    bulk.assign(weights)
    for i in rng.permutation(37):
        incremental.set([i], [weights[i]])
    assert bulk.total == pytest.approx(weights.sum(), rel=1e-12)
    np.testing.assert_array_equal(bulk._nodes, incremental._nodes)


@pytest.mark.parametrize("capacity", [1, 2, 13, 64])
def test_sampling_frequencies_are_proportional_to_weights(capacity):
    """Chi-square goodness of fit over 40,000 draws, fixed seed, significance 0.001."""
    rng = np.random.default_rng(1234)
    weights = rng.uniform(0.1, 5.0, size=capacity)
    if capacity > 1:
        weights[::4] = 0.0  # zero weights must never be drawn
    tree = SumTree(capacity)
    tree.assign(weights)
    draws = np.concatenate([tree.sample(64, rng) for _ in range(625)])
    counts = np.bincount(draws, minlength=capacity)
    assert counts[weights == 0].sum() == 0
    positive = weights > 0
    expected = draws.size * weights[positive] / weights.sum()
    if positive.sum() > 1:
        assert stats.chisquare(counts[positive], expected).pvalue > 1e-3
    else:
        assert counts[positive][0] == draws.size


def test_stratified_batch_covers_every_stratum():
    tree = SumTree(4)
    tree.assign(np.ones(4))
    # four strata over four equal weights: each slot exactly once per batch of four
    for seed in range(20):
        assert sorted(tree.sample(4, np.random.default_rng(seed))) == [0, 1, 2, 3]


def test_never_returns_empty_slots_at_the_edges():
    tree = SumTree(8)
    tree.set([2, 3], [1e-300, 1.0])  # neighbours of zero-weight slots, tiny weights
    draws = tree.sample(10_000, np.random.default_rng(5))
    assert set(np.unique(draws)) <= {2, 3}


def test_bad_input():
    tree = SumTree(4)
    with pytest.raises(ValueError, match="every weight is zero"):
        tree.sample(1, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"slots must lie in \[0, 4\)"):
        tree.set([4], [1.0])
    with pytest.raises(ValueError, match="finite and >= 0"):
        tree.set([0], [-1.0])
    with pytest.raises(ValueError, match="finite and >= 0"):
        tree.set([0], [np.nan])
    with pytest.raises(ValueError, match="capacity must be >= 1"):
        SumTree(0)
