"""Network inputs: many trees and their action sets as flat tensors, collated with numpy.

A batch of ``G`` observations becomes one disconnected graph of ``N`` nodes (node ids offset per
tree, as PyG batches graphs) plus, for the fast path, a dense neighbour table: every tree node has
at most 3 neighbours, so ``neighbors[v]`` lists them in 3 slots (padding repeats ``v`` itself and is
masked out). Actions of all states are stacked with their node ids offset the same way and a
segment id naming the state they belong to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from phylorl.types import Observation, check_observation  # noqa: F401 (the endpoint's check)
from phylorl.nets.segment import Segments

MAX_DEGREE = 3


@dataclass
class GraphBatch:
    """``G`` trees as one graph.

    ``x``             float32 ``[N, F]``   node features.
    ``edge_index``    int64   ``[2, M]``   directed edges (source, target), global node ids.
    ``edge_attr``     float32 ``[M, D]``   edge features (branch length).
    ``neighbors``     int64   ``[N, 3]``   sources of the edges into each node; padding = the node.
    ``neighbor_attr`` float32 ``[N, 3, D]`` features of those edges (0 in padding).
    ``neighbor_mask`` bool    ``[N, 3]``   which slots hold a real edge.
    ``node_offset``   int64   ``[G]``      global id of each tree's node 0.
    ``nodes``         :class:`Segments` of the ``N`` nodes over the ``G`` trees.
    """

    x: Tensor
    edge_index: Tensor
    edge_attr: Tensor
    neighbors: Tensor
    neighbor_attr: Tensor
    neighbor_mask: Tensor
    node_offset: Tensor
    nodes: Segments

    @property
    def num_graphs(self) -> int:
        return self.nodes.count


@dataclass
class ActionBatch:
    """Actions of ``G`` states, stacked.

    ``nodes``   int64   ``[A, 4]``  move ``(p, s, x, y)`` as global node ids of the matching tree.
    ``meta``    float32 ``[A, K]``  per-move metadata.
    ``states``  :class:`Segments` of the ``A`` actions over the ``G`` states.
    """

    nodes: Tensor
    meta: Tensor
    states: Segments


def map_tensors(obj, fn: Callable[[Tensor], Tensor]):
    """Apply ``fn`` to every tensor inside nested dataclasses, tuples and lists (returns new ones)."""
    if isinstance(obj, Tensor):
        return fn(obj)
    if isinstance(obj, (tuple, list)):
        return type(obj)(map_tensors(item, fn) for item in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: map_tensors(getattr(obj, f.name), fn) for f in dataclasses.fields(obj)}
        return dataclasses.replace(obj, **changes)
    return obj


def move_to(obj, device: torch.device | str, pin_memory: bool = False):
    """Copy every tensor of ``obj`` to ``device`` (pinned first and copied asynchronously when
    ``pin_memory`` and ``device`` is a CUDA device)."""
    device = torch.device(device)
    if device.type == "cuda" and pin_memory:
        return map_tensors(obj, lambda t: t.pin_memory().to(device, non_blocking=True))
    return map_tensors(obj, lambda t: t.to(device))


def segments(sizes: np.ndarray, index: np.ndarray | None = None) -> Segments:
    """:class:`Segments` of rows grouped ``sizes[i]`` at a time into segment ``i`` (``index``: each row's
    segment, when the caller has it already)."""
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    if index is None:
        index = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    return Segments(
        index=torch.from_numpy(index),
        sizes=torch.from_numpy(sizes),
        count=int(sizes.size),
        size=uniform_size(sizes),
    )


def uniform_size(sizes: np.ndarray) -> int | None:
    """The size every segment has, or ``None`` when they differ (or there is none)."""
    return int(sizes[0]) if sizes.size > 0 and bool((sizes == sizes[0]).all()) else None


def _neighbor_table(edge_index: np.ndarray, edge_attr: np.ndarray, n_nodes: int):
    src, dst = edge_index
    order = np.argsort(dst, kind="stable")
    degree = np.bincount(dst, minlength=n_nodes)
    if degree.size and degree.max() > MAX_DEGREE:
        v = int(degree.argmax())
        raise ValueError(f"node {v} (global id) has {int(degree[v])} incoming edges; a tree node has at most 3")
    start = np.cumsum(degree) - degree
    slot = np.arange(dst.size) - start[dst[order]]
    neighbors = np.repeat(np.arange(n_nodes, dtype=np.int64)[:, None], MAX_DEGREE, axis=1)
    attr = np.zeros((n_nodes, MAX_DEGREE, edge_attr.shape[1]), dtype=np.float32)
    mask = np.zeros((n_nodes, MAX_DEGREE), dtype=bool)
    neighbors[dst[order], slot] = src[order]
    attr[dst[order], slot] = edge_attr[order]
    mask[dst[order], slot] = True
    return neighbors, attr, mask


def collate_graphs(observations: Sequence[Observation]) -> GraphBatch:
    """Stack the trees of ``observations`` into one :class:`GraphBatch` (CPU tensors)."""
    if not observations:
        raise ValueError("cannot collate an empty list of observations")
    n_nodes = np.array([o.n_nodes for o in observations], dtype=np.int64)
    offset = np.cumsum(n_nodes) - n_nodes
    total = int(n_nodes.sum())
    for i, o in enumerate(observations):
        m = o.edge_index.shape[1] if o.edge_index.ndim == 2 else -1
        if o.edge_index.shape != (2, m) or o.edge_attr.shape[:1] != (m,) or o.edge_attr.ndim != 2:
            raise ValueError(f"observation {i}: edge_index must be [2, M] and edge_attr [M, D]; "
                             f"got {o.edge_index.shape} and {o.edge_attr.shape}")
        if m and (o.edge_index.min() < 0 or o.edge_index.max() >= o.n_nodes):
            raise ValueError(f"observation {i}: edge_index names a node outside 0..{o.n_nodes - 1}")
    x = np.concatenate([o.node_features for o in observations]).astype(np.float32, copy=False)
    edge_index = np.concatenate(
        [o.edge_index.astype(np.int64, copy=False) + off for o, off in zip(observations, offset)], axis=1
    )
    edge_attr = np.concatenate([o.edge_attr for o in observations]).astype(np.float32, copy=False)
    if (edge_index[0] == edge_index[1]).any():
        raise ValueError("edge_index holds a self loop; a tree has none")
    neighbors, nattr, mask = _neighbor_table(edge_index, edge_attr, total)
    return GraphBatch(
        x=torch.from_numpy(np.ascontiguousarray(x)),
        edge_index=torch.from_numpy(edge_index),
        edge_attr=torch.from_numpy(np.ascontiguousarray(edge_attr)),
        neighbors=torch.from_numpy(neighbors),
        neighbor_attr=torch.from_numpy(nattr),
        neighbor_mask=torch.from_numpy(mask),
        node_offset=torch.from_numpy(offset),
        nodes=segments(n_nodes),
    )


def collate_actions(
    actions: Sequence[np.ndarray], meta: Sequence[np.ndarray], node_offset: np.ndarray, n_nodes: Sequence[int]
) -> ActionBatch:
    """Stack per-state action arrays (``[A_i, 4]`` local node ids, ``[A_i, K]`` metadata).

    ``node_offset[i]`` is added to state ``i``'s node ids; ``n_nodes[i]`` bounds them.
    """
    sizes = np.array([a.shape[0] for a in actions], dtype=np.int64)
    for i, (a, m) in enumerate(zip(actions, meta)):
        if a.ndim != 2 or a.shape[1] != 4 or m.ndim != 2 or m.shape[0] != a.shape[0]:
            raise ValueError(f"state {i}: actions must be [A, 4] and action_meta [A, K]; "
                             f"got {a.shape} and {m.shape}")
        if a.size and (a.min() < 0 or a.max() >= n_nodes[i]):
            raise ValueError(f"state {i}: an action names a node outside 0..{n_nodes[i] - 1}")
    nodes = np.concatenate([a.astype(np.int64, copy=False) + off for a, off in zip(actions, node_offset)])
    meta_all = np.concatenate(meta).astype(np.float32, copy=False)
    return ActionBatch(
        nodes=torch.from_numpy(np.ascontiguousarray(nodes)),
        meta=torch.from_numpy(np.ascontiguousarray(meta_all)),
        states=segments(sizes),
    )


def collate_observations(observations: Sequence[Observation]) -> tuple[GraphBatch, ActionBatch]:
    """Trees and *all* actions of each observation (CPU tensors), e.g. for acting."""
    graphs = collate_graphs(observations)
    actions = collate_actions(
        [o.actions for o in observations],
        [o.action_meta for o in observations],
        graphs.node_offset.numpy(),
        [o.n_nodes for o in observations],
    )
    return graphs, actions
