"""Every move of a stored state with its features, in the compact form the learner's batch carries (compiled).

:func:`all_moves` writes every move of a next state in the compact form of
:class:`phylorl.nets.compact_actions.CompactActions` (slot tables; each side of each inner node walked once,
its regraft slots and own columns; blocks of moves that share a pruned slot and a walk; a parsimony row per
move), and :func:`expand_moves` writes them out on the host; :func:`taken_move` finds one move of a state,
with its features, walking only the block of moves that holds it (the taken row a record stores). Both walk
the regrafts with :func:`phylorl.phylo.spr.walk_sides`, the walk of every move enumeration, so they give the
moves of :func:`phylorl.phylo.spr.enumerate_moves` in its order, with the feature values of
:mod:`phylorl.records.features`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from phylorl.phylo.spr import skipped_rows, walk_sides, walk_space

from .features import slot_columns, slot_row, slot_sums, slot_tables, tree_length
from .parsimony import parsimony_one, parsimony_table, stored_parsimony_table
from .reader import FLOAT32, read_floats

UNREAD_CHANGES = -2
"""What :func:`all_moves` returns when a state's stored parsimony changes cannot be read."""

RICH_LAYOUT = (0, 6, 1, 13, 14, 2, 7, 3, 8, 4, 10, 11, 12, 5, 9)
"""Where each of the 15 rich move columns (:mod:`phylorl.records.features`) comes from in
``cat(pruned[6], regraft[4], shared[3], own[2])``: the layout :func:`all_moves` writes, the ``columns`` of its
:class:`phylorl.nets.compact_actions.CompactActions`."""
BASIC_LAYOUT = (0, 1, 2)
"""The 3 basic move columns from ``cat(pruned[1], regraft[1], own[1])``: pruned and regraft edge lengths,
``d(p, x) + 1``."""


@njit(cache=True, nogil=True)
def stored_size(stored):
    """How many parsimony changes a state stores (``stored``: ``(buf, array header)``; 0 when not one
    axis)."""
    header = stored[1]
    return header[4] if header[3] == 1 else 0


@njit(cache=True, nogil=True)
def read_changes(stored):
    """``(ok, changes)``: the stored parsimony changes (``(buf, array header)``) written out (float32, as
    stored)."""
    changes = np.empty(stored_size(stored), np.float32)
    return read_floats(stored[0], stored[1], changes, FLOAT32), changes


@njit(cache=True, nogil=True)
def taken_move(tree, node_edges, logs, n_leaves, radius, dedupe, rich, stop, offset, taken, meta, work):
    """Move ``stop`` of one state, written with its features into ``taken`` (global node ids: ``offset``
    added) and ``meta[0]``. ``tree`` is ``(neighbors, edges, lengths, changes, parsimony_length, support)``,
    lengths and support float64, ``changes`` each move's parsimony change (float32, empty for the basic form).
    Returns the moves counted (``stop + 1``, or all of them when the state has fewer), -1 when the changes do
    not reach move ``stop``. ``logs``: the rich form's :func:`~phylorl.records.features.log_lengths`;
    ``work``: :func:`walk_work` for trees this large.

    The moves come in blocks, one per pruned slot ``(p, k)`` and side of ``p`` (see :func:`all_moves`);
    without a radius a block's size is known from the leaves on that side, so only the block holding
    ``stop`` is walked."""
    # float64
    neighbors, lengths, deltas, parsimony_length, support = tree[0], tree[2], tree[3], tree[4], tree[5]
    n_nodes = neighbors.shape[0]
    # rich: the slot tables of tree_constants, written (and read) only at the two slots the move uses, once it
    # is found: p's pruned row (p is an inner node, so all six columns) and x's regraft row
    used = n_nodes if rich else 0
    flat = (np.empty((3 * used, 6), np.float32), np.empty((3 * used, 4), np.float32))  # slot_tables' layout
    total = tree_length(lengths) if rich else 1.0
    constants = (flat[0].reshape(used, 3, 6), flat[1].reshape(used, 3, 4), total)
    none = np.zeros((0, 3))
    # the slot sums count each side's leaves: without a radius, the size of each block
    sums = slot_sums(neighbors, node_edges, lengths, n_leaves) if rich or radius < 0 else (none, none, none)
    _, start, size, slot_length, regrafts, columns = work
    _slot_lengths(neighbors, node_edges, lengths, slot_length)
    before = 0
    if radius == 0:
        return 0
    for p in range(n_leaves, n_nodes):
        walked = False
        for k in range(3):
            for side in range(3):
                a = neighbors[p, side]
                if side == k or a < n_leaves:
                    continue
                if radius < 0:
                    size[p, side] = 2 * (np.int64(sums[0][p, side]) - 1)
                first = skipped_rows(neighbors, p, k, side, dedupe)
                # without a radius only the side that holds the move is walked; with one, every side of p once
                found = radius < 0 and stop < before + size[p, side] - first
                if found or (radius >= 0 and not walked):
                    sides = 1 << side if found else 7
                    walk_sides(
                        neighbors,
                        n_leaves,
                        radius,
                        p,
                        p + 1,
                        sides,
                        0,
                        total,
                        rich,
                        work,
                        regrafts,
                        columns,
                        0,
                    )
                    walked = True
                if stop < before + size[p, side] - first:
                    i = start[p, side] + stop - before + first
                    x, kx = regrafts[i] // 3, regrafts[i] % 3
                    taken[0], taken[1] = offset + p, offset + neighbors[p, k]
                    taken[2], taken[3] = offset + x, offset + neighbors[x, kx]
                    if not rich:
                        meta[0, 0] = lengths[node_edges[p, k]]
                        meta[0, 1] = lengths[node_edges[x, kx]]
                        meta[0, 2] = columns[i, 0]
                    elif deltas.shape[0] <= stop:
                        return -1
                    else:
                        slot_columns(
                            flat[0],
                            flat[1],
                            np.array([[p, k], [x, kx]]),
                            neighbors,
                            node_edges,
                            lengths,
                            support,
                            n_leaves,
                            sums,
                            total,
                            logs,
                        )
                        slot_row(meta, 0, constants, p, k, x, kx, columns[i, 0], columns[i, 1])
                        parsimony_one(meta, 0, deltas, stop, parsimony_length)
                    return stop + 1
                before += size[p, side] - first
    return before


@njit(cache=True, nogil=True)
def _slot_lengths(neighbors, node_edges, lengths, out):
    """Into ``out[:N]`` (float64 ``[., 3]``): the length of the branch at each slot (0 at a leaf's unused
    slots)."""
    for v in range(neighbors.shape[0]):
        for k in range(3):
            out[v, k] = lengths[node_edges[v, k]] if neighbors[v, k] >= 0 else 0.0


@njit(cache=True, nogil=True)
def walk_work(n_nodes, rich):
    """Scratch of the walks for trees of up to ``n_nodes`` nodes, made once and used for every state:
    :func:`~phylorl.phylo.spr.walk_sides`'s (stack, depth, branch length from ``p``, parent, and the distance
    column by depth: rich ``(d + 1) / 10``, basic ``d + 1``), the first row and size of each side's walk, each
    slot's branch length, and the walks of one node's sides (their regraft slots and own columns)."""
    distance = np.empty(n_nodes + 1, np.float32)
    for d in range(n_nodes + 1):
        distance[d] = np.float32(d + 1) / np.float32(10.0) if rich else d + 1
    return walk_space(distance, n_nodes, 3 * 2 * n_nodes, 2)


@njit(cache=True, nogil=True)
def all_moves(tree, node_edges, logs, n_leaves, radius, dedupe, rich, offset, compact, at, work):
    """Every move of one state (first node ``offset`` of the batch) into the compact arrays ``compact``
    (:class:`phylorl.nets.compact_actions.CompactActions`' first eight), from the batch's rows ``at`` =
    ``(walk_at, shared_at, block_at, move_at)``, the first rows of the walk, shared, block and per-move arrays
    that this state writes: its slots' tables, its parsimony rows, its walks and blocks; ``logs``: the rich
    form's
    :func:`~phylorl.records.features.log_lengths`; ``work``: :func:`walk_work` for trees this large. Returns
    ``(moves, walk rows, blocks, shared rows written)``; moves -1 when the stored parsimony changes
    (``tree[3]``, ``(buf, array header)``) are not one per move, :data:`UNREAD_CHANGES` when they cannot be
    read.

    The moves pruning ``(p, k)`` onto side ``side`` of ``p`` walk the same subtree for both ``k != side``
    (only the dedupe rule at ``d = 1``, the first node's two moves, tells them apart), so each side of ``p``
    is walked once: each regraft's slot row (the state's first slot row added) into ``walk_slot`` and its own
    columns into ``walk_own`` (rich, column 3 ``(d(p, x) + 1) / 10`` and column 4 ``p`` to the middle of ``(x,
    y)`` / tree length; basic, ``d(p, x) + 1``). Each ``(p, k, side)`` with a move is a block ``(pruned slot
    row, first walk row (``walk_at`` added), moves)`` of ``blocks``: its moves are that many consecutive walk
    rows."""
    slot_node, pruned, regraft, shared, walk_slot, walk_own, blocks, shared_row = compact
    walk_at, shared_at, block_at, move_at = at
    walk_slot, walk_own = walk_slot[walk_at:], walk_own[walk_at:]
    blocks, shared_row = blocks[block_at:], shared_row[move_at:]
    # float64
    neighbors, lengths, deltas, parsimony_length, support = tree[0], tree[2], tree[3], tree[4], tree[5]
    n_nodes, base = neighbors.shape[0], 3 * offset
    _, start, size, slot_length, _, _ = work
    _slot_lengths(neighbors, node_edges, lengths, slot_length)
    for v in range(n_nodes):
        for k in range(3):
            u = neighbors[v, k]
            slot_node[base + 3 * v + k] = offset + (u if u >= 0 else v)
    if rich:
        tree_length = slot_tables(
            pruned[base : base + 3 * n_nodes],
            regraft[base : base + 3 * n_nodes],
            neighbors,
            node_edges,
            lengths,
            support,
            n_leaves,
            logs,
        )  # written in place
    else:
        tree_length = 1.0
        for v in range(n_nodes):
            for k in range(3):
                pruned[base + 3 * v + k, 0] = regraft[base + 3 * v + k, 0] = slot_length[v, k]
    count, walked, written = 0, 0, 0
    if radius != 0:
        walked = walk_sides(
            neighbors,
            n_leaves,
            radius,
            n_leaves,
            n_nodes,
            7,
            base,
            tree_length,
            rich,
            work,
            walk_slot,
            walk_own,
            0,
        )
        for p in range(n_leaves, n_nodes):
            for k in range(3):
                for side in range(3):
                    if side == k or neighbors[p, side] < n_leaves:
                        continue
                    first = skipped_rows(neighbors, p, k, side, dedupe)
                    if size[p, side] > first:
                        blocks[written, 0] = base + 3 * p + k
                        blocks[written, 1] = walk_at + start[p, side] + first
                        blocks[written, 2] = size[p, side] - first
                        count += size[p, side] - first
                        written += 1
    if not rich:
        shared_row[:count] = 0
        return count, walked, written, 0
    if stored_size(deltas) != count:
        return -1, 0, 0, 0
    rows = stored_parsimony_table(deltas[0], deltas[1], parsimony_length, shared, shared_row, shared_at)
    if rows < 0:
        ok, changes = read_changes(deltas)
        if not ok:
            return UNREAD_CHANGES, 0, 0, 0
        rows = parsimony_table(changes, parsimony_length, shared, shared_row, shared_at)
    return count, walked, written, rows


@njit(cache=True, nogil=True)
def block_rows(blocks, count):
    """``(pruned slot row, walk row)`` int64 ``[count, 2]`` of each move of ``blocks`` (see
    :func:`all_moves`)."""
    rows = np.empty((count, 2), np.int64)
    i = 0
    for b in range(blocks.shape[0]):
        for j in range(blocks[b, 2]):
            rows[i, 0], rows[i, 1] = blocks[b, 0], blocks[b, 1] + j
            i += 1
    return rows


@njit(cache=True, nogil=True)
def expand_moves(compact, columns):
    """``(nodes int64 [A, 4], meta float32 [A, K])``: every move of compact arrays (the first eight fields of
    :class:`phylorl.nets.compact_actions.CompactActions`, and its ``columns``) written out on the host."""
    slot_node, pruned, regraft, shared, walk_slot, walk_own, blocks, shared_row = compact
    n, k = shared_row.shape[0], columns.shape[0]
    nodes, meta = np.empty((n, 4), np.int64), np.empty((n, k), np.float32)
    rows = block_rows(blocks, n)
    for i in range(n):
        a, b = rows[i, 0], walk_slot[rows[i, 1]]
        nodes[i, 0], nodes[i, 1], nodes[i, 2], nodes[i, 3] = a // 3, slot_node[a], b // 3, slot_node[b]
    widths = (pruned.shape[1], regraft.shape[1], shared.shape[1])
    rich = widths == (6, 4, 3) and k == len(RICH_LAYOUT) and (columns == np.array(RICH_LAYOUT)).all()
    if rich:  # row by row: faster than by columns
        for i in range(n):  # the order of features.slot_row, on flat slot rows
            w = rows[i, 1]
            p, r, c, o = pruned[rows[i, 0]], regraft[walk_slot[w]], shared[shared_row[i]], walk_own[w]
            row = meta[i]
            row[0], row[1], row[2], row[3], row[4] = p[0], r[0], p[1], o[0], o[1]
            row[5], row[6], row[7], row[8], row[9] = p[2], r[1], p[3], r[2], p[4]
            row[10], row[11], row[12], row[13], row[14] = c[0], c[1], c[2], p[5], r[3]
        return nodes, meta
    # where the regraft, shared and own columns start in cat(pruned, regraft, shared, own)
    first = (widths[0], widths[0] + widths[1], widths[0] + widths[1] + widths[2])
    for j in range(k):
        source = columns[j]
        if source < first[0]:
            for i in range(n):
                meta[i, j] = pruned[rows[i, 0], source]
        elif source < first[1]:
            for i in range(n):
                meta[i, j] = regraft[walk_slot[rows[i, 1]], source - first[0]]
        elif source < first[2]:
            for i in range(n):
                meta[i, j] = shared[shared_row[i], source - first[1]]
        else:
            for i in range(n):
                meta[i, j] = walk_own[rows[i, 1], source - first[2]]
    return nodes, meta


@njit(cache=True)
def all_finite(values):
    """Whether every entry of a contiguous float array is finite. It keeps the interpreter lock: a check takes
    microseconds, and letting the lock go costs a wait to take it back behind the process's busy threads (ten
    checks a batch, :func:`~phylorl.records.decode.check_records`). A float32 array is checked on its
    exponent bits with no early exit, which compiles to vector code."""
    flat = values.ravel()
    if flat.itemsize == 4:
        bits, bad = flat.view(np.uint32), np.uint32(0)
        # all exponent bits set (inf, nan): adding the lowest one carries into bit 31
        for i in range(bits.shape[0]):
            bad |= ((bits[i] & np.uint32(0x7F800000)) + np.uint32(0x00800000)) >> np.uint32(31)
        return bad == 0
    for v in flat:
        if not np.isfinite(v):
            return False
    return True
