"""The few protocols the pieces of the system meet at, so that each side can be read (and replaced) alone.

- :class:`Act`: called by the experience loop (``agent/collector.py``); implemented by an actor's gRPC call
  to the inference endpoint, and by the in-process run's own networks.
- :class:`ReplaySource`: called by the learner service's loop (``services/learner``); implemented by
  ``services.replay.client.ReplayClient``.
- :class:`WeightsSink`: called by the learner service's loop; implemented by
  ``services.learner.inference.BatchingInference``.
- :class:`RecordStore`: called by the replay table (``services/replay/buffer.py``); implemented by
  ``services.replay.store.RedisStore``.

The shared data types are :mod:`phylorl.types`; the replay table's logic is :mod:`phylorl.replay`.
Protocols are ``runtime_checkable`` so that a test can check an implementation still has the methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from phylorl.types import Observation


@runtime_checkable
class Act(Protocol):
    """Choose one move per observation: ``(actions [B], q [B], v [B], weights_version)``, or ``None`` to
    stop."""

    def __call__(
        self, observations: Sequence[Observation]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None: ...


@runtime_checkable
class SampledBatch(Protocol):
    keys: np.ndarray  # int64 [B]
    weights: np.ndarray  # importance weights [B]
    records: Sequence  # B compact transition records (phylorl.records)


@runtime_checkable
class ReplaySource(Protocol):
    """Where a learner draws transitions and sends their new priorities."""

    def sample(
        self, batch_size: int, timeout_s: float | None = None, beta: float | None = None
    ) -> SampledBatch: ...

    def update_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> int: ...


@runtime_checkable
class WeightsSink(Protocol):
    """Where a learner publishes its online networks; ``snapshot`` is the last published (None before)."""

    def publish(self, weights: dict, alpha: float, version: int) -> Any: ...

    @property
    def snapshot(self) -> Any: ...


@runtime_checkable
class RecordStore(Protocol):
    """The durable side of a replay table: records, priorities and producer marks, by key."""

    def ping(self) -> None: ...

    def open(self, capacity: int, with_records: bool) -> Any: ...

    def commit_insert(
        self,
        first_key: int,
        records: Sequence,
        priorities: np.ndarray,
        new_head: int,
        mark: tuple[str, int] | None = None,
    ) -> None: ...

    def evict(self, new_head: int, next_key: int) -> None: ...

    def set_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> None: ...

    def fetch(self, keys: np.ndarray) -> tuple[Any, np.ndarray]: ...

    def read_priorities(self, head: int, next_key: int) -> np.ndarray: ...
