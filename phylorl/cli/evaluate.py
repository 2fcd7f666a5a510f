"""Evaluate the agent and classical searches against IQ-TREE (``phylorl eval``; ``evaluate`` is an alias).

Every alignment is prepared as ``phylorl search`` does (NJ tree, model parameters estimated on it, cached in
--cache-dir). From K seeded random start trees, or the NJ tree (``--start nj``), the same for every method,
each method searches, and its answer is the best tree it saw: ``agent`` (the network, greedy, S moves; default
S = 2n for n taxa), ``agent+polish`` (hill-climbing from the agent's tree), ``random`` (S random moves),
``greedy`` (the best move while one improves, at most S), ``hillclimb`` (to a local optimum), ``ml`` (the
maximum-likelihood search of ``phylorl search``, the start tree as its first start) and ``iqtree`` (IQ-TREE's
ML search under the same fixed model, once per alignment, re-scored by our engine: the reference).

improvement = (final − start) / (IQ-TREE − start); when IQ-TREE gains less than 1 from a start, it is 1
if the method ends within 0.1 of IQ-TREE and 0 otherwise. Without IQ-TREE (--no-iqtree) improvement is
undefined and the table shows final − start instead.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from phylorl.cli import CliError, common
from phylorl.cli.common import add_alignments
from phylorl.env.config import DRAWN_STARTS

HELP = "evaluate the agent and classical searches against IQ-TREE"


def add_arguments(p) -> None:
    from phylorl.evaluation.metrics import METHODS  # light: no engine, no torch

    add_alignments(p, "alignment files and/or directories of alignments (FASTA, PHYLIP, NEXUS); repeatable")
    common.add_agent(p)
    p.add_argument(
        "--starts", type=int, default=4, metavar="K", help="start trees per alignment (default: 4)"
    )
    p.add_argument(
        "--start",
        choices=DRAWN_STARTS,
        default="random",
        help="the start trees: seeded random trees, the NJ tree (the same for every k), or seeded parsimony "
        "trees (randomised stepwise addition improved by parsimony SPR; default: random)",
    )
    p.add_argument(
        "--steps",
        type=int,
        metavar="S",
        help="moves of the agent, random and greedy methods (default: 2n for n taxa)",
    )
    p.add_argument(
        "--methods",
        metavar="LIST",
        help=f"comma-separated methods, of {','.join(METHODS)} (default: {','.join(METHODS)})",
    )
    common.add_model(p)
    p.add_argument(
        "--seed", type=int, default=0, help="start tree k uses seed + k; IQ-TREE uses seed (default: 0)"
    )
    p.add_argument(
        "--no-iqtree", action="store_true", help="run without IQ-TREE (no reference: no improvement)"
    )
    p.add_argument(
        "--json",
        metavar="OUT",
        nargs="?",
        const="-",
        help="every result as one JSON object: into the file OUT, or on stdout without OUT (the tables "
        "then go to stderr)",
    )
    p.add_argument("--plots", metavar="DIR", help="write PNG plots into this directory")
    p.add_argument("--cache-dir", help="preparation cache (default: as phylorl search)")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        metavar="T",
        help="alignments evaluated at once, each in its own single-threaded process (default 1); "
        "every method's time and IQ-TREE's are then measured side by side under the same load",
    )


def run(args) -> int:
    from phylorl.cli.eval_report import print_tables, progress
    from phylorl.env.config import EnvConfig
    from phylorl.env.corpus import load_corpus
    from phylorl.env.prepare import PreparationCache
    from phylorl.env.search import RESCORE
    from phylorl.env.tree_env import EnvAlignment
    from phylorl.evaluation.iqtree import IqtreeRunner, find_iqtree
    from phylorl.evaluation.methods import check_methods, evaluate_methods
    from phylorl.evaluation.metrics import AGENT_METHODS, METHODS
    from phylorl.phylo import parse_model

    # every cheap check before the first expensive step (preparing alignments, IQ-TREE, searches)
    common.check(*common.at_least(args, starts=1, threads=1, steps=1, tabu=0))
    if args.threads > 1:
        import torch

        torch.set_num_threads(1)  # before any torch work: the worker processes are forked from this one
    if args.methods is None:
        methods = [m for m in METHODS if not (args.no_iqtree and m == "iqtree")]
    else:
        names = [m.strip() for m in args.methods.split(",") if m.strip()]
        methods = check_methods(names, has_policy=True, has_iqtree=True)
        if args.no_iqtree and "iqtree" in methods:
            raise CliError("--methods names iqtree but --no-iqtree is given")
    common.check(*common.at_least(args, rescore=0))
    parse_model(args.model)
    to_stdout = args.json == "-"
    if args.json and not to_stdout and not Path(args.json).resolve().parent.is_dir():
        raise CliError(f"--json {args.json}: directory {Path(args.json).resolve().parent} does not exist")
    if args.plots and Path(args.plots).exists() and not Path(args.plots).is_dir():
        raise CliError(f"--plots {args.plots} is a file, not a directory")
    runner = None if args.no_iqtree else IqtreeRunner(find_iqtree(), args.seed)
    policy, checkpoint = None, None
    if any(m in AGENT_METHODS for m in methods):
        from phylorl.agent.policy import resolve_checkpoint

        path = common.agent_checkpoint(args.checkpoint, ", or leave the agent methods out with --methods")
        policy, checkpoint = common.load_agent(path, args.tabu), str(resolve_checkpoint(path).resolve())
    corpus = load_corpus(args.alignments)

    cache = PreparationCache(args.cache_dir or common.default_cache_dir())
    started = time.perf_counter()
    per_alignment = (1 if runner else 0) + args.starts * len([m for m in methods if m != "iqtree"])
    entries = []
    with progress(len(corpus) * (1 + per_alignment)) as advance:
        for item in corpus:
            advance(f"{item.path.name}: preparing")
            prepared = cache.get(item.alignment, args.model)
            entries.append(EnvAlignment.build(item.alignment, prepared, str(item.path)))
        results = evaluate_methods(
            entries,
            policy,
            starts=args.starts,
            steps=args.steps,
            seed=args.seed,
            methods=methods,
            iqtree=runner,
            on_progress=lambda label: advance(_short(label)),
            workers=args.threads,
            rescore=RESCORE if args.rescore is None else args.rescore,
            env_config=EnvConfig(start=args.start),
        )
    results.settings.update(
        alignments=[str(p) for p in args.alignments],
        start=args.start,
        model=args.model,
        checkpoint=checkpoint,
        tabu=None if policy is None else policy.tabu,
        cache_dir=str(cache.directory),
        seconds=time.perf_counter() - started,
    )
    if to_stdout:
        from rich.console import Console

        print_tables(results, Console(stderr=True, width=130))
        print(json.dumps(results.to_dict()))
    else:
        print_tables(results)
    if args.json and not to_stdout:
        Path(args.json).write_text(json.dumps(results.to_dict(), indent=1) + "\n")
    if args.plots:
        from phylorl.evaluation.plots import write_plots

        write_plots(results, args.plots)
    return 0


def _short(label: str) -> str:
    """A progress label with the alignment's file name instead of its path."""
    path, _, rest = label.rpartition(": ")
    return f"{Path(path).name}: {rest}" if path else label
