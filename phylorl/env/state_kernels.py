"""Packed records straight into the network's input arrays, in one compiled call each.

:func:`decode_states` reads observation records (:func:`phylorl.wire.record.encode_observation`, tree or rich
tree form) as :func:`~phylorl.env.batch_kernels.decode_batch` does (each state written as a next state: its tree
and all its moves), checks them as the endpoint must (every feature finite, at least one move per state),
writes every move out (:func:`~phylorl.env.move_kernels.expand_moves`) and makes the segment indexes: what
:func:`phylorl.agent.packed_batch.collate_states` wraps as tensors. Done in one call, the endpoint's gRPC
thread lets the interpreter lock go once a request, and the arrays it does not need (the empty first side of
each state, the record headers, the compact moves) are never made into Python objects. A one-state request took
half the time of the four calls and the numpy around them (``docs/benchmarks.md``, inference endpoint, session 26).

:func:`decode_transitions` does the same for a sampled batch of transition records: what
:func:`phylorl.agent.packed_batch.collate_records` wraps, the values the batch holds besides the arrays
(rewards and discounts as float32, the terminal and labelled flags, the policy versions, the segments' uniform
sizes) made in the same call rather than by a dozen numpy operations after it (``docs/benchmarks.md``, sampled
records, session 27).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .batch_kernels import LABELLED, TERMINAL, _fill, _first_pass_arrays, _graphs, _locate, _segment_index
from .feature_kernels import EDGE_COLUMNS, MOVE_COLUMNS
from .move_kernels import all_finite, expand_moves


@njit(cache=True, nogil=True)
def decode_states(buf, offsets, rich_columns, basic_columns):
    """Decode the observation records ``buf[offsets[i]:offsets[i + 1]]``; ``*_columns``: the move layout of
    each form (:data:`~phylorl.env.move_kernels.RICH_LAYOUT`, :data:`~phylorl.env.move_kernels.BASIC_LAYOUT`).

    Returns ``(ok, rich, graph, nodes, moves)``: ``graph`` the trees as one graph ``(x, edge_index, edge_attr,
    neighbors, neighbor_attr, neighbor_mask)``; ``nodes`` ``(index, sizes, first, uniform)``: each node's state,
    each state's node count and first node, and the count every state has (-1 when they differ); ``moves``
    ``(node_ids [A, 4], meta [A, K], index, sizes, uniform)`` likewise over the moves. ``ok`` is False (the
    arrays then empty) when a record is not in a tree form this pass reads, is corrupt or invalid, holds a
    non-finite feature or has no move: the caller's reference path names what is wrong."""
    n = offsets.size - 1
    headers, values, arrays, trees = _first_pass_arrays(n, 1)
    status, rich = _locate(buf, offsets, headers, values, arrays, trees, 1)
    if n == 0 or status.any():
        return _declined(rich)
    status, out = _fill(buf, headers, values, arrays, trees, rich, 1, True)  # verified, as an insert's records are
    sides, node_index, _, _, compact, _, counts = out
    x, edge_index, edge_attr, neighbors, neighbor_attr, mask = sides[1]
    _, pruned, regraft, shared, _, own, _, _ = compact
    if status.any() or counts.min() < 1:
        return _declined(rich)
    if not (all_finite(x) and all_finite(edge_attr) and all_finite(pruned) and all_finite(regraft)
            and all_finite(shared) and all_finite(own)):  # every move's columns come from these
        return _declined(rich)
    layout = rich_columns if rich else basic_columns
    node_ids, meta = expand_moves(compact[0], pruned, regraft, shared, compact[4], own, compact[6], compact[7], layout)
    index, sizes, first = node_index[1]
    return True, rich, sides[1], (index, sizes, first, _uniform(sizes)), \
        (node_ids, meta, _segment_index(counts), counts, _uniform(counts))


@njit(cache=True, nogil=True)
def _declined(rich):
    width, columns = (EDGE_COLUMNS, MOVE_COLUMNS) if rich else (1, 3)
    none = np.zeros(0, np.int64)
    return False, rich, _graphs(0, 0, width), (none, none, none, -1), \
        (np.zeros((0, 4), np.int64), np.zeros((0, columns), np.float32), none, none, -1)


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
def decode_transitions(buf, offsets, verify):
    """Decode the transition records ``buf[offsets[i]:offsets[i + 1]]`` as
    :func:`~phylorl.env.batch_kernels.decode_batch` does (``verify`` likewise), in one call.

    Returns ``(ok, rich, arrays, nodes, scalars)``: ``arrays`` decode_batch's ``(sides, node_index, taken,
    taken_meta, compact, labels, counts)`` less ``node_index``, which ``nodes`` gives per side as ``(index, sizes,
    first, uniform)`` (the node count every state has, -1 when they differ); ``scalars`` ``(reward, discount,
    terminal, labelled, versions, any_labelled, bootstraps, moves_uniform)``: float32 rewards and discounts, the
    flags as booleans, each record's policy version, whether a next state is labelled, whether a discount is not
    0, and the move count every next state has (-1 when they differ). ``ok`` is False (the arrays then empty)
    when a record is not in a tree form this pass reads, or is corrupt or invalid: the reference path names it."""
    n = offsets.size - 1
    headers, values, arrays, trees = _first_pass_arrays(n, 2)
    status, rich = _locate(buf, offsets, headers, values, arrays, trees, 2)
    read = n if not status.any() else 0  # a record not read: no arrays (an empty batch's, of the same types)
    status, out = _fill(buf, headers[:read], values[:read], arrays[:2 * read], trees[:2 * read], rich, 2, verify)
    sides, node_index, taken, taken_meta, compact, labels, counts = out
    reward, discount = np.empty(n, np.float32), np.empty(n, np.float32)
    terminal, labelled, versions = np.empty(n, np.bool_), np.empty(n, np.bool_), np.empty(n, np.int64)
    for r in range(n):
        reward[r], discount[r] = values[r, 0], values[r, 1]
        terminal[r], labelled[r] = (headers[r, 0] & TERMINAL) != 0, (headers[r, 0] & LABELLED) != 0
        versions[r] = headers[r, 2]
    nodes = (_with_uniform(node_index[0]), _with_uniform(node_index[1]))
    return read == n and not status.any(), rich, (sides, taken, taken_meta, compact, labels, counts), \
        nodes, (reward, discount, terminal, labelled, versions, labelled.any(), (values[:, 1] != 0).any(),
                _uniform(counts))


@njit(cache=True, nogil=True, inline="always")
def _with_uniform(side):
    index, sizes, first = side
    return index, sizes, first, _uniform(sizes)
