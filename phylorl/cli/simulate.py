"""Simulate a corpus of alignments under GTR+G(+I) on random trees with realistic branch lengths.

For each data set i this writes ``sim_{i:04d}.fasta`` (taxa t1..tN), ``sim_{i:04d}.true.nwk`` (the true tree
with its branch lengths) and ``sim_{i:04d}.model.txt`` (the fully specified IQ-TREE model string), then
``manifest.json`` (seed, arguments, and per data set: taxa, sites, model). The same arguments and seed give
byte-identical files; data set i does not depend on --count. Model and branch-length distributions: see
phylorl.phylo.simulate.
"""

from __future__ import annotations

import json
from pathlib import Path

from phylorl.cli import CliError
from phylorl.cli.common import check

HELP = "simulate alignments with their true trees and models (training corpora)"

MIN_TAXA = 4  # the smallest tree with an SPR move (and the corpus loader's default)
MANIFEST = "manifest.json"


def add_arguments(p) -> None:
    p.add_argument(
        "--out-dir",
        "--out",
        dest="out",
        required=True,
        metavar="DIR",
        help="output directory (created if missing)",
    )
    p.add_argument("--count", type=int, required=True, help="number of data sets")
    p.add_argument(
        "--taxa", default="8:20", help="taxa per data set: N or A:B, uniform in A..B (default 8:20)"
    )
    p.add_argument(
        "--sites", default="300:2000", help="sites per data set: N or A:B, uniform in A..B (default 300:2000)"
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument(
        "--model",
        help="fixed, fully specified model string, e.g. 'GTR{1,3,0.8,0.8,3}+F{0.3,0.2,0.2,0.3}+G4{0.5}' "
        "(default: a random GTR+G4(+I) model per data set)",
    )
    p.add_argument(
        "--gaps",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="replace this fraction of characters by gaps, independently (default 0)",
    )
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    p.add_argument(
        "--json", action="store_true", help="print the manifest (one JSON object) instead of a line"
    )


def parse_range(text: str, option: str, minimum: int) -> tuple[int, int]:
    """``"A:B"`` -> ``(A, B)``, ``"N"`` -> ``(N, N)``; both ends integers, ``minimum <= A <= B``."""
    low, colon, high = text.partition(":")
    try:
        low, high = int(low), int(high if colon else low)
    except ValueError:
        raise CliError(f"{option} must be an integer N or a range A:B, got {text!r}") from None
    check(
        (low > high, f"{option} range {text!r} is empty: A must be <= B in A:B"),
        (low < minimum, f"{option} must be at least {minimum}, got {text!r}"),
    )
    return low, high


def run(args) -> int:
    import numpy as np
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from phylorl.phylo import format_fasta, parse_model, write_newick
    from phylorl.phylo.simulate import check_simulation_model, dataset_rng, simulate_dataset

    check(
        (args.count < 1, f"--count must be at least 1, got {args.count}"),
        (args.seed < 0, f"--seed must be >= 0, got {args.seed}"),
        (not 0.0 <= args.gaps < 1.0, f"--gaps must be a fraction in [0, 1), got {args.gaps}"),
    )
    taxa = parse_range(args.taxa, "--taxa", MIN_TAXA)
    sites = parse_range(args.sites, "--sites", 1)
    spec = None if args.model is None else parse_model(args.model)
    if spec is not None:
        check_simulation_model(spec)
    out = Path(args.out)
    check((out.exists() and not out.is_dir(), f"--out-dir {str(out)!r} exists and is not a directory"))
    names = [f"sim_{i:04d}" for i in range(args.count)]
    suffixes = (".fasta", ".true.nwk", ".model.txt")
    targets = [out / MANIFEST] + [out / f"{name}{suffix}" for name in names for suffix in suffixes]
    existing = [path.name for path in targets if path.exists()]
    if existing and not args.force:
        shown = ", ".join(existing[:3]) + (f" and {len(existing) - 3} more" if len(existing) > 3 else "")
        raise CliError(f"{str(out)!r} already holds {shown}; pass --force to overwrite")
    out.mkdir(parents=True, exist_ok=True)

    datasets = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True)) as progress:
        task = progress.add_task("simulating", total=args.count)
        for i, name in enumerate(names):
            rng = dataset_rng(args.seed, i)
            n_taxa = int(rng.integers(taxa[0], taxa[1] + 1))
            n_sites = int(rng.integers(sites[0], sites[1] + 1))
            data = simulate_dataset(n_taxa, n_sites, rng, model=spec, gap_fraction=args.gaps)
            files = {"fasta": f"{name}.fasta", "tree": f"{name}.true.nwk", "model_file": f"{name}.model.txt"}
            (out / files["fasta"]).write_text(format_fasta(data.alignment, width=80))
            (out / files["tree"]).write_text(write_newick(data.tree) + "\n")
            (out / files["model_file"]).write_text(data.model + "\n")
            datasets.append(
                {
                    "name": name,
                    **files,
                    "n_taxa": n_taxa,
                    "n_sites": n_sites,
                    "model": data.model,
                    "tree_length": round(float(np.sum(data.tree.lengths)), 10),
                }
            )
            progress.advance(task)
    manifest = {
        "format": "phylorl.simulate.v1",
        "seed": args.seed,
        "args": dict(count=args.count, taxa=list(taxa), sites=list(sites), model=args.model, gaps=args.gaps),
        "datasets": datasets,
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    if args.json:
        print(json.dumps({"out": str(out), "manifest": str(out / MANIFEST), **manifest}))
    else:
        print(f"wrote {args.count} data set(s) to {out} (see {out / MANIFEST})")
    return 0
