"""``phylorl search --policy ml``: the maximum-likelihood search (:func:`phylorl.search.search`) as a command.

Progress goes to stderr: a line per step of the preparation (the NJ tree, each round of the model fit, the
first start tree's branch lengths), then one line per round (round, phase, radius window, the current and best
log-likelihood over the distinct sequences searched, moves, elapsed). The checkpoint file
(``--checkpoint-file``, by default ``OUT.ckpt.json`` beside ``--out``) is rewritten atomically after every
round; ``--resume`` reads it and goes on to the same answer an uninterrupted search gives. The answer is the
best tree over every taxon, its branches optimised on the whole alignment.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from phylorl.cli.common import single_alignment
from phylorl.cli.search import status

IGNORED = ("checkpoint", "tabu", "rescore", "polish", "steps", "radius", "keep_identical")
"""Flags of the other policies that the ml search does not take."""


def run_ml(args) -> int:
    from phylorl.cli import CliError
    from phylorl.phylo import load_alignment, parse_model, write_newick
    from phylorl.search import SearchConfig, search

    given = [
        f"--{flag.replace('_', '-')}" for flag in IGNORED if getattr(args, flag, None) not in (None, False)
    ]
    if given or args.restarts:
        raise CliError(
            f"{' '.join(given or ['--restarts'])}: not taken by --policy ml (name another --policy)"
        )
    if args.start == "random":
        raise CliError("--policy ml starts from nj or parsimony, not random")
    if args.starts is not None and args.starts < 1:
        raise CliError(f"--starts must be >= 1, got {args.starts}")
    if args.threads is not None and args.threads < 1:
        raise CliError(f"--threads must be >= 1, got {args.threads}")
    parse_model(args.model)
    if args.out and not Path(args.out).resolve().parent.is_dir():
        raise CliError(f"--out {args.out}: directory {Path(args.out).resolve().parent} does not exist")
    checkpoint = args.checkpoint_file or (f"{args.out}.ckpt.json" if args.out else None)
    if args.resume and checkpoint is None:
        raise CliError("--resume needs the checkpoint file: give --checkpoint-file or --out")
    if args.resume and not Path(checkpoint).is_file():
        raise CliError(f"--resume: no checkpoint file at {checkpoint}")
    path = single_alignment(args.alignments)
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
    newick = write_newick(result.tree)
    if args.out:
        Path(args.out).write_text(newick + "\n")
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
        "tree": newick,
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"start log-likelihood: {result.start_loglik:.4f}")
        print(
            f"best log-likelihood:  {result.loglik:.4f} after {result.rounds} rounds, {result.moves} moves "
            f"({summary['seconds']:.1f} s)"
        )
        print(newick if not args.out else f"tree written to {args.out}")
    return 0


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
