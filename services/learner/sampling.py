"""One sampled batch from the replay service, collated on the host: what the learner's prefetch threads and its
feed processes (:mod:`services.learner.feed`) both do.

Records in a tree form go straight into batch arrays in one compiled pass (:mod:`phylorl.agent.packed_batch`,
the next states' moves in compact form, expanded where the update runs); a batch holding any other record is
decoded record by record (the reference path), and a record that does not decode is retired: its key is handed
to ``retire`` (which sets its priority to 0) and the batch goes on without it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import grpc
import numpy as np

from phylorl.agent.batch import Batch
from phylorl.agent.batch_transfer import Block
from phylorl.agent.packed_batch import collate_records
from phylorl.types import Transition
from phylorl.wire.record import decode_transition

log = logging.getLogger("phylorl.learner")
TRANSIENT = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.FAILED_PRECONDITION,
             grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.CANCELLED}
"""Sample errors that mean "not now" (replay restarting, not yet filled, busy): the caller asks again."""


@dataclass
class Drawn:
    """A sampled batch: ``items`` a host :class:`Batch` (compiled path; its weights inside; a feed process's
    comes packed in a :class:`Block`) or the decoded
    transitions with their importance-sampling ``weights``; the replay ``keys`` of its rows; the policy version
    of each row (``-1``: unknown); the collation ``path`` (``compiled`` or ``reference``); ``corrupt``: sampled
    records that did not decode (left out). Every record of a batch may be corrupt: then ``keys`` is empty."""

    items: Batch | Block | list[Transition]
    weights: np.ndarray | None
    keys: np.ndarray
    versions: np.ndarray
    path: str
    corrupt: int = 0


def draw(replay, batch_size: int, timeout_s: float, retire: Callable[[np.ndarray], None]) -> Drawn | None:
    """Sample ``batch_size`` transitions from ``replay`` and collate them; ``None`` when replay has nothing to
    give now (a transient error)."""
    try:
        drawn = replay.sample(batch_size, timeout_s=timeout_s)
    except grpc.RpcError as exc:
        if exc.code() in TRANSIENT:
            return None
        raise
    keys = np.asarray(drawn.keys)
    fast = collate_records(drawn.records, weights=np.asarray(drawn.weights), compact=True)
    if fast is not None:  # every record in a tree form: decoded straight into the batch arrays
        batch, versions = fast
        return Drawn(batch, None, keys, versions, "compiled")
    transitions, good = [], []
    for i, data in enumerate(drawn.records):
        try:
            transitions.append(decode_transition(data))
            good.append(i)
        except ValueError as exc:  # a corrupt record must not stop training: it is retired instead
            log.warning("replay key %d holds a record that does not decode (%s); its priority is set to 0",
                        int(keys[i]), exc)
    bad = np.setdiff1d(keys, keys[good])
    if bad.size:
        retire(bad)
    versions = np.array([t.policy_version for t in transitions], dtype=np.int64)
    return Drawn(transitions, np.asarray(drawn.weights)[good], keys[good], versions, "reference", len(keys) - len(good))
