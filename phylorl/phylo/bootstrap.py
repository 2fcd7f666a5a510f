"""Split support from a fast bootstrap of neighbour-joining trees.

Each replicate resamples the alignment's sites with replacement (as multinomial counts over the
site patterns, so no column is copied), computes JC69 distances from the weighted patterns and
builds the NJ tree; a split's support is the fraction of replicates whose tree has it. Done once
per alignment (with its preparation) and cached; a tree's edges then look their support up.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from phylorl.phylo.splits import edge_splits, splits
from phylorl.phylo.starts import nj_tree, weighted_jc_distances


def nj_bootstrap_supports(alignment, replicates: int = 100, seed: int = 0) -> dict[int, float]:
    """``{split: support}`` over the non-trivial splits seen in ``replicates`` NJ bootstrap trees. Splits are
    bitmasks as in :mod:`phylorl.phylo.splits` (leaf 0 never set); a split absent from the dict has support 0.
    Deterministic for a given ``seed``."""
    if replicates < 1:
        raise ValueError(f"replicates must be >= 1, got {replicates}")
    patterns = alignment.patterns()
    codes, weights = patterns.codes, patterns.weights
    n_sites = int(round(weights.sum()))
    rng = np.random.default_rng(seed)
    counts: Counter[int] = Counter()
    for _ in range(replicates):
        drawn = rng.multinomial(n_sites, weights / weights.sum()).astype(np.float64)
        counts.update(splits(nj_tree(weighted_jc_distances(codes, drawn), alignment.taxa)))
    return {split: count / replicates for split, count in counts.items()}


def edge_supports(tree, supports: dict[int, float]) -> np.ndarray:
    """Support of each edge's split, float64 ``[E]`` (1 for leaf edges, 0 for unseen splits)."""
    n = tree.n_leaves
    out = np.ones(tree.n_edges)
    for e, mask in enumerate(edge_splits(tree)):
        if 1 < mask.bit_count() < n - 1:
            out[e] = supports.get(mask, 0.0)
    return out
