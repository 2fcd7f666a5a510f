"""Transitions -> device tensors, and a background prefetcher that keeps batches ready.

:func:`collate` does all the Python and numpy work (concatenate arrays, offset node ids, build the
neighbour tables); :class:`Prefetcher` runs it on a thread with pinned memory and asynchronous
copies, so that the learner's update only ever waits for data that is not yet sampled.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from phylorl.agent.batch_transfer import Block, Stager
from phylorl.env.move_kernels import expand_moves
from phylorl.types import Transition
from phylorl.nets.compact_actions import CompactActions, expand_actions
from phylorl.nets.inputs import ActionBatch, GraphBatch, collate_actions, collate_graphs, map_tensors, move_to


@dataclass
class Batch:
    """``B`` transitions ready for the learner (all tensors on one device).

    ``graphs``        trees of the states ``s``.
    ``actions``       the action taken in each ``s`` (one per state, so ``A = B``).
    ``next_graphs``   trees of the next states ``s'``.
    ``next_actions``  *all* actions of each ``s'`` (``next_actions.states`` groups them); on the host they
                      may be :class:`CompactActions`, which :func:`on_device` expands where the update runs.
    ``reward``        float32 ``[B]``.
    ``discount``      float32 ``[B]``, applied to ``V(s')`` (``gamma**k`` for ``k``-step).
    ``terminal``      bool ``[B]``, true end of the task (no bootstrap); truncation is not terminal.
    ``weights``       float32 ``[B]``, importance-sampling weights of prioritised replay.
    ``next_labels``   float32 ``[A']``, demonstration label of every action of ``next_actions`` (0
                      where its state is unlabelled); ``[0]`` when no next state is labelled
                      (``any_labelled`` false: nothing reads them, and none are made or copied).
    ``next_labelled`` bool ``[B]``, whether ``s'`` carries labels.
    """

    graphs: GraphBatch
    actions: ActionBatch
    next_graphs: GraphBatch
    next_actions: ActionBatch | CompactActions
    reward: Tensor
    discount: Tensor
    terminal: Tensor
    weights: Tensor
    next_labels: Tensor
    next_labelled: Tensor
    any_labelled: bool = True
    """Whether any next state carries labels (known on the host: no device sync to ask)."""
    bootstraps: bool = True
    """Whether any transition's target bootstraps (a discount other than 0; known on the host)."""

    @property
    def size(self) -> int:
        return int(self.reward.shape[0])


def on_device(batch: "Batch | Block", device: torch.device | str, pin_memory: bool = False,
              stager: Stager | None = None, consumer: torch.Stream | None = None) -> Batch:
    """``batch`` on ``device`` (see :func:`~phylorl.nets.inputs.move_to`) with its next actions expanded
    there when they are :class:`CompactActions`. A :class:`~phylorl.agent.batch_transfer.Block` (a batch packed
    in one host buffer), or a batch packed by ``stager`` on the way, goes to a CUDA device in one call
    (:func:`~phylorl.agent.batch_arrival.arrive`: a transfer per element type, asynchronous from pinned memory)
    instead of a transfer per tensor. ``consumer``: a CUDA stream other than the current one that will use the
    batch: its memory is marked for it (``record_stream``; inside that one call for a block)."""
    device = torch.device(device)
    if stager is not None and device.type == "cuda" and isinstance(batch, Batch):
        batch = stager.stage(batch)
    if isinstance(batch, Block) and device.type == "cuda":  # one call, its moves expanded there (batch_arrival)
        return batch.to(device, non_blocking=batch.pinned, consumer=consumer)
    if isinstance(batch, Block):
        batch = move_to(batch.unpack(), device)
    else:
        batch = move_to(batch, device, pin_memory)
    if isinstance(batch.next_actions, CompactActions):
        batch = dataclasses.replace(batch, next_actions=expand_on_host(batch.next_actions)
                                    if batch.reward.device.type == "cpu" else expand_actions(batch.next_actions))
    return mark_for(batch, consumer)


def mark_for(batch, consumer: torch.Stream | None):
    """``batch``, its memory marked for use on the ``consumer`` stream (``record_stream``, one call per memory
    block: :func:`storages`) when one is given: the allocator then waits for that stream's work before it reuses
    the memory."""
    if consumer is not None:
        for tensor in storages(batch):
            tensor.record_stream(consumer)
    return batch


def expand_on_host(compact: CompactActions) -> ActionBatch:
    """:func:`~phylorl.nets.compact_actions.expand_actions` of CPU tensors, in one compiled pass."""
    nodes, meta = expand_moves(*(t.numpy() for t in (compact.slot_node, compact.pruned, compact.regraft, compact.shared,
                                                     compact.walk_slot, compact.walk_own, compact.blocks,
                                                     compact.shared_row, compact.columns)))
    return ActionBatch(torch.from_numpy(nodes), torch.from_numpy(meta), compact.states())


def collate(
    transitions: Sequence[Transition],
    device: torch.device | str = "cpu",
    weights: np.ndarray | None = None,
    pin_memory: bool = False,
) -> Batch:
    """Stack ``transitions`` into a :class:`Batch` on ``device``.

    ``weights``: importance-sampling weights ``[B]`` (default all ones). ``pin_memory``: pin the
    host tensors and copy asynchronously (CUDA devices only; ignored otherwise).
    """
    if not transitions:
        raise ValueError("cannot collate an empty list of transitions")
    b = len(transitions)
    obs = [t.obs for t in transitions]
    nxt = [t.next_obs for t in transitions]
    for i, t in enumerate(transitions):
        if not 0 <= t.action < t.obs.n_actions:
            raise ValueError(f"transition {i}: action {t.action} outside 0..{t.obs.n_actions - 1}")
        if t.next_obs.n_actions == 0 and not t.terminal:
            raise ValueError(f"transition {i}: next state has no actions but is not terminal")
    graphs = collate_graphs(obs)
    next_graphs = collate_graphs(nxt)
    actions = collate_actions(
        [o.actions[t.action: t.action + 1] for o, t in zip(obs, transitions)],
        [o.action_meta[t.action: t.action + 1] for o, t in zip(obs, transitions)],
        graphs.node_offset.numpy(),
        [o.n_nodes for o in obs],
    )
    next_actions = collate_actions(
        [o.actions for o in nxt], [o.action_meta for o in nxt], next_graphs.node_offset.numpy(),
        [o.n_nodes for o in nxt],
    )
    if weights is None:
        weights = np.ones(b, dtype=np.float32)
    weights = np.asarray(weights, dtype=np.float32)
    if weights.shape != (b,):
        raise ValueError(f"weights must have shape ({b},), got {weights.shape}")
    batch = Batch(
        graphs=graphs,
        actions=actions,
        next_graphs=next_graphs,
        next_actions=next_actions,
        reward=torch.tensor([t.reward for t in transitions], dtype=torch.float32),
        discount=torch.tensor([t.discount for t in transitions], dtype=torch.float32),
        terminal=torch.tensor([bool(t.terminal) for t in transitions], dtype=torch.bool),
        weights=torch.from_numpy(weights.copy()),
        next_labels=torch.from_numpy(_labels(transitions)),
        next_labelled=torch.tensor([t.next_labels is not None for t in transitions], dtype=torch.bool),
        any_labelled=any(t.next_labels is not None for t in transitions),
        bootstraps=any(t.discount != 0 for t in transitions),
    )
    return move_to(batch, device, pin_memory)


def _labels(transitions: Sequence[Transition]) -> np.ndarray:
    parts: list[np.ndarray] = []
    if all(t.next_labels is None for t in transitions):
        return np.zeros(0, dtype=np.float32)
    for i, t in enumerate(transitions):
        if t.next_labels is None:
            parts.append(np.zeros(t.next_obs.n_actions, dtype=np.float32))
        elif np.shape(t.next_labels) != (t.next_obs.n_actions,):
            raise ValueError(f"transition {i}: {np.shape(t.next_labels)} labels for {t.next_obs.n_actions} next moves")
        else:
            parts.append(np.asarray(t.next_labels, dtype=np.float32))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)


def storages(obj) -> list[torch.Tensor]:
    """One tensor of ``obj`` per memory block it uses: a batch that came as one :class:`Block` is mostly views of
    one buffer, and ``record_stream`` of one view covers them all (each call lets the interpreter lock go: one per
    block instead of one per tensor). Found without a torch call that lets it go (``data_ptr``)."""
    found: dict[int, torch.Tensor] = {}
    map_tensors(obj, lambda t: (found.setdefault(t.untyped_storage().data_ptr(), t), t)[1])
    return list(found.values())


Sample = tuple["Sequence[Transition] | Batch | Block", "np.ndarray | None", Any]
"""What a prefetcher's source returns: transitions and their IS weights (or ``None``), or a batch
already collated on the host, maybe packed in one buffer (weights then ``None``: they are in the batch),
and opaque info (e.g. replay keys) handed back with the batch."""


class Prefetcher:
    """Collates sampled transitions on background threads and queues ready batches.

    ``sample()`` returns a :data:`Sample` or ``None`` when no data is available yet (the thread then
    waits ``idle_wait_s`` and asks again). Up to ``depth`` batches wait in a bounded queue.
    ``workers`` threads sample and collate at once (``sample`` must then be thread-safe): one
    thread is bound by the latency of each sample call and by decoding, several overlap them. On a CUDA
    device the host tensors are pinned and copied on a side stream, so a batch handed out is already
    on the device. An exception raised by ``sample`` or ``collate`` is re-raised by :meth:`get`.

    Use as a context manager or call :meth:`close`.
    """

    def __init__(self, sample: Callable[[], "Sample | None"], device: torch.device | str = "cpu",
                 depth: int = 2, idle_wait_s: float = 0.01, workers: int = 1):
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
        self._threads = [threading.Thread(target=self._run, name=f"batch-prefetcher-{i}", daemon=True)
                         for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        cuda = self._device.type == "cuda"
        stream = torch.cuda.Stream(self._device) if cuda else None
        stager = Stager(pinned=True) if cuda else None  # this thread's: reused once its copy is done (synchronize)
        try:
            while not self._stop.is_set():
                drawn = self._sample()
                if drawn is None:
                    self._stop.wait(self._idle_wait_s)
                    continue
                items, weights, info = drawn
                if cuda:  # marked for the consumer's stream here, not on the consumer's thread (each torch call
                    # there waits for the lock): a staged batch in its one call to the device
                    with torch.cuda.stream(stream):
                        batch = self._to_device(items, weights, pin_memory=True, stager=stager, consumer=self._consumer)
                    stream.synchronize()
                else:
                    batch = self._to_device(items, weights)
                self._put((batch, info))
        except BaseException as error:  # handed to the consumer by get()
            self._put(error)

    def _to_device(self, items, weights, pin_memory: bool = False, stager: Stager | None = None,
                   consumer: torch.Stream | None = None) -> Batch:
        if isinstance(items, (Batch, Block)):  # already collated on the host (phylorl.agent.packed_batch)
            return on_device(items, self._device, pin_memory, stager, consumer)
        return mark_for(collate(items, self._device, weights, pin_memory=pin_memory), consumer)

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
            mark_for(batch, torch.cuda.current_stream(self._device))  # used on another stream than its maker's
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

    def __enter__(self) -> "Prefetcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
