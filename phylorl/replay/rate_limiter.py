"""Admission rules for inserts and samples: a minimum size and a samples-per-insert ratio."""

from __future__ import annotations

import math


class RateLimiter:
    """Keeps sampling and inserting in step, after Reverb's ``SampleToInsertRatio``.

    Counts are in transitions. With ``spi = samples_per_insert`` and
    ``diff = spi * inserted - sampled``, the target is ``diff == spi * min_size_to_sample`` (the
    value it has when the table first reaches the minimum size), within ``± error_buffer``:

    * a sample is admitted when the table holds at least ``min_size_to_sample`` transitions and
      ``diff > target - error_buffer``;
    * an insert is admitted while the table is below ``min_size_to_sample`` or when
      ``diff < target + error_buffer``.

    Each call is checked against the state before it, so one call may overshoot a bound by its
    own size; in exchange an insert and a sample can never both be refused (that would need
    ``diff <= target - error_buffer`` and ``diff >= target + error_buffer``), whatever the batch
    sizes, so waiting callers never deadlock. ``samples_per_insert == 0`` keeps only the minimum size.
    The limiter holds no lock: the replay buffer calls it under its own.
    """

    def __init__(self, min_size_to_sample: int, samples_per_insert: float = 0.0, error_buffer: float = 1.0):
        if min_size_to_sample < 1:
            raise ValueError(f"min_size_to_sample must be >= 1, got {min_size_to_sample}")
        if samples_per_insert < 0:
            raise ValueError(
                f"samples_per_insert must be >= 0 (0 = no ratio limit), got {samples_per_insert}"
            )
        if samples_per_insert > 0 and not error_buffer > 0:
            raise ValueError(f"error_buffer must be > 0 when samples_per_insert is set, got {error_buffer}")
        self.min_size_to_sample = int(min_size_to_sample)
        self.samples_per_insert = float(samples_per_insert)
        self.error_buffer = float(error_buffer)
        self.target = self.samples_per_insert * self.min_size_to_sample
        self.diff = 0.0

    def reset(self, size: int) -> None:
        """Start counting afresh for a table that already holds ``size`` transitions (e.g. restored)."""
        self.diff = self.samples_per_insert * min(size, self.min_size_to_sample)

    def can_sample(self, size: int) -> bool:
        if size < self.min_size_to_sample:
            return False
        return self.samples_per_insert == 0 or self.diff > self.target - self.error_buffer

    def can_insert(self, size: int) -> bool:
        if size < self.min_size_to_sample or self.samples_per_insert == 0:
            return True
        return self.diff < self.target + self.error_buffer

    def record_sample(self, count: int) -> None:
        self.diff -= count

    def record_insert(self, count: int) -> None:
        self.diff += self.samples_per_insert * count

    def why_no_sample(self, size: int) -> str:
        """Human-readable reason :meth:`can_sample` is false."""
        if size < self.min_size_to_sample:
            return (
                f"the table holds {size} transitions, fewer than min_size_to_sample={self.min_size_to_sample}"
            )
        low = self.target - self.error_buffer
        inserts = math.floor((low - self.diff) / self.samples_per_insert) + 1
        return (
            f"sampling is ahead of inserting (samples_per_insert={self.samples_per_insert:g}: balance "
            f"{self.diff:g} must exceed {low:g}); about {inserts} more inserted transitions are needed"
        )

    def why_no_insert(self, size: int) -> str:
        """Human-readable reason :meth:`can_insert` is false."""
        high = self.target + self.error_buffer
        samples = math.floor(self.diff - high) + 1
        return (
            f"inserting is ahead of sampling (samples_per_insert={self.samples_per_insert:g}: balance "
            f"{self.diff:g} must stay below {high:g}); about {samples} more sampled transitions are needed"
        )
