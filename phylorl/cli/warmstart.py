"""Supervised warm start of an agent: label the moves of visited states with their one-step reward in parallel
worker processes, fit the twin Q networks to them, and write a learner checkpoint.

The checkpoint is a normal learner checkpoint: ``phylorl eval``/``search --policy agent`` read it, and
``phylorl train --init-checkpoint`` continues from it with reinforcement learning. With ``--behaviour CKPT``
the states are those that agent visits (a DAgger round) instead of those of likelihood-greedy search. See
:mod:`phylorl.agent.warmstart`.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

from phylorl.cli import CliError
from phylorl.cli.common import add_alignments, add_model, default_cache_dir, load_agent, status

HELP = "supervised warm start: fit an agent to the one-step reward of every move"

_WORKER: dict = {}


def add_arguments(p) -> None:
    add_alignments(p, "training alignments: files and/or directories, repeatable")
    p.add_argument("--out", required=True, help="checkpoint file to write")
    p.add_argument(
        "--minutes",
        type=float,
        default=5.0,
        help="time spent collecting labelled states, per round (default: 5)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="collect-and-fit rounds; rounds after the first follow the agent fitted so far (DAgger) "
        "and refit on all states (default: 1)",
    )
    p.add_argument(
        "--max-states", type=int, default=0, help="stop collecting after this many states (0: no limit)"
    )
    p.add_argument(
        "--threads", type=int, default=os.cpu_count() or 1, help="labelling processes (default: all cores)"
    )
    add_model(p, "model string (default: GTR+F+G4)")
    p.add_argument("--features", choices=("rich", "basic"), default="rich", help="observation feature set")
    p.add_argument("--hidden", type=int, default=64, help="network width (default: 64)")
    p.add_argument("--gat-layers", type=int, default=3, help="GAT layers (default: 3)")
    p.add_argument("--epochs", type=int, default=8, help="passes over the states (default: 8)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default: 1e-3)")
    p.add_argument("--batch-states", type=int, default=16, help="states per gradient step (default: 16)")
    p.add_argument("--explore", type=float, default=0.25, help="probability of a random behaviour move")
    p.add_argument("--behaviour", help="checkpoint whose greedy moves drive the episodes (DAgger)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    p.add_argument("--cache-dir", help="preparation cache (default: as phylorl search)")
    p.add_argument("--seed", type=int, default=0, help="seed of start trees, exploration and the network")
    p.add_argument("--json", action="store_true", help="print one JSON object with the results")


def _init_worker(model: str, features: str, cache_dir: str, behaviour: str | None) -> None:
    import torch

    torch.set_num_threads(1)
    policy = load_agent(behaviour, None) if behaviour else None
    _WORKER.update(model=model, features=features, cache_dir=cache_dir, entries={}, policy=policy)


def _episode(path: str, seed: int, cfg, deadline: float | None = None) -> list:
    from phylorl.agent.warmstart import label_episode
    from phylorl.env.config import EnvConfig
    from phylorl.env.prepare import PreparationCache
    from phylorl.env.tree_env import EnvAlignment
    from phylorl.phylo import load_alignment

    entries = _WORKER["entries"]
    if path not in entries:
        alignment = load_alignment(path)
        prepared = PreparationCache(_WORKER["cache_dir"]).get(alignment, _WORKER["model"])
        entries[path] = EnvAlignment.build(alignment, prepared, Path(path).name)
    env_cfg = EnvConfig(start="random", features=_WORKER["features"])
    return label_episode(entries[path], env_cfg, cfg, seed, _WORKER["policy"], deadline)


def _collect(args, paths, cfg, cache_dir, behaviour, task, have):
    """Label episodes in ``args.threads`` processes for ``args.minutes``: ``(states, next task id)``."""
    import numpy as np

    states: list = []
    started = time.perf_counter()
    deadline = started + 60 * args.minutes
    wall_deadline = time.time() + 60 * args.minutes  # episodes still running then stop early
    with ProcessPoolExecutor(
        args.threads,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_init_worker,
        initargs=(args.model, args.features, cache_dir, behaviour),
    ) as pool:
        rng = np.random.default_rng([args.seed, task])
        pending = set()

        def submit():
            nonlocal task
            path = paths[int(rng.integers(len(paths)))]
            pending.add(pool.submit(_episode, path, args.seed * 1_000_003 + task, cfg, wall_deadline))
            task += 1

        for _ in range(2 * args.threads):
            submit()
        shown = time.perf_counter()
        while pending:
            done, pending = wait(pending, timeout=5.0, return_when=FIRST_COMPLETED)
            for future in done:
                states.extend(future.result())
            full = args.max_states and have + len(states) >= args.max_states
            if time.perf_counter() < deadline and not full:
                while len(pending) < 2 * args.threads:
                    submit()
            line = f"warmstart: {have + len(states)} labelled states, {time.perf_counter() - started:.0f} s"
            shown = _show(line, shown, final=not pending)
    return states, task


def _epoch(r: dict) -> None:
    status(f"warmstart: epoch {r['epoch']} loss {r['loss']:.4f} (mse {r['mse']:.5f}, ce {r['ce']:.4f})")


def _show(line: str, shown: float, final: bool) -> float:
    """The collection's progress on stderr: redrawn in place on a terminal; on a file or pipe (a log) a line
    of its own every 10 s and at the end. Returns when a line was last written there."""
    if sys.stderr.isatty():
        print(f"\r{line}", end="\n" if final else "", file=sys.stderr, flush=True)
    elif final or time.perf_counter() - shown >= 10.0:
        print(line, file=sys.stderr, flush=True)
        return time.perf_counter()
    return shown


def run(args) -> int:
    from phylorl.env.corpus import load_corpus
    from phylorl.phylo import parse_model

    if args.minutes <= 0 or args.threads < 1 or args.epochs < 1 or args.hidden < 4 or args.rounds < 1:
        raise CliError("--minutes must be > 0, --threads, --epochs and --rounds >= 1, --hidden >= 4")
    parse_model(args.model)
    out = Path(args.out)
    if out.parent and not out.parent.exists():
        raise CliError(f"--out: directory {out.parent} does not exist")
    import torch

    from phylorl.agent.config import AgentConfig
    from phylorl.agent.learner import Learner
    from phylorl.agent.warmstart import WarmStartConfig, fit, top1_agreement
    from phylorl.nets.config import NetworkConfig

    if args.behaviour:
        load_agent(args.behaviour, None)  # fails fast on a bad checkpoint
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    paths = [str(e.path) for e in load_corpus(args.alignments).entries]
    cfg = WarmStartConfig(
        epochs=args.epochs, lr=args.lr, explore=args.explore, batch_states=args.batch_states
    )
    cache_dir = args.cache_dir or default_cache_dir()
    # compile the kernels once here (the forked workers inherit them) and fail early on a bad corpus
    threads = torch.get_num_threads()
    _init_worker(args.model, args.features, cache_dir, args.behaviour)
    _episode(paths[0], 10**9, WarmStartConfig(steps_factor=0.01))
    torch.set_num_threads(threads)
    torch.manual_seed(args.seed)
    widths = dict.fromkeys(("hidden", "action_hidden", "head_hidden"), args.hidden)
    net_cfg = NetworkConfig(features=args.features, gat_layers=args.gat_layers, **widths)
    learner = Learner(net_cfg, AgentConfig(), device, seed=args.seed)
    states: list = []
    rounds, behaviour, task = [], args.behaviour, 0
    for round_index in range(args.rounds):
        started = time.perf_counter()
        fresh, task = _collect(args, paths, cfg, cache_dir, behaviour, task, len(states))
        states += fresh
        collect_seconds = time.perf_counter() - started
        if not states:
            raise CliError("no labelled state was collected: give more --minutes")
        holdout = states[::20]
        train = [s for i, s in enumerate(states) if i % 20]
        fit_started = time.perf_counter()
        history = fit(learner, train, cfg, seed=args.seed + round_index, on_epoch=_epoch)
        learner.save(out)
        behaviour = str(out)  # the next round follows this agent (DAgger)
        rounds.append(
            {
                "round": round_index + 1,
                "states": len(states),
                "new_states": len(fresh),
                "collect_seconds": collect_seconds,
                "fit_seconds": time.perf_counter() - fit_started,
                "holdout_top1": top1_agreement(learner, holdout),
                "history": history,
            }
        )
        status(
            f"warmstart: round {round_index + 1}: {len(states)} states, held-out top-1 agreement with "
            f"likelihood-greedy {rounds[-1]['holdout_top1']:.3f}"
        )
    result = {
        "checkpoint": str(out),
        "states": len(states),
        "episodes": task,
        "rounds": rounds,
        "holdout_top1": rounds[-1]["holdout_top1"],
        "network": net_cfg.__dict__,
        "device": str(device),
        "alignments": len(paths),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"wrote {out}: {len(states)} states from {task} episodes in {len(rounds)} round(s); held-out "
            f"top-1 agreement with likelihood-greedy {result['holdout_top1']:.3f}"
        )
    return 0
