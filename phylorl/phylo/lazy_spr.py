"""Lazy SPR scores: the log-likelihood of many SPR neighbours from one tree's partials, in one compiled pass.

For a move ``(p, s, x, y)`` (see :mod:`phylorl.phylo.spr`) the tree after the move has a node ``p`` on the
regraft edge ``(x, y)`` (split in half) holding the pruned s-subtree by the edge ``(p, s)``. Its *lazy score* is
that tree's log-likelihood with the three branches at ``p`` optimised by one Newton pass (the pendant ``(p, s)``,
then ``(x, p)``, then ``(p, y)``; or the pendant alone) and every other length as
:func:`~phylorl.phylo.spr.apply_spr` leaves it: the lazy subtree rearrangement of RAxML, which ranks candidates
this way before it optimises the few best thoroughly.

No tree is copied or changed. Per pruned subtree, the partials of the remaining tree (``a`` and ``b`` joined)
are walked outward from the join, one node at a time (:func:`lazy_spr_scores`): the side of a regraft edge away
from ``p`` is the current tree's own partial, the side toward ``p`` is one product of the parent's and a
sibling's. A candidate costs a few small matrix products and three branches' Newton iterations, against an SPR plus
partial updates along the path plus Newton on several branches for a full evaluation
(:meth:`~phylorl.env.tree_env.TreeEnv.evaluate_moves`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import kernels as kn
from .branch_kernels import newton_branch
from .kernels import FASTMATH, LOG_SCALE
from .spr import slot_of


@njit(cache=True, nogil=True)
def ensure_all(n_edges, neighbors, node_edges, edges, n_leaves, tip_codes, pmat, tip_pmat, clv, scale, valid, stack):
    """Make every directed partial of the tree valid; returns the number recomputed."""
    n = 0
    for d in range(2 * n_edges):
        n += kn.ensure_valid(d, neighbors, node_edges, edges, n_leaves, tip_codes, pmat, tip_pmat, clv, scale,
                             valid, stack)
    return n


@njit(cache=True, nogil=True)
def _times_p(out, pm, ptip, node, n_leaves, tip_codes, src, first):
    """``out[c, i, p] (*)= sum_j pm[c, i, j] * L[c, j, p]`` for ``L`` the partial ``src`` of ``node`` (a tip:
    its codes), ``=`` when ``first``: the engine's child term for one matrix and one partial."""
    C = out.shape[0]
    P = out.shape[2]
    kn._child_term(out, node, 0, 0, n_leaves, tip_codes, pm.reshape((1, C, 4, 4)), ptip.reshape((1, C, 4, 16)),
                   src.reshape((1, C, 4, P)), first)


@njit(cache=True, nogil=True)
def _optimise_branch(A, sA, B, sB, t0, freqs, weights, U, U_inv, eigvals, rates, inv_lik, pinv, pattern_weights,
                     t_min, t_max, max_iter, newton_tol, coef):
    """Newton on the length of a branch between partials ``A`` and ``B`` (scales ``sA``, ``sB``), from ``t0``:
    returns ``(length, log-likelihood)``."""
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
                    out[p] += wc * (a0 * Ac[0, p] + a1 * Ac[1, p] + a2 * Ac[2, p] + a3 * Ac[3, p]) * (
                        b0 * Bc[0, p] + b1 * Bc[1, p] + b2 * Bc[2, p] + b3 * Bc[3, p])
            else:
                out = coef[c, k]
                for p in range(P):
                    out[p] = wc * (a0 * Ac[0, p] + a1 * Ac[1, p] + a2 * Ac[2, p] + a3 * Ac[3, p]) * (
                        b0 * Bc[0, p] + b1 * Bc[1, p] + b2 * Bc[2, p] + b3 * Bc[3, p])
    t, f, _ = newton_branch(coef, eigvals, rates, pattern_weights, t0, t_min, t_max, max_iter, newton_tol)
    return t, f - offset


@njit(cache=True, nogil=True)
def _dense(out, sc, node, n_leaves, tip_codes, clv, scale, d):
    """``node``'s partial along directed edge ``d`` as a dense ``[C, 4, P]`` array (a tip: its state masks)."""
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
        out[:] = clv[d]
        for p in range(P):
            sc[p] = scale[d, p]


@njit(cache=True, nogil=True)
def _edge_term(out, ok, d, half, edges, lengths, n_leaves, tip_codes, clv, pmat, tip_pmat, eigvals, U, U_inv, rates,
               pm, ptip):
    """``out[d]``, made on first use (``ok[d]``): the partial of directed edge ``d`` times its edge's matrix, or
    with ``half`` over half the edge (the halves of a regraft edge)."""
    if not ok[d]:
        e = d // 2
        head = edges[e, 1 - d % 2]
        if half:
            kn.branch_pmat(0.5 * lengths[e], eigvals, U, U_inv, rates, kn.MASK_VECTORS, pm, ptip)
            _times_p(out[d], pm, ptip, head, n_leaves, tip_codes, clv[d], True)
        else:
            _times_p(out[d], pmat[e], tip_pmat[e], head, n_leaves, tip_codes, clv[d], True)
        ok[d] = True
    return out[d]


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def _product(out, left, right):
    C = out.shape[0]
    for c in range(C):
        for i in range(4):
            o, a, b = out[c, i], left[c, i], right[c, i]
            for p in range(o.shape[0]):
                o[p] = a[p] * b[p]


@njit(cache=True, nogil=True)
def _scale_of(scale, d, node, n_leaves, q):
    return scale[d, q] if node >= n_leaves else 0


@njit(cache=True, nogil=True)
def _candidate(F, sF, y, d_y, Hy, t, Sd, sS, l0, three, n_leaves, tip_codes, clv, scale, freqs, weights, eigvals, U,
               U_inv, rates, inv_lik, pinv, pattern_weights, t_min, t_max, max_iter, newton_tol, work, swork, coef, pm,
               ptip):
    """One regraft: ``F`` the partial at ``x`` without ``y``'s side (toward ``p``), ``y``'s side along ``d_y``,
    ``Sd`` the s-subtree's; the regraft edge of length ``t`` split in half, the pendant of length ``l0``."""
    mask_vectors = kn.MASK_VECTORS
    V, PS, PF, Y = work[0], work[1], work[2], work[3]
    sV, sY = swork[0], swork[1]
    P = F.shape[2]
    _dense(Y, sY, y, n_leaves, tip_codes, clv, scale, d_y)
    kn.branch_pmat(0.5 * t, eigvals, U, U_inv, rates, mask_vectors, pm, ptip)
    _times_p(PF, pm, ptip, n_leaves, n_leaves, tip_codes, F, True)
    _product(V, PF, Hy)
    for q in range(P):
        sV[q] = sF[q] + sY[q]
    kn.rescale_patterns(V, sV)
    l, f = _optimise_branch(V, sV, Sd, sS, l0, freqs, weights, U, U_inv, eigvals, rates, inv_lik, pinv,
                            pattern_weights, t_min, t_max, max_iter, newton_tol, coef)
    if not three:
        return f
    kn.branch_pmat(l, eigvals, U, U_inv, rates, mask_vectors, pm, ptip)
    _times_p(PS, pm, ptip, n_leaves, n_leaves, tip_codes, Sd, True)
    _product(V, Hy, PS)  # the regraft node without x's half
    for q in range(P):
        sV[q] = sY[q] + sS[q]
    kn.rescale_patterns(V, sV)
    t1, f = _optimise_branch(F, sF, V, sV, 0.5 * t, freqs, weights, U, U_inv, eigvals, rates, inv_lik, pinv,
                             pattern_weights, t_min, t_max, max_iter, newton_tol, coef)
    kn.branch_pmat(t1, eigvals, U, U_inv, rates, mask_vectors, pm, ptip)
    _times_p(PF, pm, ptip, n_leaves, n_leaves, tip_codes, F, True)
    _product(V, PF, PS)  # without y's half
    for q in range(P):
        sV[q] = sF[q] + sS[q]
    kn.rescale_patterns(V, sV)
    _, f = _optimise_branch(Y, sY, V, sV, 0.5 * t, freqs, weights, U, U_inv, eigvals, rates, inv_lik, pinv,
                            pattern_weights, t_min, t_max, max_iter, newton_tol, coef)
    return f


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
def lazy_spr_scores(moves, neighbors, node_edges, edges, lengths, n_leaves, tip_codes, clv, scale, pmat, tip_pmat,
                    freqs, weights, eigvals, U, U_inv, rates, inv_lik, pinv, pattern_weights, t_min, t_max,
                    max_iter, newton_tol, three, T, H, D, sD, out):
    """Lazy score of every move (rows ``(p, s, x, y)``) into ``out``; every partial of the tree must be valid
    (:func:`ensure_all`). Moves sharing ``(p, s)`` should be consecutive (as enumerated): each run costs one
    walk of the remaining tree along the paths to its regraft edges. Returns the index of the first move that is
    not a valid SPR move of the tree (or repeats a regraft edge of its run), or -1. With ``three`` the two halves
    of the regraft edge are optimised too, after the pendant (one pass: the branches at the regraft point).
    ``T``, ``H`` (``[2E, C, 4, P]``), ``D`` (``[nodes, C, 4, P]``) and ``sD`` (int64 ``[nodes, P]``) are work
    space, kept by the caller between calls (touching fresh pages cost more than the edge terms)."""
    mask_vectors = kn.MASK_VECTORS
    n_nodes = neighbors.shape[0]
    C = clv.shape[1]
    P = clv.shape[3]
    t_ok = np.zeros(clv.shape[0], np.bool_)  # which edge terms T, H this call has made
    h_ok = np.zeros(clv.shape[0], np.bool_)
    pm2 = np.empty((C, 4, 4))
    ptip2 = np.empty((C, 4, 16))
    # D[x]: the remaining tree's partial on x's side toward p, times the matrix toward p; sD its scales
    F = np.empty((C, 4, P))
    sF = np.zeros(P, np.int64)
    Sd = np.empty((C, 4, P))
    sS = np.zeros(P, np.int64)
    work = np.empty((5, C, 4, P))
    swork = np.zeros((3, P), np.int64)
    coef = np.zeros((C, 4, P))
    pm = np.empty((C, 4, 4))
    ptip = np.empty((C, 4, 16))
    want = np.full(edges.shape[0], -1, np.int64)  # regraft edge -> its move's row, in the current run
    want_x = np.empty(edges.shape[0], np.int64)  # and that move's x (the end nearer to p)
    queue = np.empty(n_nodes, np.int64)
    parent = np.empty(n_nodes, np.int64)
    need = np.zeros(n_nodes, np.int64)  # == the run's stamp: on a path from p to a regraft edge of the run
    seen = np.zeros(n_nodes, np.int64)
    up = np.empty(n_nodes, np.int64)
    stamp = 0
    A = moves.shape[0]
    i = 0
    while i < A:
        p, s = moves[i, 0], moves[i, 1]
        if p < n_leaves or p >= n_nodes or s < 0 or s >= n_nodes:
            return i
        ks = slot_of(neighbors, p, s)
        if ks < 0:
            return i
        j = i
        while j < A and moves[j, 0] == p and moves[j, 1] == s:
            x, y = moves[j, 2], moves[j, 3]
            if x < 0 or x >= n_nodes or y < 0 or y >= n_nodes or slot_of(neighbors, x, y) < 0:
                return j
            e = node_edges[x, slot_of(neighbors, x, y)]
            if want[e] >= 0:
                return j
            want[e] = j
            want_x[e] = x
            j += 1
        remaining = j - i
        stamp += 1
        _mark_paths(moves, i, j, neighbors, n_leaves, p, s, need, seen, up, queue, stamp)
        e_ps = node_edges[p, ks]
        _dense(Sd, sS, s, n_leaves, tip_codes, clv, scale, kn.directed_id(edges, e_ps, p))  # s's, away from p
        for side in range(3):
            a = neighbors[p, side]
            if side == ks or a < n_leaves or remaining == 0 or need[a] != stamp:
                continue
            other = 3 - ks - side
            b = neighbors[p, other]
            e_pa, e_pb = node_edges[p, side], node_edges[p, other]
            d_b = kn.directed_id(edges, e_pb, p)
            kn.branch_pmat(lengths[e_pa] + lengths[e_pb], eigvals, U, U_inv, rates, mask_vectors, pm, ptip)
            _times_p(D[a], pm, ptip, b, n_leaves, tip_codes, clv[d_b], True)
            for q in range(P):
                sD[a, q] = _scale_of(scale, d_b, b, n_leaves, q)
            parent[a] = p
            queue[0] = a
            head, tail = 0, 1
            while head < tail and remaining > 0:
                x = queue[head]
                head += 1
                k_parent = slot_of(neighbors, x, parent[x])
                for k in range(3):
                    if k == k_parent:
                        continue
                    y = neighbors[x, k]
                    e = node_edges[x, k]
                    hit = want[e] >= 0 and want_x[e] == x
                    deeper = y >= n_leaves and need[y] == stamp  # a regraft edge of the run lies beyond y
                    if not hit and not deeper:
                        continue
                    sib = neighbors[x, 3 - k - k_parent]
                    d_sib = kn.directed_id(edges, node_edges[x, 3 - k - k_parent], x)
                    Ts = _edge_term(T, t_ok, d_sib, False, edges, lengths, n_leaves, tip_codes, clv, pmat, tip_pmat,
                                    eigvals, U, U_inv, rates, pm2, ptip2)
                    _product(F, D[x], Ts)  # x's partial toward p, without y's side
                    for q in range(P):
                        sF[q] = sD[x, q] + _scale_of(scale, d_sib, sib, n_leaves, q)
                    kn.rescale_patterns(F, sF)
                    if hit:
                        d_y = kn.directed_id(edges, e, x)
                        Hy = _edge_term(H, h_ok, d_y, True, edges, lengths, n_leaves, tip_codes, clv, pmat, tip_pmat,
                                        eigvals, U, U_inv, rates, pm2, ptip2)
                        out[want[e]] = _candidate(
                            F, sF, y, d_y, Hy, lengths[e], Sd, sS, lengths[e_ps], three,
                            n_leaves, tip_codes, clv, scale, freqs, weights, eigvals, U, U_inv, rates, inv_lik, pinv,
                            pattern_weights, t_min, t_max, max_iter, newton_tol, work, swork, coef, pm, ptip)
                        want[e] = -1
                        remaining -= 1
                    if deeper:
                        _times_p(D[y], pmat[e], tip_pmat[e], n_leaves, n_leaves, tip_codes, F, True)
                        sD[y] = sF
                        parent[y] = x
                        queue[tail] = y
                        tail += 1
        if remaining > 0:  # a regraft edge not reachable from p outside the s-subtree, or x the farther end
            bad = -1
            for q in range(i, j):
                e = node_edges[moves[q, 2], slot_of(neighbors, moves[q, 2], moves[q, 3])]
                if want[e] >= 0 and bad < 0:
                    bad = q
                want[e] = -1
            return bad
        i = j
    return -1
