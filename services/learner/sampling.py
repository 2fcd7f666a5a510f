"""One sampled batch from the replay service, collated on the host
(:func:`phylorl.records.collate.collate_records`, one compiled pass). A record that is not a valid transition
is retired (its key handed to ``retire``, which sets its priority to 0) and the batch goes on without it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import grpc
import numpy as np

from phylorl.nets.inputs import Batch
from phylorl.records.collate import collate_records
from phylorl.records.decode import check_records
from phylorl.records.format import PackedRecords

log = logging.getLogger("phylorl.learner")
TRANSIENT = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.CANCELLED,
}
"""Sample errors that mean "not now" (replay restarting, not yet filled, busy): the caller asks again."""


@dataclass
class Drawn:
    """A sampled batch (host tensors, its importance weights inside; ``None`` when every record drawn was
    corrupt), the replay ``keys`` of its rows, each row's policy version (``-1``: unknown) and how many
    sampled records were corrupt (left out)."""

    batch: Batch | None
    keys: np.ndarray
    versions: np.ndarray
    corrupt: int = 0


def draw(replay, batch_size: int, timeout_s: float, retire: Callable[[np.ndarray], None]) -> Drawn | None:
    """Sample ``batch_size`` transitions from ``replay`` and collate them; None when replay has none now."""
    try:
        drawn = replay.sample(batch_size, timeout_s=timeout_s)
    except grpc.RpcError as exc:
        if exc.code() in TRANSIENT:
            return None
        raise
    keys, weights, records = np.asarray(drawn.keys), np.asarray(drawn.weights), drawn.records
    try:
        batch, versions = collate_records(records, weights)
        return Drawn(batch, keys, versions)
    except ValueError:
        good = [i for i in range(len(records)) if _valid(records[i], keys[i])]
    bad = np.setdiff1d(keys, keys[good])
    if bad.size:
        retire(bad)
    if not good:
        return Drawn(None, keys[:0], np.zeros(0, np.int64), len(keys))
    batch, versions = collate_records(PackedRecords.from_records([records[i] for i in good]), weights[good])
    return Drawn(batch, keys[good], versions, len(keys) - len(good))


def _valid(record, key) -> bool:
    """Whether a sampled record is a valid transition (a corrupt one is retired, not fatal)."""
    try:
        check_records(PackedRecords.from_records([record]))
        return True
    except ValueError as exc:
        what = "replay key %d holds a record that is not a valid transition (%s); its priority is set to 0"
        log.warning(what, int(key), exc)
        return False
