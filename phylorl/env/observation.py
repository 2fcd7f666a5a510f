"""What the environment observes of a tree: its arrays, its SPR moves and, for the rich feature set, what the
alignment says of them (:class:`~phylorl.types.Observation`).

The rich parts are computed here, where the alignment is: each move's Fitch parsimony change (all moves of a
tree in one compiled pass, :func:`~phylorl.phylo.parsimony.spr_parsimony_deltas`) and each edge's split
support in a fast NJ bootstrap (:mod:`phylorl.phylo.bootstrap`, once per alignment). What the network reads is
made from an observation by :mod:`phylorl.records` (feature columns: :mod:`phylorl.records.features`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from phylorl.phylo.bootstrap import edge_supports
from phylorl.phylo.parsimony import bit_planes, parsimony_tips, spr_parsimony_deltas
from phylorl.phylo.tree import Tree
from phylorl.types import FEATURE_SETS, Observation, RichParts


@dataclass(frozen=True)
class AlignmentSignals:
    """What the rich features know of an alignment: its site patterns as Fitch leaf sets with their weights,
    and the bootstrap support of splits (``{split: support}``, see
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
    def of(cls, alignment, supports: dict | None = None) -> AlignmentSignals:
        patterns = alignment.patterns()
        return cls(
            parsimony_tips(patterns.codes),
            np.ascontiguousarray(patterns.weights, dtype=np.float64),
            dict(supports or {}),
        )


def observe(
    tree: Tree,
    moves: np.ndarray,
    features: str,
    signals: AlignmentSignals | None = None,
    *,
    radius: int | None = None,
) -> Observation:
    """The observation of ``tree`` with ``moves`` (``enumerate_moves(tree, radius)``) under a feature set
    (``signals`` is required for ``rich``). The arrays are copies: the tree may change afterwards."""
    if features not in FEATURE_SETS:
        raise ValueError(f"unknown feature set {features!r}: expected one of {FEATURE_SETS}")
    rich = None
    if features == "rich":
        if signals is None:
            raise ValueError("the rich feature set needs the alignment's signals (AlignmentSignals)")
        deltas, length = spr_parsimony_deltas(tree, moves, signals.tips, signals.weights, signals.planes)
        rich = RichParts(
            deltas.astype(np.float32), float(length), edge_supports(tree, signals.supports).astype(np.float32)
        )
    return Observation(
        tree.neighbors.astype(np.int32),
        tree.edges.astype(np.int32),
        tree.lengths.astype(np.float32),
        tree.n_leaves,
        np.ascontiguousarray(moves, dtype=np.int64),
        -1 if radius is None else int(radius),
        True,
        rich,
    )
