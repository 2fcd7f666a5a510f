"""Random tree states and transitions for tests and benchmarks (no alignment, no likelihood): a random tree
with all its SPR moves; a rich one with random parsimony changes and split supports.
"""

from __future__ import annotations

import numpy as np

from phylorl.phylo.spr import enumerate_moves
from phylorl.phylo.starts import random_tree
from phylorl.phylo.tree import Tree
from phylorl.types import Observation, RichParts, Transition


def observe(tree: Tree, radius: int | None = None, rng: np.random.Generator | None = None) -> Observation:
    """The observation of ``tree`` (all SPR moves, or those within ``radius``); rich with random parts when
    ``rng`` is given, basic otherwise."""
    moves = enumerate_moves(tree, radius=radius)
    rich = None
    if rng is not None:
        rich = RichParts(
            rng.integers(-3, 12, size=len(moves)).astype(np.float32),
            float(rng.integers(50, 500)),
            rng.random(tree.n_edges).astype(np.float32),
        )
    return Observation(
        tree.neighbors.astype(np.int32),
        tree.edges.astype(np.int32),
        tree.lengths.astype(np.float32),
        tree.n_leaves,
        moves,
        -1 if radius is None else radius,
        True,
        rich,
    )


def random_observation(
    n_taxa: int, rng: np.random.Generator, radius: int | None = None, rich: bool = True
) -> Observation:
    """The observation of a random tree over ``n_taxa`` taxa."""
    return observe(random_tree([f"t{i}" for i in range(n_taxa)], rng), radius, rng if rich else None)


def random_transition(
    n_taxa: int,
    rng: np.random.Generator,
    radius: int | None = None,
    next_taxa: int | None = None,
    rich: bool = True,
) -> Transition:
    """A transition between two independent random trees (not a real SPR step: for shapes and speed)."""
    obs = random_observation(n_taxa, rng, radius, rich)
    nxt = random_observation(next_taxa or n_taxa, rng, radius, rich)
    return Transition(
        obs=obs,
        action=int(rng.integers(obs.n_actions)),
        reward=float(rng.normal()),
        next_obs=nxt,
        terminal=bool(rng.random() < 0.1),
        truncated=bool(rng.random() < 0.1),
        discount=0.99,
    )
