"""One stored state read into a batch's graph arrays: the compiled steps :mod:`phylorl.records.batch` runs
for each state of a batch (its scratch, its arrays read from the record, its tree written as a graph)."""

from __future__ import annotations

import numpy as np
from numba import njit

from .features import edge_features_of
from .reader import FLOAT32, FLOAT64, array_header, read_floats, read_ints


@njit(cache=True, nogil=True)
def state_work(n_nodes):
    """Scratch of one state of up to ``n_nodes`` nodes, made once a batch and used for each state in turn: the
    arrays :func:`read_tree` reads (neighbours and edges flat, lengths and support as stored and as float64,
    the parsimony length) and :func:`~phylorl.records.reader.tree_tables_into`'s."""
    return (
        np.empty(3 * n_nodes, np.int32),
        np.empty(2 * n_nodes, np.int32),
        np.empty(n_nodes, np.float32),
        np.empty(n_nodes, np.float32),
        np.empty(n_nodes),
        np.empty(n_nodes),
        np.empty(1),
        np.empty((n_nodes, 3), np.int32),
        np.empty(n_nodes, np.bool_),
        np.empty(n_nodes, np.int64),
    )


@njit(cache=True, nogil=True)
def read_tree(buf, where, n_leaves, rich, space):
    """``(ok, neighbors, edges, lengths, deltas, parsimony_length, support)`` of one stored state (lengths and
    support as float64, the features' arithmetic; their values are the stored float32 ones); ``deltas``
    (rich form) is where the parsimony changes are stored, ``(buf, array header)``: they are read in place
    (:mod:`phylorl.records.parsimony`). The arrays are views of ``space`` (:func:`state_work`), valid
    until the next state is read."""
    n_nodes = 2 * n_leaves - 2
    neighbors, edges = space[0][: 3 * n_nodes], space[1][: 2 * n_nodes - 2]
    lengths, support, scalar = space[2][: n_nodes - 1], space[3][: n_nodes - 1], space[6]
    end = buf.shape[0]
    ok = (
        read_ints(buf, array_header(buf, where[0], end), neighbors)
        and read_ints(buf, array_header(buf, where[1], end), edges)
        and read_floats(buf, array_header(buf, where[2], end), lengths, FLOAT32)
    )
    deltas = (buf, array_header(buf, where[3], end) if rich else (0, 0, 0, 0, 0, 0, 0, -1))
    scalar[0] = 0.0
    if ok and rich:
        ok = read_floats(buf, array_header(buf, where[4], end), scalar, FLOAT64) and read_floats(
            buf, array_header(buf, where[5], end), support, FLOAT32
        )
    wide_lengths, wide_support = space[4][: n_nodes - 1], space[5][: n_nodes - 1]
    for e in range(n_nodes - 1):
        wide_lengths[e] = lengths[e]
        wide_support[e] = support[e] if rich else 0.0
    table, pairs = neighbors.reshape(n_nodes, 3), edges.reshape(n_nodes - 1, 2)
    return ok, table, pairs, wide_lengths, deltas, scalar[0], wide_support


@njit(cache=True, nogil=True)
def tree_graph(tree, logs, n_leaves, rich, offset, edge_offset, graph):
    """One tree (``tree``: :func:`read_tree`'s arrays after ``ok``) into a batch side's graph arrays ``graph``
    (:func:`empty_graphs`) at node ``offset`` and directed edge ``2 * edge_offset`` (``logs``:
    :func:`~phylorl.records.features.log_lengths` of the rich form). False (the rows then partly written) when
    an edge names a node the tree does not have or a node has more than three edges: every write stays in the
    tree's rows whatever the arrays hold."""
    neighbors, edges, lengths, support = tree[0], tree[1], tree[2], tree[5]
    x, edge_index, edge_attr, table, table_attr, mask = graph
    n_nodes, n_edges = neighbors.shape[0], edges.shape[0]
    for v in range(n_nodes):
        x[offset + v, 0] = 1.0 if v < n_leaves else 0.0
        for k in range(3):
            table[offset + v, k] = offset + v
            mask[offset + v, k] = False
            for c in range(table_attr.shape[2]):
                table_attr[offset + v, k, c] = 0.0
    rows = edge_attr[2 * edge_offset : 2 * (edge_offset + n_edges)]
    if rich:
        edge_features_of(rows, lengths, logs, support)
    fill = np.zeros(n_nodes, np.int64)
    for e in range(n_edges):
        u, v = edges[e, 0], edges[e, 1]
        if not (0 <= u < n_nodes and 0 <= v < n_nodes and fill[u] < 3 and fill[v] < 3 and u != v):
            return False
        c = 2 * (edge_offset + e)
        edge_index[0, c], edge_index[1, c] = offset + u, offset + v
        edge_index[0, c + 1], edge_index[1, c + 1] = offset + v, offset + u
        if not rich:
            rows[2 * e, 0] = lengths[e]
            rows[2 * e + 1, 0] = lengths[e]
        for a, b in ((v, u), (u, v)):  # edge into a from b: a's next free slot, in edge order
            k = fill[a]
            table[offset + a, k] = offset + b
            for c in range(rows.shape[1]):
                table_attr[offset + a, k, c] = rows[2 * e, c]
            mask[offset + a, k] = True
            fill[a] = k + 1
    return True


@njit(cache=True, nogil=True)
def empty_graphs(n_nodes, n_edges, width):
    """Empty graph arrays of one batch side: x, edge_index, edge_attr, neighbours, their features, mask."""
    return (
        np.empty((n_nodes, 1), np.float32),
        np.empty((2, 2 * n_edges), np.int64),
        np.empty((2 * n_edges, width), np.float32),
        np.empty((n_nodes, 3), np.int64),
        np.empty((n_nodes, 3, width), np.float32),
        np.empty((n_nodes, 3), np.bool_),
    )
