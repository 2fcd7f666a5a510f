"""The replay table's Redis layout: transition records, raw priorities and the key range.

For a key prefix ``P`` (e.g. ``phylorl:replay``)::

    P:meta        hash    head -> oldest key held, next_key -> key the next transition gets,
                          layout -> "1"; keys held are exactly head <= k < next_key
    P:t:<k>       string  transition k as a compact record (phylorl.wire.record)
    P:p           hash    <k> -> raw priority of transition k, 8 bytes little-endian float64

Every insert (records, priorities, evictions and the new key range) is one MULTI/EXEC
transaction, so a reader never sees a half-written batch, and Redis' AOF replays whole batches.
Keys increase forever and are never reused, so a late priority update for an evicted transition
cannot land on its successor.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import redis

LAYOUT_VERSION = b"1"
_CHUNK = 16384  # keys per Redis command when walking large ranges


class RedisStore:
    """Reads and writes one replay table in Redis (see the module docstring for the layout)."""

    def __init__(self, client: redis.Redis, prefix: str):
        if not prefix:
            raise ValueError("the Redis key prefix must not be empty")
        self._client = client
        self._meta = f"{prefix}:meta"
        self._priorities = f"{prefix}:p"
        self._record_prefix = f"{prefix}:t:"

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
            raise RuntimeError(f"{self._meta} has layout {layout!r}; this service reads layout {LAYOUT_VERSION!r}")
        head, next_key = int(meta[b"head"]), int(meta[b"next_key"])
        if not 0 <= head <= next_key:
            raise RuntimeError(f"{self._meta} holds an impossible key range head={head}, next_key={next_key}")
        return head, next_key

    def load_priorities(self, head: int, next_key: int) -> np.ndarray:
        """Raw priorities ``[next_key - head]`` float64 of keys ``head..next_key-1``."""
        out = np.empty(next_key - head, dtype=np.float64)
        for lo in range(head, next_key, _CHUNK):
            hi = min(lo + _CHUNK, next_key)
            values = self._client.hmget(self._priorities, [str(k) for k in range(lo, hi)])
            missing = [lo + i for i, v in enumerate(values) if v is None or len(v) != 8]
            if missing:
                raise RuntimeError(f"{self._priorities} lacks a valid priority for {len(missing)} held keys, "
                                   f"e.g. {missing[:5]}: the table is corrupt")
            out[lo - head:hi - head] = np.frombuffer(b"".join(values), dtype="<f8")
        return out

    def commit_insert(self, first_key: int, records: Sequence[bytes | memoryview], priorities: np.ndarray,
                      head: int, new_head: int) -> None:
        """Store ``records`` as keys ``first_key..`` with raw ``priorities`` and evict keys ``head..new_head-1``."""
        packed = np.asarray(priorities, dtype="<f8").tobytes()
        pipe = self._client.pipeline(transaction=True)
        pipe.mset({self._record_key(first_key + i): r for i, r in enumerate(records)})
        pipe.hset(self._priorities, mapping={
            str(first_key + i): packed[8 * i:8 * i + 8] for i in range(len(records))})
        self._queue_evictions(pipe, head, new_head)
        pipe.hset(self._meta, mapping={
            "head": new_head, "next_key": first_key + len(records), "layout": LAYOUT_VERSION})
        pipe.execute()

    def evict(self, head: int, new_head: int, next_key: int) -> None:
        """Delete keys ``head..new_head-1`` and record the new range (one transaction)."""
        pipe = self._client.pipeline(transaction=True)
        self._queue_evictions(pipe, head, new_head)
        pipe.hset(self._meta, mapping={"head": new_head, "next_key": next_key, "layout": LAYOUT_VERSION})
        pipe.execute()

    def fetch(self, keys: np.ndarray) -> list[bytes | None]:
        """Records of ``keys`` (repeats allowed); ``None`` for a key no longer stored."""
        return self._client.mget([self._record_key(k) for k in keys.tolist()])

    def set_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> None:
        """Overwrite the raw priorities of ``keys`` (which the caller knows to be held)."""
        if len(keys) == 0:
            return
        packed = np.asarray(priorities, dtype="<f8").tobytes()
        self._client.hset(self._priorities, mapping={
            str(k): packed[8 * i:8 * i + 8] for i, k in enumerate(keys.tolist())})

    def _record_key(self, key: int) -> str:
        return f"{self._record_prefix}{key}"

    def _queue_evictions(self, pipe: redis.client.Pipeline, lo: int, hi: int) -> None:
        for start in range(lo, hi, _CHUNK):
            stop = min(start + _CHUNK, hi)
            pipe.delete(*(self._record_key(k) for k in range(start, stop)))
            pipe.hdel(self._priorities, *(str(k) for k in range(start, stop)))
