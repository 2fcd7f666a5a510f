"""Compiled pieces of the rich features (:mod:`phylorl.env.features`).

The environment (:func:`~phylorl.env.features.rich_arrays`, moves given) and the learner's batch
decoder (:mod:`phylorl.env.batch_kernels`, moves enumerated while the features are written) build
the features from these same functions, so both give the same bits.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from phylorl.phylo.spr import slot_of

MIN_LENGTH = 1e-6
MOVE_COLUMNS = 15
EDGE_COLUMNS = 3


@njit(cache=True, nogil=True)
def tree_constants(neighbors, node_edges, lengths, support, n_leaves):
    """``(pruned, regraft, tree_length)``: the move feature columns that depend on one slot only.

    Slot ``(v, k)`` names the subtree on ``neighbors[v, k]``'s side of edge ``(v, neighbors[v, k])``.
    ``pruned[v, k]`` float32 ``[6]``: columns 0, 2, 5, 7, 9 and 13 of a move that prunes that side
    (``v = p``); ``regraft[v, k]`` ``[4]``: columns 1, 6, 8 and 14 of a move that regrafts onto that
    edge beyond ``v`` (``v = x``); the tree length (clipped below). Subtree leaves, branch length and
    longest branch come from the subtrees below each node (rooted at leaf 0), then the rest of the tree above each node. Linear in the tree's size: the
    subtrees below each node (rooted at leaf 0) first, then the rest of the tree above each node.
    """
    n_nodes = neighbors.shape[0]
    leaves = np.zeros((n_nodes, 3))
    total = np.zeros((n_nodes, 3))
    longest = np.zeros((n_nodes, 3))
    order = np.empty(n_nodes, np.int64)  # breadth-first from leaf 0: parents before children
    up = np.full(n_nodes, -1, np.int64)  # slot of each node's parent in its row
    order[0], seen, i = 0, 1, 0
    while i < seen:
        v = order[i]
        for k in range(3):
            u = neighbors[v, k]
            if u >= 0 and (up[v] < 0 or k != up[v]):
                up[u] = slot_of(neighbors, u, v)
                order[seen] = u
                seen += 1
        i += 1
    for i in range(n_nodes - 1, 0, -1):  # below: slot (parent, k) pointing at v from v's own subtree
        v = order[i]
        parent = neighbors[v, up[v]]
        leaf, length_sum, top = (1.0 if v < n_leaves else 0.0), 0.0, 0.0
        for j in range(3):
            w = neighbors[v, j]
            if j != up[v] and w >= 0:
                edge = lengths[node_edges[v, j]]
                leaf += leaves[v, j]
                length_sum += edge + total[v, j]
                top = max(top, edge, longest[v, j])
        k = slot_of(neighbors, parent, v)
        leaves[parent, k], total[parent, k], longest[parent, k] = leaf, length_sum, top
    for i in range(n_nodes):  # above: slot (v, up[v]) from the parent's other slots
        v = order[i]
        if i == 0:
            continue
        parent = neighbors[v, up[v]]
        leaf, length_sum, top = (1.0 if parent < n_leaves else 0.0), 0.0, 0.0
        for j in range(3):
            w = neighbors[parent, j]
            if w >= 0 and w != v:
                edge = lengths[node_edges[parent, j]]
                leaf += leaves[parent, j]
                length_sum += edge + total[parent, j]
                top = max(top, edge, longest[parent, j])
        leaves[v, up[v]], total[v, up[v]], longest[v, up[v]] = leaf, length_sum, top
    return _slot_columns(neighbors, node_edges, lengths, support, n_leaves, leaves, total, longest)


@njit(cache=True, nogil=True)
def _slot_columns(neighbors, node_edges, lengths, support, n_leaves, leaves, total, longest):
    tree_length = max(lengths.sum(), MIN_LENGTH)
    pruned = np.zeros((neighbors.shape[0], 3, 6), np.float32)
    regraft = np.zeros((neighbors.shape[0], 3, 4), np.float32)
    log_lengths = np.empty(lengths.shape[0])
    for e in range(lengths.shape[0]):
        log_lengths[e] = np.log(max(lengths[e], MIN_LENGTH))
    for v in range(neighbors.shape[0]):
        for k in range(3):
            if neighbors[v, k] < 0:
                continue
            edge = node_edges[v, k]
            log_length = log_lengths[edge]
            pruned[v, k, 0] = log_length
            if v >= n_leaves:  # only internal nodes are pruned from
                joined = 0.0
                for j in range(3):
                    if j != k:
                        joined += lengths[node_edges[v, j]]
                pruned[v, k, 1] = np.log(max(joined, MIN_LENGTH))
            pruned[v, k, 2] = leaves[v, k] / n_leaves
            pruned[v, k, 3] = total[v, k] / tree_length
            pruned[v, k, 4] = longest[v, k] / tree_length
            pruned[v, k, 5] = support[edge]
            regraft[v, k, 0] = log_length
            regraft[v, k, 1] = leaves[v, k] / n_leaves
            regraft[v, k, 2] = total[v, k] / tree_length
            regraft[v, k, 3] = support[edge]
    return pruned, regraft, tree_length


@njit(cache=True, nogil=True)
def move_row(out, i, constants, lengths, node_edges, p, ks, x, kx, distance, path):
    """Columns 0-9, 13 and 14 of move ``(p, s, x, y)`` into ``out[i]``, with ``s = neighbors[p, ks]``,
    ``y = neighbors[x, kx]``, ``distance = d(p, x) + 1`` and ``path`` the branch length from ``p``
    to ``x``; ``constants`` from :func:`tree_constants`."""
    slot_row(out, i, constants, p, ks, x, kx, np.float32(distance) / np.float32(10.0),
             (path + 0.5 * lengths[node_edges[x, kx]]) / constants[2])


@njit(cache=True, nogil=True)
def slot_row(out, i, constants, p, ks, x, kx, distance_column, path_column):
    """:func:`move_row` with its columns 3 and 4 given (``(d(p, x) + 1) / 10`` and the path to the middle
    of the regraft edge / tree length): the rest come from the slot tables in ``constants``."""
    pruned, regraft = constants[0], constants[1]
    out[i, 0] = pruned[p, ks, 0]
    out[i, 1] = regraft[x, kx, 0]
    out[i, 2] = pruned[p, ks, 1]
    out[i, 3] = distance_column
    out[i, 4] = path_column
    out[i, 5] = pruned[p, ks, 2]
    out[i, 6] = regraft[x, kx, 1]
    out[i, 7] = pruned[p, ks, 3]
    out[i, 8] = regraft[x, kx, 2]
    out[i, 9] = pruned[p, ks, 4]
    out[i, 13] = pruned[p, ks, 5]
    out[i, 14] = regraft[x, kx, 3]


@njit(cache=True, nogil=True)
def slot_leaves(neighbors, n_leaves):
    """Leaves on ``neighbors[v, k]``'s side of edge ``(v, neighbors[v, k])``, int64 ``[N, 3]`` (0 in padding)."""
    n_nodes = neighbors.shape[0]
    order = np.empty(n_nodes, np.int64)  # breadth-first from leaf 0: parents before children
    parent = np.full(n_nodes, -1, np.int64)
    below = np.zeros(n_nodes, np.int64)  # leaves in each node's subtree (rooted at leaf 0)
    order[0], parent[0], seen, i = 0, 0, 1, 0
    while i < seen:
        v = order[i]
        for k in range(3):
            u = neighbors[v, k]
            if u >= 0 and u != parent[v]:
                parent[u] = v
                order[seen] = u
                seen += 1
        i += 1
    for i in range(n_nodes - 1, 0, -1):
        v = order[i]
        below[v] += 1 if v < n_leaves else 0
        below[parent[v]] += below[v]
    out = np.zeros((n_nodes, 3), np.int64)
    for v in range(n_nodes):
        for k in range(3):
            u = neighbors[v, k]
            if u >= 0:
                out[v, k] = below[u] if parent[u] == v and u != 0 else n_leaves - below[v]
    return out


@njit(cache=True, nogil=True)
def parsimony_columns(out, deltas, parsimony_length):
    """Columns 10-12 of every move into ``out[:, 10:13]``, from the moves' parsimony changes (float64
    ``[A]``; see :func:`parsimony_table`)."""
    table = np.empty((deltas.shape[0], 3), np.float32)
    rows = np.empty(deltas.shape[0], np.int32)
    parsimony_table(deltas, parsimony_length, table, rows, 0)
    for i in range(deltas.shape[0]):
        out[i, 10], out[i, 11], out[i, 12] = table[rows[i], 0], table[rows[i], 1], table[rows[i], 2]


@njit(cache=True, nogil=True)
def parsimony_table(deltas, parsimony_length, table, rows, first):
    """Columns 10-12 of the moves with parsimony changes ``deltas`` (float64 or float32 ``[A]``) as distinct rows
    of ``table`` (float32 ``[., 3]``, written from row ``first``), and each move's row into ``rows[i]``
    (``first`` included); returns the rows written (at most ``A``). Ranks are counted exactly, with a
    table per distinct change when the changes are whole numbers in a short range (Fitch changes of
    weighted sites are; one row per distinct change), by sorting otherwise (one row per move)."""
    n = deltas.shape[0]
    if n == 0:
        return 0
    lo, hi, whole = deltas[0], deltas[0], True
    for d in deltas:
        lo, hi = min(lo, d), max(hi, d)
        whole = whole and d == np.floor(d)
    if whole and hi - lo <= 4 * n + 64:
        counts = np.zeros(int(hi - lo) + 1, np.int64)
        for d in deltas:
            counts[int(d - lo)] += 1
        row = np.empty(counts.shape[0], np.int32)
        below, written = 0, 0
        for j in range(counts.shape[0]):
            if counts[j]:
                row[j] = first + written
                parsimony_row(table, first + written, np.float64(lo) + j, np.float64(lo), below, counts[j], n,
                              parsimony_length, 0)
                written += 1
            below += counts[j]
        for i in range(n):
            rows[i] = row[int(deltas[i] - lo)]
        return written
    ordered = np.sort(deltas)
    for i in range(n):
        below = np.searchsorted(ordered, deltas[i], side="left")
        equal = np.searchsorted(ordered, deltas[i], side="right") - below
        parsimony_row(table, first + i, np.float64(deltas[i]), np.float64(lo), below, equal, n, parsimony_length, 0)
        rows[i] = first + i
    return n


@njit(cache=True, nogil=True)
def parsimony_one(out, row, deltas, i, parsimony_length):
    """Columns 10-12 of move ``i`` alone into ``out[row]`` (one pass over the changes)."""
    lowest, below, equal = deltas[i], 0, 0
    for d in deltas:
        lowest = min(lowest, d)
        below += d < deltas[i]
        equal += d == deltas[i]
    parsimony_row(out, row, np.float64(deltas[i]), np.float64(lowest), below, equal, deltas.shape[0], parsimony_length,
                  10)


@njit(cache=True, nogil=True)
def parsimony_row(out, i, delta, lowest, below, equal, n, parsimony_length, at):
    """Columns 10-12 (into ``out[i, at:at + 3]``) of a move with parsimony change ``delta``: relative
    change, change above the best move's (clipped), and its rank among the state's ``n`` moves,
    0 (best) to 1 (worst), ties sharing their mean rank."""
    out[i, at] = delta * 100.0 / max(parsimony_length, 1.0)
    out[i, at + 1] = min(delta - lowest, 20.0) / 5.0
    out[i, at + 2] = (below + 0.5 * (equal - 1)) / max(n - 1, 1)


@njit(cache=True, nogil=True)
def edge_features(out, lengths, support):
    """Rich edge features ``[2E, 3]`` (both directions of each edge): log length, length / tree
    length (lengths clipped below) and split support."""
    total = 0.0
    for e in range(lengths.shape[0]):
        total += max(lengths[e], MIN_LENGTH)
    for e in range(lengths.shape[0]):
        clipped = max(lengths[e], MIN_LENGTH)
        out[2 * e, 0] = out[2 * e + 1, 0] = np.log(clipped)
        out[2 * e, 1] = out[2 * e + 1, 1] = clipped / total
        out[2 * e, 2] = out[2 * e + 1, 2] = support[e]


@njit(cache=True, nogil=True)
def rich_moves(neighbors, node_edges, lengths, n_leaves, moves, support, deltas, parsimony_length):
    """Rich move features float32 ``[A, 15]`` of given ``moves`` (any order)."""
    n_nodes = neighbors.shape[0]
    constants = tree_constants(neighbors, node_edges, lengths, support, n_leaves)
    out = np.empty((moves.shape[0], MOVE_COLUMNS), np.float32)
    steps = np.empty(n_nodes, np.int64)
    path = np.empty(n_nodes)
    stack = np.empty(n_nodes, np.int64)
    last_p = -1
    for i in range(moves.shape[0]):
        p, s, x, y = moves[i, 0], moves[i, 1], moves[i, 2], moves[i, 3]
        if p != last_p:  # edges and branch length from p to every node, summed outward from p
            steps[:] = -1
            steps[p] = 0
            path[p] = 0.0
            stack[0] = p
            top = 1
            while top > 0:
                top -= 1
                u = stack[top]
                for j in range(3):
                    w = neighbors[u, j]
                    if w >= 0 and steps[w] < 0:
                        steps[w] = steps[u] + 1
                        length = lengths[node_edges[u, j]]
                        path[w] = path[u] + length
                        stack[top] = w
                        top += 1
            last_p = p
        move_row(out, i, constants, lengths, node_edges, p, slot_of(neighbors, p, s), x, slot_of(neighbors, x, y),
                 steps[x] + 1, path[x])
    parsimony_columns(out, deltas, parsimony_length)
    return out
