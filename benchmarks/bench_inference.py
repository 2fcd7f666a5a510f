"""Inference endpoint throughput and latency over real gRPC on loopback; prints one JSON line.

N concurrent actor streams (threads with their own channel) each send Act requests holding one
20-taxon observation (1122 SPR moves) back to back for a fixed time. Reported per N in (1, 8, 64):
requests/s, p50/p99 latency, and the same with batching off (max batch 1 observation), whose ratio
is the gain of batching. Network: the designed sizes (hidden 256) on this machine's device.

Usage: python benchmarks/bench_inference.py [--seconds S] [--hidden H]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import grpc
import numpy as np
import torch

from common import emit, machine
from phylorl.agent.learner import Learner
from phylorl.env import build_observation
from phylorl.nets.config import NetworkConfig
from phylorl.phylo import enumerate_moves, move_metadata, random_tree
from phylorl.wire import codec
from phylorl.wire.v1 import inference_pb2, inference_pb2_grpc
from services.learner.inference import BatchingInference
from services.learner.server import InferenceServer


def requests(count: int, seed: int):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        tree = random_tree([f"t{j}" for j in range(20)], rng)
        moves = enumerate_moves(tree)
        request = inference_pb2.ActRequest(actor_id=f"a{i}")
        codec.pack_observations([build_observation(tree, moves, move_metadata(tree, moves))], request.states)
        out.append(request)
    return out


def run(streams: int, max_batch: int, seconds: float, net_cfg, device, weights, alpha, reqs) -> dict:
    inference = BatchingInference(net_cfg, device, max_batch=max_batch, max_delay_s=0.002, max_queue=1024)
    inference.publish(weights, alpha, 1)
    server = InferenceServer(inference, "127.0.0.1", 0, max_workers=max(16, 2 * streams))
    server.start()
    server.set_serving()
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def stream(i: int) -> None:
        channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
        stub = inference_pb2_grpc.InferenceServiceStub(channel)
        mine = []
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            stub.Act(reqs[i % len(reqs)], timeout=120)
            mine.append(time.perf_counter() - t0)
        channel.close()
        with lock:
            latencies.extend(mine)

    stub = inference_pb2_grpc.InferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{server.port}"))
    stub.Act(reqs[0], timeout=120)  # warm-up
    threads = [threading.Thread(target=stream, args=(i,)) for i in range(streams)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    server.stop(1.0)
    inference.close()
    lat = np.array(latencies) * 1e3
    return {"requests_per_s": round(len(latencies) / elapsed, 1), "p50_ms": round(float(np.percentile(lat, 50)), 2),
            "p99_ms": round(float(np.percentile(lat, 99)), 2), "requests": len(latencies)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--hidden", type=int, default=256)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    net_cfg = NetworkConfig(hidden=args.hidden, action_hidden=args.hidden, head_hidden=args.hidden)
    learner = Learner(net_cfg, device=device, seed=0)
    weights = learner.policy_weights()
    reqs = requests(64, seed=0)
    result = {"bench": "inference", "machine": machine(), "device": str(device), "hidden": args.hidden,
              "n_taxa": 20, "moves_per_observation": 1122, "seconds_per_setting": args.seconds,
              "torch_threads": torch.get_num_threads()}
    for streams in (1, 8, 64):
        batched = run(streams, 64, args.seconds, net_cfg, device, weights, learner.alpha, reqs)
        single = run(streams, 1, args.seconds, net_cfg, device, weights, learner.alpha, reqs)
        result[f"streams_{streams}"] = {"batched": batched, "batch_size_1": single,
                                        "batching_gain": round(batched["requests_per_s"] /
                                                               max(single["requests_per_s"], 1e-9), 2)}
    emit(result)


if __name__ == "__main__":
    main()
