"""Lazy SPR scores: the log-likelihood of many SPR neighbours from one tree's partials, in one compiled pass.

For a move ``(p, s, x, y)`` (see :mod:`phylorl.phylo.spr`) the tree after the move has a node ``p`` on the
regraft edge ``(x, y)`` (split in half) holding the pruned s-subtree by the edge ``(p, s)``. Its *lazy score*
is that tree's log-likelihood with at most the three branches at ``p`` optimised by one Newton pass, every
other length as :func:`~phylorl.phylo.spr.apply_spr` leaves it: ``branches=0`` optimises none (the fast lazy
subtree rearrangement of RAxML), ``1`` the pendant ``(p, s)``, ``3`` the pendant then ``(x, p)`` then
``(p, y)``. A lazy score is the log-likelihood of one particular tree after the move, so it never exceeds the
move's log-likelihood with every branch optimised.

No tree is copied or changed. Per pruned subtree, the partials of the remaining tree (``a`` and ``b`` joined)
are walked depth first from the join toward the regraft edges: the side of a regraft edge away from ``p`` is
the tree's own partial (made valid on demand, so only the partials a change has invalidated along the way are
recomputed), the side toward ``p`` one product of the parent's and a sibling's. The walk keeps one partial per
level of its stack, so its work space grows with the radius of the moves, not with the tree. One regraft
(:func:`candidate`) combines the partials on both sides of the regraft point with the pruned subtree's.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from . import kernels as kn
from .branch_kernels import newton_branch
from .kernels import FASTMATH, LOG_SCALE, total_loglik
from .spr import slot_of


class LazyWork(NamedTuple):
    """Work space of :func:`lazy_spr_scores` for one tree size, kept between calls."""

    # float64 [depth, C, 4, P] the walk's stack: partials toward p times the matrix toward p
    D: np.ndarray
    sD: np.ndarray  # int64 [depth, P]          their scale counts
    buf: np.ndarray  # float64 [9, C, 4, P]      F, Sd, SP, Dx, (spare), Hy, V, PS, Y
    sbuf: np.ndarray  # int64 [6, P]              sF, sS, sDx, sV, sY, site scale
    coef: np.ndarray  # float64 [C, 4, P]         one branch's Newton coefficients
    site: np.ndarray  # float64 [P]
    ints: np.ndarray  # int64 [7, 2 nodes + edges]  want, want_x, queue, need, seen, up, the walk's stack
    stamp: np.ndarray  # int64 [1]                 the last run's stamp (need, seen)

    @classmethod
    def allocate(cls, depth: int, n_nodes: int, n_edges: int, n_cats: int, n_patterns: int) -> LazyWork:
        C, P = n_cats, n_patterns
        ints = np.zeros((7, 2 * n_nodes + n_edges), np.int64)
        ints[0] = -1
        return cls(
            np.empty((depth, C, 4, P)),
            np.zeros((depth, P), np.int64),
            np.empty((9, C, 4, P)),
            np.zeros((6, P), np.int64),
            np.zeros((C, 4, P)),
            np.zeros(P),
            ints,
            np.zeros(1, np.int64),
        )


@njit(cache=True, nogil=True)
def _mark_paths(moves, i, j, neighbors, n_leaves, p, s, need, seen, up, queue, stamp):
    """Stamp in ``need`` every node on the paths from ``p`` (not through ``s``) to the near ends ``x`` of the
    regraft edges of moves ``i..j``: the only nodes whose partial toward ``p`` the walk must build. Ends not
    reachable that way stay unstamped (the walk then reports their move as invalid)."""
    seen[p] = stamp
    seen[s] = stamp
    queue[0] = p
    head, tail = 0, 1
    while head < tail:
        u = queue[head]
        head += 1
        if u < n_leaves:
            continue
        for k in range(3):
            v = neighbors[u, k]
            if seen[v] != stamp:
                seen[v] = stamp
                up[v] = u
                queue[tail] = v
                tail += 1
    for q in range(i, j):
        x = moves[q, 2]
        if x < 0 or x >= neighbors.shape[0] or seen[x] != stamp or x == s:
            continue
        while x != p and need[x] != stamp:
            need[x] = stamp
            x = up[x]


@njit(cache=True, nogil=True)
def lazy_spr_scores(
    moves, tree, lengths, bufs, model, pattern_weights, newton, branches, reference, cutoff, work, out
):
    """Lazy score of every move (rows ``(p, s, x, y)``) into ``out``, with ``branches`` (0, 1 or 3) optimised.
    Moves sharing ``(p, s)`` should be consecutive (as enumerated): each run costs one walk of the remaining
    tree along the paths to its regraft edges. Partials are made valid as the walk reads them. ``tree``,
    ``bufs`` and ``model``: the bundles of :mod:`~phylorl.phylo.kernels` (``bufs`` its ``b``); ``newton``: as
    :func:`~phylorl.phylo.branch_kernels.newton_branch`; ``work``: a :class:`LazyWork`.

    With ``cutoff > 0`` a walk does not go beyond a regraft edge whose score falls below ``reference`` by more
    than ``cutoff`` times the mean fall of the scores below it so far in the run (RAxML-NG's subtree cutoff: a
    regraft far worse than the tree seldom has a good one behind it); the moves beyond keep ``out``'s value
    (and are not checked).

    Returns ``(status, partials recomputed)``: ``status`` is -1, or the index of the first move that is not a
    valid SPR move of the tree (or repeats a regraft edge of its run), or -2 when a walk is deeper than
    ``work.D``."""
    mask_vectors = kn.MASK_VECTORS
    neighbors, node_edges, edges, n_leaves, tip_codes = tree
    clv, scale, pmat, tip_pmat = bufs.clv, bufs.scale, bufs.pmat, bufs.tip_pmat
    n_nodes = neighbors.shape[0]
    n_edges = edges.shape[0]
    C = clv.shape[1]
    P = clv.shape[3]
    D, sD, buf, sbuf = work.D, work.sD, work.buf, work.sbuf
    depth = D.shape[0]
    F, Sd, SP, Dx = buf[0], buf[1], buf[2], buf[3]
    sF, sS, sDx = sbuf[0], sbuf[1], sbuf[2]
    want = work.ints[0, :n_edges]  # regraft edge -> its move's row in the current run (-1: none)
    want_x = work.ints[1, :n_edges]  # and that move's x (the end nearer to p)
    queue = work.ints[2, :n_nodes]
    need = work.ints[3, :n_nodes]  # == the run's stamp: on a path from p to a regraft edge of the run
    seen = work.ints[4, :n_nodes]
    up = work.ints[5, :n_nodes]
    walk = work.ints[6]  # the walk's stack: node at 2i, its parent at 2i + 1
    pm = np.empty((C, 4, 4))
    ptip = np.empty((C, 4, 16))
    context = (tree, bufs, model, pattern_weights, newton, work, pm, ptip)  # what every candidate reads
    n_updates = 0
    A = moves.shape[0]
    i = 0
    while i < A:
        p, s = moves[i, 0], moves[i, 1]
        if p < n_leaves or p >= n_nodes or s < 0 or s >= n_nodes:
            return i, n_updates
        ks = slot_of(neighbors, p, s)
        if ks < 0:
            return i, n_updates
        j = i
        while j < A and moves[j, 0] == p and moves[j, 1] == s:
            x, y = moves[j, 2], moves[j, 3]
            if x < 0 or x >= n_nodes or y < 0 or y >= n_nodes or slot_of(neighbors, x, y) < 0:
                _clear(moves, i, j, neighbors, node_edges, want)
                return j, n_updates
            e = node_edges[x, slot_of(neighbors, x, y)]
            if want[e] >= 0:
                _clear(moves, i, j, neighbors, node_edges, want)
                return j, n_updates
            want[e] = j
            want_x[e] = x
            j += 1
        remaining = j - i
        fall_sum, fall_count, pruned = 0.0, 0, False
        work.stamp[0] += 1
        stamp = work.stamp[0]
        _mark_paths(moves, i, j, neighbors, n_leaves, p, s, need, seen, up, queue, stamp)
        e_ps = node_edges[p, ks]
        d_ps = kn.directed_id(edges, e_ps, p)  # the s-subtree, away from p
        n_updates += kn.ensure_valid(d_ps, tree, bufs)
        row_s = row(d_ps, tree)
        dense(Sd, sS, s, tree, bufs, row_s)
        if branches == 0:
            times_p(SP, pmat[e_ps], tip_pmat[e_ps], s, n_leaves, tip_codes, clv[row_s], True)
        for side in range(3):
            a = neighbors[p, side]
            if side == ks or a < n_leaves or remaining == 0 or need[a] != stamp:
                continue
            other = 3 - ks - side
            b = neighbors[p, other]
            e_pa, e_pb = node_edges[p, side], node_edges[p, other]
            d_b = kn.directed_id(edges, e_pb, p)
            n_updates += kn.ensure_valid(d_b, tree, bufs)
            row_b = row(d_b, tree)
            kn.branch_pmat(lengths[e_pa] + lengths[e_pb], model, mask_vectors, pm, ptip)
            times_p(D[0], pm, ptip, b, n_leaves, tip_codes, clv[row_b], True)
            for q in range(P):
                sD[0, q] = scale[row_b, q] if b >= n_leaves else 0
            walk[0] = a
            walk[1] = p
            top = 1
            while top > 0 and remaining > 0:
                top -= 1
                x = walk[2 * top]
                k_parent = slot_of(neighbors, x, walk[2 * top + 1])
                Dx[:] = D[top]
                sDx[:] = sD[top]
                for k in range(3):
                    if k == k_parent:
                        continue
                    y = neighbors[x, k]
                    e = node_edges[x, k]
                    hit = want[e] >= 0 and want_x[e] == x
                    deeper = y >= n_leaves and need[y] == stamp  # a regraft edge of the run lies beyond y
                    if not hit and not deeper:
                        continue
                    k_sib = 3 - k - k_parent
                    sib = neighbors[x, k_sib]
                    e_sib = node_edges[x, k_sib]
                    d_sib = kn.directed_id(edges, e_sib, x)
                    n_updates += kn.ensure_valid(d_sib, tree, bufs)
                    row_sib = row(d_sib, tree)
                    times_side(F, Dx, pmat[e_sib], tip_pmat[e_sib], sib, n_leaves, tip_codes, clv[row_sib])
                    for q in range(P):
                        sF[q] = sDx[q] + (scale[row_sib, q] if sib >= n_leaves else 0)
                    kn.rescale_patterns(F, sF)
                    if hit:
                        d_y = kn.directed_id(edges, e, x)
                        n_updates += kn.ensure_valid(d_y, tree, bufs)
                        row_y = row(d_y, tree)
                        score = candidate(F, sF, y, row_y, lengths[e], lengths[e_ps], branches, context)
                        out[want[e]] = score
                        want[e] = -1
                        remaining -= 1
                        if cutoff > 0.0 and score < reference:
                            fall = reference - score
                            if deeper and fall_count > 0 and fall > cutoff * fall_sum / fall_count:
                                deeper = False
                                pruned = True
                            fall_sum += fall
                            fall_count += 1
                    if deeper:
                        if top >= depth:
                            _clear(moves, i, j, neighbors, node_edges, want)
                            return -2, n_updates
                        times_p(D[top], pmat[e], tip_pmat[e], n_leaves, n_leaves, tip_codes, F, True)
                        sD[top] = sF
                        walk[2 * top] = y
                        walk[2 * top + 1] = x
                        top += 1
        if remaining > 0 and pruned:
            _clear(moves, i, j, neighbors, node_edges, want)
        elif remaining > 0:  # a regraft edge not reachable from p outside the s-subtree, or x the farther end
            bad = -1
            for q in range(i, j):
                e = node_edges[moves[q, 2], slot_of(neighbors, moves[q, 2], moves[q, 3])]
                if want[e] >= 0 and bad < 0:
                    bad = q
            _clear(moves, i, j, neighbors, node_edges, want)
            return bad, n_updates
        i = j
    return -1, n_updates


@njit(cache=True, nogil=True)
def _clear(moves, i, j, neighbors, node_edges, want):
    """Reset ``want`` for the regraft edges of moves ``i..j`` (it is kept clear between runs and calls)."""
    for q in range(i, j):
        x, y = moves[q, 2], moves[q, 3]
        if 0 <= x < neighbors.shape[0] and 0 <= y < neighbors.shape[0]:
            k = slot_of(neighbors, x, y)
            if k >= 0:
                want[node_edges[x, k]] = -1


# ---------------------------------------------------------------------------- one regraft candidate


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
def optimise_branch(A, sA, B, sB, t0, model, pattern_weights, newton, coef):
    """Newton on the length of a branch between partials ``A`` and ``B`` (scales ``sA``, ``sB``), from ``t0``
    (``newton``: as :func:`~phylorl.phylo.branch_kernels.newton_branch`): returns ``(length,
    log-likelihood)``."""
    freqs, weights, _, U, U_inv, _, inv_lik, pinv = model
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
    t, f, _ = newton_branch(coef, model, pattern_weights, t0, newton)
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
def dense(out, sc, node, tree, b, row):
    """``node``'s partial (``b.clv[row]``) as a dense ``[C, 4, P]`` array (a tip: its state masks)."""
    mask_vectors = kn.MASK_VECTORS
    n_leaves, tip_codes, clv, scale = tree[3], tree[4], b.clv, b.scale
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
def row(d, tree):
    """``clv_index`` of ``d``, or 0 when its head is a leaf (the row is then not read)."""
    neighbors, _, edges, n_leaves, _ = tree
    head = edges[d >> 1, 1 - (d & 1)]
    return kn.clv_index(d, neighbors, edges, n_leaves) if head >= n_leaves else 0


@njit(cache=True, nogil=True)
def candidate(F, sF, y, row_y, t, l0, branches, context):
    """One regraft: ``F`` the partial at ``x`` without ``y``'s side (toward ``p``), ``y``'s side
    ``clv[row_y]``, the s-subtree's in ``work.buf[1]`` (times the pendant's matrix in ``work.buf[2]``); the
    regraft edge of length ``t`` split in half, the pendant of length ``l0``. ``context``: ``(tree, b, model,
    pattern_weights, newton, work, pm, ptip)`` of :func:`lazy_spr_scores`."""
    tree, b, model, pattern_weights, newton, work, pm, ptip = context
    mask_vectors = kn.MASK_VECTORS
    n_leaves, tip_codes, clv, scale, coef, site = tree[3], tree[4], b.clv, b.scale, work.coef, work.site
    Sd, SP, Hy, V, PS, Y = work.buf[1], work.buf[2], work.buf[5], work.buf[6], work.buf[7], work.buf[8]
    sS, sV, sY, site_scale = work.sbuf[1], work.sbuf[3], work.sbuf[4], work.sbuf[5]
    P = F.shape[2]
    kn.branch_pmat(0.5 * t, model, mask_vectors, pm, ptip)
    if branches == 0:
        fixed_site(F, y, row_y, n_leaves, tip_codes, clv, pm, ptip, SP, model.weights, model.freqs, site)
        for q in range(P):
            site_scale[q] = sF[q] + sS[q] + (scale[row_y, q] if y >= n_leaves else 0)
        return total_loglik(site, site_scale, pattern_weights, model.inv_lik, model.pinv)
    times_p(Hy, pm, ptip, y, n_leaves, tip_codes, clv[row_y], True)  # y's side over its half
    times_p(V, pm, ptip, n_leaves, n_leaves, tip_codes, F, True)  # x's side over its half
    for q in range(P):
        sY[q] = scale[row_y, q] if y >= n_leaves else 0
    product(V, V, Hy)
    for q in range(P):
        sV[q] = sF[q] + sY[q]
    kn.rescale_patterns(V, sV)
    pendant, f = optimise_branch(V, sV, Sd, sS, l0, model, pattern_weights, newton, coef)
    if branches == 1:
        return f
    dense(Y, sY, y, tree, b, row_y)
    kn.branch_pmat(pendant, model, mask_vectors, pm, ptip)
    times_p(PS, pm, ptip, n_leaves, n_leaves, tip_codes, Sd, True)
    product(V, Hy, PS)  # the regraft node without x's half
    for q in range(P):
        sV[q] = sY[q] + sS[q]
    kn.rescale_patterns(V, sV)
    t1, f = optimise_branch(F, sF, V, sV, 0.5 * t, model, pattern_weights, newton, coef)
    kn.branch_pmat(t1, model, mask_vectors, pm, ptip)
    times_p(Hy, pm, ptip, n_leaves, n_leaves, tip_codes, F, True)
    product(V, Hy, PS)  # without y's half
    for q in range(P):
        sV[q] = sF[q] + sS[q]
    kn.rescale_patterns(V, sV)
    _, f = optimise_branch(Y, sY, V, sV, 0.5 * t, model, pattern_weights, newton, coef)
    return f
