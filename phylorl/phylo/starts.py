"""Start trees: uniformly random topologies, JC69 distances and neighbour joining."""

from __future__ import annotations

import numpy as np
from numba import njit

from phylorl.phylo.tree import Tree, taxon_names

MIN_BRANCH_LENGTH = 1e-6
"""Smallest branch length a start tree gets (random draws and negative NJ lengths are raised to it)."""

MAX_JC_DISTANCE = 10.0
"""JC69 distance given to a pair whose sequences look saturated (proportion of differences at or
above 3/4) or that share no unambiguous site; also the upper bound of every distance."""

TIE = 1e-12
"""Relative difference in Q below which two pairs tie (equal up to rounding, as with identical sequences):
the first in row-major order is joined."""

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
    to :data:`MIN_BRANCH_LENGTH`. A compiled ``O(n^3)`` kernel (:func:`_nj_joins`: one ``[r, r]`` scan per
    join, no ``[r, r]`` temporaries).
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

    edges, lengths = _nj_joins(dist)
    return Tree.from_edges(edges, np.maximum(lengths, MIN_BRANCH_LENGTH), names)


@njit(cache=True, nogil=True, fastmath={"reassoc", "nnan", "nsz"})
def _row_minima(dist, sums, r, out):
    """``out[a]``: the least Q of row ``a`` with a later row ``b < r``, ``(r - 2) d[a, b] - S[b] - S[a]``.
    Returns the least of them. (Reassociation only lets the minimum vectorise; each Q is rounded as
    written.)"""
    c = r - 2
    best = np.inf
    for a in range(r - 1):
        m = np.inf
        for b in range(a + 1, r):
            m = min(m, c * dist[a, b] - sums[b])
        out[a] = m - sums[a]
        best = min(best, out[a])
    return best


@njit(cache=True, nogil=True)
def _nj_joins(dist):
    """The ``2n - 3`` edges (child, parent) and lengths of the NJ tree of ``dist`` ``[n, n]`` (overwritten).
    Internal nodes are numbered ``n, n + 1, ...`` in the order of their joins; the last one joins the final
    three. The rows left stay packed in ``dist[:r, :r]`` (a joined row's slot takes the last row), and
    ``first[s]`` keeps the order the textbook's matrix would hold slot ``s`` in (it deletes the second row of
    each join and puts the new node in the first's), so the pair joined is the first in that row-major order
    among those whose Q is least (within :data:`TIE`). Row sums are kept up to date in ``O(r)`` a join, so a
    join costs one ``[r, r]`` scan."""
    n = dist.shape[0]
    first = np.arange(n)
    node = np.arange(n)
    sums = np.zeros(n)
    for a in range(n):
        for b in range(n):
            sums[a] += dist[a, b]
    minima = np.empty(n)
    edges = np.empty((2 * n - 3, 2), np.int64)
    lengths = np.empty(2 * n - 3)
    k, next_node, r = 0, n, n
    while r > 3:
        best = _row_minima(dist, sums, r, minima)
        limit = best + TIE * abs(best)
        i, j = -1, -1
        for a in range(r - 1):
            if minima[a] > limit:
                continue
            for b in range(a + 1, r):
                if (r - 2) * dist[a, b] - sums[b] - sums[a] <= limit:
                    lo, hi = (a, b) if first[a] < first[b] else (b, a)
                    if i < 0 or first[lo] < first[i] or (first[lo] == first[i] and first[hi] < first[j]):
                        i, j = lo, hi
        d_ij = dist[i, j]
        l_i = 0.5 * d_ij + (sums[i] - sums[j]) / (2 * (r - 2))
        edges[k, 0], edges[k, 1], lengths[k] = node[i], next_node, l_i
        edges[k + 1, 0], edges[k + 1, 1], lengths[k + 1] = node[j], next_node, d_ij - l_i
        k += 2
        total = 0.0
        for m in range(r):
            if m in (i, j):
                continue
            value = 0.5 * (dist[i, m] + dist[j, m] - d_ij)
            sums[m] += value - dist[i, m] - dist[j, m]
            dist[i, m] = value
            dist[m, i] = value
            total += value
        dist[i, i] = 0.0
        sums[i] = total
        node[i] = next_node
        next_node += 1
        r -= 1
        if j != r:  # the last row takes the deleted row's slot
            for m in range(r + 1):
                dist[j, m] = dist[r, m]
            for m in range(r + 1):
                dist[m, j] = dist[m, r]
            dist[j, j] = 0.0
            sums[j], first[j], node[j] = sums[r], first[r], node[r]
    order = np.argsort(first[:3])
    for t in range(3):
        x, y, z = order[t], order[(t + 1) % 3], order[(t + 2) % 3]
        edges[k, 0], edges[k, 1] = node[x], next_node
        lengths[k] = 0.5 * (dist[x, y] + dist[x, z] - dist[y, z])
        k += 1
    return edges, lengths
