"""What the network sees of a tree and its moves: the observation feature sets.

``basic`` (as first designed): ``is_leaf`` per node, the raw branch length per edge, and three
numbers per move (pruned edge length, regraft edge length, ``d(p, x) + 1``). Agents trained on it
never see the alignment and do not find good trees.

``rich`` (the default): normalised geometry and alignment-aware signals that cost no
likelihood evaluation.

* per edge: ``log(length)``, ``length / tree length`` and the support of its split in a fast
  bootstrap of NJ trees (:mod:`phylorl.phylo.bootstrap`, computed once per alignment);
* per move (``RICH_MOVE_FEATURES`` columns, in this order):

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

The parsimony and support columns need the alignment (:class:`AlignmentSignals`); they are
computed where the tree is (in the environment), so records and inference requests carry them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from phylorl.phylo.bootstrap import edge_supports
from phylorl.phylo.parsimony import parsimony_tips, spr_parsimony_deltas
from phylorl.phylo.tree import Tree

from phylorl.types import FEATURE_SETS, RICH_EDGE_FEATURES, RICH_MOVE_FEATURES, feature_sizes  # noqa: F401
_MIN_LENGTH = 1e-6


@dataclass(frozen=True)
class AlignmentSignals:
    """What the rich features know of an alignment: its site patterns as Fitch leaf sets with their
    weights, and the bootstrap support of splits (``{split: support}``, see
    :func:`phylorl.phylo.bootstrap.nj_bootstrap_supports`; empty: every internal edge 0)."""

    tips: np.ndarray
    weights: np.ndarray
    supports: dict = field(default_factory=dict)

    @classmethod
    def of(cls, alignment, supports: dict | None = None) -> "AlignmentSignals":
        patterns = alignment.patterns()
        return cls(parsimony_tips(patterns.codes), np.ascontiguousarray(patterns.weights, dtype=np.float64),
                   dict(supports or {}))


@njit(cache=True, nogil=True)
def _directional(neighbors, node_edges, lengths, n_leaves):
    """Per slot ``(v, k)``: leaves, branch length and longest branch of the subtree on
    ``neighbors[v, k]``'s side (edge ``(v, neighbors[v, k])`` excluded); plus all-pairs path lengths."""
    n_nodes = neighbors.shape[0]
    leaves = np.zeros((n_nodes, 3))
    total = np.zeros((n_nodes, 3))
    longest = np.zeros((n_nodes, 3))
    path = np.zeros((n_nodes, n_nodes))
    stack = np.empty(n_nodes, np.int64)
    parent = np.empty(n_nodes, np.int64)
    for v in range(n_nodes):  # all-pairs path lengths and, from each node, its three subtrees
        for k in range(3):
            u0 = neighbors[v, k]
            if u0 < 0:
                continue
            parent[u0] = v
            stack[0] = u0
            top = 1
            path[v, u0] = lengths[node_edges[v, k]]
            while top > 0:
                top -= 1
                u = stack[top]
                if u < n_leaves:
                    leaves[v, k] += 1
                for j in range(3):
                    w = neighbors[u, j]
                    if w >= 0 and w != parent[u]:
                        length = lengths[node_edges[u, j]]
                        total[v, k] += length
                        if length > longest[v, k]:
                            longest[v, k] = length
                        path[v, w] = path[v, u] + length
                        parent[w] = u
                        stack[top] = w
                        top += 1
    return leaves, total, longest, path


@njit(cache=True, nogil=True)
def _rich_moves(neighbors, node_edges, lengths, n_leaves, moves, support):
    leaves, total, longest, path = _directional(neighbors, node_edges, lengths, n_leaves)
    tree_length = max(lengths.sum(), _MIN_LENGTH)
    out = np.empty((moves.shape[0], 15), np.float32)
    for i in range(moves.shape[0]):
        p, s, x, y = moves[i, 0], moves[i, 1], moves[i, 2], moves[i, 3]
        ks, kx = -1, -1
        joined = 0.0
        for k in range(3):
            if neighbors[p, k] == s:
                ks = k
            else:
                joined += lengths[node_edges[p, k]]
        for k in range(3):
            if neighbors[x, k] == y:
                kx = k
        pruned = lengths[node_edges[p, ks]]
        regraft = lengths[node_edges[x, kx]]
        out[i, 0] = np.log(max(pruned, _MIN_LENGTH))
        out[i, 1] = np.log(max(regraft, _MIN_LENGTH))
        out[i, 2] = np.log(max(joined, _MIN_LENGTH))
        out[i, 4] = (path[p, x] + 0.5 * regraft) / tree_length
        out[i, 5] = leaves[p, ks] / n_leaves
        out[i, 6] = leaves[x, kx] / n_leaves
        out[i, 7] = total[p, ks] / tree_length
        out[i, 8] = total[x, kx] / tree_length
        out[i, 9] = longest[p, ks] / tree_length
        out[i, 13] = support[node_edges[p, ks]]
        out[i, 14] = support[node_edges[x, kx]]
    return out


@dataclass(frozen=True)
class RichParts:
    """What the rich features add to a tree, kept with the observation so that a replay record can
    store these few arrays and rebuild the features bit for bit (:func:`rich_arrays`):
    float32 branch lengths ``[E]``, each move's parsimony change ``[A]`` (whole numbers), the tree's
    parsimony length, and each edge's split support ``[E]`` (float32)."""

    lengths: np.ndarray
    deltas: np.ndarray
    parsimony_length: float
    support: np.ndarray


def rich_arrays(neighbors, node_edges, n_leaves: int, moves: np.ndarray, distance: np.ndarray,
                parts: RichParts) -> tuple[np.ndarray, np.ndarray]:
    """``(edge_attr [2E, 3], action_meta [A, 15])`` float32 from the tree and its :class:`RichParts`;
    a pure function of its inputs, so an environment and a record decoder get the same bits."""
    lengths = parts.lengths.astype(np.float64)
    support = parts.support.astype(np.float64)
    deltas = parts.deltas.astype(np.float64)
    moves = np.ascontiguousarray(moves, dtype=np.int64).reshape(-1, 4)
    out = _rich_moves(np.ascontiguousarray(neighbors, dtype=np.int32), np.ascontiguousarray(node_edges, np.int32),
                      lengths, int(n_leaves), moves, support)
    out[:, 3] = distance / 10.0
    if len(deltas):
        out[:, 10] = deltas * 100.0 / max(parts.parsimony_length, 1.0)
        out[:, 11] = np.minimum(deltas - deltas.min(), 20.0) / 5.0
        order = np.argsort(deltas, kind="stable")
        ranks = np.empty(len(deltas))
        ranks[order] = np.arange(len(deltas))
        # ties share their mean rank
        uniq, inverse = np.unique(deltas, return_inverse=True)
        mean_rank = np.bincount(inverse, weights=ranks) / np.bincount(inverse)
        out[:, 12] = mean_rank[inverse] / max(len(deltas) - 1, 1)
    clipped = np.maximum(lengths, _MIN_LENGTH)
    edges = np.stack([np.log(clipped), clipped / clipped.sum(), support], axis=1).astype(np.float32)
    return np.repeat(edges, 2, axis=0), out


def rich_parts(tree: Tree, moves: np.ndarray, signals: AlignmentSignals) -> RichParts:
    """The :class:`RichParts` of ``tree`` (its lengths rounded to float32, as records keep them)."""
    deltas, length = spr_parsimony_deltas(tree, moves, signals.tips, signals.weights)
    return RichParts(tree.lengths.astype(np.float32), deltas.astype(np.float32), float(length),
                     edge_supports(tree, signals.supports).astype(np.float32))


def observe(tree: Tree, moves: np.ndarray, features: str, signals: AlignmentSignals | None = None, *,
            radius: int | None = None):
    """The network's :class:`~phylorl.types.Observation` of ``tree`` with ``moves`` under a
    feature set (``signals`` is required for ``rich``; the observation then carries its
    :class:`RichParts` in ``obs.rich``)."""
    from phylorl.phylo import move_metadata

    from .tree_observation import build_observation

    meta = move_metadata(tree, moves)
    obs = build_observation(tree, moves, meta, radius=radius)
    if features == "basic":
        return obs
    if features != "rich":
        raise ValueError(f"unknown feature set {features!r}: expected one of {FEATURE_SETS}")
    if signals is None:
        raise ValueError("the rich feature set needs the alignment's signals (AlignmentSignals)")
    parts = rich_parts(tree, moves, signals)
    obs.edge_attr, obs.action_meta = rich_arrays(tree.neighbors, tree.node_edges, tree.n_leaves, moves, meta[:, 2],
                                                 parts)
    obs.rich = parts
    return obs
