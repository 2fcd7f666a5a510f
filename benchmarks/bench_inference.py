"""Inference endpoint throughput and latency over real gRPC on loopback; prints one JSON line.

N concurrent actor streams (processes, as actors are: ``inference_client.py``) each send requests (the
messages of one open ``ActStream``, through the actor's own client) holding one 20-taxon state (1122 SPR
moves, the environment's rich observation, as the shipped agent reads it) back to back for a fixed time.
``wire`` gives per state the request bytes, the actor's encoding (observation records) and the endpoint's
decoding (one core), and the decoding per request of requests holding 1 and 4 states. Reported per N in
``--streams``: requests/s, p50/p99 latency, and the same with batching off (max batch 1 observation), whose
ratio is the gain of batching, and from the endpoint's own histograms (``phylorl_inference_stage_seconds``)
its mean batch and the mean time of each stage of its work (``endpoint``: where a request's time goes), and
the endpoint process's CPU per request (``endpoint_cpu_us_per_request``; the clients' warm-up included).
``publish``: what a publication of new weights costs the learner's training thread (its live parameters copied
into new networks of the endpoint; ``first_ms`` the first, with the fused kernel's warm-up done before it,
``median_ms`` of 20 after it), and in each setting while the streams run (``publish_under_load``: one
publication every ``--publish-every-ms`` from a thread of the endpoint's process, as the learner's loop
publishes while its endpoint serves). The process sets the interpreter's switch interval and its allocator's
tuning as the learner does (``SWITCH_INTERVAL_MS`` of :mod:`services.learner.config`,
:data:`services.common.memory.KEEP_MB`): every torch call lets the interpreter lock go, and a thread taking it
back waits for the threads running Python. Network: the designed sizes (hidden 256) on this machine's device.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import torch
from common import REPO, add_flags, child_env, emit, episode_transitions, machine, median_seconds
from prometheus_client import REGISTRY

from phylorl.agent.learner import Learner
from phylorl.nets.config import NetworkConfig
from phylorl.records.codec import encode_observation
from phylorl.records.collate import collate_states
from phylorl.wire import codec
from phylorl.wire.v1 import inference_pb2
from services.common.memory import KEEP_MB, keep_freed_memory
from services.learner.config import SWITCH_INTERVAL_MS
from services.learner.inference import BatchingInference
from services.learner.server import InferenceServer


def states(count: int, seed: int) -> list:
    """20-taxon states of the environment (random walks on a simulated alignment), as actors send them."""
    return [t.next_obs for t in episode_transitions(count, 20, seed)[0]]


def requests(observations: list, size: int = 1) -> list:
    """``observations`` as requests of ``size`` states each (the last may hold fewer), as an actor makes
    them."""
    out = []
    for i in range(0, len(observations), size):
        request = inference_pb2.ActRequest(actor_id=f"a{i}")
        codec.pack_records([encode_observation(o) for o in observations[i : i + size]], request.states)
        out.append(request)
    return out


def wire_costs(observations: list, repeats: int = 7) -> dict:
    """Per state, on one core: request bytes, the actor's encoding (records packed into a serialised request)
    and the endpoint's decoding of a request of all of them (parse, check, collate: :func:`collate_states`);
    and the decoding per request of requests of 1 and 4 states (``decode_us_per_request``)."""
    n = len(observations)

    def records():
        request = inference_pb2.ActRequest()
        codec.pack_records([encode_observation(o) for o in observations], request.states)
        return request.SerializeToString()

    raw = records()

    def decode(request: bytes):  # what the endpoint does with a request on arrival
        collate_states(codec.unpack_records(inference_pb2.ActRequest.FromString(request).states))

    us = lambda fn: round(median_seconds(fn, repeats) / n * 1e6, 1)  # noqa: E731
    # an actor's request holds one pipeline group's states: a few, where the call's fixed cost tells
    small = {}
    for size in (1, 4):
        calls = [request.SerializeToString() for request in requests(observations, size)]
        small[str(size)] = round(
            median_seconds(lambda: [decode(c) for c in calls], repeats) / len(calls) * 1e6, 1
        )
    return {
        "request_bytes_per_state": round(len(raw) / n),
        "encode_us_per_state": us(records),
        "decode_us_per_state": us(lambda: decode(raw)),
        "decode_us_per_request": small,
    }


def client_processes(port: int, streams: int, seconds: float, reqs) -> list[float]:
    """Latencies of ``streams`` client processes (``inference_client.py``) sending for ``seconds`` from a
    common start."""
    with tempfile.NamedTemporaryFile(suffix=".requests", delete=False) as f:
        for request in reqs:
            payload = request.SerializeToString()
            f.write(len(payload).to_bytes(4, "little") + payload)
    # after every client has started and sent its warm-up request
    start_at = time.time() + 3.0 + 0.1 * streams
    client = [sys.executable, str(REPO / "benchmarks" / "inference_client.py"), str(port), f.name]
    try:
        procs = [
            subprocess.Popen(
                [*client, str(i), repr(start_at), str(seconds)], stdout=subprocess.PIPE, env=child_env()
            )
            for i in range(streams)
        ]
        latencies: list[float] = []
        for p in procs:
            out, _ = p.communicate(timeout=seconds + 600)
            if p.returncode:
                raise RuntimeError(f"an inference client exited with {p.returncode}")
            latencies.extend(json.loads(out))
    finally:
        os.unlink(f.name)
    return latencies


STAGES = ("inputs", "batch", "network", "reply")


def endpoint_counters() -> dict:
    """The endpoint's own histograms (this process's registry): per stage and for batch sizes, sum and count;
    and its batches replayed as CUDA graphs."""

    def get(name: str, **labels) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    stage = "phylorl_inference_stage_seconds"
    out = {s: (get(f"{stage}_sum", stage=s), get(f"{stage}_count", stage=s)) for s in STAGES}
    out["batch_size"] = (get("phylorl_inference_batch_size_sum"), get("phylorl_inference_batch_size_count"))
    out["graph_replays"] = get("phylorl_inference_batches_total", path="graph")
    return out


def endpoint_summary(before: dict, after: dict) -> dict:
    """Mean time per stage of the endpoint's work (ms) and mean batch between two
    :func:`endpoint_counters`."""
    mean = {
        k: (after[k][0] - before[k][0]) / max(after[k][1] - before[k][1], 1.0)
        for k in (*STAGES, "batch_size")
    }
    return {
        "stage_mean_ms": {s: round(1e3 * mean[s], 3) for s in STAGES},
        "mean_batch": round(mean["batch_size"], 2),
        "batches": int(after["batch_size"][1] - before["batch_size"][1]),
        "graph_replays": int(after["graph_replays"] - before["graph_replays"]),
    }


def publish_costs(net_cfg, device, learner, fused_head: bool, times: int = 20) -> dict:
    """Milliseconds of ``publish(learner.policy_tensors())`` as the learner's training loop calls it:
    ``first_ms`` the first after the endpoint's warm-up publication, ``median_ms`` of ``times`` after it."""
    inference = BatchingInference(
        net_cfg, device, max_batch=8, max_delay_s=0.002, max_queue=8, fused_head=fused_head
    )
    try:
        inference.publish(learner.policy_tensors(), learner.alpha, 0)  # the fused kernel's warm-up
        spent = []
        for version in range(1, times + 2):
            start = time.perf_counter()
            inference.publish(learner.policy_tensors(), learner.alpha, version)
            spent.append(time.perf_counter() - start)
    finally:
        inference.close()
    return {"first_ms": round(spent[0] * 1e3, 2), "median_ms": round(statistics.median(spent[1:]) * 1e3, 2)}


def run(
    streams, max_batch, seconds, net_cfg, device, learner, reqs, fused_head, cuda_graphs, publish_every_s
) -> dict:
    """The endpoint (at most ``max_batch`` observations a batch) served to ``streams`` client processes for
    ``seconds``: latencies, its CPU per request, the publications' time under load (one every
    ``publish_every_s`` from a thread, 0: none) and the endpoint's own counters over the run."""
    before = endpoint_counters()
    options = {"max_delay_s": 0.002, "max_queue": 1024, "fused_head": fused_head, "cuda_graphs": cuda_graphs}
    inference = BatchingInference(net_cfg, device, max_batch=max_batch, **options)
    inference.publish(learner.policy_tensors(), learner.alpha, 1)
    server = InferenceServer(inference, "127.0.0.1", 0, max_calls=max(16, 2 * streams))
    stop, spent = threading.Event(), []

    def publisher() -> None:  # as the learner's training loop publishes while its endpoint serves
        version = 2
        while not stop.wait(publish_every_s):
            started = time.perf_counter()
            inference.publish(learner.policy_tensors(), learner.alpha, version)
            spent.append(time.perf_counter() - started)
            version += 1

    thread = threading.Thread(target=publisher, name="publisher", daemon=True)
    try:
        server.start()
        server.set_serving()
        if publish_every_s:
            thread.start()
        cpu = time.process_time()
        latencies = client_processes(server.port, streams, seconds, reqs)
        cpu = time.process_time() - cpu
    finally:
        stop.set()
        if thread.is_alive():
            thread.join()
        server.stop(1.0)
        inference.close()
    lat = np.array(latencies) * 1e3
    out = {
        "requests_per_s": round(len(latencies) / seconds, 1),
        "p50_ms": round(float(np.percentile(lat, 50)), 2),
        "p99_ms": round(float(np.percentile(lat, 99)), 2),
        "requests": len(latencies),
        # the endpoint's process (its every thread) per request, the clients' warm-up included
        "endpoint_cpu_us_per_request": round(cpu / max(len(latencies), 1) * 1e6, 1),
    }
    if spent:  # (including the clients' start-up and warm-up, when the endpoint is mostly idle)
        ms = np.array(spent) * 1e3
        out["publish_under_load_ms"] = {
            "median": round(float(np.median(ms)), 2),
            "p90": round(float(np.percentile(ms, 90)), 2),
            "count": len(spent),
        }
    return {**out, "endpoint": endpoint_summary(before, endpoint_counters())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--hidden", type=int, default=256)
    add_flags(
        parser,
        {
            "--fused-head": "answer with the fused Triton head (CUDA)",
            "--cuda-graphs": "the endpoint replays its answers as CUDA graphs (CUDA; "
            "LearnerConfig.inference_cuda_graphs)",
            "--tf32": "float32 products use TF32 (CUDA)",
        },
    )
    parser.add_argument("--streams", default="1,8,64", help="comma-separated numbers of concurrent streams")
    parser.add_argument(
        "--publish-every-ms",
        type=float,
        default=100.0,
        help="a publication every this many ms while the streams run (0: none)",
    )
    args = parser.parse_args()
    keep_freed_memory(KEEP_MB)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sys.setswitchinterval(SWITCH_INTERVAL_MS.get(device.type, 5.0) / 1000.0)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    net_cfg = NetworkConfig(hidden=args.hidden, action_hidden=args.hidden, head_hidden=args.hidden)
    learner = Learner(net_cfg, device=device, seed=0)
    observations = states(64, seed=0)
    graphs = args.cuda_graphs and device.type == "cuda"
    fused = args.fused_head and device.type == "cuda"
    reqs = requests(observations)
    result = {
        "bench": "inference",
        "machine": machine(),
        "device": str(device),
        "hidden": args.hidden,
        "malloc_keep_mb": KEEP_MB,
        "features": net_cfg.features,
        "n_taxa": 20,
        "moves_per_observation": int(observations[0].n_actions),
        "seconds_per_setting": args.seconds,
        "torch_threads": torch.get_num_threads(),
        "fused_head": fused,
        "tf32": args.tf32 and device.type == "cuda",
        "clients": "processes",
        "server": "asyncio",
        "rpc": "stream",
        "cuda_graphs": graphs,
        "switch_interval_ms": round(sys.getswitchinterval() * 1e3, 3),
        "publish_every_ms": args.publish_every_ms,
        "wire": wire_costs(observations),
        "publish": publish_costs(net_cfg, device, learner, fused),
    }
    setting = (args.seconds, net_cfg, device, learner, reqs, fused, graphs, args.publish_every_ms / 1e3)
    for streams in map(int, args.streams.split(",")):
        batched, single = run(streams, 64, *setting), run(streams, 1, *setting)
        result[f"streams_{streams}"] = {
            "batched": batched,
            "batch_size_1": single,
            "batching_gain": round(batched["requests_per_s"] / max(single["requests_per_s"], 1e-9), 2),
        }
    emit(result)


if __name__ == "__main__":
    main()
