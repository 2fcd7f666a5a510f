"""Start trees: uniformly random topologies, JC69 distances and neighbour joining."""

from __future__ import annotations

import numpy as np

from phylorl.phylo.tree import Tree, taxon_names

MIN_BRANCH_LENGTH = 1e-6
"""Smallest branch length a start tree gets (random draws and negative NJ lengths are raised to it)."""

MAX_JC_DISTANCE = 10.0
"""JC69 distance given to a pair whose sequences look saturated (proportion of differences at or
above 3/4) or that share no unambiguous site; also the upper bound of every distance."""

_UNAMBIGUOUS = np.array([1, 2, 4, 8], dtype=np.uint8)  # A, C, G, T masks


def random_tree(taxa, rng: np.random.Generator, mean_length: float = 0.1) -> Tree:
    """A random unrooted binary tree by stepwise addition.

    Leaves are added in order; each new leaf splits an existing edge chosen uniformly, which
    draws the topology uniformly among all ``(2n-5)!!`` labelled unrooted binary topologies.
    Branch lengths are exponential with mean ``mean_length``, raised to at least
    :data:`MIN_BRANCH_LENGTH`. ``taxa``: an alignment or a sequence of names (at least 3).
    """
    names = taxon_names(taxa)
    n = len(names)
    if n < 3:
        raise ValueError(f"a tree needs at least 3 leaves, got {n}")
    if not mean_length > 0:
        raise ValueError(f"mean_length must be positive, got {mean_length}")
    edges = np.empty((2 * n - 3, 2), dtype=np.int32)
    edges[:3] = [[0, n], [1, n], [2, n]]
    for leaf in range(3, n):
        n_edges = 2 * leaf - 3
        e = int(rng.integers(n_edges))
        new = n + leaf - 2  # internal nodes n, n+1, ... in order of creation
        far = edges[e, 1]
        edges[e, 1] = new
        edges[n_edges] = (new, far)
        edges[n_edges + 1] = (new, leaf)
    lengths = np.maximum(rng.exponential(mean_length, size=2 * n - 3), MIN_BRANCH_LENGTH)
    return Tree.from_edges(edges, lengths, names)


def jc_distances(alignment) -> np.ndarray:
    """Pairwise JC69 distances, float64 ``[n_taxa, n_taxa]`` (substitutions per site).

    For each pair only the sites where both sequences hold one unambiguous base (A, C, G or T)
    count; with ``p`` the proportion of those that differ, ``d = -3/4 ln(1 - 4p/3)``, capped at
    :data:`MAX_JC_DISTANCE` (which is also used when ``p >= 3/4`` or no site counts).
    ``alignment``: anything with ``codes``, uint8 ``[n_taxa, n_sites]`` 4-bit state masks.
    """
    codes = np.asarray(alignment.codes)
    if codes.ndim != 2:
        raise ValueError(f"alignment codes must be [n_taxa, n_sites], got shape {codes.shape}")
    return weighted_jc_distances(codes, np.ones(codes.shape[1]))


def weighted_jc_distances(codes: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """JC69 distances (as :func:`jc_distances`) from site patterns ``codes`` ``[n, P]``, pattern ``p``
    counted ``weights[p]`` times (bootstrap replicates reweight patterns instead of copying columns)."""
    onehot = (codes[:, :, None] == _UNAMBIGUOUS).astype(np.float64)  # [n, P, 4]
    valid = onehot.sum(axis=2)
    shared = (valid * weights) @ valid.T
    same = (onehot * weights[None, :, None]).reshape(codes.shape[0], -1) @ onehot.reshape(
        codes.shape[0], -1
    ).T
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(shared > 0, 1.0 - same / shared, 1.0)
        dist = -0.75 * np.log(1.0 - p / 0.75)
    dist = np.where((p >= 0.75) | ~np.isfinite(dist), MAX_JC_DISTANCE, dist)
    dist = np.minimum(np.maximum(dist, 0.0), MAX_JC_DISTANCE)
    np.fill_diagonal(dist, 0.0)
    return dist


def nj_tree(alignment_or_distances, taxa=None) -> Tree:
    """Saitou–Nei neighbour-joining tree.

    ``alignment_or_distances``: an alignment (distances from :func:`jc_distances`, names from
    its ``.taxa``) or a symmetric float ``[n, n]`` distance matrix, in which case ``taxa`` (an
    alignment or a sequence of names) is required. Ties in the Q criterion go to the first
    pair in row-major order, so the result is deterministic. Negative branch lengths are raised
    to :data:`MIN_BRANCH_LENGTH`. ``O(n^3)`` numpy work (one ``[r, r]`` pass per join).
    """
    if hasattr(alignment_or_distances, "codes"):
        names = taxon_names(alignment_or_distances if taxa is None else taxa)
        dist = jc_distances(alignment_or_distances)
    else:
        if taxa is None:
            raise ValueError("nj_tree on a distance matrix needs taxa")
        names = taxon_names(taxa)
        dist = np.array(alignment_or_distances, dtype=np.float64)
    n = len(names)
    if dist.shape != (n, n):
        raise ValueError(f"distance matrix has shape {dist.shape}, expected ({n}, {n}) for {n} taxa")
    if not np.all(np.isfinite(dist)) or not np.allclose(dist, dist.T):
        raise ValueError("distance matrix must be finite and symmetric")
    if n < 3:
        raise ValueError(f"a tree needs at least 3 leaves, got {n}")

    active = list(range(n))  # node id of each row of dist
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
    d = dist
    for k, (a, b) in enumerate(((1, 2), (0, 2), (0, 1))):
        edges.append((active[k], next_node))
        lengths.append(0.5 * (d[k, a] + d[k, b] - d[a, b]))
    return Tree.from_edges(edges, np.maximum(lengths, MIN_BRANCH_LENGTH), names)
