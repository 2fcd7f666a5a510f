r"""An in-memory prioritised replay for the in-process trainer: the replay service's table without Redis.

Keys, eviction, proportional sampling, importance weights and priority updates are
:class:`~phylorl.replay.priority_table.PriorityTable`, the same object ``services.replay.buffer``
drives; this class only keeps the transition records (and raw priorities) by slot.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from phylorl.records.format import PackedRecords
from phylorl.replay.priority_table import PriorityTable


class MemoryReplay:
    """Capacity-bounded FIFO of transition records (:mod:`phylorl.records`) sampled in proportion to
    ``priority ** alpha``.

    Args:
        capacity: most transitions held; inserting more evicts the oldest.
        alpha: priority exponent (0: uniform sampling).
        beta: importance-weight exponent (0: all weights 1).
        seed: seed of the sampling generator.
    """

    def __init__(self, capacity: int, alpha: float = 0.6, beta: float = 0.4, seed: int | None = None):
        self._table = PriorityTable(capacity, alpha, beta, seed)
        self.capacity, self.alpha, self.beta = self._table.capacity, self._table.alpha, self._table.beta
        self._items: list[bytes | None] = [None] * self.capacity
        self._priorities = np.zeros(self.capacity)  # raw priorities, by slot

    def __len__(self) -> int:
        return self._table.size

    @property
    def max_priority(self) -> float:
        """Largest raw priority seen; the priority of transitions inserted without one."""
        return self._table.max_priority

    def insert(self, records: Sequence[bytes], priorities: np.ndarray | None = None) -> np.ndarray:
        """Append transition ``records`` with raw ``priorities`` ``[n]`` (default: :attr:`max_priority`).

        Returns their keys, int64 ``[n]``. Evicts the oldest transitions beyond ``capacity``.
        """
        table = self._table
        priorities = table.insert_priorities(len(records), priorities)
        first, new_head = table.plan_insert(len(records))
        table.evict(new_head)
        keys = table.commit_insert(first, priorities, new_head)
        for key, record in zip(keys.tolist(), records):
            self._items[key % self.capacity] = record
        self._priorities[keys % self.capacity] = priorities
        return keys

    def sample(
        self, batch_size: int, beta: float | None = None
    ) -> tuple[PackedRecords, np.ndarray, np.ndarray]:
        """Draw ``batch_size`` transitions (stratified, with replacement).

        Returns ``(records, weights, keys)``: importance weights float32 ``[B]`` (max 1) and the
        keys int64 ``[B]`` to hand back to :meth:`update_priorities`.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not len(self):
            raise ValueError("cannot sample from an empty replay")
        weights_beta = self.beta if beta is None else float(beta)
        if not weights_beta >= 0:
            raise ValueError(f"beta must be >= 0, got {beta}")
        keys, probabilities = self._table.draw(batch_size)
        weights = self._table.importance_weights(probabilities, len(self), weights_beta)
        return (
            PackedRecords.from_records([self._items[s] for s in (keys % self.capacity).tolist()]),
            weights,
            keys,
        )

    def update_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> int:
        """Set raw ``priorities`` ``[n]`` of ``keys`` ``[n]`` (a repeated key keeps its last priority).

        Keys no longer held (evicted) are skipped; returns how many were still held.
        """
        keys, priorities = self._table.last_of_each(keys, priorities)
        held = self._table.held(keys)
        keys, priorities = keys[held], priorities[held]
        self._priorities[keys % self.capacity] = priorities
        self._table.set_priorities(keys, priorities)
        return int(keys.size)

    def get(self, keys: np.ndarray) -> tuple[list[bytes], np.ndarray]:
        """The records and raw priorities ``[n]`` of held ``keys`` ``[n]`` (for checks and tools)."""
        keys = np.asarray(keys, dtype=np.int64).reshape(-1)
        if keys.size and not self._table.held(keys).all():
            raise ValueError(f"keys must lie in the held range [{self._table.head}, {self._table.next_key})")
        slots = keys % self.capacity
        return [self._items[s] for s in slots.tolist()], self._priorities[slots].copy()

    @property
    def keys(self) -> np.ndarray:
        """Keys of every held transition, oldest first, int64 ``[N]``."""
        return np.arange(self._table.head, self._table.next_key, dtype=np.int64)
