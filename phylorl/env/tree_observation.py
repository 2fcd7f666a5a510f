"""Observations built from tree arrays: what the environment emits and what a record rebuilds.

:func:`build_observation` turns a :class:`~phylorl.phylo.tree.Tree` and its moves into the
network's :class:`~phylorl.types.Observation` and attaches a
:class:`~phylorl.types.MoveSource`. :func:`observation_from_tree` goes the other way
round for a stored tree: from the neighbour table, the edge list and the float32 branch lengths it
rebuilds the same five arrays bit for bit (moves and their metadata are a deterministic function
of the neighbour table's slot order and the lengths). :func:`tree_arrays_of` checks that an
observation is exactly what :func:`observation_from_tree` would rebuild from its source, and
returns the tree arrays to store.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from phylorl.phylo.spr import enumerate_moves_kernel, move_metadata_kernel, slot_of
from phylorl.phylo.tree import Tree

from phylorl.types import MoveSource, Observation
from phylorl.wire.section_cache import fingerprint

_TABLE_ERRORS = {
    1: "the node and edge counts do not fit a binary tree with this many leaves",
    2: "a neighbour table row is malformed (leaves have one neighbour, internal nodes three)",
    3: "the edge list does not match the neighbour table",
    4: "the edges do not form a connected tree",
    5: "it gives an invalid move (a bug in the move enumeration)",
}


def build_observation(tree: Tree, moves: np.ndarray, meta: np.ndarray, *, radius: int | None = None,
                      dedupe: bool = True) -> Observation:
    """The network's view of ``tree`` with ``moves`` (``enumerate_moves(tree, radius, dedupe)``) and ``meta``."""
    n_nodes = tree.n_nodes
    node_features = np.zeros((n_nodes, 1), dtype=np.float32)
    node_features[: tree.n_leaves, 0] = 1.0
    edge_index = np.empty((2, 2 * tree.n_edges), dtype=np.int64)
    edge_index[0, 0::2] = tree.edges[:, 0]
    edge_index[1, 0::2] = tree.edges[:, 1]
    edge_index[0, 1::2] = tree.edges[:, 1]
    edge_index[1, 1::2] = tree.edges[:, 0]
    edge_attr = np.repeat(tree.lengths.astype(np.float32), 2)[:, None]
    source = MoveSource(np.array(tree.neighbors, dtype=np.int32), tree.n_leaves,
                        -1 if radius is None else int(radius), bool(dedupe))
    return Observation(node_features, edge_index, edge_attr, moves.astype(np.int64, copy=False), meta, source)


def observation_from_tree(neighbors: np.ndarray, edges: np.ndarray, lengths: np.ndarray, n_leaves: int,
                          radius: int, dedupe: bool, node_features: np.ndarray | None = None) -> Observation:
    """Rebuild an observation from tree arrays; ``ValueError`` when they do not form a binary tree.

    ``neighbors`` ``[N, 3]`` (slot order as enumerated, -1 padding), ``edges`` ``[N-1, 2]`` (edge
    ids = row order), ``lengths`` float32 ``[N-1]``; ``node_features`` defaults to ``is_leaf``.
    """
    neighbors = np.ascontiguousarray(neighbors, dtype=np.int32)
    edges = np.ascontiguousarray(edges, dtype=np.int32)
    lengths = np.ascontiguousarray(lengths, dtype=np.float32)
    if neighbors.ndim != 2 or neighbors.shape[1] != 3 or edges.ndim != 2 or edges.shape[1] != 2 \
            or lengths.shape != (edges.shape[0],):
        raise ValueError(f"tree arrays have wrong shapes: neighbors {neighbors.shape}, edges {edges.shape}, "
                         f"lengths {lengths.shape}")
    error, edge_index, edge_attr, actions, meta = _rebuild(neighbors, edges, lengths, int(n_leaves), int(radius),
                                                           bool(dedupe))
    if error:
        raise ValueError(f"stored tree is invalid: {_TABLE_ERRORS[error]}")
    n_nodes = neighbors.shape[0]
    if node_features is None:
        node_features = np.zeros((n_nodes, 1), dtype=np.float32)
        node_features[:n_leaves, 0] = 1.0
    elif node_features.shape[0] != n_nodes:
        raise ValueError(f"node_features has {node_features.shape[0]} rows for a tree of {n_nodes} nodes")
    source = MoveSource(neighbors.copy(), int(n_leaves), int(radius), bool(dedupe))
    return Observation(node_features, edge_index, edge_attr, actions, meta, source)


def tree_arrays_of(obs: Observation) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool] | None:
    """``(neighbors, edges, lengths, default_node_features)`` when ``obs`` is exactly what
    :func:`observation_from_tree` rebuilds from them and ``obs.source``; ``None`` otherwise.

    ``default_node_features`` is True when ``node_features`` is the plain ``is_leaf`` column (it
    then need not be stored). Costs one move enumeration: the comparison is what makes storing the
    tree instead of the moves lossless, whatever happened to the observation after it was built.
    """
    source = obs.source
    if source is None:
        return None
    edge_index, edge_attr, actions, meta = obs.edge_index, obs.edge_attr, obs.actions, obs.action_meta
    neighbors = source.neighbors
    if edge_index.dtype != np.int64 or edge_index.ndim != 2 or edge_index.shape[0] != 2 \
            or edge_index.shape[1] != 2 * (neighbors.shape[0] - 1) or edge_attr.dtype != np.float32 \
            or edge_attr.shape != (edge_index.shape[1], 1) or actions.dtype != np.int64 or actions.ndim != 2 \
            or actions.shape[1] != 4 or meta.dtype != np.float32 or meta.shape != (actions.shape[0], 3) \
            or neighbors.dtype != np.int32 or neighbors.ndim != 2 or neighbors.shape[1] != 3:
        return None
    edges = np.ascontiguousarray(edge_index[:, 0::2].T.astype(np.int32))
    lengths = np.ascontiguousarray(edge_attr[0::2, 0])
    features = obs.node_features
    leaf_features = features.dtype == np.float32 and features.shape == (neighbors.shape[0], 1)
    matches = _matches(np.ascontiguousarray(edge_index), _bits(edge_attr), np.ascontiguousarray(actions),
                       _bits(meta), _bits(features) if leaf_features else np.zeros((0, 1), np.uint32),
                       np.ascontiguousarray(neighbors), edges, lengths, int(source.n_leaves), int(source.radius),
                       bool(source.dedupe))
    if not matches:
        return None
    if not leaf_features and features.shape[:1] != (neighbors.shape[0],):
        return None
    return neighbors, edges, lengths, matches == 1


def _bits(array: np.ndarray) -> np.ndarray:
    """The float32 ``array``'s bit patterns (uint32, C order) for exact comparisons."""
    return np.ascontiguousarray(array).view(np.uint32)


@njit(cache=True, nogil=True)
def _matches(edge_index, edge_attr_bits, actions, meta_bits, feature_bits, neighbors, edges, lengths, n_leaves,
             radius, dedupe):
    """0: the observation differs from its rebuild; 1: equal, features are is_leaf; 2: equal otherwise."""
    n_edges = edges.shape[0]
    for e in range(n_edges):
        if edge_index[0, 2 * e + 1] != edge_index[1, 2 * e] or edge_index[1, 2 * e + 1] != edge_index[0, 2 * e]:
            return 0
        if edge_index[0, 2 * e] < 0 or edge_index[0, 2 * e] >= neighbors.shape[0] \
                or edge_index[1, 2 * e] < 0 or edge_index[1, 2 * e] >= neighbors.shape[0]:
            return 0
        if edge_attr_bits[2 * e, 0] != edge_attr_bits[2 * e + 1, 0]:
            return 0
    error, _, _, rebuilt, meta = _rebuild(neighbors, edges, lengths, n_leaves, radius, dedupe)
    if error or rebuilt.shape[0] != actions.shape[0]:
        return 0
    rebuilt_bits = meta.view(np.uint32)
    for i in range(actions.shape[0]):
        for j in range(4):
            if rebuilt[i, j] != actions[i, j]:
                return 0
        for j in range(3):
            if rebuilt_bits[i, j] != meta_bits[i, j]:
                return 0
    if feature_bits.shape[0] != neighbors.shape[0]:
        return 2
    one = np.float32(1.0)
    one_bits = np.array([one]).view(np.uint32)[0]
    for v in range(feature_bits.shape[0]):
        if feature_bits[v, 0] != (one_bits if v < n_leaves else 0):
            return 2
    return 1


@njit(cache=True, nogil=True)
def _rebuild(neighbors, edges, lengths, n_leaves, radius, dedupe):
    """``(error, edge_index, edge_attr, actions, action_meta)`` of a stored tree, in one compiled call."""
    node_edges, error = tree_tables(neighbors, edges, n_leaves)
    n_edges = edges.shape[0]
    edge_index = np.empty((2, 2 * n_edges), np.int64)
    edge_attr = np.empty((2 * n_edges, 1), np.float32)
    if error:
        return error, edge_index, edge_attr, np.empty((0, 4), np.int64), np.empty((0, 3), np.float32)
    for e in range(n_edges):
        u, v = edges[e, 0], edges[e, 1]
        edge_index[0, 2 * e] = u
        edge_index[1, 2 * e] = v
        edge_index[0, 2 * e + 1] = v
        edge_index[1, 2 * e + 1] = u
        edge_attr[2 * e, 0] = lengths[e]
        edge_attr[2 * e + 1, 0] = lengths[e]
    actions = enumerate_moves_kernel(neighbors, n_leaves, radius, dedupe)
    meta, bad = move_metadata_kernel(neighbors, node_edges, lengths.astype(np.float64), actions)
    if bad >= 0:  # cannot happen for a valid tree; kept as a guard against a broken enumeration
        return 5, edge_index, edge_attr, actions, meta
    return 0, edge_index, edge_attr, actions, meta


@njit(cache=True, nogil=True)
def tree_tables(neighbors, edges, n_leaves):
    """``(node_edges, error)``: error 0 when the arrays form an unrooted binary tree (codes in ``_TABLE_ERRORS``)."""
    n_nodes = neighbors.shape[0]
    return tree_tables_into(neighbors, edges, n_leaves, np.empty((n_nodes, 3), np.int32), np.empty(n_nodes, np.bool_),
                            np.empty(n_nodes, np.int64))


@njit(cache=True, nogil=True)
def tree_tables_into(neighbors, edges, n_leaves, node_edges, seen, stack):
    """:func:`tree_tables` into given arrays (int32 ``[N, 3]``, bool and int64 ``[N]`` scratch), such as a batch
    decoder's, made once for many trees."""
    n_nodes = neighbors.shape[0]
    node_edges[:] = -1
    if n_leaves < 3 or n_nodes != 2 * n_leaves - 2 or edges.shape[0] != n_nodes - 1:
        return node_edges, 1
    for v in range(n_nodes):
        want = 1 if v < n_leaves else 3
        for k in range(3):
            u = neighbors[v, k]
            if k < want:
                if u < 0 or u >= n_nodes or u == v:
                    return node_edges, 2
            elif u != -1:
                return node_edges, 2
    for e in range(n_nodes - 1):
        u, v = edges[e, 0], edges[e, 1]
        if u < 0 or u >= n_nodes or v < 0 or v >= n_nodes:
            return node_edges, 3
        ku, kv = slot_of(neighbors, u, v), slot_of(neighbors, v, u)
        if ku < 0 or kv < 0 or node_edges[u, ku] >= 0 or node_edges[v, kv] >= 0:
            return node_edges, 3
        node_edges[u, ku] = e
        node_edges[v, kv] = e
    # Every slot now holds exactly one edge; with N-1 edges the graph is a tree iff connected.
    seen[:] = False
    stack[0] = 0
    seen[0] = True
    top, count = 1, 1
    while top > 0:
        top -= 1
        v = stack[top]
        for k in range(3):
            u = neighbors[v, k]
            if u >= 0 and not seen[u]:
                seen[u] = True
                stack[top] = u
                top += 1
                count += 1
    if count != n_nodes:
        return node_edges, 4
    return node_edges, 0


def rich_observation_from_tree(neighbors: np.ndarray, edges: np.ndarray, n_leaves: int, radius: int, dedupe: bool,
                               parts, node_features: np.ndarray | None = None) -> Observation:
    """Rebuild a rich observation from tree arrays and its :class:`~phylorl.env.features.RichParts`
    (``ValueError`` when they do not fit together)."""
    from .features import rich_arrays

    obs = observation_from_tree(neighbors, edges, parts.lengths, n_leaves, radius, dedupe, node_features)
    if parts.deltas.shape != (obs.n_actions,) or parts.support.shape != (edges.shape[0],):
        raise ValueError(f"rich parts do not fit the tree: {parts.deltas.shape[0]} move changes for "
                         f"{obs.n_actions} moves, {parts.support.shape[0]} supports for {edges.shape[0]} edges")
    node_edges, _ = tree_tables(np.ascontiguousarray(neighbors, dtype=np.int32),
                                 np.ascontiguousarray(edges, dtype=np.int32), int(n_leaves))
    obs.edge_attr, obs.action_meta = rich_arrays(neighbors, node_edges, n_leaves, obs.actions, parts)
    obs.rich = parts
    return obs


_BUILT = "_rich_tree_form"


def mark_rich_tree_form(obs: Observation) -> None:
    """Record that ``obs`` was just built by :func:`~phylorl.env.features.observe` (``rich``) from a tree and
    ``enumerate_moves(tree, radius)``, as :class:`~phylorl.env.tree_env.TreeEnv` builds it: it is then what
    :func:`rich_observation_from_tree` rebuilds from its source, by construction (the same move enumeration on the
    same neighbour table, the same :func:`~phylorl.env.features.rich_arrays` on the same parts, edge ids and
    node-edge table), so :func:`rich_tree_arrays_of` need not rebuild it. The mark holds a fingerprint of the
    observation and counts only while the observation is unchanged."""
    obs.__dict__[_BUILT] = fingerprint(obs)


def rich_tree_arrays_of(obs: Observation, now: int | None = None) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """``(neighbors, edges, default_node_features)`` when ``obs`` is exactly what
    :func:`rich_observation_from_tree` rebuilds from them, ``obs.source`` and ``obs.rich``; else ``None``.
    Checked by rebuilding it, unless it carries an unchanged :func:`mark_rich_tree_form` (``now``: its fingerprint
    now, when the caller has it)."""
    source, parts = obs.source, obs.rich
    if source is None or parts is None or obs.edge_index.ndim != 2 or obs.edge_index.shape[0] != 2:
        return None
    edges = np.ascontiguousarray(obs.edge_index[:, 0::2].T.astype(np.int32))
    mark = obs.__dict__.get(_BUILT)
    if mark is not None and mark == (fingerprint(obs) if now is None else now):
        return source.neighbors, edges, True
    n_nodes = source.neighbors.shape[0]
    features = obs.node_features
    leaf = np.zeros((n_nodes, 1), np.float32)
    leaf[: source.n_leaves, 0] = 1.0
    leaf_features = features.dtype == np.float32 and features.shape == leaf.shape and features.tobytes() == leaf.tobytes()
    try:
        rebuilt = rich_observation_from_tree(source.neighbors, edges, source.n_leaves, source.radius, source.dedupe,
                                             parts, None if leaf_features else features)
    except ValueError:
        return None
    for name in ("node_features", "edge_index", "edge_attr", "actions", "action_meta"):
        a, b = getattr(obs, name), getattr(rebuilt, name)
        if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
            return None
    return source.neighbors, edges, leaf_features
