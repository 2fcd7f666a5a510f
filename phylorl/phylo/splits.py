"""Splits (bipartitions) of unrooted trees, Robinson–Foulds distance and topology hashes.

A split is the bipartition of the leaves made by cutting one internal edge. It is held as a Python-int bitmask
over leaf ids (bit ``i`` is leaf ``i``, i.e. ``tree.taxa[i]``), normalised so that leaf 0 is never in the
mask: each split has exactly one representation. Trivial splits (one leaf against the rest) are left out, so a
binary tree over ``n`` leaves has ``n - 3`` splits and its split set identifies its topology.
"""

from __future__ import annotations

import hashlib

from phylorl.phylo.tree import Tree


def _subtree_masks(tree: Tree, leaf_bits: list[int]) -> tuple[list[int], list[int], list[int]]:
    """Rooted at leaf 0: preorder, parents, and for each node the mask of the leaves below it. Leaf ``i`` is
    written as bit ``leaf_bits[i]``; leaf 0 is the root, so it is never below any node and every mask is
    already normalised."""
    order, parent = tree.preorder(root=0)
    order, parent = order.tolist(), parent.tolist()
    masks = [0] * tree.n_nodes
    for leaf in range(1, tree.n_leaves):
        masks[leaf] = 1 << leaf_bits[leaf]
    for v in order[:0:-1]:
        masks[parent[v]] |= masks[v]
    return order, parent, masks


def _split_masks(tree: Tree, leaf_bits: list[int]) -> frozenset[int]:
    """Non-trivial splits with leaf ``i`` written as bit ``leaf_bits[i]``. The internal node next to leaf 0
    (``order[1]``) holds every other leaf, a trivial split."""
    order, _, masks = _subtree_masks(tree, leaf_bits)
    return frozenset(masks[v] for v in range(tree.n_leaves, tree.n_nodes) if v != order[1])


def splits(tree: Tree) -> frozenset[int]:
    """The ``n - 3`` non-trivial splits of ``tree`` as bitmasks over leaf ids (leaf 0 never set)."""
    return _split_masks(tree, list(range(tree.n_leaves)))


def split_lengths(tree: Tree) -> dict[int, float]:
    """Branch length of every edge keyed by its split (trivial splits included, leaf 0 never set). Two trees
    over the same leaf ids have the same topology and branch lengths exactly when these dicts are equal,
    whatever their node numbering."""
    return dict(zip(edge_splits(tree), tree.lengths.tolist()))


def edge_splits(tree: Tree) -> list[int]:
    """The split of every edge, indexed by edge id (leaf 0 never set; a leaf edge gives its
    trivial split, so ``bin(mask).count("1")`` is 1 or ``n - 1`` there)."""
    order, parent, masks = _subtree_masks(tree, list(range(tree.n_leaves)))
    out = [0] * tree.n_edges
    for v in order[1:]:
        out[tree.edge_between(v, parent[v])] = masks[v]
    return out


def rf_distance(a: Tree, b: Tree) -> int:
    """Robinson–Foulds distance: the number of splits in one tree but not the other. The trees must have the
    same taxon set; if the leaf orders differ, ``b``'s leaves are mapped onto ``a``'s by name. For binary
    trees the result is even, at most ``2(n - 3)``."""
    if a.taxa == b.taxa:
        return len(splits(a) ^ splits(b))
    if set(a.taxa) != set(b.taxa) or len(a.taxa) != len(b.taxa):
        only_a = sorted(set(a.taxa) - set(b.taxa))
        only_b = sorted(set(b.taxa) - set(a.taxa))
        raise ValueError(f"trees have different taxa: only in first {only_a}, only in second {only_b}")
    index = {name: i for i, name in enumerate(a.taxa)}
    bits = [index[name] for name in b.taxa]
    # b's masks are in a's leaf ids but normalised against b's leaf 0; renormalise against a's.
    full = (1 << a.n_leaves) - 1
    b_splits = {m ^ full if m & 1 else m for m in _split_masks(b, bits)}
    return len(splits(a) ^ b_splits)


def topology_hash(tree: Tree) -> str:
    """Stable hex digest (BLAKE2b, 16 bytes) of the unrooted topology over leaf ids. Equal for two trees
    exactly when their split sets (and leaf counts) are equal; branch lengths and taxon names do not enter it,
    so compare hashes only between trees whose leaf ids mean the same taxa."""
    width = (tree.n_leaves + 7) // 8
    digest = hashlib.blake2b(tree.n_leaves.to_bytes(4, "little"), digest_size=16)
    for mask in sorted(splits(tree)):
        digest.update(mask.to_bytes(width, "little"))
    return digest.hexdigest()
