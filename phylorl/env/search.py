"""Tree search with a policy: random moves, greedy, hill-climbing, or a trained agent.

Every policy acts through a :class:`TreeEnv`, so all of them pay the same price per move (one SPR
plus local branch-length optimisation) and their results are comparable.

``random``     uniform over the current moves, for ``steps`` steps.
``greedy``     evaluates every move (with local branch optimisation) and takes the best, for at most
               ``steps`` steps; stops early when no move raises the log-likelihood.
``hillclimb``  greedy until no move improves, then full branch-length optimisation; repeats while
               that full optimisation changes the log-likelihood (the classical SPR hill-climb).
               A guided climb (the agent's polish) also optimises every branch of the few best moves and
               goes on from the best if it improves (``RankedClimb.escape``).
               With ``restarts > 0`` it then perturbs the best tree so far with a few random short
               SPR moves and climbs again, keeping the best (iterated local search, as IQ-TREE
               escapes local optima by perturbation).
``agent``      a trained Q-network (see :class:`phylorl.agent.policy.AgentPolicy`), for ``steps`` steps.

The climbs search an alignment's distinct sequences and put identical ones back at the end
(``run_search(distinct=True)``, :mod:`phylorl.env.reduced`), and stop where a move comes back to a topology
the climb has left without beating it by :data:`RETURN_GAIN`. The maximum-likelihood search for alignments of
any size is :func:`phylorl.search.search` (lazy SPR rounds, no environment).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from phylorl.phylo import Tree
from phylorl.phylo.duplicates import restore_tree
from phylorl.phylo.spr import perturb
from phylorl.phylo.topology_key import topology_key

from .climbs import IMPROVEMENT_EPS, RankedClimb
from .reduced import without_duplicates
from .tree_env import TreeEnv


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


CLIMBS = ("hillclimb",)
"""The policy names that climb to a local optimum (no move limit needed; ``restarts`` apply)."""

PERTURBATION = (4, 2)
"""A perturb-and-climb round's perturbation: this many random SPR moves of at most this radius."""

RETURN_GAIN = 1e-3
"""A climb that moves back to a topology it has left must beat that topology's log-likelihood by this much,
or the climb is at a local optimum (:func:`_returned`)."""

RESCORE = 64
"""How many of the best trees a finished search has seen (by their step log-likelihood) get their branches
optimised before it chooses its answer (``run_search(rescore=...)``, ``--rescore``)."""


class SeenTrees:
    """The ``capacity`` distinct topologies of highest step log-likelihood seen in a search (a copy of each,
    with the branch lengths it had then), to choose the answer among them once their branches are
    optimised."""

    rounds = 3
    """Newton passes over every branch per kept tree before they are compared: one pass leaves results that
    depend on the edge the walk starts from (up to 1.4 log-likelihood units apart at 7 taxa); three choose as
    the converged optimisation does, at half its cost (``valid/``: see models/README.md)."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._trees: dict[int, tuple[float, Tree]] = {}  # topology key -> (step log-likelihood, tree)
        self._floor = -np.inf  # the lowest kept log-likelihood once full

    def __len__(self) -> int:
        return len(self._trees)

    def add(self, tree: Tree, loglik: float) -> None:
        if len(self._trees) >= self.capacity and loglik <= self._floor:
            return
        key = topology_key(tree)
        kept = self._trees.get(key)
        if kept is not None and kept[0] >= loglik:
            return
        self._trees[key] = (float(loglik), tree.copy())
        if len(self._trees) > self.capacity:
            del self._trees[min(self._trees, key=lambda k: self._trees[k][0])]
        if len(self._trees) >= self.capacity:
            self._floor = min(v[0] for v in self._trees.values())

    def best(self, engine) -> Tree:
        """The kept tree of highest log-likelihood after :attr:`rounds` Newton passes over every branch (in
        place, on the kept copies; ``engine`` is the search's :class:`~phylorl.phylo.LikelihoodEngine`)."""
        # ties go to the higher step log-likelihood
        ranked = sorted(self._trees.values(), key=lambda v: -v[0])
        return max(ranked, key=lambda v: engine.optimize_branch_lengths(v[1], rounds=self.rounds))[1]


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
    lazy_scores: int = 0
    """Moves scored by lazy SPR (the polish; not counted in ``evaluations``)."""


def run_search(
    env: TreeEnv,
    policy: str | Policy,
    *,
    steps: int | None,
    rng: np.random.Generator | None = None,
    on_step: Callable[[int, float], None] | None = None,
    restarts: int = 0,
    finish: bool = False,
    rescore: int = RESCORE,
    distinct: bool = True,
) -> SearchResult:
    """Search from ``env``'s current state (call ``env.reset`` first).

    Args:
        env: a reset environment (its horizon is ignored: the search decides when to stop).
        policy: ``"random"``, ``"greedy"``, ``"hillclimb"`` or a :class:`Policy`.
        steps: most moves to make; ``None`` only for the climbs (until a local optimum).
        rng: random generator for the random policy and the perturbations (default: unseeded).
        on_step: called with ``(step, loglik)`` after every move (progress display).
        restarts: hill-climbing only: perturb-and-climb rounds (:data:`PERTURBATION`) after the first climb.
        finish: at the end, optimise every branch length of the best tree seen (Newton rounds until
            the log-likelihood settles, as hill-climbing ends) and answer with that tree. Moves only
            optimise the branches near them, so a tree reached by many moves has stale lengths
            elsewhere; this costs no move evaluation.
        rescore: with ``finish``, choose that tree among the ``rescore`` distinct trees of highest step
            log-likelihood seen (0: the best by step log-likelihood alone), each after a few Newton passes
            over every branch (:class:`SeenTrees`), because a step's log-likelihood, with only the
            branches near the move optimised, can rank the trees of a long walk wrongly by tens of units.
        distinct: the climbs (:data:`CLIMBS`) search the alignment's distinct sequences only when some are
            identical, and put the others back at the end, each on a cherry with its twin (as IQ-TREE does;
            :mod:`phylorl.phylo.duplicates`). Their ``on_step`` values are then the reduced alignment's
            log-likelihoods, and their ``trajectory`` those shifted by the constant that makes the answer's
            value its log-likelihood on the full alignment (the dropped taxa's near-zero pendant branches cost
            about the same on every tree). The answer is scored on the full alignment.

    The result carries the final tree and the best tree seen (a copy of each).
    """
    if env.tree is None:
        raise RuntimeError("reset the environment before searching")
    if distinct and policy in CLIMBS:
        started, start = time.perf_counter(), env.loglik
        if (reduced := without_duplicates(env)) is not None:
            options = dict(
                steps=steps, rng=rng, on_step=on_step, restarts=restarts, finish=finish, rescore=rescore
            )
            return _search_distinct(env, *reduced, started, start, policy, **options)
    hill = policy in CLIMBS or getattr(policy, "climbs", False)
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
    evals0, branches0, lazy0 = engine.n_evaluations, engine.n_branch_optimisations, engine.n_lazy_scores
    started = time.perf_counter()
    start = env.loglik
    best, best_tree = start, env.tree.copy()
    trajectory: list[float] = []
    done = 0

    seen = SeenTrees(rescore) if finish and rescore > 1 else None
    if seen is not None:
        seen.add(env.tree, env.loglik)

    def note_best() -> None:
        nonlocal best, best_tree
        if env.loglik > best + IMPROVEMENT_EPS:
            best, best_tree = env.loglik, env.tree.copy()

    def record() -> None:  # after each step
        nonlocal done
        done += 1
        trajectory.append(env.loglik)
        note_best()
        if seen is not None:
            seen.add(env.tree, env.loglik)
        if on_step is not None:
            on_step(done, env.loglik)

    for round_ in range(restarts + 1):
        if round_:
            tree = best_tree.copy()
            perturb(tree, *PERTURBATION, rng)
            env.reset(env.alignments.index(env.current), tree)
            note_best()
        # this climb's topologies: the best log-likelihood of each
        visited = {topology_key(env.tree): env.loglik}
        while done < limit:
            action = policy.choose(env)
            if action is not None:
                env.move(action)  # the policies ask for an observation when they need one
                record()
                if not hill or not _returned(visited, env):
                    continue
            if not hill:
                break
            # a local optimum, or a climb going round a flat ridge: optimise every branch, then escape
            before = env.loglik
            env.optimize_all_branches()
            note_best()
            if env.loglik - before > 1e-3:
                continue
            better = getattr(policy, "escape", lambda _: None)(env)  # a thoroughly optimised move
            if better is None:
                break
            env.reset(env.alignments.index(env.current), better)
            record()
    if restarts or finish:  # answer with the best tree found
        answer = seen.best(engine) if seen is not None and len(seen) > 1 else best_tree
        env.reset(env.alignments.index(env.current), answer)
        if finish:
            env.optimize_all_branches()
        note_best()
    return SearchResult(
        start_loglik=start,
        final_loglik=env.loglik,
        best_loglik=best,
        steps=done,
        evaluations=engine.n_evaluations - evals0,
        branch_optimisations=engine.n_branch_optimisations - branches0,
        seconds=time.perf_counter() - started,
        tree=env.tree.copy(),
        trajectory=trajectory,
        best_tree=best_tree,
        lazy_scores=engine.n_lazy_scores - lazy0,
    )


def _returned(visited: dict[int, float], env: TreeEnv) -> bool:
    """Whether a climb's move came back to a topology it had left without raising that topology's best
    log-likelihood by :data:`RETURN_GAIN` (then it is going round a flat ridge of equivalent trees, each
    pass re-optimising a few branches for a gain of 1e-5: thousands of evaluations for nothing, seen on
    alignments with identical sequences). Records the move's topology."""
    key = topology_key(env.tree)
    seen = visited.get(key)
    visited[key] = env.loglik if seen is None else max(seen, env.loglik)
    return seen is not None and env.loglik < seen + RETURN_GAIN


def _search_distinct(
    env: TreeEnv, reduced: TreeEnv, duplicates, started: float, start: float, policy, **search
) -> SearchResult:
    """:func:`run_search` on ``reduced`` (``env``'s distinct sequences), its answer with the dropped taxa put
    back and every branch optimised on the full alignment (``started``, ``start``: the clock and ``env``'s
    log-likelihood when the search began)."""
    evals0, branches0 = env.engine.n_evaluations, env.engine.n_branch_optimisations
    result = run_search(reduced, policy, distinct=False, **search)
    env.reset(env.alignments.index(env.current), restore_tree(result.best_tree, duplicates, env.tree.taxa))
    env.optimize_all_branches()
    shift = env.loglik - result.best_loglik  # the dropped taxa's near-zero pendant branches: about constant
    return dataclasses.replace(
        result,
        start_loglik=start,
        final_loglik=env.loglik,
        best_loglik=env.loglik,
        tree=env.tree.copy(),
        trajectory=[value + shift for value in result.trajectory],
        best_tree=env.tree.copy(),
        evaluations=result.evaluations + env.engine.n_evaluations - evals0,
        branch_optimisations=result.branch_optimisations + env.engine.n_branch_optimisations - branches0,
        seconds=time.perf_counter() - started,
    )


def ranked_climb_with_restarts(
    env: TreeEnv, make: Callable[[bool], RankedClimb], restarts: int, rng: np.random.Generator
) -> SearchResult:
    """Iterated local search with a ranked climb: climbs that stop when none of the top-ranked moves
    improves (``make(False)``), with ``restarts`` perturb-and-climb rounds from the best tree, then one
    certified climb (``make(True)``) from the best tree, so the answer is a true SPR local optimum with
    every branch optimised. One :class:`SearchResult` covers both phases (:func:`chained`)."""
    rounds = run_search(env, make(False), steps=None, restarts=restarts, rng=rng)
    env.reset(env.alignments.index(env.current), rounds.best_tree)
    return chained(rounds, run_search(env, make(True), steps=None))


def chained(first: SearchResult, then: SearchResult) -> SearchResult:
    """``then`` (a search from ``first``'s answer) and ``first`` as one search: ``then``'s end, ``first``'s
    start, the best tree of both (``then``'s when equal), their counts, times and trajectories added."""
    better = then if then.best_loglik >= first.best_loglik else first
    added = ("steps", "evaluations", "branch_optimisations", "seconds", "trajectory", "lazy_scores")
    return dataclasses.replace(
        then,
        start_loglik=first.start_loglik,
        best_loglik=better.best_loglik,
        best_tree=better.best_tree,
        **{name: getattr(first, name) + getattr(then, name) for name in added},
    )
