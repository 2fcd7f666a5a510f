"""The learner's and the endpoint's network inputs made with numpy from the features written out (a test
oracle).

:mod:`phylorl.records.collate` makes these inputs from records in one compiled pass; this module makes them
from :func:`oracles.features.observation_arrays` of the decoded observations, array by array, so that tests
can check that pass bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import numpy as np
import torch

from oracles.features import observation_arrays
from phylorl.nets.inputs import ActionBatch, Batch, GraphBatch, move_to
from phylorl.nets.segment import Segments
from phylorl.types import Transition

MAX_DEGREE = 3


def segments(sizes: np.ndarray) -> Segments:
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    index = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    uniform = int(sizes[0]) if sizes.size and bool((sizes == sizes[0]).all()) else None
    return Segments(
        index=torch.from_numpy(index), sizes=torch.from_numpy(sizes), count=int(sizes.size), size=uniform
    )


def _neighbor_table(edge_index: np.ndarray, edge_attr: np.ndarray, n_nodes: int):
    src, dst = edge_index
    order = np.argsort(dst, kind="stable")
    degree = np.bincount(dst, minlength=n_nodes)
    if degree.size and degree.max() > MAX_DEGREE:
        v = int(degree.argmax())
        raise ValueError(
            f"node {v} (global id) has {int(degree[v])} incoming edges; a tree node has at most 3"
        )
    start = np.cumsum(degree) - degree
    slot = np.arange(dst.size) - start[dst[order]]
    neighbors = np.repeat(np.arange(n_nodes, dtype=np.int64)[:, None], MAX_DEGREE, axis=1)
    attr = np.zeros((n_nodes, MAX_DEGREE, edge_attr.shape[1]), dtype=np.float32)
    mask = np.zeros((n_nodes, MAX_DEGREE), dtype=bool)
    neighbors[dst[order], slot] = src[order]
    attr[dst[order], slot] = edge_attr[order]
    mask[dst[order], slot] = True
    return neighbors, attr, mask


def arrays(obs) -> SimpleNamespace:
    """An observation's five arrays (:func:`oracles.features.observation_arrays`) as attributes, with
    ``n_nodes``."""
    return SimpleNamespace(**observation_arrays(obs), n_nodes=obs.n_nodes)


def collate_graphs(observations: Sequence[SimpleNamespace]) -> GraphBatch:
    """Stack the trees of ``observations`` (:func:`arrays`) into one :class:`GraphBatch` (CPU tensors)."""
    if not observations:
        raise ValueError("cannot collate an empty list of observations")
    n_nodes = np.array([o.n_nodes for o in observations], dtype=np.int64)
    offset = np.cumsum(n_nodes) - n_nodes
    total = int(n_nodes.sum())
    for i, o in enumerate(observations):
        m = o.edge_index.shape[1] if o.edge_index.ndim == 2 else -1
        if o.edge_index.shape != (2, m) or o.edge_attr.shape[:1] != (m,) or o.edge_attr.ndim != 2:
            raise ValueError(
                f"observation {i}: edge_index must be [2, M] and edge_attr [M, D]; "
                f"got {o.edge_index.shape} and {o.edge_attr.shape}"
            )
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
            raise ValueError(
                f"state {i}: actions must be [A, 4] and action_meta [A, K]; got {a.shape} and {m.shape}"
            )
        if a.size and (a.min() < 0 or a.max() >= n_nodes[i]):
            raise ValueError(f"state {i}: an action names a node outside 0..{n_nodes[i] - 1}")
    nodes = np.concatenate([a.astype(np.int64, copy=False) + off for a, off in zip(actions, node_offset)])
    meta_all = np.concatenate(meta).astype(np.float32, copy=False)
    return ActionBatch(
        nodes=torch.from_numpy(np.ascontiguousarray(nodes)),
        meta=torch.from_numpy(np.ascontiguousarray(meta_all)),
        states=segments(sizes),
    )


def collate_observations(states) -> tuple[GraphBatch, ActionBatch]:
    """Trees and *all* moves of each observation (CPU tensors), as the endpoint's inputs."""
    observations = [arrays(o) for o in states]
    graphs = collate_graphs(observations)
    actions = collate_actions(
        [o.actions for o in observations],
        [o.action_meta for o in observations],
        graphs.node_offset.numpy(),
        [o.n_nodes for o in observations],
    )
    return graphs, actions


def collate(
    transitions: Sequence[Transition],
    device: torch.device | str = "cpu",
    weights: np.ndarray | None = None,
    pin_memory: bool = False,
) -> Batch:
    """Stack ``transitions`` into a :class:`Batch` on ``device``.

    ``weights``: importance-sampling weights ``[B]`` (default all ones). ``pin_memory``: pin the
    host tensors and copy asynchronously (CUDA devices only; ignored otherwise).
    """
    if not transitions:
        raise ValueError("cannot collate an empty list of transitions")
    b = len(transitions)
    obs = [arrays(t.obs) for t in transitions]
    nxt = [arrays(t.next_obs) for t in transitions]
    for i, t in enumerate(transitions):
        if not 0 <= t.action < t.obs.n_actions:
            raise ValueError(f"transition {i}: action {t.action} outside 0..{t.obs.n_actions - 1}")
        if t.next_obs.n_actions == 0 and not t.terminal:
            raise ValueError(f"transition {i}: next state has no actions but is not terminal")
    graphs = collate_graphs(obs)
    next_graphs = collate_graphs(nxt)
    actions = collate_actions(
        [o.actions[t.action : t.action + 1] for o, t in zip(obs, transitions)],
        [o.action_meta[t.action : t.action + 1] for o, t in zip(obs, transitions)],
        graphs.node_offset.numpy(),
        [o.n_nodes for o in obs],
    )
    next_actions = collate_actions(
        [o.actions for o in nxt],
        [o.action_meta for o in nxt],
        next_graphs.node_offset.numpy(),
        [o.n_nodes for o in nxt],
    )
    if weights is None:
        weights = np.ones(b, dtype=np.float32)
    weights = np.asarray(weights, dtype=np.float32)
    if weights.shape != (b,):
        raise ValueError(f"weights must have shape ({b},), got {weights.shape}")
    batch = Batch(
        graphs=graphs,
        actions=actions,
        next_graphs=next_graphs,
        next_actions=next_actions,
        reward=torch.tensor([t.reward for t in transitions], dtype=torch.float32),
        discount=torch.tensor([t.discount for t in transitions], dtype=torch.float32),
        terminal=torch.tensor([bool(t.terminal) for t in transitions], dtype=torch.bool),
        weights=torch.from_numpy(weights.copy()),
        next_labels=torch.from_numpy(_labels(transitions)),
        next_labelled=torch.tensor([t.next_labels is not None for t in transitions], dtype=torch.bool),
        any_labelled=any(t.next_labels is not None for t in transitions),
        bootstraps=any(t.discount != 0 for t in transitions),
    )
    return move_to(batch, device, pin_memory)


def _labels(transitions: Sequence[Transition]) -> np.ndarray:
    parts: list[np.ndarray] = []
    if all(t.next_labels is None for t in transitions):
        return np.zeros(0, dtype=np.float32)
    for i, t in enumerate(transitions):
        if t.next_labels is None:
            parts.append(np.zeros(t.next_obs.n_actions, dtype=np.float32))
        elif np.shape(t.next_labels) != (t.next_obs.n_actions,):
            raise ValueError(
                f"transition {i}: {np.shape(t.next_labels)} labels for {t.next_obs.n_actions} next moves"
            )
        else:
            parts.append(np.asarray(t.next_labels, dtype=np.float32))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
