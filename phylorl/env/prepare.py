"""Per-alignment preparation, done once and cached on disk by content hash.

Preparing an alignment means: build its neighbour-joining tree, estimate the free parameters of the
model string on it (ML, jointly with branch lengths), and record the NJ tree's log-likelihood with
optimised branch lengths. That log-likelihood's magnitude is the per-alignment constant the reward
is divided by (DESIGN.md: reward = ΔlogL / |logL(NJ)| × scale). It also bootstraps NJ trees for
the split supports the rich observation shows (:mod:`phylorl.phylo.bootstrap`).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import multiprocessing
import os
import tempfile
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

from phylorl.phylo import LikelihoodEngine, load_alignment, nj_tree, parse_model, write_newick
from phylorl.phylo.bootstrap import nj_bootstrap_supports

BOOTSTRAP_REPLICATES = 100


@functools.cache
def preparation_code() -> str:
    """A digest of the source that prepares an alignment (this module and every module of
    :mod:`phylorl.phylo`: NJ, model fit, likelihood, bootstrap): part of the cache key, so that a cache filled
    by other code is never served."""
    here = Path(__file__).resolve()
    root = here.parent.parent
    digest = hashlib.sha256()
    for path in [*sorted((root / "phylo").glob("*.py")), here]:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class PreparedAlignment:
    """What an environment needs to know about one alignment before its first episode."""

    content_hash: str
    """sha256 of the alignment's taxa and characters."""
    model: str
    """Fully specified model string (free parameters estimated on the NJ tree)."""
    nj_newick: str
    """The NJ tree with ML branch lengths under ``model``."""
    nj_loglik: float
    """Its log-likelihood; ``abs(nj_loglik)`` normalises rewards."""
    n_patterns: int
    """Number of distinct site patterns."""
    supports: list = field(default_factory=list)
    """``[[split as hex, support], ...]``: split supports of a 100-replicate NJ bootstrap."""

    def split_supports(self) -> dict[int, float]:
        """``{split bitmask: support}`` (see :mod:`phylorl.phylo.bootstrap`)."""
        return {int(split, 16): float(support) for split, support in self.supports}


def prepare_alignment(alignment, model: str = "GTR+F+G4") -> PreparedAlignment:
    """Estimate ``model``'s free parameters on the NJ tree and score that tree (pure computation)."""
    tree = nj_tree(alignment)
    engine = LikelihoodEngine(alignment, parse_model(model))
    engine.loglik(tree)  # estimates free parameters on this topology
    loglik = engine.optimize_branch_lengths(tree, rounds=20, tol=1e-4)
    return PreparedAlignment(
        content_hash=alignment.content_hash(),
        model=str(engine.model.spec),
        nj_newick=write_newick(tree),
        nj_loglik=float(loglik),
        n_patterns=engine.n_patterns,
        supports=[
            [format(split, "x"), support]
            for split, support in sorted(nj_bootstrap_supports(alignment, BOOTSTRAP_REPLICATES).items())
        ],
    )


class PreparationCache:
    """Prepared alignments stored as JSON files in ``directory`` (created on first write).

    The key is the alignment's content hash, the model string and :func:`preparation_code`, so a renamed
    file hits the cache, and an edited one, or any change to the code that prepares, does not.
    """

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)

    def has(self, alignment, model: str = "GTR+F+G4") -> bool:
        """Whether ``alignment`` under ``model`` is already prepared here."""
        return self._path(alignment, model).exists()

    def _path(self, alignment, model: str) -> Path:
        key = f"{alignment.content_hash()}|{model}|{preparation_code()}"
        return self.directory / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"

    def get(self, alignment, model: str = "GTR+F+G4") -> PreparedAlignment:
        path = self._path(alignment, model)
        if path.exists():
            try:
                return PreparedAlignment(**json.loads(path.read_text()))
            except (ValueError, TypeError):
                pass  # a damaged entry is recomputed and overwritten
        prepared = prepare_alignment(alignment, model)
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(asdict(prepared), fh)
        os.replace(tmp, path)
        return prepared


def _prepare_one(job: tuple[str, str, str]) -> str:
    path, model, directory = job
    PreparationCache(directory).get(load_alignment(path), model)
    return path


def prepare_corpus(
    paths, model: str, directory: str | os.PathLike, threads: int = 1, on_done=None, stop=None
) -> bool:
    """Prepare every alignment file in ``paths`` into the cache at ``directory``, ``threads`` at a
    time (processes), so that every later reader (each actor, each evaluation) finds it cached.

    ``on_done(path, done, total)`` is called after each one, in the order they finish. ``stop`` (a
    ``threading.Event``): once set, no alignment is started (those under way finish); returns whether all
    of them were prepared.
    """
    paths = [str(p) for p in paths]
    cache = PreparationCache(directory)
    todo = [p for p in paths if not cache.has(load_alignment(p), model)]
    done = len(paths) - len(todo)
    jobs = [(p, model, str(directory)) for p in todo]
    stopped = stop.is_set if stop is not None else lambda: False
    report = on_done or (lambda path, done, total: None)
    if threads <= 1 or len(jobs) <= 1:
        for job in jobs:
            if stopped():
                return False
            done += 1
            report(_prepare_one(job), done, len(paths))
        return True
    waiting = iter(jobs)  # handed out one per free process, so that a stop or a failure leaves them unstarted
    with ProcessPoolExecutor(threads, mp_context=multiprocessing.get_context("fork")) as pool:
        running = {pool.submit(_prepare_one, job) for job in itertools.islice(waiting, threads)}
        while running:
            finished, running = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                done += 1
                report(future.result(), done, len(paths))
            if stopped():  # those running finish as the pool closes
                return done == len(paths)
            running |= {pool.submit(_prepare_one, job) for job in itertools.islice(waiting, len(finished))}
    return True
