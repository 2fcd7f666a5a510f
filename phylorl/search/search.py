"""The large-scale maximum-likelihood search: one call from an alignment to a tree.

    result = search(alignment, "GTR+F+G4", seed=1, on_progress=print, checkpoint="run.json")

Steps: free model parameters estimated on the NJ tree (:func:`~phylorl.search.prepare.fit_model_string`);
identical sequences set aside (:mod:`phylorl.phylo.duplicates`: searched once, put back at the end as IQ-TREE
does); a start tree (randomised stepwise-addition parsimony with parsimony SPR, or NJ) with its branches
optimised; the rounds of :mod:`phylorl.search.strategy` until they stop; the dropped taxa put back and every
branch optimised on the full alignment. Deterministic for a seed; a search resumed from a checkpoint (written
between rounds) ends on the same tree as one never interrupted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from phylorl.phylo import LikelihoodEngine, Tree, write_newick
from phylorl.phylo.duplicates import distinct, prune_tree, restore_tree

from .config import SearchConfig
from .prepare import fit_model_string
from .rounds import optimise_all
from .state import SearchState, checkpoint_data, read_checkpoint, write_checkpoint
from .strategy import FAST, climb_starts, initial_state, next_round, start_tree
from .workers import Workers

FINAL_BRANCH_ROUNDS = 20
"""Newton passes (at most) over every branch of the answer, on the full alignment."""


@dataclass
class SearchResult:
    """The answer of :func:`search` and what it cost."""

    tree: Tree
    """The best tree, over every taxon of the alignment, branch lengths optimised."""
    loglik: float
    """Its log-likelihood."""
    model: str
    """The fully specified model string searched under."""
    start_loglik: float
    """Log-likelihood of the start tree (distinct sequences, branches optimised)."""
    rounds: int
    moves: int
    """SPR moves applied."""
    scored: int
    """Regraft candidates scored lazily."""
    seconds: float
    """Wall time of the call (a resumed search: of this call)."""
    prepare_seconds: float
    """Of which the model fit and start tree."""
    dropped: int
    """Identical sequences set aside while searching."""


def search(
    alignment,
    model: str = "GTR+F+G4",
    *,
    config: SearchConfig | None = None,
    seed: int = 0,
    on_progress: Callable[[dict], None] | None = None,
    on_prepare: Callable[[dict], None] | None = None,
    checkpoint: str | os.PathLike | Callable[[dict], None] | None = None,
    resume: str | os.PathLike | dict | None = None,
    start: Tree | None = None,
) -> SearchResult:
    """Search a maximum-likelihood tree for ``alignment``.

    Args:
        alignment: an :class:`~phylorl.phylo.Alignment`.
        model: a model string; free parameters are estimated on the NJ tree first.
        config: search settings (default :class:`SearchConfig`).
        seed: seeds the start tree (the only random choice).
        on_progress: called after every round with
            ``{"loglik", "best_loglik", "moves", "round", "elapsed", "phase", "radius", "start"}``
            (``loglik``: the current tree's, over the distinct sequences searched;
            ``best_loglik``: the best so far; ``start``: the start tree being climbed).
        on_prepare: called during the preparation before the first round, each time with ``"step"`` and
            ``"elapsed"`` (seconds since the call): ``{"step": "nj"}`` once the NJ tree the model is fitted
            on is built; ``{"step": "model", "round", "loglik"}`` after each round of the model fit;
            ``{"step": "start", "loglik"}`` once the first start tree's branches are optimised. A resumed
            search prepares nothing.
        checkpoint: a path to write (atomically) after every round, or a callable given the checkpoint dict.
        resume: a checkpoint (path or dict) of a search of the same alignment, model, seed and config to go on
            from.
        start: the first start tree (over every taxon of ``alignment``) instead of the one ``config.start``
            names; the other starts are parsimony trees as usual.
    """
    started = time.perf_counter()
    config, seed = config or SearchConfig(), int(seed)
    saved = read_checkpoint(resume) if resume is not None else None

    def prepared(step: dict) -> None:
        if on_prepare is not None:
            on_prepare({"elapsed": time.perf_counter() - started, **step})

    model = saved["model"] if saved is not None else fit_model_string(alignment, model, prepared)
    duplicates, searched, searched_model = distinct(alignment, model) or (None, alignment, model)
    engine = LikelihoodEngine(searched, searched_model)
    if start is not None and duplicates is not None:
        start = prune_tree(start, duplicates)
    identity = {
        "alignment": alignment.content_hash(),
        "model": model,
        "seed": seed,
        "config": config.to_dict(),
        "start_tree": None if start is None else write_newick(start),
    }
    if saved is not None:
        for key, value in identity.items():
            if saved.get(key) != value:
                raise ValueError(f"the checkpoint is of another search ({key} differs)")
        state = SearchState.from_dict(saved["state"])
        start_loglik, prepare_seconds = saved["start_loglik"], saved["prepare_seconds"]
    else:
        tree = start_tree(searched, config, seed, 0) if start is None else start
        state = initial_state(tree, optimise_all(engine, tree, config), config)
        start_loglik, prepare_seconds = state.loglik, time.perf_counter() - started
        prepared({"step": "start", "loglik": start_loglik, "elapsed": prepare_seconds})
    resumed_at = time.perf_counter() - state.elapsed
    workers = Workers(engine, searched_model, config.threads)

    def report():
        state.elapsed = time.perf_counter() - resumed_at
        if on_progress is not None:
            on_progress(
                {
                    "loglik": state.loglik,
                    "best_loglik": max(state.loglik, state.best_loglik),
                    "moves": state.moves,
                    "round": state.round,
                    "elapsed": state.elapsed,
                    "phase": state.phase,
                    "radius": state.radius_max,
                    "start": state.start,
                }
            )

    try:  # every round reported and checkpointed (the starts climbed at once: reported as each is taken in)
        while state.phase != "done" and (config.max_rounds is None or state.round < config.max_rounds):
            if workers.parallel and state.phase in FAST:
                for _ in climb_starts(state, config, seed, workers):
                    report()
            else:
                next_round(engine, state, config, seed, workers)
            report()
            if checkpoint is not None:
                data = checkpoint_data(state, identity, start_loglik, prepare_seconds)
                checkpoint(data) if callable(checkpoint) else write_checkpoint(checkpoint, data)
    finally:
        workers.close()
    tree = state.tree
    if duplicates is not None:
        tree = restore_tree(tree, duplicates, alignment.taxa)
        engine = LikelihoodEngine(alignment, model)
    loglik = engine.optimize_branch_lengths(
        tree, np.arange(tree.n_edges), rounds=FINAL_BRANCH_ROUNDS, tol=1e-4
    )
    return SearchResult(
        tree=tree,
        loglik=float(loglik),
        model=model,
        start_loglik=float(start_loglik),
        rounds=state.round,
        moves=state.moves,
        scored=state.scored,
        seconds=time.perf_counter() - started,
        prepare_seconds=prepare_seconds,
        dropped=0 if duplicates is None else duplicates.dropped,
    )
