"""Synthetic transitions with the shapes, dtypes and value ranges of real ones (tests, benchmarks).

The tree is a genuine random unrooted binary tree (stepwise addition, exponential branch lengths);
the moves are random ``(p, s, x, y)`` with ``p`` internal, ``s`` a neighbour of ``p`` and ``(x, y)``
an edge, and their metadata uses the tree's real branch lengths, so value statistics (distinct
values, index ranges) match what the environment produces. They are not valid SPR neighbourhoods.
"""

from __future__ import annotations

import numpy as np

from phylorl.types import Observation, Transition


def random_observation(n_taxa: int, n_moves: int, rng: np.random.Generator) -> Observation:
    """Observation of a random ``n_taxa``-leaf tree with ``n_moves`` moves (see the module docstring)."""
    if n_taxa < 3:
        raise ValueError(f"n_taxa must be >= 3, got {n_taxa}")
    if n_moves < 0:
        raise ValueError(f"n_moves must be >= 0, got {n_moves}")
    edges = _random_tree_edges(n_taxa, rng)
    n_nodes = 2 * n_taxa - 2
    lengths = rng.exponential(0.1, size=len(edges)).astype(np.float32)
    node_features = (np.arange(n_nodes) < n_taxa).astype(np.float32)[:, None]
    edge_index = np.empty((2, 2 * len(edges)), dtype=np.int64)
    edge_index[:, 0::2] = edges.T
    edge_index[:, 1::2] = edges.T[::-1]
    edge_attr = np.repeat(lengths, 2)[:, None]

    pivot_edge = rng.integers(0, len(edges), n_moves)       # (p, s) is one endpoint pair of this edge
    internal_first = edges[pivot_edge, 0] >= n_taxa
    p = np.where(internal_first, edges[pivot_edge, 0], edges[pivot_edge, 1])
    s = np.where(internal_first, edges[pivot_edge, 1], edges[pivot_edge, 0])
    target_edge = rng.integers(0, len(edges), n_moves)
    actions = np.stack([p, s, edges[target_edge, 0], edges[target_edge, 1]], axis=1).astype(np.int64)
    distance = rng.integers(1, n_taxa, n_moves).astype(np.float32)
    action_meta = np.stack([lengths[pivot_edge], lengths[target_edge], distance], axis=1)
    return Observation(node_features, edge_index, edge_attr, actions, action_meta)


def random_transition(n_taxa: int, n_moves: int, rng: np.random.Generator) -> Transition:
    """Transition between two random ``n_taxa``-leaf trees (see :func:`random_observation`)."""
    return Transition(
        obs=random_observation(n_taxa, n_moves, rng),
        action=int(rng.integers(0, max(n_moves, 1))),
        reward=float(rng.normal(0.0, 0.01)),
        next_obs=random_observation(n_taxa, n_moves, rng),
        terminal=False,
        truncated=bool(rng.random() < 0.05),
        discount=0.99,
    )


def _random_tree_edges(n_taxa: int, rng: np.random.Generator) -> np.ndarray:
    """Edges ``[2n-3, 2]`` of a random unrooted binary tree: leaves ``0..n-1``, internal nodes after."""
    internal = n_taxa
    edges = [(0, internal), (1, internal), (2, internal)]
    for leaf in range(3, n_taxa):
        u, v = edges.pop(int(rng.integers(0, len(edges))))
        internal += 1
        edges += [(u, internal), (internal, v), (leaf, internal)]
    return np.array(edges, dtype=np.int64)
