"""Replay service throughput: inserts/s and sampled transitions/s over gRPC, Redis on loopback.

Starts a private ``redis-server`` (AOF on, as deployed) and ``python -m services.replay`` as a separate
process, then drives it from this process with batches of real 20-taxon transitions (38 nodes, 74 directed
edges, 1122 moves: random walks of the environment as actors record them):

* ``insert_per_s``: transitions/s of Insert calls carrying already-encoded records (actors encode before
  sending, so encoding is not the service's cost);
* ``sample_per_s``: transitions/s of Sample calls, records received but not decoded (served from the service's
  record cache);
* ``sample_to_batch_per_s``: sampled records (as a Sample call returns them) made into the learner's batch
  tensors by the compiled pass (:func:`phylorl.records.collate.collate_records`, next moves in compact form:
  what the learner copies to its device), one thread; ``sample_to_batch_ms`` per batch;
  ``sample_to_batch_<N>_threads_per_s`` with ``--batch-threads`` threads (the learner's prefetch workers);
  ``sample_to_batch_host_expanded_per_s``: the same with every next move's node ids and features then written
  on the host (a CPU learner's batch: :func:`phylorl.records.collate.expand_on_host`); with a CUDA device also
  ``sample_to_device_per_s`` (compact, packed into one pinned block, copied as one transfer and expanded on
  the GPU, as the learner's prefetcher does: :func:`phylorl.agent.transfer.on_device` with a ``Stager``),
  ``sample_to_device_per_tensor_per_s`` (each tensor pinned and copied on its own) and
  ``sample_to_device_host_expanded_per_s`` (every move written on the host, then copied);
* ``encode_us``: one transition through :mod:`phylorl.records.codec`, on one core;
* ``cpu_us_per_insert`` / ``cpu_us_per_sample``: CPU time (user + system) the replay service, Redis and this
  client spent per transition: on a shared or small machine the throughput is bounded by the cores left, and
  these show where time goes.

Throughput is measured for each entry of ``--clients`` (concurrent client threads, each with its own channel,
as several actors or learner prefetch streams would be): ``by_clients`` holds the figures per count. Each
figure is the median over ``--repeats`` runs. Prints one JSON line on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import redis
from common import (
    REPO,
    child_env,
    cpu_model,
    cpu_seconds,
    emit,
    episode_transitions,
    log,
    median_seconds,
    seconds,
)

from phylorl.records.codec import encode_transition
from services.common.memory import KEEP_MB, keep_freed_memory
from services.launcher.supervisor import free_port
from services.replay.client import ReplayClient


def per_item_us(fn, items, repeats: int) -> float:
    def each() -> None:
        for item in items:
            fn(item)

    return median_seconds(each, repeats, warmup=0) / len(items) * 1e6


def wait_for_redis(port: int) -> None:
    client = redis.Redis(port=port)
    for _ in range(200):
        try:
            if client.ping():
                return
        except redis.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


def cpu_metered(pids: dict[str, int], items: int, work) -> tuple[float, dict[str, float]]:
    """``work()``'s value and the CPU microseconds per item each of the processes ``pids`` spent meanwhile."""
    start = {name: cpu_seconds(pid) for name, pid in pids.items()}
    value = work()
    return value, {name: (cpu_seconds(pid) - start[name]) / items * 1e6 for name, pid in pids.items()}


def run_clients(target: str, clients: int, work) -> float:
    """Run ``work(client)`` in ``clients`` threads at once; returns the items handled per second."""
    handles = [ReplayClient(target) for _ in range(clients)]
    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        counts = list(pool.map(work, handles))
    elapsed = time.perf_counter() - start
    for h in handles:
        h.close()
    return sum(counts) / elapsed


def batch_rates(batches: list, repeats: int, threads: int) -> dict:
    """Sampled batches -> learner batches (CPU tensors) per second: the compiled pass (``collate_records``,
    next moves compact) with one thread and with ``threads`` threads, and the same with the next moves then
    expanded on the host; with a CUDA device, on to the GPU three ways."""
    from phylorl.records.collate import collate_records, expand_on_host

    def expanded(packed):
        batch = collate_records(packed)[0]
        return dataclasses.replace(batch, next_actions=expand_on_host(batch.next_actions))

    for packed in batches[:2]:  # warm-up
        expanded(packed)
    items = len(batches) * len(batches[0])

    def each(fn):  # one pass of ``fn`` over every batch
        def run_pass() -> None:
            for packed in batches:
                fn(packed)

        return run_pass

    def rate(run_pass, device=None) -> float:  # items per second
        return items / seconds(run_pass, device)

    runs = {"fast": [], "host_expanded": [], "parallel": []}
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(repeats):
            runs["fast"].append(rate(each(collate_records)))
            runs["host_expanded"].append(rate(each(expanded)))
            runs["parallel"].append(rate(lambda: list(pool.map(collate_records, batches))))
    fast = statistics.median(runs["fast"])
    out = {
        "sample_to_batch_per_s": round(fast),
        "sample_to_batch_ms": round(len(batches[0]) / fast * 1e3, 2),
        f"sample_to_batch_{threads}_threads_per_s": round(statistics.median(runs["parallel"])),
        "sample_to_batch_host_expanded_per_s": round(statistics.median(runs["host_expanded"])),
    }
    import torch

    if torch.cuda.is_available():  # on to the GPU as the prefetcher does: pinned, copied, expanded there
        from phylorl.agent.transfer import Stager, on_device

        stager = Stager(pinned=True)

        def staged(packed):  # as a prefetch thread: its block copied before its buffer is written again
            batch = on_device(collate_records(packed)[0], "cuda", stager=stager)
            torch.cuda.current_stream().synchronize()
            return batch

        paths = {
            "sample_to_device_per_s": staged,
            "sample_to_device_per_tensor_per_s": lambda p: on_device(
                collate_records(p)[0], "cuda", pin_memory=True
            ),
            "sample_to_device_host_expanded_per_s": lambda p: on_device(expanded(p), "cuda", pin_memory=True),
        }
        for name, path in paths.items():
            out[name] = round(statistics.median(rate(each(path), "cuda") for _ in range(repeats)))
        out["gpu"] = torch.cuda.get_device_name()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", type=int, default=40, help="calls per client per run")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument(
        "--clients", default="1,2,4", help="comma-separated counts of concurrent client threads"
    )
    parser.add_argument("--taxa", type=int, default=20)
    parser.add_argument("--pool", type=int, default=256, help="distinct transitions to cycle through")
    parser.add_argument("--capacity", type=int, default=100_000)
    parser.add_argument(
        "--batch-threads",
        type=int,
        default=2,
        help="threads of the parallel sample_to_batch figure (the learner's prefetch_workers)",
    )
    args = parser.parse_args()
    keep_freed_memory()  # as a learner process does (the service does the same)

    log(f"building {args.pool} transitions of {args.taxa} taxa")
    transitions, source = episode_transitions(args.pool, args.taxa, seed=0)
    records = [encode_transition(t) for t in transitions]
    encode_us = per_item_us(encode_transition, transitions[:64], args.repeats)

    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server not found")
    workdir = Path(tempfile.mkdtemp(prefix="bench_replay_"))
    redis_port, grpc_port = free_port(), free_port()
    redis_command = [binary, "--port", str(redis_port), "--bind", "127.0.0.1", "--dir", str(workdir)]
    redis_command += ["--save", "", "--appendonly", "yes"]
    processes = [subprocess.Popen(redis_command, stdout=subprocess.DEVNULL)]
    command = [sys.executable, "-m", "services.replay", "--host", "127.0.0.1", "--metrics-port", "0"]
    command += ["--port", str(grpc_port), "--capacity", str(args.capacity), "--min-size-to-sample", "1"]
    command += ["--redis-url", f"redis://127.0.0.1:{redis_port}/0", "--key-prefix", "bench"]
    command += ["--log-level", "WARNING"]
    try:
        wait_for_redis(redis_port)
        processes.append(subprocess.Popen(command, cwd=REPO, env=child_env()))
        target = f"127.0.0.1:{grpc_port}"
        with ReplayClient(target) as client:
            client.wait_until_serving(timeout_s=60)
        step = args.batch_size
        batches = [records[i : i + step] for i in range(0, len(records) - step + 1, step)]
        priorities = np.random.default_rng(1).exponential(size=args.batch_size)

        def insert_work(client):
            for i in range(args.batches):
                client.insert_records(batches[i % len(batches)], priorities, timeout_s=30)
            return args.batches * args.batch_size

        def sample_work(client):
            for _ in range(args.batches):
                client.sample(args.batch_size, timeout_s=30)
            return args.batches * args.batch_size

        pids = {"replay": processes[1].pid, "redis": processes[0].pid, "client": os.getpid()}
        per_process = lambda runs: {k: round(statistics.median(run[k] for run in runs), 1) for k in pids}  # noqa: E731
        by_clients = {}
        for clients in [int(c) for c in args.clients.split(",")]:
            items = clients * args.batches * args.batch_size
            insert_runs, sample_runs, insert_cpu, sample_cpu = [], [], [], []
            for r in range(args.repeats):
                for runs, cpu, work in (
                    (insert_runs, insert_cpu, insert_work),
                    (sample_runs, sample_cpu, sample_work),
                ):
                    rate, spent_us = cpu_metered(pids, items, lambda: run_clients(target, clients, work))
                    runs.append(rate)
                    cpu.append(spent_us)
                log(
                    f"{clients} client(s), run {r + 1}/{args.repeats}: insert {insert_runs[-1]:,.0f}/s, "
                    f"sample {sample_runs[-1]:,.0f}/s"
                )
            by_clients[str(clients)] = {
                "insert_per_s": round(statistics.median(insert_runs)),
                "sample_per_s": round(statistics.median(sample_runs)),
                "cpu_us_per_insert": per_process(insert_cpu),
                "cpu_us_per_sample": per_process(sample_cpu),
            }
        with ReplayClient(target) as client:
            size = client.stats().size
            sampled = [client.sample(args.batch_size, timeout_s=30).records for _ in range(args.batches)]
        log("sampled batches -> learner batches")
        to_batch = batch_rates(sampled, args.repeats, args.batch_threads)
        used = redis.Redis(port=redis_port).info("memory")["used_memory"]
    finally:
        for p in reversed(processes):
            p.terminate()
            p.wait(timeout=30)
        shutil.rmtree(workdir, ignore_errors=True)

    emit(
        {
            "benchmark": "replay",
            "machine": f"{platform.node()}: {cpu_model(numbers=False)}, {os.cpu_count()} cores",
            "transitions": source,
            "n_taxa": args.taxa,
            "n_moves": int(transitions[0].obs.n_actions),
            "record_bytes": int(np.median([len(r) for r in records])),
            "encode_us": round(encode_us, 1),
            "batch_size": args.batch_size,
            "repeats": args.repeats,
            "malloc_keep_mb": KEEP_MB,
            "by_clients": by_clients,
            **to_batch,
            "batch_threads": args.batch_threads,
            "load_average": os.getloadavg()[0],
            "table_size": size,
            "redis_used_bytes_per_transition": round(used / max(size, 1)),
        }
    )


if __name__ == "__main__":
    main()
