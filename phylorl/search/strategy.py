"""The round schedule of the search (RAxML-NG's): fast rounds with a detected radius, then slow rounds.

1. ``fast_auto``: fast SPR rounds (lazy scores with the lengths the move leaves, no Newton) on the radius
   windows ``[1, w]``, ``[w+1, 2w]``, ... (``w`` = ``radius_step``), widening while a window gains more than
   ``auto_gain``; the widest window that paid sets the fast radius.
2. ``fast``: fast rounds on ``[1, fast radius]`` while a round gains more than ``fast_gain``. With ``starts``
   above one, the next start tree is then climbed the same way (1-2), and the best of them goes on.
3. ``slow``: slow rounds (lazy scores with the branches at the regraft point optimised) on ``[1, w]``; a round
   that gains more than ``slow_gain`` restarts the windows at ``[1, w]``, one that does not shifts the window
   outward, until it would start beyond ``slow_radius_limit``.
4. ``perturb``: perturb-and-climb iterations from the best tree (:mod:`phylorl.search.perturb`: random SPR moves
   all over the tree, then SPR rounds over the whole tree; each seeded by the search's seed and its number) until
   :meth:`~phylorl.search.config.SearchConfig.fails_allowed` in a row find no better tree; when one did, the
   slow rounds run once more on the answer (so it is an SPR optimum of the whole tree), then ``done``.

Every round ends with Newton passes over every branch, walked from edge 0 (so a resumed search walks them as
an uninterrupted one does).
"""

from __future__ import annotations

import numpy as np

from .config import SearchConfig
from .perturb import climb
from .rounds import IMPROVEMENT, spr_round
from .state import SearchState


def initial_state(tree, loglik: float, config: SearchConfig) -> SearchState:
    """The state a search starts from: ``tree`` with its branches optimised (``loglik``)."""
    return SearchState(tree=tree, loglik=loglik, phase="fast_auto", radius_min=1,
                       radius_max=config.radius_step, best_radius=config.radius_step, reference=loglik)


def optimise_all(engine, tree, config: SearchConfig) -> float:
    """Newton passes over every branch from edge 0; returns the log-likelihood."""
    edges = np.arange(tree.n_edges)
    return engine.optimize_branch_lengths(tree, edges, rounds=config.branch_rounds, tol=1e-3)


def next_round(engine, state: SearchState, config: SearchConfig, seed: int, make_start) -> SearchState:
    """Run the round ``state`` asks for (on ``state.tree``, in place) and decide the next one; returns
    ``state``. ``make_start(alignment, config, seed, index)`` makes start tree ``index``."""
    if state.phase == "perturb":
        return _perturb(engine, state, config, seed)
    tree = state.tree
    n_limit = tree.n_leaves  # no window starts beyond the tree's size
    step = config.radius_step
    slow = state.phase == "slow"
    result = spr_round(engine, tree, state.loglik, state.radius_max, radius_min=state.radius_min,
                       branches=config.slow_branches if slow else 0, near=config.slow_near if slow else 0.0,
                       cutoff=config.subtree_cutoff)
    loglik = optimise_all(engine, tree, config)
    state.round += 1
    state.moves += result.moves
    state.scored += result.scored
    gain = loglik - state.reference
    state.loglik = loglik
    if state.phase == "fast_auto":
        if gain > config.auto_gain and state.radius_max + 1 < n_limit:
            state.best_radius = state.radius_max
            state.radius_min, state.radius_max = state.radius_max + 1, state.radius_max + step
        else:
            if gain > config.auto_gain:
                state.best_radius = state.radius_max
            state.phase, state.radius_min, state.radius_max = "fast", 1, state.best_radius
    elif state.phase == "fast":
        if gain <= config.fast_gain:
            if state.loglik > state.best_loglik:
                state.best_tree, state.best_loglik = state.tree.copy(), state.loglik
            if state.start + 1 < config.starts:
                state.start += 1
                tree = make_start(engine.alignment, config, seed, state.start)
                loglik = optimise_all(engine, tree, config)
                state.tree, state.loglik, state.phase = tree, loglik, "fast_auto"
                state.radius_min, state.radius_max = 1, step
            else:
                state.tree, state.loglik = state.best_tree, state.best_loglik
                state.best_tree = None
                state.phase, state.radius_min, state.radius_max = "slow", 1, step
    elif state.phase == "slow":
        if gain > config.slow_gain:
            state.radius_min, state.radius_max = 1, step
        else:
            state.radius_min, state.radius_max = state.radius_max + 1, state.radius_max + step
            if state.radius_min > min(config.slow_radius_limit, n_limit):
                state.phase = "done" if state.perturbed or not config.perturb_fails else "perturb"
    state.reference = state.loglik
    return state


def _perturb(engine, state: SearchState, config: SearchConfig, seed: int) -> SearchState:
    n = state.tree.n_leaves
    rng = np.random.default_rng([seed, state.iteration])
    moves = max(config.perturb_min_moves, int(round(config.perturb_moves * n)))
    result = climb(engine, state.tree, rng, moves=moves, radius=config.perturb_radius,
                   climb_radius=min(state.best_radius, config.climb_radius), slow_branches=config.slow_branches,
                   slow_near=config.slow_near, max_rounds=config.climb_rounds, cutoff=config.subtree_cutoff,
                   branch_rounds=config.branch_rounds)
    state.round += 1
    state.iteration += 1
    state.moves += result.moves
    state.scored += result.scored
    if result.loglik > state.loglik + IMPROVEMENT:
        state.tree, state.loglik, state.fails = result.tree, result.loglik, 0
        state.improved = True
    else:
        state.fails += 1
    if state.fails >= config.fails_allowed(n):
        state.perturbed = True
        if state.improved:
            state.phase, state.radius_min, state.radius_max = "slow", 1, config.radius_step
        else:
            state.phase = "done"
    state.reference = state.loglik
    return state
