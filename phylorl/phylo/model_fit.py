"""Maximum-likelihood estimation of free substitution-model parameters on a fixed topology.

Free parameters (those a model string leaves without numbers) are optimised with L-BFGS-B on
unconstrained transforms (log rates, log alpha, log-ratio frequencies, bounded pinv), alternating
with full branch-length optimisation until a round gains less than ``tol`` log-likelihood units.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from .models import ModelSpec, build_model
from .tree import Tree

ALPHA_BOUNDS = (0.02, 100.0)  # IQ-TREE's range for the gamma shape
RATE_BOUNDS = (1e-3, 100.0)
PINV_MAX = 0.99
_LBFGS_OPTIONS = {"eps": 1e-5, "ftol": 1e-10, "maxiter": 200}


def _unpack(spec: ModelSpec, x: np.ndarray, const_fraction: float) -> dict:
    values = {}
    i = 0
    free = spec.free_parameters
    if "exchangeabilities" in free:
        if spec.kind == "GTR":
            r = np.exp(x[i : i + 5])
            values["exchangeabilities"] = (*r.tolist(), 1.0)
            i += 5
        else:  # HKY / K80: one transition/transversion ratio
            k = float(np.exp(x[i]))
            values["exchangeabilities"] = (1.0, k, 1.0, 1.0, k, 1.0)
            i += 1
    if "freqs" in free:
        z = np.concatenate([x[i : i + 3], [0.0]])
        f = np.exp(z - z.max())
        values["freqs"] = tuple((f / f.sum()).tolist())
        i += 3
    if "alpha" in free:
        values["alpha"] = float(np.exp(x[i]))
        i += 1
    if "pinv" in free:
        values["pinv"] = float(x[i]) * min(PINV_MAX, const_fraction)
        i += 1
    return values


def _start_and_bounds(spec: ModelSpec):
    x, bounds = [], []
    lo, hi = np.log(RATE_BOUNDS[0]), np.log(RATE_BOUNDS[1])
    free = spec.free_parameters
    if "exchangeabilities" in free:
        n = 5 if spec.kind == "GTR" else 1
        x += [np.log(2.0) if spec.kind != "GTR" else 0.0] * n
        bounds += [(lo, hi)] * n
    if "freqs" in free:
        x += [0.0] * 3
        bounds += [(-5.0, 5.0)] * 3
    if "alpha" in free:
        x.append(np.log(0.5))
        bounds.append((np.log(ALPHA_BOUNDS[0]), np.log(ALPHA_BOUNDS[1])))
    if "pinv" in free:
        x.append(0.2)
        bounds.append((0.0, 1.0))
    return np.array(x, dtype=np.float64), bounds


def fit_model(engine, tree: Tree, spec: ModelSpec, *, max_rounds: int = 6, tol: float = 0.01, on_round=None):
    """Estimate ``spec``'s free parameters on ``tree`` (its topology; lengths optimised on a copy). Returns
    ``(model, loglik)``: the fitted :class:`SubstitutionModel` and the log-likelihood of the copy with
    optimised branch lengths. ``engine`` is a :class:`LikelihoodEngine` for the alignment; its model is
    replaced while fitting. ``on_round(k, loglik)`` is called after the starting branch lengths (``k`` = 0)
    and after each round of parameters and branch lengths."""
    emp = engine.alignment.empirical_frequencies() if spec.freqs == "empirical" else None
    const_fraction = float(
        engine.pattern_weights[engine.constant_patterns()].sum() / engine.pattern_weights.sum()
    )
    work = tree.copy()
    x0, bounds = _start_and_bounds(spec)

    def model_at(x):
        return build_model(spec.with_values(**_unpack(spec, x, const_fraction)), emp)

    engine.set_model(model_at(x0))
    if x0.size == 0:
        return engine.model, engine.optimize_branch_lengths(work)
    best = engine.optimize_branch_lengths(work, rounds=3)
    report = on_round or (lambda k, loglik: None)
    report(0, best)

    def negative_loglik(x):
        engine.set_model(model_at(x))
        return -engine.loglik(work)

    for k in range(1, max_rounds + 1):
        x0 = minimize(negative_loglik, x0, method="L-BFGS-B", bounds=bounds, options=_LBFGS_OPTIONS).x
        engine.set_model(model_at(x0))
        current = engine.optimize_branch_lengths(work)
        report(k, current)
        if current - best < tol:
            best = max(best, current)
            break
        best = current
    return engine.model, best
