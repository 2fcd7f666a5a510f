"""Numba kernels for Newton–Raphson optimisation of one branch length.

For edge ``e`` joining ``u`` and ``v`` with partials ``A`` (at ``u``) and ``B`` (at ``v``), the
variable-site likelihood of pattern ``p`` as a function of the branch length ``t`` is

.. math::
    L_p(t) = \\sum_c \\sum_k \\mathrm{coef}_{c,k,p} \\, e^{\\lambda_k r_c t},\\qquad
    \\mathrm{coef}_{c,k,p} = w_c \\Big(\\sum_i \\pi_i A_{c,i,p} U_{ik}\\Big)
                             \\Big(\\sum_j U^{-1}_{kj} B_{c,j,p}\\Big)

so one Newton iteration costs ``O(C * 4 * P)`` with exact first and second derivatives.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import kernels as kn
from .kernels import FASTMATH, LOG_SCALE, total_loglik, weighted_log_sum


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def branch_coefficients(e, tree, b, model, mask_vectors):
    """Fill ``coef[C, 4, P]`` and ``inv_scaled[P]`` for edge ``e`` (both partials must be valid).

    ``coef[:, 0, :]`` (the ``k = 0`` term, eigenvalue 0) is summed over categories into
    ``coef[0, 0, :]`` together with the invariant-sites term, since it does not depend on ``t``.
    A tip's side is a lookup by ambiguity code (its products with ``pi U`` and ``U^-1`` tabulated once).
    """
    neighbors, _, edges, n_leaves, tip_codes = tree
    clv, scale, coef, inv_scaled = b.clv, b.scale, b.coef, b.inv_scaled
    freqs, weights, _, U, U_inv, _, inv_lik, pinv = model
    u = edges[e, 0]
    v = edges[e, 1]
    C = coef.shape[0]
    P = coef.shape[2]
    fa = np.empty((4, 4))
    for i in range(4):
        for k in range(4):
            fa[i, k] = freqs[i] * U[i, k]
    tip_a = np.zeros((16, 4))  # tip_a[code, k] = sum_i fa[i, k] mask[code, i]; tip_b with U_inv[k, j]
    tip_b = np.zeros((16, 4))
    for code in range(16):
        for k in range(4):
            for i in range(4):
                tip_a[code, k] += fa[i, k] * mask_vectors[code, i]
                tip_b[code, k] += U_inv[k, i] * mask_vectors[code, i]
    ru = kn.clv_index(2 * e + 1, neighbors, edges, n_leaves) if u >= n_leaves else 0
    rv = kn.clv_index(2 * e, neighbors, edges, n_leaves) if v >= n_leaves else 0
    sc = np.zeros(P)
    if u >= n_leaves:
        for p in range(P):
            sc[p] += scale[ru, p]
    if v >= n_leaves:
        for p in range(P):
            sc[p] += scale[rv, p]
    for p in range(P):
        inv_scaled[p] = 0.0
    if pinv > 0.0:
        for p in range(P):
            if inv_lik[p] > 0.0:
                x = sc[p] * LOG_SCALE
                inv_scaled[p] = pinv * inv_lik[p] * np.exp(x) if x < 600.0 else 1e260
    for c in range(C):
        A = clv[ru, c]
        B = clv[rv, c]
        wc = weights[c]
        for k in range(4):
            a0, a1, a2, a3 = fa[0, k], fa[1, k], fa[2, k], fa[3, k]
            b0, b1, b2, b3 = U_inv[k, 0], U_inv[k, 1], U_inv[k, 2], U_inv[k, 3]
            out = coef[c, k]
            if u < n_leaves:
                codes = tip_codes[u]
                for p in range(P):
                    out[p] = (
                        wc * tip_a[codes[p], k] * (b0 * B[0, p] + b1 * B[1, p] + b2 * B[2, p] + b3 * B[3, p])
                    )
            elif v < n_leaves:
                codes = tip_codes[v]
                for p in range(P):
                    out[p] = (
                        wc * (a0 * A[0, p] + a1 * A[1, p] + a2 * A[2, p] + a3 * A[3, p]) * tip_b[codes[p], k]
                    )
            else:
                for p in range(P):
                    out[p] = (
                        wc
                        * (a0 * A[0, p] + a1 * A[1, p] + a2 * A[2, p] + a3 * A[3, p])
                        * (b0 * B[0, p] + b1 * B[1, p] + b2 * B[2, p] + b3 * B[3, p])
                    )
    # fold the t-independent terms into coef[0, 0]
    for c in range(1, C):
        for p in range(P):
            coef[0, 0, p] += coef[c, 0, p]
    for p in range(P):
        coef[0, 0, p] += inv_scaled[p]


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def _evaluate(t, coef, eigvals, rates, pattern_weights, want_f):
    C = coef.shape[0]
    P = coef.shape[2]
    L = coef[0, 0].copy()
    L1 = np.zeros(P)
    L2 = np.zeros(P)
    for c in range(C):
        for k in range(1, 4):
            lr = eigvals[k] * rates[c]
            ex = np.exp(lr * t)
            g1 = ex * lr
            g2 = g1 * lr
            src = coef[c, k]
            for p in range(P):
                L[p] += src[p] * ex
                L1[p] += src[p] * g1
                L2[p] += src[p] * g2
    f = 0.0
    d1 = 0.0
    d2 = 0.0
    for p in range(P):
        x = L[p] if L[p] > 1e-300 else 1e-300
        L[p] = x
        w = pattern_weights[p]
        g = L1[p] / x
        d1 += w * g
        d2 += w * (L2[p] / x - g * g)
    if want_f:
        f = weighted_log_sum(L, pattern_weights)
    return f, d1, d2


@njit(cache=True, nogil=True)
def newton_branch(coef, model, pattern_weights, t0, newton):
    """Maximise the edge log-likelihood over ``t`` in ``[t_min, t_max]`` (``newton``: ``(max_iter, tol, t_min,
    t_max)``; ``model``: :class:`~phylorl.phylo.likelihood.ModelArrays`).

    Safeguarded Newton–Raphson on the first derivative (as ``rtsafe``): a bracket ``[lo, hi]``
    around the maximum shrinks with every evaluation, and a step that leaves it, or a point where
    the curvature is not negative, falls back to a geometric bisection of the bracket. The result is
    never worse than ``t0``. Returns ``(t, f, iterations)``; ``f`` is the edge log-likelihood up to
    a constant (the scaling offsets).
    """
    max_iter, tol, t_min, t_max = newton
    eigvals, rates = model.eigvals, model.rates
    t_start = min(max(t0, t_min), t_max)
    f_start, d1, d2 = _evaluate(t_start, coef, eigvals, rates, pattern_weights, True)
    t = t_start
    lo = t_min
    hi = t_max
    it = 0
    while it < max_iter:
        it += 1
        if d1 > 0.0:
            lo = t
        else:
            hi = t
        if (t == t_max and d1 > 0.0) or (t == t_min and d1 <= 0.0):
            break
        if d2 < 0.0:
            t_new = t - d1 / d2
        elif d1 > 0.0:
            t_new = 2.0 * t + 1e-4
        else:
            t_new = 0.5 * t
        if not (lo < t_new < hi):
            t_new = np.sqrt(lo * hi) if lo > 0.0 else 0.5 * (lo + hi)
        t_new = min(max(t_new, t_min), t_max)
        moved = abs(t_new - t)
        t = t_new
        _, d1, d2 = _evaluate(t, coef, eigvals, rates, pattern_weights, False)
        if moved <= tol * max(t, 1e-4):
            break
    f, _, _ = _evaluate(t, coef, eigvals, rates, pattern_weights, True)
    if f < f_start:
        return t_start, f_start, it
    return t, f, it


@njit(cache=True, nogil=True)
def optimize_edges(order, rounds, tol, newton, tree, lengths, snap_lengths, pattern_weights, b, model):
    """Passes of per-branch Newton over ``order`` until a pass gains less than ``tol``; every pass walks
    ``order`` from its first edge (passes in alternating directions converge in up to twice the passes).

    ``newton``: as :func:`newton_branch`; ``tree``, ``b`` and ``model``: the kernels' bundles
    (:mod:`~phylorl.phylo.kernels`). Updates ``lengths`` (and the snapshot) in place and keeps partials
    consistent. Returns ``(loglik, partials recomputed, branches optimised, last edge)``.
    """
    mask_vectors = kn.MASK_VECTORS
    one = np.empty(1, dtype=np.int64)
    n_updates = 0
    n_branches = 0
    last = order[order.shape[0] - 1]  # where every pass ends
    n_updates += _ensure_edge(order[0], tree, b)
    kn.edge_site_likelihoods(order[0], tree, b, model)
    previous = total_loglik(b.site, b.site_scale, pattern_weights, model.inv_lik, model.pinv)
    current = previous
    for _pass in range(rounds):
        for e in order:
            n_updates += _ensure_edge(e, tree, b)
            branch_coefficients(e, tree, b, model, mask_vectors)
            t, _, _ = newton_branch(b.coef, model, pattern_weights, lengths[e], newton)
            n_branches += 1
            if t != lengths[e]:
                lengths[e] = t
                snap_lengths[e] = t
                one[0] = e
                kn.compute_pmats(one, lengths, model, b, mask_vectors)
                kn.invalidate_toward(e, tree[0], tree[1], tree[2], b.valid, False, b.stack, False)
        n_updates += _ensure_edge(last, tree, b)
        kn.edge_site_likelihoods(last, tree, b, model)
        current = total_loglik(b.site, b.site_scale, pattern_weights, model.inv_lik, model.pinv)
        if current - previous < tol:
            break
        previous = current
    return current, n_updates, n_branches, last


@njit(cache=True, nogil=True)
def _ensure_edge(e, tree, b):
    return kn.ensure_valid(2 * e, tree, b) + kn.ensure_valid(2 * e + 1, tree, b)
