"""The round schedule of the search (RAxML-NG's): fast rounds with a detected radius, then slow rounds.

1. ``fast_auto``: fast SPR rounds (lazy scores with the lengths the move leaves, no Newton) on the radius
   windows ``[1, w]``, ``[w+1, 2w]``, ... (``w`` = ``radius_step``), widening while a window gains more than
   ``auto_gain``; the widest window that paid sets the fast radius.
2. ``fast``: fast rounds on ``[1, fast radius]`` while a round gains more than ``fast_gain``. With ``starts``
   above one, the next start tree is then climbed the same way (1-2), and the best of them goes on. With
   ``threads`` above one the start trees are climbed at once, one per process (:func:`climb_starts`), to the
   same result.
3. ``slow``: slow rounds (lazy scores with the branches at the regraft point optimised) on ``[1, w]``; a round
   that gains more than ``slow_gain`` restarts the windows at ``[1, w]``, one that does not shifts the window
   outward, until it would start beyond ``slow_radius_limit``.
4. ``perturb``: perturb-and-climb iterations from the best tree (:mod:`phylorl.search.perturb`: random SPR
   moves all over the tree, then SPR rounds over the whole tree; each seeded by the search's seed and its
   number), ``threads`` of them at once from the same tree (the best of a batch is kept when it beats the
   tree) until :meth:`~phylorl.search.config.SearchConfig.fails_allowed` in a row find no better tree; when
   one did, the slow rounds run once more on the answer (so it is an SPR optimum of the whole tree), then
   ``done``.

Every round ends with Newton passes over every branch, walked from edge 0 (so a resumed search walks them as
an uninterrupted one does).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from phylorl.phylo import Tree, nj_tree
from phylorl.phylo.parsimony_starts import parsimony_tree

from .config import SearchConfig
from .perturb import climb
from .rounds import IMPROVEMENT, optimise_all, spr_round
from .state import SearchState

FAST = ("fast_auto", "fast")


def initial_state(tree, loglik: float, config: SearchConfig) -> SearchState:
    """The state a search starts from: ``tree`` with its branches optimised (``loglik``)."""
    return SearchState(
        tree=tree,
        loglik=loglik,
        phase="fast_auto",
        radius_min=1,
        radius_max=config.radius_step,
        best_radius=config.radius_step,
        reference=loglik,
    )


def start_tree(alignment, config: SearchConfig, seed: int, index: int) -> Tree:
    """Start tree number ``index`` of a search with ``seed``: NJ for the first when ``config.start`` is
    ``"nj"``, otherwise a parsimony tree drawn with the random generator seeded by ``(seed, index)``."""
    if config.start == "nj" and index == 0:
        return nj_tree(alignment)
    return parsimony_tree(alignment, np.random.default_rng([seed, index]), spr_radius=config.parsimony_radius)


def next_round(engine, state: SearchState, config: SearchConfig, seed: int, workers) -> SearchState:
    """Run the round ``state`` asks for (on ``state.tree``, in place) and decide the next one; returns
    ``state``. ``workers`` (:class:`~phylorl.search.workers.Workers`) runs the ``config.threads`` iterations
    of a perturbation round."""
    if state.phase == "perturb":
        return _perturb(engine, state, config, seed, workers)
    tree = state.tree
    n_limit = tree.n_leaves  # no window starts beyond the tree's size
    step = config.radius_step
    slow = state.phase == "slow"
    result = spr_round(
        engine,
        tree,
        state.loglik,
        state.radius_max,
        radius_min=state.radius_min,
        branches=config.slow_branches if slow else 0,
        near=config.slow_near if slow else 0.0,
        cutoff=config.subtree_cutoff,
    )
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
                tree = start_tree(engine.alignment, config, seed, state.start)
                loglik = optimise_all(engine, tree, config)
                state.tree, state.loglik, state.phase = tree, loglik, "fast_auto"
                state.radius_min, state.radius_max, state.best_radius = 1, step, step  # its own radius
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


def climb_start(
    engine,
    seed: int,
    index: int,
    tree: Tree | None = None,
    loglik: float | None = None,
    *,
    config: SearchConfig,
) -> SearchState:
    """The fast rounds of start tree ``index`` alone (``tree`` with its ``loglik`` when given, else made and
    optimised here), as a search climbing one start after another climbs it; returns its state at the end."""
    if tree is None:
        tree = start_tree(engine.alignment, config, seed, index)
        loglik = optimise_all(engine, tree, config)
    state = initial_state(tree, loglik, config)
    state.start = index
    alone = replace(config, starts=index + 1)  # the last start: its fast rounds end in the slow phase
    while state.phase in FAST:
        next_round(engine, state, alone, seed, None)
    return state


def climb_starts(state: SearchState, config: SearchConfig, seed: int, workers):
    """Every start tree climbed with fast rounds by ``workers`` (the first from ``state``, at its beginning),
    then ``state`` set as a search climbing them one after another leaves it for the slow rounds: the best of
    them (the first of equals), the last one's fast radius, their rounds, moves and scores summed. A
    generator: it yields after each start but the last is taken in (``state`` then holds that start's tree and
    the best so far) and returns once ``state`` is in the slow phase."""
    if state.start or state.round:
        raise ValueError("the starts are climbed at once from the first start's beginning only")
    jobs = [(seed, k) + ((state.tree, state.loglik) if k == 0 else ()) for k in range(config.starts)]
    best = None
    for climbed in workers.map(climb_start, jobs, config=config):
        state.round += climbed.round
        state.moves += climbed.moves
        state.scored += climbed.scored
        state.best_radius, state.start = climbed.best_radius, climbed.start
        if best is None or climbed.loglik > best.loglik:
            best = climbed
        if climbed.start + 1 < config.starts:
            state.tree, state.loglik, state.best_loglik = climbed.tree, climbed.loglik, best.loglik
            state.phase = "fast"
            yield
    state.tree, state.loglik, state.best_loglik, state.best_tree = best.tree, best.loglik, best.loglik, None
    state.phase, state.radius_min, state.radius_max = "slow", 1, config.radius_step
    state.reference = state.loglik


def _perturb(engine, state: SearchState, config: SearchConfig, seed: int, workers) -> SearchState:
    n = state.tree.n_leaves
    moves = max(config.perturb_min_moves, int(round(config.perturb_moves * n)))
    jobs = [(state.tree, np.random.default_rng([seed, state.iteration + k])) for k in range(config.threads)]
    climb_radius = min(state.best_radius, config.climb_radius)
    results = list(workers.map(climb, jobs, moves=moves, climb_radius=climb_radius, config=config))
    state.round += 1
    state.iteration += len(results)
    state.moves += sum(r.moves for r in results)
    state.scored += sum(r.scored for r in results)
    best = max(results, key=lambda r: r.loglik)  # the first of equals
    if best.loglik > state.loglik + IMPROVEMENT:
        state.tree, state.loglik, state.fails = best.tree, best.loglik, 0
        state.improved = True
    else:
        state.fails += len(results)
    if state.fails >= config.fails_allowed(n):
        state.perturbed = True
        if state.improved:
            state.phase, state.radius_min, state.radius_max = "slow", 1, config.radius_step
        else:
            state.phase = "done"
    state.reference = state.loglik
    return state
