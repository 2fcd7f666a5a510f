"""Ranked climbs: hill-climbing policies for :func:`~phylorl.env.search.run_search` that evaluate fully (SPR +
local branch optimisation, as a step) first the moves a cheap ranking puts first, and the others only to
certify a local optimum. :class:`RankedClimb` is the frame; the agent's
:class:`~phylorl.agent.policy.GuidedClimb` (the polish) ranks by its Q-values and checks the other moves by
their lazy SPR scores (:mod:`phylorl.phylo.lazy_spr`)."""

from __future__ import annotations

import numpy as np

from phylorl.phylo import Tree, apply_spr

from .tree_env import TreeEnv

IMPROVEMENT_EPS = 1e-6  # a move must raise logL by more than this to count as an improvement

THOROUGH = 4
"""How many of the best moves of a certified local optimum a climb optimises thoroughly (every branch) before
it stops (:meth:`RankedClimb.escape`)."""


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
    evaluated fully. With ``lazy_top`` the top moves are ordered by their lazy scores too and only the
    ``lazy_top`` best of them evaluated fully, the others of the top only when none of those improves (and,
    with ``lazy_margin``, only when their lazy score is within it).

    A certified climb tries :meth:`escape` at its optimum: a move's full evaluation optimises only the
    branches next to it, which can rank a better tree several units low (DS3, JC: −5.9 for a move worth +0.3
    once every branch is optimised), so :meth:`escape` optimises every branch of the :attr:`thorough` moves
    that evaluated best in the last certified step (the lazy subtree rearrangement's "thorough optimisation
    of the few best").
    """

    climbs = True
    thorough = THOROUGH
    _near: tuple | None = None  # (the moves array they index, moves evaluated, their values)
    _seen: list

    def __init__(
        self,
        top: float = 0.05,
        min_top: int = 8,
        certify: bool = True,
        lazy_margin: float | None = None,
        lazy_top: int | None = None,
    ):
        if not 0.0 <= top <= 1.0 or min_top < 1:
            raise ValueError(f"top must be in [0, 1] and min_top >= 1, got {top}, {min_top}")
        if lazy_margin is not None and not lazy_margin >= 0:
            raise ValueError(f"lazy_margin must be None or >= 0, got {lazy_margin}")
        if lazy_top is not None and lazy_top < 1:
            raise ValueError(f"lazy_top must be None or >= 1, got {lazy_top}")
        self.top, self.min_top, self.certify = top, min_top, certify
        self.lazy_margin, self.lazy_top = lazy_margin, lazy_top

    def scores(self, env: TreeEnv) -> np.ndarray:
        """Higher first: one score per move of ``env.moves``."""
        raise NotImplementedError

    def choose(self, env: TreeEnv) -> int | None:
        self._seen = []
        found = self._choose(env)
        self._near = None
        if found is None and self.certify and self._seen:
            self._near = (
                env.moves,
                np.concatenate([p for p, _ in self._seen]),
                np.concatenate([v for _, v in self._seen]),
            )
        return found

    def _best(self, env: TreeEnv, part: np.ndarray) -> int | None:
        """The move of ``part`` (indices into ``env.moves``) that reaches the highest log-likelihood when
        evaluated fully (SPR + local optimisation, as ``step``), if that raises the log-likelihood; else
        ``None``. The values are kept for :meth:`escape`."""
        if not len(part):
            return None
        values = env.evaluate_moves(part)
        self._seen.append((np.asarray(part), values))
        best = int(np.argmax(values))
        return int(part[best]) if values[best] > env.loglik + IMPROVEMENT_EPS else None

    def escape(self, env: TreeEnv) -> Tree | None:
        """A tree one move from ``env``'s (its branches optimised) of higher log-likelihood than
        ``env.loglik``, among the :attr:`thorough` moves that evaluated best when the last step found none
        improving; else ``None``. Call after optimising every branch of the current tree (:func:`run_search`
        does)."""
        near, self._near = self._near, None
        if near is None or near[0] is not env.moves or not self.thorough:
            return None
        _, part, values = near
        best, answer = env.loglik + IMPROVEMENT_EPS, None
        for a in part[np.argsort(-values, kind="stable")[: self.thorough]]:
            tree = env.tree.copy()
            apply_spr(tree, env.moves[a])
            loglik = env.engine.optimize_branch_lengths(tree, rounds=20, tol=1e-4)
            if loglik > best:
                best, answer = loglik, tree
        return answer

    def _choose(self, env: TreeEnv) -> int | None:
        if not len(env.moves):
            return None
        order = np.argsort(-self.scores(env), kind="stable")
        k = min(len(order), max(self.min_top, int(np.ceil(self.top * len(order)))))
        if self.lazy_top is None:
            found = self._best(env, order[:k])
        else:
            ranked, lazy = self._lazy(env, order[:k])
            found = self._best(env, ranked[: self.lazy_top])
            if found is None:
                found = self._best(env, self._close(env, ranked[self.lazy_top :], lazy[self.lazy_top :]))
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
