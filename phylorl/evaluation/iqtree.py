"""IQ-TREE 2 as the reference search: its default ML search under a fixed model, re-scored by our engine.

IQ-TREE runs once per alignment, single-threaded and seeded, on a FASTA copy of the alignment exactly
as our engine reads it, under the fully specified model string of the preparation (so both sides
optimise the same function: topology and branch lengths only). Its ``.treefile`` is then read back,
its branch lengths optimised by our engine, and that log-likelihood is the reference every method is
measured against (equal to IQ-TREE's own score to within the engines' tolerances).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from phylorl.phylo import Tree, format_fasta, read_newick

IQTREE_PROGRAM = "iqtree2"


class IqtreeError(ValueError):
    """IQ-TREE is missing, failed, or wrote a tree that cannot be read (the message says which)."""


@dataclass
class IqtreeResult:
    """IQ-TREE's ML tree for one alignment and its scores."""

    tree: Tree
    """The ML tree, branch lengths re-optimised by our engine."""
    loglik: float
    """Our engine's log-likelihood of ``tree`` (the reference)."""
    reported_loglik: float | None
    """IQ-TREE's own score of its tree (None when its report has none)."""
    seconds: float
    """Wall-clock seconds of the IQ-TREE process."""


def find_iqtree(program: str = IQTREE_PROGRAM) -> str:
    """Path of the IQ-TREE 2 executable; :class:`IqtreeError` when it is not on PATH."""
    path = shutil.which(program)
    if path is None:
        raise IqtreeError(
            f"{program} is not on PATH (scripts/install.sh installs it; --no-iqtree runs without it)"
        )
    return path


class IqtreeRunner:
    """Runs ``exe`` (IQ-TREE 2) with ``-nt 1 -seed seed``; see :meth:`search`."""

    def __init__(self, exe: str, seed: int = 0, timeout: float | None = None):
        self.exe = exe
        self.seed = int(seed)
        self.timeout = timeout

    def search(self, entry) -> IqtreeResult:
        """IQ-TREE's ML search for ``entry`` (an :class:`~phylorl.env.tree_env.EnvAlignment`) under
        ``entry``'s prepared model, re-scored with ``entry.engine``."""
        alignment, model, name = entry.alignment, entry.prepared.model, entry.name or "an alignment"
        with tempfile.TemporaryDirectory(prefix="phylorl-iqtree-") as work:
            fasta = Path(work) / "alignment.fasta"
            fasta.write_text(format_fasta(alignment))
            prefix = Path(work) / "ml"
            cmd = [self.exe, "-s", str(fasta), "-m", model, "-nt", "1", "-seed", str(self.seed), "-redo"]
            cmd += ["-quiet", "-pre", str(prefix)]
            started = time.perf_counter()
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout)
            except subprocess.TimeoutExpired:
                raise IqtreeError(f"{self.exe} did not finish on {name} within {self.timeout} s") from None
            seconds = time.perf_counter() - started
            treefile = Path(f"{prefix}.treefile")
            if proc.returncode != 0 or not treefile.exists():
                log = Path(f"{prefix}.log")
                text = (log.read_text() if log.exists() else "") + (proc.stderr or "")
                lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
                reason = lines[-1] if lines else f"exit status {proc.returncode}"
                raise IqtreeError(f"{self.exe} failed on {name}: {reason}")
            text = "".join(
                p.read_text() for p in (Path(f"{prefix}.iqtree"), Path(f"{prefix}.log")) if p.exists()
            )
            found = re.search(r"Log-likelihood of the tree:\s*(\S+)", text) or re.search(
                r"BEST SCORE FOUND\s*:\s*(\S+)", text
            )
            newick = treefile.read_text()
        try:
            tree = read_newick(newick, alignment, resolve_polytomies=True)
        except ValueError as exc:
            raise IqtreeError(f"cannot read IQ-TREE's tree for {name}: {exc}") from None
        loglik = entry.engine.optimize_branch_lengths(tree, rounds=20, tol=1e-4)
        return IqtreeResult(tree, float(loglik), float(found.group(1)) if found else None, seconds)
