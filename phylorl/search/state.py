"""Where a search stands between two rounds, and its checkpoints.

:class:`SearchState` is everything the rest of a search depends on: the tree's exact arrays (their node and
edge numbering decide the order in which a round visits subtrees), its log-likelihood as a float, the phase
and radius window. A search resumed from a checkpoint written between two rounds therefore makes the same
moves as one that was never interrupted. Checkpoints are JSON (floats written as their shortest round-trip
repr, so they read back exactly); :func:`write_checkpoint` replaces the file atomically.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from phylorl.phylo import Tree

CHECKPOINT_VERSION = 1
PHASES = ("fast_auto", "fast", "slow", "perturb", "done")


@dataclass
class SearchState:
    """A search between two rounds."""

    tree: Tree
    """The current tree (over the distinct sequences searched)."""
    loglik: float
    """Its log-likelihood."""
    phase: str
    """``fast_auto`` (widening the fast radius), ``fast``, ``slow``, ``perturb`` or ``done``."""
    radius_min: int
    radius_max: int
    """The next round's radius window."""
    best_radius: int
    """The widest fast radius that paid."""
    reference: float
    """The log-likelihood the next round's gain is measured against."""
    start: int = 0
    """The start tree being climbed (fast phases)."""
    best_tree: Tree | None = None
    """The best tree of the starts climbed before this one, and its log-likelihood."""
    best_loglik: float = float("-inf")
    round: int = 0
    moves: int = 0
    scored: int = 0
    iteration: int = 0
    """Perturb-and-climb iterations done."""
    fails: int = 0
    """Of which the last ones in a row that found no better tree."""
    improved: bool = False
    """Whether a perturb-and-climb iteration has found a better tree."""
    perturbed: bool = False
    """Whether the perturb-and-climb phase has ended (the slow rounds after it certify its answer)."""
    elapsed: float = 0.0
    """Seconds spent so far (progress only: no decision depends on it)."""

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("tree", "best_tree")}
        out["tree"] = _tree_dict(self.tree)
        out["best_tree"] = None if self.best_tree is None else _tree_dict(self.best_tree)
        out["best_loglik"] = repr(self.best_loglik)  # -inf is not JSON
        return out

    @classmethod
    def from_dict(cls, data: dict) -> SearchState:
        fields = {k: v for k, v in data.items() if k not in ("tree", "best_tree", "best_loglik")}
        if fields.get("phase") not in PHASES:
            raise ValueError(f"unknown search phase {fields.get('phase')!r}")
        best = data.get("best_tree")
        return cls(
            tree=_tree(data["tree"]),
            best_tree=None if best is None else _tree(best),
            best_loglik=float(data["best_loglik"]),
            **fields,
        )


_ARRAYS = {"neighbors": np.int32, "node_edges": np.int32, "edges": np.int32, "lengths": np.float64}
"""A tree's arrays in a checkpoint and their types, in the order :class:`~phylorl.phylo.Tree` takes them."""


def _tree_dict(t: Tree) -> dict:
    return {"taxa": list(t.taxa), **{name: getattr(t, name).tolist() for name in _ARRAYS}}


def _tree(t: dict) -> Tree:
    tree = Tree(*(np.array(t[name], dtype) for name, dtype in _ARRAYS.items()), tuple(t["taxa"]))
    tree.validate()
    return tree


def checkpoint_data(state: SearchState, identity: dict, start_loglik: float, prepare_seconds: float) -> dict:
    """What a checkpoint holds: the state and what it is a state of (``identity``: the alignment's hash, the
    model, seed, config and start tree; checked on resume)."""
    return {
        "version": CHECKPOINT_VERSION,
        **identity,
        "start_loglik": start_loglik,
        "prepare_seconds": prepare_seconds,
        "state": state.to_dict(),
    }


def write_checkpoint(path: str | os.PathLike, data: dict) -> None:
    """Write ``data`` to ``path`` as JSON, replacing any earlier file atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def read_checkpoint(source) -> dict:
    """A checkpoint from a path or an already-loaded dict; ``ValueError`` for another version."""
    data = source if isinstance(source, dict) else json.loads(Path(source).read_text())
    if data.get("version") != CHECKPOINT_VERSION:
        raise ValueError(f"checkpoint version {data.get('version')!r}, expected {CHECKPOINT_VERSION}")
    return data
