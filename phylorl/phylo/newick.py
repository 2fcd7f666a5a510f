"""Newick in and out for array trees.

Reading goes through DendroPy (underscores preserved, so ``a_b`` stays ``a_b``). The Newick tree
is treated as unrooted: a bifurcating root is removed and its two edges merged (lengths summed),
nodes with one child are suppressed the same way, internal node labels (e.g. supports) are
ignored. Leaves are numbered in the order of the given taxa (an alignment's row order).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import dendropy

from phylorl.phylo.tree import Tree, taxon_names

DEFAULT_BRANCH_LENGTH = 0.1  # length given to a branch whose length the Newick text leaves out
POLYTOMY_BRANCH_LENGTH = 1e-6  # length of each branch added when resolving a polytomy

_NEEDS_QUOTES = re.compile(r"[\s()\[\]':;,]")


class TreeError(ValueError):
    """A Newick tree that cannot be read as an unrooted binary tree over the given taxa."""


def _leaf_names(node, limit: int = 3) -> str:
    names = [leaf.label for leaf in node.leaf_iter() if leaf.label is not None]
    shown = ", ".join(repr(name) for name in names[:limit])
    return shown + (", ..." if len(names) > limit else "")


def _load(source) -> dendropy.Tree:
    if isinstance(source, str) and source.lstrip().startswith("("):
        text = source
    else:
        path = Path(source)
        if not path.is_file():
            raise TreeError(f"no Newick file at {str(path)!r} (and the text does not start with '(')")
        text = path.read_text()
    # node names stay plain labels (leaf names are checked here), underscores stay underscores
    flags = dict(preserve_underscores=True, suppress_leaf_node_taxa=True, suppress_internal_node_taxa=True)
    try:
        tree = dendropy.Tree.get(data=text, schema="newick", rooting="force-unrooted", **flags)
    except Exception as err:  # dendropy raises several parser error types
        raise TreeError(f"cannot parse Newick: {err}") from err
    if tree is None:
        raise TreeError("the Newick text holds no tree")
    return tree


def read_newick(source, taxa, resolve_polytomies: bool = False) -> Tree:
    """Read an unrooted binary tree from a Newick string or file. ``source``: Newick text (starts with ``(``
    after whitespace) or a path to a Newick file (its first tree is read). ``taxa``: an alignment (its
    ``.taxa``) or a sequence of names, giving leaf ids. Missing branch lengths become
    :data:`DEFAULT_BRANCH_LENGTH` (where edges merge, the known lengths are summed and the default is used
    only if none is known). Polytomies raise :class:`TreeError` unless ``resolve_polytomies`` is true, in
    which case each is resolved deterministically into a caterpillar with new branches of
    :data:`POLYTOMY_BRANCH_LENGTH`. Raises :class:`TreeError` for names that do not match the taxa, duplicate
    leaf names, negative lengths and unparsable text."""
    names = taxon_names(taxa)
    nodes = list(_load(source).preorder_node_iter())
    adjacency = _adjacency(nodes)
    index = {name: i for i, name in enumerate(names)}
    tree_names = [node.label for node in nodes if node.is_leaf()]
    if not all(tree_names):
        raise TreeError("the tree has a leaf without a name")
    _check_names(tree_names, names)
    leaf_of = {v: index[node.label] for v, node in enumerate(nodes) if node.is_leaf()}

    _make_binary(adjacency, set(leaf_of))
    for v in range(len(nodes)):
        if v not in leaf_of and len(adjacency[v]) > 3:
            if not resolve_polytomies:
                raise TreeError(
                    f"the tree has a polytomy (a node with {len(adjacency[v])} neighbours, "
                    f"over leaves {_leaf_names(nodes[v])}); pass resolve_polytomies=True to resolve "
                    f"polytomies with branches of length {POLYTOMY_BRANCH_LENGTH:g}"
                )
            _resolve(adjacency, v)

    # leaves take their alignment index; the remaining nodes n, n+1, ... in preorder
    internal = [v for v in range(len(adjacency)) if v not in leaf_of and adjacency[v]]
    node_id = leaf_of | {v: len(names) + k for k, v in enumerate(internal)}
    edges, lengths = [], []
    for v in sorted(node_id):
        for u, length in adjacency[v].items():
            if v < u:
                edges.append((node_id[v], node_id[u]))
                lengths.append(DEFAULT_BRANCH_LENGTH if length is None else length)
    return Tree.from_edges(edges, lengths, names)


def _adjacency(nodes) -> list[dict[int, float | None]]:
    """Undirected graph of DendroPy nodes (preorder list): ``adjacency[v][u]`` = length or None."""
    ids = {id(node): i for i, node in enumerate(nodes)}
    adjacency: list[dict[int, float | None]] = [{} for _ in nodes]
    for node in nodes[1:]:
        v, u = ids[id(node)], ids[id(node.parent_node)]
        length = node.edge.length
        if length is not None:
            length = float(length)
            if length < 0 or not math.isfinite(length):
                raise TreeError(f"branch above {_leaf_names(node)} has length {length} (must be >= 0)")
        adjacency[u][v] = adjacency[v][u] = length
    return adjacency


def _make_binary(adjacency: list[dict], leaves: set[int]) -> None:
    """Drop unnamed degree-1 nodes (a root with one child) with their edge, then suppress every
    degree-2 node (a bifurcating root, a node with one child), merging its two edges."""
    dangling = [v for v in range(len(adjacency)) if v not in leaves and len(adjacency[v]) == 1]
    while dangling:
        v = dangling.pop()
        (u,) = adjacency[v]
        del adjacency[u][v]
        adjacency[v].clear()
        if u not in leaves and len(adjacency[u]) == 1:
            dangling.append(u)
    for v in range(len(adjacency)):
        if v in leaves or len(adjacency[v]) != 2:
            continue
        (u, lu), (w, lw) = adjacency[v].items()
        merged = None if lu is None and lw is None else (lu or 0.0) + (lw or 0.0)
        del adjacency[u][v], adjacency[w][v]
        adjacency[u][w] = adjacency[w][u] = merged
        adjacency[v].clear()


def _check_names(tree_names: list[str], names: tuple[str, ...]) -> None:
    duplicates = sorted(name for name, count in Counter(tree_names).items() if count > 1)
    if duplicates:
        raise TreeError(f"duplicate leaf names in the tree: {duplicates}")
    missing_from_alignment = sorted(set(tree_names) - set(names))
    missing_from_tree = sorted(set(names) - set(tree_names))
    if missing_from_alignment or missing_from_tree:
        raise TreeError(
            "tree and alignment taxa differ: "
            f"in the tree but not the alignment {missing_from_alignment}; "
            f"in the alignment but not the tree {missing_from_tree}"
        )
    if len(names) < 3:
        raise TreeError(f"a tree needs at least 3 leaves, got {len(names)}")


def _resolve(adjacency: list[dict], v: int) -> None:
    """Split node ``v`` (degree > 3) into a caterpillar of degree-3 nodes, in neighbour order."""
    while len(adjacency[v]) > 3:
        w = len(adjacency)
        adjacency.append({})
        *_, (u1, l1), (u2, l2) = adjacency[v].items()
        for u, length in ((u1, l1), (u2, l2)):
            del adjacency[v][u], adjacency[u][v]
            adjacency[w][u] = adjacency[u][w] = length
        adjacency[v][w] = adjacency[w][v] = POLYTOMY_BRANCH_LENGTH


def _quote(name: str) -> str:
    if name and not _NEEDS_QUOTES.search(name):
        return name
    return "'" + name.replace("'", "''") + "'"


def write_newick(tree: Tree) -> str:
    """Newick text of ``tree``: unrooted (a trifurcation at the node next to leaf 0). Names are quoted when
    they hold whitespace or Newick punctuation (underscores are written as they are); lengths use ``%.10g``;
    the text ends with ``;``."""
    root = int(tree.neighbors[0, 0])
    order, parent = tree.preorder(root)
    parent = parent.tolist()
    neighbors = tree.neighbors.tolist()
    node_edges = tree.node_edges.tolist()
    lengths = tree.lengths.tolist()
    n = tree.n_leaves
    text: list[str] = [""] * tree.n_nodes
    for v in order[::-1].tolist():
        if v < n:
            label = _quote(tree.taxa[v])
        else:
            kids = [text[u] for u in neighbors[v] if u >= 0 and u != parent[v]]
            label = "(" + ",".join(kids) + ")"
        if v == root:
            return label + ";"
        k = neighbors[v].index(parent[v])
        text[v] = f"{label}:{lengths[node_edges[v][k]]:.10g}"
    raise AssertionError("unreachable: the root comes first in preorder")
