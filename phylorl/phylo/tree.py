"""Unrooted binary trees held as integer arrays.

A tree with ``n`` leaves has ``2n-2`` nodes and ``2n-3`` undirected edges. Leaves are nodes
``0..n-1`` in alignment order, internal nodes are ``n..2n-3``.

Arrays (all owned by the :class:`Tree`, mutated in place by SPR moves and branch optimisation):

``neighbors``  int32 ``[2n-2, 3]``: neighbours of each node; a leaf uses slot 0 only, the other
               slots hold ``-1``.
``node_edges`` int32 ``[2n-2, 3]``: id of the edge joining node ``v`` to ``neighbors[v, k]``;
               ``-1`` where ``neighbors`` is ``-1``.
``edges``      int32 ``[2n-3, 2]``: the two end nodes of each undirected edge (no order implied).
``lengths``    float64 ``[2n-3]``: branch length of each edge (expected substitutions per site).

Edge ids are stable under branch-length changes; an SPR move re-uses the ids of the edges it
rewires (see :mod:`phylorl.phylo.spr`), so a likelihood engine can tell what changed by comparing
``edges`` and ``lengths`` arrays.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def taxon_names(taxa) -> tuple[str, ...]:
    """Taxon names from an alignment-like object (its ``.taxa``) or a sequence of names. Raises ``ValueError``
    for duplicate or non-string names."""
    names = getattr(taxa, "taxa", taxa)
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise ValueError(f"expected an alignment or a sequence of taxon names, got {type(taxa).__name__}")
    names = tuple(names)
    if not all(isinstance(name, str) for name in names):
        raise ValueError("taxon names must be strings")
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate taxon names: {sorted(n for n, k in Counter(names).items() if k > 1)}")
    return names


@dataclass(eq=False)
class Tree:
    """An unrooted binary tree over named leaves (see module docstring for the array layout)."""

    neighbors: np.ndarray
    node_edges: np.ndarray
    edges: np.ndarray
    lengths: np.ndarray
    taxa: tuple[str, ...]

    @property
    def n_leaves(self) -> int:
        return len(self.taxa)

    @property
    def n_nodes(self) -> int:
        return 2 * len(self.taxa) - 2

    @property
    def n_edges(self) -> int:
        return 2 * len(self.taxa) - 3

    def copy(self) -> Tree:
        return Tree(
            self.neighbors.copy(), self.node_edges.copy(), self.edges.copy(), self.lengths.copy(), self.taxa
        )

    @classmethod
    def from_edges(cls, edges: np.ndarray, lengths: np.ndarray, taxa) -> Tree:
        """Build the neighbour tables from an edge list (``[2n-3, 2]`` node pairs)."""
        taxa = tuple(taxa)
        n = len(taxa)
        edges = np.ascontiguousarray(edges, dtype=np.int32)
        lengths = np.ascontiguousarray(lengths, dtype=np.float64)
        if n < 3:
            raise ValueError(f"a tree needs at least 3 leaves, got {n}")
        if edges.shape != (2 * n - 3, 2) or lengths.shape != (2 * n - 3,):
            raise ValueError(
                f"{n} leaves need {2 * n - 3} edges; got edges {edges.shape}, lengths {lengths.shape}"
            )
        neighbors = np.full((2 * n - 2, 3), -1, dtype=np.int32)
        node_edges = np.full((2 * n - 2, 3), -1, dtype=np.int32)
        fill = np.zeros(2 * n - 2, dtype=np.int64)
        for e, (u, v) in enumerate(edges):
            for a, b in ((u, v), (v, u)):
                if not 0 <= a < 2 * n - 2:
                    raise ValueError(f"edge {e} names node {a}, outside 0..{2 * n - 3}")
                if fill[a] == 3:
                    raise ValueError(f"node {a} has more than 3 neighbours")
                neighbors[a, fill[a]] = b
                node_edges[a, fill[a]] = e
                fill[a] += 1
        tree = cls(neighbors, node_edges, edges, lengths, taxa)
        tree.validate()
        return tree

    def edge_between(self, u: int, v: int) -> int:
        """Id of the edge joining ``u`` and ``v``; ``ValueError`` if they are not adjacent."""
        row = self.neighbors[u]
        for k in range(3):
            if row[k] == v:
                return int(self.node_edges[u, k])
        raise ValueError(f"nodes {u} and {v} are not adjacent")

    def preorder(self, root: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Nodes in preorder from ``root``, and each node's parent (``-1`` for the root). Iterative (no
        recursion limit); children are visited in neighbour-slot order. Returns ``order`` int64 ``[2n-2]`` and
        ``parent`` int64 ``[2n-2]`` indexed by node id."""
        neighbors = self.neighbors.tolist()
        parent = [-1] * self.n_nodes
        order = []
        stack = [root]
        while stack:
            v = stack.pop()
            order.append(v)
            for u in reversed(neighbors[v]):
                if u >= 0 and u != parent[v]:
                    parent[u] = v
                    stack.append(u)
        return np.asarray(order, dtype=np.int64), np.asarray(parent, dtype=np.int64)

    def validate(self) -> None:
        """Check every array invariant; raises ``ValueError`` naming the first broken one."""
        n = self.n_leaves
        if self.neighbors.shape != (2 * n - 2, 3) or self.node_edges.shape != (2 * n - 2, 3):
            raise ValueError("neighbour tables have the wrong shape")
        if self.edges.shape != (2 * n - 3, 2) or self.lengths.shape != (2 * n - 3,):
            raise ValueError("edge arrays have the wrong shape")
        for v in range(2 * n - 2):
            want = 1 if v < n else 3
            have = int((self.neighbors[v] >= 0).sum())
            if have != want or (self.neighbors[v, :want] < 0).any():
                raise ValueError(f"node {v} has {have} neighbours, expected {want}")
            for k in range(want):
                e, u = self.node_edges[v, k], self.neighbors[v, k]
                if e < 0 or set(self.edges[e].tolist()) != {v, int(u)}:
                    raise ValueError(f"node {v}: edge id {e} does not join it to {u}")
        if not np.all(np.isfinite(self.lengths)) or (self.lengths < 0).any():
            raise ValueError("branch lengths must be finite and non-negative")
        # connected: a tree with 2n-3 edges on 2n-2 nodes is connected iff acyclic
        seen = np.zeros(2 * n - 2, dtype=bool)
        stack = [0]
        seen[0] = True
        while stack:
            v = stack.pop()
            for u in self.neighbors[v]:
                if u >= 0 and not seen[u]:
                    seen[u] = True
                    stack.append(int(u))
        if not seen.all():
            raise ValueError("the edges do not form a connected tree")


# ------------------------------------------------- edge traversals of branch optimisation (iterative)


def edges_near(tree: Tree, nodes, depth: int = 1) -> np.ndarray:
    """Ids of the edges within ``depth`` edges of any of ``nodes`` (``depth=1``: incident edges)."""
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    frontier = {int(v) for v in nodes}
    seen_nodes = set(frontier)
    found: set[int] = set()
    for _ in range(depth):
        nxt = set()
        for v in frontier:
            for k in range(3):
                u = int(tree.neighbors[v, k])
                if u < 0:
                    continue
                found.add(int(tree.node_edges[v, k]))
                if u not in seen_nodes:
                    seen_nodes.add(u)
                    nxt.add(u)
        frontier = nxt
    return np.fromiter(sorted(found), dtype=np.int64, count=len(found))


def edge_walk(tree: Tree, edge_ids=None, start: int | None = None) -> np.ndarray:
    """Order edges depth-first (pre-order from ``start``), restricted to ``edge_ids`` if given. Within a
    connected set each edge is visited right after an edge it shares a node with, or after finishing a subtree
    that hangs next to it, so a branch optimiser recomputes about two partials per edge and pass. With
    ``edge_ids=None`` all edges are visited."""
    wanted = np.zeros(tree.n_edges, dtype=bool)
    wanted[slice(None) if edge_ids is None else np.asarray(edge_ids, dtype=np.int64)] = True
    visited = np.zeros(tree.n_edges, dtype=bool)
    neighbors, node_edges, edges = tree.neighbors, tree.node_edges, tree.edges
    order: list[int] = []
    seeds = [int(start)] if start is not None and wanted[start] else []
    seeds += np.flatnonzero(wanted).tolist()
    for seed in seeds:
        if visited[seed]:
            continue
        u, v = int(edges[seed, 0]), int(edges[seed, 1])
        stack = [(seed, v, u), (seed, u, v)]  # (edge, node to explore, node it was reached from)
        visited[seed] = True
        order.append(seed)
        while stack:
            e, node, came_from = stack.pop()
            if not visited[e]:
                visited[e] = True
                order.append(e)
            for k in range(2, -1, -1):
                child = int(neighbors[node, k])
                f = int(node_edges[node, k])
                if child < 0 or child == came_from or not wanted[f] or visited[f]:
                    continue
                stack.append((f, child, node))
    return np.asarray(order, dtype=np.int64)
