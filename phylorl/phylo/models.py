"""Numerical nucleotide substitution models: rate matrix, eigen-decomposition, site-rate categories.

Build a :class:`SubstitutionModel` from a fully specified :class:`ModelSpec` (parsed from an IQ-TREE
string, see :mod:`phylorl.phylo.model_spec`) and ask it for transition matrices::

    spec = parse_model("GTR{0.65,1.03,0.62,1.84,3.33}+F+I{0.2}+G4{0.5}")
    model = build_model(spec, empirical_freqs=pi_from_alignment)
    P = model.p_matrix(0.1)                   # [C, 4, 4], one matrix per variable-site category

Conventions (as IQ-TREE 2): states in order A, C, G, T; ``Q`` is scaled to one expected substitution
per unit time at stationarity; the gamma categories have equal probability and mean rate 1; with +I
the category rates are divided by ``1 - pinv`` so the mean rate over *all* sites stays 1, and each
category has probability ``(1 - pinv) / C``. The invariable class (rate 0, probability ``pinv``) is not
one of the ``C`` categories: the likelihood adds ``pinv * pi[x]`` for sites constant in state ``x``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from phylorl.phylo.model_spec import ModelError, ModelSpec
from phylorl.phylo.model_spec import parse_model as parse_model  # re-exported: models are parsed from here

_PAIR_INDEX = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))  # AC, AG, AT, CG, CT, GT


@dataclass(frozen=True, eq=False)
class SubstitutionModel:
    """Everything numeric a likelihood engine needs; all arrays float64 and read-only.
    ``Q = U @ diag(eigvals) @ U_inv`` with ``eigvals[0] == 0.0`` exactly, ``U[:, 0] == 1`` and
    ``U_inv[0] == freqs`` (the stationary eigenvector); the other eigenvalues are negative, ascending."""

    spec: ModelSpec
    freqs: np.ndarray  # [4] stationary base frequencies (A, C, G, T), summing to 1
    Q: np.ndarray  # [4, 4] rate matrix, rows sum to 0, -sum_i freqs[i] * Q[i, i] == 1
    eigvals: np.ndarray  # [4] eigenvalues of Q (per unit time)
    U: np.ndarray  # [4, 4] right eigenvectors (columns)
    U_inv: np.ndarray  # [4, 4] inverse of U (left eigenvectors as rows)
    rates: np.ndarray  # [C] rate multiplier of each variable-site category, C = max(1, gamma_categories)
    weights: np.ndarray  # [C] probability of each category; weights.sum() == 1 - pinv
    pinv: float  # proportion of invariable sites; 0.0 without +I

    def p_matrix(self, t) -> np.ndarray:
        """Transition probabilities ``P[c, i, j] = P(j at the end | i at the start)`` over a branch. ``t``:
        branch length (expected substitutions per site, >= 0), a float giving ``[C, 4, 4]``, or an array of
        shape ``S`` giving ``S + [C, 4, 4]``. Computed as ``I + U diag(expm1(rate_c * eigvals * t)) U_inv`` so
        that off-diagonal entries of short branches keep their relative accuracy; entries are not clipped
        (rounding may leave values of order -1e-17 where the exact value is ~0)."""
        return self._spectral(t, 0)

    def p_matrix_derivs(self, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(P, dP/dt, d2P/dt2)`` at branch length ``t``, each shaped as :meth:`p_matrix`'s result."""
        return self._spectral(t, 0), self._spectral(t, 1), self._spectral(t, 2)

    def _spectral(self, t, order: int) -> np.ndarray:
        """``d^order/dt^order`` of ``U diag(exp(lam * t)) U_inv``, ``lam = rate_c * eigvals`` per category."""
        t = np.asarray(t, dtype=np.float64)
        if not np.all(np.isfinite(t)) or np.any(t < 0):
            raise ValueError(f"branch lengths must be finite and >= 0, got {t!r}")
        lam = self.rates[:, None] * self.eigvals[None, :]  # [C, 4]
        exponent = t[..., None, None] * lam  # S + [C, 4]
        if order == 0:
            return np.eye(4) + (self.U * np.expm1(exponent)[..., None, :]) @ self.U_inv
        return (self.U * (np.exp(exponent) * lam**order)[..., None, :]) @ self.U_inv


def gamma_rates(alpha: float, k: int) -> np.ndarray:
    """Mean rates of ``k`` equal-probability categories of a Gamma(alpha, rate=alpha) distribution. Yang
    (1994) "mean" discretisation, IQ-TREE's default: the cut points are the ``i/k`` quantiles, the rate of a
    category is k times the integral of ``x f(x)`` over it, computed with the regularised incomplete gamma
    function ``P(alpha + 1, alpha x)``. Returns float64 ``[k]``, ascending, rescaled so the mean is 1 to
    rounding (as IQ-TREE does)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ModelError(f"number of gamma categories must be an integer >= 1, got {k!r}")
    if not (np.isfinite(alpha) and alpha > 0):
        raise ModelError(f"gamma shape alpha must be a finite number > 0, got {alpha!r}")
    if k == 1:
        return np.ones(1)
    # the quantiles of Gamma(alpha, scale 1 / alpha), as scipy.stats.gamma.ppf computes them (bit for bit);
    # scipy.stats itself is not imported: it costs every phylorl process about 0.8 s of start-up
    cuts = special.gammaincinv(alpha, np.arange(1, k) / k) * (1.0 / alpha)
    cdf_of_mean = special.gammainc(alpha + 1.0, alpha * cuts)
    rates = k * np.diff(np.concatenate(([0.0], cdf_of_mean, [1.0])))
    return rates / rates.mean()


def build_model(spec: ModelSpec, empirical_freqs: np.ndarray | None = None) -> SubstitutionModel:
    """Numeric model for a fully specified ``spec``. ``empirical_freqs``: [4] base frequencies (or counts;
    normalised here) of the alignment, required when ``spec.freqs == "empirical"`` and ignored otherwise.
    Raises :class:`ModelError` when a parameter is still free (naming it) or when empirical frequencies are
    needed but missing/invalid."""
    if not isinstance(spec, ModelSpec):
        raise ModelError(f"build_model needs a ModelSpec (see parse_model), got {type(spec).__name__}")
    if spec.free_parameters:
        raise ModelError(
            f"model {str(spec)!r} has free parameter(s) {', '.join(spec.free_parameters)}: "
            "fill them with spec.with_values(...) before build_model"
        )
    freqs = _resolve_freqs(spec, empirical_freqs)
    Q = _rate_matrix(spec.exchangeabilities, freqs)
    eigvals, U, U_inv = _eigen_reversible(Q, freqs)
    pinv = spec.pinv if spec.invariant else 0.0
    base_rates = gamma_rates(spec.alpha, spec.gamma_categories) if spec.gamma_categories else np.ones(1)
    rates = base_rates / (1.0 - pinv)
    weights = np.full(len(rates), (1.0 - pinv) / len(rates))
    arrays = [freqs, Q, eigvals, U, U_inv, rates, weights]
    for a in arrays:
        a.setflags(write=False)
    return SubstitutionModel(spec, *arrays, float(pinv))


def _resolve_freqs(spec: ModelSpec, empirical_freqs) -> np.ndarray:
    if isinstance(spec.freqs, tuple):
        return np.array(spec.freqs, dtype=np.float64)
    if spec.freqs == "equal":
        return np.full(4, 0.25)
    # "empirical" ("estimate" was rejected as a free parameter)
    if empirical_freqs is None:
        raise ModelError(f"model {str(spec)!r} uses empirical frequencies (+F): pass empirical_freqs")
    freqs = np.asarray(empirical_freqs, dtype=np.float64)
    if freqs.shape != (4,) or not np.all(np.isfinite(freqs)) or np.any(freqs <= 0):
        raise ModelError(
            f"empirical_freqs must be 4 finite numbers > 0 (A, C, G, T), got {empirical_freqs!r}"
        )
    return freqs / freqs.sum()


def _rate_matrix(exchangeabilities: tuple[float, ...], freqs: np.ndarray) -> np.ndarray:
    """Reversible ``Q[i, j] = R[i, j] * freqs[j]``, scaled to one substitution per unit time."""
    R = np.zeros((4, 4))
    for (i, j), r in zip(_PAIR_INDEX, exchangeabilities):
        R[i, j] = R[j, i] = r
    Q = R * freqs[None, :]
    np.fill_diagonal(Q, -Q.sum(axis=1))
    return Q / -(freqs @ np.diag(Q))


def _eigen_reversible(Q: np.ndarray, freqs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eigen-decomposition through the symmetric ``B = D^1/2 Q D^-1/2`` (``D = diag(freqs)``):
    ``B = V diag(w) V^T`` with orthonormal ``V`` gives ``U = D^-1/2 V`` and ``U_inv = V^T D^1/2``. The
    eigenvalue nearest 0 is set to exactly 0 with its eigenvector ``sqrt(freqs)``, and moved first."""
    sqrt_pi = np.sqrt(freqs)
    B = sqrt_pi[:, None] * Q / sqrt_pi[None, :]
    w, V = np.linalg.eigh((B + B.T) / 2)
    zero = int(np.argmax(w))  # all others are negative for an irreducible Q
    order = [zero] + [i for i in range(4) if i != zero]
    w, V = w[order], V[:, order]
    w[0] = 0.0
    V[:, 0] = sqrt_pi
    U = V / sqrt_pi[:, None]
    U_inv = V.T * sqrt_pi[None, :]
    U_inv[0] = freqs
    return w, U, U_inv
