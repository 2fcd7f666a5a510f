"""Where one learner update's time goes: its phases, its kernels and the ops that launch them.

Same batches and learner as ``bench_update.py`` (128 transitions between random 20-taxon trees, every SPR move of
each next state, default configs). The update runs eagerly (no CUDA graphs, which would hide the kernels from the
profiler; a graphed update runs the same kernels without the launch gaps), after ``--warmup`` updates:

* ``phases``: the time of each phase of ``Learner.step`` (the next-move targets, the online forward passes, the
  loss, the backward, gradient clipping, the optimiser, the target update), as CUDA events on the learner's
  stream (on a CPU: wall time), median over ``--repeats`` updates. The wrappers are set in this script's process
  (on its learner, the learner module's loss functions and ``Tensor.backward``).
* ``kernels_per_update``, ``kernel_ms_per_update``: from ``torch.profiler`` over ``--profiled`` updates, the number
  of device kernels and their summed time: the floor a graphed update could reach with no gaps.
* ``top_ops`` and ``top_kernels``: the ops by their own device time (CPU time on a CPU) and the kernels by time.

    PYTHONPATH=. python benchmarks/profile_update.py [--device cuda] [--tf32] [--fused] [--compiled] [--separate]
                                                     [--repeats 20] [--profiled 5] [--top 25]
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import statistics
import sys
import time

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from common import machine
from phylorl.agent import learner as learner_module
from phylorl.agent.batch import collate
from phylorl.agent.config import AgentConfig
from phylorl.agent.learner import Learner
from phylorl.nets.config import NetworkConfig
from phylorl.nets.synthetic import random_transition


class PhaseClock:
    """Times the outermost wrapped call of each phase: CUDA events on the current stream, or wall time."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.depth = 0
        self.marks: list[tuple[str, object, object]] = []

    def now(self):
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def wrap(self, name: str, fn):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            if self.depth:
                return fn(*args, **kwargs)
            self.depth += 1
            start = self.now()
            try:
                return fn(*args, **kwargs)
            finally:
                self.marks.append((name, start, self.now()))
                self.depth -= 1
        return timed

    def collect(self) -> dict[str, float]:
        """Milliseconds per phase since the last call (after a device sync)."""
        if self.cuda:
            torch.cuda.synchronize()
        out: dict[str, float] = collections.defaultdict(float)
        for name, start, end in self.marks:
            out[name] += start.elapsed_time(end) if self.cuda else 1e3 * (end - start)
        self.marks.clear()
        return out


def instrument(learner: Learner, clock: PhaseClock) -> None:
    learner._targets = clock.wrap("targets", learner._targets)
    for net in (learner.q1, learner.q2):
        net.forward = clock.wrap("online_forward", net.forward)
    if learner.online_pair is not None:  # AgentConfig.stacked_update: one pass for both
        learner.online_pair.values = clock.wrap("online_forward", learner.online_pair.values)
    learner.apply = clock.wrap("optimiser", learner.apply)
    learner.update_targets = clock.wrap("target_update", learner.update_targets)
    for name, label in (("critic_loss", "loss"), ("clip_grad_norm", "clip"), ("alpha_loss", "alpha_loss")):
        setattr(learner_module, name, clock.wrap(label, getattr(learner_module, name)))
    torch.Tensor.backward = clock.wrap("backward", torch.Tensor.backward)


def device_time_us(event) -> float:
    return getattr(event, "self_device_time_total", None) or getattr(event, "self_cuda_time_total", 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tf32", action="store_true", help="TF32 float32 matrix products (CUDA)")
    parser.add_argument("--fused", action="store_true", help="AgentConfig.fused_head (CUDA)")
    parser.add_argument("--compiled", action="store_true", help="AgentConfig.compile_networks")
    parser.add_argument("--separate", action="store_true", help="AgentConfig.stacked_update=False")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--taxa", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20, help="updates timed by phase (median reported)")
    parser.add_argument("--profiled", type=int, default=5, help="updates under torch.profiler")
    parser.add_argument("--top", type=int, default=25, help="ops and kernels listed")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    args = parser.parse_args()
    device = torch.device(args.device)
    if (args.fused or args.tf32) and device.type != "cuda":
        parser.error("--fused and --tf32 need --device cuda")
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    batches = [collate([random_transition(args.taxa, rng) for _ in range(args.batch)], device) for _ in range(4)]
    learner = Learner(NetworkConfig(), AgentConfig(fused_head=args.fused, compile_networks=args.compiled,
                                                       stacked_update=not args.separate), device,
                      seed=0)
    clock = PhaseClock(device)
    instrument(learner, clock)
    for i in range(args.warmup):
        learner.step(batches[i % 4])
    clock.collect()
    phases: dict[str, list[float]] = collections.defaultdict(list)
    walls = []
    for i in range(args.repeats):
        start = time.perf_counter()
        learner.step(batches[i % 4])
        walls.append(1e3 * (time.perf_counter() - start))
        for name, ms in clock.collect().items():
            phases[name].append(ms)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for i in range(args.profiled):
            learner.step(batches[i % 4])
        if device.type == "cuda":
            torch.cuda.synchronize()
    clock.collect()
    print(json.dumps({"phases_ms_median": {k: round(statistics.median(v), 3) for k, v in sorted(phases.items())}}),
          file=sys.stderr)  # first, in case the profile's tables fail
    # device events less the annotations of CPU ranges (the optimiser's step, say), which the profiler puts on the
    # device's timeline too: counted, they would add their kernels' time twice
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and not getattr(e, "is_user_annotation", False)]
    by_kernel: dict[str, list[float]] = collections.defaultdict(list)
    for e in kernels:
        by_kernel[e.name].append(e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total)
    ops = prof.key_averages()
    key = device_time_us if device.type == "cuda" else (lambda e: e.self_cpu_time_total)
    top_ops = sorted(ops, key=key, reverse=True)[:args.top]
    n = args.profiled
    result = {
        "benchmark": "profile_update", **machine(), "torch": torch.__version__, "device": str(device),
        "tf32": args.tf32, "fused_head": args.fused, "compile_networks": args.compiled,
        "stacked_update": not args.separate, "batch": args.batch,
        "taxa": args.taxa, "repeats": args.repeats, "profiled_updates": n,
        "wall_ms_median": round(statistics.median(walls), 3),
        "phases_ms_median": {k: round(statistics.median(v), 3) for k, v in sorted(phases.items())},
        "kernels_per_update": round(len(kernels) / n, 1),
        "kernel_ms_per_update": round(sum(sum(v) for v in by_kernel.values()) / n / 1e3, 3),
        "top_ops": [{"op": e.key, "calls_per_update": round(e.count / n, 1),
                     "self_ms_per_update": round(key(e) / n / 1e3, 4)} for e in top_ops],
        "top_kernels": [{"kernel": name[:120], "calls_per_update": round(len(v) / n, 1),
                         "ms_per_update": round(sum(v) / n / 1e3, 4)}
                        for name, v in sorted(by_kernel.items(), key=lambda kv: -sum(kv[1]))[:args.top]],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
