"""A batch of the inference endpoint's requests, assembled in one pass into one staging buffer.

The endpoint answers many requests at once: their network inputs (each request's states collated on its own
gRPC thread) are concatenated, node and state ids offset, padded with copies of the last state for a captured
graph (:mod:`phylorl.agent.acting_graphs`), and packed into one (pinned) buffer for one transfer. Done with
tensors that was some sixty operations, each of which hands the interpreter lock round the learner's threads: on
an H200 in the running system 12 ms a batch, more than the network itself took once replayed as a graph.
:func:`assemble` does it with a byte copy per piece straight into the buffer: bit for bit the block of the
requests' observations collated all at once, the last one repeated (tests compare them, layout included).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from numba import njit

from phylorl.agent.batch_transfer import Block, Stager, byte_view, packed_size
from phylorl.nets.inputs import ActionBatch, GraphBatch
from phylorl.nets.segment import Segments

_META = torch.device("meta")
_SKELETONS: dict = {}
"""Batch skeletons (meta tensors: shapes and dtypes) by layout, with their :func:`packed_size`, made once: making
one is a dozen tensor operations, each a chance for the learner's threads to take the interpreter lock."""


def _shape(t, rows: int):
    return torch.empty((rows, *t.shape[1:]), dtype=t.dtype, device=_META)


def _segments(sizes: np.ndarray, rows: int, size: int | None) -> Segments:
    return Segments(index=torch.empty(rows, dtype=torch.int64, device=_META),
                    sizes=torch.empty(sizes.size, dtype=torch.int64, device=_META), count=int(sizes.size), size=size)


@njit(cache=True)  # (not nogil: the batching thread keeps the interpreter lock through it)
def _add(flat: np.ndarray, bounds: np.ndarray, shifts: np.ndarray) -> None:
    for i in range(shifts.size):
        for j in range(bounds[i], bounds[i + 1]):
            flat[j] += shifts[i]


def _fill(out: np.ndarray, pieces: list, shifts: list | None = None) -> None:
    """``out`` (a contiguous view of the buffer) = the pieces one after another along axis 0, each plus its shift
    (ids made global). Copied as bytes through memoryviews and shifted by a compiled loop, both holding the
    interpreter lock: numpy's copies and additions let it go for every large array, and the batching thread then
    waits for it once per piece behind the learner's threads (on a 2-core machine with two busy threads: 150 ms a
    batch instead of 0.6)."""
    dst = memoryview(out.reshape(-1).view(np.uint8))
    at = 0
    bounds = [0]
    for piece in pieces:
        if piece.size:
            src = byte_view(piece)
            dst[at: at + src.nbytes] = src
            at += src.nbytes
        bounds.append(bounds[-1] + piece.size)
    if shifts is not None:
        _add(out.reshape(-1), np.asarray(bounds, dtype=np.int64), np.asarray(shifts, dtype=out.dtype))


def assemble(parts: Sequence[tuple[GraphBatch, ActionBatch]], count: int, stager: Stager) -> Block:
    """``parts`` (collated ``(graphs, actions)``, CPU tensors) as one batch of ``count`` states (the last state
    repeated to fill it) written into ``stager``'s buffer. The block is valid until ``stager`` is used again."""
    graphs = [g for g, _ in parts]
    actions = [a for _, a in parts]
    have = sum(g.num_graphs for g in graphs)
    extra = count - have
    if not parts or extra < 0:
        raise ValueError(f"cannot assemble {have} states into a batch of {count}")
    last_g, last_a = graphs[-1], actions[-1]
    n_last = int(last_g.nodes.sizes.numpy()[-1])
    a_last = int(last_a.states.sizes.numpy()[-1])
    n_rows = [g.x.shape[0] for g in graphs]
    node_base = np.cumsum([0] + n_rows)  # each part's first global node id; [-1]: the padding's first
    graph_base = np.cumsum([0] + [g.num_graphs for g in graphs])
    node0 = n_rows[-1] - n_last  # the last tree's first node, within its part
    last_edges = last_g.edge_index.numpy()
    in_last = last_edges[1] >= node0
    copies = range(1, extra + 1)

    def padded(t: torch.Tensor, rows: int, pieces: list) -> list:  # + the last state's rows, once per copy
        return pieces + [t.numpy()[t.shape[0] - rows:]] * extra

    node_sizes = np.concatenate([g.nodes.sizes.numpy() for g in graphs] + [np.full(extra, n_last, np.int64)])
    move_sizes = np.concatenate([a.states.sizes.numpy() for a in actions] + [np.full(extra, a_last, np.int64)])
    n_total, a_total = int(node_sizes.sum()), int(move_sizes.sum())
    e_pad = int(in_last.sum())
    e_total = sum(g.edge_index.shape[1] for g in graphs) + extra * e_pad
    g0, a0 = graphs[0], actions[0]
    uniform = [int(s[0]) if s.size and (s == s[0]).all() else None for s in (node_sizes, move_sizes)]
    fields = (g0.x, g0.edge_index, g0.edge_attr, g0.neighbors, g0.neighbor_attr, g0.neighbor_mask, g0.node_offset,
              a0.nodes, a0.meta)
    key = (n_total, e_total, a_total, count, *uniform, *((tuple(t.shape[1:]), t.dtype) for t in fields))
    found = _SKELETONS.get(key)
    if found is None:
        if len(_SKELETONS) >= 256:
            _SKELETONS.clear()
        skeleton = (
            GraphBatch(x=_shape(g0.x, n_total),
                       edge_index=torch.empty((2, e_total), dtype=g0.edge_index.dtype, device=_META),
                       edge_attr=_shape(g0.edge_attr, e_total), neighbors=_shape(g0.neighbors, n_total),
                       neighbor_attr=_shape(g0.neighbor_attr, n_total),
                       neighbor_mask=_shape(g0.neighbor_mask, n_total),
                       node_offset=_shape(g0.node_offset, count), nodes=_segments(node_sizes, n_total, uniform[0])),
            ActionBatch(nodes=_shape(a0.nodes, a_total), meta=_shape(a0.meta, a_total),
                        states=_segments(move_sizes, a_total, uniform[1])))
        found = _SKELETONS[key] = (skeleton, packed_size(skeleton))
    block, out = stager.reserve(*found)
    (x, edge_index, edge_attr, neighbors, neighbor_attr, mask, node_offset, node_index, node_sizes_out,
     moves, meta, move_index, move_sizes_out) = out
    # shifts: part i by its first node (graph) id; copy k of the last state k trees further
    node_shift = list(node_base[:-1]) + [node_base[-2] + k * n_last for k in copies]
    graph_shift = list(graph_base[:-1]) + [graph_base[-2] + k for k in copies]
    _fill(x, padded(last_g.x, n_last, [g.x.numpy() for g in graphs]))
    edge_pieces = [g.edge_index.numpy() for g in graphs] + [last_edges[:, in_last]] * extra
    for side in range(2):  # sources, then targets
        _fill(edge_index[side], [p[side] for p in edge_pieces], node_shift)
    _fill(edge_attr, [g.edge_attr.numpy() for g in graphs] + [last_g.edge_attr.numpy()[in_last]] * extra)
    _fill(neighbors, padded(last_g.neighbors, n_last, [g.neighbors.numpy() for g in graphs]), node_shift)
    _fill(neighbor_attr, padded(last_g.neighbor_attr, n_last, [g.neighbor_attr.numpy() for g in graphs]))
    _fill(mask, padded(last_g.neighbor_mask, n_last, [g.neighbor_mask.numpy() for g in graphs]))
    _fill(node_offset, padded(last_g.node_offset, 1, [g.node_offset.numpy() for g in graphs]), node_shift)
    _fill(node_index, padded(last_g.nodes.index, n_last, [g.nodes.index.numpy() for g in graphs]), graph_shift)
    node_sizes_out[:] = node_sizes
    _fill(moves, padded(last_a.nodes, a_last, [a.nodes.numpy() for a in actions]), node_shift)
    _fill(meta, padded(last_a.meta, a_last, [a.meta.numpy() for a in actions]))
    _fill(move_index, padded(last_a.states.index, a_last, [a.states.index.numpy() for a in actions]), graph_shift)
    move_sizes_out[:] = move_sizes
    return block
