"""Worker processes of a search: its independent climbs run at once.

A search with ``threads`` above one climbs its start trees and each batch of perturb-and-climb iterations in
that many processes, each with its own :class:`~phylorl.phylo.LikelihoodEngine` on the same alignment and
model. A climb depends only on its tree, its random generator and the engine's alignment and model (never on
what the engine computed before: a resumed search relies on the same property), so it gives the same result
whichever process runs it.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from phylorl.phylo import LikelihoodEngine


class Workers:
    """Runs ``fn(engine, *args, **kwargs)`` for a list of ``args``: in this process with ``engine`` for one
    thread, in ``threads`` worker processes for more (started at the first call)."""

    def __init__(self, engine: LikelihoodEngine, model: str, threads: int):
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.engine, self.model, self.threads = engine, model, threads
        self._pool: ProcessPoolExecutor | None = None

    @property
    def parallel(self) -> bool:
        return self.threads > 1

    def map(self, fn, args: list[tuple], **kwargs):
        """The results of ``fn(engine, *a, **kwargs)`` for each ``a`` in ``args``, in order, each as it is
        ready (``fn`` a module-level function: it is sent to the workers by name)."""
        if not self.parallel:
            for a in args:
                yield fn(self.engine, *a, **kwargs)
            return
        if self._pool is None:  # spawned, not forked: the caller may hold threads (the kernels', torch's)
            self._pool = ProcessPoolExecutor(
                self.threads,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start,
                initargs=(self.engine.alignment, self.model),
            )
        jobs = [self._pool.submit(_call, fn, a, kwargs) for a in args]
        for job in jobs:
            yield job.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


_ENGINE: LikelihoodEngine | None = None


def _start(alignment, model: str) -> None:
    global _ENGINE
    _ENGINE = LikelihoodEngine(alignment, model)


def _call(fn, args: tuple, kwargs: dict):
    return fn(_ENGINE, *args, **kwargs)
