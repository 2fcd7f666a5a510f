"""What the network reads of a tree state: the feature sets, computed from a stored state's arrays (compiled).

``basic`` (as first designed): ``is_leaf`` per node, the raw branch length per edge, and three numbers per
move (pruned edge length, regraft edge length, ``d(p, x) + 1``). Agents trained on it never see the alignment
and do not find good trees.

``rich`` (the default): normalised geometry and alignment-aware signals that cost no likelihood evaluation.

* per node: ``is_leaf``;
* per edge: ``log(length)``, ``length / tree length`` and the support of its split in a fast bootstrap of NJ
  trees (:mod:`phylorl.phylo.bootstrap`, computed once per alignment);
* per move, in this order:

  ====  =======================================================================================
  0     ``log`` length of the pruned edge ``(p, s)``
  1     ``log`` length of the regraft edge ``(x, y)``
  2     ``log`` length of the edge the prune leaves behind (``(a, p)`` + ``(p, b)``)
  3     prune–regraft distance ``d(p, x) + 1`` in edges, / 10
  4     the same distance in branch length (``p`` to the middle of ``(x, y)``), / tree length
  5     leaves of the pruned subtree / ``n``
  6     leaves beyond the regraft edge (``y``'s side) / ``n``
  7     branch length inside the pruned subtree / tree length
  8     branch length beyond the regraft edge / tree length
  9     longest branch of the pruned subtree / tree length
  10    parsimony change of the move (Fitch, weighted sites), × 100 / the tree's parsimony length
  11    parsimony change − the best move's change, in steps, clipped to 20, / 5
  12    rank of the parsimony change among the state's moves, 0 (best) … 1 (worst), ties averaged
  13    bootstrap support of the pruned edge's split (1 for a leaf edge)
  14    bootstrap support of the regraft edge's split
  ====  =======================================================================================

The parsimony changes and supports come with the state (:class:`~phylorl.types.RichParts`, computed by the
environment where the alignment is); everything else follows from the tree. Most move columns depend on one
slot only (the pruned slot ``(p, k)`` or the regraft slot ``(x, j)``): :func:`slot_tables` computes those per
slot, :mod:`phylorl.records.moves` puts each move's row together.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from phylorl.phylo.spr import slot_of

MIN_LENGTH = 1e-6
MOVE_COLUMNS = 15
EDGE_COLUMNS = 3


@njit(cache=True, nogil=True)
def slot_tables(pruned, regraft, neighbors, node_edges, lengths, support, n_leaves, logs):
    """The move columns that depend on one slot only, into flat tables, slot ``(v, k)`` (the subtree on
    ``neighbors[v, k]``'s side of edge ``(v, neighbors[v, k])``) at row ``3 v + k``: ``pruned`` float32 ``[3N,
    6]``, columns 0, 2, 5, 7, 9 and 13 of a move that prunes that side (``v = p``); ``regraft`` ``[3N, 4]``,
    columns 1, 6, 8 and 14 of a move that regrafts onto that edge beyond ``v`` (``v = x``). Every row is
    written (zeros at a leaf's unused slots); returns the tree length."""
    n_nodes = neighbors.shape[0]
    slots = np.empty((3 * n_nodes, 2), np.int64)
    count = 0
    for v in range(n_nodes):
        for k in range(3):
            if neighbors[v, k] >= 0:
                slots[count, 0], slots[count, 1] = v, k
                count += 1
            else:  # loops: numba's slice assignment costs more than these few elements
                for c in range(pruned.shape[1]):
                    pruned[3 * v + k, c] = 0.0
                for c in range(regraft.shape[1]):
                    regraft[3 * v + k, c] = 0.0
    length, sums = tree_length(lengths), slot_sums(neighbors, node_edges, lengths, n_leaves)
    slot_columns(
        pruned, regraft, slots[:count], neighbors, node_edges, lengths, support, n_leaves, sums, length, logs
    )
    return length


@njit(cache=True, nogil=True)
def tree_length(lengths):
    """The tree's length (its branch lengths' sum, clipped below), as the features divide by it."""
    return max(lengths.sum(), MIN_LENGTH)


@njit(cache=True, nogil=True)
def log_lengths(lengths):
    """float64 ``[E]``: the log of each branch length, clipped below (edge and move features)."""
    out = np.empty(lengths.shape[0])
    for e in range(lengths.shape[0]):
        out[e] = np.log(max(lengths[e], MIN_LENGTH))
    return out


@njit(cache=True, nogil=True)
def slot_columns(
    pruned, regraft, slots, neighbors, node_edges, lengths, support, n_leaves, sums, length, logs
):
    """The rows of :func:`slot_tables` at each slot ``(v, k)`` of ``slots`` (int64 ``[S, 2]``) into the flat
    tables ``pruned`` and ``regraft`` (:func:`slot_tables`: row ``3 v + k``; ``sums``: :func:`slot_sums`,
    ``length``: :func:`tree_length`, ``logs``: :func:`log_lengths`, read at these slots' edges only)."""
    leaves, total, longest = sums
    for i in range(slots.shape[0]):
        v, k = slots[i, 0], slots[i, 1]
        row, edge = 3 * v + k, node_edges[v, k]
        log_length = logs[edge]
        joined = 0.0
        if v >= n_leaves:  # only internal nodes are pruned from
            for j in range(3):
                if j != k:
                    joined += lengths[node_edges[v, j]]
        share, part = leaves[v, k] / n_leaves, total[v, k] / length  # each once, for both tables
        pruned[row, 0] = log_length
        pruned[row, 1] = np.log(max(joined, MIN_LENGTH)) if v >= n_leaves else 0.0
        pruned[row, 2] = share
        pruned[row, 3] = part
        pruned[row, 4] = longest[v, k] / length
        pruned[row, 5] = support[edge]
        regraft[row, 0] = log_length
        regraft[row, 1] = share
        regraft[row, 2] = part
        regraft[row, 3] = support[edge]


@njit(cache=True, nogil=True)
def slot_sums(neighbors, node_edges, lengths, n_leaves):
    """``(leaves, total, longest)`` float64 ``[N, 3]``: per slot, the leaves, the summed branch length and the
    longest branch of the subtree on that side. Linear in the tree's size: the subtrees below each node
    (rooted at leaf 0) first, then the rest of the tree above each node."""
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
    return leaves, total, longest


@njit(cache=True, nogil=True)
def slot_row(out, i, constants, p, ks, x, kx, distance_column, path_column):
    """Columns 0-9, 13 and 14 of move ``(p, neighbors[p, ks], x, neighbors[x, kx])`` into ``out[i]``: columns
    3 and 4 given (``(d(p, x) + 1) / 10`` and the path to the middle of the regraft edge / tree length), the
    rest from the slot tables in ``constants`` (``(pruned [N, 3, 6], regraft [N, 3, 4], tree length)``)."""
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
def edge_features_of(out, lengths, logs, support):
    """Rich edge features ``[2E, 3]`` (both directions of each edge): log length (``logs``:
    :func:`log_lengths`), length / tree length (lengths clipped below) and split support."""
    total = 0.0
    for e in range(lengths.shape[0]):
        total += max(lengths[e], MIN_LENGTH)
    for e in range(lengths.shape[0]):
        clipped = max(lengths[e], MIN_LENGTH)
        out[2 * e, 0] = out[2 * e + 1, 0] = logs[e]
        out[2 * e, 1] = out[2 * e + 1, 1] = clipped / total
        out[2 * e, 2] = out[2 * e + 1, 2] = support[e]
