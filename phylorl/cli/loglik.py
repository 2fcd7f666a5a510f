"""Log-likelihood of a fixed tree under a substitution model (optionally optimising branch lengths)."""

from __future__ import annotations

import json
import time

from phylorl.cli import CliError
from phylorl.cli.common import add_alignments, add_model, single_alignment

HELP = "log-likelihood of a tree for an alignment"


def add_arguments(p) -> None:
    add_alignments(p, "the alignment (FASTA, PHYLIP or NEXUS); one file, or a directory holding one")
    p.add_argument("--tree", required=True, help="Newick file (or a Newick string)")
    add_model(p, "IQ-TREE-style model string; parameters without numbers are estimated (default: GTR+F+G4)")
    p.add_argument("--optimize-branches", action="store_true", help="optimise all branch lengths first")
    p.add_argument(
        "--resolve-polytomies",
        action="store_true",
        help="resolve multifurcations with zero-length branches instead of failing",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def run(args) -> int:
    from phylorl.phylo import LikelihoodEngine, load_alignment, parse_model, read_newick, write_newick

    start = time.perf_counter()
    alignment = load_alignment(single_alignment(args.alignments))
    spec = parse_model(args.model)
    try:
        tree = read_newick(args.tree, alignment, resolve_polytomies=args.resolve_polytomies)
    except ValueError as exc:
        raise CliError(f"tree {args.tree}: {exc}") from None
    engine = LikelihoodEngine(alignment, spec)
    loglik = engine.loglik(tree)
    if args.optimize_branches:
        loglik = engine.optimize_branch_lengths(tree, rounds=50, tol=1e-5)
    result = {
        "loglik": loglik,
        "model": str(engine.model.spec),
        "n_taxa": alignment.n_taxa,
        "n_sites": alignment.n_sites,
        "n_patterns": engine.n_patterns,
        "seconds": time.perf_counter() - start,
    }
    if args.optimize_branches:
        result["tree"] = write_newick(tree)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"log-likelihood: {loglik:.6f}")
        print(f"model: {result['model']}")
        if args.optimize_branches:
            print(f"tree: {result['tree']}")
    return 0
