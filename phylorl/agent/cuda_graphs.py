"""The learner's update replayed as CUDA graphs (``AgentConfig.cuda_graphs``).

An eager update launches a few hundred small kernels (four network passes over every next move, their
backward, clipping, two optimisers, the target update); at the design size the GPU finishes each sooner
than Python launches the next. Here each batch shape gets two captured graphs that replay the same
kernels with one launch each:

* ``compute``: :meth:`Learner.compute` (forward, backward with the gradients *assigned*, clipping,
  alpha's gradient, the metrics and the finite flag) on static copies of the batch's tensors;
* ``apply``: :meth:`Learner.apply` (capturable Adam steps) and, when the targets follow every update,
  :meth:`Learner.update_targets`.

The learner reads the metrics between the two (its one sync per update) and replays ``apply`` only for a
finite update, exactly as the eager path skips one. A shape is captured after :data:`WARMUP` eager updates
of it (run on a side stream, as capture requires: they create the optimiser's state and the libraries'
workspaces) and only shapes seen that often are captured, at most :data:`MAX_SHAPES` of them. Each capture
has its own memory pool, so graphs of different shapes can replay in any order.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from phylorl.nets.inputs import map_tensors

if TYPE_CHECKING:
    from phylorl.agent.batch import Batch
    from phylorl.agent.learner import Learner

WARMUP = 2
"""Eager updates of a batch shape before it is captured."""

CAPTURE_LOCK = threading.Lock()
"""Held through every capture in this process (the learner's updates, the inference endpoint's answers,
:mod:`phylorl.agent.acting_graphs`) and the device-wide synchronize before it: such a synchronize while another
thread's capture is under way fails and invalidates that capture (seen on an H200)."""

MAX_SHAPES = 8
"""Batch shapes captured at most (each holds its own activations: about 1 GB at the design size)."""


def signature(obj) -> tuple:
    """Everything a captured graph depends on besides tensor contents: shapes, dtypes and host values."""
    if isinstance(obj, Tensor):
        return ("tensor", tuple(obj.shape), obj.dtype)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return tuple((f.name, signature(getattr(obj, f.name))) for f in dataclasses.fields(obj))
    if isinstance(obj, (tuple, list)):
        return tuple(signature(item) for item in obj)
    return ("value", obj)


def _tensors(obj) -> list[Tensor]:
    """Every tensor inside ``obj``, in :func:`~phylorl.nets.inputs.map_tensors`'s (field) order."""
    found: list[Tensor] = []
    map_tensors(obj, lambda t: found.append(t) or t)
    return found


class CapturedUpdate:
    """The two graphs of one batch shape and the static tensors they read and write."""

    def __init__(self, learner: "Learner", batch: "Batch"):
        self.learner = learner
        self.static = map_tensors(batch, lambda t: t.clone())
        self._inputs = _tensors(self.static)
        self.params = params = [*learner.q1.parameters(), *learner.q2.parameters(), learner.log_alpha]
        for p in params:
            p.grad = None  # captured backward then assigns (not accumulates) into buffers of its own
        self.compute_graph = torch.cuda.CUDAGraph()
        # thread-local: the learner service's inference and prefetch threads go on using the GPU meanwhile
        with torch.cuda.graph(self.compute_graph, capture_error_mode="thread_local"):
            self.values, self.priorities = learner.compute(self.static)
        self.grads = [p.grad for p in params]  # keep this capture's gradient buffers alive
        self.updates_targets = learner.agent_cfg.target_update_period == 1
        self.apply_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.apply_graph, capture_error_mode="thread_local"):
            learner.apply()
            if self.updates_targets:
                learner.update_targets()

    def compute(self, batch: "Batch") -> tuple[Tensor, Tensor]:
        # one call for the batch's ~25 tensors: each call lets the interpreter lock go to the learner
        # service's other threads (the endpoint's, the prefetchers'), and waits to take it back
        torch._foreach_copy_(self._inputs, _tensors(batch), non_blocking=True)
        if any(p.grad is not g for p, g in zip(self.params, self.grads)):  # (an eager update set them to None)
            for p, g in zip(self.params, self.grads):
                p.grad = g  # so that the learner (and anyone reading .grad) sees this update's gradients
        self.compute_graph.replay()
        return self.values, self.priorities

    def apply(self) -> None:
        self.apply_graph.replay()


class CudaGraphs:
    """Per-shape captured updates of one learner (see the module docstring)."""

    def __init__(self, learner: "Learner"):
        cfg = learner.agent_cfg
        if cfg.network_path != "fast":
            raise ValueError("AgentConfig.cuda_graphs needs network_path='fast'")
        if learner.net_cfg.dropout:
            raise ValueError("AgentConfig.cuda_graphs needs NetworkConfig.dropout = 0 (graphs replay fixed masks)")
        for net in (learner.q1, learner.q2, learner.target1, learner.target2):
            net.cache_derived = False  # derived weights are recomputed inside the graph, never baked in
        self.learner = learner
        self.seen: Counter = Counter()
        self.captured: dict[tuple, CapturedUpdate] = {}
        self.eager_updates = 0
        """Updates run eagerly: warm-ups and shapes beyond :data:`MAX_SHAPES`."""
        self.replays = 0
        self.stream = torch.cuda.Stream(learner.device)

    @contextmanager
    def eager(self):
        """Run an eager update on a side stream (warm-ups must not run on the stream graphs capture from)."""
        self.stream.wait_stream(torch.cuda.current_stream(self.learner.device))
        with torch.cuda.stream(self.stream):
            yield
        torch.cuda.current_stream(self.learner.device).wait_stream(self.stream)

    def prepare(self, batch: "Batch") -> CapturedUpdate | None:
        """The captured update for ``batch``'s shape (capturing it when its warm-up is done), or ``None``
        when this update runs eagerly (the warm-up ones on a side stream)."""
        key = signature(batch)
        found = self.captured.get(key)
        ready = self.seen[key] >= WARMUP and self.learner.updates > 0  # the optimisers' state exists
        if found is None and ready and len(self.captured) < MAX_SHAPES:
            with CAPTURE_LOCK:
                torch.cuda.synchronize(self.learner.device)
                found = self.captured[key] = CapturedUpdate(self.learner, batch)
        if found is not None:
            self.replays += 1
            return found
        self.seen[key] += 1
        self.eager_updates += 1
        return None
