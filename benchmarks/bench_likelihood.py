"""Likelihood engine speed on DS1 (27 taxa, 934 patterns), one core; prints one JSON line.

Figures (medians of repeated runs):
- full log-likelihood evaluations per second (every partial recomputed) under JC and GTR+F+G4;
- SPR moves evaluated per second: apply a random SPR move to a copy of the tree, then optimise the three
  branches at the regraft point (2 Newton passes, relative tolerance 1e-4) and return the log-likelihood, the
  way the environment and the greedy policy evaluate a move;
- full branch-length optimisation of IQ-TREE's ML tree from flat 0.05 lengths (to convergence).

With ``--versus-iqtree FASTA ...``: the engine against IQ-TREE 2's on the same work, per alignment: every
branch of a fixed tree (our NJ tree, all lengths 0.05) optimised under a fixed model string (our preparation's
GTR+F+G4), one thread. IQ-TREE (``-te``) is timed as a whole process and by its own "Parameters optimization
took" line (the optimisation alone, without reading the alignment); ours in-process: building the engine (site
patterns, buffers) and Newton passes over every branch until a pass gains less than 0.01 (IQ-TREE's default
epsilon). Both final trees are scored by our engine (IQ-TREE's lengths as it wrote them). Medians of
``--repeats`` runs, IQ-TREE and ours alternating.

Usage: python benchmarks/bench_likelihood.py  (needs ../shared/data/ds)
       python benchmarks/bench_likelihood.py --versus-iqtree ../shared/data/large/valid/TreeBASE_16298_0.fasta
       ...
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from common import DS_DIR, emit, machine, median_seconds  # noqa: E402

from phylorl.phylo import (  # noqa: E402
    LikelihoodEngine,
    apply_spr,
    edges_near,
    enumerate_moves,
    load_alignment,
    nj_tree,
    parse_model,
    read_newick,
    write_newick,
)


def main() -> None:
    aln = load_alignment(DS_DIR / "DS1.fasta")
    result = {"bench": "likelihood", "dataset": "DS1", "n_patterns": aln.patterns().n_patterns}
    result["machine"] = machine()
    for tag, name in (("JC", "jc"), ("GTR_G4", "gtr_f_g4")):
        ref = json.loads((DS_DIR / "reference" / f"DS1.{tag}.json").read_text())
        tree = read_newick(DS_DIR / "reference" / f"DS1.{tag}.treefile", aln)
        engine = LikelihoodEngine(aln, parse_model(ref["model"]))
        engine.loglik(tree)

        def full():
            engine._b.valid[:] = False  # forget every cached partial
            engine._loglik_at(tree, 0)

        t_full = median_seconds(full, repeats=31, calls=20)
        result[f"{name}_full_loglik_ms"] = round(t_full * 1e3, 4)
        result[f"{name}_full_logliks_per_s"] = round(1.0 / t_full, 1)

        rng = np.random.default_rng(0)
        moves = enumerate_moves(tree)
        picks = moves[rng.integers(len(moves), size=64)]
        cycled = itertools.cycle(picks)

        def spr_move():
            move = next(cycled)
            candidate = tree.copy()
            apply_spr(candidate, move)
            local = edges_near(candidate, [int(move[0])], 1)
            engine.optimize_branch_lengths(candidate, local, rounds=2, tol=1e-3, newton_tol=1e-4)

        t_move = median_seconds(spr_move, repeats=21, calls=64)
        result[f"{name}_spr_move_local_opt_ms"] = round(t_move * 1e3, 4)
        result[f"{name}_spr_moves_per_s"] = round(1.0 / t_move, 1)

        def full_opt():
            flat = tree.copy()
            flat.lengths[:] = 0.05
            engine.optimize_branch_lengths(flat, rounds=100, tol=1e-6)

        result[f"{name}_full_branch_opt_s"] = round(median_seconds(full_opt, repeats=7), 4)
    emit(result)


def iqtree_optimise(fasta, model: str, start: str) -> dict:
    """IQ-TREE 2 optimising every branch of the Newick ``start`` under ``model``: wall seconds, its own
    optimisation seconds and the tree it wrote."""
    with tempfile.TemporaryDirectory(prefix="iqtree-te-") as work:
        tree_file, prefix = Path(work) / "start.nwk", Path(work) / "te"
        tree_file.write_text(start + "\n")
        command = ["iqtree2", "-s", str(fasta), "-m", model, "-te", str(tree_file), "-nt", "1", "-redo"]
        command += ["-quiet", "-pre", str(prefix)]
        started = time.perf_counter()
        proc = subprocess.run(command, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        log = Path(f"{prefix}.log").read_text() if Path(f"{prefix}.log").exists() else ""
        took = re.search(r"Parameters optimization took (\d+) rounds \(([\d.]+) sec\)", log)
        if proc.returncode != 0 or took is None:
            raise RuntimeError(f"iqtree2 -te failed on {fasta}: {proc.stderr[-500:]}{log[-500:]}")
        return {
            "seconds": seconds,
            "optimisation_seconds": float(took.group(2)),
            "rounds": int(took.group(1)),
            "newick": Path(f"{prefix}.treefile").read_text().strip(),
        }


def versus_iqtree(paths: list[str], repeats: int) -> list[dict]:
    from phylorl.search.prepare import fit_model_string

    rows = []
    for path in paths:
        alignment = load_alignment(path)
        model = fit_model_string(alignment)
        start = nj_tree(alignment)
        start.lengths[:] = 0.05
        start_newick = write_newick(start)
        iq_runs, ours = [], []
        for _ in range(repeats):
            iq_runs.append(iqtree_optimise(path, model, start_newick))
            began = time.perf_counter()
            engine = LikelihoodEngine(alignment, model)
            tree = start.copy()
            our_ll = engine.optimize_branch_lengths(tree, rounds=100, tol=0.01)
            ours.append((time.perf_counter() - began, engine.n_branch_optimisations))
        iq_ll = LikelihoodEngine(alignment, model).loglik(read_newick(iq_runs[0]["newick"], alignment))
        our_seconds = statistics.median(t for t, _ in ours)
        iq_opt = statistics.median(r["optimisation_seconds"] for r in iq_runs)
        row = {
            "file": Path(path).name,
            "taxa": alignment.n_taxa,
            "sites": alignment.n_sites,
            "patterns": int(alignment.patterns().n_patterns),
            "model": model,
            "iqtree_seconds": round(statistics.median(r["seconds"] for r in iq_runs), 3),
            "iqtree_optimisation_seconds": round(iq_opt, 3),
            "iqtree_rounds": iq_runs[0]["rounds"],
            "iqtree_loglik": round(iq_ll, 4),
            "ours_seconds": round(our_seconds, 3),
            "ours_branch_updates": ours[0][1],
            "ours_loglik": round(float(our_ll), 4),
            "ours_vs_iqtree_optimisation": round(our_seconds / iq_opt, 3),
        }
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--versus-iqtree",
        nargs="+",
        metavar="FASTA",
        help="instead of the DS1 figures: the engine against IQ-TREE's on these alignments",
    )
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.versus_iqtree:
        info = {"bench": "likelihood_vs_iqtree", "machine": machine()}  # (the load before the runs)
        emit({**info, "rows": versus_iqtree(args.versus_iqtree, args.repeats)})
    else:
        main()
