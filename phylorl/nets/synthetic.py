"""Random trees and observations for tests and benchmarks (no alignment, no likelihood).

Observations are built exactly as the environment describes them (``phylorl.types``):
``is_leaf`` per node, both directions of every edge with its branch length, all SPR moves
(``phylorl.phylo.spr``) with their metadata.
"""

from __future__ import annotations

import numpy as np

from phylorl.types import Observation, Transition
from phylorl.phylo.spr import enumerate_moves, move_metadata
from phylorl.phylo.starts import random_tree
from phylorl.phylo.tree import Tree


def observe(tree: Tree, radius: int | None = None) -> Observation:
    """The observation of ``tree``: is_leaf, edges both ways with lengths, all SPR moves."""
    n_nodes = tree.n_nodes
    is_leaf = (np.arange(n_nodes) < tree.n_leaves).astype(np.float32)[:, None]
    u, v = tree.edges[:, 0].astype(np.int64), tree.edges[:, 1].astype(np.int64)
    edge_index = np.empty((2, 2 * tree.n_edges), dtype=np.int64)
    edge_index[0, 0::2], edge_index[1, 0::2] = u, v
    edge_index[0, 1::2], edge_index[1, 1::2] = v, u
    edge_attr = np.repeat(tree.lengths.astype(np.float32), 2)[:, None]
    moves = enumerate_moves(tree, radius=radius)
    return Observation(is_leaf, edge_index, edge_attr, moves, move_metadata(tree, moves))


def random_observation(n_taxa: int, rng: np.random.Generator, radius: int | None = None) -> Observation:
    """The observation of a random tree over ``n_taxa`` taxa (:func:`phylorl.phylo.starts.random_tree`)."""
    return observe(random_tree([f"t{i}" for i in range(n_taxa)], rng), radius)


def random_transition(n_taxa: int, rng: np.random.Generator, radius: int | None = None,
                      next_taxa: int | None = None) -> Transition:
    """A transition between two independent random trees (not a real SPR step: for shapes/speed)."""
    obs = random_observation(n_taxa, rng, radius)
    nxt = random_observation(next_taxa or n_taxa, rng, radius)
    return Transition(
        obs=obs,
        action=int(rng.integers(obs.n_actions)),
        reward=float(rng.normal()),
        next_obs=nxt,
        terminal=bool(rng.random() < 0.1),
        truncated=bool(rng.random() < 0.1),
        discount=0.99,
    )
