"""Perturb-and-climb iterations: escaping the local optimum the rounds end on (iterated local search).

An iteration copies the best tree, applies a few random SPR moves of small radius to it, and climbs back with
SPR rounds restricted to the subtrees pruned near the perturbed nodes (fast rounds, then slow ones, while they
move anything), then optimises every branch. The search keeps the result when it beats the best tree; IQ-TREE
escapes its NNI optima the same way (random NNIs, then NNI hill-climbing), stopping after a number of
iterations without improvement. A climb restricted to the perturbed region costs in proportion to the region,
not to the tree.
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


def local_order(tree: Tree, nodes, depth: int) -> list[tuple[int, int]]:
    """The pruned subtrees ``(p, s)`` with ``p`` internal and within ``depth`` edges of ``nodes``, in node
    order."""
    seen = {int(v) for v in nodes}
    frontier = list(seen)
    for _ in range(depth):
        nxt = []
        for v in frontier:
            for u in tree.neighbors[v]:
                u = int(u)
                if u >= 0 and u not in seen:
                    seen.add(u)
                    nxt.append(u)
        frontier = nxt
    n = tree.n_leaves
    return [(p, int(tree.neighbors[p, k])) for p in sorted(seen) if p >= n for k in range(3)]


def climb(engine, best: Tree, best_loglik: float, rng: np.random.Generator, *, moves: int, radius: int,
          depth: int, climb_radius: int, slow_branches: int, slow_near: float, max_rounds: int, margin: float,
          cutoff: float, branch_rounds: int) -> Climb:
    """One iteration from ``best`` (left unchanged): perturb a copy, climb back near the perturbation with
    fast rounds of radius ``climb_radius``; a tree that ends more than ``margin`` below ``best_loglik`` is
    given up, another gets slow rounds near the perturbation and every branch optimised (from edge 0)."""
    tree = best.copy()
    touched = perturb(tree, moves, radius, rng)
    loglik = optimise_near(engine, tree, touched)
    applied = scored = 0
    for branches in (0, slow_branches):
        if branches and loglik < best_loglik - margin:
            break
        for _ in range(max_rounds):
            result = spr_round(engine, tree, loglik, climb_radius, branches=branches,
                               near=slow_near if branches else 0.0, cutoff=cutoff,
                               order=local_order(tree, touched, depth))
            loglik, applied, scored = result.loglik, applied + result.moves, scored + result.scored
            if not result.moves:
                break
            touched = sorted(set(touched) | set(result.touched))
    if loglik >= best_loglik - margin:
        loglik = engine.optimize_branch_lengths(tree, np.arange(tree.n_edges), rounds=branch_rounds, tol=1e-3)
    return Climb(tree, float(loglik), applied, scored)
