"""The sequence simulator: its output follows the model (checked against the likelihood engine's exact
pattern probabilities), the true tree explains it best, and one seed gives one data set."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from phylorl.phylo import Alignment, LikelihoodEngine, ModelError, parse_model, random_tree, write_newick
from phylorl.phylo.simulate import (
    ALPHA_RANGE,
    PINV_MAX,
    SimulatedDataset,
    add_gaps,
    random_model,
    realistic_tree,
    simulate_alignment,
    simulate_dataset,
)

GTR = "GTR{1.5,4,0.7,1.2,3.5}+F{0.1,0.2,0.3,0.4}"
QUARTET = ("a", "b", "c", "d")
QUARTET_LENGTHS = [0.1, 0.3, 0.05, 0.2, 0.15]


def quartet():
    tree = random_tree(QUARTET, np.random.default_rng(0))
    tree.lengths[:] = QUARTET_LENGTHS
    return tree


def pattern_probabilities(tree, model: str) -> np.ndarray:
    """Exact probability of each of the 256 site patterns of a 4-taxon tree, from the likelihood engine;
    pattern index = sum of state(taxon k) * 4**(3-k) with states A, C, G, T = 0..3."""
    columns = np.array(list(itertools.product([1, 2, 4, 8], repeat=4)), dtype=np.uint8).T
    engine = LikelihoodEngine(Alignment(tree.taxa, columns), model)
    return np.exp(engine.site_logliks(tree))


def pattern_counts(alignment: Alignment) -> np.ndarray:
    states = np.log2(alignment.codes).astype(np.int64)  # unambiguous masks 1, 2, 4, 8 -> 0..3
    index = states[0] * 64 + states[1] * 16 + states[2] * 4 + states[3]
    return np.bincount(index, minlength=256)


def constant_fraction(alignment: Alignment) -> float:
    return float((alignment.codes == alignment.codes[0]).all(axis=0).mean())


CONSTANT_PATTERNS = [0, 85, 170, 255]  # AAAA, CCCC, GGGG, TTTT


@pytest.mark.parametrize("model", [GTR, GTR + "+G4{0.4}", GTR + "+I{0.2}+G4{0.4}", "JC", "HKY{3}+FQ+I{0.3}"])
def test_site_patterns_follow_the_model(model):
    """All 256 pattern frequencies of 40,000 simulated sites pass a chi-square test against the exact
    probabilities computed by Felsenstein pruning (an independent implementation)."""
    tree = quartet()
    expected = pattern_probabilities(tree, model)
    assert expected.sum() == pytest.approx(1.0, abs=1e-12)
    alignment = simulate_alignment(tree, parse_model(model), 40_000, np.random.default_rng(11))
    counts = pattern_counts(alignment)
    result = stats.chisquare(counts, expected * counts.sum())
    assert result.pvalue > 1e-3, (model, result)


def test_base_frequencies_match_the_model():
    tree = realistic_tree([f"t{i}" for i in range(1, 9)], np.random.default_rng(2))
    alignment = simulate_alignment(tree, parse_model(GTR + "+G4{0.8}"), 20_000, np.random.default_rng(3))
    observed = np.array([(alignment.codes == mask).mean() for mask in (1, 2, 4, 8)])
    np.testing.assert_allclose(observed, [0.1, 0.2, 0.3, 0.4], atol=0.01)


def test_small_alpha_and_pinv_give_more_constant_columns():
    """Constant-column fractions match their exact expectation and move the right way with alpha and pinv."""
    tree = quartet()
    fractions = {}
    for label, model in {
        "alpha=0.1": GTR + "+G4{0.1}",
        "alpha=10": GTR + "+G4{10}",
        "pinv=0": GTR,
        "pinv=0.4": GTR + "+I{0.4}",
    }.items():
        alignment = simulate_alignment(tree, parse_model(model), 20_000, np.random.default_rng(7))
        fractions[label] = constant_fraction(alignment)
        exact = pattern_probabilities(tree, model)[CONSTANT_PATTERNS].sum()
        assert fractions[label] == pytest.approx(exact, abs=0.015), label
    assert fractions["alpha=0.1"] > fractions["alpha=10"] + 0.1
    assert fractions["pinv=0.4"] > fractions["pinv=0"] + 0.05


def test_true_tree_beats_random_trees():
    rng = np.random.default_rng(4)
    data = simulate_dataset(12, 1000, rng)
    engine = LikelihoodEngine(data.alignment, data.model)
    true_loglik = engine.loglik(data.tree)
    for seed in range(5):
        other = realistic_tree(data.alignment.taxa, np.random.default_rng(100 + seed))
        assert engine.loglik(other) < true_loglik - 50


def test_random_models_are_fully_specified_and_in_range():
    rng = np.random.default_rng(0)
    specs = [random_model(rng) for _ in range(300)]
    for spec in specs:
        assert spec.kind == "GTR" and spec.gamma_categories == 4
        assert spec.free_parameters == ()
        assert parse_model(str(spec)) == spec
        assert ALPHA_RANGE[0] * 0.999 <= spec.alpha <= ALPHA_RANGE[1] * 1.001
        assert math.isclose(sum(spec.freqs), 1.0, abs_tol=1e-12) and min(spec.freqs) >= 0.01
        assert spec.exchangeabilities[5] == 1.0 and min(spec.exchangeabilities) > 0
        if spec.invariant:
            assert 0 < spec.pinv <= PINV_MAX
    with_invariant = np.mean([spec.invariant for spec in specs])
    assert 0.4 < with_invariant < 0.6
    log_ag = np.log([spec.exchangeabilities[1] for spec in specs])
    assert np.median(log_ag) == pytest.approx(math.log(3.0), abs=0.15)  # transitions ~3x GT


def test_realistic_tree_lengths():
    internal, external = [], []
    rng = np.random.default_rng(1)
    for _ in range(100):
        tree = realistic_tree([f"t{i}" for i in range(1, 21)], rng)
        tree.validate()
        is_internal = (tree.edges >= tree.n_leaves).all(axis=1)
        assert is_internal.sum() == 20 - 3
        internal.append(tree.lengths[is_internal])
        external.append(tree.lengths[~is_internal])
    internal, external = np.concatenate(internal), np.concatenate(external)
    assert internal.min() > 0 and external.min() > 0
    assert 0.03 < internal.mean() < 0.06 and 0.06 < external.mean() < 0.12
    assert internal.mean() < 0.6 * external.mean()


def test_same_seed_same_data_different_seed_different_data():
    a = simulate_dataset(10, 300, np.random.default_rng(9), gap_fraction=0.1)
    b = simulate_dataset(10, 300, np.random.default_rng(9), gap_fraction=0.1)
    c = simulate_dataset(10, 300, np.random.default_rng(10), gap_fraction=0.1)
    assert isinstance(a, SimulatedDataset)
    assert a.alignment == b.alignment and a.model == b.model and write_newick(a.tree) == write_newick(b.tree)
    assert a.alignment != c.alignment and a.model != c.model
    assert a.alignment.taxa == tuple(f"t{i}" for i in range(1, 11))
    assert a.alignment.n_sites == 300


def test_gaps():
    data = simulate_dataset(8, 2000, np.random.default_rng(1))
    gapped = add_gaps(data.alignment, 0.25, np.random.default_rng(2))
    is_gap = gapped.codes == 15
    assert is_gap.mean() == pytest.approx(0.25, abs=0.01)
    np.testing.assert_array_equal(gapped.codes[~is_gap], data.alignment.codes[~is_gap])
    assert add_gaps(data.alignment, 0.0, np.random.default_rng(2)) == data.alignment
    with pytest.raises(ValueError, match="gap fraction"):
        add_gaps(data.alignment, 1.0, np.random.default_rng(2))


@pytest.mark.parametrize(
    "model, message",
    [
        ("GTR+F+G4", "not fully specified: give numbers for exchangeabilities, alpha"),
        ("HKY{2}+F", "empirical frequencies"),
        ("HKY{2}", "empirical frequencies"),
    ],
)
def test_models_that_cannot_drive_a_simulation(model, message):
    with pytest.raises(ModelError, match=message):
        simulate_dataset(5, 10, np.random.default_rng(0), model=parse_model(model))


def test_bad_sizes():
    tree = quartet()
    with pytest.raises(ValueError, match="n_sites must be an integer >= 1"):
        simulate_alignment(tree, parse_model("JC"), 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_taxa must be an integer >= 3"):
        simulate_dataset(2, 10, np.random.default_rng(0))
