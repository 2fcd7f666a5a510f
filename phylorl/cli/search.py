"""Search a tree for an alignment: the maximum-likelihood search (``--policy ml``, the default; any size), or
a policy (random, greedy, hill-climbing or a trained agent).

``ml`` runs :func:`phylorl.search.search`: progress on stderr after every round, a checkpoint file written
between rounds (``--checkpoint-file``; beside ``--out`` by default) that ``--resume`` goes on from. For the
other policies the alignment is prepared first (NJ tree, model parameters estimated on it; cached by content
in --cache-dir), then the search starts from a random, NJ or parsimony tree with optimised branch lengths. The
answer is the best tree seen along the search (a random or agent search may end on a worse one); --polish
hill-climbs from it. The agent policy uses the shipped checkpoint (models/agent.pt) unless --checkpoint names
another.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np

from phylorl.cli import CliError, common
from phylorl.cli.common import status
from phylorl.env.config import DRAWN_STARTS

HELP = "search tree space for an alignment with a policy"
POLICIES = ("ml", "random", "greedy", "hillclimb", "agent")
CLIMBS = ("hillclimb",)


def add_arguments(p) -> None:
    common.add_alignments(
        p, "the alignment to search (FASTA, PHYLIP or NEXUS); one file, or a directory holding one"
    )
    common.add_model(p)
    p.add_argument(
        "--policy",
        default="ml",
        choices=POLICIES,
        help="ml: the maximum-likelihood search for alignments of any size (default); agent: a trained "
        "network; hillclimb: the classical SPR hill-climb; random, greedy: baselines",
    )
    common.add_agent(p, "--policy agent: ")
    p.add_argument(
        "--polish",
        action="store_true",
        help="finish from the best tree the policy found: agent-guided perturb-and-climb rounds and a "
        "certified SPR climb (plain hill-climbing with restarts for the other policies)",
    )
    p.add_argument(
        "--start",
        choices=DRAWN_STARTS,
        default="nj",
        help="start tree (default: nj); parsimony: a randomised stepwise-addition parsimony tree improved by "
        "parsimony SPR; random: a uniform random tree (not with --policy ml)",
    )
    p.add_argument(
        "--starts",
        type=int,
        metavar="K",
        help="--policy ml: start trees climbed (the first as --start says, the others parsimony trees; "
        "default: 8)",
    )
    p.add_argument(
        "--threads",
        type=int,
        metavar="T",
        help="--policy ml: processes: the start trees climbed at once, then batches of T perturb-and-climb "
        "iterations (default: 1; the answer depends on T: the same seed and T give the same tree)",
    )
    p.add_argument(
        "--checkpoint-file",
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
        help=f"preparation cache of the policies other than ml (default: {common.default_cache_dir()})",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object with the results")


def run(args) -> int:
    from phylorl.env.config import EnvConfig
    from phylorl.env.prepare import PreparationCache
    from phylorl.env.reduced import distinct_sequences
    from phylorl.env.search import RESCORE, run_search
    from phylorl.env.tree_env import EnvAlignment, TreeEnv
    from phylorl.phylo import load_alignment, parse_model, write_newick

    if args.policy == "ml":
        return run_ml(args)
    if given := _given(args, ML_ONLY):
        raise CliError(f"{given[0]} applies to --policy ml only")
    common.check(
        *common.at_least(args, steps=1),
        (args.restarts and args.policy not in CLIMBS, "--restarts applies to --policy hillclimb only"),
        *common.at_least(args, restarts=0, radius=1, tabu=0),
        (args.tabu is not None and args.policy != "agent", "--tabu applies to --policy agent only"),
        (
            args.rescore is not None and args.policy in CLIMBS,
            "--rescore applies to --policy random, greedy or agent only (a climb ends on its best tree)",
        ),
        *common.at_least(args, rescore=0),
    )
    rescore = RESCORE if args.rescore is None else args.rescore
    parse_model(args.model)  # fail fast on a bad model string
    path = common.single_alignment(args.alignments)
    started = time.perf_counter()
    checkpoint = common.agent_checkpoint(args.checkpoint) if args.policy == "agent" else None
    alignment = load_alignment(path)
    steps = args.steps or (None if args.policy in CLIMBS else 2 * alignment.n_taxa)
    cache = PreparationCache(args.cache_dir or common.default_cache_dir())
    status(f"preparing {path} ({alignment.n_taxa} taxa, {alignment.n_sites} sites) under {args.model}")
    if checkpoint is not None and not cache.has(alignment, args.model):
        # a new alignment is prepared in a process of its own while this one loads torch and the agent
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
            preparing = pool.submit(cache.get, alignment, args.model)
            policy = common.load_agent(checkpoint, args.tabu)
            prepared = preparing.result()
    else:
        policy = args.policy if checkpoint is None else common.load_agent(checkpoint, args.tabu)
        prepared = cache.get(alignment, args.model)
    entry = EnvAlignment.build(alignment, prepared, path.name)
    env = TreeEnv([entry], EnvConfig(start=args.start, horizon=10**9, radius=args.radius), seed=args.seed)
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
        agent = policy if args.policy == "agent" else None
        polish = polish_search(
            env, agent, rng=np.random.default_rng(args.seed), distinct=not args.keep_identical
        )
        if polish.best_loglik >= best:
            best, best_tree = polish.best_loglik, polish.best_tree
    parts = [result] + ([polish] if polish else [])  # totals over the search and the polish
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
        "steps": sum(part.steps for part in parts),
        "evaluations": sum(part.evaluations for part in parts),
        "branch_optimisations": sum(part.branch_optimisations for part in parts),
        "seconds": time.perf_counter() - started,
        "search_seconds": sum(part.seconds for part in parts),
        "tree": write_newick(best_tree),
    }
    lines = [f"start log-likelihood: {result.start_loglik:.4f}"]
    lines.append(f"final log-likelihood: {result.final_loglik:.4f} after {result.steps} moves")
    if polish:
        lines.append(f"polished:             {polish.best_loglik:.4f} after {polish.steps} more moves")
    evaluations, seconds = summary["evaluations"], summary["seconds"]
    lines.append(f"best log-likelihood:  {best:.4f} ({evaluations} evaluations, {seconds:.1f} s)")
    return _answer(args, summary, lines)


def _answer(args, summary: dict, lines: list[str]) -> int:
    """The tree written to ``--out``; ``summary`` printed as JSON (``--json``), or ``lines`` then the tree
    (or where it went)."""
    if args.out:
        Path(args.out).write_text(summary["tree"] + "\n")
    if args.json:
        print(json.dumps(summary))
    else:
        print("\n".join([*lines, f"tree written to {args.out}" if args.out else summary["tree"]]))
    return 0


def _search_with_progress(env, policy, steps, rng, run_search):
    """``run_search`` with a rich progress bar on stderr (moves, out of ``steps`` when there is a limit)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    moves = MofNCompleteColumn() if steps else TextColumn("{task.completed} moves")
    columns = [TextColumn("[bold]search"), BarColumn(), moves, TextColumn("logL {task.fields[loglik]:.3f}")]
    with Progress(*columns, TimeElapsedColumn(), console=Console(stderr=True)) as progress:
        task = progress.add_task("search", total=steps, loglik=env.loglik)

        def update(i: int, loglik: float) -> None:
            progress.update(task, completed=i, loglik=loglik)

        return run_search(env, policy, steps=steps, rng=rng, on_step=update)


ML_ONLY = ("starts", "threads", "checkpoint_file", "resume")
IGNORED = ("checkpoint", "tabu", "rescore", "polish", "steps", "radius", "keep_identical")
"""Flags of the other policies that the ml search does not take."""


def _given(args, flags: tuple[str, ...]) -> list[str]:
    """The ``--flag`` of each of ``flags`` (attribute names) given on the command line."""
    return [f"--{flag.replace('_', '-')}" for flag in flags if getattr(args, flag) not in (None, False)]


def run_ml(args) -> int:
    """The ``ml`` policy, :func:`phylorl.search.search`. Progress goes to stderr: a line per step of the
    preparation (the NJ tree, each round of the model fit, the first start tree's branch lengths), then
    one line per round (round, phase, radius window, the current and best log-likelihood over the distinct
    sequences searched, moves, elapsed). The checkpoint file is rewritten atomically after every round;
    ``--resume`` reads it and goes on to the same answer an uninterrupted search gives. The answer is the
    best tree over every taxon, its branches optimised on the whole alignment."""
    from phylorl.phylo import load_alignment, parse_model, write_newick
    from phylorl.search import SearchConfig, search

    if given := _given(args, IGNORED) or (["--restarts"] if args.restarts else []):
        raise CliError(f"{' '.join(given)}: not taken by --policy ml (name another --policy)")
    common.check(
        (args.start == "random", "--policy ml starts from nj or parsimony, not random"),
        *common.at_least(args, starts=1, threads=1),
    )
    parse_model(args.model)
    if args.out and not Path(args.out).resolve().parent.is_dir():
        raise CliError(f"--out {args.out}: directory {Path(args.out).resolve().parent} does not exist")
    checkpoint = args.checkpoint_file or (f"{args.out}.ckpt.json" if args.out else None)
    if args.resume and checkpoint is None:
        raise CliError("--resume needs the checkpoint file: give --checkpoint-file or --out")
    if args.resume and not Path(checkpoint).is_file():
        raise CliError(f"--resume: no checkpoint file at {checkpoint}")
    path = common.single_alignment(args.alignments)
    alignment = load_alignment(path)
    if alignment.n_taxa < 4:
        raise CliError(f"{path}: {alignment.n_taxa} taxa; a tree search needs at least 4")
    given = {"starts": args.starts, "threads": args.threads}
    config = SearchConfig(start=args.start, **{k: v for k, v in given.items() if v is not None})
    started = time.perf_counter()
    status(
        f"{path}: {alignment.n_taxa} taxa, {alignment.n_sites} sites; fitting {args.model} on the NJ tree, "
        f"then {config.starts} start tree(s) ({args.start} first)"
        + (f"; {config.threads} processes" if config.threads > 1 else "")
        + (f"; resuming from {checkpoint}" if args.resume else "")
    )
    try:
        result = search(
            alignment,
            args.model,
            config=config,
            seed=args.seed,
            on_progress=_progress,
            on_prepare=lambda step: _prepared(step, args.start),
            checkpoint=checkpoint,
            resume=checkpoint if args.resume else None,
        )
    except KeyboardInterrupt:
        if checkpoint is not None and Path(checkpoint).is_file():
            status(f"interrupted; go on with the same command and --resume (checkpoint: {checkpoint})")
        raise
    summary = {
        "alignment": str(path),
        "policy": "ml",
        "model": result.model,
        "start": args.start,
        "starts": config.starts,
        "threads": config.threads,
        "seed": args.seed,
        "start_loglik": result.start_loglik,
        "best_loglik": result.loglik,
        "rounds": result.rounds,
        "moves": result.moves,
        "scored": result.scored,
        "identical_dropped": result.dropped,
        "prepare_seconds": result.prepare_seconds,
        "search_seconds": result.seconds,
        "seconds": time.perf_counter() - started,
        "checkpoint_file": checkpoint,
        "tree": write_newick(result.tree),
    }
    best = (
        f"{result.loglik:.4f} after {result.rounds} rounds, {result.moves} moves ({summary['seconds']:.1f} s)"
    )
    return _answer(
        args, summary, [f"start log-likelihood: {result.start_loglik:.4f}", f"best log-likelihood:  {best}"]
    )


def _prepared(step: dict, start: str) -> None:
    if step["step"] == "nj":
        what = "NJ tree built"
    elif step["step"] == "model":
        what = f"model fit round {step['round']}  logL {step['loglik']:.3f}"
    else:
        what = f"start tree 1 ({start}) branches optimised  logL {step['loglik']:.3f}"
    status(f"preparing ({step['elapsed']:.1f} s): {what}")


def _progress(p: dict) -> None:
    status(
        f"round {p['round']:4d}  {p['phase']:<8} r<={p['radius']:<3d} start {p['start'] + 1}  "
        f"logL {p['loglik']:.3f}  best {p['best_loglik']:.3f}  moves {p['moves']}  {p['elapsed']:.1f} s"
    )
