"""Likelihood engine speed on DS1 (27 taxa, 934 patterns), one core; prints one JSON line.

Figures (medians of repeated runs):
- full log-likelihood evaluations per second (every partial recomputed) under JC and GTR+F+G4;
- SPR moves evaluated per second: apply a random SPR move to a copy of the tree, then optimise the
  three branches at the regraft point (2 Newton passes, relative tolerance 1e-4) and return the log-likelihood, the way the
  environment and the greedy policy evaluate a move;
- full branch-length optimisation of IQ-TREE's ML tree from flat 0.05 lengths (to convergence).

Usage: python benchmarks/bench_likelihood.py  (needs ../shared/data/ds)
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from common import DS_DIR, emit, machine, median_seconds  # noqa: E402

from phylorl.phylo import (  # noqa: E402
    LikelihoodEngine,
    apply_spr,
    edges_near,
    enumerate_moves,
    load_alignment,
    parse_model,
    read_newick,
)


def main() -> None:
    aln = load_alignment(DS_DIR / "DS1.fasta")
    result = {"bench": "likelihood", "dataset": "DS1", "n_patterns": aln.patterns().n_patterns, "machine": machine()}
    for tag in ("JC", "GTR_G4"):
        ref = json.loads((DS_DIR / "reference" / f"DS1.{tag}.json").read_text())
        tree = read_newick(DS_DIR / "reference" / f"DS1.{tag}.treefile", aln)
        engine = LikelihoodEngine(aln, parse_model(ref["model"]))
        engine.loglik(tree)

        def full():
            engine._b.valid[:] = False  # forget every cached partial
            engine._loglik_at(tree, 0)

        t_full = median_seconds(full, repeats=31, calls=20)
        name = "jc" if tag == "JC" else "gtr_f_g4"
        result[f"{name}_full_loglik_ms"] = round(t_full * 1e3, 4)
        result[f"{name}_full_logliks_per_s"] = round(1.0 / t_full, 1)

        rng = np.random.default_rng(0)
        moves = enumerate_moves(tree)
        picks = moves[rng.integers(len(moves), size=64)]
        state = {"i": 0}

        def spr_move():
            move = picks[state["i"] % len(picks)]
            state["i"] += 1
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


if __name__ == "__main__":
    main()
