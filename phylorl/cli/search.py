"""Search a tree for an alignment: the maximum-likelihood search (``--policy ml``, the default; any size), or
a policy (random, greedy, hill-climbing or a trained agent).

``ml`` runs :func:`phylorl.search.search`: progress on stderr after every round, a checkpoint file written
between rounds (``--checkpoint-file``; beside ``--out`` by default) that ``--resume`` goes on from. For the
other policies the alignment is prepared first (NJ tree, model parameters estimated on it; cached by content
in --cache-dir), then the search starts from a random or NJ tree with optimised branch lengths. The answer is
the best tree seen along the search (a random or agent search may end on a worse one); --polish hill-climbs
from it. The agent policy uses the shipped checkpoint (models/agent.pt) unless --checkpoint names another.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np

from phylorl.cli.common import add_alignments, add_rescore, rescore_value, single_alignment

HELP = "search tree space for an alignment with a policy"
POLICIES = ("ml", "random", "greedy", "hillclimb", "agent")
CLIMBS = ("hillclimb",)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "phylorl" / "prepared"


def add_arguments(p) -> None:
    add_alignments(
        p, "the alignment to search (FASTA, PHYLIP or NEXUS); one file, or a directory holding one"
    )
    p.add_argument(
        "--model", default="GTR+F+G4", help="model string; free parameters are estimated on the NJ tree"
    )
    p.add_argument(
        "--policy",
        default="ml",
        choices=POLICIES,
        help="ml: the maximum-likelihood search for alignments of any size (default); agent: a trained "
        "network; hillclimb: the classical SPR hill-climb; random, greedy: baselines",
    )
    p.add_argument(
        "--checkpoint",
        help="learner checkpoint file or run directory for --policy agent (default: models/agent.pt)",
    )
    p.add_argument(
        "--tabu",
        type=int,
        default=None,
        metavar="K",
        help="--policy agent: pass over at most K of the agent's best moves to avoid a tree already "
        "visited in this search; 0: plain greedy (default: 20)",
    )
    add_rescore(p)
    p.add_argument(
        "--polish",
        action="store_true",
        help="finish from the best tree the policy found: agent-guided perturb-and-climb rounds and a "
        "certified SPR climb (plain hill-climbing with restarts for the other policies)",
    )
    p.add_argument(
        "--start",
        choices=("random", "nj", "parsimony"),
        default="nj",
        help="start tree (default: nj); parsimony (a randomised stepwise-addition parsimony tree improved by "
        "parsimony SPR) with --policy ml, random with the other policies",
    )
    p.add_argument(
        "--starts",
        type=int,
        default=None,
        metavar="K",
        help="--policy ml: start trees climbed (the first as --start says, the others parsimony trees; "
        "default: 8)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="T",
        help="--policy ml: processes: the start trees climbed at once, then batches of T perturb-and-climb "
        "iterations (default: 1; the answer depends on T: the same seed and T give the same tree)",
    )
    p.add_argument(
        "--checkpoint-file",
        default=None,
        metavar="FILE",
        help="--policy ml: checkpoint written after every round (default: OUT.ckpt.json beside --out; none "
        "without --out)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="--policy ml: go on from the checkpoint file of an interrupted search of the same alignment, "
        "model, seed and settings",
    )
    p.add_argument(
        "--steps", type=int, help="most moves (default: 2n for n taxa; the climbs: until a local optimum)"
    )
    p.add_argument("--radius", type=int, help="largest SPR radius (default: all moves)")
    p.add_argument(
        "--restarts",
        type=int,
        default=0,
        help="hillclimb: perturb-and-climb rounds after the first climb (iterated local search)",
    )
    p.add_argument(
        "--keep-identical",
        action="store_true",
        help="the climbs (and --polish without an agent): search every taxon (default: identical sequences "
        "are searched once and put back at the end, each on a cherry with its twin, as IQ-TREE does)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="write the best tree seen (Newick) here")
    p.add_argument(
        "--cache-dir",
        default=None,
        help=f"preparation cache of the policies other than ml (default: {default_cache_dir()})",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object with the results")


def run(args) -> int:
    from phylorl.cli import CliError
    from phylorl.env.config import EnvConfig
    from phylorl.env.prepare import PreparationCache
    from phylorl.env.reduced import distinct_sequences
    from phylorl.env.search import run_search
    from phylorl.env.tree_env import EnvAlignment, TreeEnv
    from phylorl.phylo import load_alignment, parse_model, write_newick

    if args.policy == "ml":
        from phylorl.cli.ml_search import run_ml

        return run_ml(args)
    for flag in ("starts", "threads", "checkpoint_file", "resume"):
        if getattr(args, flag) not in (None, False):
            raise CliError(f"--{flag.replace('_', '-')} applies to --policy ml only")
    if args.start == "parsimony":
        raise CliError("--start parsimony applies to --policy ml only")
    if args.steps is not None and args.steps < 1:
        raise CliError(f"--steps must be >= 1, got {args.steps}")
    if args.restarts and args.policy not in CLIMBS:
        raise CliError("--restarts applies to --policy hillclimb only")
    if args.restarts < 0:
        raise CliError(f"--restarts must be >= 0, got {args.restarts}")
    if args.radius is not None and args.radius < 1:
        raise CliError(f"--radius must be >= 1, got {args.radius}")
    if args.tabu is not None and (args.tabu < 0 or args.policy != "agent"):
        raise CliError(
            f"--tabu must be >= 0, got {args.tabu}"
            if args.tabu < 0
            else "--tabu applies to --policy agent only"
        )
    if args.rescore is not None and args.policy in CLIMBS:
        raise CliError(
            "--rescore applies to --policy random, greedy or agent only (a climb ends on its best tree)"
        )
    rescore = rescore_value(args.rescore)
    parse_model(args.model)  # fail fast on a bad model string
    path = single_alignment(args.alignments)
    started = time.perf_counter()
    checkpoint = _checkpoint(args.checkpoint) if args.policy == "agent" else None
    alignment = load_alignment(path)
    steps = (
        args.steps if args.steps is not None else (None if args.policy in CLIMBS else 2 * alignment.n_taxa)
    )
    cache = PreparationCache(args.cache_dir or default_cache_dir())
    status(f"preparing {path} ({alignment.n_taxa} taxa, {alignment.n_sites} sites) under {args.model}")
    if checkpoint is not None and not cache.has(alignment, args.model):
        # a new alignment is prepared in a process of its own while this one loads torch and the agent
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
            preparing = pool.submit(cache.get, alignment, args.model)
            policy = _agent(checkpoint, args.tabu)
            prepared = preparing.result()
    else:
        policy = args.policy if checkpoint is None else _agent(checkpoint, args.tabu)
        prepared = cache.get(alignment, args.model)
    entry = EnvAlignment.build(alignment, prepared, path.name)
    config = EnvConfig(start=args.start, horizon=10**9, radius=args.radius)
    env = TreeEnv([entry], config, seed=args.seed)
    env.reset()
    # a polish without agent climbs
    climbs = args.policy in CLIMBS or (args.polish and args.policy != "agent")
    distinct = None if args.keep_identical or not climbs else distinct_sequences(entry)
    duplicates = distinct[0] if distinct is not None else None
    if duplicates is not None:
        status(
            f"note: {duplicates.dropped} identical sequence(s) searched once and put back at the end "
            "(--keep-identical: search them all); the progress shows the reduced alignment's log-likelihood"
        )
    status(f"searching with {args.policy} from the {args.start} tree (log-likelihood {env.loglik:.3f})")
    search = partial(
        run_search,
        restarts=args.restarts,
        finish=args.policy not in CLIMBS,
        rescore=rescore,
        distinct=not args.keep_identical,
    )
    result = _search_with_progress(env, policy, steps, np.random.default_rng(args.seed), search)
    best, best_tree, polish = result.best_loglik, result.best_tree, None
    if args.polish:
        env.reset(0, tree=result.best_tree)
        from phylorl.agent.policy import polish as polish_search

        status("polishing: agent-guided perturb-and-climb rounds, then a certified climb")
        polish = polish_search(
            env,
            policy if args.policy == "agent" else None,
            rng=np.random.default_rng(args.seed),
            distinct=not args.keep_identical,
        )
        if polish.best_loglik >= best:
            best, best_tree = polish.best_loglik, polish.best_tree
    newick = write_newick(best_tree)
    if args.out:
        Path(args.out).write_text(newick + "\n")
    summary = {
        "alignment": str(path),
        "policy": args.policy,
        "model": prepared.model,
        "start": args.start,
        "start_loglik": result.start_loglik,
        "final_loglik": result.final_loglik,
        "best_loglik": best,
        "search_best_loglik": result.best_loglik,
        "tabu": policy.tabu if args.policy == "agent" else None,
        "rescore": None if args.policy in CLIMBS else rescore,
        "identical_dropped": duplicates.dropped if duplicates is not None else 0,
        "polish": args.polish,
        "polish_loglik": polish.best_loglik if polish else None,
        "steps": result.steps + (polish.steps if polish else 0),
        "evaluations": result.evaluations + (polish.evaluations if polish else 0),
        "branch_optimisations": result.branch_optimisations + (polish.branch_optimisations if polish else 0),
        "seconds": time.perf_counter() - started,
        "search_seconds": result.seconds + (polish.seconds if polish else 0.0),
        "tree": newick,
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"start log-likelihood: {result.start_loglik:.4f}")
        print(f"final log-likelihood: {result.final_loglik:.4f} after {result.steps} moves")
        if polish:
            print(f"polished:             {polish.best_loglik:.4f} after {polish.steps} more moves")
        print(
            f"best log-likelihood:  {best:.4f} "
            f"({summary['evaluations']} evaluations, {summary['seconds']:.1f} s)"
        )
        print(newick if not args.out else f"tree written to {args.out}")
    return 0


def _checkpoint(checkpoint: str | None) -> str:
    """``checkpoint``, or the shipped agent's when none is given (its absence is a one-line error)."""
    from phylorl.agent.checkpoints import DEFAULT_CHECKPOINT
    from phylorl.cli import CliError

    if checkpoint is None:
        if not Path(DEFAULT_CHECKPOINT).exists():
            raise CliError(
                f"no agent checkpoint at {DEFAULT_CHECKPOINT} (the default): pass --checkpoint PATH"
            )
        checkpoint = DEFAULT_CHECKPOINT
    elif not Path(checkpoint).exists():
        raise CliError(f"checkpoint '{checkpoint}' does not exist")
    return checkpoint


def _agent(checkpoint: str, tabu: int | None = None):
    """The agent policy of ``checkpoint``."""
    from phylorl.agent.policy import DEFAULT_TABU, AgentPolicy

    return AgentPolicy.from_checkpoint(checkpoint, tabu=DEFAULT_TABU if tabu is None else tabu)


def status(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _search_with_progress(env, policy, steps, rng, run_search, label: str = "search"):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    columns = [
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn() if steps else TextColumn("{task.completed} moves"),
        TextColumn("logL {task.fields[loglik]:.3f}"),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(label, total=steps, loglik=env.loglik)
        return run_search(
            env,
            policy,
            steps=steps,
            rng=rng,
            on_step=lambda i, ll: progress.update(task, completed=i, loglik=ll),
        )
