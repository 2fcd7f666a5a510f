"""SPR rounds: every subtree pruned in turn, its best regraft within a radius applied when it improves the
tree.

A round visits the pruned subtrees ``(p, s)`` of the tree (every internal node ``p``, each of its three
neighbours ``s``) in a depth-first order fixed at its start. For each, every regraft edge at distance
``d(p, x)`` in ``[radius_min, radius]`` gets a lazy score
(:meth:`~phylorl.phylo.LikelihoodEngine.subtree_scores`: the tree after the move with ``branches`` of its
three branches optimised, the rest as the move leaves them). A lazy score is the log-likelihood of a real tree
one move away, so a score above the current log-likelihood is an improvement for certain: the best such move
is applied, the branches around it are optimised (:data:`LOCAL_DEPTH`), and the round goes on from the new
tree (first improvement per subtree, many moves per round, as RAxML-NG's SPR rounds). A best move whose lazy
score falls just short (``near``) is tried the same way; a move whose locally optimised tree does not improve
the tree is undone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from phylorl.phylo import Tree, apply_spr, edges_near, move_metadata

from .config import SearchConfig

IMPROVEMENT = 1e-3
"""A move must raise the log-likelihood by more than this to be applied."""

LOCAL_DEPTH = 2
"""Branches optimised after a move: those within this many edges of the regraft node ``p``, and the edge that
joined ``p``'s old neighbours."""

LOCAL_ROUNDS = 2
"""Newton passes over those branches."""

SLOW_MARGIN = 10.0
"""A round with branch optimisation in its lazy scores first scores every regraft with fixed lengths, then
optimises the branches of those within this many log-likelihood units of the current tree only (a fixed-length
score is a lower bound of the optimised one; a regraft far below the current tree seldom climbs above it)."""


@dataclass
class RoundResult:
    """What one round did."""

    loglik: float
    """Log-likelihood of the tree after the round (branches near each move optimised, the others as they
    were)."""
    moves: int
    """Moves applied."""
    scored: int
    """Regraft candidates scored lazily."""
    farthest: int
    """Largest distance ``d(p, x)`` of an applied move (0 when none)."""


def subtree_order(tree: Tree) -> list[tuple[int, int]]:
    """The pruned subtrees ``(p, s)`` of ``tree`` in the order a round visits them: internal nodes in
    depth-first preorder from leaf 0, each with its neighbours in slot order."""
    order, _ = tree.preorder(0)
    n = tree.n_leaves
    return [(int(p), int(tree.neighbors[p, k])) for p in order if p >= n for k in range(3)]


def optimise_near(engine, tree: Tree, nodes, joined: int | None = None) -> float:
    """Optimise the branches within :data:`LOCAL_DEPTH` edges of ``nodes`` (and edge ``joined``); returns the
    log-likelihood."""
    edges = edges_near(tree, nodes, LOCAL_DEPTH)
    if joined is not None and joined not in edges:
        edges = np.append(edges, joined)
    return engine.optimize_branch_lengths(tree, edges, rounds=LOCAL_ROUNDS, tol=1e-3, newton_tol=1e-4)


def optimise_all(engine, tree: Tree, config: SearchConfig) -> float:
    """Newton passes over every branch from edge 0; returns the log-likelihood."""
    edges = np.arange(tree.n_edges)
    return engine.optimize_branch_lengths(tree, edges, rounds=config.branch_rounds, tol=1e-3)


def spr_round(
    engine,
    tree: Tree,
    loglik: float,
    radius: int,
    *,
    radius_min: int = 1,
    branches: int = 0,
    near: float = 0.0,
    cutoff: float = 0.0,
) -> RoundResult:
    """One SPR round on ``tree`` (in place) from its log-likelihood ``loglik`` (see the module docstring),
    with ``engine`` (the alignment's :class:`~phylorl.phylo.LikelihoodEngine`), regrafts at distances
    ``d(p, x)`` in ``[radius_min, radius]``, visiting the subtrees in :func:`subtree_order`.

    Args:
        branches: branches optimised in a lazy score (0, 1 or 3; with 1 or 3 only for the regrafts within
            :data:`SLOW_MARGIN` of the current tree).
        near: a subtree's best regraft whose lazy score falls short of the current tree by less than this is
            applied and its branches optimised anyway (:func:`optimise_near`), and kept if that improves the
            tree: a lazy score optimises three branches once, a move can need a few more (an NNI across a
            short branch).
        cutoff: the walks' subtree cutoff (:meth:`~phylorl.phylo.LikelihoodEngine.subtree_scores`; 0: none).
    """
    moves_done = scored = farthest = 0
    for p, s in subtree_order(tree):
        if not _adjacent(tree, p, s):  # an earlier move of the round rewired p
            continue
        moves, scores = engine.subtree_scores(
            tree, p, s, radius, radius_min=radius_min, branches=0, reference=loglik, cutoff=cutoff
        )
        if not len(moves):
            continue
        scored += int(np.isfinite(scores).sum())
        if branches:
            close = np.flatnonzero(np.isfinite(scores) & (scores > loglik - SLOW_MARGIN))
            if len(close):
                scores[close] = engine.spr_scores(tree, moves[close], branches=branches)
        best = int(np.argmax(scores))
        if not scores[best] > loglik + IMPROVEMENT - near:
            continue
        saved = tree.copy()
        joined = int(apply_spr(tree, moves[best])[0])
        after = optimise_near(engine, tree, [p], joined)
        if after > loglik + IMPROVEMENT:
            loglik = after
            moves_done += 1
            farthest = max(farthest, int(move_metadata(saved, moves[best : best + 1])[0, 2]) - 1)
        else:
            _restore(tree, saved)
    return RoundResult(loglik, moves_done, scored, farthest)


def _adjacent(tree: Tree, p: int, s: int) -> bool:
    return p >= tree.n_leaves and bool((tree.neighbors[p] == s).any())


def _restore(tree: Tree, saved: Tree) -> None:
    tree.neighbors[:] = saved.neighbors
    tree.node_edges[:] = saved.node_edges
    tree.edges[:] = saved.edges
    tree.lengths[:] = saved.lengths
