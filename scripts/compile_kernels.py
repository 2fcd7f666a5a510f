"""Compile every numba kernel a first command uses, into numba's on-disk cache, then mark the cache complete.

Runs, in this process, the commands a new user runs first, on a small simulated alignment in a temporary
directory: ``phylorl search`` with every policy (the ML search from both starts) (the agent with ``--polish``
too), ``phylorl eval`` of every method without IQ-TREE, ``phylorl loglik``, an environment's labelled step as
an actor takes it, and the record passes of the learner and replay
(:func:`phylorl.records.collate.compile_kernels`). numba keeps what they compile in
``~/.cache/phylorl/numba/<digest of the source>`` (:mod:`phylorl.jit_cache`), so no later command stalls on a
compilation; ``scripts/install.sh`` runs this once.

    python scripts/compile_kernels.py
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(argv: list[str]) -> None:
    """``phylorl ARGV`` in this process, its output discarded; a failure stops the compilation with its
    message."""
    from phylorl.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    if status != 0:
        sys.exit(f"compile_kernels: phylorl {' '.join(argv)} failed:\n{err.getvalue()}")


def main() -> None:
    from phylorl.jit_cache import COMPILED_MARKER, cache_dir, use_source_keyed_cache

    use_source_keyed_cache()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="phylorl-compile-") as work:
        work = Path(work)
        cache = str(work / "prepared")
        corpus = work / "corpus"
        size = ["--count", "1", "--taxa", "9", "--sites", "300", "--seed", "1"]
        run(["simulate", "--out-dir", str(corpus), *size])
        alignment = str(next(corpus.glob("*.fasta")))
        common = ["--alignment", alignment, "--cache-dir", cache, "--json"]
        for policy in ("random", "greedy"):
            run(["search", *common, "--policy", policy, "--steps", "4"])
        run(["search", *common, "--policy", "hillclimb"])
        run(["search", *common, "--policy", "hillclimb", "--restarts", "1"])
        run(["search", *common, "--policy", "agent", "--polish", "--out", str(work / "agent.nwk")])
        run(["search", *common, "--policy", "agent", "--start", "random", "--steps", "4"])
        run(["search", "--alignment", alignment, "--out", str(work / "ml.nwk")])
        run(["search", "--alignment", alignment, "--start", "parsimony", "--starts", "2", "--json"])
        run(["loglik", "--alignment", alignment, "--tree", str(work / "agent.nwk"), "--json"])
        methods = "agent,agent+polish,ml,random,greedy,hillclimb"
        options = ["--no-iqtree", "--starts", "1", "--steps", "4", "--methods", methods]
        run(["eval", "--alignments", alignment, "--cache-dir", cache, *options])
    _labelled_step()
    from phylorl.records.collate import compile_kernels

    compile_kernels()
    (cache_dir() / COMPILED_MARKER).write_text(f"compiled in {time.perf_counter() - started:.0f} s\n")
    print(
        f"compile_kernels: every first command's kernels are compiled, in {cache_dir()} "
        f"({time.perf_counter() - started:.0f} s)"
    )


def _labelled_step() -> None:
    """An actor's step with demonstration labels: every move of a state scored as the environment steps."""
    import numpy as np

    from phylorl.env.config import EnvConfig
    from phylorl.env.prepare import prepare_alignment
    from phylorl.env.tree_env import EnvAlignment, TreeEnv
    from phylorl.phylo.simulate import simulate_dataset

    alignment = simulate_dataset(8, 200, np.random.default_rng(2)).alignment
    entry = EnvAlignment.build(alignment, prepare_alignment(alignment, "GTR+F+G4"), "compile")
    env = TreeEnv([entry], EnvConfig(horizon=4), seed=0)
    env.reset()
    env.move_rewards()
    env.step(0)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
