"""CUDA graphs: the learner's update (``AgentConfig.cuda_graphs``) and the inference endpoint's answers
(``LearnerConfig.inference_cuda_graphs``), each replayed with one launch per batch shape.

**The update.** An eager update launches a few hundred small kernels, which at the design size the GPU
finishes sooner than Python launches them. :class:`CudaGraphs` gives each batch shape two captured graphs:
``compute`` (forward, backward with the gradients *assigned*, clipping, alpha's gradient, the metrics and the
finite flag, on static copies of the batch's tensors) and ``apply`` (capturable Adam steps and, when the
targets follow every update, the target update). The learner reads the metrics between the two (its one sync)
and replays ``apply`` only for a finite update. A shape is captured after :data:`WARMUP` eager updates of it
(on a side stream), at most :data:`MAX_SHAPES` of them, each with its own memory pool.

**The answers.** :class:`GraphedActing` captures a whole answer (``min(Q1, Q2)`` of every move, the Gumbel-max
or greedy choice, the chosen move's Q and the soft value) per batch shape: :func:`bucket` rounds a batch's
state count up (the endpoint pads with copies of its last state); a batch arrives as one pinned
:class:`~phylorl.agent.transfer.Block` that a replay copies in one piece; the graphs run the class's own
network pair, into which :meth:`GraphedActing.load` copies each published version once; the temperature is a
device scalar. A shape whose capture fails stays eager. On a CPU the same answers run eagerly; ``tests/gpu/``
compares the two.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from phylorl.agent.acting import choose, pair_tensors, write_policy
from phylorl.agent.transfer import Block, unpack
from phylorl.nets.config import NetworkConfig
from phylorl.nets.inputs import ActionBatch, GraphBatch, map_tensors
from phylorl.nets.qnet import QNetwork
from phylorl.nets.twin import TwinQ

if TYPE_CHECKING:
    from phylorl.agent.learner import Learner
    from phylorl.nets.inputs import Batch

WARMUP = 2
"""Eager updates of a batch shape before it is captured."""

CAPTURE_LOCK = threading.Lock()
"""Held through every capture in this process and the device-wide synchronize before it: such a synchronize
during another thread's capture fails and invalidates that capture."""

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

    def __init__(self, learner: Learner, batch: Batch):
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

    def compute(self, batch: Batch) -> tuple[Tensor, Tensor]:
        # one call for the batch's ~25 tensors (each call lets the interpreter lock go, then waits for it)
        torch._foreach_copy_(self._inputs, _tensors(batch), non_blocking=True)
        # (an eager update set them to None)
        if any(p.grad is not g for p, g in zip(self.params, self.grads)):
            for p, g in zip(self.params, self.grads):
                p.grad = g  # so that the learner (and anyone reading .grad) sees this update's gradients
        self.compute_graph.replay()
        return self.values, self.priorities

    def apply(self) -> None:
        self.apply_graph.replay()


class CudaGraphs:
    """Per-shape captured updates of one learner (see the module docstring)."""

    def __init__(self, learner: Learner):
        if learner.net_cfg.dropout:
            raise ValueError(
                "AgentConfig.cuda_graphs needs NetworkConfig.dropout = 0 (graphs replay fixed masks)"
            )
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

    def prepare(self, batch: Batch) -> CapturedUpdate | None:
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


ACTING_WARMUP = 2
"""Eager answers of a shape before it is captured."""

ACTING_SHAPES = 16
"""Shapes (state count, tree sizes, greedy or sampled) captured at most."""


STEP = 16
"""Above this many states, batches are padded to a multiple of it (below, to a power of two)."""


def bucket(count: int, max_batch: int) -> int:
    """The state count a batch of ``count`` states is padded to: the next power of two up to :data:`STEP`, the
    next multiple of :data:`STEP` above it, at most ``max_batch`` (never below ``count``); with ``max_batch``
    64: 1, 2, 4, 8, 16, 32, 48, 64."""
    if count < 1:
        raise ValueError(f"a batch needs at least one state, got {count}")
    padded = 1 << (count - 1).bit_length() if count <= STEP else -(-count // STEP) * STEP
    return max(count, min(padded, max_batch))


def _answer(twin: TwinQ, graphs: GraphBatch, actions: ActionBatch, alpha: Tensor, noise: Tensor | None):
    return choose(twin(graphs, actions), actions.states, alpha, noise)


class _Captured:
    """One shape's graph, its input buffer (the packed layout of the shape's blocks) and its outputs."""

    def __init__(self, owner: GraphedActing, block: Block, greedy: bool):
        nbytes = block.packed.nbytes
        self.inputs = block.data[:nbytes].to(owner.device)
        graphs, actions = unpack(block.packed, self.inputs)
        self.noise = None if greedy else torch.rand(actions.nodes.shape[0], device=owner.device)
        self.graph = torch.cuda.CUDAGraph()
        # no other capture of this process meanwhile: torch.cuda.graph starts with a device-wide synchronize
        with (
            CAPTURE_LOCK,
            torch.cuda.graph(self.graph, stream=owner.capture_stream, capture_error_mode="thread_local"),
        ):
            self.outputs = _answer(owner.graphed, graphs, actions, owner.alpha, self.noise)

    def replay(self, block: Block, generator: torch.Generator | None) -> tuple[Tensor, Tensor, Tensor]:
        self.inputs.copy_(block.data[: block.packed.nbytes], non_blocking=True)
        if self.noise is not None:
            self.noise.uniform_(generator=generator)
        self.graph.replay()
        return self.outputs


class GraphedActing:
    """A network pair that answers batches of states, replaying a captured CUDA graph per batch shape
    (see the module docstring). Used by one thread; its outputs are valid until its next call."""

    def __init__(self, net_cfg: NetworkConfig, device: torch.device, fused: bool = False):
        self.device = device
        self.pair = pair = tuple(QNetwork(net_cfg).to(device).eval() for _ in range(2))
        for net in pair:
            net.cache_derived = False  # derived weights recomputed inside the graph, never baked in
        # stacked weights cached while the parameters are unchanged
        self.eager_twin = TwinQ(*pair, fused=fused)
        self.graphed = TwinQ(*pair, fused=fused, cache=False)  # stacked anew in every replay
        self.alpha = torch.ones((), device=device)
        self._alpha_value: float | Tensor = 1.0  # what ``alpha`` holds: the number or tensor last written
        self.version: int | None = None
        self.captures = device.type == "cuda"
        self.capture_stream = torch.cuda.Stream(device, priority=-1) if self.captures else None
        self.seen: Counter = Counter()
        self.captured: dict[tuple, _Captured] = {}
        self.failed: dict[tuple, str] = {}
        """Shapes whose capture failed (the error, as text): answered eagerly from then on (the endpoint logs
        and counts each: ``phylorl_inference_capture_failures_total``)."""
        self.replays = 0
        self.eager = 0

    def load(self, pair, alpha: float | Tensor, version: int) -> None:
        """Answer with the weights of network pair ``pair`` (copied once per ``version``) and temperature
        ``alpha`` (a number, or a 0-d tensor on this device) from now on."""
        if version != self.version:
            write_policy(self.pair, pair_tensors(pair))
            self.version = version
        # written when it changes (each torch call lets the interpreter lock go); a tensor is copied on device
        if isinstance(alpha, torch.Tensor):
            if alpha is not self._alpha_value:
                self.alpha.copy_(alpha)
                self._alpha_value = alpha
        elif isinstance(self._alpha_value, Tensor) or float(alpha) != self._alpha_value:
            self.alpha.fill_(float(alpha))
            self._alpha_value = float(alpha)

    @torch.no_grad()
    def __call__(self, block: Block, greedy: bool, generator: torch.Generator | None = None):
        """``(chosen, q, v)`` on the device for the states packed in ``block`` (``(graphs, actions)``; pinned
        for an asynchronous copy): as :func:`~phylorl.agent.acting.select_actions` answers them."""
        key = (bool(greedy), block.packed.structure, block.packed.tensors)
        found = self.captured.get(key)
        if (
            found is None
            and self.captures
            and self.seen[key] >= ACTING_WARMUP
            and len(self.captured) < ACTING_SHAPES
            and key not in self.failed
        ):
            try:
                found = self.captured[key] = _Captured(self, block, greedy)
            except Exception as error:  # (a CUDA error of the capture) this shape stays eager; recorded
                self.failed[key] = f"{type(error).__name__}: {error}".splitlines()[0]
        if found is not None:
            self.replays += 1
            return found.replay(block, generator)
        self.seen[key] += 1
        self.eager += 1
        graphs, actions = block.to(self.device, non_blocking=True)
        noise = (
            None if greedy else torch.rand(actions.nodes.shape[0], generator=generator, device=self.device)
        )
        return _answer(self.eager_twin, graphs, actions, self.alpha, noise)
