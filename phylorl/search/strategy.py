"""The round schedule of the search (RAxML-NG's): fast rounds with a detected radius, then slow rounds.

1. ``fast_auto``: fast SPR rounds (lazy scores with the lengths the move leaves, no Newton) on the radius
   windows ``[1, w]``, ``[w+1, 2w]``, ... (``w`` = ``radius_step``), widening while a window gains more than
   ``auto_gain``; the widest window that paid sets the fast radius.
2. ``fast``: fast rounds on ``[1, fast radius]`` while a round gains more than ``fast_gain``.
3. ``slow``: slow rounds (lazy scores with the branches at the regraft point optimised) on ``[1, w]``; a round
   that gains more than ``slow_gain`` restarts the windows at ``[1, w]``, one that does not shifts the window
   outward, until it would start beyond ``slow_radius_limit``.

Every round ends with Newton passes over every branch, walked from edge 0 (so a resumed search walks them as an
uninterrupted one does).
"""

from __future__ import annotations

import numpy as np

from .config import SearchConfig
from .rounds import spr_round
from .state import SearchState


def initial_state(tree, loglik: float, config: SearchConfig) -> SearchState:
    """The state a search starts from: ``tree`` with its branches optimised (``loglik``)."""
    return SearchState(tree=tree, loglik=loglik, phase="fast_auto", radius_min=1, radius_max=config.radius_step,
                       best_radius=config.radius_step, reference=loglik)


def optimise_all(engine, tree, config: SearchConfig) -> float:
    """Newton passes over every branch from edge 0; returns the log-likelihood."""
    return engine.optimize_branch_lengths(tree, np.arange(tree.n_edges), rounds=config.branch_rounds, tol=1e-3)


def next_round(engine, state: SearchState, config: SearchConfig) -> SearchState:
    """Run the round ``state`` asks for (on ``state.tree``, in place) and decide the next one; returns ``state``."""
    tree = state.tree
    n_limit = tree.n_leaves  # no window starts beyond the tree's size
    step = config.radius_step
    slow = state.phase == "slow"
    result = spr_round(engine, tree, state.loglik, state.radius_max, radius_min=state.radius_min,
                       branches=config.slow_branches if slow else 0)
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
            state.phase, state.radius_min, state.radius_max = "slow", 1, step
    elif state.phase == "slow":
        if gain > config.slow_gain:
            state.radius_min, state.radius_max = 1, step
        else:
            state.radius_min, state.radius_max = state.radius_max + 1, state.radius_max + step
            if state.radius_min > min(config.slow_radius_limit, n_limit):
                state.phase = "done"
    state.reference = loglik
    return state
