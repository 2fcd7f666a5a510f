"""Subtree prune-and-regraft (SPR) moves on array trees.

A move is four node ids ``(p, s, x, y)``:

* ``p`` is an internal node and ``s`` one of its neighbours; the subtree on ``s``'s side of the
  edge ``(p, s)`` (the *s-subtree*) is pruned together with ``p``;
* ``p``'s two other neighbours ``a`` and ``b`` are joined into one edge (lengths summed);
* ``p`` is re-inserted on ``(x, y)``, an edge of the current tree outside the s-subtree and not
  incident to ``p``, whose length is split in half. ``x`` is the endpoint nearer to ``p``.

The *distance* of a move is ``d(p, x)``, the number of edges on the path from ``p`` to ``x`` in
the tree before the move (``>= 1``). Moves with distance 1 regraft onto an edge adjacent to the
joined edge: they are NNI moves, and each NNI topology arises from four of them (the two ends
of the NNI edge as ``p``, each with two choices of ``s``). With ``dedupe=True`` only the canonical
one is kept: ``p < x`` and ``s`` is the smaller node id of ``p``'s two neighbours other than
``x``. Every move of distance >= 2 gives a topology no other move gives, so the deduplicated
moves of a tree with ``n`` leaves number exactly ``2(n-3)(2n-7)``, one per SPR neighbour.

Edge ids are re-used (see :func:`apply_spr`) so that a likelihood engine can tell which
partials a move invalidates.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from phylorl.phylo.tree import Tree


@njit(cache=True, nogil=True)
def enumerate_moves_kernel(neighbors, n_leaves, radius, dedupe):
    """:func:`enumerate_moves` on a bare neighbour table (compiled; for code that holds arrays, not a
    Tree)."""
    n_nodes = neighbors.shape[0]
    out = np.empty((move_capacity(n_nodes, n_leaves), 4), np.int64)
    count = enumerate_into(neighbors, n_leaves, radius, dedupe, out)
    return out[:count].copy()


@njit(cache=True, nogil=True)
def move_capacity(n_nodes, n_leaves):
    """An upper bound on the number of SPR moves of a tree (compiled)."""
    return max(1, 3 * (n_nodes - n_leaves) * (2 * n_leaves - 3))


@njit(cache=True, nogil=True)
def walk_space(distance, n_nodes, rows, width):
    """Scratch of :func:`walk_sides` for trees of up to ``n_nodes`` nodes: ``(stack, depth, path, parent,
    distance), start, size, slot_length, regrafts, columns``, with ``rows`` rows of regrafts and of ``width``
    columns; ``distance``: column 0's value at each depth. A side's ``start`` and ``size`` are written by its
    walk before anything reads them."""
    return (
        (
            np.empty(n_nodes, np.int64),
            np.empty(n_nodes, np.int64),
            np.empty(n_nodes),
            np.empty(n_nodes, np.int64),
            distance,
        ),
        np.empty((n_nodes, 3), np.int64),
        np.empty((n_nodes, 3), np.int64),
        np.zeros((n_nodes, 3)),
        np.empty(rows, np.int32),
        np.empty((rows, width), np.float32),
    )


@njit(cache=True, nogil=True)
def _one_node_space(n_nodes, radius):
    """:func:`walk_space` for the walks of one node's sides within ``radius``, column 0 the distance."""
    depths = n_nodes if radius < 0 else min(n_nodes, radius)
    return walk_space(np.arange(depths + 1).astype(np.float32), n_nodes, 2 * n_nodes, 1)


@njit(cache=True, nogil=True, inline="always")
def skipped_rows(neighbors, p, k, side, dedupe):
    """Rows at the start of side ``side``'s walk that the moves pruning ``neighbors[p, k]`` leave out: with
    ``dedupe``, the walk's first node's two regrafts (distance 1, NNI moves) unless they are the canonical
    ones of their topologies (``p`` below that node and ``neighbors[p, k]`` below ``p``'s third neighbour)."""
    return (
        2 if dedupe and not (p < neighbors[p, side] and neighbors[p, k] < neighbors[p, 3 - k - side]) else 0
    )


@njit(cache=True, nogil=True)
def enumerate_into(neighbors, n_leaves, radius, dedupe, out):
    """Write the moves of :func:`enumerate_moves` into ``out`` (compiled) and return their number."""
    if radius == 0:
        return 0
    space = _one_node_space(neighbors.shape[0], radius)
    count = 0
    for p in range(n_leaves, neighbors.shape[0]):
        _walk(neighbors, n_leaves, p, 7, radius, space)
        for k in range(3):
            count = _side_moves(neighbors, n_leaves, p, k, 1, dedupe, space, out, count)
    return count


@njit(cache=True, nogil=True)
def _walk(neighbors, n_leaves, p, sides, radius, space):
    walk_sides(neighbors, n_leaves, radius, p, p + 1, sides, 0, 1.0, False, space, space[4], space[5], 0)


@njit(cache=True, nogil=True)
def _side_moves(neighbors, n_leaves, p, k, radius_min, dedupe, space, out, count):
    """The moves pruning ``neighbors[p, k]`` from :func:`_walk`'s walks of ``p``'s other sides, appended."""
    _, start, size, _, regrafts, columns = space
    s = neighbors[p, k]
    for side in range(3):
        if side == k or neighbors[p, side] < n_leaves:
            continue
        for i in range(
            start[p, side] + skipped_rows(neighbors, p, k, side, dedupe), start[p, side] + size[p, side]
        ):
            if radius_min > 1 and columns[i, 0] < radius_min:
                continue
            x = regrafts[i] // 3
            out[count, 0], out[count, 1], out[count, 2], out[count, 3] = (
                p,
                s,
                x,
                neighbors[x, regrafts[i] % 3],
            )
            count += 1
    return count


@njit(cache=True, nogil=True, inline="always")
def walk_sides(
    neighbors, n_leaves, radius, first_p, last_p, sides, base, tree_length, rich, space, regrafts, columns, m
):
    """The regraft walk every move enumeration uses (compiled). Walks sides ``sides`` (a bit mask) of each
    node ``p`` in ``[first_p, last_p)``: the regrafts onto side ``side`` of ``p`` (the subtree on
    ``neighbors[p, side]``'s side), depth first away from ``p``, children in slot order, down to distance
    ``radius`` (``< 0``: no bound). Each regraft ``(x, y)`` (``x`` nearer ``p``) writes its slot row ``3x +
    j`` (``base`` added) into ``regrafts`` and into ``columns``: column 0 ``distance[d(p, x)]``, and with
    ``rich`` column 1 the path length from ``p`` to the middle of ``(x, y)`` over ``tree_length``
    (``slot_length``: each slot's branch length), from row ``m`` on; that side's first row into ``start[p,
    side]`` and its length into ``size[p, side]``; ``space``: :func:`walk_space` (the scratch, ``start``,
    ``size`` and ``slot_length`` are its). A whole tree is walked in one call: numba counts references to
    every array passed at each call. Returns the row after the last."""
    (stack, depth, path, parent, distance), start, size, slot_length, _, _ = space
    for p in range(first_p, last_p):
        for side in range(3):
            if not (sides >> side) & 1:
                continue
            start[p, side] = m
            # depth first, children in slot order: a node's first inner child is walked next straight from
            # registers and only its other children wait on the stack (popping every node from memory made
            # each node wait on loads that depended on the last one's); a node's slots and branch lengths are
            # read once, since the stores below could alias them for all the compiler knows
            x, up, here, d, top = neighbors[p, side], p, slot_length[p, side], 1, 0
            while x >= n_leaves:
                column = distance[d]
                ys = (neighbors[x, 0], neighbors[x, 1], neighbors[x, 2])
                ls = (slot_length[x, 0], slot_length[x, 1], slot_length[x, 2])
                for j in range(3):
                    if ys[j] != up:
                        regrafts[m] = base + 3 * x + j
                        columns[m, 0] = column
                        if rich:
                            columns[m, 1] = (here + 0.5 * ls[j]) / tree_length
                        m += 1
                follow, length = -1, 0.0
                if radius < 0 or d < radius:
                    for j in range(2, -1, -1):
                        y = ys[j]
                        if y != up and y >= n_leaves:
                            if follow >= 0:  # a later slot's child waits
                                parent[follow], path[follow] = x, length
                                stack[top], depth[top] = follow, d + 1
                                top += 1
                            follow, length = y, here + ls[j]
                if follow >= 0:
                    x, up, here, d = follow, x, length, d + 1
                elif top > 0:
                    top -= 1
                    x, d = stack[top], depth[top]
                    up, here = parent[x], path[x]
                else:
                    x = -1
            size[p, side] = m - start[p, side]
    return m


@njit(cache=True, nogil=True)
def subtree_moves(neighbors, n_leaves, p, s, radius_min, radius, dedupe):
    """The moves pruning ``s`` from ``p`` whose distance ``d(p, x)`` lies in ``[radius_min, radius]``
    (``radius < 0``: no upper bound), in :func:`enumerate_moves`'s order (compiled), int64 ``[A, 4]``."""
    n_nodes = neighbors.shape[0]
    out = np.empty((max(1, 2 * n_nodes), 4), np.int64)
    k = slot_of(neighbors, p, s)
    if k < 0 or p < n_leaves or radius == 0:
        return out[:0].copy()
    space = _one_node_space(n_nodes, radius)
    _walk(neighbors, n_leaves, p, 7 & ~(1 << k), radius, space)
    count = _side_moves(neighbors, n_leaves, p, k, radius_min, dedupe, space, out, 0)
    return out[:count].copy()


def enumerate_moves(tree: Tree, radius: int | None = None, dedupe: bool = True) -> np.ndarray:
    """All SPR moves of ``tree`` as int64 ``[A, 4]`` rows ``(p, s, x, y)``; no-ops excluded.

    ``radius``: keep moves whose distance ``d(p, x)`` is at most ``radius`` (``None``: all).
    ``dedupe``: keep one canonical move per resulting topology (see module docstring); then
    ``A = 2(n-3)(2n-7)`` when ``radius`` is ``None``.

    Order is deterministic: by ``p``, then ``s``'s slot in ``p``'s row, then the regraft side
    (slot order), then a depth-first walk away from ``p``.
    """
    if radius is None:
        radius = -1
    elif isinstance(radius, bool) or not isinstance(radius, (int, np.integer)) or radius < 0:
        raise ValueError(f"radius must be None or a non-negative int, got {radius!r}")
    return enumerate_moves_kernel(tree.neighbors, tree.n_leaves, int(radius), bool(dedupe))


@njit(cache=True, nogil=True)
def slot_of(neighbors, v, u):
    """The slot ``k`` with ``neighbors[v, k] == u`` (compiled), or -1 when ``u`` is not a neighbour."""
    for k in range(3):
        if neighbors[v, k] == u:
            return k
    return -1


@njit(cache=True, nogil=True)
def breadth_first(neighbors, root, above):
    """``(order, parent)``: the nodes reached from ``root`` breadth first (children in slot order) and each
    one's parent (compiled); ``above`` (a neighbour of ``root``, or -1) is ``root``'s parent and is not
    entered."""
    order = np.empty(neighbors.shape[0], np.int64)
    parent = np.full(neighbors.shape[0], -1, np.int64)
    return order[: breadth_first_into(neighbors, root, above, order, parent)], parent


@njit(cache=True, nogil=True)
def breadth_first_into(neighbors, root, above, order, parent):
    """:func:`breadth_first` into ``order`` and ``parent`` (the rows of nodes reached); returns their
    number."""
    parent[root] = above
    order[0] = root
    head, tail = 0, 1
    while head < tail:
        v = order[head]
        head += 1
        for k in range(3):
            u = neighbors[v, k]
            if u >= 0 and u != parent[v]:
                parent[u] = v
                order[tail] = u
                tail += 1
    return tail


@njit(cache=True, nogil=True)
def move_metadata_kernel(neighbors, node_edges, lengths, moves):
    """:func:`move_metadata` on bare arrays (compiled): returns (metadata, index of the first bad move or
    -1)."""
    n_nodes = neighbors.shape[0]
    out = np.empty((moves.shape[0], 3), np.float32)
    dist = np.empty(n_nodes, np.int64)
    order = np.empty(n_nodes, np.int64)
    parent = np.empty(n_nodes, np.int64)
    last_p = -1
    for i in range(moves.shape[0]):
        p, s, x, y = moves[i, 0], moves[i, 1], moves[i, 2], moves[i, 3]
        if min(p, s, x, y) < 0 or max(p, s, x, y) >= n_nodes:
            return out, i
        ks = slot_of(neighbors, p, s)
        ky = slot_of(neighbors, x, y)
        if ks < 0 or ky < 0:
            return out, i
        if p != last_p:
            dist[p] = 0
            for v in order[1 : breadth_first_into(neighbors, p, -1, order, parent)]:
                dist[v] = dist[parent[v]] + 1
            last_p = p
        out[i, 0] = lengths[node_edges[p, ks]]
        out[i, 1] = lengths[node_edges[x, ky]]
        out[i, 2] = dist[x] + 1
    return out, -1


def move_metadata(tree: Tree, moves: np.ndarray) -> np.ndarray:
    """Per-move features, float32 ``[A, 3]``.

    Columns: length of the pruned edge ``(p, s)``; length of the regraft edge ``(x, y)``;
    ``d(p, x) + 1``, the number of edges on the path from ``p`` through ``x`` to ``y`` in the tree
    before the move (the path to ``x`` plus the regraft edge itself; 2 for an NNI move).
    """
    moves = np.ascontiguousarray(moves, dtype=np.int64)
    if moves.ndim != 2 or moves.shape[1] != 4:
        raise ValueError(f"moves must have shape [A, 4], got {moves.shape}")
    out, bad = move_metadata_kernel(tree.neighbors, tree.node_edges, tree.lengths, moves)
    if bad >= 0:
        raise ValueError(f"move {bad} {tuple(moves[bad].tolist())}: (p, s) or (x, y) is not an edge")
    return out


_MOVE_ERRORS = {
    1: "a node id is out of range",
    2: "p is a leaf (it must be an internal node)",
    3: "s is not a neighbour of p",
    4: "the regraft edge (x, y) is incident to p",
    5: "x and y are not adjacent",
    6: "x must be the endpoint of (x, y) nearer to p",
    7: "the regraft edge (x, y) lies in the pruned s-subtree",
}


@njit(cache=True, nogil=True)
def _apply_spr(neighbors, node_edges, edges, lengths, n_leaves, p, s, x, y, changed):
    """Validate then apply the move in place; returns 0 or an error code (tree untouched)."""
    n_nodes = neighbors.shape[0]
    if min(p, s, x, y) < 0 or max(p, s, x, y) >= n_nodes:
        return 1
    if p < n_leaves:
        return 2
    ks = slot_of(neighbors, p, s)
    if ks < 0:
        return 3
    if x == p or y == p:
        return 4
    kx = slot_of(neighbors, x, y)
    if kx < 0:
        return 5
    # walk away from p, outside the s-subtree, until y is reached
    parent = np.full(n_nodes, -2, np.int64)
    stack = np.empty(n_nodes, np.int64)
    parent[p] = -1
    top = 0
    for k in range(3):
        if k != ks:
            u = neighbors[p, k]
            parent[u] = p
            stack[top] = u
            top += 1
    found = False
    while top > 0 and not found:
        top -= 1
        v = stack[top]
        for k in range(3):
            u = neighbors[v, k]
            if u >= 0 and parent[u] == -2:
                parent[u] = v
                stack[top] = u
                top += 1
                if u == y:
                    found = True
    if parent[y] == -2:
        return 7
    if parent[y] != x:
        return 6

    ia = (ks + 1) % 3
    ib = (ks + 2) % 3
    if ia > ib:
        ia, ib = ib, ia
    a, b, e_pa, e_pb = neighbors[p, ia], neighbors[p, ib], node_edges[p, ia], node_edges[p, ib]
    e_xy = node_edges[x, kx]
    ky = slot_of(neighbors, y, x)
    joined = lengths[e_pa] + lengths[e_pb]
    half = 0.5 * lengths[e_xy]
    # join a and b through e_pa
    k = slot_of(neighbors, a, p)
    neighbors[a, k] = b
    node_edges[a, k] = e_pa
    k = slot_of(neighbors, b, p)
    neighbors[b, k] = a
    node_edges[b, k] = e_pa
    edges[e_pa, 0], edges[e_pa, 1] = a, b
    lengths[e_pa] = joined
    # split (x, y): x - p through e_xy, p - y through e_pb
    neighbors[x, kx] = p
    neighbors[y, ky] = p
    node_edges[y, ky] = e_pb
    neighbors[p, ia] = x
    node_edges[p, ia] = e_xy
    neighbors[p, ib] = y
    edges[e_xy, 0], edges[e_xy, 1], edges[e_pb, 0], edges[e_pb, 1] = x, p, p, y
    lengths[e_xy], lengths[e_pb] = half, half
    changed[0], changed[1], changed[2] = e_pa, e_pb, e_xy
    return 0


def apply_spr(tree: Tree, move) -> np.ndarray:
    """Apply the SPR move ``(p, s, x, y)`` to ``tree`` in place; returns the changed edge ids.

    With ``a``, ``b`` the neighbours of ``p`` other than ``s`` (``a`` in the lower slot of
    ``p``'s row), edge ids are re-used as follows:

    * ``e_pa`` (was ``(p, a)``) becomes the joined edge ``(a, b)``, length ``l(p,a) + l(p,b)``;
    * ``e_pb`` (was ``(p, b)``) becomes ``(p, y)``, length ``l(x,y) / 2``;
    * ``e_xy`` (was ``(x, y)``) becomes ``(x, p)``, length ``l(x,y) / 2``;
    * ``(p, s)`` and every other edge keep their id, ends and length.

    In ``p``'s row, ``x`` takes ``a``'s slot and ``y`` takes ``b``'s; ``s`` keeps its slot.
    Returns int64 ``[e_pa, e_pb, e_xy]``. Raises ``ValueError`` (tree untouched) for an invalid
    move. Total tree length is unchanged.
    """
    p, s, x, y = (int(v) for v in move)
    changed = np.empty(3, np.int64)
    code = _apply_spr(
        tree.neighbors, tree.node_edges, tree.edges, tree.lengths, tree.n_leaves, p, s, x, y, changed
    )
    if code:
        raise ValueError(f"invalid SPR move (p={p}, s={s}, x={x}, y={y}): {_MOVE_ERRORS[code]}")
    return changed


def perturb(tree: Tree, moves: int, radius: int, rng: np.random.Generator) -> list[int]:
    """Apply ``moves`` random SPR moves of distance at most ``radius`` to ``tree`` (in place), each drawn
    uniformly from the deduplicated moves of the tree at that point; returns the nodes whose neighbours
    changed."""
    touched: list[int] = []
    for _ in range(moves):
        candidates = enumerate_moves(tree, radius=radius)
        p, s, x, y = (int(v) for v in candidates[rng.integers(len(candidates))])
        touched += [p, x, y, *(int(v) for v in tree.neighbors[p] if v != s)]
        apply_spr(tree, (p, s, x, y))
    return sorted(set(touched))


def spr_neighbor(tree: Tree, move) -> Tree:
    """A copy of ``tree`` with the move applied (``tree`` itself is unchanged)."""
    result = tree.copy()
    apply_spr(result, move)
    return result
