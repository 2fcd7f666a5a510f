"""Learner update latency: the update on the CPU and (CUDA) replayed as CUDA graphs, with the fused head, in
one run.

Batch of 128 transitions between random 20-taxon trees (:func:`phylorl.nets.synthetic.random_transition`),
every SPR move of each next state (1122 for 20 taxa), default network and agent configs. The transitions are
encoded as the actors send them and collated as the learner's prefetcher does (records -> ``collate_records``
-> ``on_device``), outside the timed call; ``collate_median_ms`` is the median of ``collate_records`` alone
(on the host). The timed call is ``Learner.step`` on a batch already on the device. Prints one JSON line.

Paths: ``fast``, the update (eager). ``graphs`` (``AgentConfig.cuda_graphs``) captures after the warm-up
updates (``--warmup`` must exceed ``capture.WARMUP``; the capture itself is part of the last warm-up update).
``fused`` and ``graphs-fused`` add ``AgentConfig.fused_head`` (the Triton head for the no-grad next-move
passes) to the eager update and to the graphs; the first warm-up update's time is ``first_update_s``.
``--labelled F`` gives that fraction of next states demonstration
labels on every move and the agent ``demo_weight=1``: the online networks then pass over every next move with
gradients. ``--tf32`` lets float32 matrix products use TF32 (CUDA; the default is full float32).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import statistics

import numpy as np
import torch
from common import cpu_model, emit, seconds

from phylorl.agent.capture import WARMUP
from phylorl.agent.config import AgentConfig
from phylorl.agent.learner import Learner
from phylorl.agent.transfer import on_device
from phylorl.nets import fused_head
from phylorl.nets.config import NetworkConfig
from phylorl.nets.qnet import count_parameters
from phylorl.nets.synthetic import random_transition
from phylorl.records.codec import encode_transition
from phylorl.records.collate import collate_records
from phylorl.records.format import PackedRecords

PATHS = ("fast", "graphs", "fused", "graphs-fused")


def time_path(path: str, batches, device, repeats: int, warmup: int, demo_weight: float = 0.0) -> dict:
    parts = path.split("-")
    agent = AgentConfig(cuda_graphs="graphs" in parts, fused_head="fused" in parts, demo_weight=demo_weight)
    learner = Learner(NetworkConfig(), agent, device, seed=0)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    # (Learner.step returns host metrics and priorities: the step has finished)
    spent = [
        seconds(lambda: learner.step(batches[i % len(batches)]), device) for i in range(warmup + repeats)
    ]
    first_update_s, times = spent[0], spent[warmup:]
    median = statistics.median(times)
    out = {
        "median_ms": round(1e3 * median, 2),
        "min_ms": round(1e3 * min(times), 2),
        "max_ms": round(1e3 * max(times), 2),
        "transitions_per_s": round(len(batches[0].reward) / median, 1),
        "first_update_s": round(first_update_s, 2),
    }
    if device.type == "cuda":
        out["peak_cuda_allocated_bytes"] = int(torch.cuda.max_memory_allocated(device))
    if learner.graphs is not None:
        out["captured_shapes"] = len(learner.graphs.captured)
        out["eager_updates"] = learner.graphs.eager_updates
    # ru_maxrss is in KiB on Linux and is the process peak so far
    out["peak_rss_bytes"] = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--taxa", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=20, help="timed updates per path (median reported)")
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--distinct-batches", type=int, default=4, help="batches cycled through")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--paths", default="fast", help="comma-separated: fast; on CUDA also graphs, fused, graphs-fused"
    )
    parser.add_argument("--tf32", action="store_true", help="TF32 float32 matrix products (CUDA)")
    parser.add_argument(
        "--labelled",
        type=float,
        default=0.0,
        metavar="F",
        help="this fraction of next states carry demonstration labels and the agent learns from them "
        "(demo_weight 1, as phylorl train's default agent): the online networks' pass over every "
        "next move then runs with gradients",
    )
    parser.add_argument(
        "--fused-blocks",
        default="",
        help="BLOCK_AxBLOCK_NxWARPS of the fused head's kernel "
        "(default: phylorl.nets.fused_head's; benchmarks/bench_fused_head.py compares settings)",
    )
    args = parser.parse_args()
    paths = args.paths.split(",")
    unknown = sorted({p for p in paths if p not in PATHS})
    if unknown:
        parser.error(f"unknown path(s) {', '.join(unknown)}")
    if any(p.startswith("graphs") for p in paths) and (args.device != "cuda" or args.warmup <= WARMUP):
        parser.error(f"--paths graphs needs --device cuda and --warmup > {WARMUP}")
    if any("fused" in p.split("-") for p in paths) and args.device != "cuda":
        parser.error("--paths fused needs --device cuda")
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    if args.fused_blocks:
        fused_head.BLOCK_A, fused_head.BLOCK_N, fused_head.NUM_WARPS = map(int, args.fused_blocks.split("x"))

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    load_before = os.getloadavg()[0]
    rng = np.random.default_rng(0)

    def transition():  # with a demonstration label on every move of its next state, in --labelled of them
        with_labels = rng.random() < args.labelled
        t = random_transition(args.taxa, rng)
        if with_labels:
            t = dataclasses.replace(t, next_labels=rng.normal(size=t.next_obs.n_actions).astype(np.float32))
        return t

    pool = [[transition() for _ in range(args.batch)] for _ in range(args.distinct_batches)]
    records = [PackedRecords.from_records([encode_transition(t) for t in trs]) for trs in pool]
    collate_records(records[0])  # warm-up
    collate_times = [seconds(lambda: collate_records(packed)) for packed in records]
    batches = [on_device(collate_records(packed)[0], device) for packed in records]

    result = {
        "benchmark": "learner_update",
        "device": str(device),
        "cpu": cpu_model(),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "tf32": args.tf32,
        "labelled_fraction": args.labelled,
        "fused_blocks": f"{fused_head.BLOCK_A}x{fused_head.BLOCK_N}x{fused_head.NUM_WARPS}",
        "load_average_1m_before": round(load_before, 2),
        "batch": args.batch,
        "taxa": args.taxa,
        "actions_per_next_state": int(batches[0].next_actions.states.sizes[0]),
        "params_per_q_network": count_parameters(Learner(NetworkConfig(), AgentConfig()).q1),
        "network": dataclasses.asdict(NetworkConfig()),
        "repeats": args.repeats,
        "warmup": args.warmup,
        "collate_median_ms": round(1e3 * statistics.median(collate_times), 2),
    }
    demo_weight = 1.0 if args.labelled else 0.0
    for path in paths:  # the first path's peak RSS is its own
        result[path] = time_path(path, batches, device, args.repeats, args.warmup, demo_weight)
    for name, before, after in (("graphs", "fast", "graphs"), ("fused", "graphs", "graphs-fused")):
        if before in result and after in result:
            result[f"{name}_speedup"] = round(result[before]["median_ms"] / result[after]["median_ms"], 2)
    result["load_average_1m_after"] = round(os.getloadavg()[0], 2)
    emit(result)


if __name__ == "__main__":
    main()
