"""Substitution models: IQ-TREE model strings, rate matrices, transition matrices, site-rate categories
(the comparisons with a live IQ-TREE are in tests/integration/oracle/test_models_oracle.py)."""

from __future__ import annotations

import numpy as np
import pytest

from phylorl.phylo.models import (
    ModelError,
    ModelSpec,
    SubstitutionModel,
    build_model,
    gamma_rates,
    parse_model,
)

ONES = (1.0,) * 6
GTR_DS1 = "GTR{0.6472,1.0289,0.6175,1.8389,3.3278}+F{0.2341,0.2567,0.2799,0.2293}"


# --- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("JC", ModelSpec("JC", ONES, "equal")),
        ("jc", ModelSpec("JC", ONES, "equal")),
        ("JC+FQ", ModelSpec("JC", ONES, "equal")),
        ("K80{2}", ModelSpec("K80", (1, 2, 1, 1, 2, 1), "equal")),
        ("K2P{2.5}", ModelSpec("K80", (1, 2.5, 1, 1, 2.5, 1), "equal")),
        ("K80", ModelSpec("K80", None, "equal")),
        ("F81", ModelSpec("F81", ONES, "empirical")),
        ("F81+FQ", ModelSpec("F81", ONES, "equal")),
        ("HKY{4}", ModelSpec("HKY", (1, 4, 1, 1, 4, 1), "empirical")),
        ("HKY+I", ModelSpec("HKY", None, "empirical", invariant=True)),
        ("HKY{2}+FO", ModelSpec("HKY", (1, 2, 1, 1, 2, 1), "estimate")),
        ("GTR+F+G4", ModelSpec("GTR", None, "empirical", gamma_categories=4)),
        ("GTR{1,2,3,4,5}", ModelSpec("GTR", (1, 2, 3, 4, 5, 1), "empirical")),
        ("GTR{2,4,6,8,10,2}", ModelSpec("GTR", (1, 2, 3, 4, 5, 1), "empirical")),
        (
            "GTR{1, 2, 3, 4, 5}+F{0.1, 0.2, 0.3, 0.4}",
            ModelSpec("GTR", (1, 2, 3, 4, 5, 1), (0.1, 0.2, 0.3, 0.4)),
        ),
        ("GTR{1e+00,2,3,4,5E0}+FQ", ModelSpec("GTR", (1, 2, 3, 4, 5, 1), "equal")),
        ("JC+G", ModelSpec("JC", ONES, "equal", gamma_categories=4)),
        ("JC+G{0.5}", ModelSpec("JC", ONES, "equal", gamma_categories=4, alpha=0.5)),
        ("JC+G8{0.5}", ModelSpec("JC", ONES, "equal", gamma_categories=8, alpha=0.5)),
        ("JC+G6", ModelSpec("JC", ONES, "equal", gamma_categories=6)),
        ("JC+I{0.3}", ModelSpec("JC", ONES, "equal", invariant=True, pinv=0.3)),
        ("JC+I{0}", ModelSpec("JC", ONES, "equal", invariant=True, pinv=0.0)),
        ("JC+G4{0.5}+I{0.2}", ModelSpec("JC", ONES, "equal", 4, 0.5, True, 0.2)),
        (" HKY{2}+G4{1}+I+F ", ModelSpec("HKY", (1, 2, 1, 1, 2, 1), "empirical", 4, 1.0, True, None)),
    ],
)
def test_parse_forms(text, expected):
    assert parse_model(text) == expected


def test_fixed_frequencies_are_normalised_within_iqtree_tolerance():
    spec = parse_model("HKY{2}+F{0.25,0.25,0.25,0.251}")
    assert spec.freqs == pytest.approx((0.25 / 1.001, 0.25 / 1.001, 0.25 / 1.001, 0.251 / 1.001), rel=1e-15)
    assert sum(spec.freqs) == pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty model string"),
        ("XYZ", "unknown model 'XYZ'"),
        ("TN93{2,3}", "unknown model 'TN93"),
        ("GTR{1,2,1,1}", "GTR takes 5 rates .* got 4"),
        ("GTR{1,2,1,1,2,1,1}", "got 7"),
        ("HKY{2,3}", "expected one number \\(kappa\\), got 2"),
        ("JC{1}", "JC takes no numbers"),
        ("HKY{abc}", "'abc' in 'HKY\\{abc\\}' is not a number"),
        ("HKY{nan}", "not a finite number"),
        ("HKY{}", "empty braces"),
        ("HKY{-1}", "exchangeability AG must be a finite number > 0"),
        ("GTR{1,0,1,1,1}", "exchangeability AG"),
        ("GTR{1,2,1,1,2", "unclosed"),
        ("GTR}1{", "unmatched"),
        ("GTR{{1}}", "nested"),
        ("GTR+", "stray '\\+'"),
        ("GTR++G4", "stray '\\+'"),
        ("GTR+R4", "unknown component '\\+R4'.*expected one of \\+F"),
        ("JC+g4", "unknown component '\\+g4'"),
        ("GTR+G0", "must be >= 1"),
        ("GTR+G4{0.5}+G4{0.3}", "duplicated gamma component '\\+G4\\{0.3\\}'"),
        ("GTR+I+I{0.2}", "duplicated invariant component"),
        ("GTR+F+FQ", "duplicated frequency component '\\+FQ'"),
        ("JC+F", "JC has equal base frequencies .* use F81"),
        ("K80{2}+F{0.1,0.2,0.3,0.4}", "K80 has equal base frequencies .* use HKY"),
        ("HKY+FQ{0.25,0.25,0.25,0.25}", "\\+FQ takes none"),
        ("HKY+F{0.2,0.3,0.5}", "expected 4 frequencies"),
        ("HKY+F{0.3,0.3,0.3,0.3}", "sum to 1.2.*not 1"),
        ("HKY+F{0.25,0.25,0.25,0.26}", "not 1"),
        ("HKY+F{0,0.3,0.3,0.4}", "frequency of A must be in \\(0, 1\\]"),
        ("JC+G4{0}", "alpha must be >= 0.02"),
        ("JC+G4{0.01}", "IQ-TREE's minimum"),
        ("JC+G4{0.5,1}", "expected one number \\(alpha\\)"),
        ("JC+I{1}", "pinv must be in \\[0, 1\\)"),
        ("JC+I{-0.1}", "pinv must be in"),
        ("JC G4", "cannot read"),
    ],
)
def test_parse_errors_name_the_problem(text, message):
    with pytest.raises(ModelError, match=message):
        parse_model(text)


@pytest.mark.parametrize(
    "text, canonical",
    [
        ("JC", "JC"),
        ("K2P{2}", "K80{2}"),
        ("F81", "F81+F"),
        ("HKY{2.5}+G{0.3}+I{0.1}", "HKY{2.5}+F+I{0.1}+G4{0.3}"),
        ("GTR{2,4,6,8,10,2}+FQ", "GTR{1,2,3,4,5}+FQ"),
        ("GTR+F+G4", "GTR+F+G4"),
        ("HKY+I", "HKY+F+I"),
        ("GTR{1,2,3,4,5}+FO+G8", "GTR{1,2,3,4,5}+FO+G8"),
        (GTR_DS1 + "+I{0.2}+G4{0.5}", GTR_DS1 + "+I{0.2}+G4{0.5}"),
        ("HKY{1e-05}+F{0.1,0.2,0.3,0.4}", "HKY{1e-05}+F{0.1,0.2,0.3,0.4}"),
    ],
)
def test_str_is_canonical_and_round_trips(text, canonical):
    spec = parse_model(text)
    assert str(spec) == canonical
    assert parse_model(str(spec)) == spec


def test_round_trip_of_normalised_values_is_exact():
    rng = np.random.default_rng(0)
    for _ in range(200):
        freqs = rng.dirichlet(np.ones(4)) * rng.uniform(0.995, 1.005)
        spec = ModelSpec(
            "GTR", tuple(rng.uniform(0.1, 5, 6)), tuple(freqs), 4, rng.uniform(0.05, 5), True, 0.3
        )
        assert parse_model(str(spec)) == spec
        assert parse_model(str(parse_model(str(spec)))) == spec


def test_free_parameters_and_with_values():
    spec = parse_model("GTR+FO+I+G4")
    assert spec.free_parameters == ("exchangeabilities", "freqs", "alpha", "pinv")
    filled = spec.with_values(
        exchangeabilities=(1, 2, 3, 4, 5), freqs=(0.1, 0.2, 0.3, 0.4), alpha=0.7, pinv=0.1
    )
    assert filled.free_parameters == ()
    assert filled == parse_model("GTR{1,2,3,4,5}+F{0.1,0.2,0.3,0.4}+I{0.1}+G4{0.7}")
    assert parse_model("GTR+F+G4").free_parameters == ("exchangeabilities", "alpha")
    assert parse_model("F81+I").free_parameters == ("pinv",)
    assert parse_model("HKY").with_values(kappa=3.0) == parse_model("HKY{3}")
    assert parse_model("HKY{3}").with_values(exchangeabilities=(2, 8, 2, 2, 8, 2)) == parse_model("HKY{4}")
    assert filled.with_values(alpha=2.0).alpha == 2.0 and filled.alpha == 0.7  # copies, never mutates


@pytest.mark.parametrize(
    "text, values, message",
    [
        ("HKY", {"exchangeabilities": (1, 2, 3, 4, 5)}, "must be \\(1, kappa, 1, 1, kappa, 1\\)"),
        ("JC", {"kappa": 2.0}, "kappa applies to K80 and HKY only"),
        ("JC", {"alpha": 0.5}, "no \\+G component"),
        ("JC", {"pinv": 0.5}, "no \\+I component"),
        ("JC", {"freqs": (0.1, 0.2, 0.3, 0.4)}, "JC has equal base frequencies"),
        ("GTR", {"freqs": "uniform"}, "freqs must be one of"),
        ("GTR", {"exchangeabilities": (1, 2, 3)}, "expected 5 or 6 exchangeabilities"),
        ("GTR+G4", {"alpha": "big"}, "alpha must be a number"),
        ("GTR+I", {"pinv": float("inf")}, "pinv must be finite"),
        ("GTR", {"gamma": 4}, "unknown parameter"),
    ],
)
def test_with_values_validates(text, values, message):
    with pytest.raises(ModelError, match=message):
        parse_model(text).with_values(**values)


def test_direct_construction_validates():
    with pytest.raises(ModelError, match="unknown model kind 'K2P'"):
        ModelSpec("K2P", None, "equal")
    with pytest.raises(ModelError, match="gamma_categories must be an integer >= 0"):
        ModelSpec("JC", None, "equal", gamma_categories=-1)
    assert ModelSpec("JC", None, "equal").exchangeabilities == ONES


# --- numerics --------------------------------------------------------------------------------

MODELS = [
    ("JC", None),
    ("K80{3}+G4{0.5}", None),
    ("F81+I{0.3}", np.array([0.1, 0.2, 0.3, 0.4])),
    ("HKY{2.5}+F{0.35,0.15,0.2,0.3}+G8{1.3}", None),
    (GTR_DS1 + "+I{0.2}+G4{0.5}", None),
    ("GTR{0.02,40,0.3,1,25}+F{0.01,0.45,0.04,0.5}+G4{0.05}", None),
]


@pytest.fixture(params=MODELS, ids=[m[0] for m in MODELS])
def model(request) -> SubstitutionModel:
    text, empirical = request.param
    return build_model(parse_model(text), empirical_freqs=empirical)


def test_rate_matrix_is_a_normalised_reversible_generator(model):
    pi, Q = model.freqs, model.Q
    assert pi.sum() == pytest.approx(1.0, abs=1e-15)
    np.testing.assert_allclose(Q.sum(axis=1), 0.0, atol=1e-14)
    assert -(pi @ np.diag(Q)) == pytest.approx(1.0, rel=1e-14)
    flux = pi[:, None] * Q
    np.testing.assert_allclose(flux, flux.T, atol=1e-15)
    assert np.all(Q - np.diag(np.diag(Q)) >= 0)


def test_eigen_decomposition_reconstructs_q(model):
    assert model.eigvals[0] == 0.0
    assert np.all(model.eigvals[1:] < 0)
    np.testing.assert_allclose(model.U @ np.diag(model.eigvals) @ model.U_inv, model.Q, atol=1e-13)
    np.testing.assert_allclose(model.U @ model.U_inv, np.eye(4), atol=1e-13)
    np.testing.assert_array_equal(model.U[:, 0], 1.0)
    np.testing.assert_array_equal(model.U_inv[0], model.freqs)
    with pytest.raises(ValueError):
        model.Q[0, 0] = 1.0  # arrays are read-only


def test_transition_matrices(model):
    C = len(model.rates)
    np.testing.assert_array_equal(model.p_matrix(0.0), np.broadcast_to(np.eye(4), (C, 4, 4)))
    for t, s in [(0.01, 0.2), (0.3, 1.7), (1e-6, 5.0)]:
        Pt, Ps, Pts = model.p_matrix(t), model.p_matrix(s), model.p_matrix(t + s)
        assert Pt.shape == (C, 4, 4)
        assert np.all(Pt >= 0)
        np.testing.assert_allclose(Pt.sum(axis=-1), 1.0, atol=1e-13)
        np.testing.assert_allclose(Pt @ Ps, Pts, atol=1e-13)
        np.testing.assert_allclose(model.freqs @ Pt, np.broadcast_to(model.freqs, (C, 4)), atol=1e-13)
    t_long = 40.0 / (model.rates.min() * -model.eigvals[1:].max())  # the slowest mode has decayed by e^-40
    np.testing.assert_allclose(model.p_matrix(t_long), np.broadcast_to(model.freqs, (C, 4, 4)), atol=1e-13)
    batch = model.p_matrix(np.array([0.1, 0.5]))
    assert batch.shape == (2, C, 4, 4)
    np.testing.assert_allclose(batch[1], model.p_matrix(0.5), atol=1e-15)


def test_short_branches_keep_relative_accuracy(model):
    """Off-diagonal P(t) ~ rate * Q t for tiny t: computed through expm1, not as 1 - (1 - x)."""
    off = ~np.eye(4, dtype=bool)
    for t in (1e-12, 1e-8):
        Qt = model.rates[:, None, None] * model.Q[None] * t
        taylor = Qt + Qt @ Qt / 2
        np.testing.assert_allclose(model.p_matrix(t)[:, off], taylor[:, off], rtol=1e-12)


def test_category_rates_and_weights(model):
    spec = model.spec
    np.testing.assert_allclose(model.weights.sum(), 1.0 - model.pinv, rtol=1e-14)
    assert model.weights @ model.rates == pytest.approx(1.0, rel=1e-12)  # mean rate over all sites
    assert len(model.rates) == max(1, spec.gamma_categories)
    assert model.pinv == (spec.pinv or 0.0)


def test_derivatives_match_finite_differences(model):
    for t in (0.001, 0.05, 0.8):
        P, dP, d2P = model.p_matrix_derivs(t)
        np.testing.assert_allclose(P, model.p_matrix(t), atol=1e-15)
        h = 1e-5
        Pp, dPp, _ = model.p_matrix_derivs(t + h)
        Pm, dPm, _ = model.p_matrix_derivs(t - h)
        np.testing.assert_allclose(dP, (Pp - Pm) / (2 * h), atol=1e-7 * np.abs(dP).max())
        np.testing.assert_allclose(d2P, (dPp - dPm) / (2 * h), atol=1e-7 * np.abs(d2P).max())
        np.testing.assert_allclose(d2P, (Pp - 2 * P + Pm) / h**2, atol=1e-3 * np.abs(d2P).max())


def test_jc_closed_form():
    jc = build_model(parse_model("JC"))
    np.testing.assert_array_equal(jc.eigvals[0], 0.0)
    np.testing.assert_allclose(np.sort(jc.eigvals[1:]), [-4 / 3] * 3, rtol=1e-14)
    for t in (0.0, 0.01, 0.3, 2.0):
        same = 0.25 + 0.75 * np.exp(-4 * t / 3)
        expected = np.full((4, 4), (1 - same) / 3)
        np.fill_diagonal(expected, same)
        np.testing.assert_allclose(jc.p_matrix(t)[0], expected, atol=1e-15)
        _, dP, d2P = jc.p_matrix_derivs(t)
        assert dP[0, 0, 0] == pytest.approx(-np.exp(-4 * t / 3), rel=1e-13)
        assert d2P[0, 1, 2] == pytest.approx(-(4 / 9) * np.exp(-4 * t / 3), rel=1e-13)


def test_k80_closed_form():
    """Kimura (1980): P(transition) = 1/4 + 1/4 e^{-4bt'} - 1/2 e^{-2(a+b)t'} with the Q scale applied."""
    kappa, t = 3.0, 0.4
    k80 = build_model(parse_model(f"K80{{{kappa}}}"))
    beta = 1.0 / (kappa + 2.0)  # transversion rate per target so that total rate = 1
    alpha = kappa * beta
    transition = 0.25 + 0.25 * np.exp(-4 * beta * t) - 0.5 * np.exp(-2 * (alpha + beta) * t)
    transversion = 0.25 - 0.25 * np.exp(-4 * beta * t)
    P = k80.p_matrix(t)[0]
    assert P[0, 2] == pytest.approx(transition, rel=1e-13)  # A->G
    assert P[1, 3] == pytest.approx(transition, rel=1e-13)  # C->T
    assert P[0, 1] == pytest.approx(transversion, rel=1e-13)  # A->C


def test_gamma_rates_match_yang_1994():
    np.testing.assert_allclose(gamma_rates(0.5, 4), [0.0334, 0.2519, 0.8203, 2.8944], atol=5e-5)
    for alpha, k in [(0.05, 4), (0.5, 8), (2.0, 6), (200.0, 4), (0.02, 16)]:
        rates = gamma_rates(alpha, k)
        assert rates.mean() == pytest.approx(1.0, rel=1e-14)
        assert np.all(np.diff(rates) > 0)
    np.testing.assert_array_equal(gamma_rates(0.7, 1), [1.0])
    with pytest.raises(ModelError, match="alpha must be a finite number > 0"):
        gamma_rates(0.0, 4)
    with pytest.raises(ModelError, match="integer >= 1"):
        gamma_rates(0.5, 0)


def test_gamma_rates_are_those_of_scipy_stats_quantiles_bit_for_bit():
    """The cut points come from ``scipy.special.gammaincinv`` (``scipy.stats`` costs every process 0.8 s to
    import); the rates are those the quantiles of ``scipy.stats.gamma`` give, to the last bit, over shapes
    0.01–200."""
    from scipy import special, stats

    def reference(alpha, k):
        cuts = stats.gamma.ppf(np.arange(1, k) / k, alpha, scale=1.0 / alpha)
        rates = k * np.diff(np.concatenate(([0.0], special.gammainc(alpha + 1.0, alpha * cuts), [1.0])))
        return rates / rates.mean()

    for alpha in np.exp(np.random.default_rng(0).uniform(np.log(0.01), np.log(200.0), 300)):
        for k in (2, 4, 8):
            np.testing.assert_array_equal(
                gamma_rates(alpha, k).view(np.int64), reference(alpha, k).view(np.int64)
            )


def test_build_model_errors():
    with pytest.raises(ModelError, match="free parameter\\(s\\) exchangeabilities, alpha"):
        build_model(parse_model("GTR+F+G4"))
    with pytest.raises(ModelError, match="free parameter\\(s\\) freqs"):
        build_model(parse_model("HKY{2}+FO"))
    with pytest.raises(ModelError, match="pass empirical_freqs"):
        build_model(parse_model("HKY{2}"))
    with pytest.raises(ModelError, match="4 finite numbers > 0"):
        build_model(parse_model("HKY{2}"), empirical_freqs=np.array([0.5, 0.5, 0.0, 0.0]))
    with pytest.raises(ModelError, match="needs a ModelSpec"):
        build_model("JC")
    counts = build_model(parse_model("F81"), empirical_freqs=np.array([10.0, 20.0, 30.0, 40.0]))
    np.testing.assert_allclose(counts.freqs, [0.1, 0.2, 0.3, 0.4], rtol=1e-15)
    ignored = build_model(parse_model("HKY{2}+FQ"), empirical_freqs=np.array([0.1, 0.2, 0.3, 0.4]))
    np.testing.assert_array_equal(ignored.freqs, 0.25)


def test_negative_branch_length_is_rejected():
    jc = build_model(parse_model("JC"))
    with pytest.raises(ValueError, match="branch lengths must be finite and >= 0"):
        jc.p_matrix(-0.1)


# --- IQ-TREE 2 as the oracle -----------------------------------------------------------------
