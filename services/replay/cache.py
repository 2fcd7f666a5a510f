"""The replay service's in-memory copy of the held records, kept per insert batch: each insert adds one entry
(its first key and its records as one :class:`~phylorl.records.format.PackedRecords`, views of the received
request); eviction drops the oldest entries once all their keys are gone. A key is found by bisection."""

from __future__ import annotations

from bisect import bisect_right

from phylorl.records.format import PackedRecords


class RecordCache:
    """Records by key for the keys held; not thread-safe (the table's lock guards it)."""

    def __init__(self) -> None:
        self._firsts: list[int] = []
        self._batches: list[tuple[memoryview, list[int]]] = []  # (data, record bounds) per batch

    def append(self, first: int, records: PackedRecords) -> None:
        """Add keys ``first..first+len(records)-1``; they must follow the keys already held."""
        if self._firsts and first != self._stop(-1):
            raise ValueError(f"batch at key {first} does not follow key {self._stop(-1) - 1}")
        self._firsts.append(first)
        self._batches.append((records.data, records.offsets.tolist()))

    def drop_below(self, head: int) -> None:
        """Forget the batches whose keys all lie below ``head``."""
        count = 0
        while count < len(self._firsts) and self._stop(count) <= head:
            count += 1
        del self._firsts[:count], self._batches[:count]

    def clear(self) -> None:
        self._firsts.clear()
        self._batches.clear()

    def get(self, keys: list[int]) -> list[memoryview]:
        """The records of ``keys`` (which the caller knows to be held)."""
        firsts, batches = self._firsts, self._batches
        out = []
        for key in keys:
            b = bisect_right(firsts, key) - 1
            data, bounds = batches[b]
            k = key - firsts[b]
            out.append(data[bounds[k] : bounds[k + 1]])
        return out

    def _stop(self, b: int) -> int:
        """One past the last key of batch ``b``."""
        return self._firsts[b] + len(self._batches[b][1]) - 1
