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
from functools import cached_property

import numpy as np

from phylorl.phylo.bootstrap import edge_supports
from phylorl.phylo.parsimony import bit_planes, parsimony_tips, spr_parsimony_deltas
from phylorl.phylo.tree import Tree

from .feature_kernels import EDGE_COLUMNS, edge_features, rich_moves

from phylorl.types import FEATURE_SETS, RICH_EDGE_FEATURES, RICH_MOVE_FEATURES, feature_sizes  # noqa: F401


@dataclass(frozen=True)
class AlignmentSignals:
    """What the rich features know of an alignment: its site patterns as Fitch leaf sets with their
    weights, and the bootstrap support of splits (``{split: support}``, see
    :func:`phylorl.phylo.bootstrap.nj_bootstrap_supports`; empty: every internal edge 0)."""

    tips: np.ndarray
    weights: np.ndarray
    supports: dict = field(default_factory=dict)

    @cached_property
    def planes(self) -> tuple:
        """The Fitch kernels' form of ``tips`` and ``weights`` (:func:`~phylorl.phylo.parsimony.bit_planes`),
        made once per alignment instead of at every observation."""
        return bit_planes(self.tips, self.weights)

    @classmethod
    def of(cls, alignment, supports: dict | None = None) -> "AlignmentSignals":
        patterns = alignment.patterns()
        return cls(parsimony_tips(patterns.codes), np.ascontiguousarray(patterns.weights, dtype=np.float64),
                   dict(supports or {}))


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


def rich_arrays(neighbors, node_edges, n_leaves: int, moves: np.ndarray, parts: RichParts) -> tuple[np.ndarray, np.ndarray]:
    """``(edge_attr [2E, 3], action_meta [A, 15])`` float32 from the tree and its :class:`RichParts`;
    a pure function of its inputs, computed by the same compiled code as the learner's batch decoder
    (:mod:`phylorl.env.feature_kernels`), so an environment and a record decoder get the same bits."""
    lengths = parts.lengths.astype(np.float64)
    support = parts.support.astype(np.float64)
    moves = np.ascontiguousarray(moves, dtype=np.int64).reshape(-1, 4)
    meta = rich_moves(np.ascontiguousarray(neighbors, dtype=np.int32), np.ascontiguousarray(node_edges, np.int32),
                      lengths, int(n_leaves), moves, support, parts.deltas.astype(np.float64),
                      float(parts.parsimony_length))
    edges = np.empty((2 * lengths.shape[0], EDGE_COLUMNS), np.float32)
    edge_features(edges, lengths, support)
    return edges, meta


def rich_parts(tree: Tree, moves: np.ndarray, signals: AlignmentSignals) -> RichParts:
    """The :class:`RichParts` of ``tree`` (its lengths rounded to float32, as records keep them)."""
    deltas, length = spr_parsimony_deltas(tree, moves, signals.tips, signals.weights, signals.planes)
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
    obs.edge_attr, obs.action_meta = rich_arrays(tree.neighbors, tree.node_edges, tree.n_leaves, moves, parts)
    obs.rich = parts
    return obs
