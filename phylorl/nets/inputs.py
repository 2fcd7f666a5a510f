"""Network inputs: many trees and their moves as flat tensors, and the learner's batch of transitions.

``G`` trees are one disconnected graph of ``N`` nodes (node ids offset per tree, as PyG batches graphs) plus a
dense neighbour table of 3 slots per node (padding repeats the node itself, masked out). The moves of all
states are stacked with their node ids offset the same way and the state each belongs to.
:mod:`phylorl.records.collate` makes them from records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from phylorl.nets.segment import Segments


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


@dataclass
class Batch:
    """``B`` transitions ready for the learner (all tensors on one device).

    ``graphs``        trees of the states ``s``.
    ``actions``       the action taken in each ``s`` (one per state, so ``A = B``).
    ``next_graphs``   trees of the next states ``s'``.
    ``next_actions``  *all* actions of each ``s'`` (``next_actions.states`` groups them); on the host they
                      may be :class:`~phylorl.nets.compact_actions.CompactActions`, expanded where the update
                      runs.
    ``reward``        float32 ``[B]``.
    ``discount``      float32 ``[B]``, applied to ``V(s')`` (``gamma**k`` for ``k``-step).
    ``terminal``      bool ``[B]``, true end of the task (no bootstrap); truncation is not terminal.
    ``weights``       float32 ``[B]``, importance-sampling weights of prioritised replay.
    ``next_labels``   float32 ``[A']``, demonstration label of every action of ``next_actions`` (0
                      where its state is unlabelled); ``[0]`` when no next state is labelled
                      (``any_labelled`` false: nothing reads them, and none are made or copied).
    ``next_labelled`` bool ``[B]``, whether ``s'`` carries labels.
    """

    graphs: GraphBatch
    actions: ActionBatch
    next_graphs: GraphBatch
    next_actions: object  # ActionBatch | CompactActions
    reward: Tensor
    discount: Tensor
    terminal: Tensor
    weights: Tensor
    next_labels: Tensor
    next_labelled: Tensor
    any_labelled: bool = True
    """Whether any next state carries labels (known on the host)."""
    bootstraps: bool = True
    """Whether any transition's target bootstraps (a discount other than 0; known on the host)."""

    @property
    def size(self) -> int:
        return int(self.reward.shape[0])
