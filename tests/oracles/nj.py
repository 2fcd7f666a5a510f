"""The textbook neighbour joining in numpy: the oracle :func:`phylorl.phylo.starts.nj_tree`'s compiled joins
are tested equal to. One ``[r, r]`` Q matrix per join, the second joined row deleted."""

from __future__ import annotations

import numpy as np


def nj_joins(dist: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(edges [2n-3, 2], lengths [2n-3])`` of the NJ tree of the symmetric distances ``dist``, numbered and
    ordered as :func:`phylorl.phylo.starts._nj_joins` numbers them."""
    dist = np.array(dist, dtype=np.float64)
    n = dist.shape[0]
    active = list(range(n))
    next_node = n
    edges, lengths = [], []
    while len(active) > 3:
        r = len(active)
        row_sums = dist.sum(axis=1)
        q = (r - 2) * dist - row_sums[:, None] - row_sums[None, :]
        q[np.tril_indices(r)] = np.inf
        i, j = np.unravel_index(int(np.argmin(q)), q.shape)
        d_ij = dist[i, j]
        l_i = 0.5 * d_ij + (row_sums[i] - row_sums[j]) / (2 * (r - 2))
        edges += [(active[i], next_node), (active[j], next_node)]
        lengths += [l_i, d_ij - l_i]
        new_row = 0.5 * (dist[i] + dist[j] - d_ij)
        new_row[i] = 0.0
        dist[i] = new_row
        dist[:, i] = new_row
        active[i] = next_node
        keep = np.arange(r) != j
        dist = dist[keep][:, keep]
        del active[j]
        next_node += 1
    for k, (a, b) in enumerate(((1, 2), (0, 2), (0, 1))):
        edges.append((active[k], next_node))
        lengths.append(0.5 * (dist[k, a] + dist[k, b] - dist[a, b]))
    return np.array(edges, dtype=np.int64), np.array(lengths)
