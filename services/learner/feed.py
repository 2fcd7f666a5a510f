"""The learner's feed processes: sampling and collating in processes of their own (``feed_processes``).

In the learner's own process the prefetch threads share one interpreter lock with the update loop and the
inference endpoint; on a GPU machine with cores to spare that lock, not the cores, bounds how fast batches
come (session 13 on an H200: 1.8 cores busy, the update waiting on its feed 46% of the time). With
``feed_processes = N`` each of N processes has its own replay connection and draws and collates batches
(:func:`services.learner.sampling.draw`) into buffers in shared memory (:mod:`phylorl.agent.batch_transfer`),
a few per process, handed round in a ring: the learner copies a batch's bytes out in one piece (into pinned memory
on a GPU), gives the buffer back, and its prefetch threads take the copy to the device as one block.

A feed process that fails sends its traceback and exits; one that dies without a word is noticed. Either way
:meth:`FeedProcesses.take` raises, as a failed prefetch thread does, and the learner stops (its supervisor
restarts it). The processes stop with :meth:`FeedProcesses.close` or when the learner's process is gone.
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
import traceback

import numpy as np
import torch
import torch.multiprocessing as mp  # registers the reductions that hand a shared tensor to another process

from phylorl.agent.batch import Batch, collate
from phylorl.agent.batch_transfer import Stager

from .config import LearnerConfig
from .sampling import Drawn, draw

log = logging.getLogger("phylorl.learner")


class FeedProcesses:
    """``workers`` processes that sample and collate batches from ``config``'s replay service, ``slots`` buffers
    each. :meth:`take` is a source for :class:`~phylorl.agent.batch.Prefetcher` (thread-safe)."""

    def __init__(self, config: LearnerConfig, workers: int, slots: int, pinned: bool):
        if workers < 1 or slots < 1:
            raise ValueError(f"feed processes and their buffers must be >= 1, got {workers} and {slots}")
        context = mp.get_context("spawn")  # never fork a process that may hold CUDA state
        self._pinned = pinned
        self._stop = context.Event()
        self._out = context.Queue(maxsize=workers * slots)
        self._free = [context.Queue() for _ in range(workers)]
        for ring in self._free:
            for slot in range(slots):
                ring.put(slot)
        self._buffers: dict[tuple[int, int], torch.Tensor] = {}
        self._lock = threading.Lock()
        self._local = threading.local()
        self._processes = [context.Process(target=_feed_main, name=f"phylorl-feed-{i}", daemon=True,
                                           args=(config, i, slots, self._free[i], self._out, self._stop))
                           for i in range(workers)]
        for process in self._processes:
            process.start()

    def take(self, timeout_s: float = 0.05) -> Drawn | None:
        """The next batch drawn (its batch a :class:`~phylorl.agent.batch_transfer.Block` in a host copy of the
        buffer, pinned when the learner is on a GPU and then valid until this thread's next take: :meth:`_stager`;
        none when every record drawn was corrupt), or ``None`` when none came within ``timeout_s``. Raises
        ``RuntimeError`` when a feed process failed or died."""
        try:
            message = self._out.get(timeout=timeout_s)
        except queue.Empty:
            self._check_alive()
            return None
        if message[0] == "error":
            raise RuntimeError(f"learner feed process {message[1]} failed:\n{message[2]}")
        if message[0] == "corrupt":  # every record drawn was corrupt: nothing to train on, but counted
            return Drawn([], None, np.zeros(0, np.int64), np.zeros(0, np.int64), message[1], message[2])
        _, worker, slot, new_buffer, packed, keys, versions, path, corrupt = message
        with self._lock:
            if new_buffer is not None:
                self._buffers[worker, slot] = new_buffer
            buffer = self._buffers[worker, slot]
        try:  # one copy of the batch's bytes (Stager.copy: through memoryviews, holding the interpreter lock)
            block = self._stager().copy(packed, buffer)
        finally:
            self._free[worker].put(slot)
        return Drawn(block, None, keys, versions, path, corrupt)

    def _stager(self) -> Stager:
        """Where a batch's bytes are copied. On a GPU learner this thread's pinned buffer, reused (with its views
        per element type) by the thread's next :meth:`take`: its caller has brought the block to the device and
        waited for the copy before then, as the prefetch threads do (they synchronise their stream). On a CPU a
        buffer of its own per batch: the batch's tensors are views of it, handed on."""
        if not self._pinned:
            return Stager()
        stager = getattr(self._local, "stager", None)
        if stager is None:
            stager = self._local.stager = Stager(pinned=True)
        return stager

    def _check_alive(self) -> None:
        dead = [(i, p.exitcode) for i, p in enumerate(self._processes) if p.exitcode is not None]
        if not dead or self._stop.is_set():
            return
        try:  # a failed process's last word may still be on its way
            while True:
                message = self._out.get(timeout=0.5)
                if message[0] == "error":
                    raise RuntimeError(f"learner feed process {message[1]} failed:\n{message[2]}")
        except queue.Empty:
            pass
        i, code = dead[0]
        raise RuntimeError(f"learner feed process {i} exited (code {code}) without a word")

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the processes (terminated when they do not stop within ``timeout_s``)."""
        self._stop.set()
        for process in self._processes:
            process.join(timeout_s)
            if process.is_alive():
                process.terminate()
                process.join(1.0)
        with self._lock:
            self._buffers.clear()
        for q in (self._out, *self._free):
            q.cancel_join_thread()
            q.close()

    def __enter__(self) -> "FeedProcesses":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _feed_main(config: LearnerConfig, worker: int, slots: int, free, out, stop) -> None:
    """One feed process: draw, collate and pack batches into this process's buffers until ``stop``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C reaches the learner, which stops us
    logging.basicConfig(level=config.log_level, format=f"%(asctime)s feed-{worker} %(levelname)s %(message)s")
    try:
        _feed(config, worker, slots, free, out, stop)
    except BaseException:  # noqa: BLE001 - handed to the learner, which stops
        _put(out, ("error", worker, traceback.format_exc()), stop)


def _feed(config: LearnerConfig, worker: int, slots: int, free, out, stop) -> None:
    from services.common.memory import keep_freed_memory
    from services.replay.client import ReplayClient

    torch.set_num_threads(1)
    keep_freed_memory(config.malloc_keep_mb)
    parent = mp.parent_process()
    replay = ReplayClient(config.replay_address, security=config)
    stagers = [Stager(shared=True) for _ in range(slots)]  # one buffer in shared memory per slot
    sent: list[torch.Tensor | None] = [None] * slots  # each slot's buffer as the learner knows it

    def retire(keys: np.ndarray) -> None:
        try:
            replay.update_priorities(keys, np.zeros(keys.size))  # never drawn again
        except Exception as exc:  # noqa: BLE001 - replay restarting: they may be drawn and retired again
            log.warning("%d corrupt records stay drawable for now (%s)", keys.size, exc)

    try:
        while not stop.is_set() and parent.is_alive():
            try:
                slot = free.get(timeout=0.2)
            except queue.Empty:
                continue
            drawn = None
            while drawn is None and not stop.is_set():
                drawn = draw(replay, config.batch_size, config.sample_timeout_s, retire)
                if drawn is None:
                    stop.wait(0.01)
            if drawn is None:
                return
            if drawn.keys.size == 0:
                free.put(slot)
                _put(out, ("corrupt", drawn.path, drawn.corrupt), stop)
                continue
            batch = drawn.items if isinstance(drawn.items, Batch) else collate(drawn.items, "cpu", drawn.weights)
            block = stagers[slot].stage(batch)
            new_buffer = block.data if block.data is not sent[slot] else None  # sent once, then known by its slot
            sent[slot] = block.data
            _put(out, ("batch", worker, slot, new_buffer, block.packed, drawn.keys, drawn.versions, drawn.path,
                       drawn.corrupt), stop)
    finally:
        replay.close()


def _put(out, message, stop) -> None:
    while not stop.is_set():
        try:
            out.put(message, timeout=0.2)
            return
        except queue.Full:
            continue
