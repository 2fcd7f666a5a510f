"""Identical sequences: searched once, put back at the end (as IQ-TREE does).

Two taxa with identical sequences (every character's state mask equal, gaps included) are
interchangeable: any tree's log-likelihood is unchanged by swapping them, and with both on one cherry
of zero-length pendant branches the tree scores what the tree without one of them scores. A search
that keeps both walks a flat landscape of equivalent trees (on ``valid/`` 22 of 60 alignments hold
such a pair). :func:`find_duplicates` names them, :func:`reduce_alignment` and :func:`prune_tree`
drop all but the first of each group, and :func:`restore_tree` attaches each dropped taxon back
next to the one kept, on a cherry with pendant branches of :data:`~phylorl.phylo.starts.MIN_BRANCH_LENGTH`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from phylorl.phylo.alignment import Alignment
from phylorl.phylo.model_spec import parse_model
from phylorl.phylo.starts import MIN_BRANCH_LENGTH
from phylorl.phylo.tree import Tree


@dataclass(frozen=True)
class Duplicates:
    """``kept``: the taxa kept, increasing (first of each group of identical sequences);
    ``twin``: ``{dropped taxon: the kept taxon with its sequence}`` (indices of the full alignment)."""

    kept: tuple[int, ...]
    twin: dict

    @property
    def dropped(self) -> int:
        return len(self.twin)


def find_duplicates(alignment: Alignment, min_taxa: int = 4) -> Duplicates | None:
    """The identical sequences of ``alignment``, or ``None`` when there are none or dropping them would
    leave fewer than ``min_taxa`` taxa (nothing left to search)."""
    first: dict[bytes, int] = {}
    twin = {}
    for i, row in enumerate(alignment.codes):
        kept = first.setdefault(row.tobytes(), i)
        if kept != i:
            twin[i] = kept
    if not twin or len(first) < min_taxa:
        return None
    return Duplicates(tuple(sorted(first.values())), twin)


def reduce_alignment(alignment: Alignment, duplicates: Duplicates) -> Alignment:
    """``alignment`` with the kept taxa only (same order)."""
    kept = list(duplicates.kept)
    return Alignment(tuple(alignment.taxa[i] for i in kept), alignment.codes[kept], alignment.source)


def reduced_model(model: str, alignment: Alignment) -> str | None:
    """``model`` (fully specified) for searching the reduced alignment: empirical frequencies (``+F``) fixed
    to the full ``alignment``'s, since dropping taxa would change them; ``None`` when a base is absent
    (a fixed frequency must be positive)."""
    spec = parse_model(model)
    if spec.freqs != "empirical" or spec.kind in ("JC", "K80"):
        return model
    freqs = alignment.empirical_frequencies()
    if (freqs <= 0).any():
        return None
    return str(dataclasses.replace(spec, freqs=tuple(float(f) for f in freqs)))


def distinct(alignment: Alignment, model: str) -> tuple[Duplicates, Alignment, str] | None:
    """``(duplicates, reduced alignment, its model)`` when a search of ``alignment`` under ``model`` (fully
    specified) searches its distinct sequences; ``None`` when it has no identical sequences, too few distinct
    ones, or a base absent (which a fixed frequency cannot express): the search then keeps every taxon."""
    duplicates = find_duplicates(alignment)
    model = reduced_model(model, alignment) if duplicates is not None else None
    return None if model is None else (duplicates, reduce_alignment(alignment, duplicates), model)


def prune_tree(tree: Tree, duplicates: Duplicates) -> Tree:
    """``tree`` (over the full alignment) without the dropped taxa: each one's parent is suppressed and its
    two other branches joined (lengths added). Leaves are renumbered as in :func:`reduce_alignment`."""
    adjacency = _adjacency(tree)
    for leaf in duplicates.twin:
        ((parent, _),) = adjacency.pop(leaf).items()
        del adjacency[parent][leaf]
        (a, la), (b, lb) = adjacency.pop(parent).items()
        del adjacency[a][parent], adjacency[b][parent]
        adjacency[a][b] = adjacency[b][a] = la + lb
    leaves = {old: new for new, old in enumerate(duplicates.kept)}
    return _tree(adjacency, leaves, tuple(tree.taxa[i] for i in duplicates.kept))


def restore_tree(tree: Tree, duplicates: Duplicates, taxa) -> Tree:
    """``tree`` (over the kept taxa) with every dropped taxon on a cherry with its twin, both pendant branches
    :data:`MIN_BRANCH_LENGTH` and the cherry's stem the twin's old pendant branch. ``taxa``: the full
    alignment's names."""
    taxa = tuple(taxa)
    shift = len(taxa) - tree.n_leaves  # kept leaves back to their full ids, internal nodes after all taxa
    relabel = dict(enumerate(duplicates.kept)) | {v: v + shift for v in range(tree.n_leaves, tree.n_nodes)}
    adjacency = {
        relabel[v]: {relabel[u]: length for u, length in row.items()} for v, row in _adjacency(tree).items()
    }
    node = tree.n_nodes + shift
    for dropped, kept in duplicates.twin.items():
        ((parent, stem),) = adjacency[kept].items()
        del adjacency[parent][kept]
        adjacency[parent][node] = stem
        adjacency[node] = {parent: stem, kept: MIN_BRANCH_LENGTH, dropped: MIN_BRANCH_LENGTH}
        adjacency[kept] = {node: MIN_BRANCH_LENGTH}
        adjacency[dropped] = {node: MIN_BRANCH_LENGTH}
        node += 1
    return _tree(adjacency, {v: v for v in range(len(taxa))}, taxa)


def _adjacency(tree: Tree) -> dict[int, dict[int, float]]:
    adjacency: dict[int, dict[int, float]] = {v: {} for v in range(tree.n_nodes)}
    for (u, v), length in zip(tree.edges.tolist(), tree.lengths.tolist()):
        adjacency[u][v] = adjacency[v][u] = length
    return adjacency


def _tree(adjacency: dict[int, dict[int, float]], leaves: dict[int, int], taxa: tuple[str, ...]) -> Tree:
    """A :class:`Tree` of ``adjacency`` with leaf ``v`` numbered ``leaves[v]`` and internal nodes after
    them."""
    ids = dict(leaves)
    for v in adjacency:
        ids.setdefault(v, len(ids))
    edges, lengths = [], []
    for v, row in adjacency.items():
        for u, length in row.items():
            if ids[v] < ids[u]:
                edges.append((ids[v], ids[u]))
                lengths.append(length)
    return Tree.from_edges(np.array(edges, dtype=np.int32), np.array(lengths), taxa)
