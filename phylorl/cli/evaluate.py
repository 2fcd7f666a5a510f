"""Evaluate a trained agent against the random and greedy policies (and optionally IQ-TREE).

For each alignment (prepared as ``phylorl search`` does: NJ tree, model parameters estimated on it,
cached in --cache-dir), every policy runs --steps moves from the same --episodes start trees; the
table shows each policy's mean ΔlogL (final − start) and mean final log-likelihood. With --iqtree,
IQ-TREE's ML search under the same fully specified model string gives a reference log-likelihood.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

HELP = "compare a trained agent with random and greedy search (and IQ-TREE)"
POLICIES = ("agent", "random", "greedy")


def add_arguments(p) -> None:
    p.add_argument("--checkpoint", required=True, help="learner checkpoint file or training run directory")
    p.add_argument("--alignments", required=True, nargs="+",
                   help="alignment files and/or directories of alignments (FASTA, PHYLIP, NEXUS)")
    p.add_argument("--model", default="GTR+F+G4", help="model string; free parameters are estimated on the NJ tree")
    p.add_argument("--episodes", type=int, default=8, help="start trees per alignment (default: 8)")
    p.add_argument("--steps", type=int, default=10, help="moves per episode (default: 10)")
    p.add_argument("--start", choices=("random", "nj"), default="random", help="start trees (default: random)")
    p.add_argument("--radius", type=int, help="largest SPR radius (default: all moves)")
    p.add_argument("--iqtree", action="store_true", help="also run IQ-TREE's ML search (iqtree2 on PATH)")
    p.add_argument("--seed", type=int, default=0, help="seed of the start trees and of the random policy")
    p.add_argument("--cache-dir", default=None, help="preparation cache (default: as phylorl search)")
    p.add_argument("--json", action="store_true", help="print one JSON object with the results")


def run(args) -> int:
    from phylorl.cli import CliError
    from phylorl.cli.search import default_cache_dir
    from phylorl.env import EnvAlignment, EnvConfig, PreparationCache
    from phylorl.env.corpus import load_corpus
    from phylorl.phylo import parse_model

    if args.episodes < 1 or args.steps < 1:
        raise CliError(f"--episodes and --steps must be >= 1, got {args.episodes} and {args.steps}")
    iqtree = shutil.which("iqtree2") if args.iqtree else None
    if args.iqtree and iqtree is None:
        raise CliError("--iqtree needs the iqtree2 program on PATH")
    parse_model(args.model)  # fail fast on a bad model string
    corpus = load_corpus(args.alignments)
    from phylorl.agent.policy import AgentPolicy, evaluate_episodes  # imports torch

    agent = AgentPolicy.from_checkpoint(args.checkpoint)
    cache = PreparationCache(args.cache_dir or default_cache_dir())
    env_cfg = EnvConfig(start=args.start, radius=args.radius)
    started = time.perf_counter()
    rows = []
    with _progress(len(corpus) * (len(POLICIES) + bool(iqtree))) as advance:
        for item in corpus:
            prepared = cache.get(item.alignment, args.model)
            entry = EnvAlignment.build(item.alignment, prepared, item.path.name)
            row = {"alignment": str(item.path), "n_taxa": item.alignment.n_taxa, "model": prepared.model,
                   "policies": {}}
            for name in POLICIES:
                advance(f"{item.path.name}: {name}")
                policy = agent if name == "agent" else name
                results = evaluate_episodes(policy, entry, args.episodes, args.steps, args.seed, env_cfg)
                deltas = [r.final_loglik - r.start_loglik for r in results]
                finals = [r.final_loglik for r in results]
                row["policies"][name] = {"mean_delta_loglik": float(np.mean(deltas)),
                                         "mean_final_loglik": float(np.mean(finals)),
                                         "best_final_loglik": float(np.max(finals)),
                                         "delta_loglik": deltas}
            if iqtree:
                advance(f"{item.path.name}: iqtree")
                row["iqtree_loglik"] = iqtree_ml_loglik(iqtree, item.path, prepared.model, args.seed)
            rows.append(row)
    summary = {"checkpoint": str(args.checkpoint), "episodes": args.episodes, "steps": args.steps,
               "start": args.start, "seed": args.seed, "seconds": time.perf_counter() - started,
               "alignments": rows}
    if args.json:
        print(json.dumps(summary))
    else:
        _print_table(summary)
    return 0


def iqtree_ml_loglik(exe: str, alignment: Path, model: str, seed: int) -> float:
    """IQ-TREE's ML tree search log-likelihood for ``alignment`` under the fixed ``model`` string."""
    from phylorl.cli import CliError

    with tempfile.TemporaryDirectory(prefix="phylorl-iqtree-") as work:
        prefix = Path(work) / "ml"
        cmd = [exe, "-s", str(alignment), "-m", model, "-nt", "1", "-seed", str(seed), "-redo", "-quiet",
               "-pre", str(prefix)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        report = Path(f"{prefix}.iqtree")
        text = (proc.stdout or "") + (report.read_text() if report.exists() else "")
        found = (re.search(r"BEST SCORE FOUND\s*:\s*(\S+)", text)
                 or re.search(r"Log-likelihood of the tree:\s*(\S+)", text))
        if proc.returncode != 0 or found is None:
            log = Path(f"{prefix}.log")
            lines = [ln for ln in ((log.read_text() if log.exists() else "") + proc.stderr).splitlines() if ln.strip()]
            reason = lines[-1] if lines else f"exit status {proc.returncode}"
            raise CliError(f"iqtree2 failed on {alignment}: {reason}")
        return float(found.group(1))


def _print_table(summary: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{summary['episodes']} {summary['start']} start trees x {summary['steps']} moves "
                        f"(seed {summary['seed']})")
    for column in ("alignment", "taxa", "policy", "mean ΔlogL", "mean final logL", "best final logL"):
        table.add_column(column, justify="left" if column in ("alignment", "policy") else "right")
    for row in summary["alignments"]:
        name = Path(row["alignment"]).name
        for i, (policy, values) in enumerate(row["policies"].items()):
            table.add_row(name if i == 0 else "", str(row["n_taxa"]) if i == 0 else "", policy,
                          f"{values['mean_delta_loglik']:.2f}", f"{values['mean_final_loglik']:.2f}",
                          f"{values['best_final_loglik']:.2f}")
        if "iqtree_loglik" in row:
            table.add_row("", "", "IQ-TREE (ML)", "", "", f"{row['iqtree_loglik']:.2f}")
        table.add_section()
    Console().print(table)


class _progress:
    """A rich progress bar on stderr; ``advance(label)`` starts the next of ``total`` tasks."""

    def __init__(self, total: int):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(TextColumn("[bold]evaluate"), BarColumn(), MofNCompleteColumn(),
                             TextColumn("{task.description}"), TimeElapsedColumn(), console=Console(stderr=True))
        self._task = self._bar.add_task("", total=total)
        self._started = False

    def __enter__(self):
        self._bar.__enter__()
        return self.advance

    def advance(self, label: str) -> None:
        self._bar.update(self._task, advance=1 if self._started else 0, description=label)
        self._started = True

    def __exit__(self, *exc):
        if exc[0] is None:
            self._bar.update(self._task, advance=1)
        self._bar.__exit__(*exc)
