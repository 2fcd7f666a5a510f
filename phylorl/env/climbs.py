"""Ranked climbs: hill-climbing policies for :func:`~phylorl.env.search.run_search` that evaluate fully (SPR +
local branch optimisation, as a step) first the moves a cheap ranking puts first, and the others only to certify a
local optimum. :class:`RankedClimb` is the frame (the agent's :class:`~phylorl.agent.policy.GuidedClimb` ranks by
its Q-values); :class:`ParsimonyClimb` (``fastclimb``) ranks by the Fitch parsimony change of every move;
:class:`LazyClimb` (``lazyclimb``) by lazy SPR scores (:mod:`phylorl.phylo.lazy_spr`)."""

from __future__ import annotations

import numpy as np

from phylorl.phylo import Tree, apply_spr, move_metadata

from .tree_env import TreeEnv

IMPROVEMENT_EPS = 1e-6  # a move must raise logL by more than this to count as an improvement

THOROUGH = 4
"""How many of the best moves of a certified local optimum a climb optimises thoroughly (every branch) before it
stops (:meth:`ThoroughEscape.escape`)."""


class ThoroughEscape:
    """What a certified climb does at its local optimum: a move's full evaluation optimises only the branches next
    to it, which can rank a better tree several units low (DS3, JC: −5.9 for a move worth +0.3 once every branch
    is optimised). :meth:`escape` optimises every branch of the :attr:`thorough` moves that evaluated best in the
    last certified step and answers with the best tree if it beats the current one (the lazy subtree
    rearrangement's "thorough optimisation of the few best")."""

    thorough = THOROUGH
    certify = True
    _near: tuple | None = None  # (the moves array they index, moves evaluated, their values)
    _seen: list

    def choose(self, env: TreeEnv) -> int | None:
        self._seen = []
        found = self._choose(env)
        self._near = None
        if found is None and self.certify and self._seen:
            self._near = (env.moves, np.concatenate([p for p, _ in self._seen]),
                          np.concatenate([v for _, v in self._seen]))
        return found

    def _choose(self, env: TreeEnv) -> int | None:
        raise NotImplementedError

    def _best(self, env: TreeEnv, part: np.ndarray) -> int | None:
        """The move of ``part`` (indices into ``env.moves``) that reaches the highest log-likelihood when evaluated
        fully (SPR + local optimisation, as ``step``), if that raises the log-likelihood; else ``None``. The values
        are kept for :meth:`escape`."""
        if not len(part):
            return None
        values = env.evaluate_moves(part)
        self._seen.append((np.asarray(part), values))
        best = int(np.argmax(values))
        return int(part[best]) if values[best] > env.loglik + IMPROVEMENT_EPS else None

    def escape(self, env: TreeEnv) -> Tree | None:
        """A tree one move from ``env``'s (its branches optimised) of higher log-likelihood than ``env.loglik``,
        among the :attr:`thorough` moves that evaluated best when the last step found none improving; else
        ``None``. Call after optimising every branch of the current tree (:func:`run_search` does)."""
        near, self._near = self._near, None
        if near is None or near[0] is not env.moves or not self.thorough:
            return None
        _, part, values = near
        best, answer = env.loglik + IMPROVEMENT_EPS, None
        for a in part[np.argsort(-values, kind="stable")[:self.thorough]]:
            tree = env.tree.copy()
            apply_spr(tree, env.moves[a])
            loglik = env.engine.optimize_branch_lengths(tree, rounds=20, tol=1e-4)
            if loglik > best:
                best, answer = loglik, tree
        return answer


class RankedClimb(ThoroughEscape):
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
    none of those improves (and, with ``lazy_margin``, only when their lazy score is within it). A certified
    climb tries :meth:`~ThoroughEscape.escape` at its optimum.
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

    def _choose(self, env: TreeEnv) -> int | None:
        if not len(env.moves):
            return None
        order = np.argsort(-self.scores(env), kind="stable")
        k = min(len(order), max(self.min_top, int(np.ceil(self.top * len(order)))))
        if self.lazy_top is None:
            found = self._best(env, order[:k])
        else:
            ranked, lazy = self._lazy(env, order[:k])
            found = self._best(env, ranked[:self.lazy_top])
            if found is None:
                found = self._best(env, self._close(env, ranked[self.lazy_top:], lazy[self.lazy_top:]))
        if found is not None or not self.certify or k == len(order):
            return found
        rest = order[k:]
        if self.lazy_margin is not None:
            rest = self._close(env, *self._lazy(env, rest))
        return self._best(env, rest)

    @staticmethod
    def _lazy(env: TreeEnv, part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``part`` ordered by lazy SPR score, best first, and those scores."""
        part = np.sort(part)  # each pruned subtree's moves together, for one lazy walk each
        lazy = env.engine.spr_scores(env.tree, env.moves[part])
        order = np.argsort(-lazy, kind="stable")
        return part[order], lazy[order]

    def _close(self, env: TreeEnv, part: np.ndarray, lazy: np.ndarray) -> np.ndarray:
        return part if self.lazy_margin is None else part[lazy > env.loglik - self.lazy_margin]


class ParsimonyClimb(RankedClimb):
    """:class:`RankedClimb` on the parsimony change of every move (lower first): the ``fastclimb`` policy.
    Costs one compiled Fitch pass over the site patterns per step, no likelihood."""

    def __init__(self, top: float = 0.05, min_top: int = 8, certify: bool = True):
        super().__init__(top, min_top, certify)
        self._patterns: tuple | None = None  # (alignment, Fitch tip sets, pattern weights, their bit planes)

    def scores(self, env: TreeEnv, part: np.ndarray | None = None) -> np.ndarray:
        """Minus the parsimony change of every move (or of the moves ``part``, indices into ``env.moves``)."""
        from phylorl.phylo.parsimony import bit_planes, parsimony_tips, spr_parsimony_deltas

        alignment = env.current.alignment
        if self._patterns is None or self._patterns[0] is not alignment:
            patterns = alignment.patterns()
            tips, weights = parsimony_tips(patterns.codes), np.ascontiguousarray(patterns.weights, dtype=np.float64)
            self._patterns = (alignment, tips, weights, bit_planes(tips, weights))
        _, tips, weights, planes = self._patterns
        moves = env.moves if part is None else env.moves[part]
        return -spr_parsimony_deltas(env.tree, moves, tips, weights, planes)[0]


AUTO_RADIUS = 6
"""A certified ``lazyclimb`` (``radius="auto"``) screens and certifies the moves of radius ``d(p, x)`` at most this,
and widens the radius to ``d + 2`` whenever it takes a move within one of the edge. From NJ on DS1–DS4 every
move the search took had ``d <= 7`` while half the moves of DS4 lie beyond 6 (docs/benchmarks.md)."""


class LazyClimb(ThoroughEscape):
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

    perturbation = (8, 3)
    """With restarts, each round starts from the best tree perturbed by this many random SPR moves of at most this
    radius: on DS1–DS4 from NJ (8 rounds, with :meth:`~ThoroughEscape.escape`) 7–8 of 8 ended within 0.1 of
    IQ-TREE where the plain climb's (4, 2) reached 5–6 (docs/benchmarks.md)."""

    def __init__(self, screen: float = 0.25, min_screen: int = 32, min_top: int = 4, margin: float = 10.0,
                 certify: bool = True, branches: int = 3, radius: int | str | None = None, nni: bool = False):
        if not 0.0 < screen <= 1.0 or min_screen < 1 or min_top < 1 or not margin >= 0 or branches not in (1, 3) or (
                radius not in (None, "auto") and not (isinstance(radius, int) and radius >= 1)):
            raise ValueError(f"need 0 < screen <= 1, min_screen >= 1, min_top >= 1, margin >= 0, branches 1 or 3, "
                             f"radius None, 'auto' or >= 1; got {screen}, {min_screen}, {min_top}, {margin}, {branches}, "
                             f"{radius}")
        self.radius = radius
        self._window = AUTO_RADIUS if radius == "auto" else radius
        self.screen, self.min_screen, self.min_top, self.margin, self.certify = (screen, min_screen, min_top, margin,
                                                                                 certify)
        self.branches = branches
        self.nni = nni
        """Start each climb with NNI rounds (:func:`~phylorl.env.nni.nni_round`: the independent improving NNIs
        applied at once) until none improves; :func:`~phylorl.env.search.run_search` runs them. From random
        starts on 14 ``train/`` alignments (2 starts each) the plain certified climb took 20% less time with
        them and ended 0.41 units higher on average; in the rounds of a search with restarts, whose cheap
        climbs start near an optimum, they cost 14–36% more time for the same trees (docs/benchmarks.md). The
        ``nniclimb`` policy."""
        self._parsimony = ParsimonyClimb()

    @classmethod
    def with_rounds(cls, certify: bool) -> LazyClimb:
        """The climbs of ``lazyclimb`` with restarts: the certified last climb as configured by default; the
        perturb-and-climb rounds cheaper (5% of the moves, at least 16, scored with the pendant branch alone): on
        DS1–DS4 from NJ, 8 rounds of a tenth of the moves took 0.95× IQ-TREE's time where 8 default rounds took
        3.2×, reaching IQ-TREE as often; 5% as often again, in 0.85× the time of a tenth. Both kinds of climb keep
        to the auto-detected radius (:data:`AUTO_RADIUS`; docs/benchmarks.md)."""
        if certify:
            return cls(radius="auto")
        return cls(screen=0.05, min_screen=16, branches=1, certify=False, radius="auto")

    def _choose(self, env: TreeEnv) -> int | None:
        n = len(env.moves)
        if not n:
            return None
        if self._window is not None:  # moves farther than the radius are never screened nor certified
            distance = move_metadata(env.tree, env.moves)[:, 2] - 1
            near = np.flatnonzero(distance <= self._window)
            parsimony = np.full(n, -np.inf)
            parsimony[near] = self._parsimony.scores(env, near)
            found = self._choose_among(env, parsimony, len(near))
            if found is not None and self.radius == "auto" and distance[found] >= self._window - 1:
                self._window = int(distance[found]) + 2  # an improving move near the edge: look farther
            return found
        return self._choose_among(env, self._parsimony.scores(env), n)

    def _choose_among(self, env: TreeEnv, parsimony: np.ndarray, pool: int) -> int | None:
        """One step over the moves whose ``parsimony`` score is finite (``pool`` of them)."""
        n = len(env.moves)
        k = min(pool, max(self.min_screen, int(np.ceil(self.screen * pool))))
        screened = np.sort(np.argsort(-parsimony, kind="stable")[:k])  # (p, s) runs stay whole
        lazy = np.full(n, -np.inf)
        lazy[screened] = env.engine.spr_scores(env.tree, env.moves[screened], branches=self.branches)
        top = np.argsort(-lazy, kind="stable")[:self.min_top]
        found = self._best(env, top)
        if found is not None or not self.certify:
            return found
        rest = np.setdiff1d(np.flatnonzero(parsimony > -np.inf), screened)
        lazy[rest] = env.engine.spr_scores(env.tree, env.moves[rest], branches=self.branches)
        close = np.flatnonzero(lazy > env.loglik - self.margin)
        return self._best(env, np.setdiff1d(close, top))
