"""Numba kernels of the likelihood engine: partial likelihoods per directed edge.

Conventions (shared with :mod:`phylorl.phylo.likelihood`):

* Directed edge ``d = 2*e + k`` of undirected edge ``e`` points from ``edges[e, k]`` to
  ``edges[e, 1-k]``. Its partial (``[C, 4, P]``: rate category, state, site pattern) is the
  conditional likelihood at the head node of the subtree on the head's side, excluding the edge
  ``e`` itself. Only directed edges whose head is internal have one (tips are looked up): it is
  stored at ``clv[clv_index(d)]``, row ``3 * (head - n_leaves) + k`` for ``k`` the tail's slot in the
  head's neighbour row, so ``clv`` holds ``3(n-2)`` partials. An SPR move rewrites the rows of the nodes
  it touches, and with them the rows of exactly the directed edges it invalidates.
* ``scale[clv_index(d), p]`` counts how many times pattern ``p`` was multiplied by ``2**256`` in that
  subtree.
* ``pmat[e]`` (``[C, 4, 4]``) is the transition matrix of edge ``e`` per category; ``tip_pmat[e]``
  (``[C, 4, 16]``) is ``pmat[e] @ mask`` for each of the 16 ambiguity codes, so a leaf's
  contribution is a gather.
* ``valid[d]`` says whether the partial of ``d`` is up to date. Changing edge ``e`` invalidates every partial
  whose subtree contains ``e`` (:func:`invalidate_toward`). A partial is made valid only after those it is
  computed from (:func:`ensure_valid` works post-order), so every partial containing an invalid one is invalid
  too: within one topology, the walk outward from a changed length stops at the first partial already invalid.

Kernels take buffers and indices and return numbers; they allocate nothing per call beyond small
scratch arrays. They take their arrays in three bundles: ``tree``, the topology ``(neighbors, node_edges,
edges, n_leaves, tip_codes)``; ``b``, the engine's :class:`~phylorl.phylo.likelihood.Buffers`; ``model``, its
:class:`~phylorl.phylo.likelihood.ModelArrays`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}
SCALE_THRESHOLD = 2.0**-256
SCALE_FACTOR = 2.0**256
LOG_SCALE = 256.0 * np.log(2.0)

# 4-bit ambiguity mask -> indicator over A, C, G, T
MASK_VECTORS = np.array([[(code >> j) & 1 for j in range(4)] for code in range(16)], dtype=np.float64)


@njit(cache=True, nogil=True)
def directed_id(edges, e, tail):
    """Directed id of edge ``e`` leaving node ``tail``."""
    return 2 * e if edges[e, 0] == tail else 2 * e + 1


@njit(cache=True, nogil=True, inline="always")
def clv_index(d, neighbors, edges, n_leaves):
    """Row of ``clv`` and ``scale`` holding the partial of directed edge ``d`` (its head must be internal)."""
    e = d >> 1
    tail = edges[e, d & 1]
    head = edges[e, 1 - (d & 1)]
    k = 0 if neighbors[head, 0] == tail else (1 if neighbors[head, 1] == tail else 2)
    return 3 * (head - n_leaves) + k


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def branch_pmat(t, model, mask_vectors, pm, ptip):
    """Transition matrices of one branch of length ``t`` per category (``pm [C, 4, 4]``), and applied to every
    tip mask (``ptip [C, 4, 16]``)."""
    eigvals, U, U_inv, rates = model.eigvals, model.U, model.U_inv, model.rates
    C = rates.shape[0]
    ex = np.empty(4)
    for c in range(C):
        for k in range(4):
            ex[k] = np.exp(eigvals[k] * rates[c] * t)
        for i in range(4):
            for j in range(4):
                acc = 0.0
                for k in range(4):
                    acc += U[i, k] * ex[k] * U_inv[k, j]
                pm[c, i, j] = acc if acc > 0.0 else 0.0
            for code in range(16):
                acc = 0.0
                for j in range(4):
                    acc += pm[c, i, j] * mask_vectors[code, j]
                ptip[c, i, code] = acc


@njit(cache=True, nogil=True)
def compute_pmats(edge_ids, lengths, model, b, mask_vectors):
    """Fill ``b.pmat`` and ``b.tip_pmat`` for the given edges from the eigen-decomposition."""
    for idx in range(edge_ids.shape[0]):
        e = edge_ids[idx]
        branch_pmat(lengths[e], model, mask_vectors, b.pmat[e], b.tip_pmat[e])


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def _child_term(out, child, e, n_leaves, tip_codes, pmat, tip_pmat, src, first):
    """``out[c, s, p] (*)= sum_j P_e[c, s, j] * L_child[c, j, p]`` (``=`` when ``first``); ``L_child`` is
    ``src`` (``[C, 4, P]``) for an internal child, its tip codes for a leaf."""
    C = out.shape[0]
    P = out.shape[2]
    if child < n_leaves:
        codes = tip_codes[child]
        for c in range(C):
            for s in range(4):
                row = tip_pmat[e, c, s]
                o = out[c, s]
                if first:
                    for p in range(P):
                        o[p] = row[codes[p]]
                else:
                    for p in range(P):
                        o[p] *= row[codes[p]]
    else:
        for c in range(C):
            L0, L1, L2, L3 = src[c, 0], src[c, 1], src[c, 2], src[c, 3]
            for s in range(4):
                m0, m1, m2, m3 = pmat[e, c, s, 0], pmat[e, c, s, 1], pmat[e, c, s, 2], pmat[e, c, s, 3]
                o = out[c, s]
                if first:
                    for p in range(P):
                        o[p] = m0 * L0[p] + m1 * L1[p] + m2 * L2[p] + m3 * L3[p]
                else:
                    for p in range(P):
                        o[p] *= m0 * L0[p] + m1 * L1[p] + m2 * L2[p] + m3 * L3[p]


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def _combine(d, tree, b):
    """Recompute the partial of ``d`` and its scale counts from the head node's two other neighbours."""
    neighbors, node_edges, edges, n_leaves, tip_codes = tree
    pmat, tip_pmat, clv, scale = b.pmat, b.tip_pmat, b.clv, b.scale
    e = d >> 1
    k = d & 1
    tail = edges[e, k]
    head = edges[e, 1 - k]
    row = clv_index(d, neighbors, edges, n_leaves)
    out = clv[row]
    P = out.shape[2]
    sc = scale[row]
    first = True
    for slot in range(3):
        child = neighbors[head, slot]
        if child == tail:
            continue
        ce = node_edges[head, slot]
        crow = 3 * (child - n_leaves) + (
            0 if neighbors[child, 0] == head else (1 if neighbors[child, 1] == head else 2)
        )
        if child < n_leaves:
            crow = 0
        _child_term(out, child, ce, n_leaves, tip_codes, pmat, tip_pmat, clv[crow], first)
        if first:
            if child < n_leaves:
                sc[:] = 0
            else:
                sc[:] = scale[crow]
            first = False
        elif child >= n_leaves:
            csc = scale[crow]
            for p in range(P):
                sc[p] += csc[p]
    rescale_patterns(out, sc)


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def rescale_patterns(out, sc):
    """Per-pattern scaling of a partial ``out [C, 4, P]``: a pattern whose largest entry is below ``2**-256``
    is multiplied by ``2**256`` and its count in ``sc`` raised by one."""
    C = out.shape[0]
    P = out.shape[2]
    m = out[0, 0].copy()
    for c in range(C):
        for s in range(4):
            row = out[c, s]
            for p in range(P):
                m[p] = max(m[p], row[p])
    low = 0
    for p in range(P):
        low += m[p] < SCALE_THRESHOLD
    if low == 0:
        return
    for p in range(P):
        if m[p] < SCALE_THRESHOLD:
            for c in range(C):
                for s in range(4):
                    out[c, s, p] *= SCALE_FACTOR
            sc[p] += 1


@njit(cache=True, nogil=True)
def ensure_valid(d, tree, b):
    """Make the partial of ``d`` valid, recomputing invalid partials below it (post-order). Returns
    #combines."""
    neighbors, node_edges, edges, n_leaves, _ = tree
    valid, stack = b.valid, b.stack
    e = d >> 1
    head = edges[e, 1 - (d & 1)]
    if head < n_leaves or valid[d]:
        return 0
    n_done = 0
    top = 0
    stack[0] = d
    while top >= 0:
        cur = stack[top]
        ce0 = cur >> 1
        tail = edges[ce0, cur & 1]
        h = edges[ce0, 1 - (cur & 1)]
        pushed = False
        for slot in range(3):
            child = neighbors[h, slot]
            if child == tail or child < n_leaves:
                continue
            cd = directed_id(edges, node_edges[h, slot], h)
            if not valid[cd]:
                top += 1
                stack[top] = cd
                pushed = True
        if not pushed:
            _combine(cur, tree, b)
            valid[cur] = True
            n_done += 1
            top -= 1
    return n_done


@njit(cache=True, nogil=True)
def invalidate_toward(e, neighbors, node_edges, edges, valid, include_self, stack, whole):
    """Invalidate every partial whose subtree contains edge ``e`` (and ``e``'s own two if asked). ``whole``:
    walk every such partial; otherwise stop at those already invalid (the partials containing them are too,
    unless the topology changed since they were made valid: a topology change needs the whole walk)."""
    if include_self:
        valid[2 * e] = False
        valid[2 * e + 1] = False
    for k in range(2):
        # partials at node b = edges[e, k] looking away from c = edges[e, 1-k], then outward
        top = 0
        stack[0] = edges[e, k]
        stack[1] = edges[e, 1 - k]
        while top >= 0:
            b = stack[2 * top]
            c = stack[2 * top + 1]
            top -= 1
            for slot in range(3):
                a = neighbors[b, slot]
                if a < 0 or a == c:
                    continue
                # directed edge a -> b
                d = directed_id(edges, node_edges[b, slot], a)
                if not (whole or valid[d]):
                    continue
                valid[d] = False
                top += 1
                stack[2 * top] = a
                stack[2 * top + 1] = b


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def edge_site_likelihoods(e, tree, b, model):
    """Per-pattern likelihood (variable-site part, scaled) at edge ``e`` into ``b.site`` and ``b.site_scale``;
    both sides must be valid."""
    neighbors, _, edges, n_leaves, tip_codes = tree
    pmat, tip_pmat, clv, scale, out, out_scale = b.pmat, b.tip_pmat, b.clv, b.scale, b.site, b.site_scale
    freqs, weights = model.freqs, model.weights
    u = edges[e, 0]
    v = edges[e, 1]
    du = 2 * e + 1  # partial at u (from v to u)
    dv = 2 * e  # partial at v (from u to v)
    C = pmat.shape[1]
    P = out.shape[0]
    out[:] = 0.0
    out_scale[:] = 0
    if u < n_leaves and v < n_leaves:
        raise ValueError("an edge between two leaves only exists in a 2-leaf tree")
    if u < n_leaves:  # make v the leaf side if there is one
        u, v = v, u
        du, dv = dv, du
    # now u is internal
    ru = clv_index(du, neighbors, edges, n_leaves)
    rv = clv_index(dv, neighbors, edges, n_leaves) if v >= n_leaves else 0
    out_scale[:] += scale[ru]
    if v >= n_leaves:
        out_scale[:] += scale[rv]
    tmp = np.empty(P)
    for c in range(C):
        wc = weights[c]
        for i in range(4):
            A = clv[ru, c, i]
            if v < n_leaves:
                row = tip_pmat[e, c, i]
                codes = tip_codes[v]
                for p in range(P):
                    tmp[p] = row[codes[p]]
            else:
                B0, B1, B2, B3 = clv[rv, c, 0], clv[rv, c, 1], clv[rv, c, 2], clv[rv, c, 3]
                m0, m1, m2, m3 = pmat[e, c, i, 0], pmat[e, c, i, 1], pmat[e, c, i, 2], pmat[e, c, i, 3]
                for p in range(P):
                    tmp[p] = m0 * B0[p] + m1 * B1[p] + m2 * B2[p] + m3 * B3[p]
            f = wc * freqs[i]
            for p in range(P):
                out[p] += f * A[p] * tmp[p]


@njit(cache=True, nogil=True)
def sync_tree(tree, lengths, snap_edges, snap_lengths, b, model, mask_vectors):
    """Invalidate what changed since the snapshot, refresh those edges' matrices, update the snapshot.

    An edge whose end nodes changed invalidates its own two partials and every partial that contains
    it; an edge whose length changed invalidates the partials that contain it. Returns the first
    changed edge id (a good place to evaluate next) or -1 when nothing changed.
    """
    neighbors, node_edges, edges, _, _ = tree
    E = edges.shape[0]
    first = -1
    any_topo = False
    one = np.empty(1, dtype=np.int64)
    for e in range(E):
        topo = edges[e, 0] != snap_edges[e, 0] or edges[e, 1] != snap_edges[e, 1]
        any_topo = any_topo or topo
        if topo or lengths[e] != snap_lengths[e]:
            if first < 0:
                first = e
            one[0] = e
            compute_pmats(one, lengths, model, b, mask_vectors)
    if first < 0:
        return -1
    # invalidate after all pmats are fresh: the topology pass must see the whole new tree
    for e in range(first, E):
        topo = edges[e, 0] != snap_edges[e, 0] or edges[e, 1] != snap_edges[e, 1]
        if topo or lengths[e] != snap_lengths[e]:
            invalidate_toward(e, neighbors, node_edges, edges, b.valid, topo, b.stack, any_topo)
            snap_edges[e, 0] = edges[e, 0]
            snap_edges[e, 1] = edges[e, 1]
            snap_lengths[e] = lengths[e]
    return first


# ------------------------------------------------------------------------------ weighted sums of logarithms
# A site log-likelihood total and Newton's function values. ``weighted_log_sum`` takes each value's exponent
# bits apart and evaluates ``log(1 + u)`` of its mantissa by a polynomial, so the loop compiles to vector
# instructions (``np.log`` in a loop does not).

# log(1 + u) for u in [sqrt(1/2) - 1, sqrt(2) - 1): a degree-18 Chebyshev fit (absolute error 5e-15)
_LOG_POLY = (
    4.996003610813204e-16,
    0.9999999999999821,
    -0.5000000000003142,
    0.33333333334250254,
    -0.24999999994181302,
    0.199999998641054,
    -0.16666667041219524,
    0.1428572338247037,
    -0.12499992635720986,
    0.1111078830033677,
    -0.09999836623974005,
    0.0909727997283972,
    -0.08343149514219463,
    0.07625577420850116,
    -0.06971021116384507,
    0.06945945608784451,
    -0.0754056735964861,
    0.06409619232981266,
    -0.025985708552573622,
)
_LN2 = float(np.log(2.0))
_SMALLEST_NORMAL = 2.2250738585072014e-308


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def _split_exponent(bits, mantissa, exponent):
    """``x = m * 2**e`` with ``m`` in ``[sqrt(1/2), sqrt(2))`` for the float64 bit patterns ``bits``; returns
    whether every ``x`` is a positive normal number."""
    ok = 0
    for i in range(bits.shape[0]):
        b = bits[i]
        mb = (b & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000
        big = np.int64(mb > 0x3FF6A09E667F3BCD)
        mantissa[i] = mb - big * 0x0010000000000000
        raw = (b >> 52) & 0x7FF
        exponent[i] = np.float64(raw - 1023 + big)
        ok += np.int64(b <= 0) + np.int64(raw == 0) + np.int64(raw == 0x7FF)
    return ok == 0


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def _weighted_log_sum(m, e, w):
    total = 0.0
    for i in range(m.shape[0]):
        x = m[i] - 1.0
        p = _LOG_POLY[18]
        for k in range(17, -1, -1):  # Horner, highest power first
            p = p * x + _LOG_POLY[k]
        total += w[i] * (e[i] * _LN2 + p)
    return total


@njit(cache=True, nogil=True)
def weighted_log_sum(x, w):
    """``sum_i w[i] * log(x[i])``: vectorised (exponent bits and a polynomial, absolute error 5e-15 per
    term) for positive normal ``x``, ``np.log`` otherwise."""
    n = x.shape[0]
    mantissa = np.empty(n, np.int64)
    exponent = np.empty(n)
    if not _split_exponent(x.view(np.int64), mantissa, exponent):
        total = 0.0
        for i in range(n):
            total += w[i] * np.log(x[i])
        return total
    return _weighted_log_sum(mantissa.view(np.float64), exponent, w)


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def total_loglik(site_lik, site_scale, pattern_weights, inv_lik, pinv):
    """Sum of pattern-weighted log-likelihoods, adding the invariant-sites part when ``pinv > 0``."""
    if pinv <= 0.0:
        offset = 0.0
        for p in range(site_lik.shape[0]):
            offset += pattern_weights[p] * site_scale[p]
        return weighted_log_sum(site_lik, pattern_weights) - offset * LOG_SCALE
    total = 0.0
    for p in range(site_lik.shape[0]):
        lv = np.log(site_lik[p]) - site_scale[p] * LOG_SCALE
        if inv_lik[p] > 0.0:
            li = np.log(pinv * inv_lik[p])
            hi = lv if lv > li else li
            lo = li if lv > li else lv
            lv = hi + np.log1p(np.exp(lo - hi))
        total += pattern_weights[p] * lv
    return total
