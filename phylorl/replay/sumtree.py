"""A flat sum tree over non-negative weights with vectorised updates and stratified sampling."""

from __future__ import annotations

import numpy as np
from numba import njit


class SumTree:
    """Weights ``w[0..capacity)`` with their running sum, for sampling ``i`` with probability ``w_i / Σw``.

    The tree is one float64 array of ``2L`` nodes (``L`` = capacity rounded up to a power of two):
    node 1 is the root, node ``k`` has children ``2k`` and ``2k+1``, leaf ``i`` is node ``L + i``.
    Parents are recomputed from their children after every update (no running deltas), so the
    sums never drift. Updating or sampling ``B`` slots costs ``O(B log capacity)`` (compiled
    loops: a replay service calls these several times per batch, so their fixed cost matters).
    """

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self._leaves = 1 << max(0, (self.capacity - 1).bit_length())
        self._depth = self._leaves.bit_length() - 1
        self._nodes = np.zeros(2 * self._leaves, dtype=np.float64)

    @property
    def total(self) -> float:
        """Sum of all weights."""
        return float(self._nodes[1])

    def get(self, slots: np.ndarray) -> np.ndarray:
        """Weights ``[B]`` of ``slots`` ``[B]``."""
        slots = np.asarray(slots, dtype=np.int64).reshape(-1)
        if slots.size and (slots.min() < 0 or slots.max() >= self.capacity):
            raise ValueError(
                f"slots must lie in [0, {self.capacity}), got range [{slots.min()}, {slots.max()}]"
            )
        return self._nodes[self._leaves + slots]

    def set(self, slots: np.ndarray, weights: np.ndarray) -> None:
        """Set ``weights`` ``[B]`` (finite, >= 0) at ``slots`` ``[B]``; a repeated slot keeps its last
        weight."""
        slots = np.asarray(slots, dtype=np.int64).reshape(-1)
        weights = np.asarray(weights, dtype=np.float64).reshape(-1)
        if weights.shape != slots.shape:
            raise ValueError(f"{slots.size} slots but {weights.size} weights")
        error = _set(self._nodes, slots, weights, self._leaves, self.capacity)
        if error == 1:
            raise ValueError(
                f"slots must lie in [0, {self.capacity}), got range [{slots.min()}, {slots.max()}]"
            )
        if error == 2:
            raise ValueError("weights must be finite and >= 0")

    def assign(self, weights: np.ndarray) -> None:
        """Replace every weight at once with ``weights`` ``[capacity]`` (a full rebuild, ``O(capacity)``)."""
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != (self.capacity,):
            raise ValueError(f"expected {self.capacity} weights, got shape {weights.shape}")
        if not np.all(np.isfinite(weights)) or np.any(weights < 0):
            raise ValueError("weights must be finite and >= 0")
        self._nodes[:] = 0.0
        self._nodes[self._leaves : self._leaves + self.capacity] = weights
        for level in range(self._depth - 1, -1, -1):
            lo, hi = 1 << level, 2 << level
            self._nodes[lo:hi] = self._nodes[2 * lo : 2 * hi : 2] + self._nodes[2 * lo + 1 : 2 * hi : 2]

    def sample(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """Stratified draw of ``batch_size`` slots ``[B]``, each with marginal probability ``w_i / Σw``.

        The total is cut into ``batch_size`` equal strata and one point is drawn uniformly in each,
        so a batch covers the distribution evenly (lower variance than independent draws). Only
        slots with a positive weight are ever returned. Raises ``ValueError`` when the total is 0.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        total = self._nodes[1]
        if not total > 0.0:
            raise ValueError("cannot sample: every weight is zero")
        points = (np.arange(batch_size) + rng.random(batch_size)) * (total / batch_size)
        return _descend(self._nodes, points, self._depth) - self._leaves


def check_priorities(priorities: np.ndarray, n: int) -> np.ndarray:
    """Raw replay priorities as float64 ``[n]``; ``ValueError`` unless there are ``n``, finite and >= 0."""
    priorities = np.asarray(priorities, dtype=np.float64).reshape(-1)
    if priorities.size != n:
        raise ValueError(f"expected {n} priorities, got {priorities.size}")
    if not np.all(np.isfinite(priorities)) or np.any(priorities < 0):
        raise ValueError("priorities must be finite and >= 0")
    return priorities


@njit(cache=True, nogil=True)
def _set(nodes, slots, weights, leaves, capacity):
    """Write ``weights`` at ``slots`` (in order, so a repeat keeps its last), then re-sum their ancestors.

    Returns 1 (a slot out of range) or 2 (a weight negative or not finite) before changing anything.
    """
    for i in range(slots.size):
        if slots[i] < 0 or slots[i] >= capacity:
            return 1
        if not (weights[i] >= 0.0 and weights[i] < np.inf):
            return 2
    for i in range(slots.size):
        nodes[leaves + slots[i]] = weights[i]
    for i in range(slots.size):
        k = (leaves + slots[i]) >> 1
        while k >= 1:
            nodes[k] = nodes[2 * k] + nodes[2 * k + 1]
            k >>= 1
    return 0


@njit(cache=True, nogil=True)
def _descend(nodes, points, depth):
    """Tree node reached by each point, walking down from the root."""
    out = np.empty(points.size, np.int64)
    for i in range(points.size):
        point = points[i]
        k = 1
        for _ in range(depth):
            left = nodes[2 * k]
            right = nodes[2 * k + 1]
            # Go right when the point lies beyond the left subtree, but never into an empty subtree:
            # rounding can leave a point at (or just past) the end of the range.
            if (point >= left and right > 0.0) or left <= 0.0:
                point -= left
                k = 2 * k + 1
            else:
                k = 2 * k
        out[i] = k
    return out
