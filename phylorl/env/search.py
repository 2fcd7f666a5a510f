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
``fastclimb``  the same climb, each step scoring first the moves that raise parsimony least
               (:class:`ParsimonyClimb`: the Fitch length change of every move, one compiled pass)
               and the rest only when none of those improves, so it still stops only at a true SPR
               local optimum. With ``restarts`` its perturb-and-climb rounds stop when none of the top
               moves improves, and one certified climb from the best tree ends the search
               (:func:`ranked_climb_with_restarts`).
``lazyclimb``  the same climb, each step ranking the moves by their lazy SPR scores (the three branches at
               the regraft point optimised, many moves in one compiled pass: :class:`LazyClimb`) and
               evaluating fully only the few best; with ``restarts`` as ``fastclimb``.
``agent``      a trained Q-network (see :class:`phylorl.agent.policy.AgentPolicy`), for ``steps`` steps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from phylorl.phylo import Tree, apply_spr, enumerate_moves
from phylorl.phylo.topology_key import topology_key

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


class RankedClimb:
    """Hill-climbing that scores the moves a ranking puts first before the others (a ``climbs`` policy
    for :func:`run_search`: at a local optimum it optimises every branch and goes on).

    Each step evaluates (SPR + local branch optimisation) the ``top`` fraction of moves (at least
    ``min_top``) with the highest :meth:`scores` and takes the best of them if it raises the
    log-likelihood; only when none does are the other moves evaluated (``certify``), so the climb still
    stops only at a true SPR local optimum, at a fraction of the evaluations while the ranking is right.
    Without ``certify`` it stops when none of the top moves improves. With ``lazy_margin`` the other moves
    are first given lazy SPR scores (:meth:`~phylorl.phylo.LikelihoodEngine.spr_scores`, a fraction of a
    full evaluation's cost) and only those within ``lazy_margin`` of the current log-likelihood are
    evaluated fully (as :class:`LazyClimb` certifies). With ``lazy_top`` the top moves are ordered by their
    lazy scores too and only the ``lazy_top`` best of them evaluated fully, the others of the top only when
    none of those improves (and, with ``lazy_margin``, only when their lazy score is within it).
    """

    climbs = True

    def __init__(self, top: float = 0.05, min_top: int = 8, certify: bool = True, lazy_margin: float | None = None,
                 lazy_top: int | None = None):
        if not 0.0 <= top <= 1.0 or min_top < 1:
            raise ValueError(f"top must be in [0, 1] and min_top >= 1, got {top}, {min_top}")
        if lazy_margin is not None and not lazy_margin >= 0:
            raise ValueError(f"lazy_margin must be None or >= 0, got {lazy_margin}")
        if lazy_top is not None and lazy_top < 1:
            raise ValueError(f"lazy_top must be None or >= 1, got {lazy_top}")
        self.lazy_top = lazy_top
        self.top = top
        self.min_top = min_top
        self.certify = certify
        self.lazy_margin = lazy_margin

    def scores(self, env: TreeEnv) -> np.ndarray:
        """Higher first: one score per move of ``env.moves``."""
        raise NotImplementedError

    def choose(self, env: TreeEnv) -> int | None:
        if not len(env.moves):
            return None
        order = np.argsort(-self.scores(env), kind="stable")
        k = min(len(order), max(self.min_top, int(np.ceil(self.top * len(order)))))
        if self.lazy_top is None:
            found = best_improving(env, order[:k])
        else:
            ranked, lazy = self._lazy(env, order[:k])
            found = best_improving(env, ranked[:self.lazy_top])
            if found is None:
                found = best_improving(env, self._close(env, ranked[self.lazy_top:], lazy[self.lazy_top:]))
        if found is not None or not self.certify or k == len(order):
            return found
        rest = order[k:]
        if self.lazy_margin is not None:
            rest = self._close(env, *self._lazy(env, rest))
        return best_improving(env, rest)

    @staticmethod
    def _lazy(env: TreeEnv, part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``part`` ordered by lazy SPR score, best first, and those scores."""
        part = np.sort(part)  # each pruned subtree's moves together, for one lazy walk each
        lazy = env.engine.spr_scores(env.tree, env.moves[part])
        order = np.argsort(-lazy, kind="stable")
        return part[order], lazy[order]

    def _close(self, env: TreeEnv, part: np.ndarray, lazy: np.ndarray) -> np.ndarray:
        return part if self.lazy_margin is None else part[lazy > env.loglik - self.lazy_margin]


def best_improving(env: TreeEnv, part: np.ndarray) -> int | None:
    """The move of ``part`` (indices into ``env.moves``) that reaches the highest log-likelihood when evaluated
    fully (SPR + local optimisation, as ``step``), if that raises the log-likelihood; else ``None``."""
    if not len(part):
        return None
    values = env.evaluate_moves(part)
    best = int(np.argmax(values))
    return int(part[best]) if values[best] > env.loglik + IMPROVEMENT_EPS else None


class ParsimonyClimb(RankedClimb):
    """:class:`RankedClimb` on the parsimony change of every move (lower first): the ``fastclimb`` policy.
    Costs one compiled Fitch pass over the site patterns per step, no likelihood."""

    def __init__(self, top: float = 0.05, min_top: int = 8, certify: bool = True):
        super().__init__(top, min_top, certify)
        self._patterns: tuple | None = None  # (alignment, Fitch tip sets, pattern weights)

    def scores(self, env: TreeEnv) -> np.ndarray:
        from phylorl.phylo.parsimony import parsimony_tips, spr_parsimony_deltas

        alignment = env.current.alignment
        if self._patterns is None or self._patterns[0] is not alignment:
            patterns = alignment.patterns()
            self._patterns = (alignment, parsimony_tips(patterns.codes),
                              np.ascontiguousarray(patterns.weights, dtype=np.float64))
        _, tips, weights = self._patterns
        return -spr_parsimony_deltas(env.tree, env.moves, tips, weights)[0]


class LazyClimb:
    """Hill-climbing on lazy SPR scores (:meth:`~phylorl.phylo.LikelihoodEngine.spr_scores`: a move's
    log-likelihood with only its pendant branch optimised, many moves in one compiled pass): the ``lazyclimb``
    policy.

    Each step scores lazily the ``screen`` fraction of moves (at least ``min_screen``) that raise parsimony least
    (the pre-screen of :class:`ParsimonyClimb`), evaluates fully (SPR + local optimisation, as ``step``) the
    ``min_top`` best of them, and takes the best if it improves. When none does (``certify``), every other move
    is scored lazily and those within ``margin`` of the current log-likelihood are evaluated fully: a lazy score
    leaves the two halves of the regraft edge unoptimised, so it can rank an improving move a few units low
    (``margin=inf`` evaluates every move, so the climb stops only at a true SPR local optimum)."""

    climbs = True

    def __init__(self, screen: float = 0.25, min_screen: int = 32, min_top: int = 4, margin: float = 10.0,
                 certify: bool = True, branches: int = 3):
        if not 0.0 < screen <= 1.0 or min_screen < 1 or min_top < 1 or not margin >= 0 or branches not in (1, 3):
            raise ValueError(f"need 0 < screen <= 1, min_screen >= 1, min_top >= 1, margin >= 0, branches 1 or 3; "
                             f"got {screen}, {min_screen}, {min_top}, {margin}, {branches}")
        self.screen, self.min_screen, self.min_top, self.margin, self.certify = (screen, min_screen, min_top, margin,
                                                                                 certify)
        self.branches = branches
        self._parsimony = ParsimonyClimb()

    @classmethod
    def with_rounds(cls, certify: bool) -> "LazyClimb":
        """The climbs of ``lazyclimb`` with restarts: the certified last climb as configured by default; the
        perturb-and-climb rounds cheaper (a tenth of the moves, at least 16, scored with the pendant branch
        alone): on DS1–DS4 from NJ, 8 such rounds took 0.95× IQ-TREE's time where 8 default rounds took 3.2×,
        reaching IQ-TREE as often (docs/benchmarks.md)."""
        return cls() if certify else cls(screen=0.1, min_screen=16, branches=1, certify=False)

    def choose(self, env: TreeEnv) -> int | None:
        n = len(env.moves)
        if not n:
            return None
        k = min(n, max(self.min_screen, int(np.ceil(self.screen * n))))
        screened = np.sort(np.argsort(-self._parsimony.scores(env), kind="stable")[:k])  # (p, s) runs stay whole
        lazy = np.full(n, -np.inf)
        lazy[screened] = env.engine.spr_scores(env.tree, env.moves[screened], branches=self.branches)
        top = np.argsort(-lazy, kind="stable")[:self.min_top]
        found = best_improving(env, top)
        if found is not None or not self.certify:
            return found
        rest = np.setdiff1d(np.arange(n), screened)
        lazy[rest] = env.engine.spr_scores(env.tree, env.moves[rest], branches=self.branches)
        close = np.flatnonzero(lazy > env.loglik - self.margin)
        return best_improving(env, np.setdiff1d(close, top))


RESCORE = 64
"""How many of the best trees a finished search has seen (by their step log-likelihood) get their branches
optimised before it chooses its answer (``run_search(rescore=...)``, ``--rescore``)."""


class SeenTrees:
    """The ``capacity`` distinct topologies of highest step log-likelihood seen in a search (a copy of each, with
    the branch lengths it had then), to choose the answer among them once their branches are optimised."""

    rounds = 3
    """Newton passes over every branch per kept tree before they are compared: one pass leaves results that depend
    on the edge the walk starts from (up to 1.4 log-likelihood units apart at 7 taxa); three choose as the
    converged optimisation does, at half its cost (``valid/``: see models/README.md)."""

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
        """The kept tree of highest log-likelihood after :attr:`rounds` Newton passes over every branch (in place,
        on the kept copies; ``engine`` is the search's :class:`~phylorl.phylo.LikelihoodEngine`)."""
        ranked = sorted(self._trees.values(), key=lambda v: -v[0])  # ties go to the higher step log-likelihood
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


def run_search(env: TreeEnv, policy: str | Policy, *, steps: int | None, rng: np.random.Generator | None = None,
               on_step: Callable[[int, float], None] | None = None, restarts: int = 0,
               perturbation_moves: int = 4, perturbation_radius: int = 2, finish: bool = False,
               rescore: int = RESCORE) -> SearchResult:
    """Search from ``env``'s current state (call ``env.reset`` first).

    Args:
        env: a reset environment (its horizon is ignored: the search decides when to stop).
        policy: ``"random"``, ``"greedy"``, ``"hillclimb"``, ``"fastclimb"``, ``"lazyclimb"`` or a :class:`Policy`.
        steps: most moves to make; ``None`` only for the climbs (until a local optimum).
        rng: random generator for the random policy and the perturbations (default: unseeded).
        on_step: called with ``(step, loglik)`` after every move (progress display).
        restarts: hill-climbing only: perturb-and-climb rounds after the first climb.
        perturbation_moves: random SPR moves of a perturbation.
        perturbation_radius: largest radius of those moves.
        finish: at the end, optimise every branch length of the best tree seen (Newton rounds until
            the log-likelihood settles, as hill-climbing ends) and answer with that tree. Moves only
            optimise the branches near them, so a tree reached by many moves has stale lengths
            elsewhere; this costs no move evaluation.
        rescore: with ``finish``, choose that tree among the ``rescore`` distinct trees of highest step
            log-likelihood seen (0: the best by step log-likelihood alone), each after a few Newton passes
            over every branch (:class:`SeenTrees`), because a step's log-likelihood, with only the
            branches near the move optimised, can rank the trees of a long walk wrongly by tens of units.

    The result carries the final tree and the best tree seen (a copy of each).
    """
    if env.tree is None:
        raise RuntimeError("reset the environment before searching")
    hill = policy in ("hillclimb", "fastclimb", "lazyclimb") or getattr(policy, "climbs", False)
    rng = rng if rng is not None else np.random.default_rng()
    if policy in ("fastclimb", "lazyclimb") and restarts:  # rounds stop at the top moves' optimum; the last
        make = ParsimonyClimb if policy == "fastclimb" else LazyClimb.with_rounds  # climb is certified
        return ranked_climb_with_restarts(env, lambda certify: make(certify=certify), restarts, rng, on_step)
    if isinstance(policy, str):
        if policy == "random":
            policy = RandomPolicy(rng)
        elif policy in ("greedy", "hillclimb"):
            policy = GreedyPolicy()
        elif policy == "fastclimb":
            policy = ParsimonyClimb()
        elif policy == "lazyclimb":
            policy = LazyClimb()
        else:
            raise ValueError(f"unknown policy {policy!r}: expected random, greedy, hillclimb, fastclimb, lazyclimb or a "
                             "Policy")
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

    seen = SeenTrees(rescore) if finish and rescore > 1 else None
    if seen is not None:
        seen.add(env.tree, env.loglik)

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
            if seen is not None:
                seen.add(env.tree, env.loglik)
            if on_step is not None:
                on_step(done, env.loglik)
    if restarts or finish:  # answer with the best tree found
        answer = seen.best(engine) if seen is not None and len(seen) > 1 else best_tree
        env.reset(env.alignments.index(env.current), answer)
        if finish:
            env.optimize_all_branches()
        note_best()
    return SearchResult(
        start_loglik=start, final_loglik=env.loglik, best_loglik=best, steps=done,
        evaluations=engine.n_evaluations - evals0,
        branch_optimisations=engine.n_branch_optimisations - branches0,
        seconds=time.perf_counter() - started, tree=env.tree.copy(), trajectory=trajectory, best_tree=best_tree,
    )


def ranked_climb_with_restarts(env: TreeEnv, make: Callable[[bool], RankedClimb], restarts: int,
                               rng: np.random.Generator,
                               on_step: Callable[[int, float], None] | None = None) -> SearchResult:
    """Iterated local search with a ranked climb: climbs that stop when none of the top-ranked moves
    improves (``make(False)``), with ``restarts`` perturb-and-climb rounds from the best tree, then one
    certified climb (``make(True)``) from the best tree, so the answer is a true SPR local optimum with
    every branch optimised. One :class:`SearchResult` covers both phases."""
    import dataclasses

    rounds = run_search(env, make(False), steps=None, restarts=restarts, rng=rng, on_step=on_step)
    env.reset(env.alignments.index(env.current), rounds.best_tree)
    final = run_search(env, make(True), steps=None, on_step=on_step)
    better = final if final.best_loglik >= rounds.best_loglik else rounds
    return dataclasses.replace(
        final, start_loglik=rounds.start_loglik, best_loglik=better.best_loglik, best_tree=better.best_tree,
        steps=rounds.steps + final.steps, evaluations=rounds.evaluations + final.evaluations,
        branch_optimisations=rounds.branch_optimisations + final.branch_optimisations,
        seconds=rounds.seconds + final.seconds, trajectory=rounds.trajectory + final.trajectory)


def _perturbed(tree: Tree, moves: int, radius: int, rng: np.random.Generator) -> Tree:
    out = tree.copy()
    for _ in range(moves):
        candidates = enumerate_moves(out, radius=radius)
        apply_spr(out, candidates[rng.integers(len(candidates))])
    return out
