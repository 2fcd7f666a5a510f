"""Fitch parsimony: the length of a tree, and the length change of every SPR move in one pass.

States are the alignment's uint8 masks (A=1, C=2, G=4, T=8; gaps and ambiguity codes are their
unions), taken per site pattern and weighted by the pattern counts, so lengths count sites.

For a move ``(p, s, x, y)`` (see :mod:`phylorl.phylo.spr`) let ``S`` be the pruned subtree's Fitch
set (the s-side of edge ``(p, s)``) and ``R`` the remaining tree, in which ``p``'s other
neighbours ``a`` and ``b`` are joined. Placing ``S`` on an edge ``e`` of ``R`` gives a tree of length
``L(R) + L(S) + c(e)`` where ``c(e)`` counts the sites at which the Fitch set of ``R`` rooted on
``e`` does not meet ``S`` (Fitch is exact under any rooting, and a three-way root resolves
arbitrarily). So a move changes the length by ``c(x, y) − c(a, b)``: only the Fitch sets of ``R``
rooted on each edge are needed. Those on the far side of an edge from the joined edge are the
original tree's directional sets; the near side's are rebuilt by one traversal outward from
``(a, b)`` per pruned subtree. All moves of a tree cost ``O(n^2 · patterns)`` byte operations.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from phylorl.phylo.spr import slot_of
from phylorl.phylo.tree import Tree


@njit(cache=True, nogil=True, inline="always")
def _fitch(a, b):
    both = a & b
    return both if both else a | b


@njit(cache=True, nogil=True)
def _breadth_first(neighbors, root, above):
    """``(order, parent)``: the nodes reached from ``root`` breadth first and each one's parent;
    ``above`` (a neighbour of ``root``, or -1) is ``root``'s parent and is not entered."""
    n_nodes = neighbors.shape[0]
    order = np.empty(n_nodes, np.int64)
    parent = np.full(n_nodes, -1, np.int64)
    seen = np.zeros(n_nodes, np.bool_)
    seen[root] = True
    if above >= 0:
        seen[above] = True
    parent[root] = above
    order[0] = root
    head, tail = 0, 1
    while head < tail:
        v = order[head]
        head += 1
        for k in range(3):
            u = neighbors[v, k]
            if u >= 0 and not seen[u]:
                seen[u] = True
                parent[u] = v
                order[tail] = u
                tail += 1
    return order[:tail], parent


@njit(cache=True, nogil=True)
def _other_slots(neighbors, v, skip):
    """The two slots of internal node ``v`` whose neighbours are not ``skip``."""
    first, second = -1, -1
    for j in range(3):
        if neighbors[v, j] != skip:
            if first < 0:
                first = j
            else:
                second = j
    return first, second


@njit(cache=True, nogil=True)
def directional_sets(neighbors, n_leaves, tips):
    """``down[v, k, :]``: Fitch sets of the subtree on ``neighbors[v, k]``'s side of that edge.

    ``tips`` uint8 ``[n_leaves, P]``. Leaves' slots 1 and 2 stay zero.
    """
    n_nodes = neighbors.shape[0]
    n_pat = tips.shape[1]
    down = np.zeros((n_nodes, 3, n_pat), np.uint8)
    order, parent = _breadth_first(neighbors, n_leaves, -1)
    for i in range(n_nodes - 1, 0, -1):  # subtrees below each node, seen from its parent
        u = order[i]
        pu = parent[u]
        k = slot_of(neighbors, pu, u)
        if u < n_leaves:
            down[pu, k, :] = tips[u]
        else:
            j1, j2 = _other_slots(neighbors, u, pu)
            for c in range(n_pat):
                down[pu, k, c] = _fitch(down[u, j1, c], down[u, j2, c])
    for i in range(1, n_nodes):  # the rest of the tree, seen from each internal node
        u = order[i]
        if u < n_leaves:
            continue
        pu = parent[u]
        j = slot_of(neighbors, u, pu)
        m1, m2 = _other_slots(neighbors, pu, u)
        for c in range(n_pat):
            down[u, j, c] = _fitch(down[pu, m1, c], down[pu, m2, c])
    return down


@njit(cache=True, nogil=True)
def _misses(a, b, s, weights):
    """Weighted count of patterns where ``fitch(a, b)`` does not meet ``s``."""
    total = 0.0
    for c in range(s.shape[0]):
        if _fitch(a[c], b[c]) & s[c] == 0:
            total += weights[c]
    return total


@njit(cache=True, nogil=True)
def _prune_table(neighbors, n_leaves, down, weights):
    """``table[p, k, y]``: length change of moving the subtree ``neighbors[p, k]`` onto the edge
    ``(x, y)`` of the remaining tree, ``x`` the end nearer the joined edge (NaN where no such move)."""
    n_nodes = neighbors.shape[0]
    n_pat = weights.shape[0]
    table = np.full((n_nodes, 3, n_nodes), np.nan)
    near = np.empty((n_nodes, n_pat), np.uint8)  # near-side set of R across the edge into each node
    stack = np.empty(n_nodes, np.int64)
    parent = np.empty(n_nodes, np.int64)
    for p in range(n_leaves, n_nodes):
        for ks in range(3):
            s_set = down[p, ks]
            ka, kb = (ks + 1) % 3, (ks + 2) % 3
            base = _misses(down[p, ka], down[p, kb], s_set, weights)
            for side in range(2):
                ki, ko = (ka, kb) if side == 0 else (kb, ka)
                a = neighbors[p, ki]
                if a < n_leaves:
                    continue
                other = down[p, ko]  # the joined edge's far side, seen from a
                j1, j2 = _other_slots(neighbors, a, p)
                top = 0
                for j, jo in ((j1, j2), (j2, j1)):
                    c = neighbors[a, j]
                    for q in range(n_pat):
                        near[c, q] = _fitch(other[q], down[a, jo, q])
                    table[p, ks, c] = _misses(near[c], down[a, j], s_set, weights) - base
                    if c >= n_leaves:
                        parent[c] = a
                        stack[top] = c
                        top += 1
                while top > 0:
                    top -= 1
                    x = stack[top]
                    i1, i2 = _other_slots(neighbors, x, parent[x])
                    for j, jo in ((i1, i2), (i2, i1)):
                        y = neighbors[x, j]
                        for q in range(n_pat):
                            near[y, q] = _fitch(near[x, q], down[x, jo, q])
                        table[p, ks, y] = _misses(near[y], down[x, j], s_set, weights) - base
                        if y >= n_leaves:
                            parent[y] = x
                            stack[top] = y
                            top += 1
    return table


@njit(cache=True, nogil=True)
def _length(neighbors, n_leaves, down, weights):
    """Weighted Fitch length: root on the edge from leaf 0 and count the unions."""
    n_pat = weights.shape[0]
    # length = sum over internal nodes of unions made in a postorder from leaf 0's edge
    total = 0.0
    root = neighbors[0, 0]
    order, parent = _breadth_first(neighbors, root, 0)
    for v in order:
        if v < n_leaves:
            continue
        j1, j2 = _other_slots(neighbors, v, parent[v])
        for c in range(n_pat):
            if down[v, j1, c] & down[v, j2, c] == 0:
                total += weights[c]
    # the root edge (leaf 0, root): one more union where the two sides do not meet
    k0 = slot_of(neighbors, root, 0)
    for c in range(n_pat):
        rest = _fitch(down[root, (k0 + 1) % 3, c], down[root, (k0 + 2) % 3, c])
        if rest & down[root, k0, c] == 0:
            total += weights[c]
    return total


@njit(cache=True, nogil=True)
def _move_deltas(neighbors, n_leaves, tips, weights, moves):
    down = directional_sets(neighbors, n_leaves, tips)
    table = _prune_table(neighbors, n_leaves, down, weights)
    out = np.empty(moves.shape[0])
    for i in range(moves.shape[0]):
        p, s, y = moves[i, 0], moves[i, 1], moves[i, 3]
        out[i] = table[p, slot_of(neighbors, p, s), y]
    return out, _length(neighbors, n_leaves, down, weights)


def parsimony_tips(codes: np.ndarray) -> np.ndarray:
    """Leaf state sets ``[n_taxa, n_patterns]`` uint8 from site-pattern codes (a C-contiguous copy)."""
    return np.ascontiguousarray(codes, dtype=np.uint8)


def parsimony_length(tree: Tree, tips: np.ndarray, weights: np.ndarray) -> float:
    """Weighted Fitch length of ``tree`` (``tips`` from :func:`parsimony_tips`, pattern ``weights``)."""
    down = directional_sets(tree.neighbors, tree.n_leaves, tips)
    return float(_length(tree.neighbors, tree.n_leaves, down, np.asarray(weights, np.float64)))


def spr_parsimony_deltas(tree: Tree, moves: np.ndarray, tips: np.ndarray,
                         weights: np.ndarray) -> tuple[np.ndarray, float]:
    """``(deltas, length)``: the Fitch length change of each move ``[A]`` and the tree's length."""
    if tips.shape[0] != tree.n_leaves:
        raise ValueError(f"tips have {tips.shape[0]} rows for a tree of {tree.n_leaves} leaves")
    moves = np.ascontiguousarray(moves, dtype=np.int64).reshape(-1, 4)
    deltas, length = _move_deltas(tree.neighbors, tree.n_leaves, tips, np.asarray(weights, np.float64), moves)
    return deltas, float(length)
