"""The Q head over every next move, fused (one Triton kernel for both twins) against unfused, at the design
size.

The learner's no-grad passes (``V(s')`` of the target networks, the online policy's entropy) evaluate both
twin networks on every move of 128 next states (20 taxa: 143,616 moves). This times, on a CUDA device, the
whole no-grad twin pass (:class:`~phylorl.nets.twin.TwinQ`: encoder and head) unfused and with the fused
head for each ``--blocks`` setting (moves per program × columns per product × warps), and the two networks
run one by one as the learner does without ``fused_head``. Median of ``--repeats`` synchronised calls after
warm-ups; one JSON line. ``--tf32`` lets float32 products (the fused kernel's too) use TF32.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
import torch
from common import emit, machine, seconds

from phylorl.agent.transfer import on_device
from phylorl.nets import fused_head
from phylorl.nets.config import NetworkConfig
from phylorl.nets.qnet import QNetwork
from phylorl.nets.synthetic import random_transition
from phylorl.nets.twin import TwinQ
from phylorl.records.codec import encode_transition
from phylorl.records.collate import collate_records
from phylorl.records.format import PackedRecords


def timed(fn, repeats: int, warmup: int = 3) -> dict:
    for _ in range(warmup):
        fn()
    times = [seconds(fn, "cuda") for _ in range(repeats)]
    return {"median_ms": round(1e3 * statistics.median(times), 3), "min_ms": round(1e3 * min(times), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--taxa", type=int, default=20)
    parser.add_argument(
        "--blocks",
        default="64x64x8,32x64x4,64x32x4,128x64x8",
        help="comma-separated BLOCK_AxBLOCK_NxWARPS settings of the fused kernel",
    )
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--tf32", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("needs a CUDA device")
    fused_head.require()
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    rng = np.random.default_rng(0)
    records = PackedRecords.from_records(
        [encode_transition(random_transition(args.taxa, rng)) for _ in range(args.batch)]
    )
    batch = on_device(collate_records(records)[0], "cuda")  # the next moves expanded on the device
    graphs, actions = batch.next_graphs, batch.next_actions
    torch.manual_seed(0)
    q1, q2 = QNetwork(NetworkConfig()).cuda().eval(), QNetwork(NetworkConfig()).cuda().eval()
    plain, fused = TwinQ(q1, q2), TwinQ(q1, q2, fused=True)
    result = {
        "bench": "fused_head",
        "machine": machine(),
        "torch": torch.__version__,
        "tf32": args.tf32,
        "batch": args.batch,
        "moves": int(actions.nodes.shape[0]),
    }
    with torch.no_grad():
        result["two_networks"] = timed(
            lambda: torch.minimum(q1(graphs, actions), q2(graphs, actions)), args.repeats
        )
        result["twin_unfused"] = timed(lambda: plain(graphs, actions), args.repeats)
        reference = plain(graphs, actions)
        settings = {}
        for setting in args.blocks.split(","):
            fused_head.BLOCK_A, fused_head.BLOCK_N, fused_head.NUM_WARPS = map(int, setting.split("x"))
            fused_head._KERNELS.clear()
            try:
                out = fused(graphs, actions)
                error = float((out - reference).abs().max() / reference.abs().max())
                settings[setting] = {
                    **timed(lambda: fused(graphs, actions), args.repeats),
                    "relative_error": error,
                }
            except Exception as exc:  # a setting the chip cannot take (shared memory, registers): say which
                settings[setting] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        result["twin_fused"] = settings
        fastest = min((s["median_ms"] for s in settings.values() if "median_ms" in s), default=None)
        if fastest is not None:
            result["best_fused_speedup"] = round(result["twin_unfused"]["median_ms"] / fastest, 2)
    emit(result)


if __name__ == "__main__":
    main()
