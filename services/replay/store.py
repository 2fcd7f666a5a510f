"""The replay table's Redis layout: transition records in insert batches, priorities and the key range.

For a key prefix ``P`` (e.g. ``phylorl:replay``), layout 2::

    P:meta        hash    head -> oldest key held, next_key -> key the next transition gets,
                          layout -> "2"; keys held are exactly head <= k < next_key
    P:b:<first>   string  one insert batch, keys first..first+n-1 (see below)
    P:bi          list    "<first>:<n>" of every stored batch, oldest first
    P:p           hash    <k> -> raw priority of transition k set after its insert (8 bytes
                          little-endian float64); a key without one has its batch's initial priority
    P:seq         hash    <producer> -> the highest sequence number of that producer's transitions
                          stored (idempotent inserts: a record numbered at or below it is a duplicate)
    P:o           hash    <first> -> "<producer> <sequence number of record first>" of a batch inserted
                          with a producer (where each transition came from; read by tests/replay_audit.py)

    batch         "<4sI" magic b"PRB1", n; n x "<d" initial raw priorities; (n + 1) x "<I" record
                  offsets into the data; the n records concatenated (phylorl.records)

Every write (an insert: the batch, its list entry, the deletion of batches whose keys are all evicted and the
new key range; an eviction; a priority update) is one Lua script, atomic as a MULTI/EXEC transaction is, so a
reader never sees a half-written batch and Redis' AOF replays whole batches. The script writes only if
``P:meta`` still holds the key range this store last wrote or read (else
:class:`~services.replay.redis_io.TableMoved`): a write whose answer the client gave up waiting for may land
after the service has re-read the table and written on, and would otherwise overwrite the batch written since
at the same key; guarded, whichever of the two runs second is refused, and the service re-reads the table and
tries again. The batch string is sent in a plain SET under a name of its own and renamed into place by the
script (:func:`services.replay.redis_io.guarded_write`).

A batch is deleted when its last key is evicted, so Redis holds at most one batch beyond ``capacity``. Keys
increase forever and are never reused, so a late priority update for an evicted transition cannot land on its
successor. One string per insert, not one key per transition, costs Redis a few microseconds per transition
rather than ten. A table of any other layout is refused at open, naming the layout found.
"""

from __future__ import annotations

import itertools
import struct
import threading
from bisect import bisect_right
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import redis

from phylorl.records.format import PackedRecords
from services.replay.redis_io import guarded_write, send

LAYOUT_VERSION = b"2"
_BATCH_MAGIC = b"PRB1"
_BATCH_HEAD = struct.Struct("<4sI")
_CHUNK = 4096  # keys (or batches) per Redis command when walking large ranges
_READ_ATTEMPTS = 3  # reads of the whole table when a late write moves it while it is read


@dataclass(frozen=True)
class StoredTable:
    """What :meth:`RedisStore.open` reads back: the key range and raw priorities ``[next_key - head]``
    float64."""

    head: int
    next_key: int
    priorities: np.ndarray
    marks: dict[str, int]
    """Producer -> highest sequence number stored (idempotent inserts)."""


@dataclass
class _Batch:
    first: int
    offsets: list[int]  # [n + 1], record offsets inside the batch string (header included)
    blob: memoryview | None = None  # the batch string, when the store keeps the records in memory

    @property
    def stop(self) -> int:
        return self.first + len(self.offsets) - 1


class RedisStore:
    """Reads and writes one replay table in Redis (see the module docstring for the layout). Keeps an index of
    the stored batches (first key and record offsets) mirroring Redis, so that records can be read by key;
    :meth:`open` rebuilds it. Opened ``with_records``, the index also holds every batch string, and records
    are read from memory (no Redis round trip; Redis stays the durable copy). Writes must be serialised by
    the caller."""

    def __init__(self, client: redis.Redis, prefix: str):
        if not prefix:
            raise ValueError("the Redis key prefix must not be empty")
        self._client = client
        names = (f"{prefix}:{suffix}".encode() for suffix in ("meta", "p", "bi", "seq", "o"))
        self._meta, self._priorities, self._index_key, self._marks, self._origins = names
        self._batch_format = (prefix.replace("%", "%%") + ":b:%d").encode()  # bytes % first key
        self._batches: deque[_Batch] = deque()
        self._firsts: list[int] = []  # first keys of self._batches, for bisect (rebuilt when they change)
        self._range: tuple[int, int] | None = None  # (head, next_key) Redis holds, as last read or written
        self._keep = False  # whether the index holds the batch strings (open's with_records)
        self._index_lock = threading.Lock()

    def ping(self) -> None:
        """Raise ``redis.ConnectionError`` when Redis cannot be reached."""
        self._client.ping()

    def open(self, capacity: int, with_records: bool) -> StoredTable:
        """Read the stored table and index it (``with_records``: the records too); evicts the oldest keys
        beyond ``capacity``."""
        head, next_key, batches, blobs = self._read_table(with_records)
        with self._index_lock:
            self._batches, self._firsts = deque(batches), [b.first for b in batches]
        self._range, self._keep = (head, next_key), with_records
        # an empty guarded write: a user who may not run the store's script is named now, not at each insert
        try:
            guarded_write(self._client, self._meta, self._range, [])
        except redis.exceptions.NoPermissionError as e:
            raise RuntimeError(
                f"the Redis user may not run the replay store's guarded writes ({e}); its ACL needs "
                f"+eval +evalsha +hmget +rename +persist: make the secrets again "
                f"(scripts/make_secrets.sh) or add those commands"
            ) from None
        if next_key - head > capacity:
            head = next_key - capacity
            self.evict(head, next_key)
        priorities = self._priorities_of(batches, blobs, head, next_key)
        marks = {k.decode(): int(v) for k, v in self._client.hgetall(self._marks).items()}
        return StoredTable(head, next_key, priorities, marks)

    def _read_table(self, with_records: bool) -> tuple[int, int, list[_Batch], list[bytes]]:
        """The key range and the batches holding it. A late write (see the module docstring) can move the
        table between the reads; the table is read again then, and called corrupt only when it stood still."""
        for attempt in range(_READ_ATTEMPTS):
            head, next_key = self._read_meta()
            try:
                return (head, next_key, *self._read_batches(head, next_key, with_records))
            except RuntimeError:
                if self._read_meta() == (head, next_key) or attempt == _READ_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    def read_priorities(self, head: int, next_key: int) -> np.ndarray:
        """Raw priorities ``[next_key - head]`` of keys ``head..next_key-1`` as Redis holds them now."""
        return self._priorities_of(*self._read_batches(head, next_key, with_records=False), head, next_key)

    def _read_batches(self, head: int, next_key: int, with_records: bool) -> tuple[list[_Batch], list[bytes]]:
        """Every stored batch (whole, or its header) and its index entry, checked to cover the keys held."""
        entries = self._client.lrange(self._index_key, 0, -1)
        batches, blobs = [], []
        for lo in range(0, len(entries), _CHUNK):
            chunk = [_parse_entry(e, self._index_key) for e in entries[lo : lo + _CHUNK]]
            if with_records:
                reads = [(b"GET", self._batch_name(first)) for first, _ in chunk]
            else:
                reads = [(b"GETRANGE", self._batch_name(first), 0, _header_size(n) - 1) for first, n in chunk]
            for (first, n), blob in zip(chunk, send(self._client, reads)):
                batches.append(_parse_batch(blob, first, n, self._batch_name(first), not with_records))
                blobs.append(blob)
        contiguous = all(a.stop == b.first for a, b in zip(batches, batches[1:]))
        if batches:
            covered = (
                contiguous and batches[0].first <= head < batches[0].stop and batches[-1].stop == next_key
            )
        else:
            covered = head == next_key
        if not covered:
            raise RuntimeError(
                f"{self._index_key.decode()} does not cover the held keys {head}..{next_key - 1} "
                f"without gaps: the table is corrupt"
            )
        return batches, blobs

    def _priorities_of(
        self, batches: list[_Batch], blobs: list[bytes], head: int, next_key: int
    ) -> np.ndarray:
        """Priorities (initial ones, then the later ones from the hash) of ``head..next_key-1``."""
        priorities = np.empty(next_key - head, dtype=np.float64)
        for batch, blob in zip(batches, blobs):
            lo, hi = max(batch.first, head), batch.stop
            if lo < hi:
                initial = np.frombuffer(
                    blob, dtype="<f8", count=len(batch.offsets) - 1, offset=_BATCH_HEAD.size
                )
                priorities[lo - head : hi - head] = initial[lo - batch.first :]
        for field, value in self._client.hgetall(self._priorities).items():
            key = int(field)
            if head <= key < next_key:
                if len(value) != 8:
                    raise RuntimeError(
                        f"{self._priorities.decode()} holds a malformed priority for key {key}"
                    )
                priorities[key - head] = np.frombuffer(value, dtype="<f8")[0]
        return priorities

    def _read_meta(self) -> tuple[int, int]:
        meta = self._client.hgetall(self._meta)
        if not meta:
            return 0, 0
        layout = meta.get(b"layout")
        if layout != LAYOUT_VERSION:
            raise RuntimeError(
                f"{self._meta.decode()} has layout {layout!r}; this service reads layout "
                f"{LAYOUT_VERSION!r} only"
            )
        head, next_key = int(meta[b"head"]), int(meta[b"next_key"])
        if not 0 <= head <= next_key:
            raise RuntimeError(
                f"{self._meta.decode()} holds an impossible key range head={head}, next_key={next_key}"
            )
        return head, next_key

    def commit_insert(
        self,
        first_key: int,
        records: Sequence[bytes | memoryview],
        priorities: np.ndarray,
        new_head: int,
        mark: tuple[str, int] | None = None,
    ) -> None:
        """Store ``records`` as keys ``first_key..`` with raw ``priorities``, evicting keys below
        ``new_head``, and ``mark`` (``(producer, highest sequence number now stored)``) in the same
        transaction."""
        packed = PackedRecords.from_records(records)
        n = len(packed)
        if self._batches and self._batches[-1].stop != first_key:
            raise RuntimeError(
                f"insert at key {first_key} does not follow the stored batches "
                f"(next is {self._batches[-1].stop})"
            )
        blob, offsets = _batch_blob(packed, priorities)
        dropped = self._dropped(new_head)
        commands = [
            (b"RPUSH", self._index_key, b"%d:%d" % (first_key, n)),
            *self._deletions(dropped),
            self._range_command(new_head, first_key + n),
        ]
        if mark is not None:
            producer = mark[0].encode()
            commands += [
                (b"HSET", self._marks, producer, mark[1]),
                (b"HSET", self._origins, first_key, b"%s %d" % (producer, mark[1] + 1 - n)),
            ]
        added = _Batch(first_key, offsets, memoryview(blob) if self._keep else None)
        self._write(commands, (new_head, first_key + n), dropped, added, (self._batch_name(first_key), blob))

    def evict(self, new_head: int, next_key: int) -> None:
        """Record the key range ``new_head..next_key-1``, deleting the batches left without a held key."""
        dropped = self._dropped(new_head)
        commands = [*self._deletions(dropped), self._range_command(new_head, next_key)]
        self._write(commands, (new_head, next_key), dropped)

    def _write(
        self, commands: list, new_range: tuple[int, int], dropped: list, added=None, staged=None
    ) -> None:
        """Run ``commands`` (a guarded write), then mirror them: the key range is ``new_range``, the
        ``dropped`` batches are gone and the batch ``added`` (if any) follows the others."""
        guarded_write(self._client, self._meta, self._range, commands, staged)
        self._range = new_range
        with self._index_lock:
            for _ in dropped:
                self._batches.popleft()
            if added is not None:
                self._batches.append(added)
            self._firsts = [b.first for b in self._batches]

    def _range_command(self, head: int, next_key: int) -> tuple:
        return (b"HSET", self._meta, b"head", head, b"next_key", next_key, b"layout", LAYOUT_VERSION)

    def set_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> None:
        """Overwrite the raw priorities of ``keys`` (which the caller knows to be held)."""
        keys = np.asarray(keys).tolist()
        if keys:
            packed = np.asarray(priorities, dtype="<f8").tobytes()
            values = [packed[i : i + 8] for i in range(0, len(packed), 8)]
            command = (b"HSET", self._priorities, *(x for pair in zip(_fields(keys), values) for x in pair))
            guarded_write(self._client, self._meta, self._range, [command])

    def fetch(self, keys: np.ndarray) -> tuple[PackedRecords, np.ndarray]:
        """Records of ``keys`` (repeats allowed; those found, in key order) and a mask of the keys gone."""
        keys = np.asarray(keys).tolist()
        reads, missing = [], np.zeros(len(keys), dtype=bool)  # reads: each found key's record or GETRANGE
        with self._index_lock:
            batches, firsts = self._batches, self._firsts
            for i, key in enumerate(keys):
                b = bisect_right(firsts, key) - 1
                if b < 0 or key >= batches[b].stop:
                    missing[i] = True
                    continue
                batch, k = batches[b], key - batches[b].first
                lo, hi = batch.offsets[k], batch.offsets[k + 1]
                if batch.blob is not None:
                    reads.append(batch.blob[lo:hi])
                else:
                    reads.append((b"GETRANGE", self._batch_name(batch.first), lo, hi - 1))
        commands = [read for read in reads if isinstance(read, tuple)]
        if not commands:  # every record read from memory
            return PackedRecords.from_records(reads), missing
        replies = iter(send(self._client, commands))
        found = []
        for i, read in zip(np.flatnonzero(~missing).tolist(), reads):
            value = next(replies) if isinstance(read, tuple) else read
            if value:
                found.append(value)
            else:  # the batch was deleted since the lookup
                missing[i] = True
        return PackedRecords.from_records(found), missing

    def _dropped(self, new_head: int) -> list[_Batch]:
        """The oldest batches whose keys all lie below ``new_head``."""
        return list(itertools.takewhile(lambda batch: batch.stop <= new_head, self._batches))

    def _deletions(self, batches: list[_Batch]) -> list[tuple]:
        commands = [(b"LTRIM", self._index_key, len(batches), -1)] if batches else []
        for lo in range(0, len(batches), _CHUNK):
            chunk = batches[lo : lo + _CHUNK]
            commands.append((b"DEL", *[self._batch_name(b.first) for b in chunk]))
            commands.append((b"HDEL", self._origins, *_fields(b.first for b in chunk)))
            fields = [f for b in chunk for f in _fields(range(b.first, b.stop))]
            for start in range(0, len(fields), _CHUNK):
                commands.append((b"HDEL", self._priorities, *fields[start : start + _CHUNK]))
        return commands

    def _batch_name(self, first: int) -> bytes:
        return self._batch_format % first


def _header_size(n: int) -> int:
    return _BATCH_HEAD.size + 8 * n + 4 * (n + 1)


def _batch_blob(packed: PackedRecords, priorities: np.ndarray) -> tuple[bytes, list[int]]:
    """The batch string of ``packed`` records and their offsets inside it (``[n + 1]``)."""
    n = len(packed)
    priorities = np.asarray(priorities, dtype="<f8")
    if priorities.shape != (n,):
        raise ValueError(f"{n} records but {priorities.size} priorities")
    header = _header_size(n)
    if header + packed.offsets[-1] >= 2**32:
        raise ValueError(f"an insert of {packed.offsets[-1]} bytes exceeds the 4 GiB batch limit")
    offsets = packed.offsets + header
    head = _BATCH_HEAD.pack(_BATCH_MAGIC, n)
    blob = b"".join([head, priorities.tobytes(), offsets.astype("<u4").tobytes(), packed.data])
    return blob, offsets.tolist()


def _parse_entry(entry: bytes, name: bytes) -> tuple[int, int]:
    try:
        first, n = (int(x) for x in entry.split(b":"))
        return first, n
    except ValueError:
        raise RuntimeError(
            f"{name.decode()} holds a malformed entry {entry!r}: the table is corrupt"
        ) from None


def _parse_batch(blob: bytes | None, first: int, n: int, name: bytes, header_only: bool) -> _Batch:
    """Index entry of a stored batch string (checked against its list entry), holding the string unless
    ``header_only``."""
    header = _header_size(n)
    if blob is None or len(blob) < header:
        raise RuntimeError(f"{name.decode()} is missing or truncated: the table is corrupt")
    magic, count = _BATCH_HEAD.unpack_from(blob, 0)
    offsets = np.frombuffer(blob, dtype="<u4", count=n + 1, offset=_BATCH_HEAD.size + 8 * n).astype(np.int64)
    if (
        magic != _BATCH_MAGIC
        or count != n
        or offsets[0] != header
        or np.any(np.diff(offsets) < 0)
        or (not header_only and offsets[-1] != len(blob))
    ):
        raise RuntimeError(f"{name.decode()} is not a valid batch of {n} records: the table is corrupt")
    return _Batch(first, offsets.tolist(), None if header_only else memoryview(blob))


def _fields(keys) -> list[bytes]:
    return [b"%d" % k for k in keys]
