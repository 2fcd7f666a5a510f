"""Tree search with a policy: random moves, greedy, hill-climbing, or a trained agent.

Every policy acts through a :class:`TreeEnv`, so all of them pay the same price per move (one SPR
plus local branch-length optimisation) and their results are comparable.

``random``     uniform over the current moves, for ``steps`` steps.
``greedy``     evaluates every move (with local branch optimisation) and takes the best, for at most
               ``steps`` steps; stops early when no move raises the log-likelihood.
``hillclimb``  greedy until no move improves, then full branch-length optimisation; repeats while
               that full optimisation changes the log-likelihood (the classical SPR hill-climb).
               With ``restarts > 0`` it then perturbs the best tree so far with a few random short
               SPR moves and climbs again, keeping the best (iterated local search, as IQ-TREE
               escapes local optima by perturbation).
``agent``      a trained Q-network (see :class:`phylorl.agent.policy.AgentPolicy`), for ``steps`` steps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from phylorl.phylo import Tree, apply_spr, enumerate_moves

from .tree_env import TreeEnv

IMPROVEMENT_EPS = 1e-6  # a move must raise logL by more than this to count as an improvement


class Policy(Protocol):
    """Chooses the index of the next move for ``env``'s current state, or ``None`` to stop."""

    def choose(self, env: TreeEnv) -> int | None: ...


class RandomPolicy:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def choose(self, env: TreeEnv) -> int | None:
        return int(self.rng.integers(len(env.moves))) if len(env.moves) else None


class GreedyPolicy:
    def choose(self, env: TreeEnv) -> int | None:
        if not len(env.moves):
            return None
        values = env.evaluate_moves()
        best = int(np.argmax(values))
        return best if values[best] > env.loglik + IMPROVEMENT_EPS else None


@dataclass
class SearchResult:
    """Outcome of one search; ``trajectory`` holds the log-likelihood after each step.

    ``tree`` is the tree the search ended on (``final_loglik``); ``best_tree`` the best tree seen
    along the way, the start tree included (``best_loglik``). They differ for policies that can
    make a tree worse (random moves, an agent); for greedy and hill-climbing they are the same tree.
    """

    start_loglik: float
    final_loglik: float
    best_loglik: float
    steps: int
    evaluations: int
    branch_optimisations: int
    seconds: float
    tree: Tree
    trajectory: list[float] = field(default_factory=list)
    best_tree: Tree | None = None


def run_search(env: TreeEnv, policy: str | Policy, *, steps: int | None, rng: np.random.Generator | None = None,
               on_step: Callable[[int, float], None] | None = None, restarts: int = 0,
               perturbation_moves: int = 4, perturbation_radius: int = 2, finish: bool = False) -> SearchResult:
    """Search from ``env``'s current state (call ``env.reset`` first).

    Args:
        env: a reset environment (its horizon is ignored: the search decides when to stop).
        policy: ``"random"``, ``"greedy"``, ``"hillclimb"`` or a :class:`Policy` object.
        steps: most moves to make; ``None`` only for hill-climbing (until a local optimum).
        rng: random generator for the random policy and the perturbations (default: unseeded).
        on_step: called with ``(step, loglik)`` after every move (progress display).
        restarts: hill-climbing only: perturb-and-climb rounds after the first climb.
        perturbation_moves: random SPR moves of a perturbation.
        perturbation_radius: largest radius of those moves.
        finish: at the end, optimise every branch length of the best tree seen (Newton rounds until
            the log-likelihood settles, as hill-climbing ends) and answer with that tree. Moves only
            optimise the branches near them, so a tree reached by many moves has stale lengths
            elsewhere; this costs no move evaluation.

    The result carries the final tree and the best tree seen (a copy of each).
    """
    if env.tree is None:
        raise RuntimeError("reset the environment before searching")
    hill = policy == "hillclimb" or getattr(policy, "climbs", False)
    rng = rng if rng is not None else np.random.default_rng()
    if isinstance(policy, str):
        if policy == "random":
            policy = RandomPolicy(rng)
        elif policy in ("greedy", "hillclimb"):
            policy = GreedyPolicy()
        else:
            raise ValueError(f"unknown policy {policy!r}: expected random, greedy, hillclimb or a Policy")
    if steps is None and not hill:
        raise ValueError("steps is required for every policy but hillclimb")
    if restarts and not hill:
        raise ValueError("restarts apply to climbing policies only (hillclimb, a guided climb)")
    limit = steps if steps is not None else 10**9
    engine = env.engine
    evals0, branches0 = engine.n_evaluations, engine.n_branch_optimisations
    started = time.perf_counter()
    start = env.loglik
    best, best_tree = start, env.tree.copy()
    trajectory: list[float] = []
    done = 0

    def note_best() -> None:
        nonlocal best, best_tree
        if env.loglik > best + IMPROVEMENT_EPS:
            best, best_tree = env.loglik, env.tree.copy()

    for round_ in range(restarts + 1):
        if round_:
            env.reset(env.alignments.index(env.current), _perturbed(best_tree, perturbation_moves,
                                                                      perturbation_radius, rng))
            note_best()
        while done < limit:
            action = policy.choose(env)
            if action is None:
                if not hill:
                    break
                before = env.loglik
                env.optimize_all_branches()
                note_best()
                if env.loglik - before <= 1e-3:
                    break
                continue
            env.step(action)
            done += 1
            trajectory.append(env.loglik)
            note_best()
            if on_step is not None:
                on_step(done, env.loglik)
    if restarts or finish:  # answer with the best tree found
        env.reset(env.alignments.index(env.current), best_tree)
        if finish:
            env.optimize_all_branches()
        note_best()
    return SearchResult(
        start_loglik=start, final_loglik=env.loglik, best_loglik=best, steps=done,
        evaluations=engine.n_evaluations - evals0,
        branch_optimisations=engine.n_branch_optimisations - branches0,
        seconds=time.perf_counter() - started, tree=env.tree.copy(), trajectory=trajectory, best_tree=best_tree,
    )


def _perturbed(tree: Tree, moves: int, radius: int, rng: np.random.Generator) -> Tree:
    out = tree.copy()
    for _ in range(moves):
        candidates = enumerate_moves(out, radius=radius)
        apply_spr(out, candidates[rng.integers(len(candidates))])
    return out
