r"""The bookkeeping of a prioritised FIFO replay table, shared by the replay service and the in-process run.

Transition ``k`` (keys count up from 0 forever) sits in slot ``k % capacity`` of a
:class:`~phylorl.replay.sumtree.SumTree` holding ``priority ** alpha``; the keys held are
``head <= k < next_key``. Sampling draws slot ``i`` with probability

.. math::
    P(i) = p_i^\alpha / \sum_j p_j^\alpha, \qquad w_i = (N P(i))^{-\beta} / \max_{b} w_b,

with the importance weights normalised by their maximum over the batch. A priority update for a key
evicted since it was sampled is ignored; of a key repeated in one update, the last priority wins.

:class:`PriorityTable` holds no transitions and takes no locks: ``services.replay.buffer`` keeps the records
in Redis and wraps each step in its locks and rate limiter, the tests' in-process ``MemoryReplay`` keeps them
in a list; both move keys, priorities and weights only through this class.
"""

from __future__ import annotations

import numpy as np

from phylorl.replay.sumtree import SumTree, check_priorities


class PriorityTable:
    """Keys, slots and sampling weights of a capacity-bounded FIFO table (see module docstring)."""

    def __init__(self, capacity: int, alpha: float, beta: float, seed: int | None = None):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if not alpha >= 0 or not beta >= 0:
            raise ValueError(f"alpha and beta must be >= 0, got alpha={alpha}, beta={beta}")
        self.capacity, self.alpha, self.beta = int(capacity), float(alpha), float(beta)
        self.rng = np.random.default_rng(seed)
        self.tree = SumTree(self.capacity)
        self.head = self.next_key = 0
        self.max_priority = 1.0
        """Largest raw priority seen; the priority of transitions inserted without one."""

    @property
    def size(self) -> int:
        return self.next_key - self.head

    # -- inserting: plan, evict, commit (the service writes its store between evict and commit) ----

    def insert_priorities(self, n: int, priorities: np.ndarray | None) -> np.ndarray:
        """Checked raw priorities ``[n]`` of an insert of ``n`` (default: :attr:`max_priority`)."""
        if not 1 <= n <= self.capacity:
            raise ValueError(f"an insert must hold 1..capacity={self.capacity} transitions, got {n}")
        return np.full(n, self.max_priority) if priorities is None else check_priorities(priorities, n)

    def plan_insert(self, n: int) -> tuple[int, int]:
        """``(first key, new head)`` of an insert of ``n`` now: the oldest keys beyond capacity go."""
        first = self.next_key
        return first, max(self.head, first + n - self.capacity)

    def evict(self, new_head: int) -> None:
        """Stop drawing the keys below ``new_head`` (their weight becomes 0; the key range moves on
        commit)."""
        self.tree.set(np.arange(self.head, new_head) % self.capacity, np.zeros(max(0, new_head - self.head)))

    def commit_insert(self, first: int, priorities: np.ndarray, new_head: int) -> np.ndarray:
        """Hold keys ``first .. first + n - 1`` with raw ``priorities`` ``[n]``; returns the keys."""
        keys = np.arange(first, first + priorities.size, dtype=np.int64)
        self.tree.set(keys % self.capacity, priorities**self.alpha)
        self.head, self.next_key = new_head, first + priorities.size
        self.max_priority = max(self.max_priority, float(priorities.max()))
        return keys

    # -- sampling ------------------------------------------------------------------------------

    def draw(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """``count`` held keys (stratified, with replacement) and their probabilities ``P``; raises
        ``ValueError`` when every held transition has weight 0."""
        total = self.tree.total
        if not total > 0:
            raise ValueError(f"cannot sample: all {self.size} held transitions have priority 0")
        slots = self.tree.sample(count, self.rng)
        probabilities = self.tree.get(slots) / total
        return self.head + (slots - self.head) % self.capacity, probabilities

    def importance_weights(
        self, probabilities: np.ndarray, size: int, beta: float | None = None
    ) -> np.ndarray:
        """``(N P(i))^-beta`` normalised by the batch's largest, float32 (``N = size`` at the draw)."""
        beta = self.beta if beta is None else float(beta)
        if not beta >= 0:
            raise ValueError(f"beta must be >= 0, got {beta}")
        weights = (size * probabilities) ** -beta
        return (weights / weights.max()).astype(np.float32)

    # -- priority updates ----------------------------------------------------------------------

    @staticmethod
    def last_of_each(keys: np.ndarray, priorities: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Checked ``(keys, priorities)`` of an update, a repeated key keeping its last priority."""
        keys = np.asarray(keys, dtype=np.int64).reshape(-1)
        priorities = check_priorities(priorities, keys.size)
        _, last = np.unique(keys[::-1], return_index=True)
        keep = keys.size - 1 - last
        return keys[keep], priorities[keep]

    def held(self, keys: np.ndarray) -> np.ndarray:
        """Which of ``keys`` are held now (bool ``[n]``)."""
        return (keys >= self.head) & (keys < self.next_key)

    def set_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> None:
        """Raw ``priorities`` of held ``keys`` (as filtered by :meth:`held`)."""
        self.tree.set(keys % self.capacity, priorities**self.alpha)
        if keys.size:
            self.max_priority = max(self.max_priority, float(priorities.max()))

    def assign(self, head: int, next_key: int, raw: np.ndarray) -> None:
        """Rebuild from a stored table: keys ``head .. next_key - 1`` with raw priorities ``raw``."""
        weights = np.zeros(self.capacity)
        weights[np.arange(head, next_key) % self.capacity] = raw**self.alpha
        self.tree.assign(weights)
        self.head, self.next_key = head, next_key
        if raw.size:
            self.max_priority = float(raw.max())
