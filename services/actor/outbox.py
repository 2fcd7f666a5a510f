"""The actor's outbox: every transition waits here, numbered, until the replay service has stored it.

With a journal, every record is written to an append-only journal file before :meth:`Outbox.append` returns
(flushed to the operating system: a ``kill -9`` of the actor loses nothing, a power cut may) and every
:meth:`Outbox.commit` appends a commit mark; up to ``capacity`` waiting records are also held in memory, the
rest read back from the journal as memory frees up. So a replay service away for long costs disk, not memory,
and nothing is dropped until the journal reaches its size limit (then the newest are dropped, counted, and get
no number). Without a journal the oldest records in memory are dropped instead (counted) and a crash loses
what waits.

The process holds an exclusive ``flock`` on its journal while it lives; after a crash another actor finds it
unlocked, reads it with :func:`read_journal`, sends its waiting records under the dead producer's name and
numbers and deletes it. Numbers increase by one per kept record, so a run of records from the front is
consecutive: an insert names its producer and first number, and the replay service skips numbers it already
stored (a resend after a lost answer or a crash stores nothing twice).

Journal: ``b"POB2"``, producer length ``<H``, the producer; then entries ``"<cQdI"`` kind (``R`` record, ``C``
commit mark), number, priority, length, and for ``R`` the record bytes. A commit mark's number is the first
number not yet stored. When the stored prefix is most of a large journal, the waiting entries are copied to a
new file that replaces it (atomic rename).
"""

from __future__ import annotations

import collections
import fcntl
import os
import struct
from dataclasses import dataclass
from pathlib import Path

_MAGIC = b"POB2"
_HEAD = struct.Struct("<4sH")
_ENTRY = struct.Struct("<cQdI")
_COMPACT_BYTES = 4 << 20  # consider rewriting the journal once it is this large


@dataclass(frozen=True)
class Recovered:
    """What a dead producer's journal held: its name, how many records it numbered in all, and the
    ``(record, priority, number)`` entries the replay service had not confirmed, oldest first."""

    producer: str
    produced: int
    pending: list[tuple[bytes, float, int]]


class Outbox:
    """FIFO of ``(record, priority, number)`` (see module docstring)."""

    def __init__(
        self, capacity: int, journal_path: Path | None = None, journal_max_bytes: int = 1 << 30, producer=""
    ):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.memory: collections.deque[tuple[bytes, float, int]] = collections.deque()
        self.next_number = 0
        self.dropped = 0
        self.spooled = 0
        """Records waiting only in the journal (not yet read back into memory)."""
        self.producer = producer
        self._max = journal_max_bytes
        self._file = None
        self._read_at = 0  # journal offset of the first spooled record (when spooled > 0)
        self.journal_path = Path(journal_path) if journal_path is not None else None
        if self.journal_path is not None:
            self.journal_path.parent.mkdir(parents=True, exist_ok=True)
            self._file = _new_journal(self.journal_path, producer)

    def __len__(self) -> int:
        return len(self.memory) + self.spooled

    def append(self, record: bytes, priority: float) -> None:
        """Number ``record`` and keep it until :meth:`commit` (in the journal and in memory while there is
        room; without a journal the oldest in memory is dropped when it is full)."""
        if self._file is None:
            if len(self.memory) >= self.capacity:
                self.memory.popleft()
                self.dropped += 1
            self.memory.append((record, float(priority), self.next_number))
            self.next_number += 1
            return
        end = self._file.seek(0, os.SEEK_END)
        if end + _ENTRY.size + len(record) > self._max:
            self.dropped += 1  # the journal is full: this (newest) record is lost, counted, not numbered
            return
        entry = (record, float(priority), self.next_number)
        self._file.write(_ENTRY.pack(b"R", entry[2], entry[1], len(record)) + record)
        self._file.flush()
        self.next_number += 1
        if len(self.memory) < self.capacity and not self.spooled:
            self.memory.append(entry)
        else:
            if not self.spooled:
                self._read_at = end
            self.spooled += 1

    def front(self, n: int) -> list[tuple[bytes, float, int]]:
        """The oldest ``n`` (at most) records, consecutive numbers; they stay until :meth:`commit`."""
        self._refill()
        return [self.memory[i] for i in range(min(n, len(self.memory)))]

    def commit(self, n: int) -> None:
        """The oldest ``n`` records are stored by the replay service: forget them."""
        last = None
        for _ in range(n):
            last = self.memory.popleft()[2]
        if self._file is not None and last is not None:
            self._file.seek(0, os.SEEK_END)
            self._file.write(_ENTRY.pack(b"C", last + 1, 0.0, 0))
            self._file.flush()
            self._maybe_compact(last + 1)
        self._refill()

    def _refill(self) -> None:
        if not self.spooled or len(self.memory) >= self.capacity:
            return
        self._file.seek(self._read_at)
        while self.spooled and len(self.memory) < self.capacity:
            kind, number, priority, length = _ENTRY.unpack(self._file.read(_ENTRY.size))
            if kind == b"R":
                self.memory.append((self._file.read(length), priority, number))
                self.spooled -= 1
        self._read_at = self._file.tell()

    def _maybe_compact(self, committed: int) -> None:
        """Rewrite the journal as its waiting entries alone when the stored prefix is most of a large file."""
        size = self._file.tell()
        waiting = sum(_ENTRY.size + len(r) for r, _, _ in self.memory) + (
            size - self._read_at if self.spooled else 0
        )
        if size < _COMPACT_BYTES or waiting > size // 2:
            return
        tmp = self.journal_path.with_name(self.journal_path.name + ".tmp")
        new = _new_journal(tmp, self.producer, lock=False)
        new.write(_ENTRY.pack(b"C", committed, 0.0, 0))
        for record, priority, number in self.memory:
            new.write(_ENTRY.pack(b"R", number, priority, len(record)) + record)
        read_at = new.tell()
        if self.spooled:
            self._file.seek(self._read_at)
            new.write(self._file.read())
        new.flush()
        fcntl.flock(new.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # before the rename: never visible unlocked
        os.replace(tmp, self.journal_path)
        self._file.close()
        self._file, self._read_at = new, read_at

    def close(self) -> None:
        """Close the journal; delete it when nothing waits in it, else leave it for recovery."""
        if self._file is not None:
            self._file.close()
            self._file = None
            if not len(self):
                os.unlink(self.journal_path)


def _new_journal(path: Path, producer: str, lock: bool = True):
    name = producer.encode()
    handle = open(path, "w+b")
    if lock:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    handle.write(_HEAD.pack(_MAGIC, len(name)) + name)
    handle.flush()
    return handle


def read_journal(path: str | os.PathLike) -> Recovered:
    """Parse a journal (a torn last entry, from a crash during its write, is ignored)."""
    data = Path(path).read_bytes()
    if len(data) < _HEAD.size or data[:4] != _MAGIC:
        raise ValueError(f"{path}: not an outbox journal")
    (_, length), at = _HEAD.unpack_from(data), _HEAD.size
    producer = data[at : at + length].decode()
    at += length
    records, committed, top = {}, 0, 0
    while at + _ENTRY.size <= len(data):
        kind, number, priority, size = _ENTRY.unpack_from(data, at)
        at += _ENTRY.size
        if kind == b"C":
            committed = max(committed, number)
        elif kind == b"R" and at + size <= len(data):
            records[number] = (data[at : at + size], priority, number)
            top = max(top, number + 1)
            at += size
        else:
            break
    pending = [records[k] for k in sorted(records) if k >= committed]
    return Recovered(producer, max(top, committed), pending)


def claim_orphans(directory: str | os.PathLike) -> list[tuple[Path, object]]:
    """The journals in ``directory`` whose process is gone, oldest first, each with an open handle that holds
    its lock (close it after deleting the journal): two actors never recover the same journal at once."""
    claimed = []
    for path in sorted(Path(directory).glob("*.journal"), key=_mtime):
        try:
            handle = open(path, "rb")
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a live actor's
            handle.close()
            continue
        if not path.exists():  # recovered and deleted by another actor between the listing and the lock
            handle.close()
            continue
        claimed.append((path, handle))
    return claimed


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
