"""What an agent sees of a tree and what a transition holds.

These two dataclasses are the contract between the environment (which builds them), the replay
service (which stores them), the inference endpoint and the learner (which batch them).

Observation arrays, for a tree with ``N = 2n-2`` nodes, ``E = 2n-3`` edges and ``A`` SPR moves:

``node_features`` float32 ``[N, F]``   column 0 is ``is_leaf``; extra columns only behind a flag.
``edge_index``    int64   ``[2, 2E]``  both directions of every edge: columns ``2e`` and ``2e+1``
                                        are ``(u, v)`` and ``(v, u)`` for edge ``e``.
``edge_attr``     float32 ``[2E, 1]``  branch length of the edge each column belongs to.
``actions``       int64   ``[A, 4]``   SPR moves as node indices ``(p, s, x, y)``.
``action_meta``   float32 ``[A, 3]``   per move: length of ``(p, s)``, length of ``(x, y)``, number
                                        of edges between ``p`` and ``(x, y)``.

An observation built from a tree (:func:`phylorl.env.tree_observation.build_observation`) also
carries its :class:`MoveSource`: the tree's neighbour table and how its moves were enumerated. The
network never sees it; a transition record uses it to store the tree (a few hundred bytes) instead
of the moves (kilobytes) and to rebuild the moves exactly when read back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class MoveSource:
    """Where an observation's moves came from: ``enumerate_moves`` on this neighbour table.

    ``neighbors`` int32 ``[N, 3]`` is the tree's table in its slot order (the order moves are
    enumerated in), a private copy; ``radius`` is -1 for no limit.
    """

    neighbors: np.ndarray
    n_leaves: int
    radius: int
    dedupe: bool


@dataclass
class Observation:
    """One tree state as the network sees it (shapes in the module docstring)."""

    node_features: np.ndarray
    edge_index: np.ndarray
    edge_attr: np.ndarray
    actions: np.ndarray
    action_meta: np.ndarray
    source: MoveSource | None = field(default=None, repr=False, compare=False)
    """How the moves were enumerated, when known (lets records store the tree instead of the moves)."""
    rich: object | None = field(default=None, repr=False, compare=False)
    """The rich features' :class:`~phylorl.env.features.RichParts`, when built from a tree (lets
    records store those few arrays instead of the features)."""

    @property
    def n_nodes(self) -> int:
        return int(self.node_features.shape[0])

    @property
    def n_actions(self) -> int:
        return int(self.actions.shape[0])


@dataclass
class Transition:
    """One environment step ``(s, a, r, s')``.

    ``terminal`` is a true end of the task (the target does not bootstrap); ``truncated`` is the
    time limit (the target still bootstraps through it). ``discount`` is the factor applied to
    ``V(s')`` in the target: ``gamma`` for a one-step transition, ``gamma**k`` for a ``k``-step one.
    ``policy_version`` is the weights version that chose the action (-1 when unknown); the learner
    reports its own version minus this one as the policy lag.
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
    """Demonstration labels: the reward each move of ``next_obs`` would earn (float32 ``[A']``, in
    the order of ``next_obs.actions``), when the actor computed them; ``None`` otherwise."""
