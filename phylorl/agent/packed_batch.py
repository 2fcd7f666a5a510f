"""Sampled replay records -> a learner :class:`~phylorl.agent.batch.Batch`, in one compiled pass.

:func:`collate_records` is the learner's fast path from a sampled batch of packed records
(:class:`~phylorl.wire.codec.PackedRecords`) to tensors: no :class:`~phylorl.types.Transition`
or observation object is built; :mod:`phylorl.env.batch_kernels` writes the batch arrays straight
from the records' bytes. It gives exactly what ``collate([decode_transition(r) for r in records])``
gives, and returns ``None`` for a batch holding any record it does not read (the arrays form,
stored node features, a corrupt record): the caller then takes that reference path, which reads
every form and names what is wrong with a corrupt record. (A record whose stored taken row disagrees with
its state is what the replay's insert check rejects; see :func:`collate_records`.)
"""

from __future__ import annotations

import numpy as np
import torch

from phylorl.env.move_kernels import BASIC_LAYOUT, RICH_LAYOUT
from phylorl.env.state_kernels import decode_states, decode_transitions
from phylorl.nets.compact_actions import CompactActions
from phylorl.nets.inputs import ActionBatch, GraphBatch, move_to
from phylorl.nets.segment import Segments
from phylorl.wire.codec import PackedRecords

from .batch import Batch, on_device


def collate_records(records: PackedRecords, device: torch.device | str = "cpu", weights: np.ndarray | None = None,
                    pin_memory: bool = False, compact: bool = False, verify: bool = False
                    ) -> tuple[Batch, np.ndarray] | None:
    """``(batch, policy_versions)`` of ``records`` on ``device``, or ``None`` when a record is not in a
    tree form this path reads (see the module docstring). ``weights``: importance-sampling weights ``[B]``.
    ``compact``: the batch's ``next_actions`` stay :class:`~phylorl.nets.compact_actions.CompactActions`
    (a fifth of the bytes; :func:`~phylorl.agent.batch.on_device` expands them where they go).

    A record's stored taken row (:mod:`phylorl.wire.record`, version 4) and its ranked parsimony changes' counts
    (version 5) are read as they are: the replay service checks them against the state when the record is inserted
    (``validate_records``), and the state's moves are then not enumerated nor counted again here. ``verify``:
    check them here too (a record whose row or counts differ from its state's then sends the batch to the
    reference path, which names it)."""
    n = len(records)
    if n == 0:
        raise ValueError("cannot collate an empty batch of records")
    if weights is None:
        weights = np.ones(n, dtype=np.float32)
    else:
        weights = np.array(weights, dtype=np.float32)  # a copy: the batch owns its tensors
        if weights.shape != (n,):
            raise ValueError(f"weights must have shape ({n},), got {weights.shape}")
    ok, rich, arrays, nodes, scalars = decode_transitions(
        np.frombuffer(records.data, dtype=np.uint8), np.ascontiguousarray(records.offsets, dtype=np.int64), verify)
    if not ok:
        return None
    sides, taken, taken_meta, moves, labels, counts = arrays
    reward, discount, terminal, labelled, versions, any_labelled, bootstraps, moves_uniform = scalars
    batch = Batch(
        graphs=_graph_batch(sides[0], nodes[0]),
        actions=ActionBatch(torch.from_numpy(taken), torch.from_numpy(taken_meta), _one_each(n)),
        next_graphs=_graph_batch(sides[1], nodes[1]),
        next_actions=CompactActions(*(torch.from_numpy(a) for a in moves), _COLUMNS[bool(rich)],
                                    torch.from_numpy(counts), None if moves_uniform < 0 else int(moves_uniform)),
        reward=torch.from_numpy(reward), discount=torch.from_numpy(discount), terminal=torch.from_numpy(terminal),
        weights=torch.from_numpy(weights), next_labels=torch.from_numpy(labels),
        next_labelled=torch.from_numpy(labelled), any_labelled=bool(any_labelled), bootstraps=bool(bootstraps),
    )
    if compact:  # the tensors are fresh host tensors: a CPU batch is ready as it is (no walk over its fields)
        batch = batch if torch.device(device).type == "cpu" else move_to(batch, device, pin_memory)
    else:
        batch = on_device(batch, device, pin_memory)
    return batch, versions


def collate_states(records: PackedRecords) -> tuple[GraphBatch, ActionBatch, bool] | None:
    """Trees and all moves of the states in observation records (CPU tensors) plus whether they carry the
    rich features, as :func:`~phylorl.nets.inputs.collate_observations` makes them from the decoded
    observations, in one compiled call (:func:`~phylorl.env.state_kernels.decode_states`); ``None`` when a
    record is not in a tree form this path reads, or a state holds a non-finite feature or no move (the
    reference path then names what is wrong)."""
    n = len(records)
    if n == 0:
        raise ValueError("cannot collate an empty batch of observation records")
    # verified: an actor's states are checked here, as the replay's insert check does for stored records
    ok, rich, graph, nodes, moves = decode_states(np.frombuffer(records.data, dtype=np.uint8),
                                                  np.ascontiguousarray(records.offsets, dtype=np.int64),
                                                  _LAYOUTS[True], _LAYOUTS[False])
    if not ok:
        return None
    graphs = _graph_batch(graph, nodes)
    actions = ActionBatch(torch.from_numpy(moves[0]), torch.from_numpy(moves[1]), _segments(*moves[2:]))
    return graphs, actions, bool(rich)


def _segments(index: np.ndarray, sizes: np.ndarray, uniform: int) -> Segments:
    return Segments(index=torch.from_numpy(index), sizes=torch.from_numpy(sizes), count=int(sizes.shape[0]),
                    size=None if uniform < 0 else int(uniform))


_COLUMNS = {True: torch.tensor(RICH_LAYOUT), False: torch.tensor(BASIC_LAYOUT)}
_LAYOUTS = {rich: columns.numpy() for rich, columns in _COLUMNS.items()}


def _one_each(n: int) -> Segments:
    """Segments of one row each (the taken move of each state)."""
    return Segments(index=torch.arange(n), sizes=torch.ones(n, dtype=torch.int64), count=n, size=1)


def _graph_batch(side, nodes) -> GraphBatch:
    x, edge_index, edge_attr, neighbors, neighbor_attr, mask = (torch.from_numpy(a) for a in side)
    return GraphBatch(x=x, edge_index=edge_index, edge_attr=edge_attr, neighbors=neighbors,
                      neighbor_attr=neighbor_attr, neighbor_mask=mask, node_offset=torch.from_numpy(nodes[2]),
                      nodes=_segments(nodes[0], nodes[1], nodes[3]))


def compile_kernels(seed: int = 0) -> int:
    """Compile the record passes (and let numba cache them on disk) on a few records of a small simulated
    alignment, as the first sampled batch, ``Act`` call and checked ``Insert`` would: about two minutes once per
    install instead of a stall of every service's first batch. Returns the records it decoded."""
    from phylorl.env.config import EnvConfig
    from phylorl.env.prepare import prepare_alignment
    from phylorl.env.tree_env import EnvAlignment, TreeEnv
    from phylorl.env.batch_kernels import records_valid
    from phylorl.phylo.simulate import simulate_dataset
    from phylorl.types import Transition
    from phylorl.wire.record import encode_observation, encode_transition

    alignment = simulate_dataset(6, 100, np.random.default_rng(seed)).alignment
    env = TreeEnv([EnvAlignment.build(alignment, prepare_alignment(alignment, "JC"), "warm-up")],
                  EnvConfig(horizon=4), seed=seed)
    obs, _ = env.reset()
    nxt, reward, terminal, truncated, _ = env.step(0)
    records = PackedRecords.from_records([encode_transition(Transition(obs, 0, reward, nxt, terminal, truncated))])
    states = PackedRecords.from_records([encode_observation(obs)])
    if collate_records(records) is None or collate_states(states) is None \
            or not records_valid(np.frombuffer(records.data, dtype=np.uint8), records.offsets):
        raise RuntimeError("the compiled record passes declined records the environment made")
    return len(records) + len(states)
