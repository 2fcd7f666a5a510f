"""The classical SPR hill-climb against IQ-TREE, run in the same invocation: log-likelihood and seconds.

For every alignment and model: the alignment is prepared (NJ tree, model parameters on it; not timed),
IQ-TREE's default ML search runs under the same fixed model string with one thread (its tree re-scored by our
engine: the reference), then each method searches from the NJ tree (``--start nj``) or from seeded random
trees (``--start random``, ``--starts K``). Per case: each method's final log-likelihood minus IQ-TREE's, its
search seconds (preparation excluded, as IQ-TREE's wall time includes its own start-up), likelihood
evaluations (full: SPR + local optimisation) and lazy SPR scores (the climbs search an alignment's distinct
sequences: see ``run_search(distinct=...)``). Summary per method: cases within 0.1 of IQ-TREE and total
seconds against IQ-TREE's. Prints one JSON line; progress on stderr.
"""

from __future__ import annotations

import argparse
import os
import time
from itertools import product
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from common import DS_DIR, emit, log, machine  # noqa: E402

from phylorl.env.config import EnvConfig  # noqa: E402
from phylorl.env.corpus import load_corpus  # noqa: E402
from phylorl.env.prepare import prepare_alignment  # noqa: E402
from phylorl.env.search import run_search  # noqa: E402
from phylorl.env.tree_env import EnvAlignment, TreeEnv  # noqa: E402
from phylorl.evaluation.iqtree import IqtreeRunner, find_iqtree  # noqa: E402

TOLERANCE = 0.1


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--alignments", nargs="+", default=[str(DS_DIR / f"DS{i}.fasta") for i in range(1, 5)])
    p.add_argument("--models", default="JC,GTR+F+G4")
    p.add_argument(
        "--methods",
        default="hillclimb,hillclimb:4",
        help="comma-separated; NAME:R runs NAME with R perturb-and-climb restarts (seed 0)",
    )
    p.add_argument("--start", choices=("nj", "random"), default="nj")
    p.add_argument("--starts", type=int, default=1, help="random starts per alignment (--start random)")
    args = p.parse_args()
    runner = IqtreeRunner(find_iqtree(), seed=0)
    methods = [(m.split(":")[0], int(m.split(":")[1]) if ":" in m else 0) for m in args.methods.split(",")]
    corpus = load_corpus([Path(a) for a in args.alignments])
    rows = []
    for item, model in product(corpus, args.models.split(",")):
        entry = EnvAlignment.build(item.alignment, prepare_alignment(item.alignment, model), item.path.name)
        reference = runner.search(entry)
        for k, (name, restarts) in product(range(args.starts if args.start == "random" else 1), methods):
            env = TreeEnv([entry], EnvConfig(start=args.start), seed=k)
            env.reset()
            started = time.perf_counter()
            result = run_search(env, name, steps=None, restarts=restarts, rng=np.random.default_rng(0))
            seconds = time.perf_counter() - started
            row = {
                "alignment": item.path.name,
                "taxa": item.alignment.n_taxa,
                "model": model,
                "start": k,
                "method": f"{name}:{restarts}" if restarts else name,
                "minus_iqtree": round(result.best_loglik - reference.loglik, 3),
                "seconds": round(seconds, 2),
                "iqtree_seconds": round(reference.seconds, 2),
                "evaluations": result.evaluations,
                "lazy_scores": result.lazy_scores,
            }
            rows.append(row)
            log(
                f"{row['alignment']} {model} start {k} {row['method']}: {row['minus_iqtree']:+.3f} "
                f"in {seconds:.2f} s (IQ-TREE {reference.seconds:.2f} s)"
            )
    summary = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        # IQ-TREE's time counts once per search it is compared with
        seconds, iqtree = sum(r["seconds"] for r in mine), sum(r["iqtree_seconds"] for r in mine)
        summary[method] = {
            "cases": len(mine),
            "within_0.1": sum(r["minus_iqtree"] >= -TOLERANCE for r in mine),
            "seconds": round(seconds, 2),
            "iqtree_seconds": round(iqtree, 2),
            "time_ratio": round(seconds / max(iqtree, 1e-9), 3),
        }
    info = {"benchmark": "search", "machine": machine(), "start": args.start, "models": args.models}
    emit({**info, "summary": summary, "rows": rows})


if __name__ == "__main__":
    main()
