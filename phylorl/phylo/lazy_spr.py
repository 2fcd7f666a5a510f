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
level of its stack, so its work space grows with the radius of the moves, not with the tree.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from . import kernels as kn
from . import lazy_candidate as lc
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
    moves,
    neighbors,
    node_edges,
    edges,
    lengths,
    n_leaves,
    tip_codes,
    clv,
    scale,
    valid,
    stack,
    pmat,
    tip_pmat,
    model,
    pattern_weights,
    t_min,
    t_max,
    max_iter,
    newton_tol,
    branches,
    reference,
    cutoff,
    work,
    out,
):
    """Lazy score of every move (rows ``(p, s, x, y)``) into ``out``, with ``branches`` (0, 1 or 3) optimised.
    Moves sharing ``(p, s)`` should be consecutive (as enumerated): each run costs one walk of the remaining
    tree along the paths to its regraft edges. Partials are made valid as the walk reads them. ``model`` is
    the engine's :class:`~phylorl.phylo.likelihood.ModelArrays`, ``work`` a :class:`LazyWork`.

    With ``cutoff > 0`` a walk does not go beyond a regraft edge whose score falls below ``reference`` by more
    than ``cutoff`` times the mean fall of the scores below it so far in the run (RAxML-NG's subtree cutoff: a
    regraft far worse than the tree seldom has a good one behind it); the moves beyond keep ``out``'s value
    (and are not checked).

    Returns ``(status, partials recomputed)``: ``status`` is -1, or the index of the first move that is not a
    valid SPR move of the tree (or repeats a regraft edge of its run), or -2 when a walk is deeper than
    ``work.D``."""
    mask_vectors = kn.MASK_VECTORS
    eigvals, U, U_inv, rates = model.eigvals, model.U, model.U_inv, model.rates
    n_nodes = neighbors.shape[0]
    n_edges = edges.shape[0]
    C = clv.shape[1]
    P = clv.shape[3]
    D, sD, buf, sbuf, coef, site = work.D, work.sD, work.buf, work.sbuf, work.coef, work.site
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
        n_updates += kn.ensure_valid(
            d_ps, neighbors, node_edges, edges, n_leaves, tip_codes, pmat, tip_pmat, clv, scale, valid, stack
        )
        row_s = lc.row(d_ps, neighbors, edges, n_leaves)
        lc.dense(Sd, sS, s, n_leaves, tip_codes, clv, scale, row_s)
        if branches == 0:
            lc.times_p(SP, pmat[e_ps], tip_pmat[e_ps], s, n_leaves, tip_codes, clv[row_s], True)
        for side in range(3):
            a = neighbors[p, side]
            if side == ks or a < n_leaves or remaining == 0 or need[a] != stamp:
                continue
            other = 3 - ks - side
            b = neighbors[p, other]
            e_pa, e_pb = node_edges[p, side], node_edges[p, other]
            d_b = kn.directed_id(edges, e_pb, p)
            n_updates += kn.ensure_valid(
                d_b,
                neighbors,
                node_edges,
                edges,
                n_leaves,
                tip_codes,
                pmat,
                tip_pmat,
                clv,
                scale,
                valid,
                stack,
            )
            row_b = lc.row(d_b, neighbors, edges, n_leaves)
            kn.branch_pmat(lengths[e_pa] + lengths[e_pb], eigvals, U, U_inv, rates, mask_vectors, pm, ptip)
            lc.times_p(D[0], pm, ptip, b, n_leaves, tip_codes, clv[row_b], True)
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
                    n_updates += kn.ensure_valid(
                        d_sib,
                        neighbors,
                        node_edges,
                        edges,
                        n_leaves,
                        tip_codes,
                        pmat,
                        tip_pmat,
                        clv,
                        scale,
                        valid,
                        stack,
                    )
                    row_sib = lc.row(d_sib, neighbors, edges, n_leaves)
                    lc.times_side(F, Dx, pmat[e_sib], tip_pmat[e_sib], sib, n_leaves, tip_codes, clv[row_sib])
                    for q in range(P):
                        sF[q] = sDx[q] + (scale[row_sib, q] if sib >= n_leaves else 0)
                    kn.rescale_patterns(F, sF)
                    if hit:
                        d_y = kn.directed_id(edges, e, x)
                        n_updates += kn.ensure_valid(
                            d_y,
                            neighbors,
                            node_edges,
                            edges,
                            n_leaves,
                            tip_codes,
                            pmat,
                            tip_pmat,
                            clv,
                            scale,
                            valid,
                            stack,
                        )
                        score = lc.candidate(
                            F,
                            sF,
                            y,
                            lc.row(d_y, neighbors, edges, n_leaves),
                            lengths[e],
                            lengths[e_ps],
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
                            buf,
                            sbuf,
                            coef,
                            site,
                            pm,
                            ptip,
                        )
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
                        lc.times_p(D[top], pmat[e], tip_pmat[e], n_leaves, n_leaves, tip_codes, F, True)
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
