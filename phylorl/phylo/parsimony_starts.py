"""Parsimony start trees: randomised stepwise addition, then parsimony SPR rounds (as IQ-TREE and RAxML-NG
start).

Taxa are added in a random order, each on the edge of the growing tree where it adds the fewest Fitch changes
(ties to the lowest edge id). The insertion cost of a leaf on edge ``(u, v)`` is the weighted count of site
patterns where the leaf's states miss the Fitch set of the tree rooted on that edge, read from the directional
Fitch sets of :mod:`phylorl.phylo.parsimony` (bit planes over 64 patterns per word). The tree is then improved
by SPR rounds on parsimony: each pruned subtree is moved to the regraft edge within ``radius`` that lowers the
length most, when one does (the length change of every such move from one walk, as
:func:`~phylorl.phylo.parsimony.spr_parsimony_deltas`). Each step recomputes the directional sets of the whole
tree, ``O(n W)`` word operations for ``W`` words of patterns, so a tree costs ``O(n^2 W)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import parsimony as ps
from .spr import _apply_spr, slot_of
from .tree import Tree, taxon_names

START_LENGTH = 0.05
"""Branch length every edge of a parsimony start tree gets (its likelihood optimisation starts there)."""


@njit(cache=True, nogil=True)
def _link(neighbors, node_edges, edges, e, u, v):
    edges[e, 0] = u
    edges[e, 1] = v
    for a, b in ((u, v), (v, u)):
        k = 0
        while neighbors[a, k] >= 0:
            k += 1
        neighbors[a, k] = b
        node_edges[a, k] = e


@njit(cache=True, nogil=True)
def stepwise_addition(planes, starts, masks, class_weights, order):
    """``(edges, length)``: the edges (``[2n-3, 2]``) of the tree built by adding the taxa in ``order``, each
    where it adds the fewest changes, and its weighted Fitch length (the sum of those insertion costs); leaves
    keep their ids, internal nodes are numbered ``n, n+1, ...`` in order of creation."""
    classes = (starts, masks, class_weights)
    n = planes.shape[0]
    n_nodes = 2 * n - 2
    neighbors = np.full((n_nodes, 3), -1, np.int64)
    node_edges = np.full((n_nodes, 3), -1, np.int64)
    edges = np.zeros((2 * n - 3, 2), np.int64)
    down = np.zeros((n_nodes, 3, 4, planes.shape[2]), np.uint64)
    for j in range(3):
        _link(neighbors, node_edges, edges, j, n, order[j])
    n_edges = 3
    ps.directional_into(neighbors, n, n, planes, down)
    length = ps._misses(down[n, 0], down[n, 1], down[n, 2], classes)
    length += ps._unions(down[n, 0], down[n, 1], classes)
    for t in range(3, n):
        leaf = order[t]
        best, best_cost = 0, np.inf
        for e in range(n_edges):
            u, v = edges[e, 0], edges[e, 1]
            cost = ps._misses(
                down[v, slot_of(neighbors, v, u)], down[u, slot_of(neighbors, u, v)], planes[leaf], classes
            )
            if cost < best_cost:
                best, best_cost = e, cost
        length += best_cost
        u, v = edges[best, 0], edges[best, 1]
        w = n + t - 2  # the new internal node
        ku, kv = slot_of(neighbors, u, v), slot_of(neighbors, v, u)
        neighbors[u, ku] = w  # edge `best` becomes (u, w)
        edges[best, 1] = w
        neighbors[v, kv] = -1
        node_edges[v, kv] = -1
        neighbors[w, 0] = u
        node_edges[w, 0] = best
        _link(neighbors, node_edges, edges, n_edges, w, v)
        _link(neighbors, node_edges, edges, n_edges + 1, w, leaf)
        n_edges += 2
        if t + 1 < n:
            ps.directional_into(neighbors, n, n, planes, down)
    return edges, length


@njit(cache=True, nogil=True)
def parsimony_spr(
    neighbors, node_edges, edges, lengths, n_leaves, planes, starts, masks, class_weights, radius, max_rounds
):
    """SPR rounds on parsimony over the tree's arrays (in place) until a round lowers the length by nothing,
    or ``max_rounds``; returns ``(moves applied, length change)``."""
    classes = (starts, masks, class_weights)
    n_nodes = neighbors.shape[0]
    down = np.zeros((n_nodes, 3, 4, planes.shape[2]), np.uint64)
    space = ps.regraft_space(n_nodes, planes.shape[2])
    _, _, parent, _, visited = space
    deltas = np.empty(n_nodes)
    changed = np.empty(3, np.int64)
    applied = 0
    change = 0.0
    for _ in range(max_rounds):
        moved = 0
        ps.directional_into(neighbors, n_leaves, n_leaves, planes, down)
        for p in range(n_leaves, n_nodes):
            for ks in range(3):
                count = ps.regraft_deltas(neighbors, n_leaves, down, classes, p, ks, radius, deltas, space)
                x, y, delta = -1, -1, -1e-9  # the regraft within the radius that lowers the length most
                for i in range(count):
                    if deltas[visited[i]] < delta:
                        y = visited[i]
                        x, delta = parent[y], deltas[y]
                if x < 0:
                    continue
                s = neighbors[p, ks]
                _apply_spr(neighbors, node_edges, edges, lengths, n_leaves, p, s, x, y, changed)
                change += delta
                moved += 1
                ps.directional_into(neighbors, n_leaves, n_leaves, planes, down)
        applied += moved
        if moved == 0:
            break
    return applied, change


def parsimony_tree(
    alignment,
    rng: np.random.Generator,
    *,
    spr_radius: int = 6,
    spr_rounds: int = 4,
    planes: tuple | None = None,
) -> Tree:
    """A randomised stepwise-addition parsimony tree of ``alignment``, improved by parsimony SPR rounds of
    radius ``spr_radius`` (at most ``spr_rounds``; 0: none); every branch :data:`START_LENGTH`. ``planes``:
    :func:`~phylorl.phylo.parsimony.bit_planes` of the alignment's patterns, when the caller keeps them."""
    names = taxon_names(alignment)
    if planes is None:
        patterns = alignment.patterns()
        planes = ps.bit_planes(ps.parsimony_tips(patterns.codes), np.asarray(patterns.weights, np.float64))
    bits, (starts, masks, class_weights) = planes
    order = rng.permutation(len(names)).astype(np.int64)
    edges, _ = stepwise_addition(bits, starts, masks, class_weights, order)
    tree = Tree.from_edges(edges.astype(np.int32), np.full(len(edges), START_LENGTH), names)
    if spr_rounds > 0:
        arrays = (tree.neighbors, tree.node_edges, tree.edges, tree.lengths, tree.n_leaves)
        parsimony_spr(*arrays, bits, starts, masks, class_weights, spr_radius, spr_rounds)
        tree.lengths[:] = START_LENGTH
    return tree
