"""A background prefetcher that keeps the learner's batches ready on its device, so that an update only ever
waits for data not yet sampled.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from phylorl.agent.transfer import Block, Stager, mark_for, on_device
from phylorl.nets.inputs import Batch

Sample = tuple["Batch | Block", Any]
"""What a prefetcher's source returns: a batch collated on the host (maybe packed in one buffer) and opaque
info (e.g. replay keys) handed back with it."""


class Prefetcher:
    """Samples batches on background threads, brings them to the device and queues them (up to ``depth``).

    ``sample()`` returns a :data:`Sample`, or ``None`` when no data is available yet (the thread then waits
    ``idle_wait_s``). ``workers`` threads sample and collate at once (``sample`` must then be thread-safe),
    overlapping the latency of sample calls and decoding. On a CUDA device a batch is pinned and copied on a
    side stream (:func:`~phylorl.agent.transfer.on_device`), so it is handed out on the device. An exception
    raised by ``sample`` is re-raised by :meth:`get`. Use as a context manager or call :meth:`close`."""

    def __init__(
        self,
        sample: Callable[[], Sample | None],
        device: torch.device | str = "cpu",
        depth: int = 2,
        idle_wait_s: float = 0.01,
        workers: int = 1,
    ):
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self._sample = sample
        self._device = torch.device(device)
        # the stream the batches are used on: that of the thread that makes the prefetcher (checked in get)
        self._consumer = torch.cuda.current_stream(self._device) if self._device.type == "cuda" else None
        self._idle_wait_s = idle_wait_s
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._threads = [
            threading.Thread(target=self._run, name=f"batch-prefetcher-{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        cuda = self._device.type == "cuda"
        stream = torch.cuda.Stream(self._device) if cuda else None
        stager = Stager(pinned=True) if cuda else None  # this thread's: reused once its copy is done
        try:
            while not self._stop.is_set():
                drawn = self._sample()
                if drawn is None:
                    self._stop.wait(self._idle_wait_s)
                    continue
                items, info = drawn
                if cuda:  # staged, moved and marked for the consumer's stream here, in one call
                    with torch.cuda.stream(stream):
                        batch = on_device(items, self._device, True, stager, self._consumer)
                    stream.synchronize()
                else:
                    batch = on_device(items, self._device)
                self._put((batch, info))
        except BaseException as error:  # handed to the consumer by get()
            self._put(error)

    def _put(self, item) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return
            except queue.Full:
                continue

    def get(self, timeout: float | None = None) -> tuple[Batch, Any]:
        """The next ready ``(batch, info)``; raises ``TimeoutError`` after ``timeout`` seconds."""
        if self._error is not None:
            raise RuntimeError("the prefetcher's sampling thread failed") from self._error
        if self._stop.is_set():
            raise RuntimeError("the prefetcher is closed")
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no batch ready within {timeout} s") from None
        if isinstance(item, BaseException):
            self._error = item
            raise RuntimeError("the prefetcher's sampling thread failed") from item
        batch, info = item
        if self._consumer is not None and torch.cuda.current_stream(self._device) != self._consumer:
            mark_for(batch, torch.cuda.current_stream(self._device))
        return batch, info

    def close(self, timeout: float = 5.0) -> None:
        """Stop the threads and drop queued batches."""
        self._stop.set()
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> Prefetcher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
