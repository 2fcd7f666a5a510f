"""IQ-TREE 2 runs cached on disk: one seeded, single-threaded ML search per (alignment, model, seed).

A run of IQ-TREE at 500-1,000 taxa takes tens of minutes, so its tree, its own score and its wall time are
kept in ``cache_dir`` as JSON, keyed by the alignment file's content, the seed and the model string with every
number rounded to 4 significant digits (the fitted model string can differ in its last digits between engine
versions; a search under a model that close is the same search). The entry records the exact string it ran
under; callers re-score its tree under their own string.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

IQTREE = "iqtree2"


def model_key(model: str) -> str:
    """``model`` with every number rounded to 4 significant digits."""
    return re.sub(r"\d+\.\d+(?:e-?\d+)?", lambda m: f"{float(m.group(0)):.4g}", model)


def cache_path(cache_dir: str | os.PathLike, fasta: str | os.PathLike, model: str, seed: int, threads: int = 1) -> Path:
    content = hashlib.sha256(Path(fasta).read_bytes()).hexdigest()[:16]
    key = hashlib.sha256(f"{content}|{model_key(model)}|{seed}|{threads}".encode()).hexdigest()[:16]
    return Path(cache_dir) / f"{Path(fasta).stem}.s{seed}.t{threads}.{key}.json"


def run_iqtree(fasta: str | os.PathLike, model: str, seed: int, threads: int = 1,
               timeout: float | None = None) -> dict:
    """One IQ-TREE search: ``{"newick", "seconds", "reported_loglik", "model", "seed", "threads"}``."""
    with tempfile.TemporaryDirectory(prefix="iqtree-") as work:
        prefix = Path(work) / "ml"
        cmd = [IQTREE, "-s", str(fasta), "-m", model, "-nt", str(threads), "-seed", str(seed), "-redo", "-quiet",
               "-pre", str(prefix)]
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        seconds = time.perf_counter() - started
        treefile = Path(f"{prefix}.treefile")
        if proc.returncode != 0 or not treefile.exists():
            raise RuntimeError(f"iqtree2 failed on {fasta}: {proc.stderr[-500:]}")
        text = Path(f"{prefix}.iqtree").read_text() if Path(f"{prefix}.iqtree").exists() else ""
        found = re.search(r"Log-likelihood of the tree:\s*(\S+)", text)
        return {"newick": treefile.read_text().strip(), "seconds": seconds,
                "reported_loglik": float(found.group(1)) if found else None, "model": model, "seed": seed,
                "threads": threads, "load_avg_1m": round(os.getloadavg()[0], 2)}


def cached_iqtree(cache_dir, fasta, model: str, seed: int, threads: int = 1, rerun: bool = False,
                  timeout: float | None = None) -> tuple[dict, bool]:
    """``(run, fresh)``: the cached run when there is one (and not ``rerun``), else a new run, stored."""
    path = cache_path(cache_dir, fasta, model, seed, threads)
    if path.exists() and not rerun:
        return json.loads(path.read_text()), False
    run = run_iqtree(fasta, model, seed, threads, timeout)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(run, fh)
    os.replace(tmp, path)
    return run, True
