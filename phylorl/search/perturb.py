"""Perturb-and-climb iterations: escaping the local optimum the rounds end on (iterated local search).

An iteration copies the best tree, applies random SPR moves of small radius to it (a quarter as many as there
are taxa by default, all over the tree), climbs back with SPR rounds over the whole tree (fast rounds while a
round gains more than the search's ``fast_gain``, then slow ones while a round gains more than its
``slow_gain``, as the search's own rounds stop) and optimises every branch. The search keeps the result when
it beats the best tree. IQ-TREE escapes its NNI optima the same way (random NNIs on a fraction of the
branches, then NNI hill-climbing), stopping after a number of iterations without improvement. A perturbation
confined to one region, climbed back in that region only, returns to the same optimum: the basins that hold
better trees differ in several places at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from phylorl.phylo import Tree
from phylorl.phylo.spr import perturb

from .rounds import optimise_near, spr_round


@dataclass
class Climb:
    """The outcome of one iteration."""

    tree: Tree
    loglik: float
    moves: int
    scored: int


def climb(
    engine,
    best: Tree,
    rng: np.random.Generator,
    *,
    moves: int,
    radius: int,
    climb_radius: int,
    slow_branches: int,
    slow_near: float,
    max_rounds: int,
    cutoff: float,
    branch_rounds: int,
    fast_gain: float,
    slow_gain: float,
) -> Climb:
    """One iteration from ``best`` (left unchanged): perturb a copy with ``moves`` random SPR moves of
    distance at most ``radius``, climb back with at most ``max_rounds`` fast rounds of radius
    ``climb_radius`` (stopping after one that gains ``fast_gain`` or less), then as many slow ones (stopping
    after one that gains ``slow_gain`` or less), and optimise every branch (from edge 0)."""
    tree = best.copy()
    touched = perturb(tree, moves, radius, rng)
    loglik = optimise_near(engine, tree, touched)
    applied = scored = 0
    for branches, enough in ((0, fast_gain), (slow_branches, slow_gain)):
        for _ in range(max_rounds):
            result = spr_round(
                engine,
                tree,
                loglik,
                climb_radius,
                branches=branches,
                near=slow_near if branches else 0.0,
                cutoff=cutoff,
            )
            gain = result.loglik - loglik
            loglik, applied, scored = result.loglik, applied + result.moves, scored + result.scored
            if gain <= enough:
                break
    loglik = engine.optimize_branch_lengths(tree, np.arange(tree.n_edges), rounds=branch_rounds, tol=1e-3)
    return Climb(tree, float(loglik), applied, scored)
