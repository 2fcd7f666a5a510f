"""Acting replayed as CUDA graphs: the inference endpoint's answers (``LearnerConfig.inference_cuda_graphs``).

An eager answer of the twin networks is some hundred small kernels, each launched from Python: on an H200 a
batch of one state took 3–4 ms and a batch of 25 took 9 ms, almost all of it launching, and in the running
system, where the learner's loop and the gRPC threads hold the interpreter lock in turn, 30–40 ms. Here each
batch shape gets a captured graph of the whole answer (``min(Q1, Q2)`` of every move, the Gumbel-max choice or
the greedy one, the chosen move's Q and the soft value) that replays with one launch.

* **Shapes.** A graph replays fixed shapes, so :func:`bucket` rounds a batch's state count up to a power of two
  or a multiple of 16 (or ``max_batch``) and :func:`~phylorl.agent.request_batch.assemble` fills it with copies
  of its last state, whose answers are dropped; states of one tree size then make a handful of shapes. A shape
  is captured once it has been seen :data:`WARMUP` times (at most :data:`MAX_SHAPES` of them); the rest run
  eagerly, which the ``eager`` count shows.
* **Inputs.** A batch arrives as a :class:`~phylorl.agent.batch_transfer.Block` (its tensors packed into one
  pinned buffer); a shape's graph reads its inputs as views of one device buffer of the same layout, so a
  replay's inputs are one host-to-device copy. Its sampling noise is drawn from the caller's generator into the
  graph's own buffer before each replay.
* **Weights.** The graphs run this class's own network pair: :meth:`GraphedActing.load` copies a published
  snapshot's weights into it (once per version, on the device), and the derived and stacked weights are
  recomputed inside the graph from them, so a replay always answers with the last loaded weights.
* **Temperature.** Read from a device scalar inside the graph (``alpha``), written by :meth:`load`.

On a CPU (or before a shape is captured) the same answer runs eagerly; tests compare the two
(``tests/gpu/test_inference_gpu.py``).
"""

from __future__ import annotations

from collections import Counter

import torch
from torch import Tensor

from phylorl.agent.acting import choose, pair_tensors, write_policy
from phylorl.agent.batch_transfer import Block, unpack
from phylorl.agent.cuda_graphs import CAPTURE_LOCK
from phylorl.nets.config import NetworkConfig
from phylorl.nets.inputs import ActionBatch, GraphBatch
from phylorl.nets.qnet import QNetwork
from phylorl.nets.twin import TwinQ

WARMUP = 2
"""Eager answers of a shape before it is captured."""

MAX_SHAPES = 16
"""Shapes (state count, tree sizes, greedy or sampled) captured at most."""


STEP = 16
"""Above this many states, batches are padded to a multiple of it (below, to a power of two)."""


def bucket(count: int, max_batch: int) -> int:
    """The state count a batch of ``count`` states is padded to: the next power of two up to :data:`STEP`, the next
    multiple of :data:`STEP` above it, at most ``max_batch`` (never below ``count``). With ``max_batch`` 64: 1, 2,
    4, 8, 16, 32, 48, 64: at most a third of a large batch is padding."""
    if count < 1:
        raise ValueError(f"a batch needs at least one state, got {count}")
    padded = 1 << (count - 1).bit_length() if count <= STEP else -(-count // STEP) * STEP
    return max(count, min(padded, max_batch))


def _answer(twin: TwinQ, graphs: GraphBatch, actions: ActionBatch, alpha: Tensor, noise: Tensor | None):
    return choose(twin(graphs, actions), actions.states, alpha, noise)


class _Captured:
    """One shape's graph, its input buffer (the packed layout of the shape's blocks) and its outputs."""

    def __init__(self, owner: "GraphedActing", block: Block, greedy: bool):
        nbytes = block.packed.nbytes
        self.inputs = block.data[:nbytes].to(owner.device)
        graphs, actions = unpack(block.packed, self.inputs)
        self.noise = None if greedy else torch.rand(actions.nodes.shape[0], device=owner.device)
        self.graph = torch.cuda.CUDAGraph()
        # no other capture of this process is under way (nor begins) meanwhile: torch.cuda.graph starts with a
        # device-wide synchronize
        with CAPTURE_LOCK:
            with torch.cuda.graph(self.graph, stream=owner.capture_stream, capture_error_mode="thread_local"):
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
        pair = []
        for _ in range(2):
            net = QNetwork(net_cfg).to(device).eval()
            net.cache_derived = False  # derived weights recomputed inside the graph, never baked in
            pair.append(net)
        self.pair = tuple(pair)
        self.eager_twin = TwinQ(*pair, fused=fused)  # stacked weights cached while the parameters are unchanged
        self.graphed = TwinQ(*pair, fused=fused, cache=False)  # stacked anew in every replay
        self.alpha = torch.ones((), device=device)
        self._alpha_value: "float | Tensor" = 1.0  # what ``alpha`` holds: the number or tensor last written
        self.version: int | None = None
        self.captures = device.type == "cuda"
        self.capture_stream = torch.cuda.Stream(device, priority=-1) if self.captures else None
        self.seen: Counter = Counter()
        self.captured: dict[tuple, _Captured] = {}
        self.failed: dict[tuple, str] = {}
        """Shapes whose capture failed (the error, as text): answered eagerly from then on, never captured again.
        The endpoint logs each failure and counts it (``phylorl_inference_capture_failures_total``)."""
        self.replays = 0
        self.eager = 0

    def load(self, pair, alpha: "float | Tensor", version: int) -> None:
        """Answer with the weights of network pair ``pair`` (copied once per ``version``) and temperature
        ``alpha`` (a number, or a 0-d tensor on this device) from now on."""
        if version != self.version:
            write_policy(self.pair, pair_tensors(pair))
            self.version = version
        # written when it changes: a fill per batch let the interpreter lock go each time, and waited to take it
        # back (13% of the batching thread's time on an H200 in the running system, session 23). A tensor (on this
        # device, computed by the publisher) is copied on the device, never read on the host
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
        if found is None and self.captures and self.seen[key] >= WARMUP and len(self.captured) < MAX_SHAPES \
                and key not in self.failed:
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
        noise = None if greedy else torch.rand(actions.nodes.shape[0], generator=generator, device=self.device)
        return _answer(self.eager_twin, graphs, actions, self.alpha, noise)

