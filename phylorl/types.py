"""What an agent is asked about a tree, and what a transition holds (numpy only: every layer uses them).

An :class:`Observation` is a tree state in the form a record stores it: the tree's arrays, its SPR moves and,
for the rich feature set, the alignment-aware parts the environment computes where the alignment is. What the
network reads (node, edge and move features) is made from these arrays in one place, :mod:`phylorl.records`,
for the learner's batches and the inference endpoint's requests alike.

For a tree with ``n`` leaves, ``N = 2n - 2`` nodes, ``E = N - 1`` edges and ``A`` moves:

``neighbors``  int32   ``[N, 3]``  each node's neighbours in slot order (the order moves are enumerated in); a
                                   leaf uses slot 0, ``-1`` pads.
``edges``      int32   ``[E, 2]``  each edge's two nodes (edge ids are row numbers).
``lengths``    float32 ``[E]``     branch lengths.
``moves``      int64   ``[A, 4]``  the SPR moves ``(p, s, x, y)`` of :func:`phylorl.phylo.spr.enumerate_moves`
                                   on ``neighbors`` with ``radius`` and ``dedupe`` (rows are actions).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

FEATURE_SETS = ("rich", "basic")
"""The feature sets (:mod:`phylorl.records.features`): ``rich``, the default, and ``basic``, the observation
as first designed, kept for comparison."""


def feature_sizes(features: str) -> tuple[int, int, int]:
    """``(node, edge, move)`` feature columns of a feature set."""
    if features == "rich":
        return 1, 3, 15
    if features == "basic":
        return 1, 1, 3
    raise ValueError(f"unknown feature set {features!r}: expected one of {FEATURE_SETS}")


@dataclass(frozen=True)
class RichParts:
    """What the rich features know of the alignment, per state: each move's Fitch parsimony change (float32
    ``[A]``, whole numbers of weighted sites), the tree's parsimony length, and each edge's split support in a
    fast NJ bootstrap (float32 ``[E]``)."""

    deltas: np.ndarray
    parsimony_length: float
    support: np.ndarray


@dataclass(frozen=True)
class Observation:
    """One tree state (arrays in the module docstring)."""

    neighbors: np.ndarray
    edges: np.ndarray
    lengths: np.ndarray
    n_leaves: int
    moves: np.ndarray
    radius: int = -1
    """Largest prune-regraft distance of the moves (-1: none)."""
    dedupe: bool = True
    """One move per neighbouring topology (:mod:`phylorl.phylo.spr`)."""
    rich: RichParts | None = field(default=None, repr=False)
    """The rich features' parts; ``None`` for the basic feature set."""

    @property
    def n_nodes(self) -> int:
        return int(self.neighbors.shape[0])

    @property
    def n_actions(self) -> int:
        return int(self.moves.shape[0])

    @property
    def features(self) -> str:
        return "basic" if self.rich is None else "rich"


@dataclass
class Transition:
    """One environment step ``(s, a, r, s')``.

    ``terminal`` is a true end of the task (the target does not bootstrap); ``truncated`` is the time limit
    (the target still bootstraps through it). ``discount`` is the factor applied to ``V(s')`` in the target:
    ``gamma`` for a one-step transition, ``gamma**k`` for a ``k``-step one. ``policy_version`` is the weights
    version that chose the action (-1 when unknown); the learner reports its own version minus this one as the
    policy lag.
    """

    obs: Observation
    action: int
    reward: float
    next_obs: Observation
    terminal: bool
    truncated: bool
    discount: float = 0.99
    policy_version: int = -1
    next_labels: np.ndarray | None = field(default=None, repr=False, compare=False)
    """Demonstration labels: the reward each move of ``next_obs`` would earn (float32 ``[A']``, in the order
    of ``next_obs.moves``), when the actor computed them; ``None`` otherwise."""
