r"""An in-memory prioritised replay for the in-process trainer (same sampling as the replay service).

Transition ``k`` (keys count up from 0 forever) sits in slot ``k % capacity`` of a FIFO ring and of a
:class:`~phylorl.agent.sumtree.SumTree` holding ``priority ** alpha``; the keys held are
``head <= k < next_key``. Sampling draws slot ``i`` with probability

.. math::
    P(i) = p_i^\alpha / \sum_j p_j^\alpha, \qquad w_i = (N P(i))^{-\beta} / \max_{b} w_b,

with the importance weights ``w`` normalised by their maximum over the batch, exactly as
``services.replay.buffer.PrioritizedReplay`` does. Priorities of keys evicted since they were
sampled are ignored, as the service ignores them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from phylorl.agent.sumtree import SumTree, check_priorities
from phylorl.env.observation import Transition


class MemoryReplay:
    """Capacity-bounded FIFO of :class:`Transition` objects sampled in proportion to ``priority ** alpha``.

    Args:
        capacity: most transitions held; inserting more evicts the oldest.
        alpha: priority exponent (0: uniform sampling).
        beta: importance-weight exponent (0: all weights 1).
        seed: seed of the sampling generator.
    """

    def __init__(self, capacity: int, alpha: float = 0.6, beta: float = 0.4, seed: int | None = None):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if not alpha >= 0 or not beta >= 0:
            raise ValueError(f"alpha and beta must be >= 0, got alpha={alpha}, beta={beta}")
        self.capacity, self.alpha, self.beta = int(capacity), float(alpha), float(beta)
        self._rng = np.random.default_rng(seed)
        self._tree = SumTree(self.capacity)
        self._items: list[Transition | None] = [None] * self.capacity
        self._priorities = np.zeros(self.capacity)  # raw priorities, by slot
        self._head = self._next_key = 0
        self.max_priority = 1.0
        """Largest raw priority seen; the priority of transitions inserted without one."""

    def __len__(self) -> int:
        return self._next_key - self._head

    def insert(self, transitions: Sequence[Transition], priorities: np.ndarray | None = None) -> np.ndarray:
        """Append ``transitions`` with raw ``priorities`` ``[n]`` (default: :attr:`max_priority`).

        Returns their keys, int64 ``[n]``. Evicts the oldest transitions beyond ``capacity``.
        """
        n = len(transitions)
        if not 1 <= n <= self.capacity:
            raise ValueError(f"an insert must hold 1..capacity={self.capacity} transitions, got {n}")
        priorities = np.full(n, self.max_priority) if priorities is None else check_priorities(priorities, n)
        first = self._next_key
        keys = np.arange(first, first + n, dtype=np.int64)
        new_head = max(self._head, first + n - self.capacity)
        for key, transition in zip(keys.tolist(), transitions):
            self._items[key % self.capacity] = transition
        self._priorities[keys % self.capacity] = priorities
        self._tree.set(keys % self.capacity, priorities ** self.alpha)
        self._head, self._next_key = new_head, first + n
        self.max_priority = max(self.max_priority, float(priorities.max()))
        return keys

    def sample(self, batch_size: int, beta: float | None = None) -> tuple[list[Transition], np.ndarray, np.ndarray]:
        """Draw ``batch_size`` transitions (stratified, with replacement).

        Returns ``(transitions, weights, keys)``: importance weights float32 ``[B]`` (max 1) and the
        keys int64 ``[B]`` to hand back to :meth:`update_priorities`.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not len(self):
            raise ValueError("cannot sample from an empty replay")
        beta = self.beta if beta is None else float(beta)
        if not beta >= 0:
            raise ValueError(f"beta must be >= 0, got {beta}")
        total = self._tree.total
        if not total > 0:
            raise ValueError(f"cannot sample: all {len(self)} held transitions have priority 0")
        slots = self._tree.sample(batch_size, self._rng)
        probabilities = self._tree.get(slots) / total
        weights = (len(self) * probabilities) ** -beta
        weights /= weights.max()
        keys = self._head + (slots - self._head) % self.capacity
        return [self._items[s] for s in slots.tolist()], weights.astype(np.float32), keys

    def update_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> int:
        """Set raw ``priorities`` ``[n]`` of ``keys`` ``[n]`` (a repeated key keeps its last priority).

        Keys no longer held (evicted) are skipped; returns how many were still held.
        """
        keys = np.asarray(keys, dtype=np.int64).reshape(-1)
        priorities = check_priorities(priorities, keys.size)
        _, last = np.unique(keys[::-1], return_index=True)  # the last occurrence of a repeated key wins
        keep = keys.size - 1 - last
        keys, priorities = keys[keep], priorities[keep]
        held = (keys >= self._head) & (keys < self._next_key)
        keys, priorities = keys[held], priorities[held]
        self._priorities[keys % self.capacity] = priorities
        self._tree.set(keys % self.capacity, priorities ** self.alpha)
        if keys.size:
            self.max_priority = max(self.max_priority, float(priorities.max()))
        return int(keys.size)

    def get(self, keys: np.ndarray) -> tuple[list[Transition], np.ndarray]:
        """The transitions and raw priorities ``[n]`` of held ``keys`` ``[n]`` (for checks and tools)."""
        keys = np.asarray(keys, dtype=np.int64).reshape(-1)
        if keys.size and (keys.min() < self._head or keys.max() >= self._next_key):
            raise ValueError(f"keys must lie in the held range [{self._head}, {self._next_key})")
        slots = keys % self.capacity
        return [self._items[s] for s in slots.tolist()], self._priorities[slots].copy()

    @property
    def keys(self) -> np.ndarray:
        """Keys of every held transition, oldest first, int64 ``[N]``."""
        return np.arange(self._head, self._next_key, dtype=np.int64)
