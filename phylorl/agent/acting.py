"""Acting: pick one action per state from the twin Q networks, for a batch of the inference endpoint's
requests.

:func:`assemble` makes one batch of many requests' inputs (each request's states collated on its own gRPC
thread): concatenated, node and state ids offset, padded with copies of the last state for a captured graph
(:class:`~phylorl.agent.capture.GraphedActing`), written into one (pinned) staging buffer for one transfer,
with a byte copy per piece (not some sixty torch calls: :mod:`~phylorl.nets.one_call`): bit for bit the block
of the requests' states collated all at once, the last one repeated. :func:`select_actions` answers it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np
import torch
from numba import njit
from torch import Tensor

from phylorl.agent.losses import soft_value
from phylorl.agent.transfer import Block, Stager, byte_view, packed_size
from phylorl.nets.config import NetworkConfig
from phylorl.nets.inputs import ActionBatch, GraphBatch
from phylorl.nets.one_call import one_call
from phylorl.nets.qnet import QNetwork
from phylorl.nets.segment import Segments, segment_argmax
from phylorl.nets.twin import TwinQ


@torch.no_grad()
def select_actions(
    nets: Sequence[QNetwork] | TwinQ,
    graphs: GraphBatch,
    actions: ActionBatch,
    alpha: float,
    greedy: bool,
    generator: torch.Generator | None = None,
    chunk: int | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """One action per state from ``Q = min_i Q_i(s, .)`` over ``nets`` (the twin online networks).

    ``greedy``: the action of highest ``Q``; otherwise a sample of ``softmax(Q / alpha)`` (Gumbel-max, noise
    drawn from ``generator``). Each state must have at least one action. ``chunk``: as in
    :meth:`QNetwork.forward`. ``nets`` may be a :class:`TwinQ` of the twins (the same ``min`` in one pass, for
    acting; ``chunk`` does not apply to it).

    Returns ``(action [G] int64`` index into each state's own action list``, q [G]`` of that
    action``, v [G]`` soft value ``alpha * logsumexp(Q / alpha))``.
    """
    twin = isinstance(nets, TwinQ)
    if not twin and not nets:
        raise ValueError("select_actions needs at least one Q network")
    states = actions.states
    if states.count and int(states.sizes.min()) < 1:
        raise ValueError("every state needs at least one action to select from")
    for net in nets.nets if twin else nets:
        if net.training:
            raise ValueError("select_actions expects networks in eval mode (call .eval())")
    if twin:
        q = nets(graphs, actions)
    else:
        plan = nets[0].plan(graphs, actions)  # input-only tensors, shared by the nets
        q = nets[0](graphs, actions, None, chunk, plan)
        for net in nets[1:]:
            q = torch.minimum(q, net(graphs, actions, None, chunk, plan))
    noise = None if greedy else torch.rand(q.shape, generator=generator, device=q.device, dtype=q.dtype)
    return choose(q, states, alpha, noise)


def choose(
    q: Tensor, states: Segments, alpha: Tensor | float, noise: Tensor | None
) -> tuple[Tensor, Tensor, Tensor]:
    """``(action, q, v)`` per state from every move's ``q`` (as :func:`select_actions` returns them): the move
    of highest ``q`` when ``noise`` is ``None``, else the Gumbel-max sample of ``softmax(q / alpha)`` drawn
    with ``noise`` (uniform ``[A]``). No host sync (it runs inside captured CUDA graphs)."""
    scores = q if noise is None else q / alpha - torch.log(-torch.log(noise))
    chosen = segment_argmax(scores, states)
    starts = torch.cumsum(states.sizes, 0) - states.sizes
    return chosen, q[starts + chosen], soft_value(q, states, alpha)


def pair_tensors(pair) -> dict[str, dict[str, Tensor]]:
    """The tensors of a network pair ``(q1, q2)`` themselves, named as :meth:`Learner.policy_weights` names
    its copies (``state_dict(keep_vars=True)``: no torch call)."""
    return {name: net.state_dict(keep_vars=True) for name, net in zip(("q1", "q2"), pair)}


def write_policy(pair, weights: Mapping[str, Mapping[str, Tensor]]) -> None:
    """Copy ``weights`` (as :func:`policy_networks` takes them; on any device) into the network pair ``pair``
    in one torch call (``load_state_dict`` is one per tensor: :mod:`~phylorl.nets.one_call`). ``ValueError``
    when the tensors are named otherwise."""
    missing = {"q1", "q2"} - set(weights)
    if missing:
        raise ValueError(f"policy weights lack {sorted(missing)}")
    targets, sources = [], []
    for name, own in pair_tensors(pair).items():
        state = weights[name]
        if state.keys() != own.keys():
            raise ValueError(
                f"policy weights {name}: keys differ from the network's: {sorted(set(state) ^ set(own))}"
            )
        targets += own.values()
        sources += (state[k] for k in own)
    with torch.no_grad():
        torch._foreach_copy_(targets, sources)


def policy_networks(
    cfg: NetworkConfig, weights: Mapping[str, Mapping[str, Tensor]], device: torch.device | str = "cpu"
) -> tuple[QNetwork, QNetwork]:
    """The twin online networks in eval mode from :meth:`Learner.policy_weights` (``q1``, ``q2``)."""
    pair = QNetwork(cfg).to(device).eval(), QNetwork(cfg).to(device).eval()
    write_policy(pair, weights)
    return pair


def answers_on_host(chosen: Tensor, q: Tensor, v: Tensor, count: int) -> tuple[Tensor, Tensor, Tensor]:
    """The first ``count`` answers of :func:`select_actions` (or of a padded batch's graph) copied to the
    host, in one torch call (waiting for the device) instead of six (:mod:`phylorl.nets.one_call`)."""
    return _on_host()(chosen, q, v, count)[:3]


def _answers_kept(
    chosen: Tensor, q: Tensor, v: Tensor, count: int
) -> tuple[Tensor, Tensor, Tensor, list[Tensor]]:
    """The first ``count`` of each on the host; the arguments returned too (kept to the end of the call)."""
    return chosen[:count].cpu(), q[:count].cpu(), v[:count].cpu(), [chosen, q, v]


@functools.cache
def _on_host():
    return one_call(_answers_kept)


_META = torch.device("meta")
_SKELETONS: dict = {}
"""Batch skeletons (meta tensors: shapes and dtypes) by layout, with their :func:`packed_size`, made once
(making one is a dozen torch calls)."""


def _shape(t, rows: int):
    return torch.empty((rows, *t.shape[1:]), dtype=t.dtype, device=_META)


def _segments(sizes: np.ndarray, rows: int, size: int | None) -> Segments:
    return Segments(
        index=torch.empty(rows, dtype=torch.int64, device=_META),
        sizes=torch.empty(sizes.size, dtype=torch.int64, device=_META),
        count=int(sizes.size),
        size=size,
    )


@njit(cache=True)  # (not nogil: the batching thread keeps the interpreter lock through it)
def _add(flat: np.ndarray, bounds: np.ndarray, shifts: np.ndarray) -> None:
    for i in range(shifts.size):
        for j in range(bounds[i], bounds[i + 1]):
            flat[j] += shifts[i]


def _fill(out: np.ndarray, pieces: list, shifts: list | None = None) -> None:
    """``out`` (a contiguous view of the buffer) = the pieces one after another along axis 0, each plus its
    shift (ids made global). Copied as bytes through memoryviews and shifted by a compiled loop, both holding
    the interpreter lock: numpy's copies and additions let it go for every large array, and the batching
    thread then waits for it once per piece behind the learner's threads."""
    dst = memoryview(out.reshape(-1).view(np.uint8))
    at = 0
    bounds = [0]
    for piece in pieces:
        if piece.size:
            src = byte_view(piece)
            dst[at : at + src.nbytes] = src
            at += src.nbytes
        bounds.append(bounds[-1] + piece.size)
    if shifts is not None:
        _add(out.reshape(-1), np.asarray(bounds, dtype=np.int64), np.asarray(shifts, dtype=out.dtype))


def assemble(parts: Sequence[tuple[GraphBatch, ActionBatch]], count: int, stager: Stager) -> Block:
    """``parts`` (collated ``(graphs, actions)``, CPU tensors) as one batch of ``count`` states (the last
    state repeated to fill it) written into ``stager``'s buffer. The block is valid until ``stager`` is used
    again."""
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

    def padded(tensors: list, rows: int) -> list:  # the parts' arrays + the last state's rows, once per copy
        arrays = [t.numpy() for t in tensors]
        return arrays + [arrays[-1][arrays[-1].shape[0] - rows :]] * extra

    node_sizes = np.concatenate([g.nodes.sizes.numpy() for g in graphs] + [np.full(extra, n_last, np.int64)])
    move_sizes = np.concatenate(
        [a.states.sizes.numpy() for a in actions] + [np.full(extra, a_last, np.int64)]
    )
    n_total, a_total = int(node_sizes.sum()), int(move_sizes.sum())
    e_pad = int(in_last.sum())
    e_total = sum(g.edge_index.shape[1] for g in graphs) + extra * e_pad
    g0, a0 = graphs[0], actions[0]
    uniform = [int(s[0]) if s.size and (s == s[0]).all() else None for s in (node_sizes, move_sizes)]
    fields = (g0.x, g0.edge_index, g0.edge_attr, g0.neighbors, g0.neighbor_attr, g0.neighbor_mask)
    fields += (g0.node_offset, a0.nodes, a0.meta)
    key = (n_total, e_total, a_total, count, *uniform, *((tuple(t.shape[1:]), t.dtype) for t in fields))
    found = _SKELETONS.get(key)
    if found is None:
        if len(_SKELETONS) >= 256:
            _SKELETONS.clear()
        skeleton = (
            GraphBatch(
                x=_shape(g0.x, n_total),
                edge_index=torch.empty((2, e_total), dtype=g0.edge_index.dtype, device=_META),
                edge_attr=_shape(g0.edge_attr, e_total),
                neighbors=_shape(g0.neighbors, n_total),
                neighbor_attr=_shape(g0.neighbor_attr, n_total),
                neighbor_mask=_shape(g0.neighbor_mask, n_total),
                node_offset=_shape(g0.node_offset, count),
                nodes=_segments(node_sizes, n_total, uniform[0]),
            ),
            ActionBatch(
                nodes=_shape(a0.nodes, a_total),
                meta=_shape(a0.meta, a_total),
                states=_segments(move_sizes, a_total, uniform[1]),
            ),
        )
        found = _SKELETONS[key] = (skeleton, packed_size(skeleton))
    block, out = stager.reserve(*found)
    x, edge_index, edge_attr, neighbors, neighbor_attr, mask, node_offset = out[:7]
    node_index, node_sizes_out, moves, meta, move_index, move_sizes_out = out[7:]
    # shifts: part i by its first node (graph) id; copy k of the last state k trees further
    node_shift = list(node_base[:-1]) + [node_base[-2] + k * n_last for k in copies]
    graph_shift = list(graph_base[:-1]) + [graph_base[-2] + k for k in copies]
    _fill(x, padded([g.x for g in graphs], n_last))
    edge_pieces = [g.edge_index.numpy() for g in graphs] + [last_edges[:, in_last]] * extra
    for side in range(2):  # sources, then targets
        _fill(edge_index[side], [p[side] for p in edge_pieces], node_shift)
    _fill(edge_attr, [g.edge_attr.numpy() for g in graphs] + [last_g.edge_attr.numpy()[in_last]] * extra)
    _fill(neighbors, padded([g.neighbors for g in graphs], n_last), node_shift)
    _fill(neighbor_attr, padded([g.neighbor_attr for g in graphs], n_last))
    _fill(mask, padded([g.neighbor_mask for g in graphs], n_last))
    _fill(node_offset, padded([g.node_offset for g in graphs], 1), node_shift)
    _fill(node_index, padded([g.nodes.index for g in graphs], n_last), graph_shift)
    node_sizes_out[:] = node_sizes
    _fill(moves, padded([a.nodes for a in actions], a_last), node_shift)
    _fill(meta, padded([a.meta for a in actions], a_last))
    _fill(move_index, padded([a.states.index for a in actions], a_last), graph_shift)
    move_sizes_out[:] = move_sizes
    return block
