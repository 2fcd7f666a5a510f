"""Search a tree for an alignment with a policy (random, greedy, hill-climbing or a trained agent).

The alignment is prepared first (NJ tree, model parameters estimated on it; cached by content in
--cache-dir), then the search starts from a random or NJ tree with optimised branch lengths.
"""

from __future__ import annotations

import json
import os
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

HELP = "search tree space for an alignment with a policy"
POLICIES = ("random", "greedy", "hillclimb", "agent")


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "phylorl" / "prepared"


def add_arguments(p) -> None:
    p.add_argument("--alignment", required=True, help="FASTA, PHYLIP or NEXUS file")
    p.add_argument("--model", default="GTR+F+G4", help="model string; free parameters are estimated on the NJ tree")
    p.add_argument("--policy", required=True, choices=POLICIES)
    p.add_argument("--checkpoint", help="learner checkpoint (required for --policy agent)")
    p.add_argument("--start", choices=("random", "nj"), default="nj", help="start tree (default: nj)")
    p.add_argument("--steps", type=int, help="most moves (default: 20; hillclimb: until a local optimum)")
    p.add_argument("--radius", type=int, help="largest SPR radius (default: all moves)")
    p.add_argument("--restarts", type=int, default=0,
                   help="hillclimb: perturb-and-climb rounds after the first climb (iterated local search)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="write the final tree (Newick) here")
    p.add_argument("--cache-dir", default=None, help=f"preparation cache (default: {default_cache_dir()})")
    p.add_argument("--json", action="store_true", help="print one JSON object with the results")


def run(args) -> int:
    from phylorl.cli import CliError
    from phylorl.env import EnvAlignment, EnvConfig, PreparationCache, TreeEnv
    from phylorl.env.search import run_search
    from phylorl.phylo import load_alignment, parse_model, write_newick

    if args.steps is not None and args.steps < 1:
        raise CliError(f"--steps must be >= 1, got {args.steps}")
    if args.policy == "agent" and not args.checkpoint:
        raise CliError("--policy agent needs --checkpoint PATH")
    steps = args.steps if args.steps is not None else (None if args.policy == "hillclimb" else 20)
    parse_model(args.model)  # fail fast on a bad model string
    started = time.perf_counter()
    alignment = load_alignment(args.alignment)
    cache = PreparationCache(args.cache_dir or default_cache_dir())
    _status(f"preparing {args.alignment} ({alignment.n_taxa} taxa, {alignment.n_sites} sites) under {args.model}")
    prepared = cache.get(alignment, args.model)
    entry = EnvAlignment.build(alignment, prepared, Path(args.alignment).name)
    config = EnvConfig(start=args.start, horizon=10**9, radius=args.radius)
    env = TreeEnv([entry], config, seed=args.seed)
    env.reset()
    policy = args.policy
    if policy == "agent":
        from phylorl.agent.policy import AgentPolicy

        policy = AgentPolicy.from_checkpoint(args.checkpoint)
    if args.restarts and args.policy != "hillclimb":
        raise CliError("--restarts applies to --policy hillclimb only")
    search = partial(run_search, restarts=args.restarts)
    result = _search_with_progress(env, policy, steps, np.random.default_rng(args.seed), search)
    newick = write_newick(result.tree)
    if args.out:
        Path(args.out).write_text(newick + "\n")
    summary = {
        "alignment": args.alignment,
        "policy": args.policy,
        "model": prepared.model,
        "start": args.start,
        "start_loglik": result.start_loglik,
        "final_loglik": result.final_loglik,
        "best_loglik": result.best_loglik,
        "steps": result.steps,
        "evaluations": result.evaluations,
        "branch_optimisations": result.branch_optimisations,
        "seconds": time.perf_counter() - started,
        "search_seconds": result.seconds,
        "tree": newick,
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"start log-likelihood: {result.start_loglik:.4f}")
        print(f"final log-likelihood: {result.final_loglik:.4f} after {result.steps} moves "
              f"({result.evaluations} evaluations, {summary['seconds']:.1f} s)")
        print(newick if not args.out else f"tree written to {args.out}")
    return 0


def _status(message: str) -> None:
    print(message, file=sys.stderr)


def _search_with_progress(env, policy, steps, rng, run_search):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    columns = [TextColumn("[bold]search"), BarColumn(), MofNCompleteColumn() if steps else TextColumn("{task.completed} moves"),
               TextColumn("logL {task.fields[loglik]:.3f}"), TimeElapsedColumn()]
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("search", total=steps, loglik=env.loglik)
        return run_search(env, policy, steps=steps, rng=rng,
                          on_step=lambda i, ll: progress.update(task, completed=i, loglik=ll))
