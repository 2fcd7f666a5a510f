"""The replay table's Redis layout: transition records, raw priorities and the key range.

For a key prefix ``P`` (e.g. ``phylorl:replay``)::

    P:meta        hash    head -> oldest key held, next_key -> key the next transition gets,
                          layout -> "1"; keys held are exactly head <= k < next_key
    P:t:<k>       string  transition k as a compact record (phylorl.wire.record)
    P:p           hash    <k> -> raw priority of transition k, 8 bytes little-endian float64

Every insert (records, priorities, evictions and the new key range) is one MULTI/EXEC
transaction, so a reader never sees a half-written batch and Redis' AOF
replays whole batches. Keys increase forever and are never reused, so a late priority update for
an evicted transition cannot land on its successor.

The hot calls build their Redis commands straight from a batch's concatenated records
(:class:`~phylorl.wire.codec.PackedRecords`) and give records back in that form, so the service
does a few cheap operations per transition and no per-transition Python objects beyond the
command arguments themselves. (Lua scripts doing the splitting and joining inside Redis were
measured slower: Redis then spends more CPU than the Python side saves.)
"""

from __future__ import annotations

from collections.abc import Sequence

import hiredis
import numpy as np
import redis

from phylorl.wire.codec import PackedRecords

LAYOUT_VERSION = b"1"
_CHUNK = 16384  # keys per Redis command when walking large ranges


class RedisStore:
    """Reads and writes one replay table in Redis (see the module docstring for the layout)."""

    def __init__(self, client: redis.Redis, prefix: str):
        if not prefix:
            raise ValueError("the Redis key prefix must not be empty")
        self._client = client
        self._prefix = prefix
        self._meta = f"{prefix}:meta".encode()
        self._priorities = f"{prefix}:p".encode()
        self._record_format = (prefix.replace("%", "%%") + ":t:%d").encode()  # bytes % key

    def ping(self) -> None:
        """Raise ``redis.ConnectionError`` when Redis cannot be reached."""
        self._client.ping()

    def load_range(self) -> tuple[int, int]:
        """``(head, next_key)`` of the stored table; ``(0, 0)`` when there is none yet."""
        meta = self._client.hgetall(self._meta)
        if not meta:
            return 0, 0
        layout = meta.get(b"layout")
        if layout != LAYOUT_VERSION:
            raise RuntimeError(f"{self._meta.decode()} has layout {layout!r}; this service reads layout {LAYOUT_VERSION!r}")
        head, next_key = int(meta[b"head"]), int(meta[b"next_key"])
        if not 0 <= head <= next_key:
            raise RuntimeError(f"{self._meta.decode()} holds an impossible key range head={head}, next_key={next_key}")
        return head, next_key

    def load_priorities(self, head: int, next_key: int) -> np.ndarray:
        """Raw priorities ``[next_key - head]`` float64 of keys ``head..next_key-1``."""
        out = np.empty(next_key - head, dtype=np.float64)
        for lo in range(head, next_key, _CHUNK):
            hi = min(lo + _CHUNK, next_key)
            values = self._client.hmget(self._priorities, [str(k) for k in range(lo, hi)])
            missing = [lo + i for i, v in enumerate(values) if v is None or len(v) != 8]
            if missing:
                raise RuntimeError(f"{self._priorities.decode()} lacks a valid priority for {len(missing)} held keys, "
                                   f"e.g. {missing[:5]}: the table is corrupt")
            out[lo - head:hi - head] = np.frombuffer(b"".join(values), dtype="<f8")
        return out

    def load_records(self, head: int, next_key: int) -> list[bytes]:
        """Records of keys ``head..next_key-1``; raises ``RuntimeError`` when one is missing."""
        out: list[bytes] = []
        for lo in range(head, next_key, _CHUNK):
            hi = min(lo + _CHUNK, next_key)
            (values,) = self._send([(b"MGET", *self._record_names(range(lo, hi)))])
            missing = [lo + i for i, v in enumerate(values) if v is None]
            if missing:
                raise RuntimeError(f"{self._prefix}:t: lacks the records of {len(missing)} held keys, "
                                   f"e.g. {missing[:5]}: the table is corrupt")
            out += values
        return out

    def commit_insert(self, first_key: int, records: Sequence[bytes | memoryview], priorities: np.ndarray,
                      head: int, new_head: int) -> None:
        """Store ``records`` as keys ``first_key..`` with raw ``priorities`` and evict keys ``head..new_head-1``."""
        packed = PackedRecords.from_records(records)
        keys = range(first_key, first_key + len(packed))
        commands = [(b"MSET", *_interleave(self._record_names(keys), packed.views())),
                    (b"HSET", self._priorities, *_interleave(_fields(keys), _priority_bytes(priorities)))]
        commands += self._evictions(head, new_head)
        commands.append((b"HSET", self._meta, b"head", new_head, b"next_key", keys.stop, b"layout", LAYOUT_VERSION))
        self._send(commands, transaction=True)

    def evict(self, head: int, new_head: int, next_key: int) -> None:
        """Delete keys ``head..new_head-1`` and record the new range (one transaction)."""
        commands = self._evictions(head, new_head)
        commands.append((b"HSET", self._meta, b"head", new_head, b"next_key", next_key, b"layout", LAYOUT_VERSION))
        self._send(commands, transaction=True)

    def fetch(self, keys: np.ndarray) -> tuple[PackedRecords, np.ndarray]:
        """Records of ``keys`` (repeats allowed) and a mask ``[n]`` of the keys no longer stored.

        The records found come back concatenated in key order (missing ones are left out).
        """
        (values,) = self._send([(b"MGET", *self._record_names(np.asarray(keys).tolist()))])
        missing = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
        found = [v for v in values if v is not None] if missing.any() else values
        return PackedRecords.from_records(found), missing

    def set_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> None:
        """Overwrite the raw priorities of ``keys`` (which the caller knows to be held)."""
        keys = np.asarray(keys).tolist()
        if keys:
            self._send([(b"HSET", self._priorities, *_interleave(_fields(keys), _priority_bytes(priorities)))])

    def _send(self, commands: list[tuple], transaction: bool = False) -> list:
        """Run ``commands`` (in MULTI/EXEC when ``transaction``) with one write; returns their replies.

        The batch calls pack their commands with hiredis and talk to a pooled connection directly:
        redis-py's generic path spends microseconds per argument, and these calls have hundreds.
        A connection that fails midway is dropped (its replies would be out of step).
        """
        if transaction:
            commands = [(b"MULTI",), *commands, (b"EXEC",)]
        payload = b"".join([hiredis.pack_command(c) for c in commands])
        pool = self._client.connection_pool
        connection = pool.get_connection()
        try:
            connection.send_packed_command([payload])
            replies, error = [], None
            for _ in commands:
                try:
                    replies.append(connection.read_response())
                except redis.ResponseError as e:  # read the other replies too: the connection stays in step
                    error = error or e
                    replies.append(e)
        except BaseException:
            connection.disconnect()
            raise
        finally:
            pool.release(connection)
        if error is not None:
            raise error
        if not transaction:
            return replies
        result = replies[-1]
        if not isinstance(result, list) or len(result) != len(commands) - 2:
            raise redis.ResponseError(f"unexpected EXEC reply {result!r}")
        for reply in result:
            if isinstance(reply, Exception):
                raise reply
        return result

    def _evictions(self, lo: int, hi: int) -> list[tuple]:
        """Commands deleting the records and priorities of keys ``lo..hi-1``."""
        commands = []
        for start in range(lo, hi, _CHUNK):
            stop = min(start + _CHUNK, hi)
            commands += [(b"DEL", *self._record_names(range(start, stop))),
                         (b"HDEL", self._priorities, *_fields(range(start, stop)))]
        return commands

    def _record_names(self, keys) -> list[bytes]:
        fmt = self._record_format
        return [fmt % k for k in keys]


def _fields(keys) -> list[bytes]:
    return [b"%d" % k for k in keys]


def _priority_bytes(priorities: np.ndarray) -> list[bytes]:
    """Each raw priority as the 8-byte little-endian float64 string stored in the hash."""
    packed = np.asarray(priorities, dtype="<f8").tobytes()
    return [packed[i:i + 8] for i in range(0, len(packed), 8)]


def _interleave(names: list, values) -> list:
    """``[names[0], values[0], names[1], values[1], ...]`` (the argument order of MSET and HSET)."""
    out = [None] * (2 * len(names))
    out[0::2] = names
    out[1::2] = values
    return out
