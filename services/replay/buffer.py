"""The prioritised replay table: a sum tree in memory over transitions and priorities kept in Redis.

No gRPC here: the servicer in ``server.py`` only translates messages and errors.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from phylorl.interfaces import RecordStore
from phylorl.records.format import PackedRecords
from phylorl.replay.priority_table import PriorityTable
from phylorl.replay.rate_limiter import RateLimiter
from services.replay.redis_io import TableMoved

MAX_SAMPLE_BATCH = 1 << 16
_REFETCH_ATTEMPTS = 8
_MOVED_ATTEMPTS = 3  # writes refused because the table moved (a late write landed) before giving up


class RateLimited(TimeoutError):
    """The rate limiter did not admit a call before its timeout; the message says why."""


class TooManyWaiting(RateLimited):
    """The call would have to wait, but the most callers allowed to wait at once already do."""


class NothingToSample(RuntimeError):
    """Every held transition has weight 0 (priority 0 with alpha > 0)."""


class ReplayClosed(RuntimeError):
    """The table is shutting down."""


@dataclass(frozen=True)
class InsertResult:
    keys: np.ndarray  # int64 [m], keys of the transitions stored by this call
    size: int  # transitions held after the insert
    waited_s: float  # time spent waiting for the rate limiter
    duplicates: int = 0  # records skipped as already stored (idempotent inserts)


@dataclass(frozen=True)
class SampleBatch:
    keys: np.ndarray  # int64 [B]
    weights: np.ndarray  # float32 [B], (N P(i))^-beta / max over the batch
    probabilities: np.ndarray  # float64 [B], P(i)
    records: PackedRecords  # B compact transition records
    size: int  # N when the batch was drawn
    waited_s: float


@dataclass(frozen=True)
class ReplayStats:
    size: int
    capacity: int
    inserted_total: int
    sampled_total: int
    evicted_total: int
    next_key: int
    total_priority: float  # sum of priority ** alpha
    max_priority: float
    rate_limiter_diff: float
    waiting_inserts: int  # calls waiting for the rate limiter now
    waiting_samples: int


class PrioritizedReplay:
    """Capacity-bounded FIFO table sampled with probability ``priority ** alpha / Σ priority ** alpha``.

    Keys, eviction, sampling, importance weights and priority updates are a
    :class:`~phylorl.replay.priority_table.PriorityTable`'s (the tests' ``MemoryReplay`` drives the same
    object); this class adds durability, locks and the rate limiter. Every record and raw priority is in Redis
    (``store``) and the constructor rebuilds the sum tree from there, so a new instance on the same Redis and
    prefix continues where the last one stopped. Thread-safe: calls block (up to their timeout) while the rate
    limiter refuses them; Redis writes happen in key order under one writer lock.

    With ``cache_records`` the store keeps every held record in memory too (about ``capacity`` x record
    size) and samples are read from there, with no Redis round trip. ``max_waiting`` bounds how many inserts,
    and separately how many samples, may wait at once: a server with ``W`` handler threads passes
    ``(W - 1) // 2``, so that a thread is always left for the call that would release the waiting ones.
    """

    def __init__(
        self,
        store: RecordStore,
        *,
        capacity: int,
        alpha: float,
        beta: float,
        rate_limiter: RateLimiter,
        seed: int | None = None,
        max_waiting: int | None = None,
        cache_records: bool = True,
    ):
        self._table = PriorityTable(capacity, alpha, beta, seed)
        if rate_limiter.min_size_to_sample > capacity:
            raise ValueError(
                f"min_size_to_sample={rate_limiter.min_size_to_sample} exceeds capacity={capacity}"
            )
        self.capacity, self.alpha, self.beta = self._table.capacity, self._table.alpha, self._table.beta
        self._store = store
        self.rate_limiter = rate_limiter
        self._cache_records = cache_records
        self._cond = threading.Condition()
        self._write_lock = threading.Lock()
        self._closed = False
        self._max_waiting = max_waiting
        self._waiting = {"insert": 0, "sample": 0}
        self._inserted = self._sampled = self._evicted = 0
        self._marks: dict[str, int] = {}  # producer -> highest sequence number stored (from Redis)
        self._stale = True  # the sum tree does not reflect Redis yet
        self._refresh()

    def insert(
        self,
        records: Sequence[bytes | memoryview],
        priorities: np.ndarray | None = None,
        timeout_s: float = 0.0,
        producer: str = "",
        first_sequence: int = 0,
    ) -> InsertResult:
        """Append ``records`` with raw ``priorities`` ``[n]`` (default: the largest seen), evicting the
        oldest. With ``producer``, the records are that producer's transitions ``first_sequence,
        first_sequence + 1, ...``: those numbered at or below the highest number already stored for it are
        skipped (a resend after a lost answer), and the new highest number is committed with the batch."""
        records = PackedRecords.from_records(records)
        n = len(records)
        priorities = self._table.insert_priorities(n, priorities)
        self._refresh()
        with self._cond:
            limiter = self.rate_limiter
            waited = self._wait(limiter.can_insert, limiter.why_no_insert, timeout_s, "insert", n)
            limiter.record_insert(n)
        return self._written(
            lambda: self._write_insert(records, priorities, producer, first_sequence, waited)
        )

    def _write_insert(self, records: PackedRecords, priorities, producer: str, sequence: int, waited: float):
        """The write of an admitted insert (see :meth:`insert`)."""
        table, n = self._table, len(records)
        with self._write_lock:
            duplicates = int(np.clip(self._marks.get(producer, -1) + 1 - sequence, 0, n)) if producer else 0
            if producer and duplicates == n:
                with self._cond:
                    return InsertResult(np.zeros(0, dtype=np.int64), self._size, waited, duplicates=n)
            if duplicates:
                records = PackedRecords.from_records(list(records)[duplicates:])
                priorities = priorities[duplicates:]
            mark = (producer, sequence + n - 1) if producer else None
            n -= duplicates
            with self._cond:
                head = table.head
                first, new_head = table.plan_insert(n)
                table.evict(new_head)  # samplers stop drawing the evicted keys; the key range moves on commit
            try:
                self._store.commit_insert(first, records, priorities, new_head, mark)
            except BaseException:
                self._stale = True  # Redis may or may not hold the batch: rebuild before the next call
                raise
            with self._cond:
                keys = table.commit_insert(first, priorities, new_head)
                self._inserted += n
                self._evicted += new_head - head
                if mark is not None:
                    self._marks[mark[0]] = mark[1]
                self._cond.notify_all()
                return InsertResult(keys, self._size, waited, duplicates)

    def sample(self, batch_size: int, timeout_s: float = 0.0, beta: float | None = None) -> SampleBatch:
        """Draw ``batch_size`` transitions (with replacement) and their importance weights."""
        if not 1 <= batch_size <= MAX_SAMPLE_BATCH:
            raise ValueError(f"batch_size must lie in 1..{MAX_SAMPLE_BATCH}, got {batch_size}")
        if beta is not None and not float(beta) >= 0:
            raise ValueError(f"beta must be >= 0, got {beta}")
        self._refresh()
        with self._cond:
            limiter = self.rate_limiter
            waited = self._wait(limiter.can_sample, limiter.why_no_sample, timeout_s, "sample", batch_size)
            keys, probabilities = self._draw(batch_size)
            size = self._size
            limiter.record_sample(batch_size)
            self._sampled += batch_size
            self._cond.notify_all()
        records, missing = self._store.fetch(keys)
        for _ in range(_REFETCH_ATTEMPTS):
            if not missing.any():
                break
            with self._cond:  # draws whose keys were evicted between the draw and the fetch: draw them again
                keys[missing], probabilities[missing] = self._draw(int(missing.sum()))
            records, missing = self._store.fetch(keys)
        if missing.any():
            raise RuntimeError(
                "transitions kept disappearing while sampling; is another writer using this prefix?"
            )
        weights = self._table.importance_weights(probabilities, size, beta)
        return SampleBatch(keys, weights, probabilities, records, size, waited)

    def update_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> int:
        """Set raw ``priorities`` ``[n]`` of ``keys`` ``[n]``; returns how many keys were still held."""
        keys, priorities = self._table.last_of_each(keys, priorities)  # a repeated key: the last wins
        return self._written(lambda: self._write_priorities(keys, priorities))

    def _write_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> int:
        """The write of :meth:`update_priorities`: the keys still held, in Redis, then in the sum tree."""
        with self._write_lock:  # no eviction can happen until this update is done
            with self._cond:
                held = self._table.held(keys)
            keys, priorities = keys[held], priorities[held]
            try:
                self._store.set_priorities(keys, priorities)
            except BaseException:
                self._stale = True  # Redis may or may not hold them: rebuild before the next call
                raise
            with self._cond:
                self._table.set_priorities(keys, priorities)
                self._cond.notify_all()
        return int(keys.size)

    def _written(self, write: Callable):
        """``write()`` after re-reading the table if it may differ from Redis; again, planned anew, when Redis
        refuses it because a write that timed out earlier has landed since (:class:`TableMoved`)."""
        for attempt in range(_MOVED_ATTEMPTS):
            self._refresh()
            try:
                return write()
            except TableMoved:
                if attempt == _MOVED_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    def stats(self) -> ReplayStats:
        with self._cond:
            t, waiting = self._table, self._waiting
            counts = (self._size, self.capacity, self._inserted, self._sampled, self._evicted, t.next_key)
            priorities = (t.tree.total, t.max_priority, self.rate_limiter.diff)
            return ReplayStats(*counts, *priorities, waiting["insert"], waiting["sample"])

    def priorities(self) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, raw priorities)`` of every held transition, read back from Redis (for checks)."""
        with self._write_lock:
            with self._cond:
                head, next_key = self._table.head, self._table.next_key
            return np.arange(head, next_key, dtype=np.int64), self._store.read_priorities(head, next_key)

    def close(self) -> None:
        """Refuse new calls and wake every waiting one (they raise :class:`ReplayClosed`)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def _size(self) -> int:
        return self._table.size

    def _refresh(self) -> None:
        """Rebuild the sum tree from Redis if it may differ (at start, after a failed write), evicting the
        oldest beyond ``capacity``; raises whatever Redis raises when it cannot be read (the next call tries
        again)."""
        if not self._stale:
            return
        with self._write_lock:
            if not self._stale:
                return
            stored = self._store.open(self.capacity, with_records=self._cache_records)
            with self._cond:
                self._table.assign(stored.head, stored.next_key, stored.priorities)
                self._marks = dict(stored.marks)
                self.rate_limiter.reset(stored.next_key - stored.head)
                self._stale = False
                self._cond.notify_all()

    def _draw(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """``count`` keys and their probabilities from the sum tree (caller holds the lock)."""
        if not self._table.tree.total > 0:
            raise NothingToSample(f"all {self._size} held transitions have priority 0")
        return self._table.draw(count)

    def _wait(self, admitted: Callable, reason: Callable, timeout_s: float, kind: str, count: int) -> float:
        """Wait on the condition until ``admitted(size)``; raise after ``timeout_s``, ``reason(size)`` saying
        why (caller holds the lock)."""
        if self._closed:
            raise ReplayClosed("the replay service is shutting down")
        if admitted(self._size):
            return 0.0
        if self._max_waiting is not None and self._waiting[kind] >= self._max_waiting:
            raise TooManyWaiting(
                f"{kind} of {count} refused at once: {self._waiting[kind]} {kind} calls "
                f"already wait for the rate limiter (at most {self._max_waiting}); {reason(self._size)}"
            )
        start = time.monotonic()
        deadline = start + max(0.0, timeout_s)
        self._waiting[kind] += 1
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RateLimited(
                        f"{kind} of {count} not admitted within {timeout_s:g} s: {reason(self._size)}"
                    )
                self._cond.wait(remaining)
                if self._closed:
                    raise ReplayClosed("the replay service is shutting down")
                if admitted(self._size):
                    return time.monotonic() - start
        finally:
            self._waiting[kind] -= 1
