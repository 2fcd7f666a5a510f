"""Inference endpoint throughput and latency over real gRPC on loopback; prints one JSON line.

N concurrent actor streams (processes, as actors are: ``inference_client.py``; ``--clients threads`` runs them as
threads of this process, as before session 11, sharing the endpoint's interpreter) each send requests (``--rpc``:
messages of one open ``ActStream``, as actors do by default, or unary ``Act`` calls) holding one
20-taxon state (1122 SPR moves; ``--features rich``: the environment's, as the shipped agent reads
them) back to back for a fixed time. ``wire`` gives per state the request bytes, the actor's
encoding and the endpoint's decoding (one core), now (observation records) and in the arrays form
requests had before, and the decoding per request of requests holding 1 and 4 states. Reported per N in (1, 8, 64):
requests/s, p50/p99 latency, and the same with batching off (max batch 1 observation), whose ratio
is the gain of batching, and from the endpoint's own histograms (``phylorl_inference_stage_seconds``) its mean
batch and the mean time of each stage of its work (``endpoint``: where a request's time goes), and the endpoint
process's CPU per request (``endpoint_cpu_us_per_request``, process clients; the clients' warm-up included).
``publish``: what a publication of new weights costs the learner's training thread (its live parameters copied
into the endpoint's networks; ``first_ms`` builds the networks, ``median_ms`` of 20 after it writes retired ones again;
``copies_median_ms``: copies made first, ``policy_weights``, as the loop did before session 18), and in
each setting while the streams run (``publish_under_load``: one publication every ``--publish-every-ms`` from a thread
of the endpoint's process, as the learner's loop publishes while its endpoint serves). The process sets the
interpreter's switch interval as the learner does (``--switch-interval-ms``, ``LearnerConfig.switch_interval_ms``)
and its allocator's (``--malloc-keep-mb``: freed memory kept for reuse, or each large array is paged in afresh,
about 3.5 times the decode's time for 64 states at some moments of the development VM):
every torch call lets the interpreter lock go, and a thread taking it back waits for the threads running Python.
Network: the designed sizes (hidden 256) on this machine's device.

Usage: python benchmarks/bench_inference.py [--seconds S] [--hidden H] [--features rich|basic]
                                           [--clients processes|threads] [--server threads|asyncio]
                                           [--streams 1,8,64] [--rpc stream|unary] [--fused-head] [--tf32]
                                           [--switch-interval-ms MS] [--publish-every-ms MS] [--malloc-keep-mb MB]
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
from pathlib import Path

import grpc
import numpy as np
import torch

from common import emit, episode_transitions, machine, median_seconds
from phylorl.agent.packed_batch import collate_states
from phylorl.agent.learner import Learner
from phylorl.env.tree_observation import build_observation
from phylorl.nets.config import NetworkConfig
from phylorl.nets.inputs import check_observation, collate_observations
from phylorl.phylo import enumerate_moves, move_metadata, random_tree
from phylorl.wire import codec
from phylorl.env import tree_observation
from phylorl.wire.section_cache import forget
from phylorl.wire.v1 import common_pb2, inference_pb2, inference_pb2_grpc
from prometheus_client import REGISTRY
from services.learner.inference import BatchingInference
from services.learner.config import SERVER_KINDS, LearnerConfig, switch_interval_ms
from services.learner.server import make_server
from services.common.memory import keep_freed_memory
from services.actor.act_stream import group_calls
from services.actor.config import INFERENCE_RPCS, ActorConfig


def states(count: int, features: str, seed: int) -> list:
    """20-taxon states: the environment's (rich; random walks on a simulated alignment) or random trees (basic)."""
    if features == "rich":
        return [t.next_obs for t in episode_transitions(count, 20, seed)[0]]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        tree = random_tree([f"t{j}" for j in range(20)], rng)
        moves = enumerate_moves(tree)
        out.append(build_observation(tree, moves, move_metadata(tree, moves)))
    return out


def requests(observations: list) -> list:
    return _requests_of(observations, 1)


def _requests_of(observations: list, size: int) -> list:
    """``observations`` as requests of ``size`` states each (the last may hold fewer)."""
    out = []
    for i in range(0, len(observations), size):
        request = inference_pb2.ActRequest(actor_id=f"a{i}")
        codec.pack_observations(observations[i:i + size], request.states)
        out.append(request)
    return out


def wire_costs(observations: list, repeats: int = 7) -> dict:
    """Per state, on one core: request bytes, the actor's encoding (of a new state, and again: an actor
    encodes each state up to three times, checked once) and the endpoint's decoding of a batch of 64, in the
    observation-record form sent now and in the arrays form sent before (decode: parse, check, collate); and
    the decoding per request of requests of 1 and 4 states (``decode_us_per_request``)."""
    want = (observations[0].node_features.shape[1], observations[0].edge_attr.shape[1],
            observations[0].action_meta.shape[1])
    n = len(observations)

    def records():
        request = inference_pb2.ActRequest()
        codec.pack_observations(observations, request.states)
        return request.SerializeToString()

    def records_first():  # as an actor encodes a new state (the environment's, marked as its tree form)
        for obs in observations:
            forget(obs)
        return records()

    marks = [obs.__dict__.get(tree_observation._BUILT) for obs in observations]

    def records_checked():  # a state without the environment's mark: checked against its rebuild
        for obs in observations:
            forget(obs)
            obs.__dict__.pop(tree_observation._BUILT, None)
        return records()

    def arrays():
        return [codec.observation_to_proto(obs).SerializeToString() for obs in observations]

    raw, parts = records(), arrays()

    def decode(request: bytes):  # what the endpoint does with a request on arrival
        collate_states(codec.unpack_records(inference_pb2.ActRequest.FromString(request).states))

    def read_records():
        decode(raw)

    def read_arrays():
        decoded = [codec.observation_from_proto(common_pb2.Observation.FromString(p)) for p in parts]
        for obs in decoded:
            check_observation(obs, *want)
        collate_observations(decoded)

    us = lambda fn: round(median_seconds(fn, repeats) / n * 1e6, 1)  # noqa: E731
    first = us(records_first)
    checked = us(records_checked)
    for obs, mark in zip(observations, marks):
        if mark is not None:
            obs.__dict__[tree_observation._BUILT] = mark
    small = {}  # an actor's request holds one pipeline group's states: a few, where the call's fixed cost tells
    for size in (1, 4):
        calls = [request.SerializeToString() for request in _requests_of(observations, size)]
        small[str(size)] = round(median_seconds(lambda: [decode(c) for c in calls], repeats) / len(calls) * 1e6, 1)
    return {"request_bytes_per_state": round(len(raw) / n), "encode_us_per_state": first,
            "encode_checked_us_per_state": checked, "encode_again_us_per_state": us(records),
            "decode_us_per_state": us(read_records), "decode_us_per_request": small, "arrays_form": {
                "request_bytes_per_state": round(sum(map(len, parts)) / n), "encode_us_per_state": us(arrays),
                "decode_us_per_state": us(read_arrays)}}


HERE = Path(__file__).resolve().parent


def client_processes(port: int, streams: int, seconds: float, reqs, rpc: str = "unary") -> tuple[list[float], float]:
    """Latencies of ``streams`` client processes (``inference_client.py``, calls of kind ``rpc``) sending for
    ``seconds`` from a common start, and the window's length."""
    with tempfile.NamedTemporaryFile(suffix=".requests", delete=False) as f:
        for request in reqs:
            payload = request.SerializeToString()
            f.write(len(payload).to_bytes(4, "little") + payload)
    start_at = time.time() + 3.0 + 0.1 * streams  # after every client has started and sent its warm-up request
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")]))}
    try:
        procs = [subprocess.Popen([sys.executable, str(HERE / "inference_client.py"), str(port), f.name, str(i),
                                   repr(start_at), str(seconds), rpc], stdout=subprocess.PIPE, env=env)
                 for i in range(streams)]
        latencies: list[float] = []
        for p in procs:
            out, _ = p.communicate(timeout=seconds + 600)
            if p.returncode:
                raise RuntimeError(f"an inference client exited with {p.returncode}")
            latencies.extend(json.loads(out))
    finally:
        os.unlink(f.name)
    return latencies, seconds


STAGES = ("inputs", "batch", "network", "reply")


def endpoint_counters() -> dict:
    """The endpoint's own histograms (this process's registry): per stage and for batch sizes, sum and count; and its
    batches replayed as CUDA graphs."""
    get = REGISTRY.get_sample_value
    out = {s: (get("phylorl_inference_stage_seconds_sum", {"stage": s}) or 0.0,
               get("phylorl_inference_stage_seconds_count", {"stage": s}) or 0.0) for s in STAGES}
    out["batch_size"] = (get("phylorl_inference_batch_size_sum") or 0.0,
                         get("phylorl_inference_batch_size_count") or 0.0)
    out["graph_replays"] = get("phylorl_inference_batches_total", {"path": "graph"}) or 0.0
    return out


def endpoint_summary(before: dict, after: dict) -> dict:
    """Mean time per stage of the endpoint's work (ms) and mean batch between two :func:`endpoint_counters`."""
    mean = {k: (after[k][0] - before[k][0]) / max(after[k][1] - before[k][1], 1.0) for k in (*STAGES, "batch_size")}
    return {"stage_mean_ms": {s: round(1e3 * mean[s], 3) for s in STAGES},
            "mean_batch": round(mean["batch_size"], 2),
            "batches": int(after["batch_size"][1] - before["batch_size"][1]),
            "graph_replays": int(after["graph_replays"] - before["graph_replays"])}


def publish_costs(net_cfg, device, learner, fused_head: bool, times: int = 20) -> dict:
    """Milliseconds of ``publish(learner.policy_tensors())`` as the learner's training loop calls it (``first_ms``
    builds the networks; ``median_ms`` writes retired ones again), and (``copies_median_ms``) of publishing copies
    made first (``policy_weights``: ~170 torch calls, as the training loop did before session 18)."""
    inference = BatchingInference(net_cfg, device, max_batch=8, max_delay_s=0.002, max_queue=8, fused_head=fused_head)
    try:
        inference.publish(learner.policy_tensors(), learner.alpha, 0)  # the fused kernel's warm-up
        spent, copies = [], []
        for version in range(1, times + 2):
            start = time.perf_counter()
            inference.publish(learner.policy_tensors(), learner.alpha, version)
            spent.append(time.perf_counter() - start)
        for version in range(times + 2, 2 * times + 2):
            start = time.perf_counter()
            inference.publish(learner.policy_weights(device), learner.alpha, version)
            copies.append(time.perf_counter() - start)
    finally:
        inference.close()
    return {"first_ms": round(spent[0] * 1e3, 2), "median_ms": round(statistics.median(spent[1:]) * 1e3, 2),
            "copies_median_ms": round(statistics.median(copies) * 1e3, 2)}


def assembly_costs(observations: list, times: int = 30) -> dict:
    """Milliseconds (median) to make one batch of the endpoint (7 requests of 4 states, padded to 32) with
    :func:`assemble`, alone and with two busy threads in the process (Python loops with a tensor operation each
    round, as the learner's loop and feed threads)."""
    from phylorl.agent.batch_transfer import Stager
    from phylorl.agent.request_batch import assemble
    from phylorl.wire.codec import PackedRecords
    from phylorl.wire.record import encode_observation

    parts = [collate_states(PackedRecords.from_records([encode_observation(o) for o in observations[i:i + 4]]))[:2]
             for i in range(0, 28, 4)]
    stager = Stager()
    ways = {"assemble": lambda: assemble(parts, 32, stager)}

    def timed() -> dict:
        out = {}
        for name, way in ways.items():
            way()
            spent = []
            for _ in range(times):
                start = time.perf_counter()
                way()
                spent.append(time.perf_counter() - start)
            out[name] = round(statistics.median(spent) * 1e3, 3)
        return out

    alone = timed()
    stop = threading.Event()

    def busy() -> None:
        x = 0
        while not stop.is_set():
            for i in range(1000):
                x += i
            torch.zeros(10).add_(1)

    threads = [threading.Thread(target=busy, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        contended = timed()
    finally:
        stop.set()
        for t in threads:
            t.join()
    return {"batch": "7 requests x 4 states, 20 taxa, padded to 32", "alone_ms": alone,
            "two_busy_threads_ms": contended}


def run(streams: int, max_batch: int, seconds: float, net_cfg, device, learner, reqs,
        fused_head: bool = False, clients: str = "processes", server_kind: str = "threads",
        cuda_graphs: bool = False, publish_every_s: float = 0.0, rpc: str = "stream") -> dict:
    before = endpoint_counters()
    result = _run(streams, max_batch, seconds, net_cfg, device, learner, reqs, fused_head, clients, server_kind,
                  cuda_graphs, publish_every_s, rpc)
    return {**result, "endpoint": endpoint_summary(before, endpoint_counters())}


def publisher(inference, learner, every_s: float, stop: threading.Event, spent: list) -> threading.Thread:
    """A thread publishing ``learner``'s weights every ``every_s`` until ``stop``, as the training loop does while
    the endpoint serves; each publication's seconds go to ``spent``."""
    def body() -> None:
        version = 2
        while not stop.wait(every_s):
            started = time.perf_counter()
            inference.publish(learner.policy_tensors(), learner.alpha, version)
            spent.append(time.perf_counter() - started)
            version += 1
    thread = threading.Thread(target=body, name="publisher", daemon=True)
    thread.start()
    return thread


def _run(streams: int, max_batch: int, seconds: float, net_cfg, device, learner, reqs,
         fused_head: bool = False, clients: str = "processes", server_kind: str = "threads",
         cuda_graphs: bool = False, publish_every_s: float = 0.0, rpc: str = "stream") -> dict:
    inference = BatchingInference(net_cfg, device, max_batch=max_batch, max_delay_s=0.002, max_queue=1024,
                                  fused_head=fused_head, cuda_graphs=cuda_graphs)
    inference.publish(learner.policy_tensors(), learner.alpha, 1)
    server = make_server(server_kind, inference, "127.0.0.1", 0, max_calls=max(16, 2 * streams))
    server.start()
    server.set_serving()
    if clients == "processes":
        stop, spent = threading.Event(), []
        thread = publisher(inference, learner, publish_every_s, stop, spent) if publish_every_s else None
        cpu = time.process_time()
        latencies, elapsed = client_processes(server.port, streams, seconds, reqs, rpc)
        cpu = time.process_time() - cpu
        stop.set()
        if thread is not None:
            thread.join()
        server.stop(1.0)
        inference.close()
        out = summary(latencies, elapsed)
        # the endpoint's process (its every thread) per request, the clients' start-up and warm-up included
        out["endpoint_cpu_us_per_request"] = round(cpu / max(len(latencies), 1) * 1e6, 1)
        if spent:  # (including the clients' start-up and warm-up, when the endpoint is mostly idle)
            ms = np.array(spent) * 1e3
            out["publish_under_load_ms"] = {"median": round(float(np.median(ms)), 2),
                                            "p90": round(float(np.percentile(ms, 90)), 2), "count": len(spent)}
        return out
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def stream(i: int) -> None:
        channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
        stub = inference_pb2_grpc.InferenceServiceStub(channel)
        calls = group_calls(rpc, stub, timeout_s=120)
        mine = []
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            calls.send(reqs[i % len(reqs)])
            calls.receive()
            mine.append(time.perf_counter() - t0)
        calls.close()
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
    return summary(latencies, elapsed)


def summary(latencies: list[float], elapsed: float) -> dict:
    lat = np.array(latencies) * 1e3
    return {"requests_per_s": round(len(latencies) / elapsed, 1), "p50_ms": round(float(np.percentile(lat, 50)), 2),
            "p99_ms": round(float(np.percentile(lat, 99)), 2), "requests": len(latencies)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--features", choices=("rich", "basic"), default="rich",
                        help="rich: the environment's states (the shipped agent's); basic: random trees")
    parser.add_argument("--fused-head", action="store_true", help="answer with the fused Triton head (CUDA)")
    parser.add_argument("--cuda-graphs", action="store_true",
                        help="the endpoint replays its answers as CUDA graphs "
                             "(CUDA; LearnerConfig.inference_cuda_graphs)")
    parser.add_argument("--tf32", action="store_true", help="float32 products use TF32 (CUDA)")
    parser.add_argument("--clients", choices=("processes", "threads"), default="processes",
                        help="run the actor streams as processes (as actors are) or as threads of this process")
    parser.add_argument("--server", choices=SERVER_KINDS, default="threads",
                        help="the endpoint's gRPC server (LearnerConfig.inference_server)")
    parser.add_argument("--streams", default="1,8,64", help="comma-separated numbers of concurrent streams")
    parser.add_argument("--rpc", choices=INFERENCE_RPCS, default=ActorConfig.inference_rpc,
                        help="each stream's calls: messages of one open ActStream (as actors send them by default) "
                             "or unary Act calls (ActorConfig.inference_rpc)")
    parser.add_argument("--switch-interval-ms", type=float, default=LearnerConfig.switch_interval_ms,
                        help="the interpreter's switch interval in this process, as the learner sets it "
                             "(LearnerConfig.switch_interval_ms; 0: automatic, by the device)")
    parser.add_argument("--publish-every-ms", type=float, default=100.0,
                        help="a publication every this many ms while the streams run (process clients; 0: none)")
    parser.add_argument("--malloc-keep-mb", type=int, default=LearnerConfig.malloc_keep_mb,
                        help="allocator tuning of this process, as the learner's (LearnerConfig.malloc_keep_mb; "
                             "0: glibc defaults, every large batch array paged in afresh)")
    args = parser.parse_args()
    keep_freed_memory(args.malloc_keep_mb)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sys.setswitchinterval(switch_interval_ms(args.switch_interval_ms, device.type) / 1000.0)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    net_cfg = NetworkConfig.for_features(args.features, hidden=args.hidden, action_hidden=args.hidden,
                                         head_hidden=args.hidden)
    learner = Learner(net_cfg, device=device, seed=0)
    observations = states(64, args.features, seed=0)
    graphs = args.cuda_graphs and device.type == "cuda"
    reqs = requests(observations)
    result = {"bench": "inference", "machine": machine(), "device": str(device), "hidden": args.hidden,
              "malloc_keep_mb": args.malloc_keep_mb, "features": args.features, "n_taxa": 20,
              "moves_per_observation": 1122,
              "seconds_per_setting": args.seconds, "torch_threads": torch.get_num_threads(),
              "fused_head": args.fused_head and device.type == "cuda", "tf32": args.tf32 and device.type == "cuda",
              "clients": args.clients, "server": args.server, "rpc": args.rpc, "cuda_graphs": graphs,
              "switch_interval_ms": round(sys.getswitchinterval() * 1e3, 3), "publish_every_ms": args.publish_every_ms,
              "wire": wire_costs(observations),
              "publish": publish_costs(net_cfg, device, learner, args.fused_head and device.type == "cuda"),
              "assembly": assembly_costs(observations)}
    for streams in map(int, args.streams.split(",")):
        batched = run(streams, 64, args.seconds, net_cfg, device, learner, reqs, args.fused_head,
                      args.clients, args.server, graphs, args.publish_every_ms / 1e3, args.rpc)
        single = run(streams, 1, args.seconds, net_cfg, device, learner, reqs, args.fused_head,
                     args.clients, args.server, graphs, args.publish_every_ms / 1e3, args.rpc)
        result[f"streams_{streams}"] = {"batched": batched, "batch_size_1": single,
                                        "batching_gain": round(batched["requests_per_s"] /
                                                               max(single["requests_per_s"], 1e-9), 2)}
    emit(result)


if __name__ == "__main__":
    main()
