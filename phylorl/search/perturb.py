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

from .config import SearchConfig
from .rounds import optimise_all, optimise_near, spr_round


@dataclass
class Climb:
    """The outcome of one iteration."""

    tree: Tree
    loglik: float
    moves: int
    scored: int


def climb(
    engine, best: Tree, rng: np.random.Generator, moves: int, climb_radius: int, config: SearchConfig
) -> Climb:
    """One iteration from ``best`` (left unchanged): perturb a copy with ``moves`` random SPR moves of
    distance at most ``config.perturb_radius``, climb back with at most ``config.climb_rounds`` fast rounds of
    radius ``climb_radius`` (stopping after one that gains ``config.fast_gain`` or less), then as many slow
    ones (stopping after one that gains ``config.slow_gain`` or less), and optimise every branch (from edge
    0)."""
    tree, applied, scored = best.copy(), 0, 0
    loglik = optimise_near(engine, tree, perturb(tree, moves, config.perturb_radius, rng))
    cutoff = config.subtree_cutoff
    for branches, enough in ((0, config.fast_gain), (config.slow_branches, config.slow_gain)):
        near = config.slow_near if branches else 0.0
        for _ in range(config.climb_rounds):
            result = spr_round(
                engine, tree, loglik, climb_radius, branches=branches, near=near, cutoff=cutoff
            )
            gain = result.loglik - loglik
            loglik, applied, scored = result.loglik, applied + result.moves, scored + result.scored
            if gain <= enough:
                break
    loglik = optimise_all(engine, tree, config)
    return Climb(tree, float(loglik), applied, scored)
