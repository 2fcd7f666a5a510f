"""A compiled 64-bit key of an unrooted topology, for remembering visited trees during a search.

:func:`topology_key` sums a 64-bit mix of every non-trivial split's leaf bitmask (leaf 0 never set, as
:mod:`phylorl.phylo.splits` normalises them), so it depends on the split set alone: equal topologies
always get equal keys, whatever their node numbering. Different topologies collide with probability
about 2⁻⁶⁴ per pair; a search that treats a collision as "visited" only passes over one move. Use
:func:`phylorl.phylo.splits.topology_hash` where a collision-free, stable digest is needed.

:func:`neighbor_key` is the key of the tree one SPR move away, without building a :class:`Tree`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from phylorl.phylo.spr import _MOVE_ERRORS, _apply_spr, breadth_first
from phylorl.phylo.tree import Tree

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, nogil=True)
def _mix(x):
    """splitmix64's finaliser: a bijective 64-bit mix."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True, nogil=True)
def _key(neighbors, n_leaves):
    n_nodes = neighbors.shape[0]
    words = (n_leaves + 63) // 64
    masks = np.zeros((n_nodes, words), np.uint64)
    order, parent = breadth_first(neighbors, 0, -1)  # from leaf 0: parents come before their children
    for leaf in range(1, n_leaves):
        masks[leaf, leaf // 64] |= np.uint64(1) << np.uint64(leaf % 64)
    for i in range(n_nodes - 1, 0, -1):
        v = order[i]
        p = parent[v]
        for w in range(words):
            masks[p, w] |= masks[v, w]
    key = _mix(np.uint64(n_leaves) * _GOLDEN)
    next_to_root = order[1]
    for v in range(n_leaves, n_nodes):
        if v == next_to_root:
            continue  # its split holds every leaf but 0: trivial
        h = np.uint64(0)
        for w in range(words):
            h = _mix(h ^ masks[v, w] ^ (np.uint64(w + 1) * _GOLDEN))
        key += h  # wraps modulo 2**64: order-free
    return key


def topology_key(tree: Tree) -> int:
    """The 64-bit key of ``tree``'s unrooted topology over leaf ids (see the module docstring)."""
    return int(_key(tree.neighbors, tree.n_leaves))


@njit(cache=True, nogil=True)
def _neighbor_key(neighbors, node_edges, edges, lengths, n_leaves, p, s, x, y):
    nb, ne, ed, ln = neighbors.copy(), node_edges.copy(), edges.copy(), lengths.copy()
    changed = np.empty(3, np.int64)
    code = _apply_spr(nb, ne, ed, ln, n_leaves, p, s, x, y, changed)
    if code:
        return np.uint64(0), code
    return _key(nb, n_leaves), 0


def neighbor_key(tree: Tree, move) -> int:
    """:func:`topology_key` of ``spr_neighbor(tree, move)``, computed without building the tree."""
    p, s, x, y = (int(v) for v in move)
    key, code = _neighbor_key(
        tree.neighbors, tree.node_edges, tree.edges, tree.lengths, tree.n_leaves, p, s, x, y
    )
    if code:
        raise ValueError(f"invalid SPR move (p={p}, s={s}, x={x}, y={y}): {_MOVE_ERRORS[code]}")
    return int(key)
