"""The actor's outbox: every transition waits here, numbered, until the replay service has stored it.

Up to ``capacity`` records wait in memory; beyond that, new ones wait in an append-only spool file
(when a spool path is given) and move back to memory, in order, as memory frees up. So a replay service
that is away for long costs disk, not memory, and nothing is dropped until the spool reaches its size
limit (then the newest are dropped, counted). Without a spool path the oldest records in memory are
dropped instead (counted). Numbers increase by one per record, so any run of records taken from the
front is consecutive: an insert names its producer and first number, and the replay service skips
numbers it already stored (a resend after a lost answer stores nothing twice).

Spool record: ``"<QdI"`` number, priority, length, then the record bytes.
"""

from __future__ import annotations

import collections
import os
import struct
from pathlib import Path

_ENTRY = struct.Struct("<QdI")


class Outbox:
    """FIFO of ``(record, priority, number)`` (see module docstring)."""

    def __init__(self, capacity: int, spool_path: str | os.PathLike | None = None, spool_max_bytes: int = 1 << 30):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.memory: collections.deque[tuple[bytes, float, int]] = collections.deque()
        self.next_number = 0
        self.dropped = 0
        self.spooled = 0
        self._spool_max = spool_max_bytes
        self._spool = None
        self._read_at = 0
        if spool_path is not None:
            path = Path(spool_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._spool = open(path, "w+b")
            self.spool_path = path

    def __len__(self) -> int:
        return len(self.memory) + self.spooled

    def append(self, record: bytes, priority: float) -> None:
        """Number ``record`` and keep it until :meth:`commit` (in memory, else on disk, else drop the oldest)."""
        entry = (record, float(priority), self.next_number)
        self.next_number += 1
        if len(self.memory) < self.capacity and not self.spooled:
            self.memory.append(entry)
        elif self._spool is not None:
            end = self._spool.seek(0, os.SEEK_END)
            if end + _ENTRY.size + len(record) > self._spool_max:
                self.dropped += 1  # the spool is full: this (newest) record is lost, counted
                return
            self._spool.write(_ENTRY.pack(entry[2], entry[1], len(record)) + record)
            self.spooled += 1
        else:
            self.memory.popleft()
            self.dropped += 1
            self.memory.append(entry)

    def front(self, n: int) -> list[tuple[bytes, float, int]]:
        """The oldest ``n`` (at most) records, consecutive numbers; they stay until :meth:`commit`."""
        self._refill()
        return [self.memory[i] for i in range(min(n, len(self.memory)))]

    def commit(self, n: int) -> None:
        """The oldest ``n`` records are stored by the replay service: forget them."""
        for _ in range(n):
            self.memory.popleft()
        self._refill()

    def _refill(self) -> None:
        if not self.spooled or len(self.memory) >= self.capacity:
            return
        self._spool.flush()
        self._spool.seek(self._read_at)
        while self.spooled and len(self.memory) < self.capacity:
            number, priority, length = _ENTRY.unpack(self._spool.read(_ENTRY.size))
            self.memory.append((self._spool.read(length), priority, number))
            self.spooled -= 1
        self._read_at = self._spool.tell()
        if not self.spooled:  # everything read back: start the file again
            self._spool.seek(0)
            self._spool.truncate()
            self._read_at = 0

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()
            os.unlink(self.spool_path)
            self._spool = None
