"""The features of a tree state written out move by move, straight from their definition (a test oracle).

The product computes the network's features in one place, the compiled record passes of :mod:`phylorl.records`
(slot tables, each side of each node walked once, the parsimony columns read from the records' ranked arrays).
This module computes the same columns per move from an :class:`~phylorl.types.Observation`, the way the
environment once did, so that tests can check those passes bit for bit.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from phylorl.phylo.spr import move_metadata_kernel, slot_of
from phylorl.records.features import MOVE_COLUMNS, edge_features_of, log_lengths, slot_row, slot_tables
from phylorl.records.parsimony import parsimony_table
from phylorl.records.reader import tree_tables
from phylorl.types import Observation


def observation_arrays(obs: Observation) -> dict[str, np.ndarray]:
    """The five arrays the network reads of ``obs``: ``node_features`` float32 ``[N, 1]`` (is_leaf),
    ``edge_index`` int64 ``[2, 2E]`` (both directions of every edge, edge ``e`` at columns ``2e`` and ``2e +
    1``), ``edge_attr`` float32 ``[2E, D]``, ``actions`` int64 ``[A, 4]`` and ``action_meta`` float32 ``[A,
    K]``."""
    neighbors = np.ascontiguousarray(obs.neighbors, np.int32)
    edges = np.ascontiguousarray(obs.edges, np.int32)
    node_edges, error = tree_tables(neighbors, edges, obs.n_leaves)
    assert not error, "not a binary tree"
    n_nodes, n_edges = neighbors.shape[0], edges.shape[0]
    node_features = np.zeros((n_nodes, 1), np.float32)
    node_features[: obs.n_leaves, 0] = 1.0
    edge_index = np.empty((2, 2 * n_edges), np.int64)
    edge_index[0, 0::2], edge_index[1, 0::2] = edges[:, 0], edges[:, 1]
    edge_index[0, 1::2], edge_index[1, 1::2] = edges[:, 1], edges[:, 0]
    lengths = np.asarray(obs.lengths, np.float32).astype(np.float64)
    moves = np.ascontiguousarray(obs.moves, np.int64)
    if obs.rich is None:
        edge_attr = np.repeat(np.asarray(obs.lengths, np.float32), 2)[:, None]
        meta, bad = move_metadata_kernel(neighbors, node_edges, lengths, moves)
        assert bad < 0
    else:
        support = np.asarray(obs.rich.support, np.float32).astype(np.float64)
        edge_attr = np.empty((2 * n_edges, 3), np.float32)
        edge_features(edge_attr, lengths, support)
        meta = rich_moves(
            neighbors,
            node_edges,
            lengths,
            obs.n_leaves,
            moves,
            support,
            np.asarray(obs.rich.deltas, np.float32).astype(np.float64),
            float(obs.rich.parsimony_length),
        )
    return {
        "node_features": node_features,
        "edge_index": edge_index,
        "edge_attr": edge_attr,
        "actions": moves,
        "action_meta": meta,
    }


@njit(cache=True, nogil=True)
def tree_constants(neighbors, node_edges, lengths, support, n_leaves, logs=None):
    """``(pruned, regraft, tree_length)``: the move feature columns that depend on one slot only.

    Slot ``(v, k)`` names the subtree on ``neighbors[v, k]``'s side of edge ``(v, neighbors[v, k])``.
    ``pruned[v, k]`` float32 ``[6]``: columns 0, 2, 5, 7, 9 and 13 of a move that prunes that side
    (``v = p``); ``regraft[v, k]`` ``[4]``: columns 1, 6, 8 and 14 of a move that regrafts onto that
    edge beyond ``v`` (``v = x``); the tree length (clipped below). ``logs``: :func:`log_lengths`, when the
    caller has them already.
    """
    n_nodes = neighbors.shape[0]
    pruned, regraft = np.empty((3 * n_nodes, 6), np.float32), np.empty((3 * n_nodes, 4), np.float32)
    length = slot_tables(
        pruned,
        regraft,
        neighbors,
        node_edges,
        lengths,
        support,
        n_leaves,
        log_lengths(lengths) if logs is None else logs,
    )
    return pruned.reshape(n_nodes, 3, 6), regraft.reshape(n_nodes, 3, 4), length


@njit(cache=True, nogil=True)
def move_row(out, i, constants, lengths, node_edges, p, ks, x, kx, distance, path):
    """Columns 0-9, 13 and 14 of move ``(p, s, x, y)`` into ``out[i]``, with ``s = neighbors[p, ks]``,
    ``y = neighbors[x, kx]``, ``distance = d(p, x) + 1`` and ``path`` the branch length from ``p``
    to ``x``; ``constants`` from :func:`tree_constants`."""
    slot_row(
        out,
        i,
        constants,
        p,
        ks,
        x,
        kx,
        np.float32(distance) / np.float32(10.0),
        (path + 0.5 * lengths[node_edges[x, kx]]) / constants[2],
    )


@njit(cache=True, nogil=True)
def edge_features(out, lengths, support):
    """Rich edge features ``[2E, 3]`` (both directions of each edge): log length, length / tree
    length (lengths clipped below) and split support."""
    edge_features_of(out, lengths, log_lengths(lengths), support)


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
        move_row(
            out,
            i,
            constants,
            lengths,
            node_edges,
            p,
            slot_of(neighbors, p, s),
            x,
            slot_of(neighbors, x, y),
            steps[x] + 1,
            path[x],
        )
    parsimony_columns(out, deltas, parsimony_length)
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
