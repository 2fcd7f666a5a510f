"""Run every search method from the same seeded start trees and score them against IQ-TREE.

Start tree ``k`` of an alignment is the one ``TreeEnv([entry], env_config, seed=seed + k)`` (random by
default) draws on ``reset(0)`` (branch lengths optimised), so every method starts from the same trees.
Each method's answer is the best tree it saw.

``agent``         the policy (any object with ``choose(env) -> int | None``) for ``steps`` moves.
``agent+polish``  :func:`~phylorl.agent.policy.polish` from the agent's best tree: agent-guided
                  climbs with perturb-and-climb rounds, then a certified climb (plain hill-climbing
                  when the policy has no Q values); its start log-likelihood stays the random
                  start's, its cost is the agent's plus the polish's.
``ml``            :func:`phylorl.search.search` with the start tree as its first start (the other starts its
                  own parsimony trees), under the prepared model string.
``random``        ``steps`` uniform random moves.
``greedy``        the best move while one improves, at most ``steps`` moves.
``hillclimb``     greedy to a local optimum with full branch optimisation, no move limit.
``iqtree``        IQ-TREE's ML search, once per alignment (needs an :class:`IqtreeRunner`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from phylorl.env.config import EnvConfig
from phylorl.env.search import RESCORE, Policy, chained, run_search
from phylorl.env.tree_env import EnvAlignment, TreeEnv
from phylorl.phylo import rf_distance, write_newick

from .iqtree import IqtreeResult, IqtreeRunner
from .metrics import (
    AGENT_METHODS,
    METHODS,
    MIN_GAIN,
    TOLERANCE,
    MethodSummary,
    StartResult,
    by_band,
    by_taxon_count,
    improvement,
    summarise,
    within,
)


@dataclass
class AlignmentInfo:
    name: str
    n_taxa: int
    n_sites: int
    model: str
    steps: int
    iqtree_loglik: float | None = None
    iqtree_reported_loglik: float | None = None
    iqtree_seconds: float | None = None
    iqtree_tree: str | None = None


@dataclass
class Evaluation:
    """Everything one evaluation produced (see :func:`evaluate_methods`)."""

    settings: dict
    alignments: list[AlignmentInfo]
    rows: list[StartResult]
    summary: list[MethodSummary]
    by_taxa: dict[int, dict[str, float | None]]
    has_reference: bool
    by_band: dict[str, dict[str, MethodSummary]]

    def to_dict(self) -> dict:
        rows = [asdict(r) | {"delta_loglik": r.delta} for r in self.rows]
        return {
            "settings": self.settings,
            "has_reference": self.has_reference,
            "alignments": [asdict(a) for a in self.alignments],
            "summary": [asdict(s) for s in self.summary],
            "by_taxa": {str(n): v for n, v in self.by_taxa.items()},
            "by_band": {band: {m: asdict(s) for m, s in v.items()} for band, v in self.by_band.items()},
            "rows": rows,
        }


def check_methods(methods: Sequence[str], *, has_policy: bool, has_iqtree: bool) -> list[str]:
    """``methods`` validated (known, each once, in the order given); ``ValueError`` otherwise."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(
            f"unknown method(s) {', '.join(map(repr, unknown))}: expected some of {', '.join(METHODS)}"
        )
    if not methods:
        raise ValueError("no method to evaluate")
    if not has_policy and any(m in AGENT_METHODS for m in methods):
        raise ValueError("the agent methods need a policy")
    if not has_iqtree and "iqtree" in methods:
        raise ValueError("the iqtree method needs IQ-TREE")
    return list(dict.fromkeys(methods))


def evaluate_methods(
    entries: Sequence[EnvAlignment],
    policy: Policy | None = None,
    *,
    starts: int = 4,
    steps: int | None = None,
    seed: int = 0,
    methods: Sequence[str] | None = None,
    iqtree: IqtreeRunner | None = None,
    env_config: EnvConfig | None = None,
    on_progress: Callable[[str], None] | None = None,
    workers: int = 1,
    rescore: int = RESCORE,
) -> Evaluation:
    """Evaluate ``methods`` (default: all that the arguments allow) on every entry from ``starts`` starts.

    ``steps``: moves of the agent, random and greedy methods (default ``2 n``, n = taxa); ``rescore``: how
    they choose their answer (:func:`~phylorl.env.search.run_search`).
    ``iqtree``: the reference; without it improvements are ``None``. ``on_progress(label)`` is called
    before each unit of work (one IQ-TREE run, or one method from one start). ``workers > 1``: that many
    alignments at once in forked processes (set torch to one thread before, as ``phylorl eval --threads``
    does: a process that has run multi-threaded torch must not fork); the results are the same rows in
    the same order, and every method's seconds and IQ-TREE's are measured side by side under the same load.
    """
    for name, value in (("workers", workers), ("starts", starts), ("steps", steps)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if methods is None:
        methods = [
            m
            for m in METHODS
            if (policy is not None or m not in AGENT_METHODS) and (iqtree is not None or m != "iqtree")
        ]
    methods = check_methods(methods, has_policy=policy is not None, has_iqtree=iqtree is not None)
    config = env_config or EnvConfig(start="random")
    progress = on_progress or (lambda label: None)
    job = _Job(entries, policy, methods, starts, steps, seed, config, iqtree, rescore)
    # one-time set-up (compilation) is not search time
    if entries and any(m in AGENT_METHODS for m in methods):
        policy.choose(_fresh_env(entries[0], config, seed))
    if workers > 1 and len(entries) > 1:
        done = _parallel(job, workers, progress)
    else:
        done = [_one_alignment(job, i, progress) for i in range(len(entries))]
    infos = [info for info, _, _ in done]
    rows = [row for _, alignment_rows, _ in done for row in alignment_rows]
    iq_seconds = [seconds for _, _, seconds in done if seconds is not None]
    settings = {
        "starts": starts,
        "steps": steps,
        "rescore": rescore,
        "seed": seed,
        "methods": methods,
        "iqtree": iqtree is not None,
        "min_gain": MIN_GAIN,
        "tolerance": TOLERANCE,
        "workers": workers,
    }
    return Evaluation(
        settings,
        infos,
        rows,
        summarise(rows, methods, iq_seconds),
        by_taxon_count(rows, methods),
        iqtree is not None,
        by_band(rows, methods),
    )


@dataclass
class _Job:
    entries: Sequence[EnvAlignment]
    policy: Policy | None
    methods: list[str]
    starts: int
    steps: int | None
    seed: int
    config: EnvConfig
    iqtree: IqtreeRunner | None
    rescore: int


def _one_alignment(job: _Job, index: int, progress: Callable[[str], None]):
    """``(AlignmentInfo, rows, IQ-TREE seconds or None)`` of entry ``index``: IQ-TREE, then every start."""
    entry = job.entries[index]
    n = entry.alignment.n_taxa
    info = AlignmentInfo(entry.name, n, entry.alignment.n_sites, entry.prepared.model, job.steps or 2 * n)
    reference: IqtreeResult | None = None
    if job.iqtree is not None:
        progress(f"{entry.name}: iqtree")
        reference = job.iqtree.search(entry)
        info.iqtree_loglik, info.iqtree_reported_loglik = reference.loglik, reference.reported_loglik
        info.iqtree_seconds, info.iqtree_tree = reference.seconds, write_newick(reference.tree)
    rows = []
    for k in range(job.starts):
        rows += _one_start(entry, k, job, info.steps, reference, progress)
    return info, rows, None if reference is None else reference.seconds


_PARALLEL: tuple | None = None  # (job, progress queue) inherited by forked workers


def _parallel(job: _Job, workers: int, progress: Callable[[str], None]) -> list:
    """:func:`_one_alignment` of every entry in ``workers`` forked processes (one alignment each at a time,
    results in entry order); their progress labels come back through a queue."""
    import multiprocessing as mp
    import queue as queue_module

    global _PARALLEL
    ctx = mp.get_context("fork")
    labels = ctx.Queue()
    _PARALLEL = (job, labels)
    try:
        with ctx.Pool(workers) as pool:
            pending = pool.map_async(_worker, range(len(job.entries)), chunksize=1)
            while True:  # the labels until every alignment is done and none came for 0.2 s
                try:
                    progress(labels.get(timeout=0.2))
                except queue_module.Empty:
                    if pending.ready():
                        return pending.get()
    finally:
        _PARALLEL = None


def _worker(index: int):
    job, labels = _PARALLEL
    return _one_alignment(job, index, labels.put)


def _fresh_env(entry: EnvAlignment, config: EnvConfig, seed: int, tree=None) -> TreeEnv:
    env = TreeEnv([entry], config, seed=seed)
    env.reset(0, tree=tree)
    return env


def _one_start(entry, k, job: _Job, steps, reference, progress) -> list[StartResult]:
    seed, config, policy, rescore = job.seed, job.config, job.policy, job.rescore
    out, agent = [], None
    first = _fresh_env(entry, config, seed + k)  # start tree k; later methods rebuild the same one
    start = first.loglik

    def env() -> TreeEnv:
        nonlocal first
        made, first = first or _fresh_env(entry, config, seed + k), None
        return made

    for method in job.methods:
        if method == "iqtree":
            r = reference
            out.append(_row(entry, k, method, reference, start, r.loglik, r.tree, r.seconds))
            continue
        progress(f"{entry.name}: start {k + 1}, {method}")
        if method == "ml":
            out.append(_row(entry, k, method, reference, *_ml(entry, env(), seed + k)))
            continue
        if method in AGENT_METHODS:
            agent = agent or run_search(env(), policy, steps=steps, finish=True, rescore=rescore)
            r = agent
            if method == "agent+polish":
                from phylorl.agent.policy import polish

                q_policy = policy if hasattr(policy, "q_values") else None
                after = _fresh_env(entry, config, seed + k, tree=agent.best_tree)
                r = chained(agent, polish(after, q_policy, rng=np.random.default_rng([seed, k, 1])))
        elif method == "hillclimb":
            r = run_search(env(), method, steps=None)
        else:  # random, greedy
            rng = np.random.default_rng([seed, k]) if method == "random" else None
            r = run_search(env(), method, steps=steps, rng=rng, finish=True, rescore=rescore)
        answer = (r.start_loglik, r.best_loglik, r.best_tree, r.seconds, r.trajectory, r.evaluations, r.steps)
        out.append(_row(entry, k, method, reference, *answer))
    return out


def _ml(entry, env: TreeEnv, seed: int) -> tuple:
    """The ML search's part of a row from start tree ``env.tree`` (its seconds: the whole call, model string
    given)."""
    from phylorl.search import search

    start, trajectory = env.loglik, []
    result = search(
        entry.alignment,
        entry.prepared.model,
        seed=seed,
        start=env.tree.copy(),
        on_progress=lambda p: trajectory.append(p["best_loglik"]),
    )
    return start, result.loglik, result.tree, result.seconds, trajectory, None, result.moves


def _best_so_far(start: float, trajectory: Sequence[float], best: float) -> list[float]:
    """Best log-likelihood after each move; the last point is the answer ``best`` (a full branch
    optimisation at the end of a climb may raise it without a move)."""
    points = [float(p) for p in np.maximum.accumulate([start, *trajectory])[1:]]
    if points:
        points[-1] = max(points[-1], best)
    elif best > start:
        points = [float(best)]
    return points


def _row(
    entry, k, method, reference, start, final, tree, seconds, trajectory=None, evaluations=None, steps=None
) -> StartResult:
    """``trajectory``: the log-likelihood after each move (``None`` for IQ-TREE, which has none)."""
    ref = reference.loglik if reference is not None else None
    rf = rf_distance(tree, reference.tree) if reference is not None else None
    return StartResult(
        alignment=entry.name,
        n_taxa=entry.alignment.n_taxa,
        start=k,
        method=method,
        start_loglik=float(start),
        final_loglik=float(final),
        iqtree_loglik=ref,
        improvement=improvement(start, final, ref),
        within_tolerance=within(final, ref),
        rf=rf,
        rf_normalised=None if rf is None else rf / (2 * (entry.alignment.n_taxa - 3)),
        evaluations=evaluations,
        steps=steps,
        seconds=float(seconds),
        trajectory=[] if trajectory is None else _best_so_far(start, trajectory, final),
        tree=write_newick(tree),
    )
