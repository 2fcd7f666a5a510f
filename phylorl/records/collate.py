"""Batches of records as the network's tensors: the learner's sampled batches and the inference endpoint's
requests.

:func:`collate_records` turns sampled transition records into a learner :class:`~phylorl.nets.inputs.Batch`
and :func:`collate_states` an inference request's observation records into the network's inputs, each in one
compiled call (:mod:`phylorl.records.decode`) that lets the interpreter lock go once and writes the arrays
straight from the records' bytes. A record that cannot be read, or is not a valid transition or state, is
named with the first thing wrong with it (``ValueError``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from phylorl.nets.compact_actions import CompactActions
from phylorl.nets.inputs import ActionBatch, Batch, GraphBatch
from phylorl.nets.segment import Segments

from .decode import check_records, decode_states, decode_transitions, raise_first
from .format import PackedRecords
from .moves import BASIC_LAYOUT, RICH_LAYOUT, expand_moves


def collate_records(
    records: PackedRecords, weights: np.ndarray | None = None, verify: bool = False
) -> tuple[Batch, np.ndarray]:
    """``(batch, policy_versions)`` of transition records: host tensors, the next states' moves as
    :class:`~phylorl.nets.compact_actions.CompactActions` (a fifth of the bytes; expanded where the update
    runs: :func:`~phylorl.agent.transfer.on_device`). ``weights``: importance-sampling weights ``[B]``.
    ``verify``: as :func:`decode_transitions`. ``ValueError`` names the first record that is not a valid
    transition."""
    n = len(records)
    if n == 0:
        raise ValueError("cannot collate an empty batch of records")
    if weights is None:
        weights = np.ones(n, dtype=np.float32)
    else:
        weights = np.array(weights, dtype=np.float32)  # a copy: the batch owns its tensors
        if weights.shape != (n,):
            raise ValueError(f"weights must have shape ({n},), got {weights.shape}")
    status, rich, arrays, nodes, scalars = decode_transitions(records.buffer, records.offsets, verify)
    raise_first(status, "record")
    sides, taken, taken_meta, moves, labels, counts = arrays
    reward, discount, terminal, labelled, versions, any_labelled, bootstraps, moves_uniform = scalars
    batch = Batch(
        graphs=_graph_batch(sides[0], nodes[0]),
        actions=ActionBatch(torch.from_numpy(taken), torch.from_numpy(taken_meta), _one_each(n)),
        next_graphs=_graph_batch(sides[1], nodes[1]),
        next_actions=CompactActions(
            *(torch.from_numpy(a) for a in moves),
            _COLUMNS[bool(rich)],
            torch.from_numpy(counts),
            None if moves_uniform < 0 else int(moves_uniform),
        ),
        reward=torch.from_numpy(reward),
        discount=torch.from_numpy(discount),
        terminal=torch.from_numpy(terminal),
        weights=torch.from_numpy(weights),
        next_labels=torch.from_numpy(labels),
        next_labelled=torch.from_numpy(labelled),
        any_labelled=bool(any_labelled),
        bootstraps=bool(bootstraps),
    )
    return batch, versions


def collate_states(records: PackedRecords) -> tuple[GraphBatch, ActionBatch, bool]:
    """Trees and all moves of the states in observation records (CPU tensors) and whether they carry the rich
    features. ``ValueError`` names the first state that cannot be read, is not a valid tree state, has no move
    or a non-finite feature."""
    if len(records) == 0:
        raise ValueError("cannot collate an empty batch of states")
    status, rich, graph, nodes, moves = decode_states(
        records.buffer, records.offsets, _LAYOUTS[True], _LAYOUTS[False]
    )
    raise_first(status, "state", len(records))
    graphs = _graph_batch(graph, nodes)
    actions = ActionBatch(torch.from_numpy(moves[0]), torch.from_numpy(moves[1]), _segments(*moves[2:]))
    return graphs, actions, bool(rich)


def state_inputs(observations) -> tuple[GraphBatch, ActionBatch]:
    """The network's inputs of observations (CPU tensors): :func:`collate_states` of their records."""
    from .codec import encode_observation

    graphs, actions, _ = collate_states(
        PackedRecords.from_records([encode_observation(o) for o in observations])
    )
    return graphs, actions


def expand_on_host(compact: CompactActions) -> ActionBatch:
    """The :class:`~phylorl.nets.inputs.ActionBatch` of compact moves held in CPU tensors, in one compiled
    pass (:func:`~phylorl.records.moves.expand_moves`; the same values as
    :func:`~phylorl.nets.compact_actions.expand_actions` on a device)."""
    arrays = tuple(getattr(compact, f.name).numpy() for f in dataclasses.fields(compact)[:8])
    nodes, meta = expand_moves(arrays, compact.columns.numpy())
    return ActionBatch(torch.from_numpy(nodes), torch.from_numpy(meta), compact.states())


def _segments(index: np.ndarray, sizes: np.ndarray, uniform: int) -> Segments:
    return Segments(
        index=torch.from_numpy(index),
        sizes=torch.from_numpy(sizes),
        count=int(sizes.shape[0]),
        size=None if uniform < 0 else int(uniform),
    )


_COLUMNS = {True: torch.tensor(RICH_LAYOUT), False: torch.tensor(BASIC_LAYOUT)}
_LAYOUTS = {rich: columns.numpy() for rich, columns in _COLUMNS.items()}


def _one_each(n: int) -> Segments:
    """Segments of one row each (the taken move of each state)."""
    return Segments(index=torch.arange(n), sizes=torch.ones(n, dtype=torch.int64), count=n, size=1)


def _graph_batch(side, nodes) -> GraphBatch:
    """A batch side's graph arrays (:func:`~phylorl.records.graph.empty_graphs`' order, GraphBatch's fields')
    and its ``(index, sizes, first, uniform)`` nodes as tensors."""
    tensors = (torch.from_numpy(a) for a in (*side, nodes[2]))
    return GraphBatch(*tensors, nodes=_segments(nodes[0], nodes[1], nodes[3]))


def compile_kernels(seed: int = 0) -> int:
    """Compile the record passes (numba caches them on disk) on records of a small simulated alignment, as the
    first sampled batch, request and checked insert would; returns the records decoded."""
    from phylorl.env.config import EnvConfig
    from phylorl.env.prepare import prepare_alignment
    from phylorl.env.tree_env import EnvAlignment, TreeEnv
    from phylorl.phylo.simulate import simulate_dataset
    from phylorl.types import Transition

    from .codec import encode_observation, encode_transition

    alignment = simulate_dataset(6, 100, np.random.default_rng(seed)).alignment
    made = 0
    for features in ("rich", "basic"):
        env = TreeEnv(
            [EnvAlignment.build(alignment, prepare_alignment(alignment, "JC"), "warm-up")],
            EnvConfig(horizon=4, features=features),
            seed=seed,
        )
        obs, _ = env.reset()
        nxt, reward, terminal, truncated, _ = env.step(0)
        records = PackedRecords.from_records(
            [encode_transition(Transition(obs, 0, reward, nxt, terminal, truncated))]
        )
        check_records(records)
        collate_records(records)
        collate_states(PackedRecords.from_records([encode_observation(obs)]))
        made += 2
    return made
