"""The learner-hosted inference endpoint: dynamic batching of Act requests from many actors.

Requests wait in a bounded queue (full: the caller gets :class:`Overloaded`, sent as RESOURCE_EXHAUSTED). One
thread takes the first waiting request, gathers more until ``max_batch`` states are collected or
``max_delay_s`` has passed, runs the twin Q networks once over all of them and answers each request with its
own slice. Each request's states (observation records) are made into network inputs as it arrives, on the
caller's thread (:func:`phylorl.records.collate.collate_states`, one compiled pass that releases the GIL),
which also checks them: a bad state fails its own request (``ValueError`` naming it), never the batch. The
networks used are the last published snapshot (:meth:`BatchingInference.publish`); every answer carries its
version.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from phylorl.agent.acting import answers_on_host, assemble, policy_networks, select_actions
from phylorl.agent.capture import GraphedActing, bucket
from phylorl.agent.learner_setup import with_index
from phylorl.agent.transfer import Stager
from phylorl.nets import fused_head
from phylorl.nets.config import NetworkConfig
from phylorl.nets.twin import twin_or_none
from phylorl.records.collate import collate_states
from phylorl.records.format import PackedRecords

from . import metrics

log = logging.getLogger("phylorl.learner.inference")


class Overloaded(RuntimeError):
    """The request queue is full."""


@dataclass
class _Request:
    inputs: tuple  # (GraphBatch, ActionBatch) of its states, CPU tensors
    count: int
    greedy: bool
    arrived: float = field(default_factory=time.perf_counter)
    done: object = field(default_factory=threading.Event)  # anything with set(): called once answered
    result: tuple | None = None
    error: BaseException | None = None


@dataclass
class Snapshot:
    """Published policy: the twin online networks (eval mode; ``nets``), the temperature and the weights
    version. ``written``: on a GPU, a CUDA event recorded on the publisher's stream after its copies into the
    networks, which the batching stream waits for before reading them; ``None`` on a CPU. ``alpha``: a number,
    or a 0-d tensor on the endpoint's device, read after ``written`` like the networks."""

    nets: object
    pair: tuple
    alpha: float | torch.Tensor
    version: int
    written: object = None


class BatchingInference:
    """See the module docstring. ``publish`` must be called once before requests are answered."""

    def __init__(
        self,
        net_cfg: NetworkConfig,
        device: torch.device,
        *,
        max_batch: int,
        max_delay_s: float,
        max_queue: int,
        seed: int = 0,
        fused_head: bool = False,
        cuda_graphs: bool = False,
    ):
        self.net_cfg = net_cfg
        self.fused_head = fused_head and device.type == "cuda"
        """Answer with the fused Triton head (``AgentConfig.fused_head``; on a CUDA device only)."""
        self.device = with_index(device)  # as its tensors name it (cuda:0, not cuda)
        self.max_batch = max_batch
        self.max_delay_s = max_delay_s
        self._queue: queue.Queue[_Request] = queue.Queue(maxsize=max_queue)
        self._snapshot: Snapshot | None = None
        self._lock = threading.Lock()  # the snapshot the batching thread answers with
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._generator = torch.Generator(device=device).manual_seed(seed)
        # on a GPU the answers run on a high-priority stream of their own, not behind the learner's updates
        self._stream = torch.cuda.Stream(device, priority=-1) if device.type == "cuda" else None
        # a batch's inputs go to the GPU as one pinned block (written again once the batch's answers are back)
        self._stager = Stager(pinned=device.type == "cuda")
        self._graphed = GraphedActing(net_cfg, device, self.fused_head) if cuda_graphs else None
        """Answers replayed as CUDA graphs (``LearnerConfig.inference_cuda_graphs``; on a CPU the same padded
        path runs eagerly, for tests)."""
        self._thread = threading.Thread(target=self._run, name="inference-batcher", daemon=True)
        self._thread.start()

    def publish(self, weights: dict, alpha: float | torch.Tensor, version: int) -> Snapshot:
        """Serve ``weights`` (``{"q1": state, "q2": state}``, tensors on the host or this endpoint's device,
        e.g. :meth:`Learner.policy_tensors`) and ``alpha`` (a number or a 0-d tensor on this device, kept as
        it is) from now on; returns the snapshot. The weights are copied into new networks that never change
        (on a GPU the copies are queued on the caller's stream, which the batches after them wait for)."""
        if self.fused_head and self._snapshot is None:  # compile before the first request, not during it
            fused_head.warm_up(self.net_cfg.head_hidden, self.net_cfg.action_meta, self.device)
        pair = policy_networks(self.net_cfg, weights, self.device)
        written = None
        # the batching stream waits for this thread's copies on the GPU, not here
        if self.device.type == "cuda":
            written = torch.cuda.Event()
            written.record(torch.cuda.current_stream(self.device))
        # min(Q1, Q2) in one pass where it applies
        nets = twin_or_none(pair, fused=self.fused_head, frozen=True) or pair
        if isinstance(alpha, torch.Tensor) and (alpha.dim() != 0 or alpha.device != self.device):
            raise ValueError(
                f"alpha must be a number or a 0-d tensor on {self.device}, got {tuple(alpha.shape)} on "
                f"{alpha.device}"
            )
        snapshot = Snapshot(
            nets, pair, alpha if isinstance(alpha, torch.Tensor) else float(alpha), int(version), written
        )
        with self._lock:
            self._snapshot = snapshot
        self._ready.set()
        return snapshot

    @property
    def snapshot(self) -> Snapshot | None:
        return self._snapshot

    def act(self, states: PackedRecords, greedy: bool, timeout_s: float | None = None):
        """``(actions, q, v, version)`` for ``states`` (observation records); blocks until answered.
        ``ValueError`` names a bad state."""
        request = self.submit(states, greedy, threading.Event())
        if not request.done.wait(timeout_s):
            raise TimeoutError(f"no answer within {timeout_s} s")
        return self.result(request)

    def submit(self, states: PackedRecords, greedy: bool, done) -> _Request:
        """Make ``states``' inputs (on the calling thread) and queue them for the next batch, without waiting:
        ``done.set()`` is called (from the batching thread) once :meth:`result` can be read. ``ValueError``
        names a bad state; :class:`Overloaded` when the queue is full."""
        if len(states) == 0:
            raise ValueError("an Act request needs at least one state")
        start = time.perf_counter()
        graphs, actions, _ = collate_states(states)
        cfg = self.net_cfg
        got = (graphs.x.shape[1], graphs.edge_attr.shape[1], actions.meta.shape[1])
        want = (cfg.node_features, cfg.edge_features, cfg.action_meta)
        wrong = [
            f"{g} {name} feature columns, the network reads {w}"
            for name, g, w in zip(("node", "edge", "move"), got, want)
            if g != w
        ]
        if wrong:
            raise ValueError(f"the states carry {'; '.join(wrong)}")
        request = _Request((graphs, actions), len(states), bool(greedy), done=done)
        metrics.INFERENCE_STAGE.labels("inputs").observe(request.arrived - start)
        try:
            self._queue.put_nowait(request)
        except queue.Full:
            metrics.INFERENCE_REJECTED.inc()
            raise Overloaded(
                f"inference queue full ({self._queue.maxsize} requests waiting); retry later"
            ) from None
        metrics.INFERENCE_QUEUE.set(self._queue.qsize())
        return request

    @staticmethod
    def result(request: _Request) -> tuple:
        """The answer of an answered :meth:`submit` (its error raised)."""
        if request.error is not None:
            raise request.error
        metrics.INFERENCE_REQUESTS.inc()
        metrics.INFERENCE_LATENCY.observe(time.perf_counter() - request.arrived)
        return request.result

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def _gather(self) -> list[_Request]:
        batch = [self._queue.get(timeout=0.1)]
        count = batch[0].count
        deadline = time.perf_counter() + self.max_delay_s
        while count < self.max_batch:
            remaining = deadline - time.perf_counter()
            try:
                item = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            batch.append(item)
            count += item.count
        metrics.INFERENCE_QUEUE.set(self._queue.qsize())
        return batch

    def _answer_graphed(self, block, snapshot: Snapshot, greedy: bool, count: int) -> tuple:
        """The answers of a padded batch (its first ``count`` states the batch's) from ``self._graphed``."""
        self._graphed.load(snapshot.pair, snapshot.alpha, snapshot.version)
        replays, failures = self._graphed.replays, len(self._graphed.failed)
        chosen, q, v = self._graphed(block, greedy, self._generator)
        metrics.INFERENCE_BATCHES.labels("graph" if self._graphed.replays > replays else "eager").inc()
        if len(self._graphed.failed) > failures:
            metrics.INFERENCE_CAPTURE_FAILURES.inc()
            what = "inference: capturing a batch shape (%d states) failed, it runs eagerly from now on: %s"
            log.warning(what, count, list(self._graphed.failed.values())[-1])
        return chosen, q, v  # (the first ``count`` are the batch's: answers_on_host)

    def _run(self) -> None:
        if self._stream is not None:
            torch.cuda.set_stream(self._stream)  # this thread's current stream
        while not self._stop.is_set():
            if not self._ready.wait(0.1):
                continue
            try:
                batch = self._gather()
            except queue.Empty:
                continue
            for greedy in (False, True):
                group = [r for r in batch if r.greedy == greedy]
                if group:
                    self._answer(group, greedy)

    def _answer(self, group: list[_Request], greedy: bool) -> None:
        with self._lock:
            snapshot = self._snapshot
        answered = None
        try:
            if snapshot.written is not None:  # its weights' copies are done before this batch reads them
                self._stream.wait_event(snapshot.written)
            t0 = time.perf_counter()
            count = sum(r.count for r in group)
            metrics.INFERENCE_BATCH.observe(count)
            parts = [r.inputs for r in group]
            if self._graphed is not None:  # its states padded to a bucket's count, in one block
                block = assemble(parts, bucket(count, self.max_batch), self._stager)
                t1 = time.perf_counter()
                chosen, q, v = self._answer_graphed(block, snapshot, greedy, count)
            else:
                graphs, actions = assemble(parts, count, self._stager).to(self.device, non_blocking=True)
                metrics.INFERENCE_BATCHES.labels("eager").inc()
                t1 = time.perf_counter()
                chosen, q, v = select_actions(
                    snapshot.nets, graphs, actions, snapshot.alpha, greedy, generator=self._generator
                )
            chosen, q, v = (t.numpy() for t in answers_on_host(chosen, q, v, count))
            answered = time.perf_counter()
            metrics.INFERENCE_STAGE.labels("batch").observe(t1 - t0)
            metrics.INFERENCE_STAGE.labels("network").observe(answered - t1)
            start, typed = 0, ((chosen, np.int64), (q, np.float32), (v, np.float32))
            for r in group:
                r.result = (*(a[start : start + r.count].astype(t) for a, t in typed), snapshot.version)
                start += r.count
        except BaseException as error:  # answered to every caller of the group
            for r in group:
                r.error = error
        finally:
            if self._stream is not None:  # (done already unless the batch failed) its block is free
                self._stream.synchronize()
        for r in group:
            r.done.set()
        if answered is not None:
            metrics.INFERENCE_STAGE.labels("reply").observe(time.perf_counter() - answered)
