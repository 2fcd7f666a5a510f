"""Edge traversals used by branch optimisation (iterative, no recursion limits)."""

from __future__ import annotations

import numpy as np

from .tree import Tree


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
