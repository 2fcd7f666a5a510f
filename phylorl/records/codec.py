"""Records from observations and transitions (the layout: :mod:`phylorl.records.format`).

Encoding writes a state's tree arrays and rich parts as they are, and a transition's taken row: the taken
move's node ids and its features (:func:`taken_row`, the same compiled code the learner's batch pass uses).
Nothing decodes a record back into an observation: :mod:`phylorl.records.collate` writes the network's inputs
straight from its bytes.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from phylorl.types import Observation, Transition

from .arrays import encode_array, encode_ranked, encode_row
from .format import (
    DEDUPE,
    FORM,
    HEADER,
    LABELLED,
    LEAF_FEATURES,
    MAGIC,
    OBSERVATION_HEADER,
    OBSERVATION_MAGIC,
    RICH_FORM,
    TAKEN,
    TERMINAL,
    TREE,
    TREE_FORM,
    TRUNCATED,
    VERSION,
)


def encode_transition(
    transition: Transition, state: bytes | None = None, next_state: bytes | None = None
) -> bytes:
    """One transition record (with the taken row, and the labels when there are some). ``state`` and
    ``next_state``: the two states' sections as :func:`encode_state` gave them, when the caller has them
    already."""
    t = transition
    obs, action, labels = t.obs, int(t.action), t.next_labels
    if not 0 <= action < obs.n_actions:
        raise ValueError(f"action {action} is not one of the state's {obs.n_actions} moves")
    if labels is not None:
        labels = np.asarray(labels)
        if labels.dtype != np.float32 or labels.shape != (t.next_obs.n_actions,):
            raise ValueError(
                f"next_labels must be float32 of shape ({t.next_obs.n_actions},) "
                f"(one per move of next_obs), got {labels.dtype} {labels.shape}"
            )
    flags = TAKEN | (TERMINAL if t.terminal else 0) | (TRUNCATED if t.truncated else 0)
    flags |= LABELLED if labels is not None else 0
    parts = [
        HEADER.pack(MAGIC, VERSION, flags, action, float(t.reward), float(t.discount), int(t.policy_version)),
        encode_state(obs) if state is None else state,
        encode_state(t.next_obs) if next_state is None else next_state,
    ]
    nodes, meta = taken_row(obs, action)
    encode_row(nodes, "taken move", parts)
    encode_row(meta, "taken move's features", parts)
    if labels is not None:
        encode_array(labels, "next_labels", parts)
    return b"".join(parts)


def encode_observation(obs: Observation, state: bytes | None = None) -> bytes:
    """One observation record: an inference request's state (``state``: its section from :func:`encode_state`,
    when the caller has it already)."""
    section = encode_state(obs) if state is None else state
    return OBSERVATION_HEADER.pack(OBSERVATION_MAGIC, VERSION) + section


def encode_state(obs: Observation) -> bytes:
    """A state's section of a record: the same bytes in an observation record and in either place of a
    transition record, so one encoding can serve all three."""
    rich = obs.rich
    flags = (DEDUPE if obs.dedupe else 0) | LEAF_FEATURES
    parts = [FORM.pack(TREE_FORM if rich is None else RICH_FORM), TREE.pack(obs.n_leaves, obs.radius, flags)]
    encode_array(np.asarray(obs.neighbors, np.int32), "neighbors", parts)
    encode_array(np.asarray(obs.edges, np.int32), "edges", parts)
    encode_array(np.asarray(obs.lengths, np.float32), "lengths", parts)
    if rich is not None:
        encode_ranked(np.asarray(rich.deltas, np.float32), "parsimony changes", parts)
        encode_array(np.array([rich.parsimony_length]), "parsimony length", parts)
        encode_array(np.asarray(rich.support, np.float32), "support", parts)
    return b"".join(parts)


class StateSections:
    """The state sections (:func:`encode_state`) of the observations a producer still holds, so that a state
    is encoded once for its inference request and again for neither of its two places in transition records.
    Keyed by the observation object (observations are not changed once made); each entry holds its
    observation, so no other object can take its id while it is kept; the oldest of more than ``capacity`` are
    dropped."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._items: OrderedDict[int, tuple[Observation, bytes]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __call__(self, obs: Observation) -> bytes:
        item = self._items.get(id(obs))
        if item is not None and item[0] is obs:
            self._items.move_to_end(id(obs))
            return item[1]
        section = encode_state(obs)
        self._items[id(obs)] = (obs, section)
        if len(self._items) > self.capacity:
            self._items.popitem(last=False)
        return section


def taken_row(obs: Observation, action: int) -> tuple[np.ndarray, np.ndarray]:
    """Move ``action``'s node ids (int64 ``[4]``) and features (float32 ``[K]``), as the learner's batch reads
    them."""
    from .features import log_lengths
    from .moves import taken_move, walk_work
    from .reader import tree_tables

    neighbors = np.ascontiguousarray(obs.neighbors, np.int32)
    edges = np.ascontiguousarray(obs.edges, np.int32)
    node_edges, error = tree_tables(neighbors, edges, obs.n_leaves)
    if error:
        raise ValueError("the state's arrays do not form an unrooted binary tree")
    rich = obs.rich
    is_rich = rich is not None
    lengths = np.asarray(obs.lengths, np.float32).astype(np.float64)
    tree = (
        neighbors,
        edges,
        lengths,
        np.empty(0, np.float32) if rich is None else np.ascontiguousarray(rich.deltas, np.float32),
        0.0 if rich is None else float(rich.parsimony_length),
        np.zeros_like(lengths) if rich is None else np.asarray(rich.support, np.float32).astype(np.float64),
    )
    nodes = np.empty(4, np.int64)
    meta = np.empty((1, 15 if is_rich else 3), np.float32)
    logs, work = log_lengths(lengths) if is_rich else np.empty(0), walk_work(obs.n_nodes, is_rich)
    count = taken_move(
        tree, node_edges, logs, obs.n_leaves, obs.radius, obs.dedupe, is_rich, action, 0, nodes, meta, work
    )
    if count <= action:
        raise ValueError(f"action {action} is not one of the state's moves")
    return nodes, meta[0]
