"""A batch of records decoded into the network's input arrays in one compiled call each, and the replay's
insert check (numpy and numba only: the replay service checks records without torch).

:func:`decode_transitions` decodes a sampled batch of transition records (what
:func:`~phylorl.records.collate.collate_records` wraps as tensors), :func:`decode_states` an inference
request's observation records, each state written as a next state with every move written out (what
:func:`~phylorl.records.collate.collate_states` wraps). Done in one call each, a service's thread lets the
interpreter lock go once a batch, and the values besides the arrays are made in the same call. Each record
gets a status (OK or the first thing wrong with it, :data:`~phylorl.records.batch.REASONS`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .batch import (
    LABELLED,
    NO_MOVE,
    NOT_FINITE,
    OK,
    REASONS,
    TERMINAL,
    _fill,
    _locate,
    _segment_index,
    _uniform,
)
from .features import EDGE_COLUMNS, MOVE_COLUMNS
from .format import PackedRecords
from .graph import empty_graphs
from .moves import all_finite, expand_moves


@njit(cache=True, nogil=True)
def decode_states(buf, offsets, rich_columns, basic_columns):
    """Decode the observation records ``buf[offsets[i]:offsets[i + 1]]``, each as a next state (its tree and
    all its moves, written out), checked as the endpoint must (every feature finite, at least one move per
    state); ``*_columns``: the move layout of each form (:data:`~phylorl.records.moves.RICH_LAYOUT`,
    :data:`~phylorl.records.moves.BASIC_LAYOUT`).

    Returns ``(status, rich, graph, nodes, moves)``: ``status`` per record
    (:data:`~phylorl.records.batch.REASONS`); ``graph`` the trees as one graph ``(x, edge_index, edge_attr,
    neighbors, neighbor_attr, neighbor_mask)``; ``nodes`` ``(index, sizes, first, uniform)``: each node's
    state, each state's node count and first node, and the count every state has (-1 when they differ);
    ``moves`` ``(node_ids [A, 4], meta [A, K], index, sizes, uniform)`` likewise over the moves. The arrays
    are empty when a status is not OK."""
    n = offsets.size - 1
    status, rich, headers, values, arrays, trees = _locate(buf, offsets, 1)
    if n == 0 or status.any():
        return status, rich, empty_graphs(0, 0, EDGE_COLUMNS if rich else 1), _no_nodes(), _no_moves(rich)
    # verified, as an insert's records are
    status, out = _fill(buf, headers, values, arrays, trees, rich, 1, True)
    sides, node_index, _, _, compact, _, counts = out
    if not status.any():
        for r in range(n):
            if counts[r] < 1:
                status[r] = NO_MOVE  # a state to act on needs a move
        # every move's columns come from the tables (pruned, regraft, shared) and the walks' own columns
        for a in (sides[1][0], sides[1][2], compact[1], compact[2], compact[3], compact[5]):
            if not all_finite(a):
                status[0] = NOT_FINITE
    if status.any():
        return status, rich, empty_graphs(0, 0, EDGE_COLUMNS if rich else 1), _no_nodes(), _no_moves(rich)
    node_ids, meta = expand_moves(compact, rich_columns if rich else basic_columns)
    moves = (node_ids, meta, _segment_index(counts), counts, _uniform(counts))
    return status, rich, sides[1], node_index[1], moves


@njit(cache=True, nogil=True)
def _no_nodes():
    none = np.zeros(0, np.int64)
    return none, none, none, -1


@njit(cache=True, nogil=True)
def _no_moves(rich):
    none = np.zeros(0, np.int64)
    return np.zeros((0, 4), np.int64), np.zeros((0, MOVE_COLUMNS if rich else 3), np.float32), none, none, -1


@njit(cache=True, nogil=True)
def decode_transitions(buf, offsets, verify):
    """Decode the transition records ``buf[offsets[i]:offsets[i + 1]]`` into a learner batch's arrays.
    ``verify``: check each stored taken row against the move its state enumerates, and each ranked array's
    values and counts against its elements (without it they are read as stored: the replay's insert check
    verified them).

    Returns ``(status, rich, arrays, nodes, scalars)``: ``status`` per record
    (:data:`~phylorl.records.batch.REASONS`; the arrays are empty unless every record is OK); ``arrays``
    ``(sides, taken, taken_meta, compact, labels, counts)``: both states' graphs, each taken move and its
    features, every next move in compact form, the labels of the next moves (0 in an unlabelled record's; none
    when no record is labelled), the moves per next state; ``nodes`` per side ``(index, sizes, first,
    uniform)``; ``scalars`` ``(reward, discount, terminal, labelled, versions, any_labelled, bootstraps,
    moves_uniform)``: float32 rewards and discounts, the flags as booleans, each record's policy version,
    whether a next state is labelled, whether a discount is not 0, and the move count every next state has (-1
    when they differ)."""
    n = offsets.size - 1
    status, rich, headers, values, arrays, trees = _locate(buf, offsets, 2)
    read = n if not status.any() else 0  # a record not read: no arrays (an empty batch's, of the same types)
    filled, out = _fill(
        buf, headers[:read], values[:read], arrays[: 2 * read], trees[: 2 * read], rich, 2, verify
    )
    status[:read] = filled
    sides, node_index, taken, taken_meta, compact, labels, counts = out
    reward, discount = np.empty(n, np.float32), np.empty(n, np.float32)
    terminal, labelled, versions = np.empty(n, np.bool_), np.empty(n, np.bool_), np.empty(n, np.int64)
    for r in range(n):
        reward[r], discount[r] = values[r, 0], values[r, 1]
        terminal[r], labelled[r] = (headers[r, 0] & TERMINAL) != 0, (headers[r, 0] & LABELLED) != 0
        versions[r] = headers[r, 2]
        if status[r] == OK and not (np.isfinite(values[r, 0]) and 0.0 <= values[r, 1] <= 1.0):
            status[r] = NOT_FINITE
    any_labelled, bootstraps = labelled.any(), (values[:, 1] != 0).any()
    scalars = (reward, discount, terminal, labelled, versions, any_labelled, bootstraps, _uniform(counts))
    return status, rich, (sides, taken, taken_meta, compact, labels, counts), node_index, scalars


def check_records(records: PackedRecords) -> None:
    """The replay's insert check: ``ValueError`` naming the first record that is not a valid transition (it
    cannot be read, its tree is not a binary tree, its action is not one of the state's moves, its stored
    taken row or ranked parsimony changes are not its state's, a feature, reward or label is not finite, a
    discount lies outside [0, 1]), from the arrays the learner's batch would hold."""
    if len(records) == 0:
        raise ValueError("no record to insert")
    status, _, arrays, _, _ = decode_transitions(records.buffer, records.offsets, True)
    raise_first(status, "record")
    sides, _, taken_meta, compact, labels, _ = arrays
    graphs = [side[c] for side in sides for c in (0, 2)]  # node and edge features
    checked = (*graphs, taken_meta, *compact[1:4], compact[5], labels)
    if not all(all_finite(a) for a in checked):
        if len(records) == 1:
            raise ValueError(f"record 0: {REASONS[NOT_FINITE]}")
        for i in range(len(records)):  # which one: each alone (a bad batch only)
            try:
                check_records(PackedRecords.from_records([records[i]]))
            except ValueError as error:
                raise ValueError(f"record {i}: {str(error).split(': ', 1)[1]}") from None


def raise_first(status: np.ndarray, what: str, of: int | None = None) -> None:
    bad = np.flatnonzero(status != OK)
    if bad.size:
        i = int(bad[0])
        where = f"{what} {i}" + (f" of {of}" if of is not None else "")
        reason = REASONS[int(status[i])]
        if what == "state":
            if status[i] == NOT_FINITE:
                where = f"a {what} of the {of}"  # (the batch's features are checked together)
            elif status[i] == NO_MOVE:
                reason = "it has no move to choose from"
        raise ValueError(f"{where}: {reason}")
