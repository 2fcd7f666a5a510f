"""A batch of records straight into the network's input arrays, in one compiled pass, with its checks.

:func:`_fill` reads ``B`` records (:mod:`phylorl.records.format`) and writes both states' trees as one
graph each (node features, directed edges and their features, the neighbour tables), the taken move of each
state ``s`` with its features, and every move of each ``s'`` in the compact form of
:class:`phylorl.nets.compact_actions.CompactActions` (expanded where the network runs). The moves are
enumerated while they are written (:mod:`phylorl.records.moves`), the features computed by
:mod:`phylorl.records.features`.

Each record gets a status: :data:`OK`, or the first thing wrong with it (:data:`REASONS`), which the replay's
insert check reports by record.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from phylorl.phylo.spr import enumerate_into, move_capacity

from .features import EDGE_COLUMNS, MOVE_COLUMNS, log_lengths
from .graph import empty_graphs, read_tree, state_work, tree_graph
from .moves import UNREAD_CHANGES, all_moves, read_changes, taken_move, walk_work
from .parsimony import ranked_valid
from .reader import (
    DEDUPE,
    FLOAT32,
    LABELLED,
    RICH_FORM,
    TAKEN,
    TERMINAL,
    array_header,
    observation_header,
    observation_record_header,
    prefetch_range,
    read_floats,
    read_ints,
    record_header,
    tree_tables_into,
)

OK, UNREADABLE, BAD_TREE, BAD_ACTION, BAD_TAKEN = range(5)
BAD_CHANGES, NO_MOVE, BAD_LABELS, NOT_FINITE, MIXED = range(5, 10)
REASONS = {
    UNREADABLE: "not a phylorl record of this format version "
    "(magic, version, form or an array is wrong, or it is truncated)",
    BAD_TREE: "its arrays do not form an unrooted binary tree",
    BAD_ACTION: "its action is not one of its state's moves",
    BAD_TAKEN: "its stored taken move is not its state's move of that action",
    BAD_CHANGES: "its parsimony changes are not one per move, or their stored counts do not hold",
    NO_MOVE: "its next state has no move and it is not terminal",
    BAD_LABELS: "its labels are not one float32 per move of its next state",
    NOT_FINITE: "it holds a NaN or infinite value, a negative branch length, or a discount outside [0, 1]",
    MIXED: "the batch mixes states of the rich and the basic feature sets",
}
"""Why a record is refused, by status."""


@njit(cache=True)
def _locate(buf, offsets, per):
    """First pass: ``(status, rich, headers, values, arrays, trees)``: each record's header (flags, action,
    policy version, then where its labels and its stored taken row are, -1 when it has none), reward and
    discount, and per state its array positions and ``(n_leaves, radius, dedupe)``. ``per``: states per
    record (2: transition records; 1: observation records). The one-call decoders of
    :mod:`phylorl.records.decode` run it inside their call, which lets the interpreter lock go."""
    n = offsets.size - 1
    headers, values = np.zeros((n, 5), np.int64), np.zeros((n, 2))
    headers[:, 3:] = -1
    arrays, trees = np.zeros((per * n, 6), np.int64), np.zeros((per * n, 3), np.int64)
    status = np.zeros(n, np.int8)
    forms = 0
    for r in range(n):
        start, end = offsets[r], offsets[r + 1]
        if r + 1 < n:  # the next record's lines load while this one's headers are read (see prefetch)
            prefetch_range(buf, end, offsets[r + 2])
        if per == 2:
            ok, flags, action, reward, discount, version, pos = record_header(buf, start, end)
            headers[r, 0], headers[r, 1], headers[r, 2] = flags, action, version
            values[r, 0], values[r, 1] = reward, discount
        else:
            ok, pos = observation_record_header(buf, start, end)
            flags = 0
        if not ok:
            status[r] = UNREADABLE
            continue
        for j in range(per):
            i = per * r + j
            ok, form, n_leaves, radius, oflags, pos = observation_header(buf, pos, end, arrays[i])
            if not ok:
                break
            forms |= 1 << form
            trees[i, 0], trees[i, 1], trees[i, 2] = n_leaves, radius, oflags & DEDUPE
            shape = array_header(buf, arrays[i, 0], end)  # the neighbour table bounds what is allocated
            ok = n_leaves >= 3 and shape[3] == 2 and shape[4] == 2 * n_leaves - 2 and shape[5] == 3
            if ok and form == RICH_FORM:
                ok = array_header(buf, arrays[i, 3], end)[3] == 1
            if not ok:
                break
        if not ok:
            status[r] = UNREADABLE
            continue
        if flags & TAKEN:  # the taken move's node ids, then its features
            headers[r, 4], pos = pos, array_header(buf, pos, end)[7]
            pos = array_header(buf, pos, end)[7] if pos >= 0 else -1
        if flags & LABELLED and pos >= 0:
            headers[r, 3], pos = pos, array_header(buf, pos, end)[7]
        if pos != end:
            status[r] = UNREADABLE
    if forms & (forms - 1):  # tree and rich forms mixed: not one feature set
        status[:] = MIXED
    return status, forms == 1 << RICH_FORM, headers, values, arrays, trees


@njit(cache=True, nogil=True)
def _fill(buf, headers, values, arrays, trees, rich, per, verify):
    """Second pass: the batch arrays. With ``per == 1`` (observation records) each record's one state is
    written as a next state (all its moves) and side 0 stays empty. A record's stored taken row is read as it
    is, or with ``verify`` checked against the move the state enumerates; ``verify`` also checks that branch
    lengths and the parsimony length are finite and not negative, and each state's ranked parsimony changes
    (:func:`~phylorl.records.parsimony.ranked_valid`), whose stored counts are read as ranks."""
    n = headers.shape[0]
    width, columns = (EDGE_COLUMNS, MOVE_COLUMNS) if rich else (1, 3)
    first_side = 2 - per
    status = np.zeros(n, np.int8)
    nodes = np.zeros((2, n + 1), np.int64)  # first node of each state's tree, per side
    capacity, largest = 0, 1
    for r in range(n):
        for g in range(first_side, 2):
            i = per * r + g - first_side
            nodes[g, r + 1] = nodes[g, r] + 2 * trees[i, 0] - 2
            largest = max(largest, move_capacity(2 * trees[i, 0] - 2, trees[i, 0]))
        last = per * r + per - 1
        capacity += (
            array_header(buf, arrays[last, 3], buf.shape[0])[4]
            if rich
            else move_capacity(2 * trees[last, 0] - 2, trees[last, 0])
        )
    capacity += largest  # room for a state that enumerates more moves than its record says (then invalid)
    sides = (
        empty_graphs(nodes[0, n], max(nodes[0, n] - n, 0), width),
        empty_graphs(nodes[1, n], nodes[1, n] - n, width),
    )
    # zeroed: observation records (per == 1) write no taken move, yet _fill returns these arrays
    taken, taken_meta = np.zeros((n, 4), np.int64), np.zeros((n, columns), np.float32)
    slots = 3 * nodes[1, n]
    widths = (6, 4, 3, 2) if rich else (1, 1, 0, 1)  # pruned, regraft, shared and own columns
    # a state walks each side of each inner node once (2 rows a move at most, and per walk 2 rows no move
    # uses) and has at most 6 blocks an inner node; the per-move rows are counted in capacity
    walks, block_capacity = capacity + 6 * nodes[1, n], 6 * nodes[1, n] + 1
    # every state writes its slots
    compact = (
        np.empty(slots, np.int64),
        np.empty((slots, widths[0]), np.float32),
        np.empty((slots, widths[1]), np.float32),
        np.empty((capacity if rich else 1, widths[2]), np.float32),
        np.empty(walks, np.int32),
        np.empty((walks, widths[3]), np.float32),
        np.empty((block_capacity, 3), np.int32),
        np.empty(capacity, np.int32),
    )
    compact[3][0] = 0.0  # the shared rows are written as used; row 0 is kept when none is (no move at all)
    labelled = (headers[:, 3] >= 0).any()  # no record labelled: no labels (a batch's any_labelled is False)
    labels, counts = np.empty(capacity if labelled else 0, np.float32), np.zeros(n, np.int64)
    scratch = np.empty((largest, 4), np.int64)  # the moves of a state whose count has no closed form
    # nodes of the largest tree (none: decode_transitions declines)
    most = 2 * trees[:, 0].max() - 2 if n else 4
    work = walk_work(most, rich)  # scratch for the largest tree, made once
    written, shared, walked, blocked = 0, 0, 0, 0
    no_tables = np.empty((0, 3), np.int32)
    no_changes = np.empty(0, np.float32)
    space = state_work(most)
    for r in range(n):
        for g in range(first_side, 2):
            i = per * r + g - first_side
            n_leaves, radius, dedupe = trees[i, 0], trees[i, 1], trees[i, 2] != 0
            tree = read_tree(buf, arrays[i], n_leaves, rich, space)
            if not tree[0]:
                status[r] = UNREADABLE
                break
            if verify and rich and not ranked_valid(buf, tree[4][1]):  # ranks are read on trust otherwise
                status[r] = BAD_CHANGES
                break
            tree = tree[1:]
            if verify and not (_all_finite(tree[2], 0.0) and np.isfinite(tree[4]) and tree[4] >= 0.0):
                status[r] = NOT_FINITE
                break
            stored_row = g == 0 and headers[r, 4] >= 0 and not verify
            # a state whose taken row is stored needs its graph alone: tree_graph keeps its writes in bounds,
            # and the insert check (verify) made sure the tree is one
            node_edges, error = (
                (no_tables, 0)
                if stored_row
                else tree_tables_into(
                    tree[0], tree[1], n_leaves, space[7][: 2 * n_leaves - 2], space[8], space[9]
                )
            )
            logs = log_lengths(tree[2]) if rich else np.empty(0)
            if error or not tree_graph(tree, logs, n_leaves, rich, nodes[g, r], nodes[g, r] - r, sides[g]):
                status[r] = BAD_TREE
                break
            if stored_row:
                status[r] = _stored_taken(
                    buf, headers[r, 4], 2 * n_leaves - 2, nodes[0, r], taken[r], taken_meta[r]
                )
                if status[r] != OK:
                    break
            elif g == 0:
                action = headers[r, 1]
                ok, changes = read_changes(tree[3]) if rich else (True, no_changes)
                if not ok:
                    status[r] = UNREADABLE
                    break
                if verify and not _all_finite(changes, -np.inf):  # (the next state's are checked as features)
                    status[r] = NOT_FINITE
                    break
                if rich and changes.shape[0] != _move_count(tree, n_leaves, radius, dedupe, scratch):
                    status[r] = BAD_CHANGES
                    break
                count = taken_move(
                    (tree[0], tree[1], tree[2], changes, tree[4], tree[5]),
                    node_edges,
                    logs,
                    n_leaves,
                    radius,
                    dedupe,
                    rich,
                    max(action, 0),
                    nodes[0, r],
                    taken[r],
                    taken_meta[r : r + 1],
                    work,
                )
                if action < 0 or count <= action:
                    status[r] = BAD_ACTION
                    break
                if headers[r, 4] >= 0 and not _same_taken(
                    buf, headers[r, 4], nodes[0, r], taken[r], taken_meta[r]
                ):
                    status[r] = BAD_TAKEN
                    break
            else:
                at = (walked, shared, blocked, written)
                count, walk_rows, block_rows, rows = all_moves(
                    tree, node_edges, logs, n_leaves, radius, dedupe, rich, nodes[1, r], compact, at, work
                )
                if count == UNREAD_CHANGES:
                    status[r] = UNREADABLE
                    break
                if count < 0:
                    status[r] = BAD_CHANGES
                    break
                if count == 0 and not headers[r, 0] & TERMINAL:
                    status[r] = NO_MOVE
                    break
                label_rows = labels[written : written + count]
                if headers[r, 3] >= 0:
                    if not read_floats(
                        buf, array_header(buf, headers[r, 3], buf.shape[0]), label_rows, FLOAT32
                    ):
                        status[r] = BAD_LABELS
                        break
                elif labelled:
                    label_rows[:] = 0.0
                counts[r] = count
                written += count
                shared += rows
                walked += walk_rows
                blocked += block_rows
    node_index = (_node_index(nodes[0]), _node_index(nodes[1]))
    used = (compact[3][: max(shared, 1)], compact[4][:walked], compact[5][:walked], compact[6][:blocked])
    compact = compact[:3] + used + (compact[7][:written],)
    out = (sides, node_index, taken, taken_meta, compact, labels[: written if labelled else 0], counts)
    return status, out


@njit(cache=True, nogil=True)
def _all_finite(values, low):
    """Whether every value is finite and at least ``low``."""
    for v in values:
        if not (np.isfinite(v) and v >= low):
            return False
    return True


@njit(cache=True, nogil=True)
def _stored_taken(buf, at, n_nodes, offset, taken, meta):
    """The record's stored taken row at ``buf[at]`` into ``taken`` (node ids, ``offset`` added) and ``meta``:
    :data:`OK`, :data:`UNREADABLE` (not the int and float32 arrays of the right sizes) or :data:`BAD_TAKEN` (a
    node id not below ``n_nodes``)."""
    end = buf.shape[0]
    header = array_header(buf, at, end)
    ids = np.empty(4, np.int64)
    if (
        header[3] != 1
        or not read_ints(buf, header, ids)
        or not read_floats(buf, array_header(buf, header[7], end), meta, FLOAT32)
    ):
        return UNREADABLE
    for j in range(4):
        if not 0 <= ids[j] < n_nodes:
            return BAD_TAKEN
        taken[j] = offset + ids[j]
    return OK


@njit(cache=True, nogil=True)
def _same_taken(buf, at, offset, taken, meta):
    """Whether the record's stored taken row at ``buf[at]`` is ``taken`` (``offset`` added) and ``meta``,
    bitwise."""
    ids, row = np.empty(4, np.int64), np.empty(meta.shape[0], np.float32)
    if _stored_taken(buf, at, np.int64(1) << 62, offset, ids, row) != OK:
        return False
    for j in range(4):
        if ids[j] != taken[j]:
            return False
    return (row.view(np.int32) == meta.view(np.int32)).all()


@njit(cache=True, nogil=True)
def _move_count(tree, n_leaves, radius, dedupe, scratch):
    """How many moves a stored state has (a closed form for all deduplicated moves)."""
    if radius < 0 and dedupe:
        return 2 * (n_leaves - 3) * (2 * n_leaves - 7)
    return enumerate_into(tree[0], n_leaves, radius, dedupe, scratch)


@njit(cache=True, nogil=True)
def _node_index(first):
    """``(index, sizes, first, uniform)`` of one side's nodes, from each state's first node (then the end):
    each node's state, each state's node count and first node, and the count every state has (-1 when they
    differ)."""
    sizes = first[1:] - first[:-1]
    return _segment_index(sizes), sizes, first[:-1].copy(), _uniform(sizes)


@njit(cache=True, nogil=True)
def _uniform(sizes):
    """The size every segment has, or -1 when they differ (or there is none)."""
    if sizes.shape[0] == 0:
        return -1
    for s in sizes:
        if s != sizes[0]:
            return -1
    return sizes[0]


@njit(cache=True, nogil=True)
def _segment_index(sizes):
    index = np.empty(sizes.sum(), np.int64)
    at = 0
    for i in range(sizes.shape[0]):
        for j in range(at, at + sizes[i]):
            index[j] = i
        at += sizes[i]
    return index
