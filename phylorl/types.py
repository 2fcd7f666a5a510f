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

import math
from dataclasses import dataclass, field

import numpy as np


FEATURE_SETS = ("basic", "rich")
"""The observation feature sets (:mod:`phylorl.env.features` builds them)."""
RICH_EDGE_FEATURES = 3
RICH_MOVE_FEATURES = 15


def feature_sizes(features: str) -> tuple[int, int, int]:
    """``(node_features, edge_features, action_meta)`` columns of a feature set."""
    if features == "basic":
        return 1, 1, 3
    if features == "rich":
        return 1, RICH_EDGE_FEATURES, RICH_MOVE_FEATURES
    raise ValueError(f"unknown feature set {features!r}: expected one of {FEATURE_SETS}")

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


def check_observation(obs: Observation, node_features: int | None = None, edge_features: int | None = None,
                      action_meta: int | None = None) -> None:
    """``ValueError`` naming the first thing wrong with ``obs`` for a network reading ``node_features``
    node, ``edge_features`` edge and ``action_meta`` move columns (None: any number): shapes, dtypes, node
    ids out of range, a node with more than 3 neighbours, NaN or infinite values, no move. Cheap enough
    for every request."""
    def fail(what: str):
        raise ValueError(f"observation: {what}")

    x, edge_index, edge_attr = obs.node_features, obs.edge_index, obs.edge_attr
    actions, meta = obs.actions, obs.action_meta
    for name, array, kind in (("node_features", x, "f"), ("edge_index", edge_index, "iu"),
                              ("edge_attr", edge_attr, "f"), ("actions", actions, "iu"), ("action_meta", meta, "f")):
        if not isinstance(array, np.ndarray) or array.ndim != 2 or array.dtype.kind not in kind:
            fail(f"{name} must be a 2-D {'float' if kind == 'f' else 'integer'} array, got "
                 f"{getattr(array, 'dtype', type(array).__name__)} {getattr(array, 'shape', '')}")
        if kind == "f" and not np.isfinite(array).all():
            fail(f"{name} holds NaN or infinite values")
    n = x.shape[0]
    node_features = x.shape[1] if node_features is None else node_features
    edge_features = edge_attr.shape[1] if edge_features is None else edge_features
    action_meta = meta.shape[1] if action_meta is None else action_meta
    if x.shape[1] != node_features:
        fail(f"{x.shape[1]} node feature columns, the network reads {node_features}")
    if edge_index.shape[0] != 2 or edge_attr.shape != (edge_index.shape[1], edge_features):
        fail(f"edge_index {edge_index.shape} and edge_attr {edge_attr.shape} do not match [2, 2E] and "
             f"[2E, {edge_features}] (the network reads {edge_features} edge feature columns)")
    if actions.shape[1] != 4 or meta.shape != (actions.shape[0], action_meta):
        fail(f"actions {actions.shape} and action_meta {meta.shape} do not match [A, 4] and [A, {action_meta}] "
             f"(the network reads {action_meta} move feature columns)")
    if actions.shape[0] < 1:
        fail("no move to choose from")
    for name, ids in (("edge_index", edge_index), ("actions", actions)):
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            fail(f"{name} names node {int(ids.max() if ids.max() >= n else ids.min())} of a tree with {n} nodes")
    if edge_index.size and np.bincount(edge_index[0], minlength=n).max() > 3:
        fail("a node has more than 3 neighbours: not an unrooted binary tree")


def check_transition(t: Transition) -> None:
    """``ValueError`` naming the first thing wrong with a transition (a replay record's content): both
    observations as :func:`check_observation` with the same columns, the action one of the state's moves,
    a finite reward, a discount in [0, 1], finite demonstration labels."""
    check_observation(t.obs)
    try:
        check_observation(t.next_obs, t.obs.node_features.shape[1], t.obs.edge_attr.shape[1],
                          t.obs.action_meta.shape[1])
    except ValueError as e:
        raise ValueError(f"next {e}") from None
    if not 0 <= t.action < t.obs.n_actions:
        raise ValueError(f"action {t.action} is not one of the state's {t.obs.n_actions} moves")
    if not math.isfinite(t.reward):
        raise ValueError(f"reward {t.reward} is not finite")
    if not 0.0 <= t.discount <= 1.0:
        raise ValueError(f"discount {t.discount} does not lie in [0, 1]")
    if t.next_labels is not None and not np.isfinite(t.next_labels).all():
        raise ValueError("demonstration labels hold NaN or infinite values")
