"""A search environment over an alignment's distinct sequences (:mod:`phylorl.phylo.duplicates`).

:func:`without_duplicates` gives, for an environment whose current alignment holds identical sequences, an
environment over one of each (same configuration; the model with its empirical frequencies fixed to the full
alignment's), and the :class:`~phylorl.phylo.duplicates.Duplicates` that map trees between the two. The
classical climbs search there and put the dropped taxa back at the end
(:func:`phylorl.env.search.run_search`).
"""

from __future__ import annotations

import dataclasses

from phylorl.phylo import Alignment, read_newick, write_newick
from phylorl.phylo.duplicates import Duplicates, distinct, prune_tree

from .tree_env import EnvAlignment, TreeEnv


def distinct_sequences(entry: EnvAlignment) -> tuple[Duplicates, Alignment, str] | None:
    """``(duplicates, reduced alignment, its model)`` when a climb on ``entry`` searches its distinct
    sequences, else ``None`` (:func:`~phylorl.phylo.duplicates.distinct`)."""
    return distinct(entry.alignment, entry.prepared.model)


def without_duplicates(env: TreeEnv) -> tuple[TreeEnv, Duplicates] | None:
    """``(environment over the distinct sequences, duplicates)``, reset to ``env``'s tree with the dropped
    taxa pruned; ``None`` where :func:`distinct_sequences` is."""
    entry = env.current
    found = distinct_sequences(entry)
    if found is None:
        return None
    duplicates, alignment, model = found
    nj = prune_tree(read_newick(entry.prepared.nj_newick, entry.alignment), duplicates)
    prepared = dataclasses.replace(
        entry.prepared,
        content_hash=alignment.content_hash(),
        model=model,
        nj_newick=write_newick(nj),
        supports=[],
    )
    reduced = TreeEnv(
        [EnvAlignment.build(alignment, prepared, f"{entry.name} (distinct sequences)")], env.config
    )
    reduced.reset(0, prune_tree(env.tree, duplicates))
    return reduced, duplicates
