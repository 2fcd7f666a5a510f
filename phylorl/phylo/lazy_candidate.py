"""One regraft candidate of a lazy SPR score (:mod:`phylorl.phylo.lazy_spr`): the partials on both sides of
the regraft point, products with the transition matrices, and the candidate's log-likelihood with none, one or
three of the branches at ``p`` optimised by a Newton pass."""

from __future__ import annotations

import numpy as np
from numba import njit

from . import kernels as kn
from .branch_kernels import newton_branch
from .kernels import FASTMATH, LOG_SCALE
from .log_sum import total_loglik


@njit(cache=True, nogil=True)
def times_p(out, pm, ptip, node, n_leaves, tip_codes, src, first):
    """``out[c, i, p] (*)= sum_j pm[c, i, j] * L[c, j, p]`` for ``L`` the partial ``src`` of ``node`` (a tip:
    its codes; ``node >= n_leaves``: ``src``), ``=`` when ``first``: the engine's child term for one
    matrix."""
    C = out.shape[0]
    kn._child_term(
        out, node, 0, n_leaves, tip_codes, pm.reshape((1, C, 4, 4)), ptip.reshape((1, C, 4, 16)), src, first
    )


@njit(cache=True, nogil=True)
def optimise_branch(A, sA, B, sB, t0, model, pattern_weights, t_min, t_max, max_iter, newton_tol, coef):
    """Newton on the length of a branch between partials ``A`` and ``B`` (scales ``sA``, ``sB``), from ``t0``:
    returns ``(length, log-likelihood)``."""
    freqs, weights, U, U_inv, inv_lik, pinv = (
        model.freqs,
        model.weights,
        model.U,
        model.U_inv,
        model.inv_lik,
        model.pinv,
    )
    C = A.shape[0]
    P = A.shape[2]
    offset = 0.0
    for p in range(P):
        sc = sA[p] + sB[p]
        offset += pattern_weights[p] * sc * LOG_SCALE
        inv = 0.0
        if pinv > 0.0 and inv_lik[p] > 0.0:
            x = sc * LOG_SCALE
            inv = pinv * inv_lik[p] * np.exp(x) if x < 600.0 else 1e260
        coef[0, 0, p] = inv
    for c in range(C):
        wc = weights[c]
        for k in range(4):
            a0, a1, a2, a3 = freqs[0] * U[0, k], freqs[1] * U[1, k], freqs[2] * U[2, k], freqs[3] * U[3, k]
            b0, b1, b2, b3 = U_inv[k, 0], U_inv[k, 1], U_inv[k, 2], U_inv[k, 3]
            Ac, Bc = A[c], B[c]
            if k == 0:  # eigenvalue 0: independent of t, summed over categories into coef[0, 0]
                out = coef[0, 0]
                for p in range(P):
                    out[p] += (
                        wc
                        * (a0 * Ac[0, p] + a1 * Ac[1, p] + a2 * Ac[2, p] + a3 * Ac[3, p])
                        * (b0 * Bc[0, p] + b1 * Bc[1, p] + b2 * Bc[2, p] + b3 * Bc[3, p])
                    )
            else:
                out = coef[c, k]
                for p in range(P):
                    out[p] = (
                        wc
                        * (a0 * Ac[0, p] + a1 * Ac[1, p] + a2 * Ac[2, p] + a3 * Ac[3, p])
                        * (b0 * Bc[0, p] + b1 * Bc[1, p] + b2 * Bc[2, p] + b3 * Bc[3, p])
                    )
    t, f, _ = newton_branch(
        coef, model.eigvals, model.rates, pattern_weights, t0, t_min, t_max, max_iter, newton_tol
    )
    return t, f - offset


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def fixed_site(F, y, row_y, n_leaves, tip_codes, clv, pm, ptip, SP, weights, freqs, site):
    """Site likelihoods (unscaled) of the regraft with fixed lengths, in one pass:
    ``sum_{c,i} w_c pi_i (P F)_ci (P Y)_ci SP_ci`` for ``P`` = ``pm`` (half the regraft edge) on both sides,
    ``Y`` y's side (``clv[row_y]`` or its tip codes), ``SP`` the pruned subtree's partial times the pendant's
    matrix."""
    C = F.shape[0]
    P = F.shape[2]
    for q in range(P):
        site[q] = 0.0
    for c in range(C):
        F0, F1, F2, F3 = F[c, 0], F[c, 1], F[c, 2], F[c, 3]
        for i in range(4):
            f = weights[c] * freqs[i]
            a0, a1, a2, a3 = pm[c, i, 0], pm[c, i, 1], pm[c, i, 2], pm[c, i, 3]
            sp = SP[c, i]
            if y >= n_leaves:
                Y = clv[row_y, c]
                Y0, Y1, Y2, Y3 = Y[0], Y[1], Y[2], Y[3]
                for q in range(P):
                    site[q] += (
                        f
                        * (a0 * F0[q] + a1 * F1[q] + a2 * F2[q] + a3 * F3[q])
                        * (a0 * Y0[q] + a1 * Y1[q] + a2 * Y2[q] + a3 * Y3[q])
                        * sp[q]
                    )
            else:
                row = ptip[c, i]
                codes = tip_codes[y]
                for q in range(P):
                    site[q] += f * (a0 * F0[q] + a1 * F1[q] + a2 * F2[q] + a3 * F3[q]) * row[codes[q]] * sp[q]


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def times_side(out, D, pm, ptip, node, n_leaves, tip_codes, src):
    """``out = D * (pm @ L)`` per category and state, ``L`` the partial ``src`` of ``node`` (a tip: its
    codes)."""
    C = out.shape[0]
    P = out.shape[2]
    for c in range(C):
        for i in range(4):
            o, d = out[c, i], D[c, i]
            if node >= n_leaves:
                a0, a1, a2, a3 = pm[c, i, 0], pm[c, i, 1], pm[c, i, 2], pm[c, i, 3]
                S0, S1, S2, S3 = src[c, 0], src[c, 1], src[c, 2], src[c, 3]
                for q in range(P):
                    o[q] = d[q] * (a0 * S0[q] + a1 * S1[q] + a2 * S2[q] + a3 * S3[q])
            else:
                row = ptip[c, i]
                codes = tip_codes[node]
                for q in range(P):
                    o[q] = d[q] * row[codes[q]]


@njit(cache=True, nogil=True)
def dense(out, sc, node, n_leaves, tip_codes, clv, scale, row):
    """``node``'s partial (``clv[row]``) as a dense ``[C, 4, P]`` array (a tip: its state masks)."""
    mask_vectors = kn.MASK_VECTORS
    C = out.shape[0]
    P = out.shape[2]
    if node < n_leaves:
        codes = tip_codes[node]
        for c in range(C):
            for i in range(4):
                for p in range(P):
                    out[c, i, p] = mask_vectors[codes[p], i]
        sc[:] = 0
    else:
        out[:] = clv[row]
        for p in range(P):
            sc[p] = scale[row, p]


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def product(out, left, right):
    C = out.shape[0]
    for c in range(C):
        for i in range(4):
            o, a, b = out[c, i], left[c, i], right[c, i]
            for p in range(o.shape[0]):
                o[p] = a[p] * b[p]


@njit(cache=True, nogil=True)
def row(d, neighbors, edges, n_leaves):
    """``clv_index`` of ``d``, or 0 when its head is a leaf (the row is then not read)."""
    head = edges[d >> 1, 1 - (d & 1)]
    return kn.clv_index(d, neighbors, edges, n_leaves) if head >= n_leaves else 0


@njit(cache=True, nogil=True)
def candidate(
    F,
    sF,
    y,
    row_y,
    t,
    l0,
    branches,
    n_leaves,
    tip_codes,
    clv,
    scale,
    model,
    pattern_weights,
    t_min,
    t_max,
    max_iter,
    newton_tol,
    work,
    swork,
    coef,
    site,
    pm,
    ptip,
):
    """One regraft: ``F`` the partial at ``x`` without ``y``'s side (toward ``p``), ``y``'s side
    ``clv[row_y]``, the s-subtree's in ``work[1]`` (and times the pendant's matrix in ``work[2]``); the
    regraft edge of length ``t`` split in half, the pendant of length ``l0``."""
    mask_vectors = kn.MASK_VECTORS
    eigvals, U, U_inv, rates = model.eigvals, model.U, model.U_inv, model.rates
    Sd, SP, Hy, V, PS, Y = work[1], work[2], work[5], work[6], work[7], work[8]
    sS, sV, sY, site_scale = swork[1], swork[3], swork[4], swork[5]
    P = F.shape[2]
    kn.branch_pmat(0.5 * t, eigvals, U, U_inv, rates, mask_vectors, pm, ptip)
    if branches == 0:
        fixed_site(F, y, row_y, n_leaves, tip_codes, clv, pm, ptip, SP, model.weights, model.freqs, site)
        for q in range(P):
            site_scale[q] = sF[q] + sS[q] + (scale[row_y, q] if y >= n_leaves else 0)
        return total_loglik(site, site_scale, pattern_weights, model.inv_lik, model.pinv)
    times_p(Hy, pm, ptip, y, n_leaves, tip_codes, clv[row_y], True)  # y's side over its half
    times_p(V, pm, ptip, n_leaves, n_leaves, tip_codes, F, True)  # x's side over its half
    for q in range(P):
        sY[q] = scale[row_y, q] if y >= n_leaves else 0
    for c in range(V.shape[0]):
        for i in range(4):
            o, h = V[c, i], Hy[c, i]
            for q in range(P):
                o[q] *= h[q]
    for q in range(P):
        sV[q] = sF[q] + sY[q]
    kn.rescale_patterns(V, sV)
    pendant, f = optimise_branch(
        V, sV, Sd, sS, l0, model, pattern_weights, t_min, t_max, max_iter, newton_tol, coef
    )
    if branches == 1:
        return f
    dense(Y, sY, y, n_leaves, tip_codes, clv, scale, row_y)
    kn.branch_pmat(pendant, eigvals, U, U_inv, rates, mask_vectors, pm, ptip)
    times_p(PS, pm, ptip, n_leaves, n_leaves, tip_codes, Sd, True)
    product(V, Hy, PS)  # the regraft node without x's half
    for q in range(P):
        sV[q] = sY[q] + sS[q]
    kn.rescale_patterns(V, sV)
    t1, f = optimise_branch(
        F, sF, V, sV, 0.5 * t, model, pattern_weights, t_min, t_max, max_iter, newton_tol, coef
    )
    kn.branch_pmat(t1, eigvals, U, U_inv, rates, mask_vectors, pm, ptip)
    times_p(Hy, pm, ptip, n_leaves, n_leaves, tip_codes, F, True)
    product(V, Hy, PS)  # without y's half
    for q in range(P):
        sV[q] = sF[q] + sS[q]
    kn.rescale_patterns(V, sV)
    _, f = optimise_branch(
        Y, sY, V, sV, 0.5 * t, model, pattern_weights, t_min, t_max, max_iter, newton_tol, coef
    )
    return f
