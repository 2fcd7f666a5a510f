"""Fitch parsimony: the length of a tree, and the length change of every SPR move in one pass.

States are the alignment's uint8 masks (A=1, C=2, G=4, T=8; gaps and ambiguity codes are their
unions), taken per site pattern and weighted by the pattern counts, so lengths count sites. The kernels
hold a set of patterns as four bit planes of 64-pattern words (:func:`bit_planes`), as parsimony
programs do: one Fitch step is a few word operations for 64 patterns, and a weighted count is a
popcount per weight class of a word (patterns are ordered by weight, so most words hold one class).

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

from phylorl.phylo.spr import breadth_first, slot_of
from phylorl.phylo.tree import Tree

_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)


@njit(cache=True, nogil=True, inline="always")
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return (x * _H01) >> np.uint64(56)


@njit(cache=True, nogil=True, inline="always")
def _fitch_word(a, b, w):
    """Fitch of two sets' word ``w`` (4 bit planes each): the intersection where it is not empty, else the
    union; and the bits where it was empty (a union made)."""
    i0, i1, i2, i3 = a[0, w] & b[0, w], a[1, w] & b[1, w], a[2, w] & b[2, w], a[3, w] & b[3, w]
    empty = ~(i0 | i1 | i2 | i3)
    return (
        i0 | ((a[0, w] | b[0, w]) & empty),
        i1 | ((a[1, w] | b[1, w]) & empty),
        i2 | ((a[2, w] | b[2, w]) & empty),
        i3 | ((a[3, w] | b[3, w]) & empty),
        empty,
    )


@njit(cache=True, nogil=True)
def _fitch_into(out, a, b):
    for w in range(out.shape[1]):
        out[0, w], out[1, w], out[2, w], out[3, w], _ = _fitch_word(a, b, w)


@njit(cache=True, nogil=True, inline="always")
def _weigh(bits, w, classes):
    """Weighted count of the set ``bits`` of word ``w`` (``classes``: see :func:`bit_planes`)."""
    starts, masks, weights = classes
    total = 0.0
    for c in range(starts[w], starts[w + 1]):
        total += weights[c] * _popcount(bits & masks[c])
    return total


@njit(cache=True, nogil=True)
def bit_planes(tips, weights):
    """Leaf sets as bit planes: ``(planes, classes)``. ``planes`` uint64 ``[n_leaves, 4, W]``: bit ``j`` of
    word ``w`` in plane ``q`` says whether pattern ``64 w + j`` (patterns in order of decreasing weight) may
    be state ``q`` (A, C, G, T); the padding bits of the last word are full sets, which Fitch never empties.
    ``classes`` ``(starts [W + 1], masks [C], weights [C])``: the patterns of word ``w`` grouped by weight, so
    a count of patterns is ``sum weights[c] * popcount(bits & masks[c])`` over its word's few classes."""
    n_leaves, n_pat = tips.shape
    order = np.argsort(-weights, kind="mergesort")
    n_words = (n_pat + 63) // 64
    planes = np.zeros((n_leaves, 4, n_words), np.uint64)
    starts = np.zeros(n_words + 1, np.int64)
    masks = np.zeros(n_pat, np.uint64)
    class_weights = np.zeros(n_pat, np.float64)
    n_classes = 0
    for j in range(n_words * 64):
        w, bit = j >> 6, np.uint64(1) << np.uint64(j & 63)
        if j >= n_pat:
            for leaf in range(n_leaves):
                for q in range(4):
                    planes[leaf, q, w] |= bit
            continue
        col = order[j]
        for leaf in range(n_leaves):
            code = tips[leaf, col]
            for q in range(4):
                if (code >> q) & 1:
                    planes[leaf, q, w] |= bit
        if (j & 63) == 0 or weights[col] != class_weights[n_classes - 1]:
            class_weights[n_classes] = weights[col]
            n_classes += 1
        masks[n_classes - 1] |= bit
        starts[w + 1] = n_classes
    return planes, (starts, masks[:n_classes].copy(), class_weights[:n_classes].copy())


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
def directional_sets(neighbors, n_leaves, planes):
    """``down[v, k]``: Fitch sets (bit planes ``[4, W]``) of the subtree on ``neighbors[v, k]``'s side of that
    edge. ``planes`` from :func:`bit_planes`. Leaves' slots 1 and 2 stay zero."""
    down = np.zeros((neighbors.shape[0], 3, 4, planes.shape[2]), np.uint64)
    directional_into(neighbors, n_leaves, n_leaves, planes, down)
    return down


@njit(cache=True, nogil=True)
def directional_into(neighbors, n_leaves, root, planes, down):
    """Write :func:`directional_sets` into ``down`` for the tree reachable from the internal node ``root`` (a
    tree being built may leave nodes out: their rows are not written); every slot of a node reached, a leaf's
    too."""
    order, parent = breadth_first(neighbors, root, -1)
    for i in range(len(order) - 1, 0, -1):  # subtrees below each node, seen from its parent
        u = order[i]
        pu = parent[u]
        k = slot_of(neighbors, pu, u)
        if u < n_leaves:
            down[pu, k] = planes[u]
        else:
            j1, j2 = _other_slots(neighbors, u, pu)
            _fitch_into(down[pu, k], down[u, j1], down[u, j2])
    for i in range(1, len(order)):  # the rest of the tree, seen from each node
        u = order[i]
        pu = parent[u]
        m1, m2 = _other_slots(neighbors, pu, u)
        _fitch_into(down[u, slot_of(neighbors, u, pu)], down[pu, m1], down[pu, m2])


@njit(cache=True, nogil=True)
def _misses(a, b, s, classes):
    """Weighted count of patterns where ``fitch(a, b)`` does not meet ``s``."""
    total = 0.0
    for w in range(s.shape[1]):
        f0, f1, f2, f3, _ = _fitch_word(a, b, w)
        miss = ~((f0 & s[0, w]) | (f1 & s[1, w]) | (f2 & s[2, w]) | (f3 & s[3, w]))
        if miss:
            total += _weigh(miss, w, classes)
    return total


@njit(cache=True, nogil=True)
def regraft_space(n_nodes, n_words):
    """Scratch of :func:`regraft_deltas` for trees of up to ``n_nodes`` nodes: ``(near, stack, parent, depth,
    visited)``."""
    ints = np.empty((4, n_nodes), np.int64)
    return np.empty((n_nodes, 4, n_words), np.uint64), ints[0], ints[1], ints[2], ints[3]


@njit(cache=True, nogil=True)
def regraft_deltas(neighbors, n_leaves, down, classes, p, ks, radius, out, space):
    """The length change of moving the subtree ``neighbors[p, ks]`` onto each edge ``(x, y)`` of the remaining
    tree with ``d(p, x) <= radius`` (``radius < 0``: every edge), into ``out[y]``; afterwards ``x`` is
    ``parent[y]``. Returns the number of regrafts, their ``y`` in ``visited[:count]`` in the walk's order
    (depth first from the joined edge). ``space``: :func:`regraft_space`, ``(near, stack, parent, depth,
    visited)``; ``near`` (``[nodes, 4, W]``) the near-side set of the remaining tree across the edge into each
    node."""
    near, stack, parent, depth, visited = space
    s_set = down[p, ks]
    ka, kb = (ks + 1) % 3, (ks + 2) % 3
    base = _misses(down[p, ka], down[p, kb], s_set, classes)
    count = 0
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
            _fitch_into(near[c], other, down[a, jo])
            out[c] = _misses(near[c], down[a, j], s_set, classes) - base
            parent[c], depth[c], visited[count] = a, 2, c
            count += 1
            if c >= n_leaves and (radius < 0 or radius > 1):
                stack[top] = c
                top += 1
        while top > 0:
            top -= 1
            x = stack[top]
            i1, i2 = _other_slots(neighbors, x, parent[x])
            for j, jo in ((i1, i2), (i2, i1)):
                y = neighbors[x, j]
                _fitch_into(near[y], near[x], down[x, jo])
                out[y] = _misses(near[y], down[x, j], s_set, classes) - base
                parent[y], depth[y], visited[count] = x, depth[x] + 1, y
                count += 1
                if y >= n_leaves and (radius < 0 or depth[x] < radius):
                    stack[top] = y
                    top += 1
    return count


@njit(cache=True, nogil=True)
def _prune_table(neighbors, n_leaves, down, classes):
    """``table[p, k, y]``: length change of moving the subtree ``neighbors[p, k]`` onto the edge
    ``(x, y)`` of the remaining tree, ``x`` the end nearer the joined edge (NaN where no such move)."""
    n_nodes = neighbors.shape[0]
    table = np.full((n_nodes, 3, n_nodes), np.nan)
    space = regraft_space(n_nodes, down.shape[3])
    for p in range(n_leaves, n_nodes):
        for ks in range(3):
            regraft_deltas(neighbors, n_leaves, down, classes, p, ks, -1, table[p, ks], space)
    return table


@njit(cache=True, nogil=True)
def _unions(a, b, classes):
    """Weighted count of patterns where ``a`` and ``b`` do not meet (Fitch makes a union)."""
    total = 0.0
    for w in range(a.shape[1]):
        empty = _fitch_word(a, b, w)[4]
        if empty:
            total += _weigh(empty, w, classes)
    return total


@njit(cache=True, nogil=True)
def _length(neighbors, n_leaves, down, classes):
    """Weighted Fitch length: root on the edge from leaf 0 and count the unions."""
    # length = sum over internal nodes of unions made in a postorder from leaf 0's edge
    total = 0.0
    root = neighbors[0, 0]
    order, parent = breadth_first(neighbors, root, 0)
    for v in order:
        if v < n_leaves:
            continue
        j1, j2 = _other_slots(neighbors, v, parent[v])
        total += _unions(down[v, j1], down[v, j2], classes)
    # the root edge (leaf 0, root): one more union where the two sides do not meet
    k0 = slot_of(neighbors, root, 0)
    rest = np.empty_like(down[root, k0])
    _fitch_into(rest, down[root, (k0 + 1) % 3], down[root, (k0 + 2) % 3])
    return total + _unions(rest, down[root, k0], classes)


@njit(cache=True, nogil=True)
def _move_deltas(neighbors, n_leaves, planes, classes, moves):
    down = directional_sets(neighbors, n_leaves, planes)
    table = _prune_table(neighbors, n_leaves, down, classes)
    out = np.empty(moves.shape[0])
    for i in range(moves.shape[0]):
        p, s, y = moves[i, 0], moves[i, 1], moves[i, 3]
        out[i] = table[p, slot_of(neighbors, p, s), y]
    return out, _length(neighbors, n_leaves, down, classes)


@njit(cache=True, nogil=True)
def _tree_length(neighbors, n_leaves, tips, weights):
    planes, classes = bit_planes(tips, weights)
    return _length(neighbors, n_leaves, directional_sets(neighbors, n_leaves, planes), classes)


def parsimony_tips(codes: np.ndarray) -> np.ndarray:
    """Leaf state sets ``[n_taxa, n_patterns]`` uint8 from site-pattern codes (a C-contiguous copy)."""
    return np.ascontiguousarray(codes, dtype=np.uint8)


def parsimony_length(tree: Tree, tips: np.ndarray, weights: np.ndarray) -> float:
    """Weighted Fitch length of ``tree`` (``tips`` from :func:`parsimony_tips`, pattern ``weights``)."""
    return float(_tree_length(tree.neighbors, tree.n_leaves, tips, np.asarray(weights, np.float64)))


def spr_parsimony_deltas(
    tree: Tree, moves: np.ndarray, tips: np.ndarray, weights: np.ndarray, planes: tuple | None = None
) -> tuple[np.ndarray, float]:
    """``(deltas, length)``: the Fitch length change of each move ``[A]`` and the tree's length. ``planes``:
    :func:`bit_planes` of ``tips`` and ``weights``, when the caller keeps them (they depend on the alignment
    alone; made here otherwise)."""
    if tips.shape[0] != tree.n_leaves:
        raise ValueError(f"tips have {tips.shape[0]} rows for a tree of {tree.n_leaves} leaves")
    moves = np.ascontiguousarray(moves, dtype=np.int64).reshape(-1, 4)
    bits, classes = bit_planes(tips, np.asarray(weights, np.float64)) if planes is None else planes
    deltas, length = _move_deltas(tree.neighbors, tree.n_leaves, bits, classes, moves)
    return deltas, float(length)
